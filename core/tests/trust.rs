//! The trust deadline (core/src/session.rs `Trust`) against a holder whose process does not run
//! for a while (a starved runtime, a stopped VM, a system suspend), against a late answer, and
//! against a reconnect that negotiates another session timeout: found by the adversarial review
//! of issue 42's fixes, each test failed before its fix.
//!
//! Several tests stand for the paused holder by giving its client a current-thread runtime of its
//! own that the test drives only when it says: while it is not driven, none of the client's
//! tasks (its session loop, its session monitor) runs, while other threads of the process do.
//!
//! The tests are serialized (`SERIAL`): the reentrant fast path trusts a process-wide loss
//! counter, which a loss in a test running beside would move.

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LockGuard, Owner};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client::boot_clock;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn options(session_timeout: Duration) -> ClientOptions {
    ClientOptions { session_timeout, connect_timeout: Duration::from_secs(20), ..Default::default() }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn sleep_until_boot(at: Duration) {
    let now = boot_clock();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// B, on `main`, queues behind H on `path` (seen by an observer), then holds once H's session
/// expired (within 15 s): B's client, its guard, and how long that took from the queueing.
fn next_holder(
    main: &tokio::runtime::Runtime,
    cluster: &Cluster,
    path: &str,
    session: Duration,
) -> (Client, LockGuard, Duration) {
    let (b, observer) = main.block_on(async {
        let b = Client::connect_with(&cluster.connect_string(), options(session)).await.unwrap();
        (b, observer_at(&cluster.connect_string()).await)
    });
    let b_lock = b.lock(path).unwrap();
    let b_waits = main.spawn(async move { b_lock.acquire(&Owner::new(2)).await });
    main.block_on(wait_children(&observer, path, 2));
    let t0 = Instant::now();
    let b_guard = main
        .block_on(async { tokio::time::timeout(Duration::from_secs(15), b_waits).await })
        .expect("B holds once H's session expired")
        .unwrap()
        .unwrap();
    (b, b_guard, t0.elapsed())
}

/// The lock-free re-entry fast path (owners.rs `Fast::live_word`) trusted a hold while the
/// process's loss counter stood still, and a lapse of the trust deadline moved that counter only
/// when someone read a hold's state or the session monitor woke. Here H's runtime does not run
/// (the monitor cannot wake) for longer than H's session: the server expires it and B holds.
/// H's owner then re-enters from a thread of its own (as a C, Python or Node caller does,
/// whatever the runtime's workers are doing): refused, as the fast path now also compares the
/// clock with the deadline it last saw; before, it succeeded beside B.
#[test]
fn a_reentry_past_the_deadline_is_refused_while_the_next_holder_holds() {
    let _serial = serial();
    let cluster = Cluster::standalone();
    let main = tokio::runtime::Runtime::new().unwrap();
    let session = Duration::from_secs(2);
    let path = "/locks/review-fast-reentry";

    let h_rt = current_thread();
    let h = h_rt.block_on(Client::connect_with(&cluster.connect_string(), options(session))).unwrap();
    let h_lock = h.lock(path).unwrap();
    let owner = Owner::new(1);
    let guard = h_rt.block_on(h_lock.acquire(&owner)).unwrap();

    // H's runtime is not driven from here: no pings, no monitor. The server expires H's session.
    let (_b, b_guard, b_at) = next_holder(&main, &cluster, path, session);

    // H's owner re-enters, on its own thread (the client's runtime entered, not driven).
    let reentered = {
        let _context = h_rt.enter();
        futures::executor::block_on(h_lock.acquire(&owner))
    };
    let state = guard.hold().state();
    eprintln!(
        "fast path: B held at {b_at:?}; H's re-entry after that: {}; H's hold state then: {state:?}; \
         B's hold: {:?}",
        match &reentered {
            Ok(_) => "Ok (a second holder)".to_owned(),
            Err(err) => format!("Err({:?})", err.kind()),
        },
        b_guard.hold().state()
    );
    let reentered_ok = reentered.is_ok();
    {
        let _context = h_rt.enter();
        drop(reentered);
        std::mem::forget(guard);
    }
    assert!(
        !reentered_ok,
        "H re-entered its lock (the fast path) after its session expired and B held it; its state read {state:?}"
    );
}

/// A lapse of the trust deadline is final. It was computed afresh at every read, so an answer
/// arriving after the deadline but before the monitor ran moved the deadline on again, and the
/// monitor slept on; what had acted on the lapse meanwhile acted on a loss that never came: a
/// release read the hold Lost and deleted nothing, and the node stayed in a healthy session for
/// good (nobody could take the lock, H's own next acquire included). A system suspend widens
/// that window: the boot clock counts it, tokio's timer does not. Now the first read of the lapse
/// records it, counts the loss and wakes the monitor, which ends the session: the node goes.
///
/// Made with a current-thread runtime (tokio dispatches I/O before timers, so H's session loop
/// reads the late answer, a ping's held by a one-way stall downstream, before the monitor runs).
#[test]
fn a_lapse_once_read_ends_the_session_though_a_late_answer_comes() {
    let _serial = serial();
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let main = tokio::runtime::Runtime::new().unwrap();
    let observer = main.block_on(observer_at(&cluster.connect_string()));
    let session = Duration::from_secs(6);
    let trusted = session * 9 / 10;

    {
        let attempt = 1;
        let path = format!("/locks/review-undone-lapse-{attempt}");
        let h_rt = current_thread();
        let h = h_rt.block_on(Client::connect_with(&proxy.address(), options(session))).unwrap();
        let lock = h.lock(&path).unwrap();
        let owner = Owner::new(1);
        let guard: LockGuard = h_rt.block_on(async {
            let guard = lock.acquire(&owner).await.unwrap();
            lock.contenders().await.unwrap();
            guard
        });
        // The contenders' answer was the latest: sent just before now.
        let answered = boot_clock();
        proxy.stall_downstream();
        // H runs on: 1/20 of the session (0.3 s) after its last send it pings; the server (which
        // hears it) touches the session and answers, and the proxy holds the answer. H is driven
        // until the server has that ping (at least 0.3 s after the last answer, so that the held
        // answer moves the deadline on by as much).
        let h_session = h.session_id().unwrap();
        let seen = packets_received(&cluster.connect_string(), h_session);
        let driven = Instant::now();
        while packets_received(&cluster.connect_string(), h_session) == seen {
            assert!(driven.elapsed() < Duration::from_secs(3), "H pinged");
            h_rt.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        }
        // H is not driven now. Past the deadline its latest answer set, but before the one the
        // held answer sets (at least 0.3 s later):
        sleep_until_boot(answered + trusted + Duration::from_millis(150));
        let hold = guard.hold().clone();
        let state_at_release = hold.state();
        let released = {
            let _context = h_rt.enter();
            futures::executor::block_on(guard.release())
        };
        proxy.pass();
        std::thread::sleep(Duration::from_millis(200));
        // H runs again: its session loop gets the held answer.
        h_rt.block_on(async { tokio::time::sleep(Duration::from_secs(1)).await });
        let h_session = h.session_id();
        let nodes = main.block_on(children(&observer, &path));
        eprintln!(
            "undone lapse, attempt {attempt}: H read {state_at_release:?} at the release, which said {}; \
             then H's session {h_session:?}, the lock's nodes {nodes:?}",
            match &released {
                Ok(()) => "Ok".to_owned(),
                Err(err) => format!("{:?}: {err}", err.kind()),
            }
        );
        assert_eq!(state_at_release, HoldState::Lost, "the premise: H read Lost past its deadline");
        assert_eq!(released.as_ref().map_err(|err| err.kind()), Err(ErrorKind::LockLost));
        assert!(
            h_session.is_none() || nodes.is_empty(),
            "the lapse was undone: H's session {h_session:?} lives on with the node {nodes:?} of a released hold"
        );
        assert_eq!(hold.lost_reason(), Some(zklock::LostReason::DisconnectedTooLong));
        h_rt.block_on(h.close());
    }
}

/// The server expires a session a timeout after its last touch, with the timeout negotiated on
/// the connection the touch came in on (`ZooKeeperServer.touch` passes `cnxn.getSessionTimeout()`;
/// a reconnect's `reopenSession` clamps the asked timeout to that server's min/max). The trust
/// window was 17/20 of the timeout negotiated when the session was made; now it is that of the
/// latest handshake. A reconnect to a server with a lower `maxSessionTimeout` (an ensemble whose
/// servers differ, or a rolling change, as here), then a one-way loss upstream: B holds about 2 s
/// after the loss, and H is told first (before, its trust would have lasted 17 s, and it was told
/// only by the ZooKeeper client's own expiry, ~2.8 s after B held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The guard serializes this test with the others, each on its own thread, for its whole run.
#[allow(clippy::await_holding_lock)]
async fn a_reconnect_that_negotiates_a_shorter_timeout_shortens_the_trust() {
    let _serial = tokio::task::block_in_place(serial);
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let path = "/locks/review-shorter-timeout";
    let long = Duration::from_secs(20);
    let h = Client::connect_with(&proxy.address(), options(long)).await.unwrap();
    let guard = h.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    let h_session = h.session_id().unwrap();

    // The operator lowers maxSessionTimeout to 2 s and restarts the server; the session, in
    // the transaction log, survives, and H reconnects within it.
    let cfg = cluster.server_dir(0).join("zoo.cfg");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("maxSessionTimeout=2000\n");
    std::fs::write(&cfg, text).unwrap();
    tokio::task::block_in_place(|| cluster.restart(0));
    let sid = format!("sid=0x{h_session:x}");
    wait_until("H reconnected with a 2 s timeout", Duration::from_secs(20), || {
        let cons = four_letter(&cluster.connect_string(), "cons");
        let ok = cons.lines().any(|line| line.contains(&sid) && line.contains("to=2000"));
        async move { ok }
    })
    .await;
    assert_eq!(h.session_id(), Some(h_session), "the same session");
    let h_hold = hold.clone();
    wait_until("H's hold Held again", Duration::from_secs(10), || {
        let held = h_hold.state() == HoldState::Held;
        async move { held }
    })
    .await;

    let b = Client::connect_with(&cluster.connect_string(), options(Duration::from_secs(2))).await.unwrap();
    let observer = observer_at(&cluster.connect_string()).await;
    // Locks of B's that H waits for: released during the fault, each sends H a notification.
    let mut chatter = Vec::new();
    for i in 0..16 {
        let chatter_path = format!("/locks/review-chatter-{i}");
        let g = b.lock(&chatter_path).unwrap().acquire(&Owner::new(100 + i)).await.unwrap();
        let waiter = h.lock(&chatter_path).unwrap();
        tokio::spawn(async move { waiter.acquire(&Owner::new(200 + i)).await });
        wait_watched_by(&cluster.connect_string(), g.hold().node_path(), h_session).await;
        chatter.push(g);
    }
    let b_lock = b.lock(path).unwrap();
    let h_seen = hold.clone();
    let b_waits = tokio::spawn(async move {
        let g = b_lock.acquire(&Owner::new(2)).await.unwrap();
        (Instant::now(), h_seen.state(), g)
    });
    wait_children(&observer, path, 2).await;

    let t0 = Instant::now();
    let states = tokio::spawn({
        let mut changes = hold.state_changes();
        let h = hold.clone();
        async move {
            let mut seen = Vec::new();
            while let Some(state) = changes.next().await {
                seen.push((state, t0.elapsed(), h.lost_reason()));
                if state == HoldState::Lost {
                    break;
                }
            }
            seen
        }
    });
    proxy.stall_upstream();
    let releases = tokio::spawn(async move {
        while !chatter.is_empty() {
            tokio::time::sleep(Duration::from_millis(250)).await;
            chatter.remove(0).release().await.unwrap();
        }
    });
    let (b_at, h_then, _b_guard) = tokio::time::timeout(Duration::from_secs(30), b_waits)
        .await
        .expect("B holds once H's session expired")
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(25), states).await.unwrap().unwrap();
    eprintln!(
        "shorter timeout: B held at {:?}, when H read {h_then:?}; H's state changes: {lost:?} (from the stall)",
        b_at - t0
    );
    releases.abort();
    proxy.pass();
    // As one_way.rs: told before B held, and not by the node's deletion (the event that lets B in).
    let (lost_state, lost_at, reason) = lost.last().copied().expect("H is told it lost");
    assert_eq!(lost_state, HoldState::Lost);
    assert!(
        lost_at <= b_at - t0 && reason != Some(zklock::LostReason::NodeDeleted),
        "H was told it lost ({reason:?}) at {lost_at:?}, B held at {:?}",
        b_at - t0
    );
    drop(guard);
}

/// Review 2: the fast path's `trusted_until` is a snapshot of the deadline taken when the table
/// last checked the hold (owners.rs `count_up`/`first_level`). A reconnect that negotiates a
/// shorter timeout shortens the session's live deadline (`Trust::deadline_nanos`), but moves no
/// loss count and refreshes no fast slot: the slot keeps trusting the hold until 17/20 of the
/// *old* timeout after its check. Here H (own current-thread runtime) takes its lock with a 30 s
/// session (the slot trusts it ~25 s), its server is restarted with `maxSessionTimeout=2000`, H
/// reconnects within its session at 2 s, then H's runtime is not driven (a pause): the server
/// expires the session ~2 s later and B holds. H's owner then re-enters from its own thread.
/// Expected: refused (H's hold reads Lost); the snapshot lets it in beside B.
#[test]
fn a_reentry_after_a_reconnect_that_shortened_the_timeout_is_refused_while_the_next_holder_holds() {
    let _serial = serial();
    let cluster = Cluster::standalone();
    let main = tokio::runtime::Runtime::new().unwrap();
    let path = "/locks/review2-fast-reentry-shorter-timeout";

    let h_rt = current_thread();
    let h = h_rt.block_on(Client::connect_with(&cluster.connect_string(), options(Duration::from_secs(30)))).unwrap();
    let h_lock = h.lock(path).unwrap();
    let owner = Owner::new(1);
    let guard = h_rt.block_on(h_lock.acquire(&owner)).unwrap();
    let h_session = h.session_id().unwrap();

    // maxSessionTimeout lowered to 2 s, the server restarted; H (driven) reconnects within its
    // session at 2 s.
    let cfg = cluster.server_dir(0).join("zoo.cfg");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("maxSessionTimeout=2000\n");
    std::fs::write(&cfg, text).unwrap();
    cluster.restart(0);
    let sid = format!("sid=0x{h_session:x}");
    h_rt.block_on(wait_until("H reconnected with a 2 s timeout", Duration::from_secs(30), || {
        let cons = four_letter(&cluster.connect_string(), "cons");
        let ok = cons.lines().any(|line| line.contains(&sid) && line.contains("to=2000"));
        async move { ok }
    }));
    let hold = guard.hold().clone();
    h_rt.block_on(wait_until("H's hold Held again", Duration::from_secs(10), || {
        let held = hold.state() == HoldState::Held;
        async move { held }
    }));
    assert_eq!(h.session_id(), Some(h_session), "the same session");

    // H's runtime is not driven from here: no pings, no monitor.
    let (_b, b_guard, b_at) = next_holder(&main, &cluster, path, Duration::from_secs(2));

    let reentered = {
        let _context = h_rt.enter();
        futures::executor::block_on(h_lock.acquire(&owner))
    };
    let state = hold.state();
    eprintln!(
        "fast path after a shorter reconnect: B held at {b_at:?}; H's re-entry after that: {}; H's hold \
         state then: {state:?}; B's hold: {:?}",
        match &reentered {
            Ok(_) => "Ok (a second holder)".to_owned(),
            Err(err) => format!("Err({:?})", err.kind()),
        },
        b_guard.hold().state()
    );
    let reentered_ok = reentered.is_ok();
    {
        let _context = h_rt.enter();
        drop(reentered);
        std::mem::forget(guard);
    }
    assert!(
        !reentered_ok,
        "H re-entered its lock (the fast path) after a reconnect shortened its timeout, its session expired \
         and B held it; its state read {state:?}"
    );
}
