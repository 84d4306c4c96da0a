//! The lock recipe against a real ZooKeeper server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use zklock::binding::LockBinding;
use zklock::{ErrorKind, LockOptions, LostReason, Owner};

/// Contenders queue in the order they arrive and hold in that order, across sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_order_with_twenty_contenders_across_four_sessions() {
    let path = unique_path("fifo");
    let observer = observer().await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client().await);
    }
    let gate = clients[0].lock(&path).unwrap().acquire(&Owner::new(999)).await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..20usize {
        let lock = clients[i % 4].lock(&path).unwrap();
        let (order, inside) = (order.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let owner = Owner::with_label(i as u64, format!("contender-{i}"));
            let guard = lock.acquire(&owner).await.unwrap();
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
            order.lock().push(i);
            tokio::task::yield_now().await;
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
        // Queued before the next one starts, so arrival order is known.
        wait_children(&observer, &path, i + 2).await;
    }

    let queue = clients[1].lock(&path).unwrap().contenders().await.unwrap();
    let labels: Vec<String> = queue.iter().map(|p| p.identity.as_ref().unwrap().owner.clone()).collect();
    let expected: Vec<String> = (0..20).map(|i| format!("contender-{i}")).collect();
    assert_eq!(labels[0], "999");
    assert_eq!(labels[1..], expected[..], "queue order is arrival order");

    gate.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock(), (0..20).collect::<Vec<_>>(), "held in arrival order");
    wait_children(&observer, &path, 0).await;
    for client in clients {
        client.close().await;
    }
}

/// One holder, thirty waiters in three clients: each waiter watches its predecessor and the node
/// before that (its informant: when it goes, the waiter looks again while its predecessor holds),
/// the next in line also its own node, the holder its own node; nobody watches the lock path, and
/// each release lets exactly one in (and wakes at most one other, to look again).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_herd_each_waiter_watches_at_most_two_nodes_ahead() {
    let connect = connect_string();
    let path = unique_path("herd");
    let observer = observer().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client().await);
    }
    let holder = clients[0].lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();

    let (acquired_tx, mut acquired) = mpsc::unbounded_channel();
    let mut releases = Vec::new();
    for i in 0..30usize {
        let lock = clients[i % 3].lock(&path).unwrap();
        let acquired_tx = acquired_tx.clone();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        releases.push(release_tx);
        tokio::spawn(async move {
            let guard = lock.acquire(&Owner::with_label(100 + i as u64, format!("waiter-{i}"))).await.unwrap();
            acquired_tx.send(i).unwrap();
            let _ = release_rx.await;
            guard.release().await.unwrap();
        });
        wait_children(&observer, &path, i + 2).await;
    }
    let queue: Vec<String> = clients[0]
        .lock(&path)
        .unwrap()
        .contenders()
        .await
        .unwrap()
        .into_iter()
        .map(|p| format!("{path}/{}", p.node))
        .collect();
    assert_eq!(queue.len(), 31);

    // Who should watch what while the holder is at queue position `head` (waiter j's node is
    // queue[j + 1]; consecutive waiters are in different clients): waiter j its predecessor
    // queue[j] and, unless it is next in line, its informant queue[j - 1]; the next in line
    // (waiter `head`) its own node; the holder its own node.
    let session = |i: usize| format!("0x{:x}", clients[i % 3].session_id().unwrap());
    let expected = |head: usize| {
        let mut expected: Vec<(String, Vec<String>)> = (head..30).map(|k| (queue[k].clone(), vec![])).collect();
        for waiter in head..30 {
            expected[waiter - head].1.push(session(waiter));
            if waiter > head {
                expected[waiter - 1 - head].1.push(session(waiter));
            }
        }
        if head + 1 < 30 {
            expected[1].1.push(session(head));
        }
        let holder_session = if head == 0 { session(0) } else { session(head - 1) };
        expected[0].1.push(holder_session);
        for (_, sessions) in expected.iter_mut() {
            sessions.sort();
            sessions.dedup();
        }
        expected
    };
    let actual = || {
        let mut watches = watches_under(&connect, &path);
        assert!(watches.iter().all(|(p, _)| *p != path), "nobody watches the lock path: {watches:?}");
        for (_, sessions) in watches.iter_mut() {
            sessions.sort();
        }
        watches.sort_by_key(|(p, _)| queue.iter().position(|q| q == p));
        watches
    };
    let settled = |head: usize| {
        let (expected, actual) = (&expected, &actual);
        move || async move { actual() == expected(head) }
    };
    wait_until("the waiters' watches and the holder's own are set", Duration::from_secs(10), settled(0)).await;

    holder.release().await.unwrap();
    for round in 0..3usize {
        assert_eq!(acquired.recv().await.unwrap(), round, "the next in line acquires");
        // The released node's watches fired; the waiter informed by it watches its own node now;
        // every other waiter's watches are untouched.
        wait_until("the next in line moved up", Duration::from_secs(10), settled(round + 1)).await;
        assert!(acquired.try_recv().is_err(), "only one waiter woke");
        releases.remove(0).send(()).unwrap();
    }
    for release in releases {
        release.send(()).unwrap();
    }
    for _ in 3..30 {
        acquired.recv().await.unwrap();
    }
    wait_children(&observer, &path, 0).await;
}

