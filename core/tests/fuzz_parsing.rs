//! Property tests of everything zklock parses or validates from outside: lock paths, connect
//! strings, client options, TLS keys and passwords, owner labels, lock identifiers, and the names
//! and data of lock nodes as a real server lists them, and every reply a server (or anyone in the
//! middle) could send, decoded by the vendored client. Whatever the input: no panic, and either
//! success or `InvalidArgument` with a message naming what was wrong; valid input is accepted,
//! and what has a round trip (labels, identifiers, node names and data) comes back unchanged.
//!
//! Cases per property: `PROPTEST_CASES` (default 256; the properties that talk to the server run
//! an eighth as many). `PROPTEST_RNG_SEED` replays a run (scripts/fuzz sets both). The server is
//! the test kit's (or `ZK_CONNECT`), as for the other core tests.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::Config;
use zklock::{Client, ClientOptions, ErrorKind, LockOptions, Mode, Owner};
use zookeeper_client as zk;

/// Cases of a property that only computes.
fn config() -> Config {
    Config { failure_persistence: None, ..Config::default() }
}

/// Cases of a property that makes requests to the server: fewer, each costs round trips.
fn server_config() -> Config {
    let base = config();
    Config { cases: (base.cases / 8).max(8), ..base }
}

/// Curator's (and zklock's) markers, then kazoo's.
const MARKERS: [(&str, Mode); 5] = [
    ("__READ__", Mode::Read),
    ("__WRIT__", Mode::Write),
    ("lock-", Mode::Exclusive),
    ("__rlock__", Mode::Read),
    ("__lock__", Mode::Exclusive),
];

// ------------------------------------------------------------------ generators

/// A path segment ZooKeeper accepts: no '/', no control or private-use characters, not `.`/`..`.
fn segment() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.:@ -]{1,12}|[a-z]{0,4}[ü€日本\u{d7f0}-\u{d7ff}\u{f900}-\u{f910}]{1,3}"
        .prop_filter("not . or ..", |s| s != "." && s != "..")
}

fn valid_path() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 1..6)
        .prop_map(|segments| format!("/{}", segments.join("/")))
        .prop_filter("not under /zookeeper", |p| p != "/zookeeper" && !p.starts_with("/zookeeper/"))
}

/// A character ZooKeeper refuses in a path (PathUtils.validatePath).
fn invalid_char() -> impl Strategy<Value = char> {
    prop_oneof![
        (0u32..=0x1f).prop_map(|c| char::from_u32(c).unwrap()),
        (0x7fu32..=0x9f).prop_map(|c| char::from_u32(c).unwrap()),
        (0xe000u32..=0xf8ff).prop_map(|c| char::from_u32(c).unwrap()),
        (0xfff0u32..=0xffff).prop_map(|c| char::from_u32(c).unwrap()),
        // Past the Basic Multilingual Plane: a surrogate pair in ZooKeeper's UTF-16.
        (0x10000u32..=0x10ffff).prop_map(|c| char::from_u32(c).unwrap()),
    ]
}

