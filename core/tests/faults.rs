//! Lock safety under real network faults, injected by a TCP proxy between client and server,
//! and interop with Apache Curator itself.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LostReason, Owner};
use zklock_testkit::curator::epoch_micros;
use zklock_testkit::proxy::request_op;
use zklock_testkit::{Cluster, CuratorContender, Proxy};

const SESSION: Duration = Duration::from_secs(2);

async fn client_with_session(connect: &str, session_timeout: Duration) -> Client {
    let options = ClientOptions { session_timeout, connect_timeout: Duration::from_secs(10), ..Default::default() };
    Client::connect_with(connect, options).await.unwrap()
}

/// A holder stalled past its session timeout: the next waiter gets the lock within the session
/// timeout plus 2 s, and the stalled holder hears it lost the lock no later than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_holder_loses_before_the_next_one_acquires() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let path = "/locks/stall";
    let stalled = client_with_session(&proxy.address(), SESSION).await;
    let other = client_with_session(&cluster.connect_string(), SESSION).await;
    assert_eq!(stalled.session_timeout(), SESSION);
    let observer = observer_at(&cluster.connect_string()).await;

    let guard = stalled.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    let waiter = tokio::spawn({
        let lock = other.lock(path).unwrap();
        async move {
            let guard = lock.acquire(&Owner::new(2)).await.unwrap();
            (Instant::now(), guard.fencing_token(), guard.into_hold())
        }
    });
    wait_children(&observer, path, 2).await;
    let transitions = tokio::spawn({
        let mut changes = hold.state_changes();
        async move {
            let mut seen = Vec::new();
            while let Some(state) = changes.next().await {
                seen.push((state, Instant::now()));
            }
            seen
        }
    });

    let stalled_at = Instant::now();
    proxy.stall();
    let (acquired_at, next_token, _next) = waiter.await.unwrap();
    let transitions = tokio::time::timeout(Duration::from_secs(5), transitions).await.unwrap().unwrap();

    let waited = acquired_at - stalled_at;
    assert!(waited <= SESSION + Duration::from_secs(2), "the next waiter acquired after {waited:?}");
    let states: Vec<HoldState> = transitions.iter().map(|(state, _)| *state).collect();
    assert_eq!(states, vec![HoldState::Suspended, HoldState::Lost], "{transitions:?}");
    let lost_at = transitions[1].1;
    assert!(lost_at <= acquired_at, "Lost came {:?} after the next holder acquired", lost_at - acquired_at);
    eprintln!(
        "suspended after {:?}, lost after {:?}, next acquired after {waited:?}",
        transitions[0].1 - stalled_at,
        lost_at - stalled_at
    );
    assert_eq!(hold.lost_reason(), Some(LostReason::DisconnectedTooLong));
    assert!(hold.fencing_token() < next_token, "the stale holder's token is the lower one");

    proxy.pass();
    assert_eq!(guard.release().await.unwrap_err().kind(), ErrorKind::LockLost);
}