/// The predecessor vanishes after the listing and before the watch is set: the waiter lists
/// again instead of hanging on a watch that will never fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predecessor_deleted_between_listing_and_watching() {
    let path = unique_path("gap");
    let observer = Arc::new(observer().await);
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let holder_node = holder.hold().node_path().to_owned();

    let deleted = Arc::new(AtomicUsize::new(0));
    let hook_observer = observer.clone();
    let hook_deleted = deleted.clone();
    let options = LockOptions {
        before_watch: Some(Arc::new(move |predecessor: String| {
            let (observer, deleted) = (hook_observer.clone(), hook_deleted.clone());
            async move {
                // An outsider removes the predecessor in the gap, only the first time.
                if deleted.fetch_add(1, Ordering::SeqCst) == 0 {
                    observer.delete(&predecessor, None).await.unwrap();
                }
            }
            .boxed()
        })),
        ..Default::default()
    };
    let waiter = b.lock_with(&path, options).unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter.acquire(&Owner::new(2)))
        .await
        .expect("the waiter must not hang on a deleted predecessor")
        .unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    assert_ne!(guard.hold().node_path(), holder_node);
    assert_eq!(children(&observer, &path).await.len(), 1);
    guard.release().await.unwrap();
    assert_eq!(holder.release().await.unwrap_err().kind(), ErrorKind::LockLost);
}

/// Reentrant to depth 3 with no ZooKeeper traffic, one node throughout, freed at count zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_to_depth_three_then_full_release() {
    let connect = connect_string();
    let path = unique_path("reentrant");
    let observer = observer().await;
    let client = client().await;
    let other = client_at(&connect).await;
    let lock = client.lock(&path).unwrap();
    let me = Owner::new(7);

    let first = lock.acquire(&me).await.unwrap();
    let session = client.session_id().unwrap();
    // The holder's watch on its own node goes out right after acquiring; let it land first.
    let node = first.hold().node_path().to_owned();
    wait_until("the holder watches its node", Duration::from_secs(10), || async {
        watches_under(&connect, &node).iter().any(|(_, sessions)| sessions.contains(&format!("0x{session:x}")))
    })
    .await;
    let before = packets_received(&connect, session);
    let second = lock.acquire(&me).await.unwrap();
    let third = lock.acquire_timeout(&me, Duration::from_millis(1)).await.unwrap();
    assert_eq!(packets_received(&connect, session), before, "re-entry sends nothing to ZooKeeper");
    assert_eq!(lock.hold_of(&me).unwrap().1, 3);
    assert_eq!(first.hold(), second.hold());
    assert_eq!(second.hold(), third.hold());
    assert_eq!(children(&observer, &path).await.len(), 1, "one node for all three levels");

    third.release().await.unwrap();
    second.release().await.unwrap();
    assert!(lock.is_held_by(&me));
    assert_eq!(children(&observer, &path).await.len(), 1);
    assert!(other.lock(&path).unwrap().try_acquire(&Owner::new(8)).await.unwrap().is_none(), "still held at depth 1");

    first.release().await.unwrap();
    assert!(!lock.is_held_by(&me));
    assert!(children(&observer, &path).await.is_empty(), "node deleted at count zero, before release returned");
    let next = other.lock(&path).unwrap().try_acquire(&Owner::new(8)).await.unwrap().expect("free again");
    next.release().await.unwrap();
}

