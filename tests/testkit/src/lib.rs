//! Real Apache ZooKeeper servers (Debian's `zookeeper` 3.8 package, or 3.9.3 from Debian 13's
//! jars: [`ZkServer`]) on loopback, for zklock's tests.
//!
//! Everything about installing and launching the server lives in `scripts/zk` at the repository
//! root; this crate calls `scripts/zk config`, `scripts/zk seed-seq` and `scripts/zk exec-server`.
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock_testkit::{Cluster, shared_connect_string};
//!
//! // Most tests: one standalone server shared by the whole test binary (or $ZK_CONNECT).
//! let connect = shared_connect_string();
//!
//! // Fault tests: a private 3-server ensemble.
//! let cluster = Cluster::ensemble(3);
//! let leader = cluster.leader().unwrap();
//! cluster.kill(leader);
//! let new_leader = cluster.wait_for_leader(Duration::from_secs(30));
//! cluster.restart(leader);
//! # let _ = (connect, new_leader);
//! ```
//!
//! # Server versions
//! By default the servers are Debian 12's ZooKeeper 3.8 ([`ZkServer::V3_8`]).
//! [`ClusterBuilder::server_version`]`(`[`ZkServer::V3_9`]`)` runs the field version, 3.9.3, from
//! Debian 13 (trixie) jars that `scripts/field` fetches with `apt-get download` on first use
//! (~10-15 s, once per machine, into the tools cache; nothing is installed). The environment
//! variable `ZK_SERVER_VERSION=3.9` makes 3.9 the default of every builder (and of
//! [`shared_connect_string`]'s server).
//!
//! ```no_run
//! use zklock_testkit::{Cluster, ZkServer};
//!
//! let cluster = Cluster::builder().server_version(ZkServer::V3_9).servers(3).start();
//! assert!(cluster.four_letter(0, "srvr").unwrap().contains("version: 3.9.3"));
//! ```
//!
//! # TLS
//! [`ClusterBuilder::tls`] starts servers that also serve TLS (ZooKeeper's
//! NettyServerCnxnFactory and `secureClientPort`, by `scripts/zk config`), with x509 auth and
//! certificates made once per test process by `scripts/zk tls-certs` ([`TlsCerts`]):
//!
//! ```no_run
//! use zklock_testkit::{Cluster, ClientAuth};
//!
//! let cluster = Cluster::builder().tls(ClientAuth::Need).start();
//! let connect = cluster.tls_connect_string(); // localhost:<secure port>
//! let ca = cluster.tls_certs().ca_pem();
//! let (cert, key) = cluster.tls_certs().client("alice"); // x509:CN=alice,O=zklock
//! # let _ = (connect, ca, cert, key);
//! ```
//!
//! # SASL and Kerberos
//! [`ClusterBuilder::sasl_digest`] starts servers that authenticate SASL DIGEST-MD5 clients (a
//! JAAS `DigestLoginModule` with the given users), [`ClusterBuilder::kerberos`] servers that
//! authenticate Kerberos (GSSAPI) clients of a [`Kdc`]: MIT's KDC on loopback with a realm,
//! principals and keytabs made by `scripts/zk kdc`. Either way ACL entries name clients as
//! `sasl:<identity>`, and [`ClusterBuilder::sasl_required`] refuses clients without SASL.
//!
//! ```no_run
//! use zklock_testkit::{Cluster, Kdc};
//!
//! let digest = Cluster::builder().sasl_digest(&[("alice", "alice-pw")]).start();
//! let kdc = Kdc::start(); // a client finds it through KRB5_CONFIG=kdc.krb5_conf()
//! let kerberos = Cluster::builder().kerberos(&kdc).start();
//! let keytab = kdc.keytab("alice"); // alice@ZKLOCK.TEST; connect as localhost:<port>
//! # let _ = (digest, kerberos, keytab);
//! ```
//!
//! # Network faults and Curator
//! * [`proxy`]: [`Proxy`], a fault-injecting TCP proxy between a client and a server (pass, cut,
//!   stall, cut right after a given request), and [`ProxiedCluster`], one proxy per server.
//! * [`curator`]: [`CuratorContender`], an Apache Curator `InterProcessMutex` or one side of an
//!   `InterProcessReadWriteLock` ([`CuratorLock`]) in a child JVM, driven line by line, for
//!   interop tests, against Curator 5.4 (Debian 12) or 5.7.1 (Debian 13): [`CuratorVersion`].
//!
//! # No server outlives the test process
//! Every server is started with its stdin connected to a pipe whose only write end is held by
//! the test process (close-on-exec, so no other child inherits it). `scripts/zk exec-server` forks
//! a tiny watchdog before it `exec`s java; the watchdog blocks on that pipe and SIGKILLs the JVM
//! (and removes its directory) as soon as the pipe reports EOF, i.e. when the test process is
//! gone for whatever reason: normal exit (statics such as the shared server are never dropped),
//! panic, abort or SIGKILL. `PR_SET_PDEATHSIG` is not used: it fires when the spawning *thread*
//! exits, and tests run on short-lived threads. A watchdog exits by itself once its JVM is gone,
//! so it never kills a recycled pid. [`Cluster`]'s `Drop` kills its servers and removes its
//! directories right away. Directories left by a test process whose watchdogs were killed too are
//! swept by the next test process.
//!
//! # Blocking
//! Every method blocks the calling thread (process waits, 50ms polling of `srvr`). From async
//! tests, call them directly only if a short stall of a runtime thread is fine, or use
//! `tokio::task::spawn_blocking`.
//!
//! # Speed
//! A standalone server serves ~0.5-1s after `start` (the JVM dominates), a 3-server ensemble
//! ~1.5-2.5s on 2 cores. `scripts/zk prepare`, run once per test process, builds a JVM
//! class-data-sharing archive the first time on a machine (~1.5s, cached under
//! `/tmp/zklock-tools-<uid>`), which makes every later JVM start ~35% cheaper.
//!
//! # Environment
//! * `ZK_CONNECT`: use this external ensemble for [`shared_connect_string`] (see [`external`]).
//! * `ZK_TESTKIT_KEEP=1`: keep the server directories (logs, data) instead of removing them.
//! * `ZK_LOG_LEVEL=info|debug`: server log level (default warn), in `<dir>/server.log`.
//! * `ZK_TESTKIT_JVM_FLAGS`: extra JVM flags for every server started by this crate.
//! * `ZK_CDS=0`: do not use the class-data-sharing archive.
//! * `ZK_SERVER_VERSION=3.8|3.9`: the default [`ZkServer`] (3.8 if unset).

