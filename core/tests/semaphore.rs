//! The counting semaphore against a real ZooKeeper server: never more than max leases, first
//! come first served, n leases all or nothing, lost leases, the max from a shared count changed
//! at run time, bad input, and the layout (Curator's InterProcessSemaphoreV2).

mod common;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, Leases, LostReason, MaxLeases, Owner, SemaphoreOptions};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client as zk;

/// The semaphore's two parts, as the server has them: (lease nodes, internal mutex nodes).
async fn parts(zk: &zk::Client, path: &str) -> (Vec<String>, Vec<String>) {
    (children(zk, &format!("{path}/leases")).await, children(zk, &format!("{path}/locks")).await)
}

/// Waits until the semaphore has `leases` lease nodes and `queued` internal mutex nodes.
async fn wait_parts(zk: &zk::Client, path: &str, leases: usize, queued: usize) {
    let what = format!("{path} has {leases} lease nodes and {queued} mutex nodes");
    wait_until(&what, Duration::from_secs(20), || async {
        let (l, q) = parts(zk, path).await;
        l.len() == leases && q.len() == queued
    })
    .await;
}

fn spawn_acquire(
    semaphore: &zklock::Semaphore,
    n: u32,
    order: &Arc<parking_lot::Mutex<Vec<&'static str>>>,
    name: &'static str,
) -> tokio::task::JoinHandle<Leases> {
    let (semaphore, order) = (semaphore.clone(), order.clone());
    tokio::spawn(async move {
        let leases = semaphore.acquire(n).await.unwrap();
        order.lock().push(name);
        leases
    })
}

/// The nodes are Curator's: the internal mutex's `_c_<uuid>-lock-<seq>` under `<path>/locks` while
/// an acquirer is in it, and each lease a protected ephemeral sequential `_c_<uuid>-lease-<seq>`
/// under `<path>/leases`, whose data is zklock's identity; the mutex is gone once the leases are
/// held. Each lease has its own fencing token (its node's creation zxid), rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layout_is_curators() {
    let path = unique_path("sem-layout");
    let observer = observer().await;
    let client = client().await;
    let semaphore = client.semaphore(&path, 3).unwrap();
    let leases = semaphore.acquire(2).await.unwrap();
    assert_eq!(leases.len(), 2);
    wait_parts(&observer, &path, 2, 0).await;
    let (nodes, _) = parts(&observer, &path).await;
    let lease_node = regex_like(r"_c_", "-lease-");
    for node in &nodes {
        assert!(lease_node(node), "{node}");
        let (data, stat) = observer.get_data(&format!("{path}/leases/{node}")).await.unwrap();
        assert_eq!(stat.ephemeral_owner, client.session_id().unwrap(), "ephemeral, this session's");
        let identity: zklock::Identity = serde_json::from_slice(&data).expect("zklock's identity");
        assert_eq!(identity.pid, std::process::id());
    }
    let tokens: Vec<i64> = leases.leases().iter().map(|lease| lease.fencing_token()).collect();
    assert!(tokens[0] < tokens[1], "{tokens:?}");
    for lease in leases.leases() {
        assert_eq!(lease.hold().state(), HoldState::Held);
        assert!(nodes.iter().any(|node| node == lease.node_name()));
    }
    // The mutex node, while a waiter is at the head of its queue.
    let waiter = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire(2).await.unwrap() }
    });
    wait_parts(&observer, &path, 4, 1).await;
    let (_, mutex) = parts(&observer, &path).await;
    assert!(regex_like(r"_c_", "-lock-")(&mutex[0]), "{mutex:?}");
    let participants = semaphore.participants().await.unwrap();
    assert_eq!((participants.leases.len(), participants.waiting_leases, participants.holders().len()), (4, 2, 2));
    assert_eq!(participants.queue.len(), 1);
    assert_eq!(participants.max_leases, 3);
    assert!(participants.holders().iter().all(|p| p.identity.as_ref().is_some_and(|i| i.pid == std::process::id())));
    leases.release().await.unwrap();
    let second = waiter.await.unwrap();
    wait_parts(&observer, &path, 2, 0).await;
    second.release().await.unwrap();
    wait_parts(&observer, &path, 0, 0).await;
}

