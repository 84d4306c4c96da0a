//! Tests of the fault-injecting proxy, against a real server: four-letter words and a minimal
//! raw ZooKeeper client (for exact byte-level checks), then the zookeeper-client crate end to end.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use zklock_testkit::proxy::request_op;
use zklock_testkit::{four_letter_port, shared_connect_string, Cluster, ProxiedCluster, Proxy, ProxyMode};

// ------------------------------------------------------------------------------ raw client

fn put_i32(b: &mut Vec<u8>, v: i32) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_bytes(b: &mut Vec<u8>, v: &[u8]) {
    put_i32(b, v.len() as i32);
    b.extend_from_slice(v);
}
fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(body.len() + 4);
    put_bytes(&mut f, body);
    f
}

const OP_CREATE: i32 = 1;
const OP_EXISTS: i32 = 3;
const PERSISTENT: i32 = 0;
const EPHEMERAL: i32 = 1;
const NONODE: i32 = -101;

/// Just enough of the ZooKeeper protocol to open a session, create and check znodes, with
/// every step's I/O error visible.
struct Raw {
    s: TcpStream,
    xid: i32,
    session_id: i64,
    passwd: Vec<u8>,
}

impl Raw {
    fn connect(addr: &str) -> io::Result<Raw> {
        Raw::connect_with(addr, 10_000)
    }

    /// A new session with this timeout (ms).
    fn connect_with(addr: &str, timeout_ms: i32) -> io::Result<Raw> {
        let mut c = Raw { s: TcpStream::connect(addr)?, xid: 0, session_id: 0, passwd: vec![0; 16] };
        c.s.set_read_timeout(Some(Duration::from_secs(10)))?;
        c.s.set_nodelay(true)?;
        c.s.write_all(&c.connect_request(timeout_ms))?;
        let resp = c.recv()?;
        c.accept_connect_response(&resp);
        Ok(c)
    }

    /// The ConnectRequest frame for this client's session (a new one while `session_id` is 0).
    fn connect_request(&self, timeout_ms: i32) -> Vec<u8> {
        let mut req = Vec::new();
        put_i32(&mut req, 0); // protocolVersion
        put_i64(&mut req, 0); // lastZxidSeen
        put_i32(&mut req, timeout_ms); // timeOut
        put_i64(&mut req, self.session_id); // sessionId
        put_bytes(&mut req, &self.passwd); // passwd
        req.push(0); // readOnly
        frame(&req)
    }

    fn accept_connect_response(&mut self, resp: &[u8]) {
        let timeout = i32::from_be_bytes(resp[4..8].try_into().unwrap());
        assert!(timeout > 0, "session refused");
        self.session_id = i64::from_be_bytes(resp[8..16].try_into().unwrap());
        let len = i32::from_be_bytes(resp[16..20].try_into().unwrap()) as usize;
        self.passwd = resp[20..20 + len].to_vec();
    }

    fn recv(&mut self) -> io::Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len)?;
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        self.s.read_exact(&mut buf)?;
        Ok(buf)
    }

    /// A request frame (header + body); takes the next xid.
    fn request(&mut self, op: i32, body: &[u8]) -> Vec<u8> {
        self.xid += 1;
        let mut req = Vec::new();
        put_i32(&mut req, self.xid);
        put_i32(&mut req, op);
        req.extend_from_slice(body);
        frame(&req)
    }

    /// Reads replies until the one for `xid`; returns its error code.
    fn reply(&mut self, xid: i32) -> io::Result<i32> {
        loop {
            let r = self.recv()?;
            let got = i32::from_be_bytes(r[0..4].try_into().unwrap());
            if got == xid {
                return Ok(i32::from_be_bytes(r[12..16].try_into().unwrap()));
            }
        }
    }

    fn call(&mut self, op: i32, body: &[u8]) -> io::Result<i32> {
        let f = self.request(op, body);
        self.s.write_all(&f)?;
        self.reply(self.xid)
    }

    fn create(&mut self, path: &str, flags: i32) -> io::Result<i32> {
        let body = create_body(path, flags);
        self.call(OP_CREATE, &body)
    }

    fn exists(&mut self, path: &str) -> bool {
        let err = self.call(OP_EXISTS, &exists_body(path, false)).unwrap();
        assert!(err == 0 || err == NONODE, "exists {path}: error {err}");
        err == 0
    }
}

