//! `zklock status` against a real server: the holder and the queue of a mutex and of a
//! read/write lock (text and JSON), a free path, a path that is not a lock, a bad path, Curator's
//! nodes, kazoo's, and a server that cannot be reached.

mod common;

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use zklock::{Client, Lock, LockGuard, MaxLeases, Owner, SemaphoreOptions};
use zklock_testkit::{shared_connect_string, CuratorContender};

const T: Duration = Duration::from_secs(30);

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/zklock-cli-status-{}-{tag}-{}/lock", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn connect(rt: &Runtime) -> Client {
    rt.block_on(Client::connect(&shared_connect_string())).expect("connect to the test server")
}

/// Runs `zklock status ARGS...` against `connect` (ZK_CONNECT is not inherited).
fn status_at(connect: &str, args: &[&str]) -> (i32, String, String) {
    common::zklock("status", connect, args)
}

fn status(args: &[&str]) -> (i32, String, String) {
    status_at(&shared_connect_string(), args)
}

fn status_json(path: &str) -> (i32, Value) {
    let (code, out, err) = status(&["--json", path]);
    let json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\nstderr: {err}"));
    (code, json)
}

/// Waits until `lock`'s path has `n` contenders (their nodes are made: they queued).
fn wait_contenders(rt: &Runtime, lock: &Lock, n: usize) {
    let deadline = Instant::now() + T;
    while rt.block_on(lock.contenders()).expect("list the contenders").len() != n {
        assert!(Instant::now() < deadline, "{} never had {n} contenders", lock.path());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An acquisition by `label` running in the background (it queues behind the holders).
fn begin(rt: &Runtime, lock: &Lock, id: u64, label: &str) -> JoinHandle<LockGuard> {
    let (lock, owner) = (lock.clone(), Owner::with_label(id, label));
    rt.spawn(async move { lock.acquire(&owner).await.expect("acquire") })
}

/// The table's row for the participant labelled `label`.
fn row<'a>(table: &'a str, label: &str) -> &'a str {
    let needle = format!(" {label} (host ");
    table.lines().find(|line| line.contains(&needle)).unwrap_or_else(|| panic!("no row for {label} in:\n{table}"))
}

fn label(entry: &Value) -> &str {
    entry["identity"]["label"].as_str().expect("a zklock identity with a label")
}

