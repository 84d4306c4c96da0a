//! Session state as a value and a stream, through a real server going away and coming back.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, Owner, SessionState};
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

    cluster.kill(0);
    assert_eq!(changes.next().await, Some(SessionState::Disconnected));
    assert_eq!(client.state(), SessionState::Disconnected);

    cluster.restart(0);
    let reconnected = tokio::time::timeout(Duration::from_secs(20), changes.next()).await.expect("reconnects");
    assert_eq!(reconnected, Some(SessionState::Connected));
    assert_eq!(client.state(), SessionState::Connected);

    // The session survived the outage, and the lock with it.
    let observer = observer_at(&cluster.connect_string()).await;
    assert_eq!(children(&observer, "/locks/session").await.len(), 1);
    guard.release().await.unwrap();

    client.close().await;
    assert_eq!(changes.next().await, Some(SessionState::Closed));
    assert_eq!(changes.next().await, None);
}