fn exists_body(path: &str, watch: bool) -> Vec<u8> {
    let mut b = Vec::new();
    put_bytes(&mut b, path.as_bytes());
    b.push(u8::from(watch));
    b
}

/// The xid of a server->client frame: -1 for a watch notification, -2 for a ping's reply.
fn reply_xid(frame: &[u8]) -> i32 {
    i32::from_be_bytes(frame[0..4].try_into().unwrap())
}

const NOTIFICATION_XID: i32 = -1;
const PING_XID: i32 = -2;
const OP_PING: i32 = 11;
const OP_DELETE: i32 = 2;

fn create_body(path: &str, flags: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_bytes(&mut b, path.as_bytes());
    put_bytes(&mut b, b"x");
    put_i32(&mut b, 1); // one ACL: world:anyone, all perms
    put_i32(&mut b, 31);
    put_bytes(&mut b, b"world");
    put_bytes(&mut b, b"anyone");
    put_i32(&mut b, flags);
    b
}

fn server_addr() -> String {
    shared_connect_string().split(',').next().unwrap().trim().to_string()
}

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/proxy-test-{}-{tag}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

fn is_reset(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe)
}

// ------------------------------------------------------------------------------------ tests

#[test]
fn four_letter_words_pass_cut_stall_pass() {
    let p = Proxy::start(&server_addr());
    assert_eq!(p.mode(), ProxyMode::Pass);

    let out = four_letter_port(p.port(), "srvr", Duration::from_secs(2)).unwrap();
    assert!(out.contains("Mode: "), "{out}");
    assert!(wait_until(Duration::from_secs(2), || p.connections() == 0), "4lw connection still counted");

    p.cut();
    assert_eq!(p.mode(), ProxyMode::Cut);
    let t = Instant::now();
    let r = four_letter_port(p.port(), "srvr", Duration::from_secs(2));
    eprintln!("srvr while cut: {r:?} after {:?}", t.elapsed());
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
    assert!(t.elapsed() < Duration::from_millis(500));

    p.stall();
    let t = Instant::now();
    let r = four_letter_port(p.port(), "srvr", Duration::from_millis(700));
    eprintln!("srvr while stalled: {r:?} after {:?}", t.elapsed());
    assert!(
        matches!(r.as_ref().map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)),
        "{r:?}"
    );
    assert!(t.elapsed() >= Duration::from_millis(700));
    assert_eq!(p.connections(), 1, "the stalled connection stays counted");
    assert_eq!(p.forwarded(), (4, out.len() as u64), "nothing forwarded while stalled");

    p.pass();
    let out = four_letter_port(p.port(), "srvr", Duration::from_secs(2)).unwrap();
    assert!(out.contains("Mode: "), "{out}");
    // the stalled connection's client had hung up: dropped without reaching the server
    assert!(wait_until(Duration::from_secs(2), || p.connections() == 0));
    assert_eq!(p.accepted(), 3);
    assert_eq!(p.forwarded().0, 8, "only the two srvr that were not stalled reached the server");
}

#[test]
fn stall_holds_bytes_and_pass_delivers_them() {
    let p = Proxy::start(&server_addr());
    let path = unique("stall");
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert_eq!(raw.create(&path, EPHEMERAL).unwrap(), 0);

    p.stall();
    let before = p.forwarded();
    let req = raw.request(OP_EXISTS, &{
        let mut b = Vec::new();
        put_bytes(&mut b, path.as_bytes());
        b.push(0);
        b
    });
    raw.s.write_all(&req).unwrap();
    raw.s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut byte = [0u8; 1];
    let r = raw.s.read(&mut byte);
    assert!(
        matches!(r.as_ref().map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)),
        "{r:?}"
    );
    assert_eq!(p.forwarded(), before, "bytes crossed a stalled proxy");
    assert_eq!(p.connections(), 1);

    let t = Instant::now();
    p.pass();
    raw.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(raw.reply(raw.xid).unwrap(), 0, "the held exists() is answered after pass");
    eprintln!("held request answered {:?} after pass", t.elapsed());
    assert_eq!(raw.create(&format!("{path}-2"), EPHEMERAL).unwrap(), 0, "the session goes on");
}