#[test]
fn held_mutex_with_waiters_in_text_and_json() {
    let rt = runtime();
    let path = unique("mutex");
    let (alpha, beta) = (connect(&rt), connect(&rt));
    let alpha_lock = alpha.lock(&path).unwrap();
    let beta_lock = beta.lock(&path).unwrap();
    let held = rt.block_on(alpha_lock.acquire(&Owner::with_label(1, "alpha"))).unwrap();
    let waiting = begin(&rt, &beta_lock, 2, "beta");
    wait_contenders(&rt, &alpha_lock, 2);

    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "held: exit 0; stderr: {err}");
    assert!(table.starts_with(&format!("{path}: held (exclusive) by 1; 1 waiting\n")), "{table}");
    let header = table.lines().nth(1).unwrap();
    for column in ["STATE", "MODE", "SEQUENCE", "FENCING TOKEN", "SESSION", "QUEUED FOR", "OWNER", "NODE"] {
        assert!(header.contains(column), "no {column} column: {header}");
    }
    let pid = std::process::id();
    let holder = row(&table, "alpha");
    assert!(holder.starts_with("holding  exclusive"), "{holder}");
    assert!(holder.contains(&format!(" {} ", held.fencing_token())), "{holder}");
    assert!(holder.contains(&format!(" {:#x} ", alpha.session_id().unwrap())), "{holder}");
    assert!(holder.contains(&format!("pid {pid}, rust)")), "{holder}");
    let node = held.hold().node_path().rsplit('/').next().unwrap();
    assert!(holder.ends_with(node), "{holder}");
    let waiter = row(&table, "beta");
    assert!(waiter.starts_with("waiting  exclusive"), "{waiter}");
    assert!(waiter.contains(&format!(" {:#x} ", beta.session_id().unwrap())), "{waiter}");
    let lines: Vec<&str> = table.lines().collect();
    let at = |row: &str| lines.iter().position(|line| *line == row).unwrap();
    assert!(at(holder) < at(waiter), "the holder first, then the queue:\n{table}");

    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(json["path"], path.as_str());
    assert_eq!(json["held"], true);
    assert_eq!(json["kind"], "lock", "a lock's document says its kind, as a semaphore's does");
    let (holders, queue) = (json["holders"].as_array().unwrap(), json["queue"].as_array().unwrap());
    assert_eq!((holders.len(), queue.len()), (1, 1), "{json:#}");
    let (holder, waiter) = (&holders[0], &queue[0]);
    let mut fields: Vec<&str> = holder.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "created_ms",
            "fencing_token",
            "identity",
            "mode",
            "node",
            "queued_for_ms",
            "sequence",
            "session_id",
            "session_id_hex",
        ]
    );
    assert_eq!(holder["mode"], "exclusive");
    assert_eq!(holder["node"], node);
    assert_eq!(holder["sequence"], held.hold().sequence());
    assert_eq!(holder["fencing_token"], held.fencing_token());
    assert_eq!(holder["session_id"], alpha.session_id().unwrap());
    assert_eq!(holder["session_id_hex"], format!("{:#x}", alpha.session_id().unwrap()));
    assert_eq!(holder["identity"]["kind"], "zklock");
    assert_eq!(holder["identity"]["pid"], pid);
    assert_eq!(holder["identity"]["language"], "rust");
    assert_eq!(holder["identity"]["host"], waiter["identity"]["host"]);
    assert_eq!(holder["identity"]["identifier"], Value::Null);
    assert_eq!((label(holder), label(waiter)), ("alpha", "beta"));
    assert_eq!(waiter["mode"], "exclusive");
    assert_eq!(waiter["session_id"], beta.session_id().unwrap());
    assert!(waiter["sequence"].as_i64() > holder["sequence"].as_i64(), "{json:#}");
    assert!(waiter["created_ms"].as_i64() >= holder["created_ms"].as_i64(), "{json:#}");
    assert!(holder["queued_for_ms"].as_i64().unwrap() >= 0, "{json:#}");

    // The waiter takes over: the status follows.
    rt.block_on(held.release()).unwrap();
    let taken = rt.block_on(waiting).unwrap();
    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(json["holders"].as_array().unwrap().len(), 1);
    assert_eq!(label(&json["holders"][0]), "beta");
    assert_eq!(json["holders"][0]["fencing_token"], taken.fencing_token());
    assert_eq!(json["queue"], Value::Array(Vec::new()));
    rt.block_on(taken.release()).unwrap();
    rt.block_on(alpha.close());
    rt.block_on(beta.close());
}