pub mod chaos;
pub mod curator;
pub mod proxy;
pub mod txnlog;

pub use curator::{CuratorContender, CuratorContenderBuilder, CuratorLock, CuratorVersion};
pub use proxy::{ProxiedCluster, Proxy, ProxyMode};

use std::collections::hash_map::RandomState;
use std::fs::{self, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// JVM flag required by servers whose data dir was seeded with `tools/seqsnap`.
pub const DIGEST_DISABLED_FLAG: &str = "-Dzookeeper.digest.enabled=false";

/// Default `tickTime` (ms). Session timeouts may be as low as 2 ticks.
pub const DEFAULT_TICK_MS: u32 = 200;

const START_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);
const START_ATTEMPTS: usize = 4;

/// Which ZooKeeper server a [`Cluster`] runs (`scripts/zk`'s `ZK_SERVER_VERSION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZkServer {
    /// Debian 12's `zookeeper` package, 3.8.0 (`/usr/share/java`, installed with apt-get if
    /// missing).
    V3_8,
    /// ZooKeeper 3.9.3, the field version: Debian 13 (trixie)'s `zookeeper`/`libzookeeper-java`
    /// and the Java libraries they depend on, all from trixie, fetched by `scripts/field` into the
    /// tools cache on first use (nothing installed over Debian 12's packages).
    V3_9,
}

impl ZkServer {
    /// `$ZK_SERVER_VERSION` (`3.8` or `3.9`; 3.8 if unset or empty). Panics on another value.
    pub fn from_env() -> ZkServer {
        match std::env::var("ZK_SERVER_VERSION").as_deref().map(str::trim) {
            Err(_) | Ok("") => ZkServer::V3_8,
            Ok(v) => {
                ZkServer::parse(v).unwrap_or_else(|| panic!("zklock-testkit: bad ZK_SERVER_VERSION={v:?} (3.8 or 3.9)"))
            }
        }
    }

    /// `"3.8"` or `"3.9"` (also accepts the full versions `"3.8.0"` and `"3.9.3"`).
    pub fn parse(s: &str) -> Option<ZkServer> {
        match s {
            "3.8" | "3.8.0" => Some(ZkServer::V3_8),
            "3.9" | "3.9.3" => Some(ZkServer::V3_9),
            _ => None,
        }
    }

    /// `"3.8"` or `"3.9"`: the value of `ZK_SERVER_VERSION` that selects it in `scripts/zk`.
    pub fn as_str(self) -> &'static str {
        match self {
            ZkServer::V3_8 => "3.8",
            ZkServer::V3_9 => "3.9",
        }
    }

    /// The exact upstream version these jars are, e.g. `"3.9.3"` (what `srvr` reports before
    /// its `-`), from `scripts/field version zk` (which fetches the 3.9 jars if needed).
    pub fn full_version(self) -> String {
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("scripts/field")).args(["version", "zk", self.as_str()]);
        run_checked(cmd, "scripts/field version").trim().to_string()
    }
}

impl Default for ZkServer {
    /// [`ZkServer::from_env`].
    fn default() -> Self {
        ZkServer::from_env()
    }
}

impl std::fmt::Display for ZkServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Path of `scripts/zk`.
pub fn zk_script() -> PathBuf {
    repo_root().join("scripts/zk")
}

/// `bash scripts/zk` (via bash, so a lost executable bit does not matter).
fn zk_command() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(zk_script());
    cmd
}

