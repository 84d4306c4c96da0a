//! The read/write lock against a real ZooKeeper server: sharing, exclusion, writer priority,
//! downgrade, the refused upgrade, no orphaned node, lost holds, and order past the sequence
//! limit.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LostReason, Mode, Owner, ReadWriteLock};
use zklock_testkit::{Cluster, Proxy};

fn modes(participants: &[zklock::Participant]) -> Vec<Option<Mode>> {
    participants.iter().map(|p| p.mode).collect()
}

fn spawn_acquire(lock: &zklock::Lock, owner: Owner) -> tokio::task::JoinHandle<zklock::LockGuard> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.acquire(&owner).await.unwrap() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_excludes_them_and_other_writers() {
    let path = unique_path("rw-share");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let (rw_a, rw_b) = (a.read_write_lock(&path).unwrap(), b.read_write_lock(&path).unwrap());

    // Two readers, in two sessions, hold together.
    let r1 = rw_a.read().acquire(&Owner::new(1)).await.unwrap();
    let r2 = rw_b.read().acquire(&Owner::new(2)).await.unwrap();
    let holders = rw_a.holders().await.unwrap();
    assert_eq!(modes(&holders), vec![Some(Mode::Read), Some(Mode::Read)]);
    assert!(holders[0].node.contains("-__READ__") && holders[1].node.contains("-__READ__"), "{holders:?}");
    // A writer waits for both.
    assert!(rw_b.write().try_acquire(&Owner::new(3)).await.unwrap().is_none(), "a try is refused while read");
    let writer = spawn_acquire(rw_b.write(), Owner::new(3));
    wait_children(&observer, &path, 3).await;
    r1.release().await.unwrap();
    assert!(!writer.is_finished());
    r2.release().await.unwrap();
    let w = writer.await.unwrap();
    assert!(w.hold().node_path().contains("-__WRIT__"));
    assert_eq!(modes(&rw_a.holders().await.unwrap()), vec![Some(Mode::Write)]);
    // The writer excludes readers and other writers.
    assert!(rw_a.read().try_acquire(&Owner::new(4)).await.unwrap().is_none());
    assert!(rw_a.write().try_acquire(&Owner::new(5)).await.unwrap().is_none());
    assert_eq!(children(&observer, &path).await.len(), 1, "tries left no node");
    let reader = spawn_acquire(rw_a.read(), Owner::new(4));
    wait_children(&observer, &path, 2).await;
    let fencing = w.fencing_token();
    w.release().await.unwrap();
    let r = reader.await.unwrap();
    assert!(r.fencing_token() > fencing, "tokens rise across holders");
    r.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    a.close().await;
    b.close().await;
}

/// A reader that comes after a waiting writer waits behind it; it watches the nearest write
/// node ahead (one watch), not every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reader_waits_behind_a_waiting_writer() {
    let path = unique_path("rw-late");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let first = rw.read().acquire(&Owner::new(1)).await.unwrap();
    let writer = spawn_acquire(rw.write(), Owner::new(2));
    wait_children(&observer, &path, 2).await;
    let late = spawn_acquire(rw.read(), Owner::new(3));
    wait_children(&observer, &path, 3).await;
    let queue = rw.contenders().await.unwrap();
    assert_eq!(modes(&queue), vec![Some(Mode::Read), Some(Mode::Write), Some(Mode::Read)]);
    assert_eq!(rw.holders().await.unwrap().len(), 1, "only the first reader holds");
    // The late reader watches the writer's node; no one watches the late reader's node.
    let watched: Vec<String> = watches_under(&connect_string(), "/").into_iter().map(|(node, _)| node).collect();
    assert!(watched.iter().any(|node| node.ends_with(&queue[1].node)), "{watched:?}");
    assert!(!watched.iter().any(|node| node.ends_with(&queue[2].node)), "{watched:?}");

    first.release().await.unwrap();
    let w = writer.await.unwrap();
    assert!(!late.is_finished(), "the late reader waits for the writer");
    w.release().await.unwrap();
    late.await.unwrap().release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
}

