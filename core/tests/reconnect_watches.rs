//! A session with far more than one SetWatches chunk (128 KiB of paths) of watches reconnects
//! after one cut of its connection (a fault proxy), keeping the session: 10,000 waiters on one
//! lock with a long path, and holds on 10,000 paths, on ZooKeeper 3.8 and 3.9. No waiter loses
//! its place (every node stays), every hold stays held, and the watches fire afterwards.
//!
//! Before the fix every chunk's reply after the first, all with xid -8, was taken as unexpected
//! and the connection dropped, on every retry, until the session expired.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use zklock::binding::LockBinding;
use zklock::{Client, ClientOptions, HoldState, LostReason, Owner, SessionState};
use zklock_testkit::{Cluster, Proxy, ZkServer};
use zookeeper_client as zk;

const MANY: usize = 10_000;
const SESSION_TIMEOUT: Duration = Duration::from_secs(8);

/// One of these tests at a time: each queues 10,000 nodes on its own server.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A parent path of about 180 characters, so each watched path is ~230 bytes and 10,000 of them
/// ~2.3 MB: eighteen SetWatches chunks.
fn long_parent(test: &str) -> String {
    let path = unique_path(test);
    format!("{path}/{}", "x".repeat(180 - path.len()))
}

struct Setup {
    cluster: Cluster,
    proxy: Proxy,
    observer: zk::Client,
    client: Client,
}

async fn setup(version: ZkServer) -> Setup {
    let cluster =
        tokio::task::spawn_blocking(move || Cluster::builder().server_version(version).start()).await.unwrap();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let options = ClientOptions { session_timeout: SESSION_TIMEOUT, ..ClientOptions::default() };
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();
    Setup { cluster, proxy, observer, client }
}

/// Polls (every 100 ms: listing 10,000 children is not free) until `condition` holds.
async fn wait_slowly<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many watched paths under `prefix` the session `session_id` has on the server.
fn watched_by(connect: &str, prefix: &str, session_id: i64) -> usize {
    let session = format!("0x{session_id:x}");
    watches_under(connect, prefix).iter().filter(|(_, sessions)| sessions.contains(&session)).count()
}

/// Cuts the client's connection once and waits until it is connected again, with `watches`
/// watched paths under `prefix` registered on the server again, and stays so: one reconnect, the
/// same session, no expiry.
async fn cut_once_and_reconnect(s: &Setup, prefix: &str, watches: usize) {
    let session = s.client.session_id().unwrap();
    let mut changes = s.client.state_changes();
    let accepted = s.proxy.accepted();
    let started = Instant::now();
    s.proxy.cut();
    let next = tokio::time::timeout(Duration::from_secs(5), changes.next()).await;
    assert_eq!(next.expect("told of the cut"), Some(SessionState::Disconnected));
    s.proxy.pass();
    let next = tokio::time::timeout(SESSION_TIMEOUT * 2, changes.next()).await;
    assert_eq!(next.expect("connected again in time"), Some(SessionState::Connected));
    let connect = s.cluster.connect_string();
    let deadline = Instant::now() + SESSION_TIMEOUT * 2;
    loop {
        let n = watched_by(&connect, prefix, session);
        if n == watches {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} of {watches} watches registered again after {:?}: {} connections since the cut, the client {:?}",
            started.elapsed(),
            s.proxy.accepted() - accepted,
            s.client.state(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("reconnected with {watches} watches in {:?}", started.elapsed());
    // Stays connected: a dropped connection would show a state change and another connection.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.client.state(), SessionState::Connected);
    assert_eq!(s.client.session_id(), Some(session), "the same session");
    assert_eq!(s.proxy.accepted(), accepted + 1, "one reconnect, not a flapping connection");
}

/// 10,000 waiters in one session queued behind a holder in another, on a ~190-character lock
/// path; one cut. Every waiter keeps its node (its place in the queue), and when the holder
/// releases, the first waiter gets the lock (its watch on the holder's node fired).
async fn ten_thousand_waiters_keep_their_places_across_a_reconnect(version: ZkServer) {
    let _one = ONE_AT_A_TIME.lock().await;
    let s = setup(version).await;
    let path = long_parent("reconnect-waiters");
    let holder_client = client_at(&s.cluster.connect_string()).await;
    let holder = holder_client.lock(&path).unwrap().acquire(&Owner::new(u64::MAX)).await.unwrap();
    let lock = s.client.lock(&path).unwrap();
    let started = Instant::now();
    let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    let tasks: Vec<_> = (0..MANY)
        .map(|i| {
            let acquisition = lock.begin_acquire(&Owner::new(i as u64), None);
            let acquired_tx = acquired_tx.clone();
            tokio::spawn(async move {
                let outcome = acquisition.await;
                let _ = acquired_tx.send((i, outcome.map(|acquired| acquired.is_acquired())));
            })
        })
        .collect();
    let connect = s.cluster.connect_string();
    let session = s.client.session_id().unwrap();
    wait_slowly("every waiter watches the node ahead of it", Duration::from_secs(60), || {
        let n = watched_by(&connect, &path, session);
        async move { n == MANY }
    })
    .await;
    eprintln!("{MANY} waiters queued in {:?}", started.elapsed());
    let queue: BTreeSet<String> = children(&s.observer, &path).await.into_iter().collect();
    assert_eq!(queue.len(), MANY + 1);

    cut_once_and_reconnect(&s, &path, MANY).await;

    let after: BTreeSet<String> = children(&s.observer, &path).await.into_iter().collect();
    assert!(
        after == queue,
        "every waiter kept its node: {} of {} the same",
        after.intersection(&queue).count(),
        MANY + 1
    );
    assert!(acquired.try_recv().is_err(), "no waiter ended");
    holder.release().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), acquired.recv()).await.expect("the next waiter gets it");
    let (i, outcome) = first.unwrap();
    assert_eq!((i, outcome.unwrap()), (0, true), "the first waiter, which was next");
    s.client.close().await;
    for task in tasks {
        task.abort();
    }
    holder_client.close().await;
}