#[test]
fn readers_sharing_with_a_writer_waiting() {
    let rt = runtime();
    let path = unique("rw");
    let (readers, writer) = (connect(&rt), connect(&rt));
    let read = readers.read_write_lock(&path).unwrap().read().clone();
    let write = writer.read_write_lock(&path).unwrap().write().clone();
    let first = rt.block_on(read.acquire(&Owner::with_label(1, "reader-1"))).unwrap();
    let second = rt.block_on(read.acquire(&Owner::with_label(2, "reader-2"))).unwrap();
    let writing = begin(&rt, &write, 3, "writer");
    wait_contenders(&rt, &read, 3);
    // A reader arriving behind the waiting writer waits too.
    let late = begin(&rt, &read, 4, "reader-late");
    wait_contenders(&rt, &read, 4);

    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "held: exit 0; stderr: {err}");
    assert!(table.starts_with(&format!("{path}: held (read) by 2; 2 waiting\n")), "{table}");
    assert!(row(&table, "reader-1").starts_with("holding  read "), "{table}");
    assert!(row(&table, "reader-2").starts_with("holding  read "), "{table}");
    assert!(row(&table, "writer").starts_with("waiting  write "), "{table}");
    assert!(row(&table, "reader-late").starts_with("waiting  read "), "{table}");

    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(json["held"], true);
    let labels = |list: &Value| -> Vec<(String, String)> {
        let entries = list.as_array().unwrap();
        entries.iter().map(|e| (e["mode"].as_str().unwrap().to_owned(), label(e).to_owned())).collect()
    };
    let pair = |mode: &str, label: &str| (mode.to_owned(), label.to_owned());
    assert_eq!(labels(&json["holders"]), [pair("read", "reader-1"), pair("read", "reader-2")]);
    assert_eq!(labels(&json["queue"]), [pair("write", "writer"), pair("read", "reader-late")]);
    assert_eq!(json["holders"][0]["fencing_token"], first.fencing_token());
    assert_eq!(json["holders"][1]["fencing_token"], second.fencing_token());

    rt.block_on(first.release()).unwrap();
    rt.block_on(second.release()).unwrap();
    let written = rt.block_on(writing).unwrap();
    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(labels(&json["holders"]), [pair("write", "writer")]);
    assert_eq!(labels(&json["queue"]), [pair("read", "reader-late")]);
    rt.block_on(written.release()).unwrap();
    rt.block_on(rt.block_on(late).unwrap().release()).unwrap();
    rt.block_on(readers.close());
    rt.block_on(writer.close());
}

/// kazoo's nodes are contenders of their mode: `__lock__` a writer beside read/write nodes,
/// `__rlock__` a reader, each shown with its identifier.
#[test]
fn kazoos_nodes_with_their_modes() {
    let rt = runtime();
    let client = connect(&rt);
    let path = unique("kazoo");
    let read = client.read_write_lock(&path).unwrap().read().clone();
    let reading = rt.block_on(read.acquire(&Owner::with_label(1, "zk-reader"))).unwrap();
    let observer = rt.block_on(zookeeper_client::Client::connect(&shared_connect_string())).unwrap();
    let ephemeral_sequential =
        zookeeper_client::CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    for (name, identifier) in [
        ("0abad91753a64ed9bfac3327be0d1234__rlock__", "kazoo-reader"),
        ("1abad91753a64ed9bfac3327be0d1234__lock__", "kazoo-writer"),
    ] {
        rt.block_on(observer.create(&format!("{path}/{name}"), identifier.as_bytes(), &ephemeral_sequential)).unwrap();
    }
    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "held: exit 0; stderr: {err}");
    assert!(table.starts_with(&format!("{path}: held (read) by 2; 1 waiting\n")), "{table}");
    let line =
        |who: &str| table.lines().find(|line| line.contains(who)).unwrap_or_else(|| panic!("no {who} in:\n{table}"));
    assert!(line("kazoo (\"kazoo-reader\")").starts_with("holding  read "), "{table}");
    assert!(line("kazoo (\"kazoo-writer\")").starts_with("waiting  write "), "{table}");
    let (_, json) = status_json(&path);
    assert_eq!(json["queue"][0]["identity"], serde_json::json!({"kind": "kazoo", "identifier": "kazoo-writer"}));
    drop(observer);
    rt.block_on(reading.release()).unwrap();
    rt.block_on(client.close());
}