/// A different owner on the same `Lock` is a separate contender; releasing without holding is
/// `NotOwner` and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_non_owner_fails_and_changes_nothing() {
    let path = unique_path("notowner");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let (alice, bob) = (Owner::new(1), Owner::new(2));

    let err = lock.release(&bob).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotOwner);
    assert!(err.to_string().contains(&path), "{err}");

    let held = lock.acquire(&alice).await.unwrap();
    let node = children(&observer, &path).await;
    assert_eq!(lock.release(&bob).await.unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(children(&observer, &path).await, node, "nothing changed");
    assert!(lock.is_held_by(&alice));
    assert_eq!(lock.hold_of(&alice).unwrap().1, 1);

    // Same Lock object, other owner: a fair contender of its own, not a re-entry.
    assert!(lock.try_acquire(&bob).await.unwrap().is_none());
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(&bob).await.unwrap().into_hold() }
    });
    wait_children(&observer, &path, 2).await;
    held.release().await.unwrap();
    let bobs = waiting.await.unwrap();
    assert!(lock.is_held_by(&Owner::new(2)));
    assert_eq!(lock.release(&alice).await.unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(children(&observer, &path).await, vec![bobs.node_path().rsplit('/').next().unwrap().to_owned()]);
    lock.release(&Owner::new(2)).await.unwrap();
}

/// A timeout, a try and a cancelled acquire each leave no node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_try_and_cancel_leave_no_node() {
    let path = unique_path("orphans");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let only_holder = children(&observer, &path).await;
    let lock = b.lock(&path).unwrap();

    let started = Instant::now();
    let err = lock.acquire_timeout(&Owner::new(2), Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains(&path), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(children(&observer, &path).await, only_holder, "timeout removed its node before returning");

    assert!(lock.try_acquire(&Owner::new(2)).await.unwrap().is_none());
    assert_eq!(children(&observer, &path).await, only_holder, "try removed its node before returning");

    let pending = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(&Owner::new(3)).await }
    });
    wait_children(&observer, &path, 2).await;
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());
    wait_children(&observer, &path, 1).await;
    assert_eq!(children(&observer, &path).await, only_holder, "the cancelled attempt's node is gone");
    assert!(!lock.is_held_by(&Owner::new(3)));

    // Cancelled while the create is in flight: dropped right after being polled once.
    for id in 10..20 {
        let owner = Owner::new(id);
        let mut attempt = Box::pin(lock.acquire(&owner));
        assert!(futures::poll!(&mut attempt).is_pending());
        drop(attempt);
    }
    // A request on the same session is answered after those creates were applied, so from here
    // on any node they made is visible, and must then disappear.
    lock.contenders().await.unwrap();
    wait_children(&observer, &path, 1).await;
    assert_eq!(children(&observer, &path).await, only_holder);
    holder.release().await.unwrap();
    wait_children(&observer, &path, 0).await;
}

/// `close()` ends the session at once: its locks are released immediately, and pending
/// attempts fail with `Closed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_at_once_and_fails_pending_attempts() {
    let path = unique_path("close");
    let observer = observer().await;
    let (a, b, c) = (client().await, client().await, client().await);
    assert!(a.session_timeout() >= Duration::from_secs(4), "a long session shows close does not wait for it");
    let _held = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap().into_hold();
    let next = tokio::spawn({
        let lock = b.lock(&path).unwrap();
        async move {
            let guard = lock.acquire(&Owner::new(2)).await.unwrap();
            (Instant::now(), guard.into_hold())
        }
    });
    wait_children(&observer, &path, 2).await;
    let closing = Instant::now();
    a.close().await;
    let (acquired_at, _) = next.await.unwrap();
    assert!(acquired_at.duration_since(closing) < a.session_timeout() / 2, "the next waiter got it at once");
    assert!(a.is_closed());
    assert_eq!(a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap_err().kind(), ErrorKind::Closed);

    let pending = tokio::spawn({
        let lock = c.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(3)).await }
    });
    wait_children(&observer, &path, 2).await;
    c.close().await;
    assert_eq!(pending.await.unwrap().unwrap_err().kind(), ErrorKind::Closed);
    wait_children(&observer, &path, 1).await;
    b.close().await;
    wait_children(&observer, &path, 0).await;
}

