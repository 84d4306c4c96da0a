//! Protocol errors are no answers: a reply the client cannot match to a request (which drops the
//! connection, failing whatever was in flight), or one it cannot parse, proves nothing about what
//! the server did. A release's delete cut off so stays in the background until the node is gone
//! (on the next connection); an acquisition's request cut off so is sent again, as after a
//! connection loss.
//!
//! Between the client and a real server: a proxy that forwards whole frames both ways and, once
//! armed, answers one request itself with a lie instead of forwarding it (the server never sees
//! that request).

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, Owner};
use zklock_testkit::Cluster;

/// What the proxy answers the matching request with.
#[derive(Clone, Copy, Debug)]
enum Lie {
    /// A reply with an xid no request has: the client drops the connection and fails every
    /// request in flight with an unexpected-reply error.
    UnknownXid,
    /// The request's own xid, error code 0, and a body too short to parse: the request fails
    /// with an unmarshal error, the connection goes on.
    Garbled,
}

struct Trigger {
    ops: &'static [i32],
    pattern: Vec<u8>,
    lie: Lie,
}

/// A frame-forwarding proxy on loopback that tells one armed lie.
struct Liar {
    address: String,
    trigger: Arc<Mutex<Option<Trigger>>>,
    told: Arc<Mutex<usize>>,
}

impl Liar {
    fn start(upstream: String) -> Liar {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let trigger: Arc<Mutex<Option<Trigger>>> = Arc::default();
        let told: Arc<Mutex<usize>> = Arc::default();
        let (armed, counted) = (trigger.clone(), told.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let (armed, counted) = (armed.clone(), counted.clone());
                client.set_nodelay(true).unwrap();
                server.set_nodelay(true).unwrap();
                let to_client = Arc::new(Mutex::new(client.try_clone().unwrap()));
                // Server to client: whole frames, so that a lie never lands inside one.
                let (mut from_server, down) = (server.try_clone().unwrap(), to_client.clone());
                let client_side = client.try_clone().unwrap();
                thread::spawn(move || {
                    while let Some(frame) = read_frame(&mut from_server) {
                        if down.lock().unwrap().write_all(&frame).is_err() {
                            break;
                        }
                    }
                    let _ = client_side.shutdown(Shutdown::Both);
                });
                let (mut from_client, mut to_server) = (client, server);
                thread::spawn(move || {
                    let mut first = true;
                    while let Some(frame) = read_frame(&mut from_client) {
                        // The ConnectRequest has no xid: never a match.
                        if !std::mem::take(&mut first) {
                            let (xid, op) = (be32(&frame[4..8]), be32(&frame[8..12]));
                            let mut armed = armed.lock().unwrap();
                            let matches = armed.as_ref().is_some_and(|t| {
                                t.ops.contains(&op) && frame.windows(t.pattern.len()).any(|w| w == t.pattern)
                            });
                            if matches {
                                let lie = armed.take().unwrap().lie;
                                let reply = match lie {
                                    Lie::UnknownXid => framed(&header(0x3bad_0000)),
                                    Lie::Garbled => {
                                        let mut body = header(xid);
                                        body.extend_from_slice(&[0, 0]);
                                        framed(&body)
                                    }
                                };
                                *counted.lock().unwrap() += 1;
                                if to_client.lock().unwrap().write_all(&reply).is_err() {
                                    break;
                                }
                                continue;
                            }
                        }
                        if to_server.write_all(&frame).is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown(Shutdown::Both);
                });
            }
        });
        Liar { address, trigger, told }
    }

    /// The next request with one of `ops` (1 create, 2 delete, 15 create2...) that contains
    /// `pattern` is answered with `lie` and never forwarded.
    fn arm(&self, ops: &'static [i32], pattern: &[u8], lie: Lie) {
        *self.trigger.lock().unwrap() = Some(Trigger { ops, pattern: pattern.to_vec(), lie });
    }

    fn told(&self) -> usize {
        *self.told.lock().unwrap()
    }
}