/// Says that a test (or a part of one) did not run, and why: on stderr, and as a line of the
/// file `ZKL_TEST_SKIPS` names (scripts/test reads it: a skip is shown in the suite's closing
/// line, and fails the run unless its reason begins with "n/a" — not applicable here, as a
/// feature of a newer platform — or ZKL_TEST_ALLOW_SKIPS=1 asks for skips explicitly).
pub fn skip(reason: &str) {
    eprintln!("SKIPPED: {reason}");
    if let Some(file) = std::env::var_os("ZKL_TEST_SKIPS").filter(|f| !f.is_empty()) {
        use std::io::Write;
        let line = format!("{}\n", reason.replace('\n', " "));
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// True if tests use an external ensemble (`ZK_CONNECT` is set and non-empty), so they cannot
/// kill, pause or restart its servers.
pub fn external() -> bool {
    std::env::var("ZK_CONNECT").map(|s| !s.trim().is_empty()).unwrap_or(false)
}

/// A standalone server shared by all tests of one test binary (started once, lazily, on first
/// call), or the ensemble named by `ZK_CONNECT` if that is set. Returns the connect string.
///
/// The shared server lives in a static and is never dropped; the watchdog kills it when the test
/// process exits. Tests sharing it must use distinct znode paths.
pub fn shared_connect_string() -> String {
    if external() {
        return std::env::var("ZK_CONNECT").unwrap().trim().to_string();
    }
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(Cluster::standalone).connect_string()
}

/// One server of a [`Cluster`].
struct Server {
    /// 1-based id (`myid`).
    id: usize,
    dir: PathBuf,
    client_port: u16,
    child: Option<Child>,
    paused: bool,
}

impl Server {
    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Reaps the child if it has exited; true if it is (still) running.
    fn running(&mut self) -> bool {
        match &mut self.child {
            None => false,
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                _ => {
                    self.child = None;
                    self.paused = false;
                    false
                }
            },
        }
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: plain kill(2) on our own child, which has not been reaped yet (we hold the
            // `Child`), so the pid cannot have been recycled.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// SIGKILL and reap.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused = false;
    }

    /// SIGTERM (and SIGCONT, in case it is paused), wait up to `grace`, then SIGKILL; reaps it.
    fn terminate(&mut self, grace: Duration) {
        if self.child.is_none() {
            return;
        }
        self.signal(libc::SIGTERM);
        self.signal(libc::SIGCONT);
        let deadline = Instant::now() + grace;
        while self.running() {
            if Instant::now() >= deadline {
                self.kill();
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.paused = false;
    }
}

/// Builds a [`Cluster`]. Obtain one with [`Cluster::builder`].
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    sasl: Option<Sasl>,
    sasl_required: bool,
    tls: Option<ClientAuth>,
    tls_keystore: Option<String>,
    servers: usize,
    tick_ms: u32,
    jvm_flags: Vec<String>,
    extra_config: Vec<String>,
    seed: Option<(String, i32)>,
    version: ZkServer,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            sasl: None,
            sasl_required: false,
            tls: None,
            tls_keystore: None,
            servers: 1,
            tick_ms: DEFAULT_TICK_MS,
            jvm_flags: Vec::new(),
            extra_config: Vec::new(),
            seed: None,
            version: ZkServer::from_env(),
        }
    }
}

impl ClusterBuilder {
    /// Number of servers: 1 = standalone, more = an ensemble (use an odd number, e.g. 3).
    pub fn servers(mut self, n: usize) -> Self {
        assert!(n >= 1, "a cluster needs at least one server");
        self.servers = n;
        self
    }

    /// Serve TLS too, on a `secureClientPort` per server ([`Cluster::tls_connect_string`]),
    /// with the certificates of [`TlsCerts`] and x509 auth; `client_auth` says whether a client
    /// certificate is required. The plaintext port stays (four-letter words use it).
    pub fn tls(mut self, client_auth: ClientAuth) -> Self {
        self.tls = Some(client_auth);
        self
    }

    /// Authenticate SASL DIGEST-MD5 clients: `users` are the (name, password) pairs of the
    /// servers' JAAS `DigestLoginModule` (letters, digits, `_.@-`). ACL entries name them
    /// `sasl:<name>`.
    pub fn sasl_digest(mut self, users: &[(&str, &str)]) -> Self {
        self.sasl = Some(Sasl::Digest(users.iter().map(|(u, p)| format!("{u}:{p}")).collect::<Vec<_>>().join(",")));
        self
    }

    /// Authenticate Kerberos (SASL GSSAPI) clients of `kdc`'s realm: the servers are
    /// `zookeeper/localhost@ZKLOCK.TEST`, so clients connect to them as `localhost`. ACL entries
    /// name clients `sasl:<principal>` (`sasl:alice@ZKLOCK.TEST`).
    pub fn kerberos(mut self, kdc: &Kdc) -> Self {
        self.sasl = Some(Sasl::Kerberos(kdc.dir.clone()));
        self
    }

    /// With SASL, refuse clients that did not authenticate with it (`enforce.auth.enabled`,
    /// schemes `sasl`): their first request ends their session.
    pub fn sasl_required(mut self) -> Self {
        self.sasl_required = true;
        self
    }

    /// With [`ClusterBuilder::tls`], the servers' key and certificate: a file of [`TlsCerts`]
    /// (default `server.pem`; `server-expired.pem` is long expired).
    pub fn tls_keystore(mut self, file: impl Into<String>) -> Self {
        self.tls_keystore = Some(file.into());
        self
    }

    /// Which ZooKeeper runs (default [`ZkServer::from_env`]: 3.8 unless `ZK_SERVER_VERSION`
    /// says otherwise). [`ZkServer::V3_9`] fetches its jars on first use (see [`ZkServer`]).
    pub fn server_version(mut self, version: ZkServer) -> Self {
        self.version = version;
        self
    }

    /// `tickTime` in ms (default 200). initLimit/syncLimit are scaled to stay ~10s/5s;
    /// minSessionTimeout is 2 ticks.
    pub fn tick_ms(mut self, ms: u32) -> Self {
        assert!(ms > 0);
        self.tick_ms = ms;
        self
    }

    /// An extra JVM flag for the servers, e.g. `-Dzookeeper.commitLogCount=10`.
    pub fn jvm_flag(mut self, flag: impl Into<String>) -> Self {
        self.jvm_flags.push(flag.into());
        self
    }

    /// An extra `zoo.cfg` line (`key=value`); it comes last, so it overrides the defaults.
    pub fn extra_config(mut self, line: impl Into<String>) -> Self {
        self.extra_config.push(line.into());
        self
    }

    /// Before starting, seed every server's data dir with a snapshot (tools/seqsnap) that holds
    /// the persistent znode `path` (and its ancestors) whose persisted child counter is
    /// `cversion`, so that its next sequential children are numbered `cversion`, `cversion + 1`,
    /// ... (e.g. 2147483640 to reach the 32-bit limit after 8 children). Adds
    /// [`DIGEST_DISABLED_FLAG`]. The snapshot is written with the chosen server version's own
    /// classes.
    pub fn seed_lock_parent_near_sequence_limit(mut self, path: &str, cversion: i32) -> Self {
        assert!(path.starts_with('/') && !path.ends_with('/'), "bad znode path {path:?}");
        self.seed = Some((path.to_string(), cversion));
        if !self.jvm_flags.iter().any(|f| f == DIGEST_DISABLED_FLAG) {
            self.jvm_flags.push(DIGEST_DISABLED_FLAG.to_string());
        }
        self
    }

    /// Starts the servers and waits until they serve (an ensemble: until it has a leader and
    /// every server is leader or follower). Panics (with the server logs) on failure.
    pub fn start(self) -> Cluster {
        Cluster::start(self)
    }
}

/// 1 or N ZooKeeper servers started by this process. `Drop` kills them all and removes their
/// directories. All methods take `&self`, so a `Cluster` can be shared between threads/tasks
/// (e.g. in an `Arc`). Server indexes are 0-based.
pub struct Cluster {
    servers: Vec<Mutex<Server>>,
    /// The secure client port of each server, if they serve TLS.
    secure_ports: Vec<u16>,
    base: PathBuf,
    ensemble: bool,
    jvm_flags: String,
    version: ZkServer,
    started: Duration,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("connect", &self.connect_string()).field("base", &self.base).finish()
    }
}

