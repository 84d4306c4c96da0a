//! The handoff without a listing: when the node a waiter watches goes and it was the only one
//! keeping the waiter out, the waiter holds after one small check of its own node instead of
//! listing the whole queue again. These tests hold it to that, and to the cases that break
//! naive versions of it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use zklock::binding::LockBinding;
use zklock::{Client, ClientOptions, Owner};
use zklock_testkit::proxy::request_op;
use zklock_testkit::{Cluster, Proxy};

/// Waits until `node` (a name under `path`) is watched by `sessions` sessions.
async fn watched_by(connect: &str, path: &str, node: &str, sessions: usize) {
    let full = format!("{path}/{node}");
    wait_until(&format!("{node} watched by {sessions} sessions"), Duration::from_secs(10), || {
        let watches = watches_under(connect, &full);
        let found = watches.iter().any(|(watched, by)| *watched == full && by.len() == sessions);
        async move { found }
    })
    .await;
}

/// Queues `waiters` in one session behind a proxy, behind a holder in another, one at a time so
/// arrival order is known; releases the holder and lets the chain run. Checks FIFO and that no
/// two ever held at once. Returns the bytes the waiters' client got from the server per handoff,
/// and the sequences of the queue as it stood.
async fn run_a_chain(cluster: &Cluster, path: &str, waiters: usize) -> (u64, Vec<i64>) {
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let holder_client = client_at(&cluster.connect_string()).await;
    let waiters_client = client_at(&proxy.address()).await;
    let holder = holder_client.lock(path).unwrap().acquire(&Owner::new(1_000_000)).await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(AtomicUsize::new(0));
    let lock = waiters_client.lock(path).unwrap();
    let mut tasks = Vec::new();
    for i in 0..waiters {
        let (lock, order, inside) = (lock.clone(), order.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire(&Owner::new(i as u64)).await.unwrap();
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
            order.lock().push(i);
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
        wait_children(&observer, path, i + 2).await;
    }
    let sequences = holder_client.lock(path).unwrap().contenders().await.unwrap();
    let sequences = sequences.iter().map(|p| p.sequence.unwrap()).collect();
    let (_, down_before) = proxy.forwarded();
    holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let (_, down_after) = proxy.forwarded();
    assert_eq!(*order.lock(), (0..waiters).collect::<Vec<_>>(), "held in arrival order");
    holder_client.close().await;
    waiters_client.close().await;
    ((down_after - down_before) / waiters as u64, sequences)
}

/// A chain of waiters in one session: each handoff costs the waiter's client a small, constant
/// number of bytes from the server, not a listing of the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handoff_lists_nothing() {
    let (per_handoff, _) = run_a_chain(&Cluster::standalone(), "/locks/handoff", 200).await;
    // A listing of the queue here is ~75 bytes a waiter (the names), so listing at each handoff
    // would average ~7,500 bytes; the watch event, the check of our node and the delete's reply
    // are ~250.
    assert!(per_handoff < 1_000, "{per_handoff} bytes from the server per handoff");
}

/// The same chain across ZooKeeper's sequence limit, where the queue is ordered by creation
/// zxid: the handoffs still list nothing (a listing here would also cost a read of every
/// contender's stat), and order holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handoff_across_the_sequence_limit_lists_nothing() {
    const PATH: &str = "/locks/handoff-overflow";
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, 2_147_483_640).start();
    let (per_handoff, sequences) = run_a_chain(&cluster, PATH, 40).await;
    assert!(sequences.iter().filter(|&&s| s == i32::MAX as i64).count() > 1, "crossed the limit: {sequences:?}");
    // Listing at each handoff would average ~20 names and ~20 stats with their data: ~5,000 bytes.
    assert!(per_handoff < 1_000, "{per_handoff} bytes from the server per handoff");
}

/// A waiter ahead gives up: the waiter behind it was not next, so it must look again, and wait
/// for the holder, not take the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_ahead_that_cancels_does_not_let_the_next_one_in() {
    let path = unique_path("handoff-cancel");
    let connect = connect_string();
    let observer = observer().await;
    let (h, a, b) = (client().await, client().await, client().await);
    let holder = h.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let ahead = tokio::spawn({
        let lock = a.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await }
    });
    wait_children(&observer, &path, 2).await;
    let behind = tokio::spawn({
        let lock = b.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(3)).await.unwrap() }
    });
    wait_children(&observer, &path, 3).await;
    ahead.abort();
    // The waiter behind looks again and watches the holder's node: the holder's own session
    // watches it too (its lost-lock watch), so two sessions.
    let holder_node = holder.hold().node_path().rsplit('/').next().unwrap().to_owned();
    watched_by(&connect, &path, &holder_node, 2).await;
    assert!(!behind.is_finished(), "the holder still holds");
    assert_eq!(h.lock(&path).unwrap().holder().await.unwrap().unwrap().node, holder_node);
    holder.release().await.unwrap();
    behind.await.unwrap().release().await.unwrap();
    for client in [h, a, b] {
        client.close().await;
    }
}

