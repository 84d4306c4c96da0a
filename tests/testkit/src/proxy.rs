//! A fault-injecting TCP proxy on loopback, to put real network faults between a ZooKeeper client
//! and its servers.
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock_testkit::{Cluster, Proxy, ProxiedCluster};
//!
//! let cluster = Cluster::standalone();
//! let proxy = Proxy::start(&cluster.server_address(0));
//! let connect = proxy.address(); // give this to the client instead of the server's address
//!
//! proxy.stall(); // blackhole: nothing crosses, connections stay open
//! proxy.pass(); // back to normal; what was held is delivered
//! proxy.cut(); // every connection reset, new ones refused
//! proxy.pass();
//! proxy.stall_upstream(); // one-way loss: the client's bytes are held, the server's delivered
//! proxy.stall_downstream(); // the other way round
//! proxy.pass();
//!
//! // The next connection gets its ConnectResponse, then everything is cut and stays cut.
//! proxy.cut_after_next_connect_response();
//!
//! // The client's create reaches the server, its response never reaches the client.
//! proxy.cut_on_next_request_containing(b"-lock-");
//! // ... the client creates its lock node ...
//! assert!(proxy.wait_request_cut(Duration::from_secs(10)));
//!
//! // An ensemble behind one proxy per server.
//! let ensemble = Cluster::ensemble(3);
//! let proxied = ProxiedCluster::new(&ensemble);
//! let connect = proxied.connect_string(); // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//! proxied.proxy(0).cut(); // the client can no longer reach server 0
//! # let _ = connect;
//! ```
//!
//! # Modes and what a client observes
//! The mode ([`ProxyMode`]) applies to every connection, current and new, at once.
//!
//! * [`Proxy::pass`] (the initial mode): bytes are forwarded both ways as they arrive (with
//!   `TCP_NODELAY`), a half-close (FIN) is passed on as a half-close, and a reset or error on one
//!   side resets the other side. A new connection is accepted, and the proxy connects to the
//!   upstream server right away; if that fails (server down) the client's connection is reset
//!   (so the client sees its connect succeed and then `ECONNRESET`, where a direct connection
//!   would have been refused).
//! * [`Proxy::cut`]: every open connection is closed with a TCP reset on both sides (`SO_LINGER`
//!   0): the client's next read or write fails with `ECONNRESET` (a read may first return data
//!   that had already been delivered to its socket), and so does the server's. New connections
//!   are refused (`ECONNREFUSED`): the proxy stops listening (it keeps its port reserved, with a
//!   second `SO_REUSEPORT` socket that never listens, so nobody can take it). `cut` returns once
//!   every connection has been closed (resets sent). Bytes held by a stall are dropped.
//! * [`Proxy::stall`]: a blackhole. Connections stay open, but nothing crosses the proxy in
//!   either direction: not data, not a FIN, not a reset. Each direction of each connection holds
//!   at most what it read before noticing (one read of ≤64 KiB, plus the start of an incomplete
//!   request); everything else waits in the kernel's socket buffers, so a sender that keeps
//!   writing eventually blocks, as with a real blackhole. New connections are accepted (the TCP handshake completes) but get no data
//!   either, and the proxy does not connect upstream for them until `pass`. `stall` returns once
//!   no forward is in progress: after it returns, not one more byte is delivered. A ZooKeeper
//!   client sees requests and pings go unanswered; after its read timeout (2/3 of the session
//!   timeout for the Java client) it drops the connection and tries the next server (through a
//!   stalled proxy, its connect succeeds but the handshake times out). The server sees no pings
//!   and expires the session after the session timeout.
//! * [`Proxy::pass`] after a stall delivers everything that was held, in order, as TCP itself
//!   does when a transient blackhole heals (its retransmissions get through): pending requests
//!   reach the server, pending responses reach the client if it still has that connection open
//!   (if it gave up, it gets a reset). A FIN or reset the client sent during the stall is
//!   passed on after the held data. A connection accepted during the stall whose client has
//!   already hung up (TCP state CLOSE_WAIT) is reset without ever connecting upstream. To drop
//!   the held bytes instead, call `cut()` and then `pass()`: the stalled connections are reset.
//! * [`Proxy::stall_upstream`]: one-way loss, client to server. On each open connection the
//!   client->server direction is held exactly as by `stall` (data, FIN and reset alike), while
//!   the server->client direction is forwarded as in `pass`. A ZooKeeper client's requests and
//!   pings go unanswered, yet whatever the server sends still arrives: watch notifications, and
//!   replies to requests it had received before. The server hears nothing, so it expires the
//!   session after the session timeout, closes the connection (its FIN is passed on) and lets
//!   the next waiter in; a client that counts any byte received as a sign the server heard it
//!   keeps believing its session is live until then. If a write to the client fails (it reset
//!   its side), the reset is not passed to the server: it would travel upstream, which is held;
//!   the client->server side passes it on once the mode lets it.
//! * [`Proxy::stall_downstream`]: one-way loss, server to client: the server->client direction
//!   is held as by `stall`, the client->server direction forwarded. The server keeps hearing
//!   the client's pings, so the session lives on the server while the client hears nothing,
//!   gives up the connection after its read timeout and (its FIN passed on) tries to reconnect.
//!   A failed write to the server is not passed to the client, by the same rule.
//! * During either one-way stall, a new connection is held whole as during `stall` (the proxy
//!   does not connect upstream for it until `pass`): a TCP handshake needs both directions, so
//!   under real one-way loss no new connection is established either. Switching between the
//!   stall modes releases what the new mode forwards; `pass` delivers everything held, in order;
//!   `cut` drops it. Each returns once nothing is being forwarded in a direction it holds.
//!
//! # Cutting at a precise request, or after a reconnect's handshake
//! [`Proxy::cut_on_next_request_containing`] arms a one-shot trigger for the classic "the
//! connection dies right after the create was sent" fault; see its documentation.
//! [`Proxy::cut_after_next_connect_response`] arms one for a reconnect that half succeeds: the
//! next new connection carries the ConnectRequest up and the ConnectResponse down, nothing
//! else, and then the proxy cuts (every connection reset, new ones refused until `pass`). It relies on
//! the proxy parsing the client->server stream into the ZooKeeper protocol's length-prefixed
//! frames (one request each; the first frame of a connection is the ConnectRequest). A stream
//! that does not start with a plausible frame length (e.g. a four-letter word) is forwarded
//! as-is and never matches. Frames are forwarded whole (a request that arrives in several
//! segments is forwarded once complete), which is also when the server could first act on it.
//!
//! # Threads and cleanup
//! One acceptor thread per proxy and two pump threads per connection; blocked or stalled
//! threads sleep on a condition variable or in a blocking syscall, never spin. Reads are woken
//! with `shutdown(SHUT_RD)` (which sends nothing), writes have a 100 ms timeout after which they
//! re-check whether the connection was closed. `Drop` resets every connection, stops listening,
//! and joins every thread (waiting at most 5 s; a thread still stuck then is detached and exits
//! on its own). A proxy does not outlive the test process: it is just threads and sockets.
//!
//! The proxy never reads what it forwards except for the triggers' framing. It binds to
//! `127.0.0.1` only.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::Cluster;

