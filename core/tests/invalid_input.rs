//! Bad input is rejected before any network traffic, with an error naming what was wrong.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, Owner};
use zookeeper_client as zk;

fn assert_invalid(err: zklock::Error, names: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains(names), "{err:?} should name {names:?}");
}

/// Nothing listens on port 1 of loopback: if a check let these through to the network, they
/// would fail with a timeout or connection error instead of InvalidArgument.
#[tokio::test]
async fn malformed_connect_strings_fail_before_connecting() {
    let cases = [
        ("", "connect string is empty"),
        ("   ", "connect string is empty"),
        ("/app", "names no host"),
        ("127.0.0.1:1,", "bad host"),
        ("127.0.0.1:0", "bad port"),
        ("127.0.0.1:99999", "bad port"),
        ("127.0.0.1:http", "bad port"),
        ("127.0.0.1:1/app/", "bad chroot"),
        ("127.0.0.1:1/a//b", "bad chroot"),
        ("127.0.0.1:1/zookeeper", "under /zookeeper"),
        ("[::1:1", "bad address"),
    ];
    for (connect, names) in cases {
        let started = std::time::Instant::now();
        let err = Client::connect(connect).await.err().unwrap_or_else(|| panic!("{connect:?} accepted"));
        assert_invalid(err, names);
        assert!(started.elapsed() < Duration::from_millis(100), "{connect:?} must fail before any network traffic");
    }
}

#[tokio::test]
async fn zero_timeouts_and_bad_credentials_fail_before_connecting() {
    let zero_session = ClientOptions { session_timeout: Duration::ZERO, ..Default::default() };
    assert_invalid(Client::connect_with("127.0.0.1:1", zero_session).await.err().unwrap(), "session timeout");
    let zero_connect = ClientOptions { connect_timeout: Duration::ZERO, ..Default::default() };
    assert_invalid(Client::connect_with("127.0.0.1:1", zero_connect).await.err().unwrap(), "connect timeout");
    let bad_auth = ClientOptions { digest_auth: Some("alice".into()), ..Default::default() };
    assert_invalid(Client::connect_with("127.0.0.1:1", bad_auth).await.err().unwrap(), "user:password");
}

/// A packet limit too small for a lock request is refused before any traffic, naming the option
/// as the client's language spells it (Node's `juteMaxbuffer`, everyone else's `jute_maxbuffer`).
#[tokio::test]
async fn a_packet_limit_too_small_names_the_option_as_the_language_spells_it() {
    for (language, option) in
        [("node", "juteMaxbuffer"), ("python", "jute_maxbuffer"), ("c", "jute_maxbuffer"), ("rust", "jute_maxbuffer")]
    {
        let options = ClientOptions { jute_maxbuffer: 1023, language: language.into(), ..Default::default() };
        let err = Client::connect_with("127.0.0.1:1", options).await.err().unwrap();
        assert_invalid(err, &format!("{option} of 1023 bytes is too small"));
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_timeout_not_a_hang() {
    let options = ClientOptions { connect_timeout: Duration::from_millis(300), ..Default::default() };
    let err = Client::connect_with("127.0.0.1:1", options).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_lock_paths_are_rejected_without_traffic() {
    let connect = connect_string();
    let client = client().await;
    let session = client.session_id().unwrap();
    let before = packets_received(&connect, session);
    let cases = [
        ("", "lock path is empty"),
        ("locks/a", "is relative"),
        ("/", "is the root"),
        ("/locks/", "ends with '/'"),
        ("/locks//a", "empty segment"),
        ("/locks/./a", "relative segment"),
        ("/locks/..", "relative segment"),
        ("/locks/a\0", "U+0000"),
        ("/locks/\u{7f}", "U+007F"),
        ("/locks/\u{f000}", "U+F000"),
        ("/zookeeper", "under /zookeeper"),
        ("/zookeeper/config", "under /zookeeper"),
    ];
    for (path, names) in cases {
        let err = client.lock(path).err().unwrap_or_else(|| panic!("{path:?} accepted"));
        assert_invalid(err, names);
    }
    assert_eq!(packets_received(&connect, session), before, "no request reached the server");

    // Relative to a chroot (which must exist), "/zookeeper" is an ordinary name.
    let _ = observer()
        .await
        .mkdir(
            "/zklock-test",
            &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await;
    let chrooted = client_at(&format!("{connect}/zklock-test")).await;
    chrooted.lock("/zookeeper").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_cannot_acquire_twice_at_the_same_time() {
    let path = unique_path("twice");
    let (a, b) = (client().await, client().await);
    let held = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let lock = b.lock(&path).unwrap();
    let owner = Owner::new(2);
    let first = lock.acquire(&owner);
    let second = lock.acquire(&owner);
    tokio::pin!(first);
    assert!(futures::poll!(&mut first).is_pending());
    let err = second.await.unwrap_err();
    assert_invalid(err, "already acquiring");
    held.release().await.unwrap();
    first.await.unwrap().release().await.unwrap();
}

/// The lock path check refuses what the server refuses, no more, no less, at each edge of
/// ZooKeeper's ranges of invalid characters: the server checks UTF-16 units, so a character past
/// U+FFFF (a surrogate pair) is refused there, and must be here, before any traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_characters_are_refused_exactly_as_the_server_refuses_them() {
    let zk = observer().await;
    let base = unique_path("path-characters");
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    zk.create(&base, b"", &persistent).await.unwrap();
    let edges = [
        '\u{1f}',
        '\u{20}',
        '\u{7e}',
        '\u{7f}',
        '\u{9f}',
        '\u{a0}',
        '\u{d7ff}',
        '\u{e000}',
        '\u{f8ff}',
        '\u{f900}',
        '\u{ffef}',
        '\u{fff0}',
        '\u{fffd}',
        '\u{ffff}',
        '\u{10000}',
        '\u{1f512}',
        '\u{10ffff}',
    ];
    for c in edges {
        let path = format!("{base}/x{c}y");
        let ours = zklock::check_lock_path(&path);
        let server = match zk.create(&path, b"", &persistent).await {
            Ok(_) => {
                zk.delete(&path, None).await.unwrap();
                true
            }
            Err(zk::Error::BadArguments(_)) => false,
            Err(err) => panic!("U+{:04X}: {err}", c as u32),
        };
        assert_eq!(ours.is_ok(), server, "U+{:04X}: ours {ours:?}, the server's verdict: {server}", c as u32);
        if let Err(err) = ours {
            assert_invalid(err, &format!("U+{:04X}", c as u32));
        }
    }
    zk.delete(&base, None).await.unwrap();
}