/// The holder's session expires: its node goes, and the waiter behind it holds (the handoff
/// without a listing), once and alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predecessor_whose_session_expires_hands_over() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let session = Duration::from_secs(2);
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let stalled = Client::connect_with(&proxy.address(), options).await.unwrap();
    let waiter = client_at(&cluster.connect_string()).await;
    let path = "/locks/handoff-expiry";
    let holder = stalled.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let next = tokio::spawn({
        let lock = waiter.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    let observer = observer_at(&cluster.connect_string()).await;
    wait_children(&observer, path, 2).await;
    proxy.stall();
    let guard = tokio::time::timeout(session * 4, next).await.expect("the waiter gets in").unwrap();
    assert_eq!(children(&observer, path).await, vec![guard.hold().node_path().rsplit('/').next().unwrap()]);
    assert!(holder.hold().lost().await.is_some());
    guard.release().await.unwrap();
    proxy.pass();
    stalled.close().await;
    waiter.close().await;
}

/// Someone deletes the waiter's own node while it waits: when the node ahead goes, the waiter
/// must not hold without a node (a later arrival would hold too); it queues again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_own_node_was_deleted_queues_again() {
    let path = unique_path("handoff-own-deleted");
    let observer = observer().await;
    let (h, b) = (client().await, client().await);
    let holder = h.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let waiting = tokio::spawn({
        let lock = b.lock(&path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    wait_children(&observer, &path, 2).await;
    let holder_node = holder.hold().node_path().rsplit('/').next().unwrap().to_owned();
    let waiter_node = children(&observer, &path).await.into_iter().find(|name| *name != holder_node).unwrap();
    observer.delete(&format!("{path}/{waiter_node}"), None).await.unwrap();
    holder.release().await.unwrap();
    let guard = waiting.await.unwrap();
    let held_node = guard.hold().node_path().rsplit('/').next().unwrap().to_owned();
    assert_ne!(held_node, waiter_node, "it queued again with a new node");
    assert_eq!(children(&observer, &path).await, vec![held_node], "and holds by a node that exists");
    guard.release().await.unwrap();
    h.close().await;
    b.close().await;
}

/// A queue whose listing is larger than the server's packet limit (jute.maxbuffer, 1 MB by
/// default: ~17,000 Curator-style names, where the Java client refuses the reply, so Curator's
/// recipes fail). The server sends such replies (it checks only what it
/// receives), zklock's client takes them, and the multi-reads that list the contenders are
/// split under the limit: zklock queues, lists and gets the lock behind 20,000 others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_longer_than_one_packet_of_names() {
    use zookeeper_client as zk;
    const OTHERS: usize = 20_000;
    let path = unique_path("handoff-long-queue");
    let observer = observer().await;
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    observer.mkdir(&path, &persistent).await.unwrap();
    // Curator-style names, as other contenders would make them.
    let prefixes: Vec<String> =
        (0..OTHERS).map(|i| format!("{path}/_c_{i:08x}-0000-4000-8000-000000000000-lock-")).collect();
    let mut others = Vec::with_capacity(OTHERS);
    for chunk in prefixes.chunks(1_000) {
        let creates: Vec<_> = chunk.iter().map(|prefix| observer.create(prefix, b"", &ephemeral)).collect();
        for created in futures::future::join_all(creates).await {
            let (_, sequence) = created.unwrap();
            others.push(sequence);
        }
    }
    let names: usize = children(&observer, &path).await.iter().map(|name| 4 + name.len()).sum();
    assert!(names > 1_048_575, "the listing ({names} bytes) is over the default packet limit");

    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(&Owner::new(1)).await.unwrap() }
    });
    wait_children(&observer, &path, OTHERS + 1).await;
    let contenders = lock.contenders().await.unwrap();
    assert_eq!(contenders.len(), OTHERS + 1);
    assert!(contenders.last().unwrap().identity.is_some(), "ours is last: {:?}", contenders.last());

    let deletes: Vec<String> =
        prefixes.iter().zip(&others).map(|(prefix, sequence)| format!("{prefix}{sequence}")).collect();
    for chunk in deletes.chunks(1_000) {
        for deleted in futures::future::join_all(chunk.iter().map(|node| observer.delete(node, None))).await {
            deleted.unwrap();
        }
    }
    let guard = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("it gets the lock").unwrap();
    guard.release().await.unwrap();
    client.close().await;
}

