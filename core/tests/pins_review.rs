//! Review r-pins: the user's last handle of a client (`engine::UserHandles`) closes it in the
//! background, on the runtime the client was connected on. What must hold: no panic or abort when
//! that last handle goes on a thread with no runtime, after the runtime is gone, or while the
//! runtime shuts down; an acquisition in flight when its last handle goes leaves no node behind
//! (its session ends at once, as a close ends it).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use common::*;
use zklock::{Acquired, Owner};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Held, then the runtime dropped, then the last handles dropped on this plain thread (no runtime
/// current, the client's gone): no panic.
#[test]
fn last_handle_dropped_on_a_plain_thread_after_its_runtime_is_gone() {
    let path = unique_path("pins-plain-thread");
    let rt = runtime();
    let (client, lock) = rt.block_on(async {
        let client = client().await;
        let lock = client.lock(&path).unwrap();
        assert!(matches!(lock.acquire_for(&Owner::new(1), None).await.unwrap(), Acquired::Held(_)));
        (client, lock)
    });
    drop(rt);
    let dropped = catch_unwind(AssertUnwindSafe(move || drop((lock, client))));
    assert!(dropped.is_ok(), "the last handle's drop panicked with no runtime");
}

/// Held on a runtime that is still running, the last handles dropped on a plain thread (no
/// runtime current there): the session ends at once, as a close ends it.
#[test]
fn last_handle_dropped_on_a_plain_thread_ends_the_session() {
    let path = unique_path("pins-plain-thread-live");
    let rt = runtime();
    let (client, lock) = rt.block_on(async {
        let client = client().await;
        let lock = client.lock(&path).unwrap();
        assert!(matches!(lock.acquire_for(&Owner::new(1), None).await.unwrap(), Acquired::Held(_)));
        (client, lock)
    });
    let dropped = std::thread::spawn(move || drop((lock, client))).join();
    assert!(dropped.is_ok(), "the last handle's drop panicked on a plain thread");
    rt.block_on(async {
        let zk = observer().await;
        wait_until("the node goes at once", Duration::from_secs(4), || async { children(&zk, &path).await.is_empty() })
            .await;
    });
}

/// The last handle is a lock inside a task queued behind another client's hold; the runtime
/// shuts down, dropping the task, and with it the last handle, inside the runtime's shutdown: no
/// panic, no abort.
#[test]
fn last_handle_dropped_by_the_runtimes_shutdown() {
    let path = unique_path("pins-shutdown");
    let other_rt = runtime();
    let (holder, held) = other_rt.block_on(async {
        let holder = client().await;
        let held = holder.lock(&path).unwrap();
        assert!(matches!(held.acquire_for(&Owner::new(1), None).await.unwrap(), Acquired::Held(_)));
        (holder, held)
    });
    let rt = runtime();
    rt.block_on(async {
        let client = client().await;
        let lock = client.lock(&path).unwrap();
        drop(client);
        tokio::spawn(async move {
            let _ = lock.acquire_for(&Owner::new(2), None).await;
            drop(lock);
        });
        let zk = observer().await;
        wait_until("the waiter queues", Duration::from_secs(5), || async { children(&zk, &path).await.len() == 2 })
            .await;
    });
    let shut = catch_unwind(AssertUnwindSafe(move || rt.shutdown_timeout(Duration::from_secs(5))));
    assert!(shut.is_ok(), "the runtime's shutdown panicked dropping the last handle");
    other_rt.block_on(async {
        held.release(&Owner::new(1)).await.unwrap();
        drop((held, holder));
    });
}

/// An acquisition in flight (queued behind another client's hold) is dropped, and with it its
/// client's last handle: its node goes at once (the background removal or the session's end),
/// not after a session timeout, and the holder's successor is not left waiting on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_in_flight_dropped_with_the_last_handle_leaves_no_node() {
    let path = unique_path("pins-in-flight");
    let holder = client().await;
    let held = holder.lock(&path).unwrap();
    assert!(matches!(held.acquire_for(&Owner::new(1), None).await.unwrap(), Acquired::Held(_)));
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    drop(client);
    let waiting = tokio::spawn(async move { lock.acquire_for(&Owner::new(2), None).await.map(|a| a.is_acquired()) });
    let zk = observer().await;
    wait_until("the waiter queues", Duration::from_secs(5), || async { children(&zk, &path).await.len() == 2 }).await;
    waiting.abort();
    let _ = waiting.await;
    wait_until("the waiter's node goes at once", Duration::from_secs(4), || async {
        children(&zk, &path).await.len() == 1
    })
    .await;
    held.release(&Owner::new(1)).await.unwrap();
}