/// One way to spoil a valid path, with the words the error must contain.
#[derive(Clone, Debug)]
enum Spoil {
    Relative,
    TrailingSlash,
    EmptySegment(usize),
    DotSegment(usize, &'static str),
    BadChar(usize, char),
    Reserved,
}

fn spoiled_path() -> impl Strategy<Value = (String, String)> {
    let spoil = prop_oneof![
        Just(Spoil::Relative),
        Just(Spoil::TrailingSlash),
        any::<usize>().prop_map(Spoil::EmptySegment),
        (any::<usize>(), prop_oneof![Just("."), Just("..")]).prop_map(|(at, dots)| Spoil::DotSegment(at, dots)),
        (any::<usize>(), invalid_char()).prop_map(|(at, c)| Spoil::BadChar(at, c)),
        Just(Spoil::Reserved),
    ];
    (valid_path(), spoil).prop_map(|(path, spoil)| {
        let slashes: Vec<usize> = path.match_indices('/').map(|(i, _)| i).collect();
        match spoil {
            Spoil::Relative => (path[1..].to_owned(), "is relative".to_owned()),
            Spoil::TrailingSlash => (format!("{path}/"), "ends with '/'".to_owned()),
            Spoil::EmptySegment(at) => {
                let i = slashes[at % slashes.len()];
                (format!("{}/{}", &path[..i], &path[i..]), "empty segment".to_owned())
            }
            Spoil::DotSegment(at, dots) => {
                let i = slashes[at % slashes.len()];
                (format!("{}/{dots}{}", &path[..i], &path[i..]), "relative segment".to_owned())
            }
            Spoil::BadChar(at, c) => {
                let boundaries: Vec<usize> = path.char_indices().map(|(i, _)| i).skip(1).chain([path.len()]).collect();
                let i = boundaries[at % boundaries.len()];
                (format!("{}{c}{}", &path[..i], &path[i..]), format!("U+{:04X}", c as u32))
            }
            Spoil::Reserved => (format!("/zookeeper{path}"), "under /zookeeper".to_owned()),
        }
    })
}

/// Strings of every kind, favouring the characters paths and connect strings are made of.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[/.:,\\[\\] a-z0-9\u{0}-\u{1f}\u{7f}-\u{a0}\u{e000}\u{fff0}-\u{ffff}ü]{0,40}",
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z][a-z0-9-]{0,10}){0,3}",
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
        "[0-9a-f]{1,4}(:[0-9a-f]{1,4}){1,7}|::1".prop_map(|v6| format!("[{v6}]")),
    ]
}