#[test]
fn a_free_lock_exits_3() {
    // A path that was never locked has no node at all.
    let never = unique("never");
    let (code, table, err) = status(&[&never]);
    assert_eq!(code, 3, "free: exit 3; stderr: {err}");
    assert_eq!(table, format!("{never}: free; nobody waits\n"));
    let (code, json) = status_json(&never);
    assert_eq!(code, 3);
    assert_eq!(json, serde_json::json!({"path": never, "kind": "lock", "held": false, "holders": [], "queue": []}));

    // A lock used and released: its node stays (until the server reaps the empty container).
    let rt = runtime();
    let client = connect(&rt);
    let path = unique("released");
    let lock = client.lock(&path).unwrap();
    rt.block_on(rt.block_on(lock.acquire(&Owner::new(1))).unwrap().release()).unwrap();
    let (code, json) = status_json(&path);
    assert_eq!(code, 3);
    assert_eq!(json["held"], false);
    assert_eq!(json["holders"], Value::Array(Vec::new()));
    rt.block_on(client.close());
}

#[test]
fn a_path_that_is_not_a_lock_is_an_error() {
    let rt = runtime();
    let client = connect(&rt);
    let path = unique("parent");
    let lock = client.lock(&path).unwrap();
    let held = rt.block_on(lock.acquire(&Owner::new(1))).unwrap();
    // The lock's parent has one child, the lock path's own node: not a lock node.
    let parent = path.rsplit_once('/').unwrap().0;
    let (code, out, err) = status(&[parent]);
    assert_eq!(code, 65, "not a lock: exit 65; stdout: {out}");
    assert_eq!(out, "");
    assert!(err.contains(&format!("{parent} is not a lock")) && err.contains("(lock)"), "{err}");
    rt.block_on(held.release()).unwrap();
    rt.block_on(client.close());
}

#[test]
fn a_bad_path_is_a_usage_error() {
    for (path, says) in [("relative/path", "is relative"), ("/trailing/", "ends with '/'")] {
        let (code, out, err) = status(&[path]);
        assert_eq!(code, 64, "{path:?}: exit 64; stdout: {out}");
        assert!(err.contains(says), "{path:?}: {err}");
    }
    let (code, _, err) = status(&[]);
    assert_eq!(code, 64, "a missing PATH: exit 64");
    assert!(err.contains("<PATH>"), "{err}");
    // Told before any network traffic: the same with no server to reach.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, _, err) = status_at(&format!("127.0.0.1:{port}"), &["relative/path"]);
    assert_eq!(code, 64, "a bad path with no server: exit 64, not 69: {err}");
}

#[test]
fn an_unreachable_server_exits_69() {
    // A port nobody listens on: connections are refused.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, out, err) = status_at(&format!("127.0.0.1:{port}"), &["/locks/anything"]);
    assert_eq!(code, 69, "unreachable: exit 69; stdout: {out}; stderr: {err}");
    assert_eq!(out, "");
    assert!(err.contains("cannot reach ZooKeeper") && err.contains("connection refused"), "{err}");
}

#[test]
fn curators_nodes_show_as_curators() {
    let rt = runtime();
    let path = unique("curator");
    let mut curator = CuratorContender::spawn(&shared_connect_string(), &path, "curator");
    curator.acquire(T);
    let client = connect(&rt);
    let lock = client.lock(&path).unwrap();
    let waiting = begin(&rt, &lock, 1, "behind-curator");
    wait_contenders(&rt, &lock, 2);

    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    let holder = &json["holders"][0];
    assert_eq!(holder["identity"]["kind"], "curator", "{json:#}");
    let address = holder["identity"]["address"].as_str().unwrap();
    assert!(address.parse::<std::net::IpAddr>().is_ok(), "{address}");
    assert_eq!(holder["session_id"], curator.session_id());
    assert_eq!(label(&json["queue"][0]), "behind-curator");
    let (_, table, _) = status(&[&path]);
    assert!(table.lines().any(|line| line.starts_with("holding") && line.contains(&format!("Curator at {address}"))));

    curator.release();
    rt.block_on(rt.block_on(waiting).unwrap().release()).unwrap();
    rt.block_on(client.close());
}

