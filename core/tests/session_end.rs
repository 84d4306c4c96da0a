//! The race at a session's end (issue 44, item 5): a step cut off from the server waits for its
//! session to be connected again, and the session turns out to be over (the server ended it
//! meanwhile). The step must stop, and its acquisition queue again on a new session, the
//! session's end its reason; it must never send on the dead client, whose requests fail at once
//! with SessionExpired (with no reason given: the acquisition then failed with that error
//! instead of queueing again). Likewise a step that sent on the disconnected client: the client
//! fails that request with SessionExpired when it learns of the end.
//!
//! The session is ended on the server while its client is cut off: the test reads the session's
//! password from the ConnectRequest of one of its reconnections (through the fault proxy) and
//! closes the session itself, over a connection of its own, as a second client of the same
//! session may. The client, let through again, hears that its session is gone.
//!
//! Three guards stand between a step and a dead client: the monitor ends the session (`ended`)
//! before it publishes the lease, `Requests::reconnected` stops on a session that is over, and
//! `Requests::send` takes SessionExpired for the session's end. With all three reverted, 9 runs
//! in 10 failed here (a cut-off waiter's look for its node sent on the dead client); with the two
//! in retry.rs reverted, 5 in 10 (a create sent while disconnected); the monitor's order alone
//! is covered by the other two, and its reversal alone fails no run.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;
use zklock::{Client, ClientOptions, ErrorKind, LostReason, Owner, SessionState, StateChanges};
use zklock_testkit::{Cluster, Proxy};

const SESSION: Duration = Duration::from_secs(4);
/// Sessions ended, one after another.
const ROUNDS: usize = 3;
/// Acquisitions whose create is in flight when the connection is cut: each then waits in its
/// step for the session to be connected again.
const CUT_OFF: usize = 16;
/// Acquisitions begun while the client is disconnected: each sends its create on the client,
/// which keeps it until it is connected again, or fails it when it hears the session is over.
const SENT_WHILE_DISCONNECTED: usize = 16;

fn be32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes(bytes.try_into().unwrap())
}

/// A session's id and password.
type Reconnection = (i64, Vec<u8>);

/// The session id and password of a ConnectRequest (a frame without its length prefix:
/// protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly) that reconnects to a
/// session; `None` for any other frame.
fn reconnection(frame: &[u8]) -> Option<Reconnection> {
    if !(44..=45).contains(&frame.len()) || be32(&frame[0..4]) != 0 || be32(&frame[24..28]) != 16 {
        return None;
    }
    let session = i64::from_be_bytes(frame[16..24].try_into().unwrap());
    (session != 0).then(|| (session, frame[28..44].to_vec()))
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut length = [0; 4];
    stream.read_exact(&mut length).unwrap();
    let mut frame = vec![0; usize::try_from(be32(&length)).unwrap()];
    stream.read_exact(&mut frame).unwrap();
    frame
}

/// Ends session `id` on the server at `address`, as a second client of it: connects to the
/// session with its password, then closes it (the server deletes its ephemeral nodes).
fn close_session(address: &str, id: i64, password: &[u8]) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut connect = Vec::new();
    connect.extend_from_slice(&0i32.to_be_bytes()); // protocolVersion
    connect.extend_from_slice(&0i64.to_be_bytes()); // lastZxidSeen
    connect.extend_from_slice(&(SESSION.as_millis() as i32).to_be_bytes());
    connect.extend_from_slice(&id.to_be_bytes());
    connect.extend_from_slice(&(password.len() as i32).to_be_bytes());
    connect.extend_from_slice(password);
    connect.push(0); // readOnly
    stream.write_all(&framed(&connect)).unwrap();
    // ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
    let response = read_frame(&mut stream);
    assert_eq!(i64::from_be_bytes(response[8..16].try_into().unwrap()), id, "the session is still live on the server");
    // closeSession: xid 1, type -11; its reply: xid, zxid, err.
    let mut close = 1i32.to_be_bytes().to_vec();
    close.extend_from_slice(&(-11i32).to_be_bytes());
    stream.write_all(&framed(&close)).unwrap();
    let reply = read_frame(&mut stream);
    assert_eq!((be32(&reply[0..4]), be32(&reply[12..16])), (1, 0), "closeSession answered");
}

/// The client's next state change (within 10 s).
async fn next_state(states: &mut StateChanges) -> Option<SessionState> {
    tokio::time::timeout(Duration::from_secs(10), states.next()).await.expect("a state change")
}