const CHUNK: usize = 64 * 1024;
/// A first frame header claiming more than this is not the ZooKeeper protocol (4lw: ASCII).
const MAX_FRAME: usize = 64 * 1024 * 1024;
const WRITE_SLICE: Duration = Duration::from_millis(100);
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const CLOSE_WAIT_LIMIT: Duration = Duration::from_secs(5);
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// What a [`Proxy`] does with its connections. See the [module documentation](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward normally.
    Pass,
    /// Reset every connection, refuse new ones.
    Cut,
    /// Forward nothing, keep connections open, accept new ones.
    Stall,
    /// Hold client->server, forward server->client (new connections are held whole).
    StallUpstream,
    /// Hold server->client, forward client->server (new connections are held whole).
    StallDownstream,
}

impl ProxyMode {
    /// Whether this mode holds what flows in `direction` (a cut holds nothing: it resets).
    fn holds(self, direction: Direction) -> bool {
        match self {
            ProxyMode::Pass | ProxyMode::Cut => false,
            ProxyMode::Stall => true,
            ProxyMode::StallUpstream => direction == Direction::Up,
            ProxyMode::StallDownstream => direction == Direction::Down,
        }
    }
}

/// A predicate over one client->server frame (without its 4-byte length prefix).
type FramePredicate = Box<dyn Fn(&[u8]) -> bool + Send>;

struct Trigger {
    matches: FramePredicate,
    /// Forward the matching request before cutting (true) or cut instead of forwarding it.
    deliver: bool,
}

/// [`Proxy::cut_after_next_connect_response`]: armed, then bound to the next new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnectTrigger {
    Idle,
    Armed,
    /// Forwards the first frame each way on this connection, then cuts the proxy.
    Bound(u64),
}

/// One proxied connection. Its sockets close when the last `Arc` goes: that of the map entry,
/// which is removed (under the state lock) when both pumps are done.
struct Conn {
    client: TcpStream,
    server: OnceLock<TcpStream>,
}

struct ConnState {
    conn: Arc<Conn>,
    /// Being closed: the pumps exit at their next check.
    dead: bool,
    /// A request trigger fired: the server->client direction must not forward anything more.
    hold_down: bool,
    /// The server->client pump is between its gate and the end of its write.
    down_busy: bool,
    /// Live pump threads of this connection (1 until the upstream connection exists).
    pumps: u8,
}

struct State {
    mode: ProxyMode,
    stopping: bool,
    /// The listening socket while the mode is not `Cut` (and the proxy not stopping).
    listener: Option<Arc<TcpListener>>,
    conns: HashMap<u64, ConnState>,
    next_id: u64,
    /// Pumps between their gate and the end of their write, by [`Direction`].
    in_flight: [usize; 2],
    trigger: Option<Trigger>,
    connect_trigger: ConnectTrigger,
    /// The connection the last connect trigger bound (it may still be closing).
    connect_fired_conn: Option<u64>,
    connect_cuts: usize,
    armed_gen: u64,
    fired_gen: u64,
    /// The connection the last trigger cut (it may still be closing).
    fired_conn: Option<u64>,
    request_cuts: usize,
    accepted: usize,
    up_bytes: u64,
    down_bytes: u64,
    live_threads: usize,
    handles: Vec<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    upstream: SocketAddr,
    port: u16,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    fn wait_until<'a>(&self, g: MutexGuard<'a, State>, deadline: Instant) -> (MutexGuard<'a, State>, bool) {
        let now = Instant::now();
        if now >= deadline {
            return (g, true);
        }
        let (g, r) = self.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner());
        (g, r.timed_out() && Instant::now() >= deadline)
    }

    fn spawn(self: &Arc<Self>, st: &mut State, name: String, f: impl FnOnce(Arc<Shared>) + Send + 'static) {
        st.handles.retain(|h| !h.is_finished());
        st.live_threads += 1;
        let sh = Arc::clone(self);
        let spawned = thread::Builder::new().name(name).spawn(move || {
            let guard = ThreadGuard(Arc::clone(&sh));
            f(sh);
            drop(guard);
        });
        match spawned {
            Ok(h) => st.handles.push(h),
            Err(e) => {
                st.live_threads -= 1;
                panic!("zklock-testkit proxy: cannot spawn a thread: {e}");
            }
        }
    }
}

/// Counts live threads, also when one panics.
struct ThreadGuard(Arc<Shared>);

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.live_threads -= 1;
        self.0.cv.notify_all();
    }
}