#[test]
fn labels_cannot_split_rows_or_colour_the_terminal() {
    let rt = runtime();
    let path = unique("escapes");
    let client = connect(&rt);
    let lock = client.lock(&path).unwrap();
    let hostile = "evil\nholding  exclusive 1\x1b[31m\u{202e}";
    let held = rt.block_on(lock.acquire(&Owner::with_label(1, hostile))).unwrap();

    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(!table.contains('\x1b') && !table.contains('\u{202e}'), "raw escapes reach the terminal:\n{table:?}");
    assert_eq!(table.lines().count(), 3, "one summary, one header, one row:\n{table}");
    assert!(table.contains(r"evil\u{a}holding  exclusive 1\u{1b}[31m\u{202e} (host "), "{table}");

    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(label(&json["holders"][0]), hostile, "JSON keeps the label exact");
    rt.block_on(held.release()).unwrap();
}

/// Node names as labels: ZooKeeper allows U+202E (right-to-left override) and U+2028 (line
/// separator) in a name, which would reorder the NODE column or split a row; it refuses ESC.
#[test]
fn node_names_cannot_reorder_or_split_the_output() {
    let rt = runtime();
    let path = unique("node-names");
    let client = connect(&rt);
    let lock = client.lock(&path).unwrap();
    let held = rt.block_on(lock.acquire(&Owner::with_label(1, "holder"))).unwrap();
    let observer = rt.block_on(zookeeper_client::Client::connect(&shared_connect_string())).unwrap();
    let plain = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let hostile = "_c_\u{202e}gnp.exe\u{2028}waiting-lock-0000000099";
    rt.block_on(observer.create(&format!("{path}/{hostile}"), b"", &plain)).unwrap();
    let esc = rt.block_on(observer.create(&format!("{path}/\x1b[31m-lock-0000000098"), b"", &plain));
    assert!(matches!(esc, Err(zookeeper_client::Error::BadArguments(_))), "ZooKeeper refuses ESC: {esc:?}");
    let raw = |text: &str| text.contains(['\u{202e}', '\u{2028}']);

    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(!raw(&table), "raw in the table:\n{table:?}");
    assert_eq!(table.lines().count(), 4, "one summary, one header, two rows:\n{table}");
    assert!(table.lines().any(|row| row.ends_with(r"_c_\u{202e}gnp.exe\u{2028}waiting-lock-0000000099")), "{table}");
    let (_, json) = status_json(&path);
    assert_eq!(json["queue"][0]["node"], hostile, "JSON keeps the name exact");

    // Not a lock: the message names its children, escaped.
    let parent = format!("{path}-parent");
    rt.block_on(observer.create(&parent, b"", &plain)).unwrap();
    rt.block_on(observer.create(&format!("{parent}/notes\u{202e}txt.exe"), b"", &plain)).unwrap();
    let (code, out, err) = status(&[&parent]);
    assert_eq!(code, 65, "not a lock: exit 65; stdout: {out}");
    assert!(!raw(&err) && err.contains(r"(notes\u{202e}txt.exe)"), "{err:?}");
    rt.block_on(held.release()).unwrap();
}

#[test]
fn a_missing_chroot_exits_69_from_every_command() {
    let connect = format!("{}/zklock-cli-no-such-chroot-{}", shared_connect_string(), std::process::id());
    let (code, _, err) = status_at(&connect, &["/lock"]);
    assert_eq!(code, 69, "status: {err}");
    assert!(err.contains("does not exist on the server"), "{err}");
    let exec = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["exec", "--zk", &connect, "/lock", "--", "true"])
        .env_remove("ZK_CONNECT")
        .output()
        .expect("run zklock");
    let err = String::from_utf8_lossy(&exec.stderr);
    assert_eq!(exec.status.code(), Some(69), "exec: {err}");
    assert!(err.contains("does not exist on the server"), "{err}");
}

