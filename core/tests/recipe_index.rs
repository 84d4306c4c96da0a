//! Adversarial review of the recipe index (engine::Registry: recipes by path, each removed by its
//! recipe's drop under the registry's mutex). On a real server. What must hold however handles
//! are made and dropped, on however many threads: one recipe per path (of one kind and options)
//! while anything holds it, so a hold is found by any later handle and an owner never queues
//! behind itself; no recipe dropped under the registry's mutex (a self-deadlock: parking_lot's
//! mutexes are not reentrant); mutual exclusion in the process.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zklock::binding::LockBinding;
use zklock::{Acquired, ErrorKind, LockOptions, Owner};

/// A hang here is the finding (a self-deadlock on the registry's mutex): bounded, so the test
/// fails instead of hanging the run.
const BOUND: Duration = Duration::from_secs(120);

fn separate() -> LockOptions {
    LockOptions { separate: true, ..LockOptions::default() }
}

/// An owner holding a path through one separate handle is refused with Deadlock through another,
/// also once the holding handle is dropped (the hold keeps its recipe in the index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_refused_through_another_handle_after_the_holding_one_is_dropped() {
    let client = client().await;
    let path = unique_path("index-deadlock");
    let owner = Owner::new(7);
    let first = client.lock_with(&path, separate()).unwrap();
    assert!(matches!(first.acquire_for(&owner, None).await.unwrap(), Acquired::Held(_)));
    drop(first);
    assert_eq!(client.paths_kept(), 1, "the hold keeps its path");
    let second = client.lock_with(&path, separate()).unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(10), second.acquire_for(&owner, None))
        .await
        .expect("the owner queued behind its own node instead of being refused");
    assert_eq!(refused.map(|_| ()).unwrap_err().kind(), ErrorKind::Deadlock);
    client.close().await;
}

/// A hold outlives its handles, and a handle made later for the path is the same lock (same owner
/// table), finds the hold and releases it; then nothing is kept for the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_handle_finds_a_hold_whose_handles_are_gone() {
    let client = client().await;
    let path = unique_path("index-later");
    let owner = Owner::new(8);
    let lock = client.lock(&path).unwrap();
    let table = lock.owner_table_id();
    assert!(matches!(lock.acquire_for(&owner, None).await.unwrap(), Acquired::Held(_)));
    drop(lock);
    let later = client.lock(&path).unwrap();
    assert_eq!(later.owner_table_id(), table, "a second recipe for a held path");
    assert!(later.is_held_by(&owner));
    later.release(&owner).await.unwrap();
    drop(later);
    assert_eq!(client.paths_kept(), 0);
    client.close().await;
}

/// Handles for a held path, and for other paths, made and dropped on several threads at once
/// (each drop of a last handle takes the registry's mutex, as `recipe()` and
/// `holds_path_elsewhere` do): every handle of the held path is the holding recipe, no thread
/// deadlocks, and nothing is kept once all is released and dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_made_and_dropped_on_many_threads_while_held_share_the_holding_recipe() {
    let client = client().await;
    let base = unique_path("index-threads");
    let held_path = format!("{base}/held");
    let owner = Owner::new(9);
    let lock = client.lock(&held_path).unwrap();
    let table = lock.owner_table_id();
    assert!(matches!(lock.acquire_for(&owner, None).await.unwrap(), Acquired::Held(_)));
    drop(lock);

    let split = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for t in 0..4 {
        let (client, held_path, base, split) = (client.clone(), held_path.clone(), base.clone(), split.clone());
        let owner = owner.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..20_000 {
                if t % 2 == 0 {
                    let handle = client.lock(&held_path).unwrap();
                    if handle.owner_table_id() != table || !handle.is_held_by(&owner) {
                        split.fetch_add(1, Ordering::Relaxed);
                    }
                    // The acquisition path's check, under the owner table: re-entry counts up.
                    if let Some(Ok(_)) = handle.try_reenter(&owner) {
                        assert!(handle.release_nested(&owner).is_some());
                    }
                } else {
                    // Last handles of other paths dropped at once (a recipe's drop takes the
                    // registry's mutex), and separate ones of the held path.
                    let other = client.lock(&format!("{base}/p{}", i % 64)).unwrap();
                    let twin = client.lock(&format!("{base}/p{}", i % 64)).unwrap();
                    drop(other);
                    drop(twin);
                    drop(client.lock_with(&held_path, separate()).unwrap());
                }
            }
        }));
    }
    let joined = tokio::task::spawn_blocking(move || threads.into_iter().all(|t| t.join().is_ok()));
    let joined = tokio::time::timeout(BOUND, joined).await.expect("a thread hung: a self-deadlock on the registry");
    assert!(joined.unwrap(), "a thread panicked");
    assert_eq!(split.load(Ordering::Relaxed), 0, "handles of a held path that were not the holding recipe");
    let handle = client.lock(&held_path).unwrap();
    handle.release(&owner).await.unwrap();
    drop(handle);
    assert_eq!(client.paths_kept(), 0);
    client.close().await;
}