/// [`Proxy::cut`] under the lock, without waiting: cut mode, stop listening, reset everything.
fn cut_all(st: &mut State) {
    st.mode = ProxyMode::Cut;
    if let Some(l) = st.listener.take() {
        // stops listening at once (new connects are refused) and wakes the acceptor
        // SAFETY: shutdown(2) on a socket we own.
        unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RD) };
    }
    for cs in st.conns.values_mut() {
        kill(cs);
    }
}

/// Marks a connection dead and wakes its pumps; its sockets will close with a reset.
fn kill(cs: &mut ConnState) {
    if cs.dead {
        return;
    }
    cs.dead = true;
    set_linger_zero(cs.conn.client.as_raw_fd());
    let _ = cs.conn.client.shutdown(Shutdown::Read);
    if let Some(s) = cs.conn.server.get() {
        set_linger_zero(s.as_raw_fd());
        let _ = s.shutdown(Shutdown::Read);
    }
}

/// A fault-injecting TCP proxy between ZooKeeper clients and one upstream server, listening on
/// a free `127.0.0.1` port. See the [module documentation](self) for exactly what each mode does.
/// All methods take `&self` (a `Proxy` is `Send + Sync`). `Drop` resets every connection and
/// stops the proxy.
pub struct Proxy {
    shared: Arc<Shared>,
    /// Holds the port while the proxy does not listen (cut mode); never listens itself.
    _reserve: OwnedFd,
    acceptor: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("address", &self.address())
            .field("upstream", &self.shared.upstream)
            .field("mode", &self.mode())
            .finish()
    }
}

