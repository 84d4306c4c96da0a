//! A real 3-server ensemble under failover: the leader is killed and restarted, a follower is
//! paused and resumed, while 8 contenders in 4 sessions loop acquire, hold and release.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zklock::{Client, ClientOptions, HoldState, Owner};
use zklock_testkit::Cluster;

const RUN: Duration = Duration::from_secs(30);
const CONTENDERS: usize = 8;
const SESSIONS: usize = 4;

#[derive(Debug, Clone)]
struct Record {
    token: i64,
    owner: usize,
    enter: Instant,
    exit: Instant,
    /// Not lost at exit (seen after `exit` was taken), so the hold was rightful from enter to
    /// exit, Suspended or not on the way: such holds must never overlap.
    valid: bool,
    /// Was Suspended at some point between enter and exit (and still valid): the holds that
    /// lived through a fault, which the check must include.
    suspended: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_keeps_mutual_exclusion_and_every_contender_going() {
    let cluster = Arc::new(Cluster::ensemble(3));
    let connect = cluster.connect_string();
    let options = ClientOptions {
        session_timeout: Duration::from_secs(4),
        connect_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let mut clients = Vec::new();
    for _ in 0..SESSIONS {
        clients.push(Client::connect_with(&connect, options.clone()).await.unwrap());
    }

    let log = Arc::new(Mutex::new(Vec::<Record>::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..CONTENDERS {
        let lock = clients[i % SESSIONS].lock("/locks/failover").unwrap();
        let (log, errors, stop) = (log.clone(), errors.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let owner = Owner::with_label(i as u64, format!("contender-{i}"));
            while !stop.load(Ordering::Relaxed) {
                let guard = match lock.acquire_timeout(&owner, Duration::from_secs(5)).await {
                    Ok(guard) => guard,
                    Err(err) => {
                        assert_ne!(err.kind(), zklock::ErrorKind::Closed, "{err}");
                        errors.lock().push(format!("{:?} contender-{i}: {err}", started.elapsed()));
                        continue;
                    }
                };
                let hold = guard.hold().clone();
                let mut changes = hold.state_changes();
                let enter = Instant::now();
                let held_at_enter = hold.state() == HoldState::Held;
                // The guarded work, watching the hold's state meanwhile.
                let mut suspended = false;
                let work = tokio::time::sleep(Duration::from_millis(20));
                tokio::pin!(work);
                let mut work_done = false;
                loop {
                    tokio::select! {
                        _ = &mut work, if !work_done => work_done = true,
                        Some(state) = changes.next() => suspended |= state == HoldState::Suspended,
                    }
                    // A careful holder waits a suspension out before it calls its work done.
                    if work_done && hold.state() != HoldState::Suspended {
                        break;
                    }
                }
                let exit = Instant::now();
                // Read after `exit`: not lost now means not lost at `exit` either.
                let valid = held_at_enter && hold.state() != HoldState::Lost && hold.lost_reason().is_none();
                log.lock().push(Record { token: hold.fencing_token(), owner: i, enter, exit, valid, suspended });
                if let Err(err) = guard.release().await {
                    errors.lock().push(format!("{:?} contender-{i} release: {err}", started.elapsed()));
                }
            }
        }));
    }

    // A hold that lives through both faults, on a lock of its own, with a waiter from another
    // session queued behind it: the waiter must not get in before the hold is given back.
    let long_path = "/locks/failover-long";
    let long_hold = {
        let lock = clients[0].lock(long_path).unwrap();
        tokio::spawn(async move {
            let guard = lock.acquire(&Owner::with_label(100, "long-holder")).await.unwrap();
            let hold = guard.hold().clone();
            let mut changes = hold.state_changes();
            let (mut suspended, mut lost) = (false, false);
            let until = tokio::time::sleep_until((started + Duration::from_secs(20)).into());
            tokio::pin!(until);
            loop {
                tokio::select! {
                    _ = &mut until, if hold.state() != HoldState::Suspended => break,
                    state = changes.next() => match state {
                        Some(HoldState::Suspended) => suspended = true,
                        Some(HoldState::Lost) | None => { lost = true; break }
                        Some(_) => {}
                    },
                }
            }
            let exit = Instant::now();
            lost |= hold.state() == HoldState::Lost;
            let token = hold.fencing_token();
            let _ = guard.release().await;
            (exit, token, suspended, lost)
        })
    };
    let long_waiter = {
        let lock = clients[1].lock(long_path).unwrap();
        tokio::spawn(async move {
            tokio::time::sleep_until((started + Duration::from_secs(2)).into()).await;
            let guard = lock.acquire(&Owner::with_label(101, "long-waiter")).await.unwrap();
            let enter = Instant::now();
            let token = guard.hold().fencing_token();
            guard.release().await.unwrap();
            (enter, token)
        })
    };

    // The faults, on the clock: kill the leader, restart it, pause a follower, resume it.
    let faults = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            let at = |secs: u64| {
                std::thread::sleep((started + Duration::from_secs(secs)).saturating_duration_since(Instant::now()))
            };
            at(4);
            let old_leader = cluster.wait_for_leader(Duration::from_secs(30));
            cluster.kill(old_leader);
            eprintln!("{:?}: killed leader {old_leader}", started.elapsed());
            at(8);
            cluster.restart(old_leader);
            eprintln!("{:?}: restarted {old_leader}", started.elapsed());
            at(13);
            // Pause the server that came back, now a follower: the two that never went down keep
            // the quorum, so the pause tests failover rather than a lost quorum.
            let leader = cluster.wait_for_leader(Duration::from_secs(30));
            let follower = if leader != old_leader { old_leader } else { (0..3).find(|&i| i != leader).unwrap() };
            cluster.pause(follower);
            eprintln!("{:?}: paused follower {follower}", started.elapsed());
            at(18);
            cluster.resume(follower);
            eprintln!("{:?}: resumed follower {follower}", started.elapsed());
            started + Duration::from_secs(18)
        })
    };
    let last_fault_over = faults.await.unwrap();
    tokio::time::sleep(RUN.saturating_sub(started.elapsed())).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let (long_exit, long_token, long_suspended, long_lost) = long_hold.await.unwrap();
    let (waiter_enter, waiter_token) = long_waiter.await.unwrap();
    eprintln!("the long hold: suspended {long_suspended}, lost {long_lost}");
    assert!(long_suspended || long_lost, "the long hold lived through the leader's death (all clients were cut)");
    assert!(waiter_enter >= long_exit, "the waiter got in before the long hold was given back (or told lost)");
    assert!(waiter_token > long_token, "the waiter's token is above the long hold's");

    let log = log.lock().clone();
    eprintln!("{} holds, {} valid; errors: {:#?}", log.len(), log.iter().filter(|r| r.valid).count(), errors.lock());
    for i in 0..CONTENDERS {
        let after = log.iter().filter(|r| r.owner == i && r.enter > last_fault_over).count();
        assert!(after > 0, "contender-{i} kept going after the faults");
    }
    let checked = check_holds(&log).unwrap_or_else(|err| panic!("{err}"));
    eprintln!(
        "checked {} holds ({} suspended on the way); {} lost, left out",
        checked.checked, checked.suspended, checked.left_out
    );
    assert!(checked.checked > 100, "enough holds to mean something: {}", checked.checked);
    for client in clients {
        client.close().await;
    }
}

