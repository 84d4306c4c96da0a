//! The edges a new user runs into: requests over the server's packet limit, connect errors that
//! say why, out-of-range timeouts, the order in which one client's acquisitions reach the server,
//! and what "held" means once a hold is lost.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::*;
use zklock::binding::LockBinding;
use zklock::{Acquired, Client, ClientOptions, ErrorKind, LockOptions, Owner};
use zklock_testkit::Cluster;

fn assert_invalid(err: &zklock::Error, names: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains(names), "{err} should name {names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_paths_identifiers_and_labels_are_refused_before_sending() {
    let connect = connect_string();
    let client = client_at(&connect).await;
    let observer = observer_at(&connect).await;

    // 1.1 MB path: the server would drop the connection on every attempt.
    let long_path = format!("/zklock-test/{}", "p".repeat(1_100_000));
    let err = client.lock(&long_path).unwrap_err();
    assert_invalid(&err, "jute.maxbuffer");
    assert!(err.message().contains("lock path of 1100013 bytes"), "{err}");

    // 2 MB identifier.
    let path = unique_path("oversized");
    let options = LockOptions { identifier: Some("i".repeat(2_000_000)), ..Default::default() };
    let err = client.lock_with(&path, options).unwrap_err();
    assert_invalid(&err, "identifier of 2000000 bytes");

    // An owner label is only known at acquire: refused there, with no node made.
    let lock = client.lock(&path).unwrap();
    let owner = Owner::with_label(7, "o".repeat(1_500_000));
    let started = Instant::now();
    let err = lock.acquire_timeout(&owner, Duration::from_secs(20)).await.unwrap_err();
    assert_invalid(&err, "owner label of 1500000 bytes");
    assert!(started.elapsed() < Duration::from_secs(1), "refused up front, not after retries");
    assert!(children(&observer, &path).await.is_empty());

    // The same client goes on working.
    let me = Owner::unique();
    lock.acquire_timeout(&me, Duration::from_secs(10)).await.unwrap().release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_packet_limit_is_configurable() {
    let connect = connect_string();
    let options = ClientOptions { jute_maxbuffer: 64 * 1024, ..Default::default() };
    let small = Client::connect_with(&connect, options).await.unwrap();
    let path = format!("{}/{}", unique_path("limit"), "p".repeat(100_000));
    let err = small.lock(&path).unwrap_err();
    assert_invalid(&err, "packet limit of 65536 bytes");

    // The default limit lets the same path through to a default server.
    let client = client_at(&connect).await;
    let lock = client.lock(&path).unwrap();
    let guard = lock.acquire_timeout(&Owner::unique(), Duration::from_secs(10)).await.unwrap();
    assert!(lock.holder().await.unwrap().is_some());
    guard.release().await.unwrap();

    let err = Client::connect_with(&connect, ClientOptions { jute_maxbuffer: 10, ..Default::default() }).await;
    assert_invalid(&err.err().unwrap(), "jute_maxbuffer of 10 bytes is too small");
    small.close().await;
    client.close().await;
}

/// A server whose jute.maxbuffer is below the client's setting closes the connection on every
/// attempt to send the request; that must end in a clear error, not a reconnect storm, and
/// other locks on the client must keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_server_keeps_refusing_ends_in_an_error() {
    let cluster = Cluster::builder().jvm_flag("-Djute.maxbuffer=65536").start();
    let connect = cluster.connect_string();
    let client = client_at(&connect).await;
    let path = unique_path("refused");
    let big = client.lock(&format!("{path}/{}", "p".repeat(100_000))).unwrap();
    let started = Instant::now();
    let err = big.acquire_timeout(&Owner::unique(), Duration::from_secs(60)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{err}");
    assert!(err.message().contains("jute.maxbuffer"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "gave up after {:?}", started.elapsed());

    let observer = observer_at(&connect).await;
    assert!(observer.check_stat(&path).await.unwrap().is_none(), "no node made");
    let small = client.lock(&unique_path("refused-other")).unwrap();
    let guard = small.acquire_timeout(&Owner::unique(), Duration::from_secs(10)).await.unwrap();
    assert_eq!(guard.hold().state(), zklock::HoldState::Held);
    guard.release().await.unwrap();
    client.close().await;
}

#[tokio::test]
async fn session_timeouts_past_the_wire_range_are_refused() {
    let options = ClientOptions { session_timeout: Duration::from_secs(2_147_484), ..Default::default() };
    let err = Client::connect_with("127.0.0.1:1", options).await.err().unwrap();
    assert_invalid(&err, "out of range");
}

/// A port that refuses, a name that does not resolve, a port that accepts and says nothing, and
/// a server that speaks another protocol: each named with its cause, and the connect string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_name_the_cause_for_each_host() {
    let refused = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let http_port = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in http.incoming().flatten() {
            let mut request = [0u8; 64];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    // The session timeout sets how long a silent server gets to answer the handshake (2/5 of it).
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(3),
        session_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let cases = [
        (format!("127.0.0.1:{refused}"), "connection refused"),
        ("no-such-host.invalid:2181".to_owned(), "cannot resolve"),
        (format!("127.0.0.1:{silent_port}"), "session handshake"),
        (format!("127.0.0.1:{http_port}"), "not a ZooKeeper server"),
    ];
    for (connect, cause) in &cases {
        let err = Client::connect_with(connect, options.clone()).await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert_eq!(err.path(), Some(connect.as_str()));
        assert!(err.message().contains(cause), "{connect}: {err}");
    }
    // Several hosts: each with its own cause.
    let both = format!("127.0.0.1:{refused},127.0.0.1:{http_port}");
    let err = Client::connect_with(&both, options).await.err().unwrap();
    assert!(err.message().contains(&format!("127.0.0.1:{refused}: connection refused")), "{err}");
    assert!(err.message().contains(&format!("127.0.0.1:{http_port}: not a ZooKeeper server")), "{err}");
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_chroot_says_so() {
    let connect = format!("{}/zklock-test-no-such-chroot-{}", connect_string(), uuid::Uuid::new_v4().simple());
    let err = Client::connect(&connect).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::ZooKeeper, "{err}");
    assert_eq!(err.zookeeper_code(), Some(-101));
    assert!(err.message().contains("does not exist"), "{err}");
    assert_eq!(err.path(), Some(connect.as_str()));
}

/// Acquisitions begun one after another reach the server in that order, even when they are
/// then driven by different worker threads (as the bindings do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_reach_the_server_in_the_order_they_began() {
    let client = client().await;
    let path = unique_path("order");
    let lock = client.lock(&path).unwrap();
    for round in 0..20 {
        let owners: Vec<Owner> =
            (0..8).map(|i| Owner::with_label((1000 * round + i) as u64, format!("o{i}"))).collect();
        let started: Vec<_> = owners.iter().map(|owner| lock.begin_acquire(owner, None)).collect();
        let mut tasks = Vec::new();
        for (i, acquire) in started.into_iter().enumerate().rev() {
            tasks.push(tokio::spawn(async move { (i, acquire.await) }));
        }
        wait_until("all queued", Duration::from_secs(10), || async { lock.contenders().await.unwrap().len() == 8 })
            .await;
        let queue = lock.contenders().await.unwrap();
        let labels: Vec<String> = queue.iter().map(|p| p.identity.clone().unwrap().owner).collect();
        let expected: Vec<String> = (0..8).map(|i| format!("o{i}")).collect();
        assert_eq!(labels, expected, "round {round}");
        for owner in &owners {
            wait_until("the next holds", Duration::from_secs(10), || async { lock.is_held_by(owner) }).await;
            lock.release(owner).await.unwrap();
        }
        for task in tasks {
            let (_, result) = task.await.unwrap();
            assert!(matches!(result.unwrap(), Acquired::Held(_)));
        }
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_is_not_held() {
    let client = client().await;
    let lock = client.lock(&unique_path("lost")).unwrap();
    let me = Owner::unique();
    let mut acquire = lock.begin_acquire(&me, None);
    assert!(acquire.take_now().is_none(), "a fresh acquisition goes to the server");
    assert!(matches!(acquire.await.unwrap(), Acquired::Held(_)));
    let mut again = lock.begin_acquire(&me, None);
    assert!(matches!(again.take_now().unwrap().unwrap(), Acquired::Reentered), "re-entry is decided at once");
    assert!(lock.release_nested(&me).unwrap().is_ok());
    assert!(lock.release_nested(&me).is_none(), "the last level needs the server");
    lock.try_reenter(&me).unwrap().unwrap();
    assert!(lock.is_held_by(&me));
    client.close().await;
    assert!(!lock.is_held_by(&me), "closing the client loses the hold");
    assert_eq!(lock.state_of(&me), Some(zklock::HoldState::Lost));
    assert_eq!(lock.try_reenter(&me).unwrap().unwrap_err().kind(), ErrorKind::LockLost);
    // Each level's release says the hold is lost; the last one drops it.
    assert_eq!(lock.release_nested(&me).unwrap().unwrap_err().kind(), ErrorKind::LockLost);
    assert!(lock.release_nested(&me).is_none());
    assert_eq!(lock.release(&me).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert!(lock.hold_of(&me).is_none(), "released, the lost hold is gone");
}

/// A request far over the server's limit (the client told the limit is higher): the server
/// closes the connection while the client is still writing; the attempt ends in an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_request_the_server_refuses_ends_in_an_error() {
    let connect = connect_string();
    let options = ClientOptions { jute_maxbuffer: 16 << 20, ..Default::default() };
    let client = Client::connect_with(&connect, options).await.unwrap();
    let path = format!("{}/{}", unique_path("huge"), "p".repeat(2 << 20));
    let lock = client.lock(&path).unwrap();
    let started = Instant::now();
    let err = lock.acquire_timeout(&Owner::unique(), Duration::from_secs(120)).await.unwrap_err();
    eprintln!("gave up after {:?}: {err}", started.elapsed());
    assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{err}");
    assert!(err.message().contains("jute.maxbuffer"), "{err}");
    let other = client.lock(&unique_path("huge-other")).unwrap();
    other.acquire_timeout(&Owner::unique(), Duration::from_secs(10)).await.unwrap().release().await.unwrap();
    client.close().await;
}

/// The ZooKeeper client gives up a connect round by its own reckoning (about the session
/// timeout); zklock tries again until its connect timeout. A server paused past that round but
/// resumed within the connect timeout gives a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_keeps_trying_until_its_own_timeout() {
    let cluster = Cluster::standalone();
    cluster.pause(0);
    let options = ClientOptions {
        session_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let started = Instant::now();
    let connecting = tokio::spawn({
        let connect = cluster.connect_string();
        async move { Client::connect_with(&connect, options).await }
    });
    // Resumed after several of the client's own rounds would have given up.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!connecting.is_finished(), "connect gave up before its timeout");
    cluster.resume(0);
    let client = connecting.await.unwrap().expect("a session once the server answers");
    assert!(started.elapsed() < Duration::from_secs(30));
    client.close().await;
}

/// A host that never answers is named as such, not lost in "no server answered".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_host_is_named() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    // The connect timeout passes before the client's own handshake timeout (2/5 of the session
    // timeout) could report on the host.
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        session_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let err = Client::connect_with(&format!("127.0.0.1:{silent_port}"), options).await.err().unwrap();
    assert!(err.message().contains(&format!("127.0.0.1:{silent_port}: no answer")), "{err}");
    assert!(!err.message().contains("no server answered"), "{err}");
    drop(silent);
}

/// Silent hosts ahead of a healthy one (the client shuffles the hosts) are passed over within a
/// connect timeout shorter than the client's own handshake bound (2/5 of the session timeout):
/// each host gets its share of the connect timeout, and a silent one that runs out is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_hosts_ahead_of_a_healthy_one_are_passed_over() {
    let silent = [TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap()];
    let healthy = zklock_testkit::shared_connect_string();
    let healthy = healthy.split(',').next().unwrap();
    let hosts = silent.iter().map(|l| format!("127.0.0.1:{}", l.local_addr().unwrap().port())).collect::<Vec<_>>();
    let connect = format!("{},{},{healthy}", hosts[0], hosts[1]);
    // 12 s for one host by the client's own bound; 7 s for all three by ours.
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(7),
        session_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    for _ in 0..3 {
        let started = Instant::now();
        let client = Client::connect_with(&connect, options.clone()).await.expect("a session from the healthy host");
        assert!(started.elapsed() < Duration::from_secs(7), "took {:?}", started.elapsed());
        client.close().await;
    }
    // With no healthy host, each silent one is named as such (the last may be cut off by the
    // connect timeout itself, mid-handshake).
    let err = Client::connect_with(&format!("{},{}", hosts[0], hosts[1]), options).await.err().unwrap();
    assert!(err.message().contains("no answer within the handshake timeout"), "{err}");
    for host in &hosts {
        assert!(err.message().contains(&format!("{host}: no answer")), "{err}");
    }
}