fn address() -> impl Strategy<Value = String> {
    (host(), prop::option::of(1u16..=u16::MAX)).prop_map(|(host, port)| match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

fn valid_connect() -> impl Strategy<Value = String> {
    (prop::collection::vec(address(), 1..4), prop::option::of(valid_path()))
        .prop_map(|(hosts, chroot)| format!("{}{}", hosts.join(","), chroot.unwrap_or_default()))
}

// ------------------------------------------------------------------ checks

/// A refusal of bad input: InvalidArgument, with a message containing `names`.
fn assert_invalid(err: &zklock::Error, names: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}", err);
    prop_assert!(err.message().contains(names), "{:?} should name {:?}", err.message(), names);
    Ok(())
}

/// Connects outside any tokio runtime, so a connect string and options that pass every check
/// end at the last one ("inside a tokio runtime") without any network traffic.
fn connect_offline(connect: &str, options: ClientOptions) -> zklock::Error {
    match futures::executor::block_on(Client::connect_with(connect, options)) {
        Ok(_) => panic!("{connect:?} connected outside a tokio runtime"),
        Err(err) => err,
    }
}

const PASSED_EVERY_CHECK: &str = "inside a tokio runtime";

fn reasons_for_paths() -> [&'static str; 8] {
    [
        "is empty",
        "is relative",
        "is the root",
        "ends with '/'",
        "empty segment",
        "relative segment",
        "invalid character U+",
        "under /zookeeper",
    ]
}

// ------------------------------------------------------------------ lock paths

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_lock_paths_are_accepted(path in valid_path()) {
        zklock::check_lock_path(&path).map_err(|err| TestCaseError::fail(format!("{path:?}: {err}")))?;
    }

    #[test]
    fn spoiled_lock_paths_are_refused_naming_why((path, why) in spoiled_path()) {
        let err = zklock::check_lock_path(&path).expect_err("a spoiled path was accepted");
        assert_invalid(&err, &why)?;
        prop_assert!(err.message().contains(&format!("{path:?}")), "{:?} should quote the path", err.message());
    }

    #[test]
    fn any_lock_path_is_accepted_or_refused_naming_why(path in any_text()) {
        match zklock::check_lock_path(&path) {
            Ok(()) => {
                // What is accepted has the form every check stands for.
                prop_assert!(path.starts_with('/') && path.len() > 1 && !path.ends_with('/') && !path.contains("//"));
                prop_assert!(!path.split('/').any(|s| s == "." || s == ".."));
                prop_assert!(path != "/zookeeper" && !path.starts_with("/zookeeper/"));
            }
            Err(err) => {
                prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument);
                prop_assert!(err.message().starts_with("lock path"), "{:?}", err.message());
                prop_assert!(reasons_for_paths().iter().any(|why| err.message().contains(why)), "{:?}", err.message());
                if !path.is_empty() {
                    prop_assert!(err.message().contains(&format!("{path:?}")), "{:?}", err.message());
                }
            }
        }
    }

    // ------------------------------------------------------------ connect strings and options

    #[test]
    fn valid_connect_strings_pass_every_check(connect in valid_connect()) {
        assert_invalid(&connect_offline(&connect, ClientOptions::default()), PASSED_EVERY_CHECK)?;
    }

    #[test]
    fn spoiled_connect_strings_are_refused_naming_why(
        hosts in prop::collection::vec(address(), 1..3),
        spoil in 0..8usize,
        port in prop_oneof![Just(0u32), 65536u32..10_000_000],
        junk in "[a-z+ -]{1,5}",
        (bad_chroot, _) in spoiled_path(),
    ) {
        let hosts = hosts.join(",");
        let (connect, why) = match spoil {
            0 => (format!("{hosts},"), "bad host"),
            1 => (format!("{hosts},h1:{port}"), "bad port"),
            2 => (format!("{hosts},h1:{junk}"), "bad port"),
            3 => (format!("{hosts},h {junk}:2181"), "bad host"),
            4 => (format!("{hosts},[::1:2181"), "bad address"),
            5 => (format!("{hosts}/zookeeper"), "under /zookeeper"),
            // The client splits at every ',', even after the '/' (found by scripts/fuzz).
            6 => (format!("{hosts}/app,{junk}"), "bad chroot"),
            // A spoiled path made relative is a host's port; made absolute, a bad chroot.
            _ if bad_chroot.starts_with('/') && bad_chroot != "/zookeeper" && !bad_chroot.starts_with("/zookeeper/") => {
                (format!("{hosts}{bad_chroot}"), "bad chroot")
            }
            _ => (format!("/{hosts}"), "names no host"),
        };
        let err = connect_offline(&connect, ClientOptions::default());
        assert_invalid(&err, why)?;
        prop_assert!(err.message().contains(&format!("connect string {connect:?}")), "{:?}", err.message());
    }

    #[test]
    fn any_connect_string_is_checked_without_traffic(connect in prop_oneof![any_text(), valid_connect()]) {
        let err = connect_offline(&connect, ClientOptions::default());
        prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}", err);
        prop_assert!(
            err.message().starts_with("connect string") || err.message().contains(PASSED_EVERY_CHECK),
            "{:?}", err.message()
        );
    }

    #[test]
    fn options_are_checked_naming_the_bad_one(
        session_ms in prop_oneof![Just(0u64), 1u64..100_000, (i32::MAX as u64 - 2)..(i32::MAX as u64 + 2), any::<u64>()],
        connect_ms in prop_oneof![Just(0u64), 1u64..100_000, any::<u64>()],
        jute in prop_oneof![0u32..2048, any::<u32>()],
        digest in prop::option::of(prop_oneof![any_text(), "[a-z]{0,8}:[a-z:]{0,8}"]),
    ) {
        let options = ClientOptions {
            session_timeout: Duration::from_millis(session_ms),
            connect_timeout: Duration::from_millis(connect_ms),
            jute_maxbuffer: jute,
            digest_auth: digest.clone(),
            ..Default::default()
        };
        let bad = [
            (session_ms == 0, "session timeout must be greater than zero"),
            (session_ms > i32::MAX as u64, "session timeout of"),
            (connect_ms == 0, "connect timeout must be greater than zero"),
            (jute < 1024, "jute_maxbuffer of"),
            (digest.as_ref().is_some_and(|d| !d.contains(':')), "\"user:password\""),
        ];
        let err = connect_offline("127.0.0.1:1", options);
        prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}", err);
        if bad.iter().any(|(is_bad, _)| *is_bad) {
            prop_assert!(bad.iter().any(|(is_bad, names)| *is_bad && err.message().contains(names)), "{:?}", err.message());
        } else {
            prop_assert!(err.message().contains(PASSED_EVERY_CHECK), "{:?}", err.message());
        }
    }

    // ------------------------------------------------------------ owners and node names

    #[test]
    fn owner_labels_round_trip(id in any::<u64>(), label in any::<String>()) {
        prop_assert_eq!(Owner::new(id).label(), id.to_string());
        let owner = Owner::with_label(id, label.as_str());
        prop_assert_eq!(owner.label(), label);
        prop_assert_eq!(owner.id(), id);
    }

    #[test]
    fn only_ids_handed_out_are_unique_ids(id in any::<u64>()) {
        let fresh = Owner::unique();
        prop_assert!(Owner::is_unique_id(fresh.id()));
        prop_assert!(fresh.id() > 1 << 63);
        // Below 2^63 is the callers' range; above the last one handed out, nothing yet.
        prop_assert!(!Owner::is_unique_id(id.min(1 << 63)));
        prop_assert!(!Owner::is_unique_id(fresh.id().saturating_add((1 << 40) + id % (1 << 40))));
    }

    #[test]
    fn node_names_give_their_mode(
        uuid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        marker in 0..MARKERS.len(),
        sequence in any::<i32>(),
        stray in any_text(),
    ) {
        let (text, mode) = MARKERS[marker];
        prop_assert_eq!(Mode::of_node(&format!("_c_{uuid}-{text}{sequence:010}")), Some(mode));
        let found = Mode::of_node(&stray);
        let expected = MARKERS.iter().find(|(text, _)| stray.contains(text)).map(|(_, mode)| *mode);
        prop_assert_eq!(found, expected, "{:?}", stray);
    }
}