/// `_c_<36-char uuid><marker><10 digits>`.
fn regex_like(prefix: &'static str, marker: &'static str) -> impl Fn(&str) -> bool {
    move |name: &str| {
        let Some(rest) = name.strip_prefix(prefix) else { return false };
        let Some(at) = rest.find(marker) else { return false };
        let digits = &rest[at + marker.len()..];
        at == 36
            && uuid::Uuid::parse_str(&rest[..36]).is_ok()
            && digits.len() == 10
            && digits.bytes().all(|b| b.is_ascii_digit())
    }
}

/// Four clients (sessions), three tasks each, taking one or two leases at a time from a
/// semaphore of max 3, for a few rounds: the leases held at once never exceed 3 (counted by
/// every holder as it enters and leaves, and by listing the lease nodes while they run), every
/// acquisition completes (no two partial holders wait on each other), and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_max_leases_under_load() {
    const MAX: u32 = 3;
    const ROUNDS: usize = 6;
    let path = unique_path("sem-load");
    let observer = observer().await;
    let clients = [client().await, client().await, client().await, client().await];
    let held = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..3 {
            let semaphore = client.semaphore(&path, MAX).unwrap();
            let (held, most, acquisitions) = (held.clone(), most.clone(), acquisitions.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..ROUNDS {
                    let n = 1 + ((c + t + round) % 2) as u32;
                    let leases = semaphore.acquire(n).await.unwrap();
                    let now = held.fetch_add(i64::from(n), Ordering::SeqCst) + i64::from(n);
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= i64::from(MAX), "{now} leases held at once");
                    // Work while holding, so holders overlap.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    held.fetch_sub(i64::from(n), Ordering::SeqCst);
                    acquisitions.fetch_add(1, Ordering::SeqCst);
                    leases.release().await.unwrap();
                }
            }));
        }
    }
    let watching = tokio::spawn({
        let (observer, path) = (observer.clone(), path.clone());
        async move {
            // The lease nodes held, as the server lists them: at most max, but for the nodes of the
            // one acquirer at the head of the mutex queue, which wait.
            let mut most_listed = 0;
            for _ in 0..200 {
                let leases = children(&observer, &format!("{path}/leases")).await.len();
                most_listed = most_listed.max(leases);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most_listed
        }
    });
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task).await.expect("no acquirer is stuck").unwrap();
    }
    let most_listed = watching.await.unwrap();
    assert_eq!(acquisitions.load(Ordering::SeqCst), 4 * 3 * ROUNDS);
    let most = most.load(Ordering::SeqCst);
    assert!(most <= i64::from(MAX) && most >= 2, "at most {MAX} held at once, and they were shared: {most}");
    assert!(most_listed <= (MAX + 2) as usize, "held plus one waiter's: {most_listed}");
    wait_parts(&observer, &path, 0, 0).await;
    eprintln!("most held at once: {most}; most lease nodes listed: {most_listed}");
}

