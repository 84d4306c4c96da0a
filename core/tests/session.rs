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

/// The client's connections have Nagle's algorithm off, as the Java client's do: with it on, the
/// listing pipelined behind a create waits for the create's ACK, and an uncontended acquire costs
/// two round trips instead of one (the vendored zookeeper-client sets it; see
/// third_party/zookeeper-client/ZKLOCK.md).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_the_server_have_nagle_off() {
    let connect = connect_string();
    let server: std::net::SocketAddr = connect.split(',').next().unwrap().parse().unwrap();
    let client = client().await;
    let lock = client.lock(&unique_path("nodelay")).unwrap();
    lock.acquire(&Owner::new(1)).await.unwrap().release().await.unwrap();

    let to_server = sockets_connected_to(server);
    assert!(!to_server.is_empty(), "the client has a connection to {server}");
    for fd in to_server {
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `on`.
        let rc = unsafe {
            libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&mut on as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!(rc, 0);
        assert_ne!(on, 0, "TCP_NODELAY is set on the connection (fd {fd}) to {server}");
    }
    client.close().await;
}

/// This process's TCP sockets connected to `server` (only IPv4 loopback servers are started here).
#[cfg(target_os = "linux")]
fn sockets_connected_to(server: std::net::SocketAddr) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        // SAFETY: zeroed sockaddr_in is valid; getpeername writes at most `len` bytes into it.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = unsafe { libc::getpeername(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) };
        if rc != 0 || libc::c_int::from(addr.sin_family) != libc::AF_INET {
            continue;
        }
        let peer =
            std::net::SocketAddr::from((u32::from_be(addr.sin_addr.s_addr).to_be_bytes(), u16::from_be(addr.sin_port)));
        if peer == server {
            found.push(fd);
        }
    }
    found
}

/// A close in flight, as an exit hook finds it (issue 47): `wait_closed` blocks until its
/// CloseSession is answered, and a second `close()` awaits the first rather than returning while
/// the session's nodes are still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_closed_and_a_second_close_wait_for_the_close_in_flight() {
    let path = unique_path("wait-closed");
    let observer = observer().await;
    for second_close in [false, true] {
        let client = client().await;
        let lock = client.lock(&path).unwrap();
        let _guard = lock.acquire(&Owner::new(1)).await.unwrap();
        wait_children(&observer, &path, 1).await;
        if !second_close {
            // Nobody closes it: false at the deadline.
            let waiting = client.clone();
            let deadline = std::time::Instant::now() + Duration::from_millis(100);
            assert!(!tokio::task::spawn_blocking(move || waiting.wait_closed(deadline)).await.unwrap());
        }
        let closing = tokio::spawn({
            let client = client.clone();
            async move { client.close().await }
        });
        // The first close has taken the session, and not yet had its CloseSession answered.
        while client.session_id().is_some() {
            tokio::task::yield_now().await;
        }
        if second_close {
            client.close().await;
        } else {
            let waiting = client.clone();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            assert!(tokio::task::spawn_blocking(move || waiting.wait_closed(deadline)).await.unwrap());
        }
        // The server deletes a session's ephemerals before it answers the CloseSession.
        assert_eq!(children(&observer, &path).await, Vec::<String>::new(), "second close: {second_close}");
        closing.await.unwrap();
    }
}