/// The connection is cut right after the create reached the server, before its reply: the
/// attempt finds the node it created instead of making a second, and nothing is orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cut_right_after_the_create_is_sent() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let cut = client_with_session(&proxy.address(), Duration::from_secs(10)).await;
    let other = client_with_session(&cluster.connect_string(), Duration::from_secs(10)).await;

    // Free lock, and then a held one: either way exactly one node for the attempt.
    for (round, contended) in [(0, false), (1, true), (2, false)] {
        let path = format!("/locks/cut-{round}");
        let holder =
            if contended { Some(other.lock(&path).unwrap().acquire(&Owner::new(9)).await.unwrap()) } else { None };
        // The create request names the new node; nothing before it in this attempt does.
        proxy.cut_on_next_request_containing(format!("{path}/_c_").as_bytes());
        let attempt = tokio::spawn({
            let lock = cut.lock(&path).unwrap();
            async move { lock.acquire_timeout(&Owner::new(1), Duration::from_secs(20)).await }
        });
        assert!(proxy.wait_request_cut(Duration::from_secs(10)), "the create went out and the connection was cut");
        wait_children(&observer, &path, if contended { 2 } else { 1 }).await;
        if let Some(holder) = holder {
            holder.release().await.unwrap();
        }
        let guard = attempt.await.unwrap().expect("acquired after the cut, with the node it had created");
        let nodes = children(&observer, &path).await;
        assert_eq!(nodes.len(), 1, "exactly one node for the attempt: {nodes:?}");
        assert_eq!(format!("{path}/{}", nodes[0]), guard.hold().node_path());
        guard.release().await.unwrap();
        assert!(children(&observer, &path).await.is_empty(), "nothing orphaned");
    }
    assert!(proxy.request_cuts() >= 3);

    // Cut just before the create reaches the server: the attempt makes it again, once.
    let path = "/locks/cut-before";
    proxy.cut_before_next_request_containing(format!("{path}/_c_").as_bytes());
    let guard = tokio::time::timeout(Duration::from_secs(20), cut.lock(path).unwrap().acquire(&Owner::new(1)))
        .await
        .expect("no deadlock")
        .unwrap();
    assert_eq!(children(&observer, path).await.len(), 1);
    guard.release().await.unwrap();
    assert!(children(&observer, path).await.is_empty());
}

/// The session expires while waiting: the waiter loses its node and its place, and queues again
/// on a new session (as kazoo's and Curator's waiters do) rather than fail; it holds once the
/// holder releases. With a deadline, the outage counts against it: it gives up at the deadline,
/// with no node left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_session_expires_queues_again_on_a_new_session() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let path = "/locks/expire";
    let holder_client = client_with_session(&cluster.connect_string(), Duration::from_secs(10)).await;
    let waiter_client = client_with_session(&proxy.address(), SESSION).await;
    let first_session = waiter_client.session_id().unwrap();

    let holder = holder_client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter_client.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await }
    });
    wait_children(&observer, path, 2).await;
    let holder_node = holder.hold().node_path().rsplit('/').next().unwrap().to_owned();
    let waiter_node =
        || async { children(&observer, path).await.into_iter().find(|node| *node != holder_node).unwrap() };
    let first_node = waiter_node().await;
    let mut states = waiter_client.state_changes();
    proxy.stall();
    assert_eq!(states.next().await, Some(zklock::SessionState::Disconnected));
    assert_eq!(states.next().await, Some(zklock::SessionState::Expired));
    // The server expires the old session, and the waiter's node with it.
    wait_children(&observer, path, 1).await;
    assert!(!waiting.is_finished(), "the waiter waits on, for a new session");

    proxy.pass();
    assert_eq!(states.next().await, Some(zklock::SessionState::Connected));
    wait_children(&observer, path, 2).await;
    let second_node = waiter_node().await;
    assert_ne!(first_node, second_node, "a new node, at the back of the queue");
    assert_ne!(first_session, waiter_client.session_id().unwrap(), "on a new session");
    assert!(!waiting.is_finished(), "still behind the holder");
    holder.release().await.unwrap();
    let guard = tokio::time::timeout(SESSION * 3, waiting).await.expect("it holds").unwrap().unwrap();
    assert_eq!(guard.hold().node_path().rsplit('/').next().unwrap(), second_node);
    guard.release().await.unwrap();
    assert!(children(&observer, path).await.is_empty());

    // With a deadline that the outage outlasts: a timeout, not a session error, and no node.
    let holder = holder_client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter_client.lock(path).unwrap();
        async move { lock.acquire_timeout(&Owner::new(2), SESSION * 2).await }
    });
    wait_children(&observer, path, 2).await;
    proxy.stall();
    let err = tokio::time::timeout(SESSION * 4, waiting).await.expect("gives up at its deadline").unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    proxy.pass();
    wait_children(&observer, path, 1).await;
    holder.release().await.unwrap();
    wait_children(&observer, path, 0).await;
}