/// Acquirers are served in the order they came, and a later one that would fit does not pass an
/// earlier one that does not: with max 3 all held, A (wanting 2) and then B (wanting 1) queue;
/// one lease back is room for B but not A, and B still waits behind A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquirers_are_served_first_come_first_served() {
    let path = unique_path("sem-fifo");
    let observer = observer().await;
    let (holder_client, a_client, b_client, c_client) =
        (client().await, client().await, client().await, client().await);
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let held = holder_client.semaphore(&path, 3).unwrap().acquire(3).await.unwrap().into_leases();

    let a = spawn_acquire(&a_client.semaphore(&path, 3).unwrap(), 2, &order, "a");
    wait_parts(&observer, &path, 5, 1).await;
    let b = spawn_acquire(&b_client.semaphore(&path, 3).unwrap(), 1, &order, "b");
    wait_parts(&observer, &path, 5, 2).await;
    let c = spawn_acquire(&c_client.semaphore(&path, 3).unwrap(), 1, &order, "c");
    wait_parts(&observer, &path, 5, 3).await;

    let mut held = held.into_iter();
    held.next().unwrap().release().await.unwrap();
    // Room for B, none for A: the listing A's watch wakes it to still has 4 nodes.
    wait_parts(&observer, &path, 4, 3).await;
    let participants = a_client.semaphore(&path, 3).unwrap().participants().await.unwrap();
    assert_eq!(participants.waiting_leases, 2, "A waits with its two nodes: {participants:?}");
    assert_eq!(participants.queue.len(), 3, "B and C queue behind it");
    assert!(order.lock().is_empty());

    held.next().unwrap().release().await.unwrap();
    let a_leases = a.await.unwrap();
    // A holds 2 and the holder 1: B's lease waits, then C's behind it.
    wait_parts(&observer, &path, 4, 2).await;
    held.next().unwrap().release().await.unwrap();
    let b_leases = b.await.unwrap();
    // A's 2 and B's 1: C waits for one of them.
    wait_parts(&observer, &path, 4, 1).await;
    b_leases.release().await.unwrap();
    let c_leases = c.await.unwrap();
    assert_eq!(*order.lock(), ["a", "b", "c"]);
    a_leases.release().await.unwrap();
    c_leases.release().await.unwrap();
    wait_parts(&observer, &path, 0, 0).await;
}

/// n leases are all or nothing under one deadline: a timeout, a try, and a cancelled acquisition
/// each leave no lease node and no mutex node; n leases that fit are taken together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_leases_are_all_or_nothing_and_a_timeout_leaves_nothing() {
    let path = unique_path("sem-n");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let (sem_a, sem_b) = (a.semaphore(&path, 3).unwrap(), b.semaphore(&path, 3).unwrap());
    let two = sem_a.acquire(2).await.unwrap();

    // Two more do not fit: the deadline ends it, with its two nodes and its mutex node removed.
    let started = std::time::Instant::now();
    let err = sem_b.acquire_timeout(2, Duration::from_millis(600)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "one deadline: {:?}", started.elapsed());
    let mut holders: Vec<String> = two.leases().iter().map(|lease| lease.node_name().to_owned()).collect();
    holders.sort();
    let left = || async {
        let (mut leases, mutex) = parts(&observer, &path).await;
        leases.sort();
        (leases, mutex)
    };
    assert_eq!(left().await, (holders.clone(), vec![]), "only the holder's leases");
    // A try, the same.
    assert!(sem_b.try_acquire(2).await.unwrap().is_none());
    assert_eq!(left().await, (holders.clone(), vec![]));
    // One fits.
    let one = sem_b.try_acquire(1).await.unwrap().expect("one lease fits");

    // A waiter cancelled (its future dropped) removes its nodes and its mutex node.
    one.release().await.unwrap();
    let waiting = tokio::spawn({
        let sem_b = sem_b.clone();
        async move { sem_b.acquire(2).await }
    });
    wait_parts(&observer, &path, 4, 1).await;
    waiting.abort();
    wait_parts(&observer, &path, 2, 0).await;

    // Aborted through its token: the same, and it says it did not acquire.
    let abort = tokio_util::sync::CancellationToken::new();
    let aborted = tokio::spawn({
        let (sem_b, abort) = (sem_b.clone(), abort.clone());
        async move { sem_b.acquire_for(2, None, Some(abort)).await }
    });
    wait_parts(&observer, &path, 4, 1).await;
    abort.cancel();
    assert!(aborted.await.unwrap().unwrap().is_none());
    assert_eq!(left().await, (holders.clone(), vec![]), "removed before it returned");

    two.release().await.unwrap();
    // All three together.
    let three = sem_b.acquire_timeout(3, Duration::from_secs(10)).await.unwrap();
    assert_eq!(three.len(), 3);
    three.release().await.unwrap();
    wait_parts(&observer, &path, 0, 0).await;
}

