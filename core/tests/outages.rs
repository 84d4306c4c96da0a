//! Outages against forever waits, background deletes and the trust deadline (found by a review
//! of issue 44's changes): a try answers while a forever acquisition waits for a session; a
//! background delete the server keeps refusing leaves no node behind a live session; and, known
//! and documented, not yet met, a holder on a follower cut off from a paused leader.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, HoldState, Owner};
use zklock_testkit::{Cluster, Proxy};

const SESSION: Duration = Duration::from_secs(2);
const CONNECT: Duration = Duration::from_secs(1);

/// A client behind a proxy, its session ended by an outage (cut), and a forever acquisition
/// begun meanwhile: it is then trying for a new session, round after round.
async fn forever_waiting_through_an_outage(
    proxy: &Proxy,
    path: &str,
) -> (Client, tokio::task::JoinHandle<zklock::Result<zklock::LockGuard>>) {
    let options = ClientOptions { session_timeout: SESSION, connect_timeout: CONNECT, ..Default::default() };
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();
    proxy.cut();
    let forever = tokio::spawn({
        let lock = client.lock(path).unwrap();
        async move { lock.acquire(&Owner::new(1)).await }
    });
    // Past the session's trust (9/10 of 2 s) and a few connect timeouts: the forever acquisition
    // has queued again and is in `session_waiting`, holding the client's send turn.
    tokio::time::sleep(SESSION + 2 * CONNECT).await;
    assert!(!forever.is_finished(), "the forever acquisition waits");
    (client, forever)
}

/// A try (timeout zero: no deadline, `only_try`) waits for the client's send turn with no bound.
/// A forever acquisition now keeps that turn (and a create slot) for as long as an outage lasts,
/// while it tries for a session again and again: every try on the client, of any lock path,
/// hangs until the servers are back. Before h-retry the forever acquisition gave the turn back
/// after one connect timeout, and the try failed within about two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_during_an_outage_returns_while_a_forever_acquisition_waits_for_a_session() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let (client, forever) = forever_waiting_through_an_outage(&proxy, "/locks/review/forever").await;

    let other = client.lock("/locks/review/other").unwrap();
    let tried = tokio::time::timeout(4 * CONNECT, other.try_acquire(&Owner::new(2))).await;
    // Also a timed acquisition: it spends its whole timeout waiting for the turn, never trying.
    let timed = client.lock("/locks/review/timed").unwrap();
    let started = std::time::Instant::now();
    let timed_result = timed.acquire_timeout(&Owner::new(3), 3 * CONNECT).await;
    eprintln!("timed acquisition: {:?} after {:?}", timed_result.as_ref().err(), started.elapsed());

    proxy.pass();
    let _ = tokio::time::timeout(Duration::from_secs(30), forever).await;
    client.close().await;
    assert!(
        tried.is_ok(),
        "try_acquire during the outage did not return within {:?}: it waits for the send turn a forever \
         acquisition keeps while it tries for a session",
        4 * CONNECT
    );
}