/// Many locks share one client, and owners on one client contend fairly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_locks_share_one_client() {
    let client = client().await;
    let paths: Vec<String> = (0..5).map(|i| unique_path(&format!("shared-{i}"))).collect();
    let mut guards = Vec::new();
    for path in &paths {
        guards.push(client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap());
    }
    for (path, guard) in paths.iter().zip(&guards) {
        assert!(guard.hold().node_path().starts_with(path.as_str()));
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
}

/// Node names follow Curator's InterProcessMutex, and the node data names its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_node_names_and_owner_identity() {
    let path = unique_path("identity");
    let client = client().await;
    let options = LockOptions { identifier: Some("nightly-report".into()), ..Default::default() };
    let lock = client.lock_with(&path, options).unwrap();
    let guard = lock.acquire(&Owner::with_label(5, "worker-5")).await.unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(&Owner::with_label(6, "worker-6")).await.unwrap().release().await.unwrap() }
    });
    let observer = observer().await;
    wait_children(&observer, &path, 2).await;

    let contenders = lock.contenders().await.unwrap();
    assert_eq!(contenders.len(), 2);
    for p in &contenders {
        let (prefix, sequence) = p.node.split_at(p.node.len() - 10);
        let uuid = prefix.strip_prefix("_c_").and_then(|s| s.strip_suffix("-lock-")).expect(&p.node);
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "uuid in {}", p.node);
        assert!(sequence.chars().all(|c| c.is_ascii_digit()));
        assert_eq!(p.sequence, Some(sequence.parse().unwrap()));
        assert_eq!(p.session_id, client.session_id().unwrap());
        let identity = p.identity.as_ref().expect("zklock identity");
        assert_eq!(identity.pid, std::process::id());
        assert_eq!(identity.lang, "rust");
        assert_eq!(identity.identifier.as_deref(), Some("nightly-report"));
        assert!(!identity.host.is_empty());
    }
    let holder = lock.holder().await.unwrap().unwrap();
    assert_eq!(holder.identity.unwrap().owner, "worker-5");
    assert_eq!(contenders[1].identity.as_ref().unwrap().owner, "worker-6");
    assert_eq!(holder.fencing_token, guard.fencing_token());
    assert!(contenders[1].fencing_token > guard.fencing_token());
    guard.release().await.unwrap();
    waiter.await.unwrap();
    assert!(lock.holder().await.unwrap().is_none());
}

/// A missing lock path is created (as containers); if it vanishes under a waiting attempt, the
/// attempt recreates it and goes on rather than failing with NoNode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_path_created_on_demand_and_recreated_when_it_vanishes() {
    let path = format!("{}/deep/er", unique_path("vanish"));
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let (_, stat) = observer.get_data(&path).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0);

    let waiting = tokio::spawn({
        let lock = b.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await }
    });
    wait_children(&observer, &path, 2).await;
    // An operator removes the whole lock path at once, in one transaction: the waiter's node
    // first. (The holder's first, the waiter next in line may take the handoff before it hears
    // of its own node: see `a_waiter_whose_node_goes_with_its_predecessors_is_told`.)
    let holder_node = holder.hold().node_path().to_owned();
    let mut nodes: Vec<String> =
        children(&observer, &path).await.iter().map(|child| format!("{path}/{child}")).collect();
    nodes.sort_by_key(|node| *node == holder_node);
    let mut removal = observer.new_multi_writer();
    for node in &nodes {
        removal.add_delete(node, None).unwrap();
    }
    removal.add_delete(&path, None).unwrap();
    removal.commit().await.unwrap();

    let guard = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("no hang").unwrap().unwrap();
    assert_eq!(children(&observer, &path).await.len(), 1, "the path was recreated with the waiter's node");
    assert_eq!(holder.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    guard.release().await.unwrap();
}