/// A lease whose session expires is lost: its state says so, its lost signal fires, its release
/// reports LockLost, and its room goes to the next acquirer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_lost_when_its_session_expires() {
    let (cluster, proxy, observer, stalled) = behind_a_proxy(Duration::from_secs(2)).await;
    let path = "/sem/lost";
    let options = ClientOptions { session_timeout: Duration::from_secs(2), ..Default::default() };
    let other = Client::connect_with(&cluster.connect_string(), options).await.unwrap();

    let leases = stalled.semaphore(path, 2).unwrap().acquire(2).await.unwrap();
    assert_eq!(leases.state(), HoldState::Held);
    assert_eq!(leases.lost_lease(), None);
    let waiting = tokio::spawn({
        let semaphore = other.semaphore(path, 2).unwrap();
        async move { semaphore.acquire(2).await.unwrap() }
    });
    wait_parts(&observer, path, 4, 1).await;
    proxy.stall();
    let (_, reason) = tokio::time::timeout(Duration::from_secs(10), leases.lost()).await.expect("the loss is told");
    assert!(matches!(reason, LostReason::DisconnectedTooLong | LostReason::SessionExpired), "{reason:?}");
    assert!(leases.leases().iter().all(|lease| lease.hold().state() == HoldState::Lost));
    assert_eq!(leases.state(), HoldState::Lost);
    assert!(leases.lost_lease().is_some());
    let next = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the room goes on").unwrap();
    assert_eq!(next.len(), 2);
    proxy.pass();
    let err = leases.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    next.release().await.unwrap();
    wait_parts(&observer, path, 0, 0).await;
}

/// The max read from a shared count (Curator's SharedCount: a 4-byte big-endian int) follows a
/// change made at run time: a waiter gets in when the count rises. A missing count node is made
/// with the seed; one that is not 4 bytes is refused before any node is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_max_follows_a_shared_count_changed_at_run_time() {
    let path = unique_path("sem-shared");
    let count_path = format!("{path}-count");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let options = SemaphoreOptions::new(MaxLeases::SharedCount { path: count_path.clone(), seed: 1 });
    let (sem_a, sem_b) = (a.semaphore_with(&path, options.clone()).unwrap(), b.semaphore_with(&path, options).unwrap());

    let first = sem_a.acquire(1).await.unwrap();
    let (data, _) = observer.get_data(&count_path).await.unwrap();
    assert_eq!(data, 1i32.to_be_bytes(), "made with the seed, as Curator stores a count");
    assert_eq!(sem_b.current_max_leases().await.unwrap(), 1);
    let waiting = tokio::spawn({
        let sem_b = sem_b.clone();
        async move { sem_b.acquire(1).await.unwrap() }
    });
    wait_parts(&observer, &path, 2, 1).await;
    observer.set_data(&count_path, &2i32.to_be_bytes(), None).await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the new max lets it in").unwrap();
    wait_parts(&observer, &path, 2, 0).await;
    // More than the count asks for what can never fit.
    let err = sem_b.acquire(3).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("max of 2"), "{err}");
    // Lowered: nobody new gets in until it rises again.
    observer.set_data(&count_path, &1i32.to_be_bytes(), None).await.unwrap();
    first.release().await.unwrap();
    assert!(sem_a.try_acquire(1).await.unwrap().is_none(), "one held, max 1");
    second.release().await.unwrap();
    sem_a.acquire(1).await.unwrap().release().await.unwrap();

    // Not a count: refused, and nothing made.
    observer.set_data(&count_path, b"abc", None).await.unwrap();
    let err = sem_a.acquire(1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("3 bytes") && err.to_string().contains(&count_path), "{err}");
    wait_parts(&observer, &path, 0, 0).await;
    observer.delete(&count_path, None).await.unwrap();
}