impl Proxy {
    /// Starts a proxy to `upstream` (`"127.0.0.1:port"`, or anything that resolves) in
    /// [`ProxyMode::Pass`]. It listens on a free `127.0.0.1` port chosen by the kernel.
    /// Panics if `upstream` does not resolve or no port can be bound.
    pub fn start(upstream: &str) -> Proxy {
        let upstream_addr = upstream
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| panic!("zklock-testkit proxy: cannot resolve upstream {upstream:?}"));
        let reserve = reuseport_socket(0).unwrap_or_else(|e| panic!("zklock-testkit proxy: bind: {e}"));
        let port = local_port(reserve.as_raw_fd()).expect("getsockname");
        let listener = listen_on(port).unwrap_or_else(|e| panic!("zklock-testkit proxy: listen on {port}: {e}"));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                mode: ProxyMode::Pass,
                stopping: false,
                listener: Some(Arc::new(listener)),
                conns: HashMap::new(),
                next_id: 0,
                in_flight: [0; 2],
                trigger: None,
                connect_trigger: ConnectTrigger::Idle,
                connect_fired_conn: None,
                connect_cuts: 0,
                armed_gen: 0,
                fired_gen: 0,
                fired_conn: None,
                request_cuts: 0,
                accepted: 0,
                up_bytes: 0,
                down_bytes: 0,
                live_threads: 0,
                handles: Vec::new(),
            }),
            cv: Condvar::new(),
            upstream: upstream_addr,
            port,
        });
        let sh = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name(format!("zk-proxy-{port}-accept"))
            .spawn(move || accept_loop(sh))
            .expect("spawn proxy acceptor");
        Proxy { shared, _reserve: reserve, acceptor: Some(acceptor) }
    }

    /// `"127.0.0.1:port"` to put in the client's connect string.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.shared.port)
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// The upstream server's address.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        self.shared.lock().mode
    }

    /// Forward normally (the initial mode). After [`Proxy::cut`]: listen again. After
    /// [`Proxy::stall`]: deliver what was held, in order, then go on forwarding. Returns at once;
    /// the proxy accepts new connections when it returns.
    pub fn pass(&self) {
        let mut st = self.shared.lock();
        if st.stopping {
            return;
        }
        self.ensure_listening(&mut st);
        st.mode = ProxyMode::Pass;
        self.shared.cv.notify_all();
    }

    /// Reset every open connection (both sides get a TCP RST) and refuse new connections until
    /// [`Proxy::pass`] or [`Proxy::stall`]. Returns once every connection is closed (at most
    /// ~5 s even if a pump were stuck).
    pub fn cut(&self) {
        let mut st = self.shared.lock();
        cut_all(&mut st);
        self.shared.cv.notify_all();
        let deadline = Instant::now() + CLOSE_WAIT_LIMIT;
        while !st.conns.is_empty() {
            let (g, timed_out) = self.shared.wait_until(st, deadline);
            st = g;
            if timed_out {
                break;
            }
        }
    }

    /// Blackhole: keep every connection open but forward nothing, in either direction, until
    /// [`Proxy::pass`] (which delivers what was held) or [`Proxy::cut`] (which drops it). New
    /// connections are accepted and stalled too. Returns once no forward is in progress, so no
    /// byte is delivered after it returns.
    pub fn stall(&self) {
        self.enter_stall(ProxyMode::Stall);
    }

    /// One-way loss, client to server: what clients send is held (as by [`Proxy::stall`]), what
    /// servers send is forwarded, on every open connection. See the [module documentation](self)
    /// for what a ZooKeeper client and server observe. Returns once no client->server forward is
    /// in progress, so no byte from a client is delivered after it returns. [`Proxy::pass`]
    /// delivers what was held; [`Proxy::cut`] drops it.
    pub fn stall_upstream(&self) {
        self.enter_stall(ProxyMode::StallUpstream);
    }

    /// One-way loss, server to client: what servers send is held (as by [`Proxy::stall`]), what
    /// clients send is forwarded, on every open connection. Returns once no server->client
    /// forward is in progress. [`Proxy::pass`] delivers what was held; [`Proxy::cut`] drops it.
    pub fn stall_downstream(&self) {
        self.enter_stall(ProxyMode::StallDownstream);
    }

    fn enter_stall(&self, mode: ProxyMode) {
        let mut st = self.shared.lock();
        if st.stopping {
            return;
        }
        self.ensure_listening(&mut st);
        st.mode = mode;
        self.shared.cv.notify_all();
        let busy = |st: &State| {
            [Direction::Up, Direction::Down].into_iter().any(|d| mode.holds(d) && st.in_flight[d as usize] > 0)
        };
        let deadline = Instant::now() + CLOSE_WAIT_LIMIT;
        while busy(&st) {
            let (g, timed_out) = self.shared.wait_until(st, deadline);
            st = g;
            if timed_out {
                break;
            }
        }
    }

    /// Arms a one-shot trigger: the next client->server request (on any connection of this
    /// proxy) whose frame contains `pattern` is forwarded to the server **completely**, and then
    /// that connection is reset on both sides before anything more flows in either direction.
    /// The mode is unchanged (other connections go on; the client can reconnect through the
    /// proxy at once).
    ///
    /// Precisely, in pass mode, when the proxy has read a complete request frame containing
    /// `pattern`: (1) it disarms the trigger and stops the server->client direction of that
    /// connection (waiting for a write already in progress to finish), (2) it writes every
    /// frame up to and including the matching one to the server, (3) it waits (≤1 s) until the
    /// server's TCP stack has acknowledged all of it (`TIOCOUTQ` = 0), (4) it resets both sides.
    /// Frames the client sent after the matching one are dropped. So the server receives and
    /// executes the request (a ZooKeeper server executes a request whose connection is gone: the
    /// session lives on until it expires), but the client never sees its response, nor any
    /// response sent after the request was forwarded, nor a watch event; it sees
    /// `ECONNRESET` and reconnects. Race-free: no timing assumption.
    ///
    /// Choose a pattern only the request of interest contains: e.g. a lock node's prefix
    /// (`b"-lock-"`, or the full `/path/_c_<uuid>-lock-` for one particular client) is in the
    /// create request but not in `getChildren` of the parent (responses are not inspected). A
    /// later delete of the node also contains its name. The first frame of each connection (the
    /// ConnectRequest) is inspected too, but has no path. Arming again replaces an armed trigger.
    pub fn cut_on_next_request_containing(&self, pattern: &[u8]) {
        self.arm(pattern_predicate(pattern), true);
    }

    /// Like [`Proxy::cut_on_next_request_containing`], but the matching request is **not**
    /// forwarded: the connection is reset instead (frames before it are forwarded). The server
    /// never sees the request; the client sees `ECONNRESET` and does not know whether it was
    /// executed.
    pub fn cut_before_next_request_containing(&self, pattern: &[u8]) {
        self.arm(pattern_predicate(pattern), false);
    }

    /// The general form of the two triggers above: `matches` gets each complete client->server
    /// frame without its 4-byte length prefix (for requests: `xid` (i32), `type` (i32, see
    /// [`request_op`]), then the request body); `deliver` says whether the matching request is
    /// forwarded before the cut.
    pub fn cut_on_next_request_matching(&self, deliver: bool, matches: impl Fn(&[u8]) -> bool + Send + 'static) {
        self.arm(Box::new(matches), deliver);
    }

    fn arm(&self, matches: FramePredicate, deliver: bool) {
        let mut st = self.shared.lock();
        st.trigger = Some(Trigger { matches, deliver });
        st.armed_gen += 1;
        st.fired_conn = None;
    }

    /// Arms a one-shot trigger for a reconnect that half succeeds: on the next connection
    /// accepted from now on, the client's first frame (its ConnectRequest) is forwarded to the
    /// server and the server's first frame (its ConnectResponse) to the client, nothing else in
    /// either direction; once the client's TCP stack has acknowledged that response (≤1 s), the
    /// proxy cuts as [`Proxy::cut`] does: that connection and every other is reset on both
    /// sides, and new connections are refused until [`Proxy::pass`].
    ///
    /// So the server renews the session (a reconnect touches it) and the client sees it
    /// connected again, then loses the connection at once and cannot reconnect: issue 42's "a
    /// proxy cut A once, let only the connect response of A's reconnect through, then refused
    /// new connections". Whatever the client sends after its ConnectRequest (pings, SetWatches,
    /// requests) is held and dropped by the cut; the server sends nothing else before it.
    ///
    /// The trigger is bound to a connection when it is accepted, in any mode; it fires once the
    /// server's first frame may be forwarded (so not while a stall holds it). If that connection
    /// closes before, the trigger binds the next one. A stream that does not start with a
    /// plausible frame length (a four-letter word) counts its first read as the frame. Arming
    /// again while armed changes nothing; [`Proxy::disarm`] disarms it (a bound connection then
    /// forwards normally).
    pub fn cut_after_next_connect_response(&self) {
        let mut st = self.shared.lock();
        if st.connect_trigger == ConnectTrigger::Idle {
            st.connect_trigger = ConnectTrigger::Armed;
            st.connect_fired_conn = None;
        }
    }

    /// True once the armed [`Proxy::cut_after_next_connect_response`] has fired and the
    /// connection it let the response through is closed (the proxy is then in
    /// [`ProxyMode::Cut`], unless passed again since). Waits at most `timeout`. Also true if it
    /// was disarmed (or never armed).
    pub fn wait_connect_cut(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let done = |st: &State| {
            st.connect_trigger == ConnectTrigger::Idle
                && st.connect_fired_conn.is_none_or(|id| !st.conns.contains_key(&id))
        };
        let mut st = self.shared.lock();
        loop {
            if done(&st) {
                return true;
            }
            let (g, timed_out) = self.shared.wait_until(st, deadline);
            st = g;
            if timed_out {
                return done(&st);
            }
        }
    }

    /// How many times [`Proxy::cut_after_next_connect_response`] has fired.
    pub fn connect_cuts(&self) -> usize {
        self.shared.lock().connect_cuts
    }

    /// Disarms a trigger that has not fired yet: the request trigger and the connect trigger.
    pub fn disarm(&self) {
        let mut st = self.shared.lock();
        st.trigger = None;
        st.fired_gen = st.armed_gen;
        st.fired_conn = None;
        st.connect_trigger = ConnectTrigger::Idle;
        self.shared.cv.notify_all();
    }

    /// True once the last armed trigger has fired (its cut is complete: the connection is
    /// closed). Waits at most `timeout`. Also true if the trigger was disarmed (or never armed).
    pub fn wait_request_cut(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            let done = st.fired_gen == st.armed_gen && st.fired_conn.is_none_or(|id| !st.conns.contains_key(&id));
            if done {
                return true;
            }
            let (g, timed_out) = self.shared.wait_until(st, deadline);
            st = g;
            if timed_out {
                return st.fired_gen == st.armed_gen && st.fired_conn.is_none_or(|id| !st.conns.contains_key(&id));
            }
        }
    }

    /// How many connections a trigger has cut so far.
    pub fn request_cuts(&self) -> usize {
        self.shared.lock().request_cuts
    }

    /// Client connections currently open through the proxy (including stalled ones, and
    /// stalled ones whose client has already hung up: the proxy only notices after `pass`).
    pub fn connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// Client connections accepted since the proxy started.
    pub fn accepted(&self) -> usize {
        self.shared.lock().accepted
    }

    /// Bytes forwarded so far (client->server, server->client).
    pub fn forwarded(&self) -> (u64, u64) {
        let st = self.shared.lock();
        (st.up_bytes, st.down_bytes)
    }

    fn ensure_listening(&self, st: &mut State) {
        if st.listener.is_none() {
            let l = listen_on(self.shared.port)
                .unwrap_or_else(|e| panic!("zklock-testkit proxy: listen again on {}: {e}", self.shared.port));
            st.listener = Some(Arc::new(l));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.stopping = true;
        st.trigger = None;
        if let Some(l) = st.listener.take() {
            // SAFETY: shutdown(2) on a socket we own.
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RD) };
        }
        for cs in st.conns.values_mut() {
            kill(cs);
        }
        self.shared.cv.notify_all();
        let deadline = Instant::now() + CLOSE_WAIT_LIMIT;
        let mut stuck = false;
        while st.live_threads > 0 {
            let (g, timed_out) = self.shared.wait_until(st, deadline);
            st = g;
            if timed_out {
                eprintln!(
                    "zklock-testkit proxy {}: {} thread(s) still busy after Drop; detached",
                    self.shared.port, st.live_threads
                );
                stuck = true;
                break;
            }
        }
        let handles = std::mem::take(&mut st.handles);
        drop(st);
        for h in handles {
            // A pump counts itself out just before it returns: join it, unless some are stuck,
            // so that no proxy thread outlives Drop.
            if !stuck || h.is_finished() {
                let _ = h.join();
            }
        }
        if let Some(a) = self.acceptor.take() {
            let _ = a.join(); // it exits as soon as it sees `stopping`
        }
    }
}