#[test]
fn cut_resets_connections_and_refuses_new_ones_until_pass() {
    let p = Proxy::start(&server_addr());
    let mut a = Raw::connect(&p.address()).unwrap();
    let mut b = Raw::connect(&p.address()).unwrap();
    assert!(a.exists("/zookeeper") && b.exists("/zookeeper"));
    assert_eq!(p.connections(), 2);

    let t = Instant::now();
    p.cut();
    eprintln!("cut() took {:?}", t.elapsed());
    assert_eq!(p.connections(), 0, "cut() returns once every connection is closed");
    let mut byte = [0u8; 1];
    let e = a.s.read(&mut byte).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    let f = b.request(OP_EXISTS, b"\0\0\0\x01/\0");
    let e = b.s.write_all(&f).and_then(|_| b.recv().map(drop)).unwrap_err();
    assert!(is_reset(&e), "{e}");
    assert_eq!(TcpStream::connect(p.address()).unwrap_err().kind(), io::ErrorKind::ConnectionRefused);

    p.pass();
    let mut c = Raw::connect(&p.address()).unwrap();
    assert!(c.exists("/zookeeper"));
    assert_ne!(c.session_id, a.session_id);
}

#[test]
fn cut_drops_what_a_stall_held() {
    let p = Proxy::start(&server_addr());
    let path = unique("dropped");
    let mut raw = Raw::connect(&p.address()).unwrap();
    p.stall();
    let f = raw.request(OP_CREATE, &create_body(&path, PERSISTENT));
    raw.s.write_all(&f).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    p.cut();
    p.pass();
    let e = raw.reply(raw.xid).unwrap_err();
    assert!(is_reset(&e), "{e}");
    let mut direct = Raw::connect(&server_addr()).unwrap();
    assert!(!direct.exists(&path), "a request held by a stall reached the server after cut");
}

/// The key fault: the request reaches the server, the client never sees the response.
#[test]
fn cut_on_next_request_containing_delivers_the_request_but_no_response() {
    let p = Proxy::start(&server_addr());
    let mut direct = Raw::connect(&server_addr()).unwrap();
    const ROUNDS: usize = 25;
    let t = Instant::now();
    for i in 0..ROUNDS {
        let path = unique("after");
        let mut raw = Raw::connect(&p.address()).unwrap();
        assert!(!raw.exists(&path));
        p.cut_on_next_request_containing(path.as_bytes());
        let f = raw.request(OP_CREATE, &create_body(&path, EPHEMERAL));
        if i % 2 == 1 {
            // the request in two segments: the trigger waits for the whole frame
            raw.s.write_all(&f[..f.len() / 2]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            raw.s.write_all(&f[f.len() / 2..]).unwrap();
        } else {
            raw.s.write_all(&f).unwrap();
        }
        match raw.recv() {
            Ok(r) => panic!("round {i}: the client got a reply ({} bytes) through a cut connection", r.len()),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "round {i}: {e}"),
        }
        assert!(p.wait_request_cut(Duration::from_secs(5)));
        assert!(direct.exists(&path), "round {i}: the create did not reach the server");
        assert_eq!(p.mode(), ProxyMode::Pass);
    }
    eprintln!("{ROUNDS} create+cut rounds in {:?}", t.elapsed());
    assert_eq!(p.request_cuts(), ROUNDS);
    assert_eq!(p.connections(), 0);
}

#[test]
fn a_trigger_drops_the_requests_after_the_matching_one() {
    let p = Proxy::start(&server_addr());
    let (a, b, c) = (unique("pipelined-a"), unique("pipelined-b"), unique("pipelined-c"));
    let mut raw = Raw::connect(&p.address()).unwrap();
    p.cut_on_next_request_containing(b.as_bytes());
    // three creates in one segment: a is forwarded, b is forwarded then cut, c is dropped
    let mut burst = raw.request(OP_CREATE, &create_body(&a, PERSISTENT));
    burst.extend(raw.request(OP_CREATE, &create_body(&b, PERSISTENT)));
    burst.extend(raw.request(OP_CREATE, &create_body(&c, PERSISTENT)));
    raw.s.write_all(&burst).unwrap();
    // a's reply may or may not have made it back before the cut; b's and c's never do
    loop {
        match raw.recv() {
            Ok(r) => assert_eq!(i32::from_be_bytes(r[0..4].try_into().unwrap()), raw.xid - 2, "unexpected reply"),
            Err(e) => {
                assert!(is_reset(&e), "{e}");
                break;
            }
        }
    }
    assert!(p.wait_request_cut(Duration::from_secs(5)));
    let mut direct = Raw::connect(&server_addr()).unwrap();
    assert!(direct.exists(&a));
    assert!(direct.exists(&b));
    assert!(!direct.exists(&c));
}

