//! An acquisition with no timeout waits as long as it takes: an outage longer than the connect
//! timeout, and than the session, ends its sessions, and it queues again on new ones, trying for
//! a session again after each connect timeout, until the servers are back.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, HoldState, Member, Owner};
use zklock_testkit::{Cluster, Proxy};

const SESSION: Duration = Duration::from_secs(2);
const CONNECT: Duration = Duration::from_secs(1);
/// Longer than the session (its waiters' sessions end) and than several connect timeouts.
const OUTAGE: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forever_acquisition_of_every_recipe_outlasts_an_outage_longer_than_the_connect_timeout_and_the_session() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let holder = Client::connect_with(&cluster.connect_string(), ClientOptions::default()).await.unwrap();
    let options = ClientOptions { session_timeout: SESSION, connect_timeout: CONNECT, ..Default::default() };
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();

    // A waiter queued before the outage, behind a holder on a client the outage spares.
    let queued_path = "/locks/forever/queued";
    let held = holder.lock(queued_path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let queued = tokio::spawn({
        let lock = client.lock(queued_path).unwrap();
        async move { lock.acquire(&Owner::new(2)).await }
    });
    wait_children(&observer, queued_path, 2).await;

    proxy.cut();
    // Acquisitions begun during the outage, of every recipe: each needs a new session.
    let mutex = tokio::spawn({
        let lock = client.lock("/locks/forever/mutex").unwrap();
        async move { lock.acquire(&Owner::new(3)).await }
    });
    let write = tokio::spawn({
        let rw = client.read_write_lock("/locks/forever/rw").unwrap();
        async move { rw.write().acquire(&Owner::new(4)).await }
    });
    let read = tokio::spawn({
        let rw = client.read_write_lock("/locks/forever/rw-read").unwrap();
        async move { rw.read().acquire(&Owner::new(5)).await }
    });
    let leases = tokio::spawn({
        let semaphore = client.semaphore("/locks/forever/semaphore", 2).unwrap();
        async move { semaphore.acquire(1).await }
    });
    let multi = tokio::spawn({
        let members = [
            Member::leases(&client.semaphore("/locks/forever/multi-semaphore", 1).unwrap(), 1),
            client.lock("/locks/forever/multi-lock").unwrap().into(),
        ];
        let multi = client.multi_lock(members).unwrap();
        async move { multi.acquire(&Owner::new(6)).await }
    });
    // The fault itself: an outage this long.
    tokio::time::sleep(OUTAGE).await;
    // Before: each of them had ended with a timeout ("no session within the connect timeout").
    for (what, finished) in [
        ("the queued waiter", queued.is_finished()),
        ("the mutex", mutex.is_finished()),
        ("the write lock", write.is_finished()),
        ("the read lock", read.is_finished()),
        ("the semaphore", leases.is_finished()),
        ("the multi-lock", multi.is_finished()),
    ] {
        assert!(!finished, "{what}'s acquisition ended during the outage; it waits forever");
    }
    held.release().await.unwrap();
    proxy.pass();

    let within = Duration::from_secs(30);
    let queued =
        tokio::time::timeout(within, queued).await.expect("in time").unwrap().expect("the queued waiter holds");
    assert_eq!(queued.hold().state(), HoldState::Held);
    let mutex = tokio::time::timeout(within, mutex).await.expect("in time").unwrap().expect("the mutex is held");
    let write = tokio::time::timeout(within, write).await.expect("in time").unwrap().expect("the write lock is held");
    let read = tokio::time::timeout(within, read).await.expect("in time").unwrap().expect("the read lock is held");
    let leases = tokio::time::timeout(within, leases).await.expect("in time").unwrap().expect("a lease is held");
    let multi = tokio::time::timeout(within, multi).await.expect("in time").unwrap().expect("the multi-lock is held");
    for guard in [&queued, &mutex, &write, &read] {
        assert_eq!(guard.hold().state(), HoldState::Held);
    }
    queued.release().await.unwrap();
    mutex.release().await.unwrap();
    write.release().await.unwrap();
    read.release().await.unwrap();
    leases.release().await.unwrap();
    multi.release().await.unwrap();
    client.close().await;
    holder.close().await;
}
