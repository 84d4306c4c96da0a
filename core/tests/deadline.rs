//! Every deadline holds while the server cannot be reached (a stalled connection, a cut one):
//! a try (a zero timeout) of every recipe, and a listing, answer within `TRY_BOUND` with a
//! connection loss (not "busy", not an expired session); a timed call answers within a small
//! margin of its deadline, its nodes' removal going on in the background; and once the server is
//! back, no node of theirs is left.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, Member, Owner, REMOVAL_GRACE, TRY_BOUND};
use zklock_testkit::{Cluster, Proxy};

/// Longer than the first outage (about a try's bound), so the removals that go on in the
/// background are seen to finish on the same session; the second outage outlasts it.
const SESSION: Duration = Duration::from_secs(6);
/// How many timed calls are measured per fault.
const TIMED_CALLS: u64 = 100;
/// What a try or a listing may take at most: its bound (a listing's: the longer of TRY_BOUND and
/// the connection's read timeout, 2/5 of the session timeout), and room for a loaded machine.
const TRY_LIMIT: Duration = Duration::from_millis(TRY_BOUND.as_millis() as u64 + 500);
const LISTING_LIMIT: Duration = Duration::from_millis(SESSION.as_millis() as u64 * 2 / 5 + 500);
/// The p99 of a timed call's overshoot of its deadline may be at most: the removal's grace and
/// room for a loaded machine (before: 2 s, the foreground removal; or a whole connect timeout).
const OVERSHOOT_LIMIT: Duration = Duration::from_millis(REMOVAL_GRACE.as_millis() as u64 + 400);

/// A timed call: its timeout, how long it took, and its result.
type TimedCall = Pin<Box<dyn Future<Output = (Duration, Duration, Result<bool, zklock::Error>)> + Send>>;

type Call = Pin<Box<dyn Future<Output = (String, Duration, Result<bool, zklock::Error>)> + Send>>;

#[derive(Clone, Copy, Debug)]
enum Fault {
    Stall,
    Cut,
}

struct Paths {
    lock: String,
    busy: String,
    rw: String,
    semaphore: String,
    multi: String,
}

/// The tries and listings of every recipe, each timed, on `client` (its server unreachable).
fn tries(client: &Client, paths: &Paths, round: u64) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    let owner = Owner::new(10_000 + round);
    let timed = |what: &str, started: Instant, result: Result<bool, zklock::Error>| {
        (what.to_owned(), started.elapsed(), result)
    };
    for (what, path) in [("lock try", &paths.lock), ("busy lock try", &paths.busy)] {
        let lock = client.lock(path).unwrap();
        let owner = owner.clone();
        let what = what.to_owned();
        calls.push(Box::pin(async move {
            let started = Instant::now();
            let result = lock.try_acquire(&owner).await.map(|held| held.is_some());
            timed(&what, started, result)
        }));
    }
    let rw = client.read_write_lock(&paths.rw).unwrap();
    let owner_w = owner.clone();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = rw.write().try_acquire(&owner_w).await.map(|held| held.is_some());
        timed("write try", started, result)
    }));
    let semaphore = client.semaphore(&paths.semaphore, 2).unwrap();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = semaphore.try_acquire(1).await.map(|held| held.is_some());
        timed("semaphore try", started, result)
    }));
    let multi = client
        .multi_lock([
            Member::leases(&client.semaphore(&paths.semaphore, 2).unwrap(), 1),
            client.lock(&paths.multi).unwrap().into(),
        ])
        .unwrap();
    let owner_m = owner.clone();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = multi.acquire_for(&owner_m, Some(Duration::ZERO), None).await.map(|held| held.is_ok());
        timed("multi-lock try", started, result)
    }));
    let listed = client.lock(&paths.busy).unwrap();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = listed.contenders().await.map(|_| true);
        timed("contenders", started, result)
    }));
    let listed = client.lock(&paths.busy).unwrap();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = listed.holder().await.map(|_| true);
        timed("holder", started, result)
    }));
    let semaphore = client.semaphore(&paths.semaphore, 2).unwrap();
    calls.push(Box::pin(async move {
        let started = Instant::now();
        let result = semaphore.participants().await.map(|_| true);
        timed("semaphore participants", started, result)
    }));
    calls
}

