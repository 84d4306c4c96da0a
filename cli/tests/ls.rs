//! `zklock ls PREFIX` against a real server: the locks under a prefix (a mutex with a waiter, a
//! read/write lock held by readers, a semaphore with leases held, a free lock, a plain node that
//! only looks like a lock), in text and JSON; a bad prefix; nothing under a prefix.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Runtime;
use zklock::{Client, Lock, MaxLeases, Owner, SemaphoreOptions};
use zklock_testkit::shared_connect_string;

const T: Duration = Duration::from_secs(30);

fn prefix() -> String {
    format!("/zklock-cli-ls-{}", std::process::id())
}

/// Runs `zklock ls ARGS...` against the test server (ZK_CONNECT is not inherited).
fn ls(args: &[&str]) -> (i32, String, String) {
    common::zklock("ls", &shared_connect_string(), args)
}

fn wait_contenders(rt: &Runtime, lock: &Lock, n: usize) {
    let deadline = Instant::now() + T;
    while rt.block_on(lock.contenders()).expect("list the contenders").len() != n {
        assert!(Instant::now() < deadline, "{} never had {n} contenders", lock.path());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn locks_under_a_prefix_with_holders_and_waiters() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client: Client = rt.block_on(Client::connect(&shared_connect_string())).unwrap();
    let base = prefix();
    let (deploy, report, shared, free) = (
        format!("{base}/locks/deploy"),
        format!("{base}/locks/nightly/report"),
        format!("{base}/shared"),
        format!("{base}/locks/free"),
    );

    let mutex = client.lock(&deploy).unwrap();
    let holder = rt.block_on(mutex.acquire(&Owner::with_label(1, "deployer"))).unwrap();
    let waiter = {
        let mutex = mutex.clone();
        rt.spawn(async move { mutex.acquire(&Owner::with_label(2, "next")).await.unwrap().release().await.unwrap() })
    };
    wait_contenders(&rt, &mutex, 2);
    let nested = client.lock(&report).unwrap();
    let report_hold = rt.block_on(nested.acquire(&Owner::with_label(3, "reporter"))).unwrap();
    let rw = client.read_write_lock(&shared).unwrap();
    let readers: Vec<_> = (4..6)
        .map(|id| rt.block_on(rw.read().acquire(&Owner::with_label(id, format!("reader-{id}")))).unwrap())
        .collect();
    let pool = format!("{base}/pool");
    let semaphore = client.semaphore_with(&pool, SemaphoreOptions::new(MaxLeases::Fixed(3)).label("pooled")).unwrap();
    let leases = rt.block_on(semaphore.acquire(2)).unwrap();
    // Used and released: its node stays, with no children, so it is not listed.
    let released = client.lock(&free).unwrap();
    rt.block_on(rt.block_on(released.acquire(&Owner::new(7))).unwrap().release()).unwrap();
    // A plain node whose name only contains a lock marker.
    let observer = rt.block_on(zookeeper_client::Client::connect(&shared_connect_string())).unwrap();
    let plain = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    rt.block_on(observer.create(&format!("{base}/locks/zklock-notes"), b"", &plain)).unwrap();

    let (code, table, err) = ls(&[&base]);
    assert_eq!(code, 0, "stderr: {err}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "a header, three locks and a semaphore:\n{table}");
    assert!(lines[0].starts_with("PATH") && lines[0].contains("WAITING"), "{table}");
    let row = |path: &str| {
        *lines
            .iter()
            .find(|line| line.split_whitespace().next() == Some(path))
            .unwrap_or_else(|| panic!("{path}:\n{table}"))
    };
    let cells = |path: &str| row(path).split_whitespace().take(5).collect::<Vec<_>>();
    assert_eq!(cells(&deploy), [deploy.as_str(), "held", "exclusive", "1", "1"]);
    assert!(row(&deploy).contains("deployer (host "), "{table}");
    assert_eq!(cells(&report), [report.as_str(), "held", "exclusive", "1", "0"]);
    assert_eq!(cells(&shared), [shared.as_str(), "held", "read", "2", "0"]);
    assert_eq!(cells(&pool), [pool.as_str(), "held", "semaphore", "2", "0"], "its mutex and leases not apart");
    assert!(row(&pool).contains("pooled (host "), "{table}");
    let (_, json, _) = ls(&["--json", &pool]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!((json[0]["path"].as_str(), json[0]["kind"].as_str()), (Some(pool.as_str()), Some("semaphore")));
    assert_eq!(json[0]["holders"].as_array().map(Vec::len), Some(2), "{json:#}");

    let (code, json, err) = ls(&["--json", &format!("{base}/locks")]);
    assert_eq!(code, 0, "stderr: {err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    let paths: Vec<&str> = json.as_array().unwrap().iter().map(|lock| lock["path"].as_str().unwrap()).collect();
    assert_eq!(paths, [deploy.as_str(), report.as_str()], "only under the prefix, in path order");
    assert_eq!(json[0]["holders"][0]["identity"]["label"], "deployer");
    assert_eq!(json[0]["queue"][0]["identity"]["label"], "next");

    rt.block_on(holder.release()).unwrap();
    rt.block_on(waiter).unwrap();
    rt.block_on(report_hold.release()).unwrap();
    rt.block_on(leases.release()).unwrap();
    for reader in readers {
        rt.block_on(reader.release()).unwrap();
    }
    let (code, table, _) = ls(&[&base]);
    assert_eq!(code, 0);
    assert_eq!(table, format!("no locks under {base}\n"), "released locks have no nodes left");
    rt.block_on(client.close());
}

#[test]
fn a_bad_prefix_is_refused_before_connecting() {
    let output = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["ls", "--zk", "127.0.0.1:1", "relative/path"])
        .env_remove("ZK_CONNECT")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let err = String::from_utf8(output.stderr).unwrap();
    assert!(err.contains("PREFIX") && err.contains("relative"), "{err}");
}

/// Nodes under the prefix that this client may not list (any client can set the ACL of the open
/// containers zklock makes): the rest is listed, the unreadable paths are named on stderr and in
/// --json, and the exit status (77) says the listing is partial.
#[test]
fn unreadable_paths_are_reported_and_the_rest_listed() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client: Client = rt.block_on(Client::connect(&shared_connect_string())).unwrap();
    let base = format!("{}-unreadable", prefix());
    let (open, deep) = (format!("{base}/open"), format!("{base}/zone/deep"));
    let (secret, sealed) = (format!("{base}/secret\u{202e}"), format!("{base}/zone/sealed"));
    let holders: Vec<_> = [&open, &deep]
        .into_iter()
        .map(|path| rt.block_on(client.lock(path).unwrap().acquire(&Owner::with_label(1, "holder"))).unwrap())
        .collect();
    // Another user's nodes, which only that user may list.
    let someone = rt.block_on(
        zookeeper_client::Client::connector().with_auth("digest", b"someone:pw").connect(&shared_connect_string()),
    );
    let someone = someone.unwrap();
    let (anyone, only_someone) = (
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::creator_all()),
    );
    for path in [&secret, &sealed] {
        rt.block_on(someone.create(path, b"", &only_someone)).unwrap();
        rt.block_on(someone.create(&format!("{path}/_c_x-lock-0000000001"), b"", &anyone)).unwrap();
    }

    let (code, table, err) = ls(&[&base]);
    assert_eq!(code, 77, "partial: exit 77; stdout: {table}\nstderr: {err}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "a header and the locks that could be read:\n{table}");
    assert!(lines[1].starts_with(&format!("{open} ")) && lines[2].starts_with(&format!("{deep} ")), "{table}");
    let reports: Vec<&str> = err.lines().collect();
    assert_eq!(reports.len(), 2, "one line an unreadable path:\n{err}");
    assert!(reports[0].starts_with(&format!("zklock ls: cannot read {base}/secret\\u{{202e}}: ")), "{err}");
    assert!(reports[1].starts_with(&format!("zklock ls: cannot read {sealed}: ")), "{err}");
    assert!(err.contains("NoAuth") && !err.contains('\u{202e}'), "{err:?}");

    let (code, json, err) = ls(&["--json", &base]);
    assert_eq!(code, 77, "stderr: {err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    let listed: Vec<(&str, Option<&str>)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry["path"].as_str().unwrap(), entry["kind"].as_str()))
        .collect();
    let unreadable = Some("unreadable");
    assert_eq!(
        listed,
        [
            (open.as_str(), Some("lock")),
            (secret.as_str(), unreadable),
            (deep.as_str(), Some("lock")),
            (sealed.as_str(), unreadable)
        ],
        "in path order, the unreadable paths with their kind:\n{json:#}"
    );
    assert_eq!(json[1]["error"]["kind"], "permission denied", "{json:#}");
    assert!(json[1]["error"]["message"].as_str().unwrap().contains("NoAuth"), "{json:#}");

    for holder in holders {
        rt.block_on(holder.release()).unwrap();
    }
    rt.block_on(client.close());
}