/// Bad input is refused with InvalidArgument before any traffic (on a closed client, so nothing
/// could be sent), and a semaphore and a lock on one path are refused as a recipe conflict before
/// any node is made, either way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_recipe_conflicts_are_refused() {
    let path = unique_path("sem-bad");
    let observer = observer().await;
    let client = client().await;
    let invalid = |err: zklock::Error, names: &str| {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(!err.is_recipe_conflict(), "{err}");
        assert!(err.to_string().contains(names), "{err} should name {names:?}");
    };
    invalid(client.semaphore(&path, 0).unwrap_err(), "at least 1");
    invalid(client.semaphore("no-slash", 2).unwrap_err(), "no-slash");
    let shared = |path: &str, seed| SemaphoreOptions::new(MaxLeases::SharedCount { path: path.to_owned(), seed });
    invalid(client.semaphore_with(&path, shared("/count", 0)).unwrap_err(), "seed");
    invalid(client.semaphore_with(&path, shared("count", 1)).unwrap_err(), "shared count path");

    let closed = Client::connect(&connect_string()).await.unwrap();
    let semaphore = closed.semaphore(&path, 2).unwrap();
    closed.close().await;
    invalid(semaphore.acquire(0).await.unwrap_err(), "not 0");
    invalid(semaphore.acquire_timeout(3, Duration::from_secs(1)).await.unwrap_err(), "max of 2");
    assert_eq!(semaphore.try_acquire(1).await.unwrap_err().kind(), ErrorKind::Closed);

    // A semaphore on a lock's path.
    let lock_path = unique_path("sem-bad-lock");
    let guard = client.lock(&lock_path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let err = client.semaphore(&lock_path, 2).unwrap().acquire(1).await.unwrap_err();
    assert!(err.is_recipe_conflict() && err.message().contains("a semaphore cannot use this path"), "{err}");
    assert_eq!(children(&observer, &lock_path).await.len(), 1, "nothing made: {err}");
    guard.release().await.unwrap();

    // A lock (mutex or read/write) on a semaphore's path, or on its lease parent.
    let leases = client.semaphore(&path, 2).unwrap().acquire(1).await.unwrap();
    let err = client.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap_err();
    assert!(err.is_recipe_conflict() && err.message().contains("semaphore's"), "{err}");
    let err = client.read_write_lock(&path).unwrap().read().acquire(&Owner::new(1)).await.unwrap_err();
    assert!(err.is_recipe_conflict(), "{err}");
    let err = client.lock(&format!("{path}/leases")).unwrap().try_acquire(&Owner::new(1)).await.unwrap_err();
    assert!(err.is_recipe_conflict(), "{err}");
    assert_eq!(parts(&observer, &path).await.0.len(), 1, "no node made beside the lease");
    leases.release().await.unwrap();
    wait_parts(&observer, &path, 0, 0).await;
}

/// Max 1 is Curator's InterProcessSemaphoreMutex: one holder at a time, not reentrant (the same
/// task asking again waits like anyone else), released from another task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_one_is_a_non_reentrant_mutex() {
    let path = unique_path("sem-mutex");
    let client = client().await;
    let semaphore = client.semaphore(&path, 1).unwrap();
    let lease = semaphore.acquire(1).await.unwrap();
    assert!(semaphore.try_acquire(1).await.unwrap().is_none(), "not reentrant: a second lease waits");
    let released = tokio::spawn(async move { lease.release().await });
    released.await.unwrap().unwrap();
    semaphore.acquire_timeout(1, Duration::from_secs(10)).await.unwrap().release().await.unwrap();
}