fn be32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes(bytes.try_into().unwrap())
}

/// One frame, its length prefix included.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut frame = vec![0; 4];
    stream.read_exact(&mut frame).ok()?;
    let length = be32(&frame);
    frame.resize(4 + usize::try_from(length).ok()?, 0);
    stream.read_exact(&mut frame[4..]).ok()?;
    Some(frame)
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

/// A reply header: xid, zxid, error code 0.
fn header(xid: i32) -> Vec<u8> {
    let mut header = xid.to_be_bytes().to_vec();
    header.extend_from_slice(&1i64.to_be_bytes());
    header.extend_from_slice(&0i32.to_be_bytes());
    header
}

const DELETE: &[i32] = &[2];
const CREATES: &[i32] = &[1, 15];

async fn through_a_liar() -> (Cluster, Liar, zookeeper_client::Client, Client) {
    let cluster = Cluster::standalone();
    let liar = Liar::start(cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let options = ClientOptions { session_timeout: Duration::from_secs(10), ..Default::default() };
    let client = Client::connect_with(&liar.address, options).await.unwrap();
    (cluster, liar, observer, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_delete_meets_an_unexpected_reply_deletes_the_node_on_the_next_connection() {
    let (_cluster, liar, observer, client) = through_a_liar().await;
    let path = "/locks/unexpected-reply";
    let session = client.session_id();
    let guard = client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    assert_eq!(children(&observer, path).await.len(), 1);
    liar.arm(DELETE, b"-lock-", Lie::UnknownXid);
    let released = guard.release().await;
    assert_eq!(liar.told(), 1, "the delete met the lie");
    // Before: the delete failed with the unexpected-reply error, taken as the server's answer;
    // the node, never deleted, stayed for the session's life.
    let err = released.expect_err("the release is not confirmed");
    assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{err}");
    wait_until("the node deleted in the background", Duration::from_secs(10), || async {
        children(&observer, path).await.is_empty()
    })
    .await;
    assert_eq!(client.session_id(), session, "the same session, on a new connection");
    // And the lock is free for the next.
    let next = client.lock(path).unwrap().try_acquire(&Owner::new(2)).await.unwrap().expect("free");
    next.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_whose_create_reply_does_not_parse_creates_again_and_holds() {
    let (_cluster, liar, observer, client) = through_a_liar().await;
    let path = "/locks/garbled-create";
    // The path first, so that the lie meets the lock node's create.
    client.lock(path).unwrap().acquire(&Owner::new(9)).await.unwrap().release().await.unwrap();
    liar.arm(CREATES, b"-lock-", Lie::Garbled);
    // Before: the create's unmarshal error failed the acquisition.
    let guard = client.lock(path).unwrap().acquire_timeout(&Owner::new(1), Duration::from_secs(20)).await.unwrap();
    assert_eq!(liar.told(), 1, "the create met the lie");
    assert_eq!(guard.hold().state(), HoldState::Held);
    assert_eq!(children(&observer, path).await.len(), 1, "one node: the create sent again");
    guard.release().await.unwrap();
    wait_children(&observer, path, 0).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_whose_create_meets_an_unexpected_reply_creates_again_and_holds() {
    let (_cluster, liar, observer, client) = through_a_liar().await;
    let path = "/locks/unexpected-create";
    client.lock(path).unwrap().acquire(&Owner::new(9)).await.unwrap().release().await.unwrap();
    let session = client.session_id();
    liar.arm(CREATES, b"-lock-", Lie::UnknownXid);
    let guard = client.lock(path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    assert_eq!(liar.told(), 1, "the create met the lie");
    assert_eq!(guard.hold().state(), HoldState::Held);
    assert_eq!(client.session_id(), session, "the same session, on a new connection");
    assert_eq!(children(&observer, path).await.len(), 1);
    guard.release().await.unwrap();
    wait_children(&observer, path, 0).await;
    client.close().await;
}