/// Waits until `condition` holds (at most 10 s).
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waiters cut off in their steps, and waiters that sent on the disconnected client, when the
/// session ends: every one queues again on a new session (none fails with SessionExpired), and
/// holds in its turn once the holder releases; nothing is left behind. Three sessions ended so,
/// one after another: the race lost is a matter of scheduling (a step woken before the session's
/// end is seen), so each round is another chance to see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn steps_waiting_for_a_reconnection_queue_again_when_the_session_is_over() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let options =
        ClientOptions { session_timeout: SESSION, connect_timeout: Duration::from_secs(10), ..Default::default() };
    let holder_client = Client::connect_with(&cluster.connect_string(), options.clone()).await.unwrap();
    let client = Client::connect_with(&proxy.address(), options).await.unwrap();
    let mut states = client.state_changes();

    // The session's password, from the ConnectRequest of a reconnection (the proxy passes every
    // frame to this predicate, which never asks for a cut).
    let seen: Arc<Mutex<Option<Reconnection>>> = Arc::default();
    proxy.cut_on_next_request_matching(false, {
        let seen = seen.clone();
        move |frame| {
            if let Some(session) = reconnection(frame) {
                *seen.lock() = Some(session);
            }
            false
        }
    });
    for round in 0..ROUNDS {
        let path = format!("/locks/session-end-{round}");
        let first_session = client.session_id().unwrap();
        *seen.lock() = None;
        proxy.cut();
        proxy.pass();
        assert_eq!(next_state(&mut states).await, Some(SessionState::Disconnected));
        assert_eq!(next_state(&mut states).await, Some(SessionState::Connected));
        let (id, password) = seen.lock().clone().expect("the reconnection's ConnectRequest was seen");
        assert_eq!(id, first_session);

        let holder = holder_client.lock(&path).unwrap().acquire(&Owner::new(0)).await.unwrap();
        // The lock path known to the client (its kinds checked, a create answered; a handle kept
        // keeps that), so that an acquisition's first request is its create, sent without waiting
        // for another acquisition's answer.
        let lock = client.lock(&path).unwrap();
        assert!(lock.try_acquire(&Owner::new(1000)).await.unwrap().is_none(), "held by the holder");
        // A hold of the session's own, elsewhere: it says why the session ended.
        let own = client.lock(&format!("{path}-own")).unwrap().acquire(&Owner::new(2000)).await.unwrap();

        // Each acquisition, once it holds, releases: they hold in turn, in whatever order they
        // queued.
        let acquire = |i: u64| {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire(&Owner::new(i)).await?.release().await })
        };
        // Creates in flight when the connection is cut: held by the stall, then dropped by the cut.
        proxy.stall();
        let mut waiters: Vec<_> = (1..=CUT_OFF as u64).map(acquire).collect();
        until("the creates to be sent", || client.creates_in_flight() == CUT_OFF).await;
        proxy.cut();
        assert_eq!(next_state(&mut states).await, Some(SessionState::Disconnected));
        // Creates sent on the disconnected client (new connections are refused meanwhile).
        waiters.extend((CUT_OFF as u64 + 1..=(CUT_OFF + SENT_WHILE_DISCONNECTED) as u64).map(acquire));
        until("the creates to be sent", || client.creates_in_flight() == CUT_OFF + SENT_WHILE_DISCONNECTED).await;

        // The session ends on the server; let through again, the client hears it is over.
        close_session(&cluster.server_address(0), id, &password);
        proxy.pass();
        assert_eq!(next_state(&mut states).await, Some(SessionState::Expired));
        // The server's word, not the client giving up: the session expired.
        assert_eq!(own.hold().lost_reason(), Some(LostReason::SessionExpired));
        // Every acquisition queues again on a new session, behind the holder: none ends.
        let deadline = Instant::now() + Duration::from_secs(10);
        while children(&observer, &path).await.len() < 1 + CUT_OFF + SENT_WHILE_DISCONNECTED {
            if let Some(i) = waiters.iter().position(|waiter| waiter.is_finished()) {
                let result = (&mut waiters[i]).await.unwrap();
                let err = result.expect_err("no waiter holds before the holder releases");
                panic!(
                    "round {round}: waiter {} failed instead of queueing again: {err} ({:?}, lost reason {:?})",
                    i + 1,
                    err.kind(),
                    err.lost_reason()
                );
            }
            assert!(Instant::now() < deadline, "the waiters queued again: {:?}", children(&observer, &path).await);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(next_state(&mut states).await, Some(SessionState::Connected));
        let second_session = client.session_id().unwrap();
        assert_ne!(second_session, first_session, "a new session");
        assert!(waiters.iter().all(|waiter| !waiter.is_finished()), "every waiter waits behind the holder");

        // Each holds in its turn, on the new session.
        holder.release().await.unwrap();
        for (i, waiter) in waiters.into_iter().enumerate() {
            tokio::time::timeout(Duration::from_secs(20), waiter)
                .await
                .expect("it holds in its turn")
                .unwrap()
                .unwrap_or_else(|err| panic!("round {round}: waiter {}: {err}", i + 1));
        }
        assert_eq!(client.session_id(), Some(second_session), "all on the second session");
        assert_eq!(own.release().await.unwrap_err().kind(), ErrorKind::LockLost);
        wait_children(&observer, &format!("{path}-own"), 0).await;
        wait_children(&observer, &path, 0).await;
    }
    client.close().await;
    holder_client.close().await;
}