/// The connection drops during a release: the delete goes on in the background until the node
/// is gone, and it never touches a node that is not ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_loss_during_release_finishes_in_the_background() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let holder_client = client_with_session(&proxy.address(), Duration::from_secs(10)).await;
    let other = client_with_session(&cluster.connect_string(), Duration::from_secs(10)).await;
    let session = holder_client.session_id();

    for deliver in [false, true] {
        let path = format!("/locks/release-{deliver}");
        let guard = holder_client.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
        let node = guard.hold().node_path().to_owned();
        let next_lock = other.lock(&path).unwrap();
        let next = tokio::spawn({
            let lock = next_lock.clone();
            async move { lock.acquire(&Owner::new(2)).await.unwrap().into_hold() }
        });
        wait_children(&observer, &path, 2).await;

        let target = node.clone().into_bytes();
        proxy.cut_on_next_request_matching(deliver, move |frame| {
            request_op(frame) == Some(2) && frame.windows(target.len()).any(|w| w == target.as_slice())
        });
        let err = guard.release().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{err}");
        assert!(proxy.wait_request_cut(Duration::from_secs(5)));

        // Delivered or not, the node goes, and the next waiter gets the lock.
        let next_hold =
            tokio::time::timeout(Duration::from_secs(10), next).await.expect("the node was deleted").unwrap();
        // The holder's client is back and has done its background work; the new holder's node stays.
        holder_client.lock(&path).unwrap().contenders().await.unwrap();
        assert_eq!(holder_client.session_id(), session, "same session throughout: the retry was not an expiry");
        let nodes = children(&observer, &path).await;
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(format!("{path}/{}", nodes[0]), next_hold.node_path());
        assert_eq!(next_hold.state(), HoldState::Held);
        next_lock.release(&Owner::new(2)).await.unwrap();
    }
}

/// A release whose future is dropped before its delete is answered (a timeout around it, a
/// cancelled task), whose connection then drops with the request undelivered: the node is still
/// deleted, in the background, and not kept by the live session for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_dropped_before_its_answer_still_deletes_the_node() {
    let (_cluster, proxy, observer, holder_client) = behind_a_proxy(Duration::from_secs(10)).await;
    let session = holder_client.session_id();
    let path = "/locks/release-dropped";
    let guard = holder_client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    wait_children(&observer, path, 1).await;

    proxy.stall();
    // The caller gives up on the release: its future is dropped with the delete unanswered.
    let gave_up = tokio::time::timeout(Duration::from_millis(300), guard.release()).await;
    assert!(gave_up.is_err(), "the stalled delete cannot have been answered: {gave_up:?}");
    proxy.cut(); // what the proxy held, the delete among it, is dropped undelivered
    proxy.pass();

    wait_children(&observer, path, 0).await;
    assert_eq!(holder_client.session_id(), session, "same session throughout: the node went by a delete");
}

