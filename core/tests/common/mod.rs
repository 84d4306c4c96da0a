//! Shared helpers for the core tests: a real ZooKeeper, an independent observer client, and
//! waiting on conditions instead of sleeping.
#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use zklock::{Client, ClientOptions};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client as zk;

/// The shared standalone server of this test binary (or `ZK_CONNECT`).
pub fn connect_string() -> String {
    zklock_testkit::shared_connect_string()
}

/// A fresh lock path, unique to one test run.
pub fn unique_path(test: &str) -> String {
    format!("/zklock-test/{test}-{}", uuid::Uuid::new_v4().simple())
}

pub async fn client() -> Client {
    client_at(&connect_string()).await
}

pub async fn client_at(connect: &str) -> Client {
    Client::connect_with(connect, ClientOptions::default()).await.expect("connect to the test server")
}

/// A plain ZooKeeper client, independent of zklock, to observe and meddle.
pub async fn observer() -> zk::Client {
    observer_at(&connect_string()).await
}

pub async fn observer_at(connect: &str) -> zk::Client {
    zk::Client::connect(connect).await.expect("observer connects")
}

/// Children of `path` as the server has them (empty if the path does not exist).
pub async fn children(zk: &zk::Client, path: &str) -> Vec<String> {
    match zk.list_children(path).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(err) => panic!("listing {path}: {err}"),
    }
}

/// Polls `condition` until it holds; panics with `what` after `timeout`. The polling interval
/// is short: this waits on a state change of the server, not for time to pass.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `path` has exactly `n` children.
pub async fn wait_children(zk: &zk::Client, path: &str, n: usize) {
    let what = format!("{path} has {n} children");
    wait_until(&what, Duration::from_secs(20), || async { children(zk, path).await.len() == n }).await;
}

/// Sends a four-letter word to the first server of a connect string.
pub fn four_letter(connect: &str, command: &str) -> String {
    let first = connect.split(',').next().unwrap().split('/').next().unwrap();
    let mut stream = TcpStream::connect(first).expect("connect for four-letter word");
    stream.write_all(command.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// `wchp` parsed: each watched path under `prefix` with the sessions watching it.
pub fn watches_under(connect: &str, prefix: &str) -> Vec<(String, Vec<String>)> {
    let mut watches: Vec<(String, Vec<String>)> = Vec::new();
    for line in four_letter(connect, "wchp").lines() {
        if let Some(session) = line.strip_prefix('\t') {
            if let Some((path, sessions)) = watches.last_mut() {
                if path.starts_with(prefix) {
                    sessions.push(session.trim().to_owned());
                }
            }
        } else if !line.trim().is_empty() {
            watches.push((line.trim().to_owned(), Vec::new()));
        }
    }
    watches.retain(|(path, _)| path.starts_with(prefix));
    watches
}

/// Waits until the session `session_id` watches `node` (a full path).
pub async fn wait_watched_by(connect: &str, node: &str, session_id: i64) {
    let session = format!("0x{session_id:x}");
    wait_until(&format!("{node} watched by {session}"), Duration::from_secs(10), || {
        let found = watches_under(connect, node).iter().any(|(watched, by)| watched == node && by.contains(&session));
        async move { found }
    })
    .await;
}

/// Packets the server has received on the connection of `session_id`, from `cons`.
pub fn packets_received(connect: &str, session_id: i64) -> u64 {
    let sid = format!("sid=0x{session_id:x}");
    let cons = four_letter(connect, "cons");
    let line = cons.lines().find(|line| line.contains(&sid)).unwrap_or_else(|| panic!("{sid} not in cons:\n{cons}"));
    let recved = line.split(['(', ')', ',']).find_map(|field| field.strip_prefix("recved=")).expect("recved= in cons");
    recved.parse().unwrap()
}

/// A lock on `path` held by `first` and handed to `second` once released: `second` finds it held,
/// queues (seen by `observer`, a client that may list `path`), and gets it after the release.
/// Both clients are closed at the end.
pub async fn hand_over(first: Client, second: Client, observer: &zk::Client, path: &str) {
    let (me, other) = (zklock::Owner::unique(), zklock::Owner::unique());
    let guard = first.lock(path).unwrap().acquire(&me).await.unwrap();
    assert_eq!(children(observer, path).await.len(), 1);
    let seconds = second.lock(path).unwrap();
    assert!(seconds.try_acquire(&other).await.unwrap().is_none(), "held by the first client");
    let waiting = tokio::spawn(async move { seconds.acquire_timeout(&other, Duration::from_secs(10)).await });
    wait_children(observer, path, 2).await;
    guard.release().await.unwrap();
    let seconds_guard = waiting.await.unwrap().expect("the second client gets the lock once released");
    assert_eq!(seconds_guard.hold().state(), zklock::HoldState::Held);
    seconds_guard.release().await.unwrap();
    wait_children(observer, path, 0).await;
    first.close().await;
    second.close().await;
}

/// A standalone server, a fault proxy in front of it, an observer beside it, and a client
/// through the proxy with `session_timeout`.
pub async fn behind_a_proxy(session_timeout: Duration) -> (Cluster, Proxy, zk::Client, Client) {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let options = ClientOptions { session_timeout, ..Default::default() };
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();
    (cluster, proxy, observer, client)
}
