//! Issue 44, item 4: a host name that resolves to several addresses must reach the later ones
//! when an earlier one hangs. The names resolve through the ZooKeeper client's resolver override
//! (`zookeeper_client::set_resolver`, hidden, for tests): on Linux all of 127.0.0.0/8 is
//! loopback, so a name resolves to a hung address on 127.0.0.2 or 127.0.0.3 first, then to the
//! real server on 127.0.0.1, with the same port. Two kinds of hung address:
//!
//! * one that accepts the connection and never says a word (a hung server, a half-dead proxy):
//!   the session handshake times out on it, and the next attempt must try another address;
//! * one that never completes the TCP handshake (its listen queue full, so the kernel drops the
//!   SYNs, as for a host that is down): the next address must be tried beside it, at once.
//!
//! Before the fix, tokio's `connect` tried the addresses in order with no bound of their own:
//! every attempt went to the hung one, and the connect timed out.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, Owner};
use zklock_testkit::{ClientAuth, Cluster, TlsCerts};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(4);

/// The names of this test binary: `(host, port)` to its addresses, in order.
type Names = Mutex<HashMap<(String, u16), Vec<SocketAddr>>>;

fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| {
        zk::set_resolver(Some(Arc::new(|host: &str, port: u16| {
            names().lock().unwrap().get(&(host.to_owned(), port)).cloned().map(Ok)
        })));
        Mutex::new(HashMap::new())
    })
}

/// `host:port` resolves to `addresses`, in this order.
fn resolves(host: &str, port: u16, addresses: &[&str]) {
    let addresses = addresses.iter().map(|a| format!("{a}:{port}").parse().unwrap()).collect();
    names().lock().unwrap().insert((host.to_owned(), port), addresses);
}

/// Accepts connections on `ip:port` and never answers; counts them.
struct Silent {
    accepted: Arc<Mutex<Vec<TcpStream>>>,
}

impl Silent {
    fn start(ip: &str, port: u16) -> Silent {
        let listener = TcpListener::bind((ip, port)).unwrap_or_else(|err| panic!("bind {ip}:{port}: {err}"));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let held = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                held.lock().unwrap().push(stream);
            }
        });
        Silent { accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }
}