/// A holder on `path` in one session, and a client behind a fault proxy for a burst of waiters
/// (the observer sees the server directly).
struct BehindAHolder {
    holder: zklock::LockGuard,
    waiters_client: Client,
    holder_client: Client,
    observer: zookeeper_client::Client,
    proxy: Proxy,
    cluster: Cluster,
}

async fn behind_a_holder(path: &str) -> BehindAHolder {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let holder_client = client_at(&cluster.connect_string()).await;
    let waiters_client = client_at(&proxy.address()).await;
    let holder = holder_client.lock(path).unwrap().acquire(&Owner::new(1_000)).await.unwrap();
    BehindAHolder { holder, waiters_client, holder_client, observer, proxy, cluster }
}

/// A burst of acquisitions on one client shares its listings: the queue is built with a few
/// listings, not one per waiter (each of a queue that grows with the burst), and each waiter
/// still holds exactly one watch on the server, in the order the calls were made. More waiters
/// than the client lets have creates in flight at once (1,024): those after wait for a place,
/// and still queue in call order. Once queued, and again once drained, the memory the burst
/// left behind is given back to the system.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_waiters_shares_its_listings_keeps_one_watch_each_and_gives_memory_back() {
    const WAITERS: usize = 1_500;
    let path = "/locks/burst";
    let BehindAHolder { holder, waiters_client, holder_client, observer, proxy, cluster } = behind_a_holder(path).await;

    let lock = waiters_client.lock(path).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (_, down_before) = proxy.forwarded();
    let given_back_before = zklock::times_given_back();
    // Begun one after another, with no waiting in between: call order is queue order.
    let acquisitions: Vec<_> = (0..WAITERS).map(|i| (i, lock.begin_acquire(&Owner::new(i as u64), None))).collect();
    let tasks: Vec<_> = acquisitions
        .into_iter()
        .map(|(i, acquisition)| {
            let (lock, order) = (lock.clone(), order.clone());
            tokio::spawn(async move {
                assert!(acquisition.await.unwrap().is_acquired(), "waits until held");
                order.lock().push(i);
                lock.release(&Owner::new(i as u64)).await.unwrap();
            })
        })
        .collect();
    wait_children(&observer, path, WAITERS + 1).await;
    let session = format!("0x{:x}", waiters_client.session_id().unwrap());
    wait_until("every waiter watches its node ahead", Duration::from_secs(20), || {
        let watches = watches_under(&cluster.connect_string(), path);
        let by_waiters = watches.iter().filter(|(_, sessions)| sessions.contains(&session)).count();
        async move { by_waiters == WAITERS }
    })
    .await;
    let (_, down_queued) = proxy.forwarded();
    // One listing per waiter would be ~75 bytes a name times WAITERS²/2: ~84 MB.
    let queueing = down_queued - down_before;
    assert!(queueing < 3_000_000, "{queueing} bytes from the server to queue {WAITERS} waiters");
    // The burst filled the window of creates in flight; once it emptied, the memory of the
    // burst's creates was given back to the system (see `memory`).
    wait_until("memory given back once the burst is queued", Duration::from_secs(10), || async move {
        zklock::times_given_back() > given_back_before
    })
    .await;
    let given_back_queued = zklock::times_given_back();

    holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock(), (0..WAITERS).collect::<Vec<_>>(), "held in call order");
    // More than a burst's worth of waiters ended: their memory was given back too.
    wait_until("memory given back as the queue drained", Duration::from_secs(10), || async move {
        zklock::times_given_back() > given_back_queued
    })
    .await;
    holder_client.close().await;
    waiters_client.close().await;
}

