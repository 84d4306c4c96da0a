//! A holder whose whole process is paused (SIGSTOP, as a long GC pause or a stopped VM does)
//! past its session's expiry, while the next waiter takes the lock: once it runs again, not one
//! read of its hold's state says held, before its session's monitor has even woken.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LostReason, Owner};
use zklock_testkit::Cluster;

const SESSION: Duration = Duration::from_secs(3);
const CHILD: &str = "ZKLOCK_TEST_PAUSED_HOLDER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_past_its_session_never_reads_held_after_the_next_holder_is_in() {
    let cluster = Cluster::standalone();
    let path = "/locks/paused";
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["paused_holder", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{} {path}", cluster.connect_string()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_line = move |what: &str| loop {
        let line = lines.next().unwrap_or_else(|| panic!("the holder ended before {what}")).unwrap();
        // The harness may have begun the line ("test paused_holder ... ").
        if let Some((_, said)) = line.split_once("holder: ") {
            return said.to_owned();
        }
    };
    assert_eq!(next_line("holding"), "holding");

    let other = Client::connect_with(&cluster.connect_string(), ClientOptions::default()).await.unwrap();
    let observer = observer_at(&cluster.connect_string()).await;
    let waiter = tokio::spawn({
        let lock = other.lock(path).unwrap();
        async move {
            let guard = lock.acquire(&Owner::new(2)).await.unwrap();
            (zookeeper_client::boot_clock(), guard)
        }
    });
    wait_children(&observer, path, 2).await;

    // SAFETY: signals to the child this test spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let (next_held_at, next) = waiter.await.unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);

    let last_held_at = Duration::from_nanos(next_line("its last read of held").parse().unwrap());
    assert!(
        last_held_at < next_held_at,
        "the paused holder read held {:?} after the next holder held",
        last_held_at - next_held_at
    );
    assert_eq!(next_line("its loss"), "lost disconnected_too_long");
    assert!(child.wait().unwrap().success());
    assert_eq!(next.hold().state(), HoldState::Held);
    next.release().await.unwrap();
}

/// The paused holder, run by the test above in a process of its own: holds, then reads its
/// hold's state without pause until it reads lost, and says when it last read held (on the boot
/// clock, which the test shares: it is system-wide).
#[test]
#[ignore = "the holder that a_holder_paused_past_its_session_never_reads_held_after_the_next_holder_is_in runs"]
fn paused_holder() {
    let spec = std::env::var(CHILD).expect("run by the pause test");
    let (connect, path) = spec.split_once(' ').unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let options = ClientOptions { session_timeout: SESSION, ..Default::default() };
    let client = runtime.block_on(Client::connect_with(connect, options)).unwrap();
    let guard = runtime.block_on(client.lock(path).unwrap().acquire(&Owner::new(1))).unwrap();
    let hold = guard.hold().clone();
    let mut out = std::io::stdout();
    writeln!(out, "holder: holding").unwrap();
    out.flush().unwrap();
    let mut last_held_at = zookeeper_client::boot_clock();
    let give_up = last_held_at + Duration::from_secs(60);
    loop {
        assert!(zookeeper_client::boot_clock() < give_up, "no loss within a minute: {:?}", hold.state());
        // The clock first: a pause between the two reads then only makes the time earlier, and
        // the next read, after the pause, is checked again.
        let now = zookeeper_client::boot_clock();
        match hold.state() {
            HoldState::Held => last_held_at = now,
            HoldState::Lost => break,
            _ => {}
        }
    }
    writeln!(out, "holder: {}", last_held_at.as_nanos()).unwrap();
    writeln!(out, "holder: lost {}", hold.lost_reason().map_or("none", |reason| reason.as_str())).unwrap();
    out.flush().unwrap();
    drop(guard);
    runtime.block_on(client.close());
}

/// A server paused (SIGSTOP: a GC, a stopped VM) for 3 s of a 4 s session keeps the session: so
/// does the holder. Its hold is never read lost, and its release deletes its node. (Before: the
/// trust deadline, 17/20 of the timeout after a ping sent up to 4/20 earlier, passed at 2.7 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_paused_for_most_of_the_session_keeps_the_hold() {
    let cluster = Cluster::standalone();
    let path = "/locks/server-paused";
    let session = Duration::from_secs(4);
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let client = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let guard = client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    // Let pings settle into their cadence, as for any hold held a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reader = std::thread::spawn({
        let hold = hold.clone();
        let until = std::time::Instant::now() + Duration::from_secs(8);
        move || {
            let mut lost_at = None;
            let started = std::time::Instant::now();
            while std::time::Instant::now() < until && lost_at.is_none() {
                if hold.state() == HoldState::Lost {
                    lost_at = Some(started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            lost_at
        }
    });
    cluster.pause(0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.resume(0);
    let lost_at = tokio::task::spawn_blocking(move || reader.join().unwrap()).await.unwrap();
    assert_eq!(lost_at, None, "the hold read lost during a 3 s server pause of a 4 s session");
    assert_eq!(hold.state(), HoldState::Held);
    assert_eq!(hold.lost_reason(), None);
    guard.release().await.expect("the node is still ours to delete");
    let observer = observer_at(&cluster.connect_string()).await;
    assert!(children(&observer, path).await.is_empty());
    client.close().await;
}

/// A server paused past the session timeout (issue 45, item 8): the hold is lost as
/// disconnected too long, and stays so once the server resumes and the node goes with the
/// session given up. Before, the node's deletion seen afterwards turned the reason into
/// node_deleted ("someone else deleted the lock node"), in the hold and in release()'s error:
/// in about half the runs here (2 of 4 at this session timeout), those where the client heard
/// of the deletion; the rest, where the server had expired the session first, pass either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lost_in_a_server_pause_keeps_its_first_reason_after_the_server_resumes() {
    let cluster = Cluster::standalone();
    let path = "/locks/server-paused-past-the-session";
    let session = Duration::from_secs(8);
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let client = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let guard = client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    cluster.pause(0);
    let lost = tokio::time::timeout(session * 2, hold.lost()).await;
    cluster.resume(0);
    assert_eq!(lost, Ok(Some(LostReason::DisconnectedTooLong)), "lost during a pause of twice the session timeout");
    // The server back, the given-up session ends and its node goes; the client sees it go.
    let observer = observer_at(&cluster.connect_string()).await;
    wait_until("the lost hold's node is gone", session * 3, || async { children(&observer, path).await.is_empty() })
        .await;
    // The deletion's notification, if the client hears of it, comes within moments: watched
    // for 3 s (a fixed time: what is checked is that nothing changes).
    let watched_until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < watched_until {
        assert_eq!(hold.lost_reason(), Some(LostReason::DisconnectedTooLong), "the first reason stands");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    assert_eq!(err.lost_reason(), Some(LostReason::DisconnectedTooLong), "release() says the first reason: {err}");
    client.close().await;
}