/// Mutual exclusion in one process while every acquisition makes its own handle and drops it
/// (the last handle of an unheld path drops its recipe while another task makes the next one):
/// never two holders at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_made_per_acquisition_never_admit_two_holders() {
    let client = client().await;
    let path = unique_path("index-exclusion");
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..6u64 {
        let (client, path, inside, overlaps) = (client.clone(), path.clone(), inside.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            let owner = Owner::new(100 + t);
            for _ in 0..25 {
                let lock = client.lock(&path).unwrap();
                let guard = lock.acquire(&owner).await.unwrap();
                drop(lock);
                if inside.swap(true, Ordering::AcqRel) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
                inside.store(false, Ordering::Release);
                guard.release().await.unwrap();
            }
        }));
    }
    let all = tokio::time::timeout(BOUND, futures::future::join_all(tasks)).await.expect("acquisitions hung");
    assert!(all.into_iter().all(|t| t.is_ok()));
    assert_eq!(overlaps.load(Ordering::Relaxed), 0, "two holders at once");
    assert_eq!(client.paths_kept(), 0);
    client.close().await;
}

/// Two readers of one shared recipe: one releases its last hold while the other's acquisition
/// settles (Recipe::count_down checks `holds_anything()` and only then takes the pin, while
/// Recipe::settle sets the owner table and then keeps an existing pin). If the settle falls
/// between the check and the take, the recipe is left unpinned while it holds: once its handles
/// are dropped the hold goes with it, a later handle is a new recipe that does not find it, and
/// the read node stays until the session ends. A stress: the window is a few instructions wide,
/// so a pass says little; a failure is the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_hold_settled_during_anothers_last_release_keeps_its_recipe() {
    let client = client().await;
    let path = unique_path("index-pin");
    let (a, b) = (Owner::new(1), Owner::new(2));
    for round in 0..300 {
        let rw = client.read_write_lock(&path).unwrap();
        let read = rw.read().clone();
        assert!(matches!(read.acquire_for(&a, None).await.unwrap(), Acquired::Held(_)));
        let (release, acquire) = {
            let (ra, rb) = (read.clone(), read.clone());
            let (a, b) = (a.clone(), b.clone());
            (
                tokio::spawn(async move { ra.release(&a).await }),
                tokio::spawn(async move { rb.acquire_for(&b, None).await.map(|acquired| acquired.is_acquired()) }),
            )
        };
        release.await.unwrap().unwrap();
        assert!(acquire.await.unwrap().unwrap());
        drop((rw, read));
        let later = client.read_write_lock(&path).unwrap();
        assert!(
            later.read().is_held_by(&b),
            "round {round}: b's read hold went with its recipe (unpinned while held): its node is orphaned"
        );
        later.read().release(&b).await.unwrap();
    }
    assert_eq!(client.paths_kept(), 0);
    client.close().await;
}

/// Closing with holds whose handles are gone and handles still alive: nothing hangs, later handles
/// are refused as closed, and every recipe goes once the handles do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_with_holds_and_live_handles_leaves_nothing() {
    let client = client().await;
    let base = unique_path("index-close");
    let owner = Owner::new(3);
    let mut kept = Vec::new();
    for i in 0..50 {
        let lock = client.lock(&format!("{base}/p{i}")).unwrap();
        assert!(matches!(lock.acquire_for(&owner, None).await.unwrap(), Acquired::Held(_)));
        if i % 2 == 0 {
            kept.push(lock);
        }
    }
    tokio::time::timeout(BOUND, client.close()).await.expect("close hung");
    let after = client.lock(&format!("{base}/p1")).unwrap();
    let refused = after.acquire_for(&Owner::new(4), Some(Duration::ZERO)).await.map(|_| ()).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Closed);
    drop(after);
    for lock in &kept {
        let _ = lock.release(&owner).await;
    }
    drop(kept);
    assert_eq!(client.paths_kept(), 0, "recipes kept after close, handles and holds gone");
}

