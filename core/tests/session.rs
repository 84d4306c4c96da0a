//! Session and hold state, as values and streams, through a real server going away and coming back.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, HoldState, Owner, SessionState};
use zklock_testkit::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnected_then_connected_then_closed() {
    let cluster = Cluster::standalone();
    let options = ClientOptions { session_timeout: Duration::from_secs(20), ..Default::default() };
    let client = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let lock = client.lock("/locks/session").unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    assert_eq!(client.state(), SessionState::Connected);
    let mut changes = client.state_changes();

    let hold = guard.hold().clone();
    let mut hold_changes = hold.state_changes();
    cluster.kill(0);
    assert_eq!(changes.next().await, Some(SessionState::Disconnected));
    assert_eq!(client.state(), SessionState::Disconnected);
    assert_eq!(
        hold_changes.next().await,
        Some(HoldState::Suspended),
        "the holder is told to stop touching the resource"
    );

    cluster.restart(0);
    let reconnected = tokio::time::timeout(Duration::from_secs(20), changes.next()).await.expect("reconnects");
    assert_eq!(reconnected, Some(SessionState::Connected));
    assert_eq!(client.state(), SessionState::Connected);
    assert_eq!(hold_changes.next().await, Some(HoldState::Held), "back within the session: held again");

    // The session survived the outage, and the lock with it.
    let observer = observer_at(&cluster.connect_string()).await;
    assert_eq!(children(&observer, "/locks/session").await.len(), 1);
    guard.release().await.unwrap();

    client.close().await;
    assert_eq!(changes.next().await, Some(SessionState::Closed));
    assert_eq!(changes.next().await, None);
}