/// Apache Curator's InterProcessMutex and zklock on one path: mutual exclusion and FIFO order
/// across both, and nothing left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_and_zklock_queue_fairly_together() {
    let connect = connect_string();
    let path = unique_path("interop");
    let observer = observer().await;
    // JVMs start in parallel while zklock sets up.
    let spawning: Vec<_> = (0..3)
        .map(|i| {
            let (connect, path) = (connect.clone(), path.clone());
            tokio::task::spawn_blocking(move || CuratorContender::spawn(&connect, &path, &format!("curator-{i}")))
        })
        .collect();
    let mut curators = Vec::new();
    for spawned in spawning {
        curators.push(spawned.await.unwrap());
    }
    let zk_clients = [client().await, client().await, client().await];

    let gate = zk_clients[0].lock(&path).unwrap().acquire(&Owner::with_label(99, "gate")).await.unwrap();
    // Who held when: (name, acquired, released), in epoch micros on this machine's clock.
    let holds = Arc::new(Mutex::new(Vec::<(String, u128, u128)>::new()));
    let mut arrival = Vec::new();
    let mut waits = Vec::new();
    for i in 0..6 {
        let name;
        if i % 2 == 0 {
            let mut curator = curators.remove(0);
            name = curator.name().to_owned();
            curator.acquire_async();
            let holds = holds.clone();
            waits.push(tokio::task::spawn_blocking(move || {
                let acquired = curator.wait_acquired(Duration::from_secs(60));
                std::thread::sleep(Duration::from_millis(20));
                // Stamped by the contender just before it calls Curator's release().
                let released = curator.release();
                holds.lock().push((curator.name().to_owned(), acquired, released));
                curator.quit();
            }));
        } else {
            let lock = zk_clients[i / 2].lock(&path).unwrap();
            name = format!("zklock-{}", i / 2);
            let (holds, label) = (holds.clone(), name.clone());
            waits.push(tokio::spawn(async move {
                let guard = lock.acquire(&Owner::with_label(i as u64, label.clone())).await.unwrap();
                let acquired = epoch_micros();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let released = epoch_micros();
                guard.release().await.unwrap();
                holds.lock().push((label, acquired, released));
            }));
        }
        arrival.push(name);
        wait_children(&observer, &path, i + 2).await;
    }
    // Curator's own view of the queue matches zklock's.
    let queue = zk_clients[1].lock(&path).unwrap().contenders().await.unwrap();
    assert_eq!(queue.len(), 7);
    assert!(queue.iter().all(|p| p.node.starts_with("_c_") && p.node.contains("-lock-")), "Curator naming for all");

    gate.release().await.unwrap();
    for wait in waits {
        wait.await.unwrap();
    }
    let mut holds = holds.lock().clone();
    holds.sort_by_key(|(_, acquired, _)| *acquired);
    let order: Vec<&String> = holds.iter().map(|(name, ..)| name).collect();
    assert_eq!(order, arrival.iter().collect::<Vec<_>>(), "FIFO across Curator and zklock");
    for pair in holds.windows(2) {
        assert!(pair[1].1 >= pair[0].2, "mutual exclusion: {pair:?}");
    }
    wait_children(&observer, &path, 0).await;
    for client in zk_clients {
        client.close().await;
    }
}

/// A session given up on the client's side (disconnected too long) while the server still has
/// it: once the connection heals, the ZooKeeper client would take the session up again, and with
/// it the lock node of a hold already reported lost. The session must end instead, so the node
/// goes and the lock is free for others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_up_ends_even_if_the_connection_heals_in_time() {
    const LONGER: Duration = Duration::from_secs(4);
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let path = "/locks/given-up";
    let client = client_with_session(&proxy.address(), LONGER).await;
    assert_eq!(client.session_timeout(), LONGER);
    let observer = observer_at(&cluster.connect_string()).await;
    let guard = client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    let mut changes = hold.state_changes();

    proxy.stall();
    // Given up at 17/20 of the timeout after the client last heard from the server: the server
    // expires the session a full timeout after it last heard from the client.
    while let Some(state) = changes.next().await {
        if state == HoldState::Lost {
            break;
        }
    }
    proxy.pass();
    assert_eq!(hold.lost_reason(), Some(LostReason::DisconnectedTooLong));
    assert_eq!(guard.release().await.unwrap_err().kind(), ErrorKind::LockLost);

    // The client stays open and idle: nothing of it may keep the lock.
    wait_until("the given-up session's lock node is gone", LONGER * 3, || async {
        children(&observer, path).await.is_empty()
    })
    .await;
    let other = client_with_session(&cluster.connect_string(), SESSION).await;
    let next = tokio::time::timeout(Duration::from_secs(5), other.lock(path).unwrap().acquire(&Owner::new(2))).await;
    assert!(next.is_ok(), "another client got the lock");
}