#[test]
fn connect_timeout_bounds_how_long_a_dead_ensemble_is_tried() {
    // A host that accepts connections and never answers: the default would try for 10 s.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let connect = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let started = Instant::now();
    let (code, _, err) = status_at(&connect, &["--connect-timeout", "1", "/locks/anything"]);
    assert_eq!(code, 69, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "gave up after {:?}", started.elapsed());
    assert!(err.contains("connect timeout of 1s"), "{err}");
    let (code, _, err) = status_at(&connect, &["--connect-timeout", "0", "/locks/anything"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--connect-timeout 0"), "{err}");
    drop(silent);
}

#[test]
fn watch_shows_the_status_again_until_interrupted() {
    use std::io::BufRead;
    let rt = runtime();
    let path = unique("watch");
    let client = connect(&rt);
    let lock = client.lock(&path).unwrap();
    let held = rt.block_on(lock.acquire(&Owner::with_label(1, "watched"))).unwrap();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["status", "--zk", &shared_connect_string(), "--watch", "0.2", "--json", &path])
        .env_remove("ZK_CONNECT")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run zklock status --watch");
    let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().expect("another document").unwrap()).unwrap() };
    let first = next();
    assert_eq!(first["held"], true);
    assert_eq!(label(&first["holders"][0]), "watched");
    rt.block_on(held.release()).unwrap();
    // Shown again, one JSON document a line, until the release shows.
    let deadline = Instant::now() + T;
    while next()["held"] != false {
        assert!(Instant::now() < deadline, "the release never showed");
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    let (code, _, err) = status(&["--watch", "0", &path]);
    assert_eq!(code, 64, "{err}");
}

/// `--watch` goes on through a lost session: the loss is told on stderr, and the documents come
/// again once the server is back (a new session), rather than exit 69.
#[test]
fn watch_goes_on_through_a_lost_session() {
    use std::io::BufRead;
    let rt = runtime();
    let path = unique("watch-loss");
    let client = connect(&rt);
    let held = rt.block_on(client.lock(&path).unwrap().acquire(&Owner::with_label(1, "watched"))).unwrap();
    let server = shared_connect_string().split(['/', ',']).next().unwrap().to_owned();
    let proxy = zklock_testkit::Proxy::start(&server);
    let mut watch = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["status", "--zk", &proxy.address(), "--session-timeout", "2", "--watch", "0.2", "--json", &path])
        .env_remove("ZK_CONNECT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run zklock status --watch");
    let (sender, documents) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if sender.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    documents.recv_timeout(T).expect("a first document");
    proxy.stall();
    // Past the session timeout: the session is gone.
    std::thread::sleep(Duration::from_secs(3));
    proxy.pass();
    while documents.try_recv().is_ok() {}
    let again = documents.recv_timeout(T).expect("documents again after the loss");
    let json: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(json["held"], true, "{json:#}");
    assert_eq!(watch.try_wait().unwrap(), None, "still watching");
    watch.kill().unwrap();
    watch.wait().unwrap();
    rt.block_on(held.release()).unwrap();
}