/// Downgrade: the write holder takes the read side (on its write node), releases the write
/// side and goes on reading; a writer already waiting stays out until the read is released,
/// while the read is shared as any read (CURATOR-621).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_keeps_waiting_writers_out_until_the_read_goes() {
    let path = unique_path("rw-downgrade");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let rw = a.read_write_lock(&path).unwrap();
    let other = b.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    let waiting_writer = spawn_acquire(other.write(), Owner::new(2));
    wait_children(&observer, &path, 2).await;

    let read = rw.read().acquire(&me).await.unwrap();
    assert_eq!(children(&observer, &path).await.len(), 2, "the read takes no node of its own");
    assert_eq!(read.fencing_token(), write.fencing_token());
    write.release().await.unwrap();
    assert!(rw.read().is_held_by(&me) && !rw.write().is_held_by(&me));
    assert_eq!(read.hold().state(), HoldState::Held);
    assert_eq!(children(&observer, &path).await.len(), 2, "the write node stays while the read holds");
    // The writer that was waiting is still out; nothing about it changes until the read goes.
    assert!(!waiting_writer.is_finished());
    assert!(other.write().try_acquire(&Owner::new(3)).await.unwrap().is_none());

    let read_token = read.fencing_token();
    read.release().await.unwrap();
    let w = waiting_writer.await.unwrap();
    assert!(w.fencing_token() > read_token);
    w.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    a.close().await;
    b.close().await;
}

/// Upgrade: a reader asking for the write side is refused at once with its own kind, rather
/// than waiting for itself forever (as Curator does); reentrancy is per mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_is_refused_at_once_and_reentrancy_is_per_mode() {
    let path = unique_path("rw-upgrade");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let read = rw.read().acquire(&me).await.unwrap();
    let again = rw.read().acquire(&me).await.unwrap();
    assert_eq!(rw.read().hold_of(&me).unwrap().1, 2);
    let started = std::time::Instant::now();
    let err = rw.write().acquire(&me).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock, "{err}");
    assert!(err.message().contains("holds the read lock"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(100), "refused at once");
    assert!(rw.write().try_reenter(&me).unwrap().is_err());
    assert_eq!(children(&observer, &path).await.len(), 1, "no write node was made");
    again.release().await.unwrap();
    read.release().await.unwrap();

    // The write holder re-enters its write side and may take the read side, each counted.
    let w1 = rw.write().acquire(&me).await.unwrap();
    let w2 = rw.write().acquire(&me).await.unwrap();
    let r1 = rw.read().acquire(&me).await.unwrap();
    assert_eq!(rw.write().hold_of(&me).unwrap().1, 2);
    assert_eq!(rw.read().hold_of(&me).unwrap().1, 1);
    r1.release().await.unwrap();
    w2.release().await.unwrap();
    assert!(rw.write().is_held_by(&me));
    w1.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
}

/// Timeouts, tries and cancels of both sides leave no node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_tries_and_cancels_leave_no_node() {
    let path = unique_path("rw-orphans");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let writer = rw.write().acquire(&Owner::new(1)).await.unwrap();
    for side in [rw.read(), rw.write()] {
        let err = side.acquire_timeout(&Owner::new(2), Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert!(side.try_acquire(&Owner::new(2)).await.unwrap().is_none());
        let pending = tokio::spawn({
            let side = side.clone();
            async move { side.acquire(&Owner::new(3)).await }
        });
        wait_children(&observer, &path, 2).await;
        pending.abort();
        wait_children(&observer, &path, 1).await;
    }
    writer.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
}