// ------------------------------------------------------------------ against the server

struct Server {
    runtime: tokio::runtime::Runtime,
    observer: zk::Client,
    client: Client,
    /// A client under a chroot, with a small packet limit. Making locks sends nothing, so the
    /// chroot node is removed once the session is established.
    chrooted: Client,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let connect = common::connect_string();
        let chroot = format!("/zklock-test/fuzz-chroot-{}", uuid::Uuid::new_v4().simple());
        let (observer, client, chrooted) = runtime.block_on(async {
            let observer = common::observer().await;
            observer
                .mkdir(&chroot, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
                .await
                .expect("make the chroot");
            let client = common::client().await;
            let options = ClientOptions { jute_maxbuffer: 1024, ..Default::default() };
            let chrooted =
                Client::connect_with(&format!("{connect}{chroot}"), options).await.expect("connect under the chroot");
            observer.delete(&chroot, None).await.expect("remove the chroot node");
            (observer, client, chrooted)
        });
        Server { runtime, observer, client, chrooted }
    })
}

/// Deletes `path` and its children (persistent nodes a property made).
async fn remove_tree(zk: &zk::Client, path: &str) {
    for child in common::children(zk, path).await {
        let _ = zk.delete(&format!("{path}/{child}"), None).await;
    }
    let _ = zk.delete(path, None).await;
}

/// A child name the server accepts, with no mode marker in it.
fn plain_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_:@ü日-]{1,16}"
        .prop_filter("no marker", |name| MARKERS.iter().all(|(text, _)| !name.contains(text)))
        .prop_filter("no marker made with the suffix", |name| !name.ends_with("lock") && !name.ends_with("lock-"))
}

