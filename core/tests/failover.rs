//! A real 3-server ensemble under failover: the leader is killed and restarted, a follower is
//! paused and resumed, while 8 contenders in 4 sessions loop acquire, hold and release.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
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
    /// Held throughout: never Suspended or Lost between enter and exit.
    valid: bool,
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
                tokio::time::sleep(Duration::from_millis(2)).await; // the guarded work
                let exit = Instant::now();
                let valid = held_at_enter && hold.state() == HoldState::Held && changes.next().now_or_never().is_none();
                log.lock().push(Record { token: hold.fencing_token(), owner: i, enter, exit, valid });
                if let Err(err) = guard.release().await {
                    errors.lock().push(format!("{:?} contender-{i} release: {err}", started.elapsed()));
                }
            }
        }));
    }

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

    let log = log.lock().clone();
    eprintln!("{} holds, {} valid; errors: {:#?}", log.len(), log.iter().filter(|r| r.valid).count(), errors.lock());
    for i in 0..CONTENDERS {
        let after = log.iter().filter(|r| r.owner == i && r.enter > last_fault_over).count();
        assert!(after > 0, "contender-{i} kept going after the faults");
    }
    let mut valid: Vec<&Record> = log.iter().filter(|r| r.valid).collect();
    valid.sort_by_key(|r| r.enter);
    for pair in valid.windows(2) {
        assert!(pair[1].enter >= pair[0].exit, "two valid holders overlapped: {:?} and {:?}", pair[0], pair[1]);
        assert!(pair[1].token > pair[0].token, "tokens rise in the order of holding: {:?} then {:?}", pair[0], pair[1]);
    }
    assert!(valid.len() > 100, "enough holds to mean something: {}", valid.len());
    for client in clients {
        client.close().await;
    }
}