/// The release of a hold whose session lapsed in an ensemble: a leader paused (a GC, a stopped
/// VM) for longer than the session, shorter than syncLimit x tickTime (the testkit's 25 x 200 ms
/// = 5 s). The follower the holder is connected to answers its pings all along (pings are
/// answered locally and touch only the follower's table, relayed to the leader on the leader's
/// pings), so the holder's trust deadline moves on; the leader, once it runs again, expires the
/// session from the touches it had before the pause and lets the next waiter in. The holder, cut
/// off from then on, reads Held for up to 9/10 of its session (17/20 before) after the next
/// holder is in. Known, and documented with `TRUSTED_FOR` (the exposure is up to
/// syncLimit x tickTime); not yet met, so not run by default: `cargo test --test outages --
/// --ignored` shows it.
#[ignore = "known exposure on an ensemble (a follower serving while cut off from its leader), documented with TRUSTED_FOR; not yet met"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_on_a_follower_reads_lost_before_the_next_holder_enters_after_a_leader_pause() {
    let cluster = Cluster::ensemble(3);
    let leader = cluster.wait_for_leader(Duration::from_secs(60));
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (f1, f2) = (followers[0], followers[1]);
    let proxy = Proxy::start(&cluster.server_address(f1));
    let options =
        ClientOptions { session_timeout: SESSION, connect_timeout: Duration::from_secs(10), ..Default::default() };
    let holder = Client::connect_with(&proxy.address(), options).await.unwrap();
    assert_eq!(holder.session_timeout(), SESSION);
    let other = Client::connect_with(&cluster.server_address(f2), ClientOptions::default()).await.unwrap();
    let observer = observer_at(&cluster.server_address(f2)).await;

    let path = "/locks/review/leader-pause";
    let guard = holder.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    let waiter = tokio::spawn({
        let lock = other.lock(path).unwrap();
        let hold = hold.clone();
        async move {
            let next = lock.acquire(&Owner::new(2)).await.unwrap();
            // Read at once, as the next holder is in.
            (hold.state(), next)
        }
    });
    wait_children(&observer, path, 2).await;

    // Longer than the session, shorter than syncLimit x tickTime: the followers keep serving.
    cluster.pause(leader);
    tokio::time::sleep(SESSION + Duration::from_millis(1200)).await;
    assert_eq!(hold.state(), HoldState::Held, "the follower answered the holder's pings all along");
    // From now on the holder hears nothing; the leader runs again.
    proxy.stall();
    cluster.resume(leader);

    let (holder_read, next) =
        tokio::time::timeout(Duration::from_secs(20), waiter).await.expect("the next waiter gets in").unwrap();
    let next_in = std::time::Instant::now();
    while hold.state() == HoldState::Held && next_in.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "the holder read {} as the next holder got in, and held for {:?} more",
        holder_read.as_str(),
        next_in.elapsed()
    );
    proxy.cut();
    drop(next);
    assert_ne!(
        holder_read,
        HoldState::Held,
        "two holders: the holder still read held when the leader had expired its session and let the next in"
    );
    drop(guard);
    holder.close().await;
    other.close().await;
}

/// A release whose delete the connection keeps losing (a dozen times in a row, more than one
/// round of retries): the delete goes on in the background, round after round while the session
/// lives, so the node goes once the link is fine (before, it gave up after 8 losses and left the
/// node behind the live session: the lock taken by no one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_delete_that_runs_out_of_tries_leaves_no_node_behind_a_live_session() {
    let cluster = Cluster::standalone();
    let proxy = std::sync::Arc::new(Proxy::start(&cluster.server_address(0)));
    let observer = observer_at(&cluster.connect_string()).await;
    let options = ClientOptions { session_timeout: Duration::from_secs(4), ..Default::default() };
    let holder = Client::connect_with(&proxy.address(), options).await.unwrap();
    let path = "/locks/review/background-delete";
    let guard = holder.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let node = guard.hold().node_path().to_owned();

    // Every delete is cut before it reaches the server, a dozen times in a row (a flapping
    // link that drops whenever the delete is in flight).
    let cutter = std::thread::spawn({
        let proxy = proxy.clone();
        move || {
            let mut cuts = 0;
            for _ in 0..12 {
                proxy.cut_on_next_request_matching(false, |frame| zklock_testkit::proxy::request_op(frame) == Some(2));
                if !proxy.wait_request_cut(Duration::from_secs(3)) {
                    break;
                }
                cuts += 1;
            }
            proxy.disarm();
            cuts
        }
    });
    let released = guard.release().await;
    eprintln!("release: {released:?}");
    let cuts = tokio::task::spawn_blocking(move || cutter.join().unwrap()).await.unwrap();
    eprintln!("deletes cut: {cuts}");
    // The link is fine from now on; the session is live.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut left = true;
    while left && std::time::Instant::now() < deadline {
        left = observer.check_stat(&node).await.unwrap().is_some();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("session state {:?}; node left: {left}", holder.state());
    holder.close().await;
    assert!(!left, "the released node {node} is still there, its session live: the lock is taken by no one");
}