#[test]
fn cut_before_next_request_containing_never_delivers_it() {
    let p = Proxy::start(&server_addr());
    let path = unique("before");
    let mut raw = Raw::connect(&p.address()).unwrap();
    p.cut_before_next_request_containing(path.as_bytes());
    let e = raw.create(&path, PERSISTENT).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    assert!(p.wait_request_cut(Duration::from_secs(5)));
    let mut direct = Raw::connect(&server_addr()).unwrap();
    assert!(!direct.exists(&path));
    // and the proxy passes again at once
    let mut again = Raw::connect(&p.address()).unwrap();
    assert_eq!(again.create(&path, PERSISTENT).unwrap(), 0);
}

#[test]
fn matching_trigger_sees_op_codes_and_4lw_never_matches() {
    let p = Proxy::start(&server_addr());
    // a 4lw stream is not framed: it never matches, even a pattern it contains
    p.cut_on_next_request_containing(b"srvr");
    assert!(four_letter_port(p.port(), "srvr", Duration::from_secs(2)).unwrap().contains("Mode: "));
    assert_eq!(p.request_cuts(), 0);
    p.disarm();
    assert!(p.wait_request_cut(Duration::ZERO), "disarmed counts as done");

    let path = unique("op");
    let mut raw = Raw::connect(&p.address()).unwrap();
    p.cut_on_next_request_matching(true, |f| request_op(f) == Some(OP_CREATE));
    assert!(!raw.exists(&path), "exists() is not a create: not cut");
    assert!(raw.create(&path, PERSISTENT).is_err());
    assert!(p.wait_request_cut(Duration::from_secs(5)));
    assert!(Raw::connect(&server_addr()).unwrap().exists(&path));
}

#[test]
fn upstream_down_resets_the_client_and_drop_closes_everything() {
    let c = Cluster::standalone();
    let p = Proxy::start(&c.server_address(0));
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert!(raw.exists("/zookeeper"));
    c.kill(0);
    let mut byte = [0u8; 1];
    let r = raw.s.read(&mut byte);
    assert!(r.is_err() || r.as_ref().unwrap() == &0, "{r:?}");
    // the server's FIN was passed on as a half-close; the client closing ends the connection
    drop(raw);
    assert!(wait_until(Duration::from_secs(2), || p.connections() == 0));
    // server down: connect succeeds, then the connection is reset
    let e = Raw::connect(&p.address()).err().expect("a session through a proxy to a dead server");
    assert!(is_reset(&e) || e.kind() == io::ErrorKind::UnexpectedEof, "{e}");
    c.restart(0);
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert!(raw.exists("/zookeeper"));

    let port = p.port();
    let threads = || {
        // thread names are cut to 15 bytes: "zk-proxy-<port>-"
        let prefix = format!("zk-proxy-{port}");
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(&prefix)))
            .count()
    };
    assert_eq!(threads(), 3, "acceptor + two pumps");
    let t = Instant::now();
    drop(p);
    eprintln!("drop took {:?}", t.elapsed());
    assert_eq!(threads(), 0, "proxy threads outlived Drop");
    let e = raw.s.read(&mut byte).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(TcpStream::connect(("127.0.0.1", port)).unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
}

/// One-way loss, client to server: a request is held, while a watch notification the server
/// sends meanwhile arrives; `pass` then delivers the request, whose reply follows.
#[test]
fn stall_upstream_holds_requests_and_delivers_notifications() {
    let p = Proxy::start(&server_addr());
    let path = unique("up");
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert_eq!(raw.create(&path, PERSISTENT).unwrap(), 0);
    assert_eq!(raw.call(OP_EXISTS, &exists_body(&path, true)).unwrap(), 0, "exists, watching");

    p.stall_upstream();
    assert_eq!(p.mode(), ProxyMode::StallUpstream);
    let (up, _) = p.forwarded();
    let held = raw.request(OP_EXISTS, &exists_body("/zookeeper", false));
    raw.s.write_all(&held).unwrap();
    // The server deletes the node for someone else: its notification crosses the proxy.
    let mut direct = Raw::connect(&server_addr()).unwrap();
    let delete = {
        let mut b = Vec::new();
        put_bytes(&mut b, path.as_bytes());
        put_i32(&mut b, -1);
        b
    };
    assert_eq!(direct.call(OP_DELETE, &delete).unwrap(), 0);
    let event = raw.recv().unwrap();
    assert_eq!(reply_xid(&event), NOTIFICATION_XID, "the first frame after the stall is the notification");
    assert_eq!(p.forwarded().0, up, "the request crossed a proxy stalled upstream");
    assert_eq!(p.connections(), 1);

    p.pass();
    assert_eq!(raw.reply(raw.xid).unwrap(), 0, "the held exists() is answered after pass");
}