/// A mutex and a read/write lock on one path would ignore each other: refused, naming the
/// conflict, before any node is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_and_a_read_write_lock_refuse_to_share_a_path() {
    let (mutex_path, rw_path) = (unique_path("rw-conflict-m"), unique_path("rw-conflict-rw"));
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&mutex_path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let err = b.read_write_lock(&mutex_path).unwrap().read().acquire(&Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(
        err.message().contains("a read/write lock cannot use this path") && err.message().contains("-lock-"),
        "{err}"
    );
    assert_eq!(children(&observer, &mutex_path).await.len(), 1);
    holder.release().await.unwrap();

    let reader = a.read_write_lock(&rw_path).unwrap().read().acquire(&Owner::new(1)).await.unwrap();
    let err = b.lock(&rw_path).unwrap().acquire(&Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("a mutex cannot use this path") && err.message().contains("__READ__"), "{err}");
    assert_eq!(children(&observer, &rw_path).await.len(), 1);
    reader.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// A reader whose session expires loses its hold: signalled, not held, and a writer gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_session_expires_loses_its_hold() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let session = Duration::from_secs(2);
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let stalled = Client::connect_with(&proxy.address(), options.clone()).await.unwrap();
    let other = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let path = "/locks/rw-expiry";
    let me = Owner::new(1);
    let rw: ReadWriteLock = stalled.read_write_lock(path).unwrap();
    let read = rw.read().acquire(&me).await.unwrap();
    let writer = spawn_acquire(other.read_write_lock(path).unwrap().write(), Owner::new(2));

    proxy.stall();
    let reason = tokio::time::timeout(session * 3, read.hold().lost()).await.expect("lost is signalled");
    assert!(matches!(reason, Some(LostReason::SessionExpired | LostReason::DisconnectedTooLong)), "{reason:?}");
    assert!(!rw.read().is_held_by(&me), "a lost hold is not held");
    assert_eq!(rw.read().state_of(&me), Some(HoldState::Lost));
    let w = tokio::time::timeout(session * 3, writer).await.expect("the writer gets in").unwrap();
    assert_eq!(read.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    w.release().await.unwrap();
    proxy.pass();
    stalled.close().await;
    other.close().await;
}

/// Once `close` has begun, the write holder's hold is lost even while the session ends: reading
/// under it (a downgrade) and re-entering are refused as lost, not counted on a dead hold (found
/// by scripts/fuzz: the read side answered OK right after zkl_client_close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_hold_is_lost_for_a_downgrade_as_soon_as_close_begins() {
    let path = unique_path("rw-closing");
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    // Only close's first step: it marks the client closed, then would wait for the server.
    let _ = tokio::time::timeout(Duration::ZERO, client.close()).await;
    assert_eq!(write.hold().state(), HoldState::Lost);
    // The bindings re-enter without the runtime (try_reenter); acquire says the client is closed.
    let read = rw.read().try_reenter(&me).map(|r| r.map(|_| ()).map_err(|e| e.kind()));
    assert_eq!(read, Some(Err(ErrorKind::LockLost)), "no read under a lost write hold");
    let again = rw.write().try_reenter(&me).map(|r| r.map(|_| ()).map_err(|e| e.kind()));
    assert_eq!(again, Some(Err(ErrorKind::LockLost)), "no re-entry of a lost hold");
    assert_eq!(rw.read().acquire(&me).await.err().map(|e| e.kind()), Some(ErrorKind::Closed));
    assert_eq!(write.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    client.close().await;
}

/// Past ZooKeeper's 32-bit sequence limit the queue is ordered by creation zxid: readers and
/// writers still get in in arrival order, and a writer is never in with anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn order_past_the_sequence_limit() {
    const PATH: &str = "/locks/rw-overflow";
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, 2_147_483_644).start();
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let client = client_at(&connect).await;
    let rw = client.read_write_lock(PATH).unwrap();
    let gate = rw.write().acquire(&Owner::with_label(100, "gate")).await.unwrap();
    assert_eq!(gate.hold().sequence(), 2_147_483_644);
    // W R R W R W R, queued one after another across the limit.
    let plan = [Mode::Write, Mode::Read, Mode::Read, Mode::Write, Mode::Read, Mode::Write, Mode::Read];
    let (events, mut log) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (i, mode) in plan.into_iter().enumerate() {
        let side = if mode == Mode::Read { rw.read().clone() } else { rw.write().clone() };
        let events = events.clone();
        let owner = Owner::with_label(i as u64, format!("c{i}"));
        tasks.push(tokio::spawn(async move {
            let guard = side.acquire(&owner).await.unwrap();
            events.send((i, mode, true)).unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            events.send((i, mode, false)).unwrap();
            guard.release().await.unwrap();
        }));
        wait_children(&observer, PATH, i + 2).await;
    }
    let sequences: Vec<i64> = rw.contenders().await.unwrap().iter().map(|p| p.sequence.unwrap()).collect();
    assert!(sequences.iter().filter(|&&s| s == i32::MAX as i64).count() > 1, "crossed the limit: {sequences:?}");
    let labels: Vec<String> =
        rw.contenders().await.unwrap().iter().map(|p| p.identity.as_ref().unwrap().owner.clone()).collect();
    let expected: Vec<String> = std::iter::once("gate".to_owned()).chain((0..7).map(|i| format!("c{i}"))).collect();
    assert_eq!(labels, expected, "queue order is arrival order");
    drop(events);
    gate.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // Replay the log: writers alone, readers together only between writers, and each group
    // (a writer, or readers between writers) in arrival order.
    let group = [0, 1, 1, 2, 3, 4, 5];
    let (mut inside, mut entered) = (Vec::new(), Vec::new());
    while let Some((i, mode, enters)) = log.recv().await {
        if enters {
            assert!(
                inside.iter().all(|(_, m)| *m == Mode::Read) && (mode == Mode::Read || inside.is_empty()),
                "{i} entered with {inside:?}"
            );
            inside.push((i, mode));
            entered.push(group[i]);
        } else {
            inside.retain(|(j, _)| *j != i);
        }
    }
    assert_eq!(entered, [0, 1, 1, 2, 3, 4, 5], "entered in arrival order");
    wait_children(&observer, PATH, 0).await;
    client.close().await;
}