/// Holds on 10,000 paths in one session (each with a watch on its own node, ~200 bytes a path);
/// one cut. Every hold stays held, an operator's delete of one node is seen (its watch fired),
/// and a waiter in another session gets a released lock.
async fn holds_on_ten_thousand_paths_stay_held_across_a_reconnect(version: ZkServer) {
    let _one = ONE_AT_A_TIME.lock().await;
    let s = setup(version).await;
    let parent = long_parent("reconnect-holds");
    let me = Owner::new(7);
    let started = Instant::now();
    // The lock paths made beforehand, a few thousand in one multi: only the holds' own creates
    // are left to time.
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    s.observer.mkdir(&parent, &persistent).await.unwrap();
    for chunk in (0..MANY).collect::<Vec<_>>().chunks(2_500) {
        let mut multi = s.observer.new_multi_writer();
        for i in chunk {
            multi.add_create(&format!("{parent}/{i:05}"), b"", &persistent).unwrap();
        }
        multi.commit().await.unwrap();
    }
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..MANY {
        let lock = s.client.lock(&format!("{parent}/{i:05}")).unwrap();
        let me = me.clone();
        pending.spawn(async move { (i, lock.acquire(&me).await.unwrap()) });
    }
    let mut holds = Vec::with_capacity(MANY);
    while let Some(done) = pending.join_next().await {
        holds.push(done.unwrap());
    }
    eprintln!("{MANY} holds acquired in {:?}", started.elapsed());
    holds.sort_by_key(|(i, _)| *i);
    let holds: Vec<_> = holds.into_iter().map(|(_, guard)| guard).collect();
    let connect = s.cluster.connect_string();
    let session = s.client.session_id().unwrap();
    wait_slowly("every hold watches its own node", Duration::from_secs(30), || {
        let n = watched_by(&connect, &parent, session);
        async move { n == MANY }
    })
    .await;
    eprintln!("{MANY} holds watched in {:?}", started.elapsed());
    let nodes: Vec<String> = holds.iter().map(|guard| guard.hold().node_path().to_owned()).collect();

    cut_once_and_reconnect(&s, &parent, MANY).await;

    for (guard, node) in holds.iter().zip(&nodes) {
        assert_eq!(guard.hold().state(), HoldState::Held, "{node}");
        assert_eq!(guard.hold().node_path(), node);
    }
    // The watches fire: an operator deletes the first hold's node, and the hold is told.
    s.observer.delete(&nodes[0], None).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(10), holds[0].hold().lost()).await;
    assert_eq!(lost.expect("told of the delete"), Some(LostReason::NodeDeleted));
    // Every other hold is still held; a waiter elsewhere gets the second lock once released.
    assert!(holds[1..].iter().all(|guard| guard.hold().state() == HoldState::Held));
    let other = client_at(&s.cluster.connect_string()).await;
    let second = other.lock(&format!("{parent}/{:05}", 1)).unwrap();
    let waiting = tokio::spawn(async move { second.acquire_timeout(&Owner::new(8), Duration::from_secs(10)).await });
    wait_until("the waiter queues", Duration::from_secs(10), || async {
        children(&s.observer, &format!("{parent}/{:05}", 1)).await.len() == 2
    })
    .await;
    let mut holds = holds.into_iter().skip(1);
    holds.next().unwrap().release().await.unwrap();
    let guard = waiting.await.unwrap().expect("the waiter gets the released lock");
    guard.release().await.unwrap();
    s.client.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_waiters_keep_their_places_across_a_reconnect_on_zookeeper_3_8() {
    ten_thousand_waiters_keep_their_places_across_a_reconnect(ZkServer::V3_8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_waiters_keep_their_places_across_a_reconnect_on_zookeeper_3_9() {
    ten_thousand_waiters_keep_their_places_across_a_reconnect(ZkServer::V3_9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_on_ten_thousand_paths_stay_held_across_a_reconnect_on_zookeeper_3_8() {
    holds_on_ten_thousand_paths_stay_held_across_a_reconnect(ZkServer::V3_8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_on_ten_thousand_paths_stay_held_across_a_reconnect_on_zookeeper_3_9() {
    holds_on_ten_thousand_paths_stay_held_across_a_reconnect(ZkServer::V3_9).await;
}

/// Each list of a SetWatches frame (`SetWatches` has three, `SetWatches2` five), with its xid and
/// op code.
fn parse_set_watches(frame: &[u8]) -> (i32, i32, Vec<Vec<String>>) {
    let int = |at: usize| i32::from_be_bytes(frame[at..at + 4].try_into().unwrap());
    let (xid, op) = (int(4), int(8));
    let mut at = 12 + 8; // the header, then the relative zxid
    let lists = (0..if op == 105 { 5 } else { 3 })
        .map(|_| {
            let n = int(at);
            at += 4;
            (0..n)
                .map(|_| {
                    let len = int(at) as usize;
                    at += 4 + len;
                    String::from_utf8(frame[at - len..at].to_vec()).unwrap()
                })
                .collect()
        })
        .collect();
    assert_eq!(at, frame.len(), "the whole frame is its lists");
    (xid, op, lists)
}

/// The chunking of the watches sent again on a new connection (no server): ~1.3 MB of paths with
/// watches of every kind, persistent and recursive ones among them, go in chunks of at most
/// 128 KiB of paths, each (path, kind) in exactly one chunk, a chunk with persistent or recursive
/// watches as SetWatches2; and every chunk's reply (all share xid -8) is matched to its request.
/// Before the fix: persistent and recursive watches were sent in no chunk, the exists and child
/// lists were repeated in every chunk, and the second reply matched nothing.
#[test]
fn resent_watches_go_in_chunks_under_the_limit_each_path_once_persistent_ones_with_set_watches_2() {
    const LIMIT: usize = 128 * 1024;
    let mut expected: [BTreeSet<String>; 5] = Default::default();
    let mut watches = Vec::new();
    for i in 0..6_000 {
        let path = format!("/{}/{i:08}", "p".repeat(180));
        // Most with one kind, some with two or three (a node's data and its children watched).
        for (kind, expected) in expected.iter_mut().enumerate() {
            if i % 5 == kind || (kind < 3 && i % 7 == kind) || (kind == 4 && i % 11 == 0) {
                watches.push((path.clone(), kind));
                expected.insert(path.clone());
            }
        }
    }
    let watches: Vec<(&str, usize)> = watches.iter().map(|(path, kind)| (path.as_str(), *kind)).collect();
    let (frames, matched) = zk::resend_watches_frames(&watches);
    assert!(frames.len() >= 10, "{} chunks", frames.len());
    let mut seen: [Vec<String>; 5] = Default::default();
    for frame in &frames {
        let (xid, op, lists) = parse_set_watches(frame);
        assert_eq!(xid, -8);
        let persistent = lists.len() == 5 && (!lists[3].is_empty() || !lists[4].is_empty());
        assert_eq!(op, if persistent { 105 } else { 101 }, "SetWatches2 exactly when persistent watches go");
        let bytes: usize = lists.iter().flatten().map(|path| 4 + path.len()).sum();
        assert!(bytes <= LIMIT, "a chunk of {bytes} bytes of paths");
        for (kind, list) in lists.into_iter().enumerate() {
            seen[kind].extend(list);
        }
    }
    for (kind, (seen, expected)) in seen.iter().zip(&expected).enumerate() {
        let distinct: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(seen.len(), distinct.len(), "list {kind}: no path twice");
        assert!(distinct == *expected, "list {kind}: {} paths of {}", distinct.len(), expected.len());
    }
    assert_eq!(matched, frames.len(), "every chunk's reply matched");
}