/// The connection is cut right after a lease create reached the server, before its reply: the
/// acquisition finds the node it made (by its uuid) instead of making a second, for one lease
/// and for two; and cut just before a create, it makes the node once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_after_a_lease_create_finds_the_node_instead_of_making_another() {
    let (_cluster, proxy, observer, cut) = behind_a_proxy(Duration::from_secs(10)).await;
    for (round, n) in [(0, 1), (1, 2)] {
        let path = format!("/sem/cut-{round}");
        // The path first, so that the cut falls on a lease create, not on the parent's.
        cut.semaphore(&path, 3).unwrap().acquire(1).await.unwrap().release().await.unwrap();
        proxy.cut_on_next_request_containing(format!("{path}/leases/_c_").as_bytes());
        let leases = tokio::time::timeout(Duration::from_secs(20), cut.semaphore(&path, 3).unwrap().acquire(n))
            .await
            .expect("acquired after the cut")
            .unwrap();
        assert!(proxy.request_cuts() > round, "the create went out and the connection was cut");
        let (nodes, mutex) = parts(&observer, &path).await;
        assert_eq!(nodes.len(), n as usize, "exactly one node per lease: {nodes:?}");
        assert!(mutex.is_empty(), "{mutex:?}");
        for lease in leases.leases() {
            assert!(nodes.iter().any(|node| node == lease.node_name()), "{nodes:?}");
        }
        leases.release().await.unwrap();
        wait_parts(&observer, &path, 0, 0).await;
    }
    let path = "/sem/cut-before";
    cut.semaphore(path, 3).unwrap().acquire(1).await.unwrap().release().await.unwrap();
    proxy.cut_before_next_request_containing(format!("{path}/leases/_c_").as_bytes());
    let leases = tokio::time::timeout(Duration::from_secs(20), cut.semaphore(path, 3).unwrap().acquire(2))
        .await
        .expect("no deadlock")
        .unwrap();
    assert_eq!(parts(&observer, path).await.0.len(), 2);
    leases.release().await.unwrap();
    wait_parts(&observer, path, 0, 0).await;
}

/// A waiter whose session expires while it waits for room loses its lease nodes and its place
/// at the mutex with the session, and queues again on a new session (as a lock's waiter does);
/// it holds once there is room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_session_expires_queues_again() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let path = "/sem/requeue";
    let session = Duration::from_secs(2);
    let holder = Client::connect_with(&cluster.connect_string(), ClientOptions::default()).await.unwrap();
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let waiter = Client::connect_with(&proxy.address(), options).await.unwrap();
    let first_session = waiter.session_id().unwrap();

    let held = holder.semaphore(path, 2).unwrap().acquire(2).await.unwrap();
    let waiting = tokio::spawn({
        let semaphore = waiter.semaphore(path, 2).unwrap();
        async move { semaphore.acquire(1).await }
    });
    wait_parts(&observer, path, 3, 1).await;
    let mut states = waiter.state_changes();
    proxy.stall();
    assert_eq!(states.next().await, Some(zklock::SessionState::Disconnected));
    assert_eq!(states.next().await, Some(zklock::SessionState::Expired));
    wait_parts(&observer, path, 2, 0).await;
    assert!(!waiting.is_finished(), "it waits on, for a new session");
    proxy.pass();
    wait_parts(&observer, path, 3, 1).await;
    assert_ne!(waiter.session_id().unwrap(), first_session);
    held.release().await.unwrap();
    let leases = tokio::time::timeout(session * 3, waiting).await.expect("it holds").unwrap().unwrap();
    assert_eq!(leases.leases()[0].hold().state(), HoldState::Held);
    leases.release().await.unwrap();
    wait_parts(&observer, path, 0, 0).await;
}

/// The children of `parent` whose ephemeral owner is `session`.
async fn owned_by(zk: &zk::Client, parent: &str, session: i64) -> Vec<String> {
    let mut owned = Vec::new();
    for name in children(zk, parent).await {
        if let Ok(Some(stat)) = zk.check_stat(&format!("{parent}/{name}")).await {
            if stat.ephemeral_owner == session {
                owned.push(name);
            }
        }
    }
    owned
}