/// The request type (op code) of a client->server frame as given to
/// [`Proxy::cut_on_next_request_matching`]: 1 create, 2 delete, 3 exists, 4 getData, 5 setData,
/// 8 getChildren, 11 ping, 12 getChildren2, 14 multi, 15 create2, 19 createContainer, 21
/// createTTL, -11 closeSession... `None` if the frame is too short.
pub fn request_op(frame: &[u8]) -> Option<i32> {
    frame.get(4..8).map(|b| i32::from_be_bytes(b.try_into().unwrap()))
}

fn pattern_predicate(pattern: &[u8]) -> FramePredicate {
    assert!(!pattern.is_empty(), "empty pattern");
    let p = pattern.to_vec();
    Box::new(move |frame: &[u8]| frame.windows(p.len()).any(|w| w == p.as_slice()))
}

// ------------------------------------------------------------------------------------- acceptor

fn accept_loop(sh: Arc<Shared>) {
    loop {
        let listener = {
            let mut st = sh.lock();
            loop {
                if st.stopping {
                    return;
                }
                if let Some(l) = &st.listener {
                    break Arc::clone(l);
                }
                st = sh.wait(st);
            }
        };
        match listener.accept() {
            Ok((client, _)) => {
                let mut st = sh.lock();
                let current = st.listener.as_ref().is_some_and(|l| Arc::ptr_eq(l, &listener));
                if st.stopping || !current {
                    // accepted just before a cut (or Drop): reset it
                    set_linger_zero(client.as_raw_fd());
                    drop(client);
                    continue;
                }
                let _ = client.set_nodelay(true);
                let _ = client.set_write_timeout(Some(WRITE_SLICE));
                let id = st.next_id;
                st.next_id += 1;
                st.accepted += 1;
                let conn = Arc::new(Conn { client, server: OnceLock::new() });
                st.conns.insert(
                    id,
                    ConnState { conn: Arc::clone(&conn), dead: false, hold_down: false, down_busy: false, pumps: 1 },
                );
                if st.connect_trigger == ConnectTrigger::Armed {
                    st.connect_trigger = ConnectTrigger::Bound(id);
                    st.connect_fired_conn = Some(id);
                }
                let name = format!("zk-proxy-{}-c{id}-up", sh.port);
                sh.spawn(&mut st, name, move |sh| up_pump(sh, id, conn));
            }
            Err(_) => {
                // EINVAL after a cut or Drop shut the listener down; anything else (EMFILE,
                // ECONNABORTED): do not spin
                let st = sh.lock();
                let shut = st.stopping || st.listener.as_ref().is_none_or(|l| !Arc::ptr_eq(l, &listener));
                drop(st);
                drop(listener);
                if !shut {
                    thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------- pumps

/// Called by a pump when it is done: the last one removes the connection, which closes both
/// sockets (with a reset if it was killed, with a FIN otherwise).
fn pump_exit(sh: &Shared, id: u64, conn: Arc<Conn>) {
    let mut st = sh.lock();
    drop(conn);
    let last = match st.conns.get_mut(&id) {
        Some(cs) => {
            cs.pumps -= 1;
            cs.pumps == 0
        }
        None => false,
    };
    if last {
        st.conns.remove(&id); // the last Arc: closes the sockets, under the lock
        if st.connect_trigger == ConnectTrigger::Bound(id) {
            // closed before the server's first frame went through: bind the next connection
            st.connect_trigger = ConnectTrigger::Armed;
            st.connect_fired_conn = None;
        }
    }
    sh.cv.notify_all();
}

/// Tracks the ZooKeeper framing of the client->server stream: 4-byte big-endian length + body.
struct Framer {
    /// Undecided until the first header; then framed, or raw for good.
    raw: bool,
    first: bool,
}

impl Framer {
    /// Given `buf` (all bytes read and not yet forwarded), the end offsets of the complete
    /// frames in it. In raw mode, the whole buffer counts as one "frame" that never matches.
    fn frames(&mut self, buf: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        if self.raw {
            return out;
        }
        let mut i = 0;
        while buf.len() - i >= 4 {
            let len = i32::from_be_bytes(buf[i..i + 4].try_into().unwrap());
            if len < 0 || len as usize > MAX_FRAME {
                if self.first {
                    self.raw = true;
                    return Vec::new();
                }
                // corrupt mid-stream: give up on framing (forward the rest raw)
                self.raw = true;
                return out;
            }
            self.first = false;
            let end = i + 4 + len as usize;
            if end > buf.len() {
                break;
            }
            out.push((i + 4, end));
            i = end;
        }
        out
    }
}

enum Ev {
    Data,
    Eof,
    Reset,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// client -> server
    Up,
    /// server -> client, which a firing trigger also holds back (`hold_down`)
    Down,
}

/// The gate every pump passes before forwarding: waits while the mode holds its direction, or
/// while a trigger holds the server->client direction back. Returns the lock once `direction`
/// may flow; `None` once the connection is dead or the proxy stops, and after killing the
/// connection in cut mode.
fn wait_to_forward<'a>(
    sh: &'a Shared,
    mut st: MutexGuard<'a, State>,
    id: u64,
    direction: Direction,
) -> Option<MutexGuard<'a, State>> {
    loop {
        let stopping = st.stopping;
        let mode = st.mode;
        let cs = st.conns.get_mut(&id)?;
        if cs.dead || stopping {
            return None;
        }
        if mode == ProxyMode::Cut {
            kill(cs);
            return None;
        }
        let held = mode.holds(direction) || direction == Direction::Down && cs.hold_down;
        if !held {
            return Some(st);
        }
        st = sh.wait(st);
    }
}

/// After a failed write towards `direction`'s receiver (it reset or closed its side): reset the
/// connection, unless the mode holds the other direction, which is the way that news travels
/// (a client's reset during a one-way stall upstream must not reach the server): then the
/// pump just stops, and the other pump forwards the reset it reads once the mode lets it.
fn write_failed(st: &mut State, id: u64, direction: Direction) {
    let other = if direction == Direction::Up { Direction::Down } else { Direction::Up };
    let mode = st.mode;
    if let Some(cs) = st.conns.get_mut(&id) {
        if !mode.holds(other) {
            kill(cs);
        }
    }
}

/// The gate of a new connection, before the proxy connects upstream: waits while the proxy
/// stalls in either direction (a TCP connection needs both to be established), setting
/// `stalled`. Returns the lock in pass mode; `None` as [`wait_to_forward`] does.
fn wait_to_connect<'a>(
    sh: &'a Shared,
    mut st: MutexGuard<'a, State>,
    id: u64,
    stalled: &mut bool,
) -> Option<MutexGuard<'a, State>> {
    loop {
        let stopping = st.stopping;
        let mode = st.mode;
        let cs = st.conns.get_mut(&id)?;
        if cs.dead || stopping {
            return None;
        }
        match mode {
            ProxyMode::Pass => return Some(st),
            ProxyMode::Cut => {
                kill(cs);
                return None;
            }
            ProxyMode::Stall | ProxyMode::StallUpstream | ProxyMode::StallDownstream => *stalled = true,
        }
        st = sh.wait(st);
    }
}

fn up_pump(sh: Arc<Shared>, id: u64, conn: Arc<Conn>) {
    up_pump_inner(&sh, id, &conn);
    pump_exit(&sh, id, conn);
}

fn up_pump_inner(sh: &Arc<Shared>, id: u64, conn: &Arc<Conn>) {
    // 1. wait for pass mode, then connect upstream
    {
        let mut stalled = false;
        let Some(mut st) = wait_to_connect(sh, sh.lock(), id, &mut stalled) else { return };
        if stalled && client_hung_up(conn.client.as_raw_fd()) {
            // accepted during a stall, gone before the pass: never reaches the server
            if let Some(cs) = st.conns.get_mut(&id) {
                kill(cs);
            }
            return;
        }
    }
    let server = TcpStream::connect_timeout(&sh.upstream, UPSTREAM_CONNECT_TIMEOUT);
    {
        let mut st = sh.lock();
        let stopping = st.stopping;
        let Some(cs) = st.conns.get_mut(&id) else { return };
        match server {
            Ok(s) if !cs.dead && !stopping => {
                let _ = s.set_nodelay(true);
                let _ = s.set_write_timeout(Some(WRITE_SLICE));
                let _ = conn.server.set(s);
                cs.pumps += 1;
                let c2 = Arc::clone(conn);
                let name = format!("zk-proxy-{}-c{id}-down", sh.port);
                sh.spawn(&mut st, name, move |sh| {
                    down_pump(&sh, id, &c2);
                    pump_exit(&sh, id, c2);
                });
            }
            Ok(s) => {
                set_linger_zero(s.as_raw_fd());
                kill(cs);
                return;
            }
            Err(_) => {
                kill(cs); // upstream refused or unreachable: reset the client
                return;
            }
        }
    }
    let server = conn.server.get().unwrap();
    let mut client = &conn.client;
    let mut framer = Framer { raw: false, first: true };
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    // Whether the first frame went to the server: all a connect trigger lets through.
    let mut first_sent = false;
    const UP: usize = Direction::Up as usize;
    loop {
        let ev = match client.read(&mut buf) {
            Ok(0) => Ev::Eof,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                Ev::Data
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => Ev::Reset,
        };
        let Some(mut st) = wait_to_forward(sh, sh.lock(), id, Direction::Up) else { return };
        let connect_only = st.connect_trigger == ConnectTrigger::Bound(id);
        match ev {
            Ev::Reset => {
                kill(st.conns.get_mut(&id).unwrap());
                return;
            }
            Ev::Eof => {
                // forward a trailing partial frame as it is, then the half-close
                let rest = if connect_only && first_sent { &[][..] } else { &pending[..] };
                st.in_flight[UP] += 1;
                drop(st);
                let ok = write_all(sh, id, server, rest);
                let mut st = sh.lock();
                st.in_flight[UP] -= 1;
                st.up_bytes += rest.len() as u64;
                sh.cv.notify_all();
                if ok {
                    let _ = server.shutdown(Shutdown::Write);
                } else {
                    write_failed(&mut st, id, Direction::Up);
                }
                return;
            }
            Ev::Data => {}
        }
        // how much to forward, and whether a trigger fires
        let frames = framer.frames(&pending);
        let mut forward = if framer.raw { pending.len() } else { frames.last().map_or(0, |f| f.1) };
        if connect_only {
            // the ConnectRequest alone; the rest waits for the cut that drops it
            forward = match (first_sent, framer.raw) {
                (true, _) => 0,
                (false, true) => forward,
                (false, false) => frames.first().map_or(0, |f| f.1),
            };
        }
        let mut fire = None;
        if st.trigger.is_some() && !framer.raw {
            let t = st.trigger.as_ref().unwrap();
            if let Some(&(start, end)) = frames.iter().find(|&&(s, e)| (t.matches)(&pending[s..e])) {
                let deliver = t.deliver;
                forward = if deliver { end } else { start - 4 };
                st.trigger = None;
                fire = Some(deliver);
                st.conns.get_mut(&id).unwrap().hold_down = true;
                // a response already being written to the client finishes first
                while st.conns.get(&id).is_some_and(|cs| cs.down_busy && !cs.dead) {
                    st = sh.wait(st);
                }
            }
        }
        if forward == 0 && fire.is_none() {
            continue;
        }
        st.in_flight[UP] += 1;
        drop(st);
        let ok = write_all(sh, id, server, &pending[..forward]);
        if ok && fire == Some(true) {
            wait_drained(server.as_raw_fd(), DRAIN_LIMIT);
        }
        let mut st = sh.lock();
        st.in_flight[UP] -= 1;
        st.up_bytes += forward as u64;
        first_sent |= forward > 0;
        sh.cv.notify_all();
        if fire.is_some() {
            st.request_cuts += 1;
            st.fired_gen = st.armed_gen;
            st.fired_conn = Some(id);
            if let Some(cs) = st.conns.get_mut(&id) {
                kill(cs);
            }
            return;
        }
        if !ok {
            write_failed(&mut st, id, Direction::Up);
            return;
        }
        drop(st);
        pending.drain(..forward);
    }
}

fn down_pump(sh: &Arc<Shared>, id: u64, conn: &Arc<Conn>) {
    let mut server = conn.server.get().unwrap();
    let client = &conn.client;
    let mut buf = vec![0u8; CHUNK];
    // The server's first frame, gathered whole while a connect trigger is bound here.
    let mut first: Vec<u8> = Vec::new();
    const DOWN: usize = Direction::Down as usize;
    loop {
        let (ev, n) = match server.read(&mut buf) {
            Ok(0) => (Ev::Eof, 0),
            Ok(n) => (Ev::Data, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => (Ev::Reset, 0),
        };
        let Some(mut st) = wait_to_forward(sh, sh.lock(), id, Direction::Down) else { return };
        let connect_only = st.connect_trigger == ConnectTrigger::Bound(id);
        match ev {
            Ev::Reset => {
                kill(st.conns.get_mut(&id).unwrap());
                return;
            }
            Ev::Eof if first.is_empty() => {
                let _ = client.shutdown(Shutdown::Write);
                return;
            }
            Ev::Eof | Ev::Data => {}
        }
        let mut fire = false;
        let out: &[u8] = if connect_only || !first.is_empty() {
            first.extend_from_slice(&buf[..n]);
            if connect_only && matches!(ev, Ev::Data) {
                match first_frame_end(&first) {
                    None => continue,
                    Some(end) => {
                        first.truncate(end);
                        fire = true;
                    }
                }
            }
            &first
        } else {
            &buf[..n]
        };
        st.conns.get_mut(&id).unwrap().down_busy = true;
        st.in_flight[DOWN] += 1;
        drop(st);
        let ok = write_all(sh, id, client, out);
        if ok && fire {
            // a reset discards what the client's stack has not acknowledged
            wait_drained(client.as_raw_fd(), DRAIN_LIMIT);
        }
        let mut st = sh.lock();
        st.in_flight[DOWN] -= 1;
        st.down_bytes += out.len() as u64;
        if let Some(cs) = st.conns.get_mut(&id) {
            cs.down_busy = false;
        }
        if !ok {
            write_failed(&mut st, id, Direction::Down);
        }
        if fire && st.connect_trigger == ConnectTrigger::Bound(id) {
            st.connect_trigger = ConnectTrigger::Idle;
            st.connect_cuts += 1;
            cut_all(&mut st);
        }
        sh.cv.notify_all();
        if !ok || fire || matches!(ev, Ev::Eof) {
            if ok && matches!(ev, Ev::Eof) {
                let _ = client.shutdown(Shutdown::Write);
            }
            return;
        }
        first.clear();
    }
}

/// The end of the first frame of a server->client stream, once `buf` holds it whole; all of
/// `buf` if it does not start with a plausible frame length (not the ZooKeeper protocol).
fn first_frame_end(buf: &[u8]) -> Option<usize> {
    let len = i32::from_be_bytes(buf.get(..4)?.try_into().unwrap());
    if len < 0 || len as usize > MAX_FRAME {
        return Some(buf.len());
    }
    let end = 4 + len as usize;
    (buf.len() >= end).then_some(end)
}

/// Writes all of `data`, in slices of [`WRITE_SLICE`] between which it checks whether the
/// connection was closed meanwhile. False on error or if the connection was closed.
fn write_all(sh: &Shared, id: u64, mut dst: &TcpStream, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        match dst.write(data) {
            Ok(0) => return false,
            Ok(k) => data = &data[k..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
                let st = sh.lock();
                if st.stopping || st.conns.get(&id).is_none_or(|cs| cs.dead) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}

// ------------------------------------------------------------------------------- socket helpers

fn set_linger_zero(fd: RawFd) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt with a properly sized linger struct on a socket we own.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Waits until the kernel has no unacknowledged bytes queued on `fd` (or `limit` passed).
fn wait_drained(fd: RawFd, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int.
        let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
        if rc != 0 || queued == 0 || Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_micros(200));
    }
}

/// True if the peer has closed its side (our socket is in CLOSE_WAIT) or the socket failed.
fn client_hung_up(fd: RawFd) -> bool {
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt(TCP_INFO) fills at most `len` bytes of `info`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    const TCP_ESTABLISHED: u8 = 1;
    rc != 0 || info.tcpi_state != TCP_ESTABLISHED
}

/// A TCP socket with `SO_REUSEPORT`, bound to `127.0.0.1:port` (0: the kernel picks a port no
/// other socket uses).
fn reuseport_socket(port: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket syscalls; the fd is owned by the returned OwnedFd on success.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        if libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = port.to_be();
        sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        if libc::bind(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn local_port(fd: RawFd) -> io::Result<u16> {
    // SAFETY: getsockname fills at most `len` bytes.
    unsafe {
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::getsockname(fd, &mut sa as *mut libc::sockaddr_in as *mut libc::sockaddr, &mut len) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(u16::from_be(sa.sin_port))
    }
}

fn listen_on(port: u16) -> io::Result<TcpListener> {
    let fd = reuseport_socket(port)?;
    // SAFETY: listen(2) on our bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 128) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpListener::from(fd))
}

// ------------------------------------------------------------------------------ ProxiedCluster

/// One [`Proxy`] in front of each server of a [`Cluster`] (or of any list of addresses), so a
/// client can be cut off from some servers but not others. Proxies keep their ports for their
/// whole life, and a server keeps its port across [`Cluster::restart`], so the connect string
/// stays valid. Dropping it drops the proxies.
#[derive(Debug)]
pub struct ProxiedCluster {
    proxies: Vec<Proxy>,
}

impl ProxiedCluster {
    /// A proxy per server of `cluster`, in server order.
    pub fn new(cluster: &Cluster) -> ProxiedCluster {
        ProxiedCluster { proxies: (0..cluster.len()).map(|i| Proxy::start(&cluster.server_address(i))).collect() }
    }

    /// A proxy per address of a connect string (`host:port,host:port,...`, no chroot).
    pub fn for_connect_string(connect: &str) -> ProxiedCluster {
        ProxiedCluster { proxies: connect.split(',').map(|a| Proxy::start(a.trim())).collect() }
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`: the proxies' addresses, in server order.
    pub fn connect_string(&self) -> String {
        self.proxies.iter().map(Proxy::address).collect::<Vec<_>>().join(",")
    }

    /// The proxy in front of server `i`.
    pub fn proxy(&self, i: usize) -> &Proxy {
        &self.proxies[i]
    }

    /// All proxies, in server order.
    pub fn proxies(&self) -> &[Proxy] {
        &self.proxies
    }

    pub fn len(&self) -> usize {
        self.proxies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.proxies.is_empty()
    }

    /// [`Proxy::pass`] on every proxy.
    pub fn pass_all(&self) {
        self.proxies.iter().for_each(Proxy::pass);
    }

    /// [`Proxy::cut`] on every proxy: the client is cut off from the whole ensemble.
    pub fn cut_all(&self) {
        self.proxies.iter().for_each(Proxy::cut);
    }

    /// [`Proxy::stall`] on every proxy: the whole ensemble is behind a blackhole.
    pub fn stall_all(&self) {
        self.proxies.iter().for_each(Proxy::stall);
    }

    /// [`Proxy::stall_upstream`] on every proxy: nothing the client sends reaches the ensemble.
    pub fn stall_upstream_all(&self) {
        self.proxies.iter().for_each(Proxy::stall_upstream);
    }

    /// [`Proxy::stall_downstream`] on every proxy: nothing the ensemble sends reaches the client.
    pub fn stall_downstream_all(&self) {
        self.proxies.iter().for_each(Proxy::stall_downstream);
    }

    /// Open client connections over all proxies.
    pub fn connections(&self) -> usize {
        self.proxies.iter().map(Proxy::connections).sum()
    }
}

impl std::ops::Index<usize> for ProxiedCluster {
    type Output = Proxy;
    fn index(&self, i: usize) -> &Proxy {
        &self.proxies[i]
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Proxy>();
    is::<ProxiedCluster>();
}