/// The node a waiter next in line waits for and the waiter's own node go in one transaction, the
/// predecessor's first. ZooKeeper reports the two deletions in that order, and the waiter may
/// take the handoff on the first before it hears of the second, as it would had they gone in
/// two transactions a moment apart. Either way it is never left believing it holds a node that
/// is gone: it queues again and holds by a node that exists, or its hold is reported lost
/// (node deleted) at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_node_goes_with_its_predecessors_is_told() {
    let path = unique_path("together");
    let connect = connect_string();
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let waiting = tokio::spawn({
        let lock = b.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    wait_children(&observer, &path, 2).await;
    let holder_node = holder.hold().node_path().to_owned();
    let waiter_node = children(&observer, &path)
        .await
        .iter()
        .map(|child| format!("{path}/{child}"))
        .find(|n| *n != holder_node)
        .unwrap();
    // Next in line, it watches its own node.
    wait_watched_by(&connect, &waiter_node, b.session_id().unwrap()).await;

    let mut removal = observer.new_multi_writer();
    removal.add_delete(&holder_node, None).unwrap();
    removal.add_delete(&waiter_node, None).unwrap();
    removal.commit().await.unwrap();

    let guard = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("no hang").unwrap();
    if guard.hold().node_path() == waiter_node {
        let lost = tokio::time::timeout(Duration::from_secs(5), guard.hold().lost()).await.expect("told at once");
        assert_eq!(lost, Some(LostReason::NodeDeleted));
        assert_eq!(guard.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    } else {
        let held = guard.hold().node_path().rsplit('/').next().unwrap().to_owned();
        assert_eq!(children(&observer, &path).await, vec![held], "it queued again and holds by a node that exists");
        guard.release().await.unwrap();
    }
    assert_eq!(holder.release().await.unwrap_err().kind(), ErrorKind::LockLost);
}

/// Dropping a guard releases in the background and never leaks the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guard_releases_in_background() {
    let path = unique_path("drop");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    {
        let _outer = lock.acquire(&Owner::new(1)).await.unwrap();
        let _inner = lock.acquire(&Owner::new(1)).await.unwrap();
    }
    wait_children(&observer, &path, 0).await;
    assert!(!lock.is_held_by(&Owner::new(1)));
}

/// Digest auth: a client with the right credentials locks under a path only its user may use;
/// one without them gets a ZooKeeper error carrying the code and naming the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_auth() {
    let connect = connect_string();
    let base = unique_path("auth");
    let owner_zk =
        zookeeper_client::Client::connector().with_auth("digest", b"alice:secret").connect(&connect).await.unwrap();
    owner_zk
        .mkdir(
            "/zklock-test",
            &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    owner_zk
        .create(&base, b"", &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::creator_all()))
        .await
        .unwrap();
    // The lock path itself admits only alice.
    let path = base.clone();

    let options = zklock::ClientOptions { digest_auth: Some("alice:secret".into()), ..Default::default() };
    let alice = zklock::Client::connect_with(&connect, options).await.unwrap();
    let guard = alice.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    guard.release().await.unwrap();

    let stranger = client().await;
    let err = stranger.lock(&path).unwrap().acquire(&Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(err.zookeeper_code(), Some(-102), "NoAuth: {err}");
    assert!(err.to_string().contains(&path), "{err}");
    wait_children(&owner_zk, &base, 0).await;
    owner_zk.delete(&base, None).await.unwrap();
}

/// Session state as a value and as a stream: connected, then closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_state_value_and_stream() {
    let client = client().await;
    assert_eq!(client.state(), zklock::SessionState::Connected);
    let mut changes = client.state_changes();
    client.close().await;
    assert_eq!(changes.next().await, Some(zklock::SessionState::Closed));
    assert_eq!(changes.next().await, None);
    assert_eq!(client.state(), zklock::SessionState::Closed);
}

/// A condition variable's wait (Python's `threading.Condition`) gives up every level at once and
/// restores them after acquiring again: one call each way, with the node gone in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_level_released_at_once_and_restored() {
    let path = unique_path("every-level");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let me = Owner::new(1);
    for _ in 0..3 {
        assert!(lock.acquire_for(&me, None).await.unwrap().is_acquired());
    }
    assert_eq!(lock.release_every_level(&me).await.unwrap(), 3);
    assert!(lock.hold_of(&me).is_none());
    wait_children(&observer, &path, 0).await;
    assert_eq!(lock.restore_levels(&me, 3).unwrap_err().kind(), zklock::ErrorKind::NotOwner);
    assert!(lock.acquire_for(&me, None).await.unwrap().is_acquired());
    lock.restore_levels(&me, 3).unwrap();
    assert_eq!(lock.hold_of(&me).map(|(_, count)| count), Some(3));
    assert_eq!(lock.release_every_level(&me).await.unwrap(), 3);
    assert_eq!(lock.release_every_level(&me).await.unwrap_err().kind(), zklock::ErrorKind::NotOwner);
    client.close().await;
}