/// A timed call of one of the recipes (by `i`), with its timeout: its overshoot and result.
fn timed_call(client: &Client, paths: &Paths, i: u64) -> (Duration, TimedCall) {
    // Deadlines spread over the outage: 200 ms to 1.2 s.
    let timeout = Duration::from_millis(200 + (i * 10) % 1000);
    let owner = Owner::new(20_000 + i);
    let call: Pin<Box<dyn Future<Output = Result<bool, zklock::Error>> + Send>> = match i % 4 {
        0 => {
            let lock = client.lock(&paths.busy).unwrap();
            Box::pin(async move { lock.acquire_for(&owner, Some(timeout)).await.map(|a| a.is_acquired()) })
        }
        1 => {
            let rw = client.read_write_lock(&paths.rw).unwrap();
            Box::pin(async move { rw.read().acquire_for(&owner, Some(timeout)).await.map(|a| a.is_acquired()) })
        }
        2 => {
            let semaphore = client.semaphore(&paths.semaphore, 2).unwrap();
            Box::pin(async move { semaphore.acquire_for(1, Some(timeout), None).await.map(|l| l.is_some()) })
        }
        _ => {
            let multi = client
                .multi_lock([
                    Member::leases(&client.semaphore(&paths.semaphore, 2).unwrap(), 1),
                    client.lock(&paths.multi).unwrap().into(),
                ])
                .unwrap();
            Box::pin(async move { multi.acquire_for(&owner, Some(timeout), None).await.map(|m| m.is_ok()) })
        }
    };
    (
        timeout,
        Box::pin(async move {
            let started = Instant::now();
            let result = call.await;
            (timeout, started.elapsed(), result)
        }),
    )
}

fn p99(mut figures: Vec<Duration>) -> (Duration, Duration) {
    figures.sort();
    let at = (figures.len() * 99).div_ceil(100) - 1;
    (figures[at], *figures.last().unwrap())
}