/// A child name and the sequence zklock must read from it.
fn node_name() -> impl Strategy<Value = (String, Option<i64>)> {
    prop_oneof![
        // As ZooKeeper writes a sequence: "%010d".
        (plain_name(), 0..MARKERS.len(), any::<i32>()).prop_map(|(prefix, marker, sequence)| {
            (format!("{prefix}-{}{sequence:010}", MARKERS[marker].0), Some(i64::from(sequence)))
        }),
        // Too short to be the server's counter, or not a number.
        (plain_name(), 0..MARKERS.len(), "[0-9]{0,9}|[0-9]{3}[a-z+ ][0-9]{6}|\\+[0-9]{9}|[0-9]{11,14}").prop_map(
            |(prefix, marker, digits)| {
                let sequence = (digits.len() >= 10 && !digits.starts_with('+'))
                    .then(|| digits.parse::<i32>().ok().map(i64::from))
                    .flatten();
                (format!("{prefix}-{}{digits}", MARKERS[marker].0), sequence)
            }
        ),
        plain_name().prop_map(|name| (name, None)),
    ]
}

proptest! {
    #![proptest_config(server_config())]

    /// Under a chroot, a lock path is checked as without one, except that `/zookeeper` is a path
    /// like any other there; a path too long for the packet limit is refused naming the limit.
    #[test]
    fn lock_paths_under_a_chroot(path in prop_oneof![any_text(), valid_path(), spoiled_path().prop_map(|(p, _)| p)]) {
        let server = server();
        let plain = zklock::check_lock_path(&path);
        for result in [server.chrooted.lock(&path).map(|_| ()), server.chrooted.read_write_lock(&path).map(|_| ())] {
            match (&plain, result) {
                (_, Ok(())) => prop_assert!(
                    plain.is_ok() || path == "/zookeeper" || path.starts_with("/zookeeper/"),
                    "{:?} accepted under a chroot but not without", path
                ),
                (Ok(()), Err(err)) => {
                    assert_invalid(&err, "packet limit")?;
                    prop_assert!(err.message().contains(&format!("lock path of {} bytes", path.len())), "{}", err);
                }
                (Err(plain), Err(err)) => {
                    prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument);
                    prop_assert!(err.message() == plain.message() || err.message().contains("packet limit"), "{}", err);
                }
            }
        }
        // Short enough for any limit: only the form decides.
        if path.len() < 200 && !path.starts_with("/zookeeper") {
            prop_assert_eq!(server.client.lock(&path).is_ok(), plain.is_ok());
        }
    }

    /// Whatever names and data the children of a lock path have, the contenders come back with
    /// them unchanged, the sequence read from a "%010d" suffix only, the mode from the marker,
    /// and an identity only where the data is one.
    #[test]
    fn node_names_and_data_come_back_as_the_server_has_them(
        nodes in prop::collection::vec((node_name(), prop::collection::vec(any::<u8>(), 0..64)), 1..5),
    ) {
        let server = server();
        let path = common::unique_path("fuzz-names");
        server.runtime.block_on(async {
            let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            server.observer.mkdir(&path, &persistent).await.unwrap();
            let mut made = Vec::new();
            for ((name, sequence), data) in &nodes {
                match server.observer.create(&format!("{path}/{name}"), data, &persistent).await {
                    Ok(_) => made.push((name.clone(), *sequence, data.clone())),
                    Err(zk::Error::NodeExists) => {}
                    Err(err) => panic!("create {name:?}: {err}"),
                }
            }
            let lock = server.client.lock(&path).unwrap();
            let contenders = lock.contenders().await;
            remove_tree(&server.observer, &path).await;
            let contenders = contenders.map_err(|err| TestCaseError::fail(err.to_string()))?;
            prop_assert_eq!(contenders.len(), made.len());
            // kazoo's `__lock__` is its mutex and its write lock: a writer where the path holds
            // read/write nodes.
            let read_write = made.iter().any(|(name, ..)| matches!(Mode::of_node(name), Some(Mode::Read | Mode::Write)));
            for (name, sequence, data) in made {
                let found = contenders.iter().find(|p| p.node == name);
                prop_assert!(found.is_some(), "{:?} not among the contenders", name);
                let found = found.unwrap();
                prop_assert_eq!(found.sequence, sequence, "{:?}", name);
                let mode = match Mode::of_node(&name) {
                    Some(Mode::Exclusive) if read_write && name.contains("__lock__") => Some(Mode::Write),
                    mode => mode,
                };
                prop_assert_eq!(found.mode, mode);
                prop_assert_eq!(&found.data, &data);
                let identity: Option<zklock::Identity> = serde_json::from_slice(&data).ok();
                prop_assert_eq!(&found.identity, &identity);
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// An owner label and a lock identifier of any text are recorded in the node as given and
    /// read back unchanged; a label too large for the packet limit is refused before anything
    /// is sent.
    #[test]
    fn labels_and_identifiers_round_trip_through_the_server(
        label in prop_oneof![any::<String>(), "[\"\\\\{}\u{0}ü]{0,20}"],
        identifier in prop::option::of(any::<String>()),
        id in 0u64..(1 << 63),
    ) {
        let server = server();
        let path = common::unique_path("fuzz-labels");
        let options = LockOptions { identifier: identifier.clone(), ..Default::default() };
        let lock = server.client.lock_with(&path, options).unwrap();
        let owner = Owner::with_label(id, label.as_str());
        server.runtime.block_on(async {
            let guard = lock.try_acquire(&owner).await.map_err(|err| TestCaseError::fail(err.to_string()))?;
            let guard = guard.ok_or_else(|| TestCaseError::fail("a fresh path was held"))?;
            let contenders = lock.contenders().await;
            guard.release().await.map_err(|err| TestCaseError::fail(err.to_string()))?;
            let contenders = contenders.map_err(|err| TestCaseError::fail(err.to_string()))?;
            prop_assert_eq!(contenders.len(), 1);
            let identity = contenders[0].identity.clone();
            prop_assert!(identity.is_some(), "no identity in {:?}", contenders[0].data);
            let identity = identity.unwrap();
            prop_assert_eq!(&identity.owner, &label);
            prop_assert_eq!(&identity.identifier, &identifier);
            prop_assert_eq!(identity.lang, "rust");
            prop_assert_eq!(identity.pid, std::process::id());
            prop_assert!(common::children(&server.observer, &path).await.is_empty());
            Ok(())
        })?;
        // Over the chrooted client's 1 KiB limit: refused before anything is sent.
        let small = server.chrooted.lock("/fuzz-labels");
        let small = small.map_err(|err| TestCaseError::fail(err.to_string()))?;
        // Within zklock's 1,024-byte limit on labels, but over the packet limit with the rest.
        let pad = zklock::MAX_LABEL_BYTES.saturating_sub(label.len());
        let huge = Owner::with_label(id, label + &"x".repeat(pad));
        let err = server.runtime.block_on(small.try_acquire(&huge)).expect_err("a label over the packet limit");
        assert_invalid(&err, "packet limit")?;
        prop_assert!(err.message().contains("owner label of"), "{}", err);
    }

    /// Among children of any names (stray nodes of no lock, or of the other recipe), trying the
    /// lock ends in a hold, a refusal to queue behind others, or InvalidArgument naming the
    /// other recipe's node; never a panic, and no node of ours is left behind.
    #[test]
    fn trying_among_stray_children(names in prop::collection::vec(node_name().prop_map(|(name, _)| name), 0..4)) {
        let server = server();
        let path = common::unique_path("fuzz-strays");
        server.runtime.block_on(async {
            let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            server.observer.mkdir(&path, &persistent).await.unwrap();
            for name in &names {
                let _ = server.observer.create(&format!("{path}/{name}"), b"", &persistent).await;
            }
            let lock = server.client.lock(&path).unwrap();
            let owner = Owner::unique();
            let other_recipe: Vec<&String> =
                names.iter().filter(|name| matches!(Mode::of_node(name), Some(Mode::Read | Mode::Write))).collect();
            let result = lock.try_acquire(&owner).await;
            let outcome = match result {
                Ok(Some(guard)) => {
                    prop_assert!(other_recipe.is_empty());
                    guard.release().await.map_err(|err| TestCaseError::fail(err.to_string()))
                }
                Ok(None) => {
                    prop_assert!(other_recipe.is_empty() && !names.is_empty(), "held by no one");
                    Ok(())
                }
                Err(err) => {
                    assert_invalid(&err, "cannot use this path")?;
                    prop_assert!(other_recipe.iter().any(|name| err.message().contains(name.as_str())), "{}", err);
                    Ok(())
                }
            };
            let left = common::children(&server.observer, &path).await;
            remove_tree(&server.observer, &path).await;
            outcome?;
            let mut expected = names.clone();
            expected.sort();
            expected.dedup();
            let mut left = left;
            left.sort();
            prop_assert_eq!(left, expected, "only the strays are left");
            Ok::<(), TestCaseError>(())
        })?;
    }
}

// ------------------------------------------------------------------ TLS options

/// Armored random base64: what an encrypted key's PEM looks like, holding anything.
fn armored_key() -> impl Strategy<Value = String> {
    "[A-Za-z0-9+/=\n]{0,200}".prop_map(|body| {
        format!("-----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}\n-----END ENCRYPTED PRIVATE KEY-----\n")
    })
}

proptest! {
    // Decrypting a real key costs its key derivation: fewer cases.
    #![proptest_config(server_config())]

    /// A client key (random text, random armored PEM, or the test kit's encrypted key) with any
    /// password: `check` never panics, refuses with `InvalidArgument`, and its message quotes
    /// neither the password nor the key.
    #[test]
    fn tls_keys_and_passwords_are_refused_without_quoting_them(
        key in prop_oneof![2 => any_text(), 2 => armored_key(), 1 => Just(zklock_testkit::TlsCerts::get().alice_encrypted_key().0)],
        password in prop::option::of("[ -~]{8,24}"),
    ) {
        let (cert, _) = zklock_testkit::TlsCerts::get().client("alice");
        let mut tls = zklock::TlsOptions::without_verification();
        tls.client_cert_pem = Some(cert);
        tls.client_key_pem = Some(key.clone());
        tls.client_key_password = password.clone();
        prop_assume!(password.as_deref() != Some(zklock_testkit::TlsCerts::get().alice_encrypted_key().1.as_str()));
        let err = tls.check().expect_err("no usable key");
        prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}", err);
        let shown = format!("{err} {err:?} {tls:?}");
        if let Some(password) = &password {
            prop_assert!(!shown.contains(password.as_str()), "{}", shown);
        }
        let body = key.lines().find(|line| line.len() >= 16 && !line.starts_with("-----"));
        if let Some(body) = body {
            prop_assert!(!shown.contains(body), "{}", shown);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// What a server, or anyone in the middle of a plaintext connection, sends is decoded or
    /// refused without a panic, and without an allocation beyond the bytes that came: random
    /// bytes, and the same with a forged length or count (up to 2^31-1) planted anywhere.
    #[test]
    fn any_bytes_from_a_server_decode_or_fail_without_a_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        forged in any::<i32>(),
        at in 0usize..64,
    ) {
        zk::decode_server_bytes(&bytes);
        let mut planted = bytes.clone();
        let at = at.min(planted.len());
        planted.splice(at..at, forged.to_be_bytes());
        zk::decode_server_bytes(&planted);
        planted.splice(at..at, i32::MAX.to_be_bytes());
        zk::decode_server_bytes(&planted);
    }
}