/// A client keeps at most 1,024 creates awaiting their answers: with its link stalled, a burst of
/// 1,500 acquisitions sends 1,024 creates and the rest wait for a place (under the send turn, so
/// still in call order); once the link passes again, every one of them queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_keeps_at_most_a_window_of_creates_in_flight() {
    const WAITERS: usize = 1_500;
    const WINDOW: usize = 1_024;
    let path = "/locks/window";
    let BehindAHolder { holder, waiters_client, holder_client, observer, proxy, cluster: _cluster } =
        behind_a_holder(path).await;
    let lock = waiters_client.lock(path).unwrap();
    // A try first: the lock object has checked the path, so each acquisition below sends its
    // create at once.
    assert!(lock.try_acquire(&Owner::new(999)).await.unwrap().is_none(), "held by the holder");

    proxy.stall();
    let acquisitions: Vec<_> = (0..WAITERS).map(|i| lock.begin_acquire(&Owner::new(i as u64), None)).collect();
    // Each began up to its create's answer, or to its wait for a place: nothing was answered.
    assert_eq!(waiters_client.creates_in_flight(), WINDOW, "creates awaiting their answers");
    let tasks: Vec<_> = acquisitions.into_iter().map(|acquisition| tokio::spawn(acquisition)).collect();

    proxy.pass();
    wait_children(&observer, path, WAITERS + 1).await;
    wait_until("every create and its listing answered", Duration::from_secs(10), || {
        let in_flight = waiters_client.creates_in_flight();
        async move { in_flight == 0 }
    })
    .await;
    waiters_client.close().await;
    for task in tasks {
        assert!(task.await.unwrap().is_err(), "closed while waiting");
    }
    holder.release().await.unwrap();
    holder_client.close().await;
}

/// Three clients: a holder, the next in line and the one behind it. When the holder goes, the
/// one behind looks again (its informant went) and watches its own node, while the next in line
/// holds; when that one releases, the waiter behind holds without sending a single request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_between_clients_sends_nothing() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let (h, b) = (client_at(&connect).await, client_at(&connect).await);
    let c = client_at(&proxy.address()).await;
    let path = "/locks/handoff-informed";
    let holder = h.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let next = tokio::spawn({
        let lock = b.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    wait_children(&observer, path, 2).await;
    let behind = tokio::spawn({
        let lock = c.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(3)).await.unwrap() }
    });
    wait_children(&observer, path, 3).await;
    let queue: Vec<String> = h.lock(path).unwrap().contenders().await.unwrap().into_iter().map(|p| p.node).collect();
    let node = |name: &str| format!("{path}/{name}");
    let c_session = c.session_id().unwrap();
    // Behind: its predecessor and its informant, the holder's node.
    wait_watched_by(&connect, &node(&queue[1]), c_session).await;
    wait_watched_by(&connect, &node(&queue[0]), c_session).await;

    holder.release().await.unwrap();
    let next_guard = next.await.unwrap();
    // Informed, it looked again and, next in line now, watches its own node.
    let own = node(&queue[2]);
    wait_watched_by(&connect, &own, c_session).await;
    assert!(!behind.is_finished(), "the next in line holds");

    // Any request from it but a ping, from here until it holds, would cut its connection.
    let sent = Arc::new(parking_lot::Mutex::new(Vec::new()));
    proxy.cut_on_next_request_matching(false, {
        let sent = sent.clone();
        move |frame| {
            let op = request_op(frame);
            if op != Some(11) {
                sent.lock().push(op);
            }
            op != Some(11)
        }
    });
    next_guard.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), behind).await.expect("it gets the lock").unwrap();
    proxy.disarm();
    assert_eq!(proxy.request_cuts(), 0, "the handoff sent a request (op codes {:?})", sent.lock());
    assert_eq!(guard.hold().node_path(), own);
    assert_eq!(children(&observer, path).await, vec![queue[2].clone()]);
    guard.release().await.unwrap();
    for client in [h, b, c] {
        client.close().await;
    }
}

/// The waiter next in line watches its own node so that a handoff needs no request; but after a
/// reconnection the server reports what changed meanwhile in no set order. Here its own node and
/// the holder's both go while it is disconnected: it must ask the server, find its node gone,
/// and queue again, not hold without a node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_reconnected_asks_before_taking_the_handoff() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let h = client_at(&connect).await;
    let b = client_at(&proxy.address()).await;
    let path = "/locks/handoff-reconnected";
    let holder = h.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let waiting = tokio::spawn({
        let lock = b.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    wait_children(&observer, path, 2).await;
    let queue: Vec<String> = h.lock(path).unwrap().contenders().await.unwrap().into_iter().map(|p| p.node).collect();
    let waiter_node = format!("{path}/{}", queue[1]);
    wait_watched_by(&connect, &waiter_node, b.session_id().unwrap()).await;

    proxy.cut();
    observer.delete(&waiter_node, None).await.unwrap();
    holder.release().await.unwrap();
    proxy.pass();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("it gets the lock").unwrap();
    assert_ne!(guard.hold().node_path(), waiter_node, "it queued again with a new node");
    assert_eq!(children(&observer, path).await, vec![guard.hold().node_path().rsplit('/').next().unwrap().to_owned()]);
    guard.release().await.unwrap();
    h.close().await;
    b.close().await;
}