/// Re-entries count without the mutex (one compare-and-swap each): an owner used from several
/// threads at once still never loses or gains a level, and the node goes at the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_counts_stay_exact_under_concurrent_use_of_one_owner() {
    let path = unique_path("reentry-concurrent");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let me = Owner::new(7);
    assert!(matches!(lock.acquire_for(&me, None).await.unwrap(), zklock::Acquired::Held(_)));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (lock, me) = (lock.clone(), me.clone());
            std::thread::spawn(move || {
                for _ in 0..50_000 {
                    lock.try_reenter(&me).expect("holds").expect("not lost");
                    // Each thread's own level is still counted, so this is never the last one.
                    lock.release_nested(&me).expect("a nested level").expect("not lost");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(lock.hold_of(&me).map(|(_, levels)| levels), Some(1));
    wait_children(&observer, &path, 1).await;
    lock.release(&me).await.unwrap();
    wait_children(&observer, &path, 0).await;
    client.close().await;
}

/// More holders than the owner table counts without its mutex (read holders of one lock handle):
/// each re-enters and releases by the same rules, and every node goes at its last level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_holders_of_one_handle_each_count_their_own_levels() {
    let path = unique_path("reentry-many");
    let observer = observer().await;
    let client = client().await;
    let read = client.read_write_lock(&path).unwrap().read().clone();
    let owners: Vec<_> = (1..=7).map(Owner::new).collect();
    for owner in &owners {
        assert!(matches!(read.acquire_for(owner, None).await.unwrap(), zklock::Acquired::Held(_)));
    }
    for (i, owner) in owners.iter().enumerate() {
        for _ in 0..=i {
            assert!(matches!(read.acquire_for(owner, None).await.unwrap(), zklock::Acquired::Reentered));
        }
    }
    for (i, owner) in owners.iter().enumerate() {
        assert_eq!(read.hold_of(owner).map(|(_, levels)| levels), Some(i as u64 + 2), "owner {i}");
    }
    wait_children(&observer, &path, owners.len()).await;
    for (i, owner) in owners.iter().enumerate() {
        for _ in 0..=i {
            read.release_nested(owner).expect("a nested level").unwrap();
        }
        assert!(read.release_nested(owner).is_none(), "the last level needs the server");
        read.release(owner).await.unwrap();
        assert!(read.hold_of(owner).is_none());
    }
    wait_children(&observer, &path, 0).await;
    client.close().await;
}

/// Handles for one path on one client are one lock: what an owner holds through one it
/// re-enters and releases through another, and a hold outlives every handle until released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_for_one_path_share_their_holds() {
    let path = unique_path("shared-handles");
    let observer = observer().await;
    let client = client().await;
    let me = Owner::new(1);
    let first = client.lock(&path).unwrap();
    assert!(matches!(first.acquire_for(&me, None).await.unwrap(), zklock::Acquired::Held(_)));
    let second = client.lock(&path).unwrap();
    assert!(matches!(second.acquire_for(&me, None).await.unwrap(), zklock::Acquired::Reentered));
    assert_eq!(first.hold_of(&me).map(|(_, levels)| levels), Some(2));
    // Another identifier is another contender, with a table of its own.
    let other =
        client.lock_with(&path, LockOptions { identifier: Some("other".into()), ..Default::default() }).unwrap();
    assert!(!other.is_held_by(&me), "a handle with another identifier does not share the hold");
    second.release(&me).await.unwrap();
    drop((first, second));
    // No handle is left, but the hold is: a new handle finds it and releases it.
    wait_children(&observer, &path, 1).await;
    let later = client.lock(&path).unwrap();
    assert!(later.is_held_by(&me));
    later.release(&me).await.unwrap();
    wait_children(&observer, &path, 0).await;
    drop(other);
    client.close().await;
}