/// What [`check_holds`] checked: the holds, those of them Suspended on the way, and the holds left
/// out (told lost by their exit).
#[derive(Debug, PartialEq, Eq)]
struct Checked {
    checked: usize,
    suspended: usize,
    left_out: usize,
}

/// The exclusion check of the run: every hold not lost by its exit is checked, those Suspended on
/// the way included (the holds that lived through a fault); the ones left out were told lost, and
/// there can be only a few of those (one per session and fault). No two checked holds overlap, and
/// tokens rise in the order of holding.
fn check_holds(log: &[Record]) -> Result<Checked, String> {
    let left_out = log.iter().filter(|r| !r.valid).count();
    if left_out > 2 * SESSIONS {
        return Err(format!("at most one hold lost per session and fault: {left_out} left out"));
    }
    let mut valid: Vec<&Record> = log.iter().filter(|r| r.valid).collect();
    valid.sort_by_key(|r| r.enter);
    // Sorted by entry, any overlap shows between neighbours: a hold that overlaps a later one
    // overlaps the one right after it too.
    for pair in valid.windows(2) {
        if pair[1].enter < pair[0].exit {
            return Err(format!("two valid holders overlapped: {:?} and {:?}", pair[0], pair[1]));
        }
        if pair[1].token <= pair[0].token {
            return Err(format!("tokens rise in the order of holding: {:?} then {:?}", pair[0], pair[1]));
        }
    }
    Ok(Checked { checked: valid.len(), suspended: valid.iter().filter(|r| r.suspended).count(), left_out })
}

/// A test of the check above, on planted holds: an overlap with a hold that was Suspended on the
/// way (the holds that live through a failover) fails it, as does one between two such holds and
/// too many holds left out; a lost hold beside another is left out, and counted.
#[test]
fn the_check_sees_an_overlap_among_holds_suspended_on_the_way() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let hold = |token: i64, owner: usize, enter: u64, exit: u64, valid: bool, suspended: bool| Record {
        token,
        owner,
        enter: ms(enter),
        exit: ms(exit),
        valid,
        suspended,
    };
    // A clean run: one after another, the second lived through a suspension.
    let clean = [hold(1, 0, 0, 10, true, false), hold(2, 1, 10, 30, true, true), hold(3, 2, 30, 40, true, false)];
    assert_eq!(check_holds(&clean), Ok(Checked { checked: 3, suspended: 1, left_out: 0 }));

    // Planted: a hold that was Suspended through a fault, while another held.
    let planted = [hold(1, 0, 0, 50, true, false), hold(2, 1, 20, 80, true, true), hold(3, 2, 80, 90, true, false)];
    let err = check_holds(&planted).expect_err("a suspended hold overlapping another is caught");
    assert!(err.contains("overlapped"), "{err}");
    // Both Suspended on the way.
    let both = [hold(1, 0, 0, 50, true, true), hold(2, 1, 20, 80, true, true)];
    assert!(check_holds(&both).expect_err("two suspended holds overlapping are caught").contains("overlapped"));
    // Among many, not next to each other in token order.
    let mut many: Vec<Record> = (0..10).map(|i| hold(i, 0, 10 * i as u64, 10 * i as u64 + 10, true, false)).collect();
    many.push(hold(20, 1, 15, 95, true, true));
    assert!(check_holds(&many).expect_err("a long suspended hold among short ones").contains("overlapped"));

    // A hold told lost by its exit is left out, and counted; too many of those fail the run.
    let lost = [hold(1, 0, 0, 50, true, false), hold(2, 1, 20, 80, false, true)];
    assert_eq!(check_holds(&lost), Ok(Checked { checked: 1, suspended: 0, left_out: 1 }));
    let many_lost: Vec<Record> = (0..=2 * SESSIONS as i64).map(|i| hold(i, 0, 0, 1, false, true)).collect();
    assert!(check_holds(&many_lost).expect_err("too many left out").contains("left out"));
    // Tokens that do not rise in the order of holding.
    let tokens = [hold(2, 0, 0, 10, true, false), hold(1, 1, 10, 20, true, true)];
    assert!(check_holds(&tokens).expect_err("falling tokens").contains("tokens rise"));
}