/// A lease node is made only while the internal mutex's node is there: here someone deletes the
/// mutex node of the acquirer waiting for room (A), so the next one (B) takes the mutex and makes
/// its lease, then deletes A's lease node, which A makes again. Made alone, A's new lease node and
/// B's both waited, each counting the other, and neither ever fit (max 1): made in one multi with
/// a check of the mutex node, A's is refused, and A queues at the mutex again, behind B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_made_only_while_the_mutex_node_is_there() {
    let path = unique_path("sem-mutex-gone");
    let (leases_path, mutex_path) = (format!("{path}/leases"), format!("{path}/locks"));
    let observer = observer().await;
    let (h, a, b) = (client().await, client().await, client().await);
    let held = h.semaphore(&path, 1).unwrap().acquire(1).await.unwrap();
    let acquire = |client: &Client| {
        let semaphore = client.semaphore(&path, 1).unwrap();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    let a_waiting = acquire(&a);
    wait_parts(&observer, &path, 2, 1).await;
    let b_waiting = acquire(&b);
    wait_parts(&observer, &path, 2, 2).await;
    let a_session = a.session_id().unwrap();

    let a_mutex = owned_by(&observer, &mutex_path, a_session).await.pop().expect("A's mutex node");
    observer.delete(&format!("{mutex_path}/{a_mutex}"), None).await.unwrap();
    wait_parts(&observer, &path, 3, 1).await; // B holds the mutex and waits with its lease
    let a_lease = owned_by(&observer, &leases_path, a_session).await.pop().expect("A's lease node");
    observer.delete(&format!("{leases_path}/{a_lease}"), None).await.unwrap();
    wait_until("A makes its lease again, or queues at the mutex again", Duration::from_secs(20), || async {
        !owned_by(&observer, &leases_path, a_session).await.is_empty()
            || !owned_by(&observer, &mutex_path, a_session).await.is_empty()
    })
    .await;
    assert_eq!(owned_by(&observer, &leases_path, a_session).await, Vec::<String>::new(), "no lease without the mutex");
    wait_parts(&observer, &path, 2, 2).await; // H's and B's leases; B, then A, at the mutex

    held.release().await.unwrap();
    let b_leases = tokio::time::timeout(Duration::from_secs(10), b_waiting).await.expect("B gets in").unwrap().unwrap();
    assert_eq!(b_leases.state(), HoldState::Held);
    assert!(!a_waiting.is_finished(), "A waits behind B");
    b_leases.release().await.unwrap();
    let a_leases = tokio::time::timeout(Duration::from_secs(10), a_waiting).await.expect("A gets in").unwrap().unwrap();
    assert_eq!(a_leases.state(), HoldState::Held);
    a_leases.release().await.unwrap();
    wait_parts(&observer, &path, 0, 0).await;
    for client in [h, a, b] {
        client.close().await;
    }
}