/// The race above under load, for a while: two readers each take a read hold through a handle of
/// their own, drop it, and look for the hold through a fresh handle before releasing. A hold not
/// found (its recipe unpinned by the other's last release as it settled, then dropped with the
/// handle) is the race; its node is then left on the server until the session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_holds_whose_handles_come_and_go_are_always_found() {
    let client = client().await;
    let path = unique_path("index-pin-stress");
    let lost = Arc::new(AtomicUsize::new(0));
    let cycles = Arc::new(AtomicUsize::new(0));
    let until = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut tasks = Vec::new();
    for id in 1..=2u64 {
        let (client, path, lost, cycles) = (client.clone(), path.clone(), lost.clone(), cycles.clone());
        tasks.push(tokio::spawn(async move {
            let owner = Owner::new(id);
            while tokio::time::Instant::now() < until {
                let rw = client.read_write_lock(&path).unwrap();
                assert!(rw.read().acquire_for(&owner, None).await.unwrap().is_acquired());
                drop(rw);
                let again = client.read_write_lock(&path).unwrap();
                if again.read().is_held_by(&owner) {
                    again.read().release(&owner).await.unwrap();
                } else {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let (lost, cycles) = (lost.load(Ordering::Relaxed), cycles.load(Ordering::Relaxed));
    eprintln!("{cycles} cycles, {lost} read holds not found through a later handle");
    let left = children(&observer().await, &path).await;
    assert_eq!((lost, left.len()), (0, 0), "read holds gone from the process, nodes left: {left:?}");
    client.close().await;
}

/// Every handle of a client gone (the `Client`s and `Lock`s dropped, no guard) while an owner
/// holds through `acquire_for`: nothing can reach the hold any more (no handle to release it, no
/// client to close), yet the pinned recipe keeps the registry, and with it the connection, alive:
/// the session is never ended by `ClientInner`'s drop ("the last handle is gone: ... the session
/// ends"), so the lock node stays on the server until the process exits, and every other
/// contender waits for it. Not new with the floors (the pin held the client before them too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_with_an_unreachable_hold_ends_its_session() {
    let path = unique_path("index-dropped-client");
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    assert!(matches!(lock.acquire_for(&Owner::new(5), None).await.unwrap(), Acquired::Held(_)));
    // Looked at before the drops: the session may end before an observer connects after them.
    let zk = observer().await;
    assert_eq!(children(&zk, &path).await.len(), 1);
    drop(lock);
    drop(client);
    let timeout = zklock::DEFAULT_SESSION_TIMEOUT * 2;
    let deadline = tokio::time::Instant::now() + timeout;
    while !children(&zk, &path).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every handle of the client dropped, the hold unreachable: its node is still there after {timeout:?} \
             (orphaned until the process exits)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls until `path` has no children, for at most `timeout`: whether it came to none.
async fn children_go(zk: &zookeeper_client::Client, path: &str, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while !children(zk, path).await.is_empty() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// The `Client` dropped, and the lock that took the hold, but a lock of another path of the client
/// kept: the client lives, its hold stays, and a handle made through the kept one finds it and
/// releases it. Once that handle goes too, the session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_stays_while_any_handle_of_its_client_lives() {
    let path = unique_path("index-kept-client");
    let client = client().await;
    let owner = Owner::new(6);
    let lock = client.lock(&path).unwrap();
    assert!(matches!(lock.acquire_for(&owner, None).await.unwrap(), Acquired::Held(_)));
    let other = client.lock(&unique_path("index-kept-other")).unwrap();
    let session = client.session_id();
    drop(lock);
    drop(client);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let zk = observer().await;
    assert_eq!(children(&zk, &path).await.len(), 1, "the hold's node went while a handle of its client lived");
    let again = other.client().lock(&path).unwrap();
    assert_eq!(other.client().session_id(), session);
    assert!(again.is_held_by(&owner), "the hold was not found through a handle made later");
    // Kept, still held, while `other` goes: `again` is a handle of the client too.
    drop(other);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(again.is_held_by(&owner));
    again.release(&owner).await.unwrap();
    assert!(children(&zk, &path).await.is_empty());
    drop(again);
}

/// Leases kept alone (their semaphore and client dropped) keep the client: still held, their
/// nodes there; dropping them then releases them and ends the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_kept_alone_keep_their_client() {
    let path = unique_path("index-leases-alone");
    let leases_path = format!("{path}/leases");
    let client = client().await;
    let semaphore = client.semaphore(&path, 2).unwrap();
    let leases = semaphore.acquire(1).await.unwrap();
    drop(semaphore);
    drop(client);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let zk = observer().await;
    assert_eq!(leases.state(), zklock::HoldState::Held, "leases kept alone were lost");
    assert_eq!(children(&zk, &leases_path).await.len(), 1);
    drop(leases);
    assert!(
        children_go(&zk, &leases_path, Duration::from_secs(10)).await,
        "the lease node stayed after its last handle"
    );
}

/// Two read holds taken with `acquire_for` on one recipe: every handle dropped, the session ends as
/// a close ends it (Closed reported) and every node goes at once (well within the session
/// timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handle_dropped_ends_the_session_of_read_holds_too() {
    let path = unique_path("index-dropped-rw");
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    assert!(rw.read().acquire_for(&Owner::new(1), None).await.unwrap().is_acquired());
    assert!(rw.read().acquire_for(&Owner::new(2), None).await.unwrap().is_acquired());
    let zk = observer().await;
    assert_eq!(children(&zk, &path).await.len(), 2);
    let state = client.state_changes();
    drop((rw, client));
    assert!(children_go(&zk, &path, Duration::from_secs(3)).await, "read nodes left after every handle was dropped");
    let mut state = state;
    let mut last = None;
    while let Ok(Some(next)) = tokio::time::timeout(Duration::from_secs(5), state.next()).await {
        last = Some(next);
    }
    assert_eq!(last, Some(zklock::SessionState::Closed), "the session did not end as a close does");
}