/// A listener on `ip:port` whose accept queue is full: the kernel drops new SYNs, so a connect
/// to it neither succeeds nor fails (for minutes of SYN retries).
struct Unanswering {
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl Unanswering {
    fn start(ip: &str, port: u16) -> Unanswering {
        let listener = TcpListener::bind((ip, port)).unwrap_or_else(|err| panic!("bind {ip}:{port}: {err}"));
        // A backlog of 0: the queue is full once a connection or two wait in it, never accepted.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        let address: SocketAddr = format!("{ip}:{port}").parse().unwrap();
        let mut queued = Vec::new();
        loop {
            match TcpStream::connect_timeout(&address, Duration::from_millis(300)) {
                Ok(stream) => queued.push(stream),
                Err(_) => break,
            }
            assert!(queued.len() < 16, "the accept queue of {address} never fills");
        }
        Unanswering { _listener: listener, _queued: queued }
    }
}

fn options() -> ClientOptions {
    ClientOptions { session_timeout: SESSION, connect_timeout: Duration::from_secs(10), ..Default::default() }
}

/// The client takes a lock and lets it go: the session works.
async fn works(client: &Client, test: &str) {
    let guard = client.lock(&unique_path(test)).unwrap().acquire(&Owner::new(1)).await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_first_address_that_accepts_and_never_answers_gives_way_to_the_next() {
    let cluster = Cluster::standalone();
    let port = cluster.client_port(0);
    let silent = Silent::start("127.0.0.2", port);
    resolves("accepts-silently.zklock.test", port, &["127.0.0.2", "127.0.0.1"]);
    let started = Instant::now();
    let client = Client::connect_with(&format!("accepts-silently.zklock.test:{port}"), options())
        .await
        .expect("a session through the name's second address");
    let took = started.elapsed();
    eprintln!("connected after {took:?}; the silent address accepted {} connection(s)", silent.accepted());
    assert!(silent.accepted() >= 1, "the silent address was tried first");
    // One attempt at the silent address (the client's read timeout, 2/5 of the session timeout),
    // then the next address.
    assert!(took < SESSION, "connected within {SESSION:?}: {took:?}");
    works(&client, "accepts-silently").await;
    client.close().await;
}

#[tokio::test]
async fn a_first_address_that_never_connects_is_raced_by_the_next() {
    let cluster = Cluster::standalone();
    let port = cluster.client_port(0);
    let _unanswering = Unanswering::start("127.0.0.3", port);
    resolves("never-connects.zklock.test", port, &["127.0.0.3", "127.0.0.1"]);
    let started = Instant::now();
    let client = Client::connect_with(&format!("never-connects.zklock.test:{port}"), options())
        .await
        .expect("a session through the name's second address");
    let took = started.elapsed();
    eprintln!("connected after {took:?}");
    // Within the first attempt: the second address is tried 250 ms after the first.
    assert!(took < SESSION * 2 / 5, "connected within the first attempt ({:?}): {took:?}", SESSION * 2 / 5);
    works(&client, "never-connects").await;
    client.close().await;
}

#[tokio::test]
async fn over_tls_the_certificate_is_verified_against_the_name_whichever_address_answers() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::builder().tls(ClientAuth::Want).start()).await.unwrap();
    let port = cluster.secure_port(0);
    let silent = Silent::start("127.0.0.2", port);
    // The servers' certificate names `localhost` only.
    resolves("localhost", port, &["127.0.0.2", "127.0.0.1"]);
    resolves("not-the-certificates.zklock.test", port, &["127.0.0.1"]);
    let tls = |connect_timeout| ClientOptions {
        tls: Some(zklock::TlsOptions::new(TlsCerts::get().ca_pem())),
        connect_timeout,
        ..options()
    };
    let started = Instant::now();
    let client = Client::connect_with(&format!("localhost:{port}"), tls(Duration::from_secs(10)))
        .await
        .expect("a TLS session through the name's second address");
    eprintln!("connected after {:?}; the silent address accepted {}", started.elapsed(), silent.accepted());
    assert!(silent.accepted() >= 1, "the silent address was tried first");
    works(&client, "tls-address").await;
    client.close().await;

    // The same server under a name its certificate does not have: refused at once, every server
    // having refused the handshake for the same reason (trying again cannot change it).
    let err = Client::connect_with(&format!("not-the-certificates.zklock.test:{port}"), tls(Duration::from_secs(2)))
        .await
        .err()
        .expect("a certificate for another name is refused");
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::AuthFailed, "{err}");
    assert!(err.to_string().contains("localhost"), "the cause names the certificate's name: {err}");
}

/// A name with two addresses that accept and never answer (two servers of a five-server
/// ensemble on the wrong side of a partition, hung JVMs) before a healthy one: each attempt's
/// race is won at once by a silent address, so the attempts must go to each address in turn
/// (the least recently used first), as the Java client's endpoints do. (With one address
/// remembered, they alternated between the two silent ones and never reached the third.)
#[tokio::test]
async fn two_addresses_that_accept_and_never_answer_give_way_to_a_third() {
    let cluster = Cluster::standalone();
    let port = cluster.client_port(0);
    let first = Silent::start("127.0.0.2", port);
    let second = Silent::start("127.0.0.4", port);
    resolves("two-silent.zklock.test", port, &["127.0.0.2", "127.0.0.4", "127.0.0.1"]);
    let started = Instant::now();
    let connected = Client::connect_with(&format!("two-silent.zklock.test:{port}"), options()).await;
    eprintln!(
        "after {:?}: {}; the silent addresses accepted {} and {} connection(s)",
        started.elapsed(),
        connected.as_ref().map_or_else(|err| err.to_string(), |_| "connected".to_owned()),
        first.accepted(),
        second.accepted()
    );
    let client = connected.expect("a session through the name's third address within the 10 s connect timeout");
    works(&client, "two-silent").await;
    client.close().await;
}