/// `Semaphore::set_shared_count` writes the count as Curator's `SharedCount.setCount` does (a
/// 4-byte big-endian int; the node made if missing), and a waiter gets in when it rises. A fixed
/// max, 0 and a count above `i32::MAX` are refused with InvalidArgument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_shared_count_writes_curators_count() {
    let path = unique_path("sem-set-count");
    let count_path = format!("{path}-count");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let options = SemaphoreOptions::new(MaxLeases::SharedCount { path: count_path.clone(), seed: 5 });
    let (sem_a, sem_b) = (a.semaphore_with(&path, options.clone()).unwrap(), b.semaphore_with(&path, options).unwrap());

    sem_a.set_shared_count(1).await.unwrap();
    let (data, _) = observer.get_data(&count_path).await.unwrap();
    assert_eq!(data, 1i32.to_be_bytes(), "made missing, with the count set (not the seed)");
    let first = sem_a.acquire(1).await.unwrap();
    let waiting = tokio::spawn({
        let sem_b = sem_b.clone();
        async move { sem_b.acquire(1).await.unwrap() }
    });
    wait_parts(&observer, &path, 2, 1).await;
    sem_a.set_shared_count(2).await.unwrap();
    let (data, _) = observer.get_data(&count_path).await.unwrap();
    assert_eq!(data, 2i32.to_be_bytes());
    let second = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the new max lets it in").unwrap();
    assert_eq!(sem_b.current_max_leases().await.unwrap(), 2);
    first.release().await.unwrap();
    second.release().await.unwrap();

    let invalid = |err: zklock::Error, names: &str| {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains(names), "{err} should name {names:?}");
    };
    invalid(a.semaphore(&path, 2).unwrap().set_shared_count(3).await.unwrap_err(), "fixed");
    invalid(sem_a.set_shared_count(0).await.unwrap_err(), "not 0");
    invalid(sem_a.set_shared_count(u32::MAX).await.unwrap_err(), "from 1 to");
    let (data, _) = observer.get_data(&count_path).await.unwrap();
    assert_eq!(data, 2i32.to_be_bytes(), "refused, so unchanged");
    wait_parts(&observer, &path, 0, 0).await;
    observer.delete(&count_path, None).await.unwrap();
}

/// An acquisition cancelled once its leases are made, while it releases the internal mutex (the
/// last step): the leases are released, not left to the session's end. The connection is stalled
/// as soon as a lease node shows, so the cancel often lands in that step; the leases must be
/// gone whatever step it landed in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_the_mutex_is_released_leaves_no_lease() {
    let (_cluster, proxy, observer, client) = behind_a_proxy(Duration::from_secs(10)).await;
    let path = "/sem/cancel-late";
    let semaphore = client.semaphore(path, 3).unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap(); // the paths made
    let leases_path = format!("{path}/leases");
    for _ in 0..20 {
        // Told of the lease node as its create's reply goes out: the mutex's delete follows.
        let (_, made) = observer.list_and_watch_children(&leases_path).await.unwrap();
        let acquiring = tokio::spawn({
            let semaphore = semaphore.clone();
            async move { semaphore.acquire(1).await.unwrap() }
        });
        made.changed().await;
        proxy.stall();
        acquiring.abort();
        let outcome = acquiring.await;
        proxy.pass();
        if let Ok(leases) = outcome {
            leases.release().await.unwrap(); // it had finished: nothing was cancelled
        }
        // The client stays open: only a release (or a removal) takes the node away.
        wait_parts(&observer, path, 0, 0).await;
    }
}

/// The bindings' handle on leases (`binding::Releasable`) says `Released` once they are taken out
/// to be released, a lost lease too (its release reported the loss once); before that it says
/// what the leases say. A second take finds nothing: the leases are released once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bindings_leases_say_released_once_taken_even_if_lost() {
    use zklock::binding::Releasable;
    let path = unique_path("sem-releasable");
    let observer = observer().await;
    let client = client().await;
    let semaphore = client.semaphore(&path, 3).unwrap();

    let held = Releasable::new(semaphore.acquire(2).await.unwrap());
    assert_eq!(held.state(), HoldState::Held);
    assert_eq!(held.with(Leases::len), Some(2));
    held.take().unwrap().release().await.unwrap();
    assert_eq!(held.state(), HoldState::Released);
    assert!(held.take().is_none() && !held.is_held());
    wait_parts(&observer, &path, 0, 0).await;

    let held = Releasable::new(semaphore.acquire(2).await.unwrap());
    let lease = children(&observer, &format!("{path}/leases")).await.pop().expect("a lease node");
    observer.delete(&format!("{path}/leases/{lease}"), None).await.unwrap();
    let lost = held.with(|leases| leases.holds()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), zklock::first_loss(&lost)).await.expect("the loss is told");
    assert_eq!(held.state(), HoldState::Lost);
    let err = held.take().unwrap().release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(held.state(), HoldState::Released, "released once the release reported the loss");
    wait_parts(&observer, &path, 0, 0).await;
}