/// A semaphore's path (max 2): the leases held, the lease made by the acquirer at the head of
/// its mutex that does not fit yet, and the acquirers queued at the mutex, in text and JSON; the
/// identities escaped as for a lock's holders. Free (exit 3) once every lease is returned.
#[test]
fn a_semaphores_leases_and_queue_in_text_and_json() {
    let rt = runtime();
    let path = unique("semaphore");
    let (alpha, beta, gamma) = (connect(&rt), connect(&rt), connect(&rt));
    let semaphore = |client: &Client, label: &str| {
        client.semaphore_with(&path, SemaphoreOptions::new(MaxLeases::Fixed(2)).label(label)).unwrap()
    };
    let alphas = semaphore(&alpha, "alpha");
    let held = rt.block_on(alphas.acquire(2)).unwrap();
    let betas = semaphore(&beta, "beta");
    let beta_waits = rt.spawn(async move { betas.acquire(1).await.expect("beta acquires") });
    let wait_parts = |leases: usize, queued: usize| {
        let deadline = Instant::now() + T;
        loop {
            let view = rt.block_on(alphas.participants()).expect("list the semaphore");
            if (view.leases.len(), view.queue.len()) == (leases, queued) {
                break;
            }
            assert!(Instant::now() < deadline, "never {leases} leases and {queued} queued: {view:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_parts(3, 1);
    let gammas = semaphore(&gamma, "gamma\x1b[31m");
    let gamma_waits = rt.spawn(async move { gammas.acquire(1).await.expect("gamma acquires") });
    wait_parts(3, 2);

    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "leases held: exit 0; stderr: {err}");
    assert!(table.starts_with(&format!("{path}: semaphore, 2 leases held; 2 waiting\n")), "{table}");
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert_eq!(rows.len(), 5, "{table}");
    let tokens: Vec<String> = held.leases().iter().map(|lease| format!(" {} ", lease.fencing_token())).collect();
    for (row, token) in rows[..2].iter().zip(&tokens) {
        assert!(row.starts_with("holding    lease") && row.contains(" alpha (host "), "{table}");
        assert!(row.contains(token.as_str()) && row.contains(&format!(" {:#x} ", alpha.session_id().unwrap())));
    }
    assert!(rows[2].starts_with("acquiring  lease") && rows[2].contains(" beta (host "), "{table}");
    assert!(rows[3].starts_with("waiting    exclusive") && rows[3].contains(" beta (host "), "{table}");
    assert!(rows[4].starts_with("waiting    exclusive"), "{table}");
    assert!(rows[4].contains(" gamma\\u{1b}[31m (host ") && !table.contains('\x1b'), "escaped: {table}");

    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(
        (json["path"].as_str(), json["kind"].as_str(), json["held"].as_bool()),
        (Some(&*path), Some("semaphore"), Some(true))
    );
    let parts = |name: &str| json[name].as_array().unwrap_or_else(|| panic!("no {name}: {json:#}")).clone();
    let (holders, acquiring, queue) = (parts("holders"), parts("acquiring"), parts("queue"));
    assert_eq!((holders.len(), acquiring.len(), queue.len()), (2, 1, 2), "{json:#}");
    for (holder, lease) in holders.iter().zip(held.leases()) {
        assert_eq!(holder["mode"], "lease");
        assert_eq!(holder["node"], lease.node_name());
        assert_eq!(holder["fencing_token"], lease.fencing_token());
        assert_eq!(holder["session_id"], alpha.session_id().unwrap());
        assert_eq!(label(holder), "alpha");
        assert_eq!(holder["identity"]["pid"], std::process::id());
    }
    assert_eq!(
        (acquiring[0]["mode"].as_str(), acquiring[0]["session_id"].as_i64()),
        (Some("lease"), beta.session_id())
    );
    assert_eq!(label(&queue[0]), "beta");
    assert_eq!(label(&queue[1]), "gamma\x1b[31m", "JSON keeps the text exact");
    assert_eq!(queue[0]["mode"], "exclusive");

    // Every lease returned: beta and gamma get theirs in turn, then the semaphore is free.
    rt.block_on(held.release()).unwrap();
    let (b, g) = (rt.block_on(beta_waits).unwrap(), rt.block_on(gamma_waits).unwrap());
    rt.block_on(b.release()).unwrap();
    rt.block_on(g.release()).unwrap();
    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 3, "free: {table} {err}");
    assert!(table.starts_with(&format!("{path}: semaphore, 0 leases held; nobody waits\n")), "{table}");
    for client in [alpha, beta, gamma] {
        rt.block_on(client.close());
    }
}

/// Another client's node data is not ours to trust: a holder whose label is 70,000 characters
/// (over the 65,535 that a formatting width takes) is shown cut in the table and whole in JSON,
/// and the lock reads held (exit 0), never free; the command panicked (exit 101) before.
#[test]
fn a_holder_with_a_huge_label_is_shown_cut_and_reads_held() {
    let rt = runtime();
    let path = unique("huge-label");
    let client = connect(&rt);
    let label = "l".repeat(70_000);
    // Written by hand, as another client would: zklock refuses a label over 1,024 bytes.
    let observer = rt.block_on(zookeeper_client::Client::connect(&shared_connect_string())).unwrap();
    let options = zookeeper_client::CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let data = serde_json::json!({"host": "elsewhere", "pid": 1, "owner": label, "lang": "rust"}).to_string();
    let node = format!("{path}/_c_{:032x}-lock-", std::process::id());
    rt.block_on(
        observer.mkdir(&path, &zookeeper_client::CreateMode::Container.with_acls(zookeeper_client::Acls::anyone_all())),
    )
    .unwrap();
    rt.block_on(observer.create(&node, data.as_bytes(), &options)).unwrap();
    let (code, table, err) = status(&[&path]);
    assert_eq!(code, 0, "held: {err}");
    assert!(table.contains(&format!("{}…", "l".repeat(199))), "the label cut to 200 characters:\n{table}");
    assert!(!table.contains(&"l".repeat(201)), "no longer cell");
    let (code, json) = status_json(&path);
    assert_eq!(code, 0);
    assert_eq!(label_of_first_holder(&json), label, "JSON keeps it whole");
    drop(observer);
    drop(client);
}

fn label_of_first_holder(json: &Value) -> String {
    label(&json["holders"][0]).to_owned()
}

/// Another client's waiters with 1 MB of data each: `status` shows them with their data's size,
/// not read, and receives a few kilobytes (it read them whole: 40 MB, in multi-reads over the
/// client's 4 MiB reply cap, and a server with a 256 MB heap died of OutOfMemoryError). On a
/// server of its own, through a proxy that counts what it receives.
#[test]
fn another_clients_nodes_with_a_megabyte_of_data_are_shown_unread() {
    const HOSTILE: usize = 40;
    const DATA: usize = 1_000_000;
    let rt = runtime();
    let cluster = zklock_testkit::Cluster::standalone();
    let proxy = zklock_testkit::Proxy::start(&cluster.server_address(0));
    let path = unique("hostile-data");
    let client = rt.block_on(Client::connect(&cluster.connect_string())).unwrap();
    let held = rt.block_on(client.lock(&path).unwrap().acquire(&Owner::with_label(1, "holder"))).unwrap();
    let hostile = rt.block_on(zookeeper_client::Client::connect(&cluster.connect_string())).unwrap();
    let options = zookeeper_client::CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let data = vec![b'x'; DATA];
    for _ in 0..HOSTILE {
        let name = format!("{path}/_c_{:032x}-lock-", std::process::id());
        rt.block_on(hostile.create(&name, &data, &options)).expect("the hostile client makes its node");
    }

    let received_before = proxy.forwarded().1;
    let (code, out, err) = status_at(&proxy.address(), &["--json", &path]);
    let (text_code, table, _) = status_at(&proxy.address(), &[&path]);
    let received = proxy.forwarded().1 - received_before;
    eprintln!("status, in JSON and as a table, received {received} bytes ({HOSTILE} nodes of {DATA} bytes)");
    assert_eq!((code, text_code), (0, 0), "held: {err}");
    assert!(received < DATA as u64, "received {received} bytes: another client's node data");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(label(&json["holders"][0]), "holder");
    let queue = json["queue"].as_array().unwrap();
    assert_eq!(queue.len(), HOSTILE);
    for entry in queue {
        assert_eq!(entry["identity"], serde_json::json!({"kind": "unread", "data_length": DATA}), "{entry}");
    }
    let unread = format!("not read ({DATA} bytes of data)");
    assert_eq!(table.lines().filter(|line| line.starts_with("waiting") && line.contains(&unread)).count(), HOSTILE);

    rt.block_on(held.release()).unwrap();
    rt.block_on(client.close());
}