impl Cluster {
    /// A private standalone server.
    pub fn standalone() -> Cluster {
        Cluster::builder().start()
    }

    /// A private ensemble of `n` servers (3 for fault tests).
    pub fn ensemble(n: usize) -> Cluster {
        Cluster::builder().servers(n).start()
    }

    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...` (all servers, whatever their state).
    pub fn connect_string(&self) -> String {
        (0..self.len()).map(|i| self.server_address(i)).collect::<Vec<_>>().join(",")
    }

    /// `127.0.0.1:port` of server `i`.
    pub fn server_address(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.client_port(i))
    }

    /// Client port of server `i`.
    pub fn client_port(&self, i: usize) -> u16 {
        self.lock(i).client_port
    }

    /// `localhost:s1,localhost:s2,...`: every server's TLS port, by the host name its
    /// certificate names. Panics unless built with [`ClusterBuilder::tls`].
    pub fn tls_connect_string(&self) -> String {
        assert!(!self.secure_ports.is_empty(), "zklock-testkit: this cluster was not built with tls()");
        self.secure_ports.iter().map(|port| format!("localhost:{port}")).collect::<Vec<_>>().join(",")
    }

    /// The TLS port of server `i`. Panics unless built with [`ClusterBuilder::tls`].
    pub fn secure_port(&self, i: usize) -> u16 {
        self.secure_ports[i]
    }

    /// The certificates the TLS servers use (and clients may present).
    pub fn tls_certs(&self) -> &'static TlsCerts {
        TlsCerts::get()
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// True for clusters of more than one server.
    pub fn is_ensemble(&self) -> bool {
        self.ensemble
    }

    /// Which ZooKeeper its servers run.
    pub fn server_version(&self) -> ZkServer {
        self.version
    }

    /// How long [`ClusterBuilder::start`] took until everything served.
    pub fn startup_time(&self) -> Duration {
        self.started
    }

    /// Directory of server `i` (`zoo.cfg`, `server.log`, `data/`).
    pub fn server_dir(&self, i: usize) -> PathBuf {
        self.lock(i).dir.clone()
    }

    /// Contents of server `i`'s log (WARN and above unless `ZK_LOG_LEVEL` says otherwise).
    pub fn server_log(&self, i: usize) -> String {
        fs::read_to_string(self.lock(i).log_path()).unwrap_or_default()
    }

    /// The JVM's pid, if server `i` is running (paused counts as running).
    pub fn pid(&self, i: usize) -> Option<u32> {
        let mut s = self.lock(i);
        if s.running() {
            s.pid().map(|p| p as u32)
        } else {
            None
        }
    }

    /// True if server `i`'s process exists (it may be paused).
    pub fn is_running(&self, i: usize) -> bool {
        self.lock(i).running()
    }

    /// SIGKILL server `i` and wait for it to exit. No-op if it is not running.
    pub fn kill(&self, i: usize) {
        self.lock(i).kill();
    }

    /// SIGTERM server `i` and wait for it to exit (SIGKILL after 10s).
    pub fn stop(&self, i: usize) {
        self.lock(i).terminate(Duration::from_secs(10));
    }

    /// Start server `i` again with the same directory, ports and config (killing it first if it
    /// is still running) and wait until it serves: `srvr` answers and, in an ensemble, its mode
    /// is leader or follower (so a quorum must be reachable: to revive an ensemble that lost it,
    /// use [`Cluster::restart_without_waiting`] on each server, then [`Cluster::wait_serving`]).
    /// Panics with its log if it does not serve within 60s.
    pub fn restart(&self, i: usize) {
        let deadline = Instant::now() + START_TIMEOUT;
        for attempt in 1..=START_ATTEMPTS * 3 {
            {
                let mut s = self.lock(i);
                s.kill();
                s.child = Some(spawn_server(&s.dir, &self.jvm_flags, self.version));
            }
            match self.wait_one(i, deadline) {
                Ok(()) => return,
                Err(e) if e.port_clash && attempt < START_ATTEMPTS * 3 => {
                    // someone grabbed our port while we were down; it is usually transient
                    thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("zklock-testkit: restart of server {i} failed: {}\n{}", e.msg, self.logs_of(&[i])),
            }
        }
    }

    /// Start server `i` again (killing it first if it is still running) without waiting for it
    /// to serve, e.g. to bring back several servers of an ensemble that lost its quorum; follow
    /// with [`Cluster::wait_serving`].
    pub fn restart_without_waiting(&self, i: usize) {
        let mut s = self.lock(i);
        s.kill();
        s.child = Some(spawn_server(&s.dir, &self.jvm_flags, self.version));
    }

    /// SIGKILL every server and wait for them to exit (what `Drop` does, minus removing the
    /// directories).
    pub fn kill_all(&self) {
        for i in 0..self.len() {
            self.lock(i).kill();
        }
    }

    /// SIGSTOP server `i` and wait until all its threads are stopped (the kernel stops a
    /// multi-threaded process asynchronously). It keeps its sockets, so clients see a hung server.
    pub fn pause(&self, i: usize) {
        let mut s = self.lock(i);
        if s.running() {
            s.signal(libc::SIGSTOP);
            s.paused = true;
            let pid = s.pid().unwrap();
            wait_threads(pid, true);
        }
    }

    /// SIGCONT server `i` (and wait until it runs again).
    pub fn resume(&self, i: usize) {
        let mut s = self.lock(i);
        if s.running() {
            s.signal(libc::SIGCONT);
            s.paused = false;
            let pid = s.pid().unwrap();
            wait_threads(pid, false);
        }
    }

    /// True if server `i` is paused.
    pub fn is_paused(&self, i: usize) -> bool {
        let mut s = self.lock(i);
        s.running() && s.paused
    }

    /// Index of the server whose `srvr` says `Mode: leader` right now (standalone: `Some(0)` if
    /// it serves). Paused and stopped servers are not asked.
    pub fn leader(&self) -> Option<usize> {
        let want = if self.ensemble { "leader" } else { "standalone" };
        (0..self.len()).find(|&i| self.responsive(i) && self.mode(i).as_deref() == Some(want))
    }

    /// Waits until some server is leader; returns its index. Panics after `timeout`.
    pub fn wait_for_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.leader() {
                return l;
            }
            if Instant::now() >= deadline {
                panic!("zklock-testkit: no leader after {timeout:?}\n{}", self.all_logs());
            }
            thread::sleep(POLL);
        }
    }

    /// `Mode:` reported by server `i`'s `srvr` (`leader`, `follower`, `standalone`), or `None` if
    /// it does not answer (stopped, paused, not serving yet, electing).
    pub fn mode(&self, i: usize) -> Option<String> {
        let out = self.four_letter(i, "srvr").ok()?;
        out.lines().find_map(|l| l.strip_prefix("Mode: ")).map(|m| m.trim().to_string())
    }

    /// Sends a four-letter word (`srvr`, `stat`, `mntr`, `cons`, `dump`, `wchp`, `conf`, ...) to
    /// server `i` and returns the reply. Times out after ~2s (a paused server never answers).
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        four_letter_port(self.client_port(i), cmd, Duration::from_secs(2))
    }

    /// Waits until every running, non-paused server answers `srvr` with a mode and, for an
    /// ensemble, there is a leader and the others are followers. Panics after `timeout`.
    pub fn wait_serving(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let live: Vec<usize> = (0..self.len()).filter(|&i| self.responsive(i)).collect();
        if let Err((i, e)) = self.wait_all(&live, deadline) {
            panic!("zklock-testkit: server {i} not serving: {}\n{}", e.msg, self.all_logs());
        }
        if self.ensemble {
            self.wait_for_leader(deadline.saturating_duration_since(Instant::now()));
        }
    }

    // ----------------------------------------------------------------------------- internals

    fn lock(&self, i: usize) -> MutexGuard<'_, Server> {
        assert!(i < self.servers.len(), "server index {i} out of range (cluster of {})", self.servers.len());
        self.servers[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn responsive(&self, i: usize) -> bool {
        let mut s = self.lock(i);
        s.running() && !s.paused
    }

    fn start(b: ClusterBuilder) -> Cluster {
        let t0 = Instant::now();
        init_process(b.version);
        let n = b.servers;
        let ensemble = n > 1;
        let base = new_base_dir();
        let mut jvm_flags = b.jvm_flags.join(" ");
        if let Ok(extra) = std::env::var("ZK_TESTKIT_JVM_FLAGS") {
            jvm_flags = format!("{jvm_flags} {extra}");
        }
        let mut last_err = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let plain = if ensemble { 3 * n } else { n };
            let ports = pick_ports(plain + if b.tls.is_some() { n } else { 0 });
            let spec = if ensemble {
                (0..n)
                    .map(|i| format!("{}:127.0.0.1:{}:{}", i + 1, ports[n + 2 * i], ports[n + 2 * i + 1]))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                String::new()
            };
            let mut servers = Vec::with_capacity(n);
            for (i, &port) in ports.iter().enumerate().take(n) {
                let dir = base.join(format!("server{}", i + 1));
                let _ = fs::remove_dir_all(&dir);
                fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
                let mut cmd = zk_command();
                cmd.arg("config").arg(&dir).arg((i + 1).to_string()).arg(port.to_string());
                if ensemble {
                    cmd.arg(&spec);
                }
                cmd.env("ZK_TICK_MS", b.tick_ms.to_string()).env("ZK_EXTRA_CFG", b.extra_config.join("\n"));
                match &b.sasl {
                    Some(Sasl::Digest(users)) => cmd.env("ZK_SASL_DIGEST_USERS", users),
                    Some(Sasl::Kerberos(dir)) => cmd.env("ZK_KRB5_DIR", dir),
                    None => &mut cmd,
                };
                if b.sasl_required {
                    cmd.env("ZK_SASL_REQUIRED", "1");
                }
                if let Some(client_auth) = b.tls {
                    cmd.env("ZK_TLS_DIR", &TlsCerts::get().dir)
                        .env("ZK_SECURE_CLIENT_PORT", ports[plain + i].to_string())
                        .env("ZK_TLS_CLIENT_AUTH", client_auth.as_str())
                        .env("ZK_TLS_KEYSTORE", b.tls_keystore.as_deref().unwrap_or("server.pem"));
                }
                run_checked(cmd, "scripts/zk config");
                servers.push(Server { id: i + 1, dir, client_port: port, child: None, paused: false });
            }
            if let Some((path, cversion)) = &b.seed {
                seed(&servers, path, *cversion, b.version);
            }
            for s in &mut servers {
                s.child = Some(spawn_server(&s.dir, &jvm_flags, b.version));
            }
            let cluster = Cluster {
                servers: servers.into_iter().map(Mutex::new).collect(),
                secure_ports: if b.tls.is_some() { ports[plain..].to_vec() } else { Vec::new() },
                base: base.clone(),
                ensemble,
                jvm_flags: jvm_flags.clone(),
                version: b.version,
                started: Duration::ZERO,
            };
            let deadline = Instant::now() + START_TIMEOUT;
            match cluster.wait_all(&(0..n).collect::<Vec<_>>(), deadline) {
                Ok(()) => {
                    if ensemble {
                        cluster.wait_for_leader(deadline.saturating_duration_since(Instant::now()));
                    }
                    let mut cluster = cluster;
                    cluster.started = t0.elapsed();
                    return cluster;
                }
                Err((i, e)) => {
                    last_err = format!("server {i} (attempt {attempt}): {}\n{}", e.msg, cluster.all_logs());
                    let clash = e.port_clash || cluster.any_log_contains("Address already in use");
                    drop(cluster); // kills the servers, removes `base` (recreated by the next attempt)
                    if !clash {
                        break;
                    }
                }
            }
        }
        if std::env::var_os("ZK_TESTKIT_KEEP").is_none() {
            let _ = fs::remove_dir_all(&base);
        }
        panic!("zklock-testkit: could not start ZooKeeper: {last_err}");
    }

    /// Waits until server `i` answers `srvr` with a usable mode.
    fn wait_one(&self, i: usize, deadline: Instant) -> Result<(), StartError> {
        self.wait_all(&[i], deadline).map_err(|(_, e)| e)
    }

    /// Waits until each of the servers `idx` answers `srvr` with a usable mode (leader or
    /// follower in an ensemble, standalone otherwise). Fails as soon as one of them exits.
    fn wait_all(&self, idx: &[usize], deadline: Instant) -> Result<(), (usize, StartError)> {
        let mut pending: Vec<usize> = idx.to_vec();
        let mut last = vec![String::new(); self.len()];
        loop {
            for &i in &pending {
                let mut s = self.lock(i);
                if !s.running() {
                    let log = fs::read_to_string(s.log_path()).unwrap_or_default();
                    let clash = log.contains("Address already in use") || log.contains("BindException");
                    let msg = format!("server {} exited during startup", s.id);
                    return Err((i, StartError { msg, port_clash: clash }));
                }
            }
            let mut still = Vec::new();
            for &i in &pending {
                let ok = match four_letter_port(self.client_port(i), "srvr", Duration::from_secs(1)) {
                    Ok(out) => {
                        let mode = out.lines().find_map(|l| l.strip_prefix("Mode: ")).map(str::trim);
                        let ok = match mode {
                            Some("leader") | Some("follower") => self.ensemble,
                            Some("standalone") => !self.ensemble,
                            _ => false,
                        };
                        last[i] = out;
                        ok
                    }
                    Err(_) => false,
                };
                if !ok {
                    still.push(i);
                }
            }
            pending = still;
            if pending.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let i = pending[0];
                let msg = format!(
                    "server {} not serving on port {} in time; last srvr reply: {:?}",
                    i,
                    self.client_port(i),
                    last[i]
                );
                return Err((i, StartError { msg, port_clash: false }));
            }
            thread::sleep(POLL);
        }
    }

    fn any_log_contains(&self, needle: &str) -> bool {
        (0..self.len()).any(|i| self.server_log(i).contains(needle))
    }

    fn logs_of(&self, idx: &[usize]) -> String {
        let mut out = String::new();
        for &i in idx {
            let s = self.lock(i);
            let log = fs::read_to_string(s.log_path()).unwrap_or_else(|e| format!("(no log: {e})"));
            let tail: Vec<&str> = log.lines().rev().take(150).collect();
            out.push_str(&format!(
                "----- server {} ({}) log, last {} lines -----\n",
                i,
                s.log_path().display(),
                tail.len()
            ));
            for l in tail.iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    fn all_logs(&self) -> String {
        self.logs_of(&(0..self.len()).collect::<Vec<_>>())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
        if std::env::var_os("ZK_TESTKIT_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

struct StartError {
    msg: String,
    port_clash: bool,
}

/// An address that never answers a connection: a listener on it whose accept queue is full
/// (a backlog of 0, filled by connections never accepted), so the kernel drops new SYNs and a
/// connect neither succeeds nor fails (for minutes of SYN retries), as for a host that is down.
/// On Linux all of 127.0.0.0/8 is loopback: `127.0.0.2` beside a server on `127.0.0.1`, with the
/// same port, is the first address of a name that resolves to both (issue 44).
pub struct UnansweredAddress {
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl UnansweredAddress {
    pub fn start(address: SocketAddr) -> io::Result<UnansweredAddress> {
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind(address)?;
        // SAFETY: listen(2) again on our own listening socket, to change its backlog.
        if unsafe { libc::listen(listener.as_raw_fd(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut queued = Vec::new();
        while let Ok(stream) = TcpStream::connect_timeout(&address, Duration::from_millis(300)) {
            queued.push(stream);
            if queued.len() >= 16 {
                return Err(io::Error::other(format!("the accept queue of {address} never fills")));
            }
        }
        Ok(UnansweredAddress { _listener: listener, _queued: queued })
    }
}

/// Sends a four-letter word to `127.0.0.1:port` and returns the reply. The read stops at EOF,
/// after `timeout` without data, or at ZooKeeper 3.8's "not currently serving" reply (after which
/// that version does not always close the socket).
pub fn four_letter_port(port: u16, cmd: &str, timeout: Duration) -> io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(cmd.as_bytes())?;
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                out.extend_from_slice(&buf[..k]);
                if out.windows(21).any(|w| w == b"not currently serving") {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
                if out.is_empty() {
                    return Err(e);
                }
                break;
            }
            Err(e) => {
                if out.is_empty() {
                    return Err(e);
                }
                break;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

// --------------------------------------------------------------------------- process plumbing

/// Polls `/proc/<pid>/task/*/stat` (up to 5s) until every thread is stopped (`stopped`) or
/// until none is.
fn wait_threads(pid: i32, stopped: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut all = true;
        let mut any = false;
        if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let Ok(stat) = fs::read_to_string(t.path().join("stat")) else { continue };
                // state follows the ")" that closes the command name
                let st = stat.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next());
                let is_stopped = matches!(st, Some('T') | Some('t'));
                all &= is_stopped;
                any |= is_stopped;
            }
        } else {
            return; // gone
        }
        if (stopped && all) || (!stopped && !any) || Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Once per process and server version: `scripts/zk prepare` (install if needed, 3.9: fetch its
/// jars; build the JVM class-data-sharing archive once per machine), sweep of stale directories.
fn init_process(version: ZkServer) {
    static INIT: [Once; 2] = [Once::new(), Once::new()];
    static SWEEP: Once = Once::new();
    INIT[version as usize].call_once(|| {
        let script = zk_script();
        assert!(script.exists(), "zklock-testkit: {} not found", script.display());
        let mut cmd = zk_command();
        cmd.arg("prepare").env("ZK_SERVER_VERSION", version.as_str());
        run_checked(cmd, &format!("ZK_SERVER_VERSION={version} scripts/zk prepare"));
    });
    SWEEP.call_once(sweep_stale_dirs);
}

const DIR_PREFIX: &str = "zklock-testkit-";

/// Whether a TLS server requires a client certificate (`ssl.clientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client without a certificate is refused in the handshake.
    Need,
    /// A client certificate is asked for, and optional.
    Want,
    /// None is asked for.
    None,
}

impl ClientAuth {
    fn as_str(self) -> &'static str {
        match self {
            ClientAuth::Need => "need",
            ClientAuth::Want => "want",
            ClientAuth::None => "none",
        }
    }
}

/// Test certificates, made once per test process by `scripts/zk tls-certs` (EC P-256, valid for
/// two days): a CA, the servers' certificate (for `localhost` only, not `127.0.0.1`), client
/// certificates for `alice` and `bob` (subjects `CN=alice,O=zklock` and `CN=bob,O=zklock`;
/// alice's key also encrypted), `carol`'s X.509 v1 client certificate (no extensions, as
/// `openssl x509 -req` makes by default), another CA that signed none of them, and a server certificate that expired in 2020.
#[derive(Debug)]
pub struct TlsCerts {
    /// Where the PEM files are.
    pub dir: PathBuf,
}

impl TlsCerts {
    /// This process's certificates (made on first call).
    pub fn get() -> &'static TlsCerts {
        static CERTS: OnceLock<TlsCerts> = OnceLock::new();
        CERTS.get_or_init(|| {
            let dir = new_base_dir().join("tls");
            let mut cmd = zk_command();
            cmd.arg("tls-certs").arg(&dir);
            run_checked(cmd, "scripts/zk tls-certs");
            TlsCerts { dir }
        })
    }

    fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("zklock-testkit: read {}: {e}", path.display()))
    }

    /// The CA bundle (PEM) that signed the servers' and the clients' certificates.
    pub fn ca_pem(&self) -> String {
        self.read("ca.pem")
    }

    /// A CA (PEM) that signed none of them.
    pub fn other_ca_pem(&self) -> String {
        self.read("other-ca.pem")
    }

    /// The certificate and private key (PEM) of client `name` (`alice`, `bob` or `carol`, whose
    /// certificate is X.509 v1).
    pub fn client(&self, name: &str) -> (String, String) {
        (self.read(&format!("{name}.pem")), self.read(&format!("{name}.key")))
    }

    /// alice's private key encrypted (PKCS#8 PEM), and its password.
    pub fn alice_encrypted_key(&self) -> (String, String) {
        (self.read("alice-encrypted.key"), self.read("alice-encrypted.password").trim_end().to_owned())
    }

    /// The path of one of the files (`ca.pem`, `alice.pem`, `alice.key`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The x509 auth identity ZooKeeper gives client `name`: its certificate's subject.
    pub fn x509_id(&self, name: &str) -> String {
        format!("CN={name},O=zklock")
    }
}

/// The SASL mechanism of a [`ClusterBuilder`]'s servers.
#[derive(Clone, Debug)]
enum Sasl {
    /// DIGEST-MD5 users, as `ZK_SASL_DIGEST_USERS` takes them.
    Digest(String),
    /// Kerberos, with the realm in this directory.
    Kerberos(PathBuf),
}

/// A Kerberos realm, [`Kdc::REALM`], served by MIT's KDC (`krb5kdc`, Debian's `krb5-kdc`,
/// installed if missing) on a free loopback port, made by `scripts/zk kdc` in a directory of
/// its own: the servers' principal `zookeeper/localhost`, clients `alice` and `bob` with their
/// keytabs, and `gone.keytab`, whose principal the KDC no longer knows. `Drop` stops the KDC
/// and removes the directory; the KDC dies with the test process, as servers do.
///
/// Clients find it through [`Kdc::krb5_conf`]: set `KRB5_CONFIG` to it in the test process
/// before any Kerberos call.
#[derive(Debug)]
pub struct Kdc {
    /// The realm's directory: krb5.conf, kdc.log, the keytabs.
    pub dir: PathBuf,
    child: Mutex<Child>,
}

impl Kdc {
    /// The realm's name.
    pub const REALM: &'static str = "ZKLOCK.TEST";

    /// Makes a realm and starts its KDC; returns once it accepts connections.
    pub fn start() -> Kdc {
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = new_base_dir().join("kdc");
            let mut cmd = zk_command();
            cmd.arg("kdc").arg(&dir);
            run_checked(cmd, "scripts/zk kdc");
            let port: u16 =
                fs::read_to_string(dir.join("port")).ok().and_then(|p| p.trim().parse().ok()).expect("kdc port");
            let (read_end, _write_end) = lifeline();
            let mut cmd = zk_command();
            cmd.arg("exec-kdc")
                .arg(&dir)
                .env("ZK_WATCH_STDIN", "1")
                .env_remove("ZK_PARENT_PID")
                .stdin(Stdio::from(read_end.try_clone().expect("dup lifeline pipe")))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if std::env::var_os("ZK_TESTKIT_KEEP").is_none() {
                cmd.env("ZK_CLEANUP_DIR", "1");
            }
            let child = cmd.spawn().unwrap_or_else(|e| panic!("zklock-testkit: spawn scripts/zk exec-kdc: {e}"));
            let kdc = Kdc { dir, child: Mutex::new(child) };
            let deadline = Instant::now() + START_TIMEOUT;
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return kdc;
                }
                if !kdc.running() {
                    break;
                }
                thread::sleep(POLL);
            }
            last = fs::read_to_string(kdc.dir.join("kdc.log")).unwrap_or_default();
            if !last.contains("in use") {
                break;
            }
        }
        panic!("zklock-testkit: could not start the KDC; its log:\n{last}");
    }

    fn running(&self) -> bool {
        matches!(self.child.lock().unwrap_or_else(|e| e.into_inner()).try_wait(), Ok(None))
    }

    /// The Kerberos configuration for this realm's clients (`KRB5_CONFIG`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// The keytab of client `name` (`alice`, `bob`; `gone`: a principal the KDC does not know).
    pub fn keytab(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.keytab"))
    }

    /// The principal of client `name`: `name@ZKLOCK.TEST`.
    pub fn principal(name: &str) -> String {
        format!("{name}@{}", Kdc::REALM)
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        // exec-kdc execs the KDC, so the child is the KDC.
        let _ = child.kill();
        let _ = child.wait();
        if std::env::var_os("ZK_TESTKIT_KEEP").is_none() {
            let _ = fs::remove_dir_all(self.dir.parent().unwrap_or(&self.dir));
        }
    }
}

fn new_base_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("{DIR_PREFIX}{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {}: {e}", base.display()));
    base
}

/// Removes `zklock-testkit-<pid>-<n>` directories of processes that no longer exist.
fn sweep_stale_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|s| s.strip_prefix(DIR_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// The read end of the lifeline pipe, given as stdin to every server. The write end is held
/// (close-on-exec) by this process only and closes when it dies, which wakes the watchdogs.
fn lifeline() -> &'static (OwnedFd, OwnedFd) {
    static PIPE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();
    PIPE.get_or_init(|| {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills two fresh fds on success; we take ownership of both.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    })
}

fn spawn_server(dir: &Path, jvm_flags: &str, version: ZkServer) -> Child {
    let (read_end, _write_end) = lifeline();
    let stdin = read_end.try_clone().expect("dup lifeline pipe");
    let log = OpenOptions::new().create(true).append(true).open(dir.join("server.log")).expect("open server.log");
    let log2 = log.try_clone().expect("dup log");
    let mut cmd = zk_command();
    cmd.arg("exec-server")
        .arg(dir)
        .env("ZK_WATCH_STDIN", "1")
        .env("ZK_FAST_JIT", "1")
        .env_remove("ZK_PARENT_PID")
        .env("ZK_JVM_FLAGS", jvm_flags)
        .env("ZK_SERVER_VERSION", version.as_str())
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2));
    if std::env::var_os("ZK_TESTKIT_KEEP").is_none() {
        cmd.env("ZK_CLEANUP_DIR", "1");
    } else {
        cmd.env_remove("ZK_CLEANUP_DIR");
    }
    cmd.spawn().unwrap_or_else(|e| panic!("zklock-testkit: spawn {} exec-server: {e}", zk_script().display()))
}

fn run_checked(mut cmd: Command, what: &str) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("zklock-testkit: {what}: {e}"));
    if !out.status.success() {
        panic!(
            "zklock-testkit: {what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Seeds server 0's data dir with tools/seqsnap and copies the snapshot to the others
/// (an ensemble starts from identical snapshots).
fn seed(servers: &[Server], path: &str, cversion: i32, version: ZkServer) {
    let first = servers[0].dir.join("data");
    let mut cmd = zk_command();
    cmd.arg("seed-seq").arg(&first).arg(path).arg(cversion.to_string()).env("ZK_SERVER_VERSION", version.as_str());
    run_checked(cmd, "scripts/zk seed-seq");
    let snap_dir = first.join("version-2");
    for s in &servers[1..] {
        let dst = s.dir.join("data/version-2");
        fs::create_dir_all(&dst).expect("create version-2");
        for e in fs::read_dir(&snap_dir).expect("read version-2").flatten() {
            fs::copy(e.path(), dst.join(e.file_name())).expect("copy snapshot");
        }
    }
}

// --------------------------------------------------------------------------------------- ports

fn random_u64() -> u64 {
    static CTR: AtomicUsize = AtomicUsize::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_usize(CTR.fetch_add(1, Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u32(std::process::id());
    h.finish()
}

/// `n` distinct free loopback ports. They are chosen below the kernel's ephemeral range when
/// possible, so outgoing connections (clients, peers) never take them while a server is down
/// between `kill` and `restart`; otherwise the kernel picks (bind to port 0).
fn pick_ports(n: usize) -> Vec<u16> {
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<u32>().ok()))
        .unwrap_or(32768);
    let mut held: Vec<TcpListener> = Vec::with_capacity(n);
    const FLOOR: u32 = 12000;
    if low > FLOOR + 2000 {
        let span = low - FLOOR;
        let mut tries = 0;
        while held.len() < n && tries < 1000 {
            tries += 1;
            let port = (FLOOR + (random_u64() % span as u64) as u32) as u16;
            if held.iter().any(|l| l.local_addr().ok().map(|a| a.port()) == Some(port)) {
                continue;
            }
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                held.push(l);
            }
        }
    }
    while held.len() < n {
        held.push(TcpListener::bind(("127.0.0.1", 0)).expect("bind 127.0.0.1:0"));
    }
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Cluster>();
}