/// One owner (a thread, a task) and one path through two handles (issue 47): handles that agree
/// (identifier, ACL) share its hold and re-enter; a handle of another identifier, or a separate
/// one (C's), would queue behind the owner's own node and wait for ever: refused at once with
/// Deadlock, nothing queued. Two reads do not wait for each other, and another owner waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_through_a_second_handle_re_enters_or_is_refused_as_a_deadlock() {
    let client = client().await;
    let observer = observer().await;
    let path = unique_path("second-handle");
    let owner = Owner::new(1);
    let outer = client.lock(&path).unwrap().acquire(&owner).await.unwrap();
    let same = tokio::time::timeout(Duration::from_secs(5), client.lock(&path).unwrap().acquire(&owner))
        .await
        .expect("a handle that agrees re-enters at once")
        .unwrap();
    for options in [
        LockOptions { identifier: Some("other".into()), ..Default::default() },
        LockOptions { separate: true, ..Default::default() },
    ] {
        let other = client.lock_with(&path, options).unwrap();
        let refused = tokio::time::timeout(Duration::from_secs(5), other.acquire(&owner))
            .await
            .expect("refused at once, not queued behind itself")
            .map(|_| ())
            .expect_err("refused");
        assert_eq!(refused.kind(), ErrorKind::Deadlock, "{refused}");
        assert_eq!(children(&observer, &path).await.len(), 1, "nothing queued");
    }
    // Another owner through another identifier queues, as ever.
    let other =
        client.lock_with(&path, LockOptions { identifier: Some("other".into()), ..Default::default() }).unwrap();
    let waiting = tokio::spawn(async move { other.acquire(&Owner::new(2)).await.unwrap().release().await.unwrap() });
    wait_children(&observer, &path, 2).await;
    same.release().await.unwrap();
    outer.release().await.unwrap();
    waiting.await.unwrap();

    let rw = format!("{path}-rw");
    let read = client.read_write_lock(&rw).unwrap().read().acquire(&owner).await.unwrap();
    let rw_other =
        client.read_write_lock_with(&rw, LockOptions { identifier: Some("b".into()), ..Default::default() }).unwrap();
    let second_read =
        tokio::time::timeout(Duration::from_secs(5), rw_other.read().acquire(&owner)).await.unwrap().unwrap();
    let write = rw_other.write().acquire(&owner).await.map(|_| ()).expect_err("a write behind its own read");
    assert_eq!(write.kind(), ErrorKind::Deadlock, "{write}");
    second_read.release().await.unwrap();
    read.release().await.unwrap();
}

/// A binding holds a unique owner by its serial (its id without the 2^63 bit: Node keeps it as a
/// JavaScript number) and rebuilds the owner from it, labelled anew on each thread: the rebuilt
/// owner is the same owner (it re-enters, and releases what the first took), a unique one, and
/// another serial is another owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_rebuilt_from_its_serial_is_the_same_owner() {
    use zklock::binding::OwnerBinding;
    let path = unique_path("serial");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let (serial, other) = (Owner::unique_serial(), Owner::unique_serial());
    assert!((0..1 << 53).contains(&serial), "a JavaScript number holds it exactly: {serial}");
    assert_ne!(serial, other);
    let first = Owner::from_serial(serial, "async-flow@thread:0");
    assert!(Owner::is_unique_id(first.id()), "{:x}", first.id());
    assert_eq!(first.id(), Owner::unique_id(serial));

    assert!(matches!(lock.acquire_for(&first, None).await.unwrap(), zklock::Acquired::Held(_)));
    let again = Owner::from_serial(serial, "async-flow@thread:1");
    assert!(matches!(lock.acquire_for(&again, Some(Duration::ZERO)).await.unwrap(), zklock::Acquired::Reentered));
    assert_eq!(lock.hold_of(&first).unwrap().1, 2);
    let stranger = Owner::from_serial(other, "async-flow@thread:0");
    assert!(lock.try_acquire(&stranger).await.unwrap().is_none(), "another serial is another owner");
    lock.release(&again).await.unwrap();
    assert!(lock.is_held_by(&first));
    lock.release(&again).await.unwrap();
    assert!(!lock.is_held_by(&first));
    assert!(children(&observer, &path).await.is_empty());
}