async fn outage(fault: Fault) {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let base = unique_path(&format!("deadline-{fault:?}"));
    let paths = Paths {
        lock: format!("{base}/lock"),
        busy: format!("{base}/busy"),
        rw: format!("{base}/rw"),
        semaphore: format!("{base}/semaphore"),
        multi: format!("{base}/multi"),
    };
    // The busy path is held, for good, by a client the outage spares.
    let holder = client_at(&cluster.connect_string()).await;
    let held = holder.lock(&paths.busy).unwrap().acquire(&Owner::new(1)).await.unwrap();
    // The default connect timeout (10 s), which a try must not wait out.
    let options = ClientOptions { session_timeout: SESSION, ..ClientOptions::default() };
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();
    // Handles kept throughout: the calls' handles share their recipes, which know the paths are
    // made, so each call sends its create at once (not queued behind the first one's answer), and
    // gives up with a create in flight.
    let _kept = (
        [&paths.lock, &paths.busy, &paths.multi].map(|path| client.lock(path).unwrap()),
        client.read_write_lock(&paths.rw).unwrap(),
        client.semaphore(&paths.semaphore, 2).unwrap(),
    );
    // Healthy: a try answers busy, or holds; the paths are made.
    for (what, _, result) in futures::future::join_all(tries(&client, &paths, 0)).await {
        let result = result.unwrap_or_else(|err| panic!("{what} with the server up: {err}"));
        // (The semaphore's try and the multi-lock's contend for the semaphore's mutex: either.)
        if what.ends_with("lock try") && !what.starts_with("multi") {
            assert_eq!(result, what != "busy lock try", "{what} with the server up");
        }
    }
    wait_until("the tries' nodes are gone", Duration::from_secs(20), || async {
        children(&observer, &paths.lock).await.is_empty() && children(&observer, &paths.multi).await.is_empty()
    })
    .await;

    match fault {
        Fault::Stall => proxy.stall(),
        Fault::Cut => proxy.cut(),
    }
    let outage_began = Instant::now();
    // The timed calls and the tries at once, on one client: tries are not held up behind calls
    // that wait (the Node report: a try hung behind pending calls until the server came back).
    let (timeouts, timed): (Vec<Duration>, Vec<_>) = (0..TIMED_CALLS).map(|i| timed_call(&client, &paths, i)).unzip();
    let timed = tokio::spawn(futures::future::join_all(timed));
    let tried = futures::future::join_all(tries(&client, &paths, 1)).await;
    let timed = timed.await.unwrap();
    let outage = outage_began.elapsed();

    let mut try_figures = Vec::new();
    for (what, took, result) in &tried {
        match result {
            Err(err) => assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{fault:?}: {what} after {took:?}: {err}"),
            Ok(answer) => panic!("{fault:?}: {what} answered {answer} with the server unreachable"),
        }
        let limit = if what.contains("try") { TRY_LIMIT } else { TRY_LIMIT.max(LISTING_LIMIT) };
        assert!(*took <= limit, "{fault:?}: {what} took {took:?}, past its bound and margin {limit:?}");
        try_figures.push(*took);
    }
    let mut overshoots = Vec::new();
    for (timeout, took, result) in timed {
        match result {
            Ok(false) => {}
            Ok(true) => panic!("{fault:?}: a timed call held with the server unreachable"),
            // A session given up under a call that queues again needs none to end in time.
            Err(err) => panic!("{fault:?}: a timed call of {timeout:?} failed after {took:?}: {err}"),
        }
        overshoots.push(took.saturating_sub(timeout));
    }
    let (try_p99, try_max) = p99(try_figures);
    let (over_p99, over_max) = p99(overshoots);
    eprintln!(
        "{fault:?} outage of {outage:?}: {} tries and listings took p99 {try_p99:?} (max {try_max:?}); {} timed \
         calls overshot their deadlines by p99 {over_p99:?} (max {over_max:?})",
        tried.len(),
        timeouts.len()
    );
    assert!(over_p99 <= OVERSHOOT_LIMIT, "{fault:?}: timed calls overshot by p99 {over_p99:?}");

    // Back: nothing of theirs is left, on the same session: the removals went on in the
    // background (creates the stall held were delivered, and their nodes found and deleted).
    let session = client.session_id();
    proxy.pass();
    for path in [&paths.lock, &paths.rw, &paths.multi, &format!("{}/locks", paths.semaphore)] {
        wait_children(&observer, path, 0).await;
    }
    wait_children(&observer, &format!("{}/leases", paths.semaphore), 0).await;
    wait_children(&observer, &paths.busy, 1).await;
    assert_eq!(client.session_id(), session, "{fault:?}: the session outlived the first outage");

    // An outage the session does not outlive: once the client gave it up, a try still answers
    // within its bound (before: it waited out the connect timeout, 10 s), and says why.
    match fault {
        Fault::Stall => proxy.stall(),
        Fault::Cut => proxy.cut(),
    }
    wait_until("the client gave its session up", Duration::from_secs(20), || async {
        client.state() == zklock::SessionState::Expired
    })
    .await;
    for (what, took, result) in futures::future::join_all(tries(&client, &paths, 2)).await {
        let err = result.expect_err("the server is unreachable");
        assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{fault:?}, session given up: {what} after {took:?}: {err}");
        assert!(took <= TRY_LIMIT, "{fault:?}, session given up: {what} took {took:?}");
    }
    proxy.pass();
    wait_until("a try answers once the server is back", Duration::from_secs(20), || async {
        client.lock(&paths.busy).unwrap().try_acquire(&Owner::new(2)).await.is_ok_and(|held| held.is_none())
    })
    .await;
    held.release().await.unwrap();
    client.close().await;
    holder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_listings_and_timed_calls_of_every_recipe_keep_their_deadlines_on_a_stalled_connection() {
    outage(Fault::Stall).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_listings_and_timed_calls_of_every_recipe_keep_their_deadlines_on_a_cut_connection() {
    outage(Fault::Cut).await;
}