/// One-way loss, client to server: the client's pings are held, so the server expires the
/// session, and its closing of the connection reaches the client.
#[test]
fn stall_upstream_lets_the_server_expire_the_session_and_close_the_connection() {
    let p = Proxy::start(&server_addr());
    let path = unique("up-expire");
    let mut raw = Raw::connect_with(&p.address(), 2_000).unwrap();
    assert_eq!(raw.create(&path, EPHEMERAL).unwrap(), 0);
    // Pings every 300 ms (the server's timeout is 2 s) from another thread, as a client sends them.
    let pinger = {
        let mut s = raw.s.try_clone().unwrap();
        let ping = {
            let mut b = Vec::new();
            put_i32(&mut b, PING_XID);
            put_i32(&mut b, OP_PING);
            frame(&b)
        };
        std::thread::spawn(move || {
            while s.write_all(&ping).is_ok() {
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    // A ping's reply arrives while passing: the pings keep the session alive.
    while reply_xid(&raw.recv().unwrap()) != PING_XID {}

    let t = Instant::now();
    p.stall_upstream();
    let (up, _) = p.forwarded();
    let end = loop {
        match raw.recv() {
            Ok(_) => continue, // replies to pings sent before the stall
            Err(e) => break e,
        }
    };
    eprintln!("the server closed the connection {:?} after the stall: {end}", t.elapsed());
    assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof, "the server's FIN, passed on: {end}");
    assert!(t.elapsed() >= Duration::from_millis(1_500), "closed after {:?}", t.elapsed());
    assert_eq!(p.forwarded().0, up, "pings crossed a proxy stalled upstream");
    let mut direct = Raw::connect(&server_addr()).unwrap();
    assert!(!direct.exists(&path), "the session expired, and its ephemeral node with it");
    raw.s.shutdown(std::net::Shutdown::Both).unwrap(); // the pinger's next write fails
    pinger.join().unwrap();
}

/// One-way loss, server to client: the request reaches the server (which executes it), its
/// reply is held until `pass`.
#[test]
fn stall_downstream_delivers_requests_and_holds_replies() {
    let p = Proxy::start(&server_addr());
    let path = unique("down");
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert!(raw.exists("/zookeeper"));

    p.stall_downstream();
    assert_eq!(p.mode(), ProxyMode::StallDownstream);
    let (_, down) = p.forwarded();
    let create = raw.request(OP_CREATE, &create_body(&path, PERSISTENT));
    raw.s.write_all(&create).unwrap();
    let mut direct = Raw::connect(&server_addr()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || direct.exists(&path)), "the create did not reach the server");
    // The server replied to the create by the time the node existed; the reply is held.
    assert_eq!(p.forwarded().1, down, "a reply crossed a proxy stalled downstream");

    p.pass();
    assert_eq!(raw.reply(raw.xid).unwrap(), 0, "the held reply is delivered after pass");
}

/// Issue 42's half-finished reconnect: after a cut, the client's reconnect gets its
/// ConnectResponse, and nothing more: then every connection is reset and new ones refused.
#[test]
fn cut_after_next_connect_response_lets_one_handshake_through_then_cuts() {
    let p = Proxy::start(&server_addr());
    let path = unique("handshake");
    let mut raw = Raw::connect(&p.address()).unwrap();
    assert_eq!(raw.create(&path, EPHEMERAL).unwrap(), 0);
    let session = raw.session_id;
    p.cut();
    let mut bystander = Raw::connect(&server_addr()).unwrap();
    p.cut_after_next_connect_response();
    assert!(!p.wait_connect_cut(Duration::ZERO), "armed");
    p.pass();

    // The reconnect, with a request sent right behind the ConnectRequest.
    let (up, down) = p.forwarded();
    let mut again = Raw { s: TcpStream::connect(p.address()).unwrap(), ..raw };
    again.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let connect = again.connect_request(10_000);
    let mut burst = connect.clone();
    burst.extend(again.request(OP_EXISTS, &exists_body(&path, false)));
    again.s.write_all(&burst).unwrap();
    let resp = again.recv().expect("the ConnectResponse gets through");
    again.accept_connect_response(&resp);
    assert_eq!(again.session_id, session, "the session was taken up again");
    let e = again.recv().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    assert!(p.wait_connect_cut(Duration::from_secs(5)));
    assert_eq!(p.mode(), ProxyMode::Cut);
    assert_eq!(p.connect_cuts(), 1);
    assert_eq!(p.forwarded(), (up + connect.len() as u64, down + 4 + resp.len() as u64), "one frame each way");
    assert_eq!(TcpStream::connect(p.address()).unwrap_err().kind(), io::ErrorKind::ConnectionRefused);

    // One-shot: after pass, connections work again; the session is still the server's.
    p.pass();
    assert!(Raw::connect(&p.address()).unwrap().exists("/zookeeper"));
    assert!(bystander.exists(&path), "the session and its ephemeral node live on");
}

// ------------------------------------------------------------------------- zookeeper-client

use zookeeper_client as zk;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn wait_state(w: &mut zk::StateWatcher, want: zk::SessionState, timeout: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let s = tokio::time::timeout(timeout.saturating_sub(t.elapsed()), w.changed())
            .await
            .unwrap_or_else(|_| panic!("no {want:?} within {timeout:?}"));
        if s == want {
            return t.elapsed();
        }
        assert!(!s.is_terminated(), "session ended: {s:?} while waiting for {want:?}");
    }
}

#[test]
fn zookeeper_client_session_survives_cut_and_stall() {
    let p = Proxy::start(&server_addr());
    let path = unique("zkc");
    rt().block_on(async {
        let client =
            zk::Client::connector().with_session_timeout(Duration::from_secs(6)).connect(&p.address()).await.unwrap();
        let sid = client.session_id();
        let mut w = client.state_watcher();
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        client.create(&path, b"", &ephemeral).await.unwrap();

        // cut: disconnected at once; pass: reconnects with the same session
        p.cut();
        let d = wait_state(&mut w, zk::SessionState::Disconnected, Duration::from_secs(5)).await;
        eprintln!("cut: Disconnected after {d:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        p.pass();
        let r = wait_state(&mut w, zk::SessionState::SyncConnected, Duration::from_secs(10)).await;
        eprintln!("pass: SyncConnected after {r:?}");
        assert_eq!(client.session_id(), sid);
        assert!(client.check_stat(&path).await.unwrap().is_some());

        // stall: the client notices after its read timeout (0.4 x session timeout here)
        p.stall();
        let d = wait_state(&mut w, zk::SessionState::Disconnected, Duration::from_secs(10)).await;
        eprintln!("stall: Disconnected after {d:?}");
        assert!(d >= Duration::from_millis(1500), "{d:?}");
        p.pass();
        let r = wait_state(&mut w, zk::SessionState::SyncConnected, Duration::from_secs(10)).await;
        eprintln!("pass after stall: SyncConnected after {r:?}");
        assert!(client.check_stat(&path).await.unwrap().is_some(), "the session (and its ephemeral) survived");
    });
}

#[test]
fn proxied_ensemble_client_fails_over_when_its_server_is_cut() {
    let c = Cluster::ensemble(3);
    let proxied = ProxiedCluster::new(&c);
    assert_eq!(proxied.len(), 3);
    assert_eq!(proxied.connect_string().split(',').count(), 3);
    let path = unique("failover");
    rt().block_on(async {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(6))
            .connect(&proxied.connect_string())
            .await
            .unwrap();
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        client.create(&path, b"", &ephemeral).await.unwrap();
        let sid = client.session_id();
        let via = (0..3).find(|&i| proxied[i].connections() == 1).expect("one proxy carries the session");
        assert_eq!(proxied.connections(), 1);
        let mut w = client.state_watcher();
        let t = Instant::now();
        proxied.proxy(via).cut();
        wait_state(&mut w, zk::SessionState::Disconnected, Duration::from_secs(5)).await;
        wait_state(&mut w, zk::SessionState::SyncConnected, Duration::from_secs(10)).await;
        eprintln!("failed over from server {via} in {:?}", t.elapsed());
        let now = (0..3).find(|&i| proxied[i].connections() == 1).expect("reconnected through another proxy");
        assert_ne!(now, via);
        assert_eq!(client.session_id(), sid);
        assert!(client.check_stat(&path).await.unwrap().is_some());
    });
}
