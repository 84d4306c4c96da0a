//! A server that lies, or anyone in the middle of a plaintext connection: the lengths and counts
//! in its replies are its word, and neither a frame of gigabytes nor a forged element count may
//! make the client hold gigabytes, or abort the process on an allocation that fails.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use zookeeper_client as zk;

const PING_XID: i32 = -2;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut length = [0; 4];
    stream.read_exact(&mut length).ok()?;
    let mut frame = vec![0; i32::from_be_bytes(length) as usize];
    stream.read_exact(&mut frame).ok()?;
    Some(frame)
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = (body.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(body);
    framed
}

/// A reply header: xid, zxid, error code 0.
fn header(xid: i32) -> Vec<u8> {
    let mut header = xid.to_be_bytes().to_vec();
    header.extend_from_slice(&1i64.to_be_bytes());
    header.extend_from_slice(&0i32.to_be_bytes());
    header
}

/// What the fake server answers the first request that is not a ping with.
#[derive(Clone, Copy)]
enum Lie {
    /// A frame length of 2^31-1, then zeros for as long as the client reads them.
    EndlessFrame,
    /// A listing whose count of children is 2^31-1, and no children.
    ForgedCount,
}

/// Serves one session honestly (its handshake and pings) but for the lie; returns how many
/// bytes of the lie the client took before it hung up.
fn fake_server(lie: Lie) -> (String, thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_frame(&mut stream).expect("the connect request");
        let mut response = 0i32.to_be_bytes().to_vec(); // protocol version
        response.extend_from_slice(&10_000i32.to_be_bytes()); // session timeout, ms
        response.extend_from_slice(&0x5e55_1011i64.to_be_bytes()); // session id
        response.extend_from_slice(&16i32.to_be_bytes());
        response.extend_from_slice(&[7; 16]); // password
        response.push(0); // not read-only
        stream.write_all(&frame(&response)).unwrap();
        while let Some(request) = read_frame(&mut stream) {
            let xid = i32::from_be_bytes(request[..4].try_into().unwrap());
            if xid == PING_XID {
                stream.write_all(&frame(&header(PING_XID))).unwrap();
                continue;
            }
            return match lie {
                Lie::EndlessFrame => {
                    let mut sent = 0;
                    let _ = stream.write_all(&i32::MAX.to_be_bytes());
                    let zeros = [0u8; 64 * 1024];
                    stream.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                    while sent < 256 << 20 && stream.write_all(&zeros).is_ok() {
                        sent += zeros.len();
                    }
                    sent
                }
                Lie::ForgedCount => {
                    let mut reply = header(xid);
                    reply.extend_from_slice(&i32::MAX.to_be_bytes());
                    stream.write_all(&frame(&reply)).unwrap();
                    // Until the client hangs up.
                    while read_frame(&mut stream).is_some() {}
                    0
                }
            };
        }
        0
    });
    (address, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_frame_over_the_limit_drops_the_connection_before_it_is_buffered() {
    let (address, server) = fake_server(Lie::EndlessFrame);
    let client = zk::Client::connector().with_session_timeout(Duration::from_secs(10)).connect(&address).await.unwrap();
    let listing = tokio::time::timeout(Duration::from_secs(20), client.list_children("/locks")).await;
    assert!(listing.expect("the listing ends").is_err(), "a frame of 2^31-1 bytes is no reply");
    let taken = server.join().unwrap();
    // The kernel's socket buffers take some before the client reads the length.
    assert!(taken < 16 << 20, "the client took {taken} bytes of a frame it could never hold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_element_count_is_an_error_not_an_allocation() {
    let (address, server) = fake_server(Lie::ForgedCount);
    let client = zk::Client::connector().with_session_timeout(Duration::from_secs(10)).connect(&address).await.unwrap();
    // Before: Vec::with_capacity(2^31-1) of strings, 48 GiB, and the process aborted.
    let listing = tokio::time::timeout(Duration::from_secs(20), client.list_children("/locks")).await;
    assert!(listing.expect("the listing ends").is_err(), "a count of 2^31-1 children with none sent");
    drop(client);
    server.join().unwrap();
}
