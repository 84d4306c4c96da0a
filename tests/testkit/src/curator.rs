//! An Apache Curator lock in a child JVM, driven from a test, so that Curator and zklock can
//! contend for the same lock (the interop tests): an `InterProcessMutex`
//! ([`CuratorContender::spawn`]), or an `InterProcessReadWriteLock` whose read or write side
//! `acquire`/`release` take ([`CuratorContender::spawn_reader`], [`CuratorContender::spawn_writer`]);
//! both its sides are there ([`CuratorContender::acquire_side`], [`CuratorContender::release_side`]),
//! and a write holder can downgrade ([`CuratorContender::downgrade`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock_testkit::{shared_connect_string, CuratorContender};
//!
//! let connect = shared_connect_string();
//! let mut a = CuratorContender::spawn(&connect, "/interop/lock1", "a");
//! let mut b = CuratorContender::spawn(&connect, "/interop/lock1", "b");
//! let t_a = a.acquire(Duration::from_secs(30));
//! b.acquire_async(); // b queues behind a
//! assert_eq!(b.poll_acquired(Duration::from_millis(300)), None);
//! let released = a.release();
//! let t_b = b.wait_acquired(Duration::from_secs(30));
//! assert!(released <= t_b && t_a < released);
//! assert_eq!(b.nodes().len(), 1);
//! b.release();
//! ```
//!
//! The child runs `tools/curator-contender/CuratorContender.java` (see its header for the line
//! protocol) against Debian's `libcurator-recipes-java` (Curator 5.4) and ZooKeeper 3.8 jars, or,
//! with [`CuratorVersion::V5_7`], against the field version: Curator 5.7.1 with ZooKeeper 3.9.3's
//! client and their dependencies, all from Debian 13 (trixie), which `scripts/field curator 5.7`
//! fetches once per machine into the tools cache (nothing installed):
//!
//! ```no_run
//! use zklock_testkit::{shared_connect_string, CuratorContender, CuratorLock, CuratorVersion};
//!
//! let connect = shared_connect_string();
//! let mut c = CuratorContender::spawn_version(&connect, "/interop/lock2", "c", CuratorVersion::V5_7);
//! let mut w = CuratorContender::builder(&connect, "/interop/rw", "w")
//!     .version(CuratorVersion::V5_7)
//!     .lock(CuratorLock::Write)
//!     .spawn();
//! # let _ = (&mut c, &mut w);
//! ```
//!
//! The first use on a machine installs the packages if they are missing (`apt-get`, as root or
//! via sudo; for 5.7 only a JDK, then `scripts/field`) and compiles the program into a cache
//! (`$ZK_TOOLS_CACHE`, default `$TMPDIR/zklock-tools-<uid>`, shared with `scripts/zk`), keyed by
//! the source, `javac`, the Curator version and the jars of its classpath, published atomically
//! so concurrent test processes are safe. A contender is ready (JVM started, session
//! established) ~0.7-1.5 s after `spawn`.
//!
//! # Timestamps
//! `acquire`/`release` return the child's wall clock (`Instant.now()`, epoch microseconds) taken
//! right after Curator's `acquire()` returned / right **before** `release()` was called: they
//! bracket the critical section. (`release` itself returns only after Curator's `release()`
//! returned, i.e. once the server deleted the node, by which time the next contender may
//! already hold the lock.) All JVMs and the test run on one machine, so timestamps of different
//! contenders are comparable (see [`epoch_micros`] for the test's own clock): for a lock handed
//! from A to B, `A.release() <= B's acquire`, and the intervals of different contenders never
//! overlap.
//!
//! # No contender outlives the test process
//! The child's stdin is a pipe whose only write end this process holds (close-on-exec). The
//! program exits when it reads EOF there, i.e. when the [`CuratorContender`] is dropped or the
//! test process dies in any way (panic, abort, SIGKILL): it closes its ZooKeeper session (so its
//! lock nodes vanish at once) and halts within 5 s at most. `Drop` closes stdin, waits up to
//! 6 s for that, then SIGKILLs the JVM. [`CuratorContender::kill`] SIGKILLs it at once, like a
//! crash: its session, and so its lock node, stays until the server expires it.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::repo_root;

/// Jars of Curator 5.4 and ZooKeeper 3.8 in Debian (`/usr/share/java`). slf4j-nop silences the
/// logging of both.
pub const CURATOR_JARS: &[&str] = &[
    "curator-recipes",
    "curator-framework",
    "curator-client",
    "zookeeper",
    "zookeeper-jute",
    "guava",
    "slf4j-api",
    "slf4j-nop",
];
const JAVA_DIR: &str = "/usr/share/java";
const MAIN_CLASS: &str = "CuratorContender";
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on `release`/`nodes` replies (Curator retries through connection loss meanwhile).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
const STDERR_KEEP: usize = 64 * 1024;
const JAR_NAME: &str = "curator-contender.jar";
/// JVM flags of every contender (and of the archive check, which must match).
const JVM_FLAGS: &[&str] = &[
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+UseSerialGC",
    "-Xmx128m",
    "-Xshare:auto",
    // the JVM's own messages must not reach stdout (the protocol)
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "-Djava.net.preferIPv4Stack=true",
];

/// The test process's wall clock in epoch microseconds, comparable with the contenders'
/// timestamps.
pub fn epoch_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0)
}

/// Which Apache Curator a [`CuratorContender`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CuratorVersion {
    /// Debian 12's Curator 5.4.0 with ZooKeeper 3.8's client ([`CURATOR_JARS`] in
    /// `/usr/share/java`, installed with apt-get if missing): the default.
    #[default]
    V5_4,
    /// Curator 5.7.1, the field version, with ZooKeeper 3.9.3's client, guava 32 and the rest of
    /// their dependencies, all from Debian 13 (`scripts/field curator 5.7`, fetched on first use).
    V5_7,
}

impl CuratorVersion {
    /// `"5.4"` or `"5.7"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CuratorVersion::V5_4 => "5.4",
            CuratorVersion::V5_7 => "5.7",
        }
    }

    /// The exact upstream version (`"5.4.0"`, `"5.7.1"`), from `scripts/field version curator`.
    pub fn full_version(self) -> String {
        field(&["version", "curator", self.as_str()]).trim().to_string()
    }

    /// The jars a contender of this version runs with (besides its own), in classpath order.
    /// 5.7 fetches them first if needed.
    pub fn jars(self) -> Vec<PathBuf> {
        match self {
            CuratorVersion::V5_4 => CURATOR_JARS.iter().map(|j| Path::new(JAVA_DIR).join(format!("{j}.jar"))).collect(),
            CuratorVersion::V5_7 => field(&["curator", self.as_str()])
                .trim()
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect(),
        }
    }
}

impl std::fmt::Display for CuratorVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `bash scripts/field ARGS...`'s stdout; panics with its stderr on failure.
fn field(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/field"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("zklock-testkit: run scripts/field: {e}"));
    if !out.status.success() {
        panic!(
            "zklock-testkit: scripts/field {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Options of a [`CuratorContender`] to spawn: [`CuratorContender::builder`].
#[derive(Clone, Debug)]
pub struct CuratorContenderBuilder {
    connect: String,
    path: String,
    name: String,
    kind: CuratorLock,
    session_timeout: Option<Duration>,
    version: CuratorVersion,
}

impl CuratorContenderBuilder {
    /// Which Curator (default [`CuratorVersion::V5_4`]).
    pub fn version(mut self, version: CuratorVersion) -> Self {
        self.version = version;
        self
    }

    /// Which lock (default [`CuratorLock::Mutex`]).
    pub fn lock(mut self, kind: CuratorLock) -> Self {
        self.kind = kind;
        self
    }

    /// The session timeout (default 10 s or `$CURATOR_SESSION_TIMEOUT_MS`; see
    /// [`CuratorContender::spawn_with_session_timeout`]).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = Some(timeout);
        self
    }

    /// Starts it; returns once its session is established (see [`CuratorContender::spawn`]).
    pub fn spawn(self) -> CuratorContender {
        CuratorContender::start(&self.connect, &self.path, &self.name, self.kind, self.session_timeout, self.version)
    }
}

/// Which Curator lock a [`CuratorContender`] drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CuratorLock {
    /// `InterProcessMutex`.
    Mutex,
    /// `InterProcessReadWriteLock.readLock()`: shared with other readers. (As a contender's
    /// lock: an `InterProcessReadWriteLock` whose plain `acquire`/`release` take the read side.)
    Read,
    /// `InterProcessReadWriteLock.writeLock()`: exclusive. (As a contender's lock: the same, the
    /// plain `acquire`/`release` taking the write side.)
    Write,
    /// `InterProcessSemaphoreV2` with this many max leases: `acquire` takes one lease (several
    /// outstanding acquires take one each), `release` returns the oldest lease held, `nodes`
    /// lists the names of the lease nodes.
    Semaphore(u32),
}

impl CuratorLock {
    /// The contender program's argument for this lock.
    fn arg(self) -> String {
        match self {
            CuratorLock::Mutex => "mutex".to_owned(),
            CuratorLock::Read => "read".to_owned(),
            CuratorLock::Write => "write".to_owned(),
            CuratorLock::Semaphore(max_leases) => format!("semaphore:{max_leases}"),
        }
    }
}

/// One Curator client (its own JVM and ZooKeeper session) with one lock (see [`CuratorLock`]) on
/// one lock path. See the [module documentation](self).
///
/// Every method blocks the calling thread and panics (with the child's stderr) if the child
/// answers `ERROR`, exits, or does not answer in time, except the `try_`/`poll_` variants.
pub struct CuratorContender {
    name: String,
    path: String,
    kind: CuratorLock,
    version: CuratorVersion,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Lines read but not yet consumed by a waiter.
    pending: VecDeque<String>,
    stderr: Arc<Mutex<String>>,
    session_id: i64,
    started: Duration,
    outstanding_acquires: usize,
    /// (temporary archive, final archive) if this JVM dumps the class-data-sharing archive.
    dump: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for CuratorContender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorContender")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("version", &self.version)
            .field("pid", &self.child.id())
            .field("session_id", &format_args!("{:#x}", self.session_id))
            .finish()
    }
}

impl CuratorContender {
    /// Starts a contender for the lock at `path` (created by Curator if missing) on the ensemble
    /// `connect`, named `name` (no whitespace; it only labels its output), with a 10 s session
    /// timeout (or `$CURATOR_SESSION_TIMEOUT_MS`). Returns once its session is established.
    pub fn spawn(connect: &str, path: &str, name: &str) -> CuratorContender {
        Self::start(connect, path, name, CuratorLock::Mutex, None, CuratorVersion::V5_4)
    }

    /// [`CuratorContender::spawn`] with the given Curator version.
    pub fn spawn_version(connect: &str, path: &str, name: &str, version: CuratorVersion) -> CuratorContender {
        Self::start(connect, path, name, CuratorLock::Mutex, None, version)
    }

    /// Every option: `CuratorContender::builder(connect, path, name)`, then
    /// `.version(..)`, `.lock(..)`, `.session_timeout(..)`, and `.spawn()`. Defaults as
    /// [`CuratorContender::spawn`]: Curator 5.4, a mutex, a 10 s session timeout.
    pub fn builder(connect: &str, path: &str, name: &str) -> CuratorContenderBuilder {
        CuratorContenderBuilder {
            connect: connect.to_string(),
            path: path.to_string(),
            name: name.to_string(),
            kind: CuratorLock::Mutex,
            session_timeout: None,
            version: CuratorVersion::V5_4,
        }
    }

    /// Like [`CuratorContender::spawn`], with the read side of an `InterProcessReadWriteLock` on
    /// `path`: `acquire`/`release` are its `readLock()`'s, `nodes` lists the readers and writers.
    pub fn spawn_reader(connect: &str, path: &str, name: &str) -> CuratorContender {
        Self::start(connect, path, name, CuratorLock::Read, None, CuratorVersion::V5_4)
    }

    /// Like [`CuratorContender::spawn_reader`], with the write side (`writeLock()`).
    pub fn spawn_writer(connect: &str, path: &str, name: &str) -> CuratorContender {
        Self::start(connect, path, name, CuratorLock::Write, None, CuratorVersion::V5_4)
    }

    /// [`CuratorContender::spawn`] with the given kind of lock.
    pub fn spawn_lock(connect: &str, path: &str, name: &str, kind: CuratorLock) -> CuratorContender {
        Self::start(connect, path, name, kind, None, CuratorVersion::V5_4)
    }

    /// [`CuratorContender::spawn`] with the given session timeout (the server bounds it to
    /// [2, 20] ticks by default; the testkit's servers allow 2 ticks (400 ms) to 60 s).
    pub fn spawn_with_session_timeout(connect: &str, path: &str, name: &str, timeout: Duration) -> CuratorContender {
        Self::start(connect, path, name, CuratorLock::Mutex, Some(timeout), CuratorVersion::V5_4)
    }

    fn start(
        connect: &str,
        path: &str,
        name: &str,
        kind: CuratorLock,
        session_timeout: Option<Duration>,
        version: CuratorVersion,
    ) -> CuratorContender {
        assert!(!name.is_empty() && !name.contains(char::is_whitespace), "bad contender name {name:?}");
        assert!(path.starts_with('/') && !path.ends_with('/'), "bad lock path {path:?}");
        let t0 = Instant::now();
        let build = build(version);
        let (cds_flag, dump) = cds_for_spawn(build);
        let mut cmd = Command::new("java");
        cmd.args(JVM_FLAGS).args(cds_flag).args([
            "-cp",
            &build.classpath,
            MAIN_CLASS,
            connect,
            path,
            name,
            &kind.arg(),
        ]);
        if let Some(t) = session_timeout {
            cmd.env("CURATOR_SESSION_TIMEOUT_MS", t.as_millis().to_string());
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("zklock-testkit: spawn java {MAIN_CLASS}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut stderr_pipe = child.stderr.take().unwrap();

        let (tx, rx) = mpsc::channel();
        thread::Builder::new()
            .name(format!("curator-{name}-out"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn stdout reader");
        let stderr = Arc::new(Mutex::new(String::new()));
        let err2 = Arc::clone(&stderr);
        thread::Builder::new()
            .name(format!("curator-{name}-err"))
            .spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr_pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut s = err2.lock().unwrap_or_else(|e| e.into_inner());
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if s.len() > 2 * STDERR_KEEP {
                        let mut cut = s.len() - STDERR_KEEP;
                        while !s.is_char_boundary(cut) {
                            cut += 1;
                        }
                        s.replace_range(..cut, "[...]\n");
                    }
                }
            })
            .expect("spawn stderr reader");

        let mut c = CuratorContender {
            name: name.to_string(),
            path: path.to_string(),
            kind,
            version,
            child,
            stdin,
            lines: rx,
            pending: VecDeque::new(),
            stderr,
            session_id: 0,
            started: Duration::ZERO,
            outstanding_acquires: 0,
            dump,
        };
        let ready = match c.wait_line(READY_TIMEOUT, |l| l.starts_with("READY ") || l.starts_with("ERROR connect")) {
            Ok(l) => l,
            Err(e) => c.fail(&format!("not ready: {e}")),
        };
        if ready.starts_with("ERROR") {
            c.fail(&ready);
        }
        let hex = ready.split_whitespace().nth(2).unwrap_or("");
        c.session_id =
            u64::from_str_radix(hex, 16).unwrap_or_else(|_| c.fail(&format!("bad READY line {ready:?}"))) as i64;
        c.started = t0.elapsed();
        c
    }

    /// The name given to [`CuratorContender::spawn`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock path.
    pub fn lock_path(&self) -> &str {
        &self.path
    }

    /// Which Curator lock it drives.
    pub fn kind(&self) -> CuratorLock {
        self.kind
    }

    /// Which Curator it runs.
    pub fn version(&self) -> CuratorVersion {
        self.version
    }

    /// The Curator client's ZooKeeper session id.
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The JVM's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How long `spawn` took (JVM start + session).
    pub fn startup_time(&self) -> Duration {
        self.started
    }

    /// Sends `acquire` without waiting: Curator's `acquire()` runs (and blocks) in the child.
    /// Collect the result with [`CuratorContender::wait_acquired`] or
    /// [`CuratorContender::poll_acquired`]. Several outstanding acquires are reentrant acquires
    /// by the same thread, answered in order.
    pub fn acquire_async(&mut self) {
        self.send("acquire");
        self.outstanding_acquires += 1;
    }

    /// Waits for the oldest outstanding acquire; returns its epoch-µs timestamp. Panics after
    /// `timeout`, on `ERROR`, or if none is outstanding.
    pub fn wait_acquired(&mut self, timeout: Duration) -> u128 {
        match self.poll_acquired(timeout) {
            Some(t) => t,
            None => self.fail(&format!("acquire of {} not granted within {timeout:?}", self.path)),
        }
    }

    /// Like [`CuratorContender::wait_acquired`], but `None` if not granted within `timeout`
    /// (the acquire stays outstanding), e.g. to check that a contender is still queued.
    pub fn poll_acquired(&mut self, timeout: Duration) -> Option<u128> {
        assert!(self.outstanding_acquires > 0, "contender {}: no outstanding acquire", self.name);
        match self.wait_line(timeout, |l| l.starts_with("ACQUIRED ") || l.starts_with("ERROR acquire:")) {
            Ok(l) if l.starts_with("ACQUIRED ") => {
                self.outstanding_acquires -= 1;
                Some(self.timestamp(&l))
            }
            Ok(l) => {
                self.outstanding_acquires -= 1;
                self.fail(&l)
            }
            Err(WaitError::Timeout) => None,
            Err(e) => self.fail(&format!("waiting for ACQUIRED: {e}")),
        }
    }

    /// `acquire_async` + `wait_acquired`.
    pub fn acquire(&mut self, timeout: Duration) -> u128 {
        self.acquire_async();
        self.wait_acquired(timeout)
    }

    /// Like [`CuratorContender::acquire_async`], on the given side ([`CuratorLock::Read`] or
    /// [`CuratorLock::Write`]) of a read/write contender's `InterProcessReadWriteLock`, whichever
    /// side it was spawned with: e.g. the read side under a write hold (a downgrade step by step).
    pub fn acquire_side_async(&mut self, side: CuratorLock) {
        let cmd = self.side_command("acquire", side);
        self.send(&cmd);
        self.outstanding_acquires += 1;
    }

    /// `acquire_side_async` + `wait_acquired`.
    pub fn acquire_side(&mut self, side: CuratorLock, timeout: Duration) -> u128 {
        self.acquire_side_async(side);
        self.wait_acquired(timeout)
    }

    /// Like [`CuratorContender::release`], on the given side of a read/write contender's lock.
    pub fn release_side(&mut self, side: CuratorLock) -> u128 {
        match self.try_release_side(side) {
            Ok(t) => t,
            Err(e) => self.fail(&e),
        }
    }

    /// Like [`CuratorContender::try_release`], on the given side of a read/write contender's lock.
    pub fn try_release_side(&mut self, side: CuratorLock) -> Result<u128, String> {
        let cmd = self.side_command("release", side);
        self.release_command(&cmd)
    }

    /// Curator's downgrade, on a read/write contender holding the write side: `readLock().acquire()`
    /// (at once, under the write hold), then `writeLock().release()`. Returns once both returned,
    /// with the epoch-µs time taken just before the write side's release (the end of the exclusive
    /// section). Curator 5.4 makes a fresh sequential read node for that read, which sorts behind
    /// the writers already waiting (CURATOR-621); 5.5+ a plain one carrying the write node's
    /// sequence, in the write node's place. End the read with
    /// `release_side(CuratorLock::Read)`. Panics on `ERROR` (e.g. the write side not held).
    pub fn downgrade(&mut self) -> u128 {
        assert_eq!(self.outstanding_acquires, 0, "contender {}: downgrade while an acquire is outstanding", self.name);
        assert!(
            matches!(self.kind, CuratorLock::Read | CuratorLock::Write),
            "contender {}: only a read/write lock downgrades",
            self.name
        );
        self.send("downgrade");
        match self.wait_line(REPLY_TIMEOUT, |l| l.starts_with("DOWNGRADED ") || l.starts_with("ERROR downgrade:")) {
            Ok(l) if l.starts_with("DOWNGRADED ") => self.timestamp(&l),
            Ok(l) => self.fail(&l),
            Err(e) => self.fail(&format!("waiting for DOWNGRADED: {e}")),
        }
    }

    fn side_command(&self, verb: &str, side: CuratorLock) -> String {
        assert!(
            matches!(self.kind, CuratorLock::Read | CuratorLock::Write),
            "contender {}: only a read/write lock has sides",
            self.name
        );
        match side {
            CuratorLock::Read | CuratorLock::Write => format!("{verb} {}", side.arg()),
            CuratorLock::Mutex | CuratorLock::Semaphore(_) => {
                panic!("contender {}: side {side:?} (Read or Write)", self.name)
            }
        }
    }

    /// Curator's `release()` (one level of reentrancy); returns once it returned, with the
    /// epoch-µs time taken just before it was called (the end of the critical section). Panics
    /// on `ERROR` (e.g. not holding the lock).
    pub fn release(&mut self) -> u128 {
        match self.try_release() {
            Ok(t) => t,
            Err(e) => self.fail(&e),
        }
    }

    /// Like [`CuratorContender::release`], but returns Curator's error (`ERROR release: ...`
    /// line) instead of panicking on it.
    pub fn try_release(&mut self) -> Result<u128, String> {
        self.release_command("release")
    }

    fn release_command(&mut self, cmd: &str) -> Result<u128, String> {
        assert_eq!(self.outstanding_acquires, 0, "contender {}: release while an acquire is outstanding", self.name);
        self.send(cmd);
        match self.wait_line(REPLY_TIMEOUT, |l| l.starts_with("RELEASED ") || l.starts_with("ERROR release:")) {
            Ok(l) if l.starts_with("RELEASED ") => Ok(self.timestamp(&l)),
            Ok(l) => Err(l),
            Err(e) => self.fail(&format!("waiting for RELEASED: {e}")),
        }
    }

    /// Curator's `getParticipantNodes()`: the full paths of the lock's nodes in queue order (the
    /// holder first). For a read/write lock, both sides' (readers and writers), merged in sequence
    /// order. Empty if the lock path does not exist. Answered at once, even while an acquire of
    /// this contender blocks.
    pub fn nodes(&mut self) -> Vec<String> {
        self.send("nodes");
        match self.wait_line(REPLY_TIMEOUT, |l| l.starts_with("NODES") || l.starts_with("ERROR nodes:")) {
            Ok(l) if l.starts_with("NODES") => {
                l["NODES".len()..].trim().split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
            }
            Ok(l) => self.fail(&l),
            Err(e) => self.fail(&format!("waiting for NODES: {e}")),
        }
    }

    /// Closes the Curator client (ending its session, so its lock nodes vanish at once) and waits
    /// for the JVM to exit (SIGKILL after 10 s).
    pub fn quit(mut self) -> ExitStatus {
        self.send("quit");
        drop(self.stdin.take());
        self.wait_exit(Duration::from_secs(10))
    }

    /// SIGKILLs the JVM, like a crash: its session (and its lock node) stays until the server
    /// expires it. Later calls panic.
    pub fn kill(&mut self) {
        // SIGKILL before stdin closes: at its EOF the contender closes its session gracefully,
        // and it sometimes did so before the signal landed (a "killed" holder's node went at
        // once, and a waiter got in 14 ms after the kill).
        let _ = self.child.kill();
        let status = self.child.wait();
        drop(self.stdin.take());
        if let Some((tmp, archive)) = self.dump.take() {
            publish_archive(&tmp, &archive, status.is_ok_and(|s| s.success()), self.version);
        }
    }

    /// True while the JVM runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What the child wrote on stderr so far (the last 64 KiB or so).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    // ------------------------------------------------------------------------------ internals

    fn send(&mut self, cmd: &str) {
        let r = match &mut self.stdin {
            Some(s) => s.write_all(format!("{cmd}\n").as_bytes()).and_then(|_| s.flush()),
            None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdin closed")),
        };
        if let Err(e) = r {
            self.fail(&format!("cannot send {cmd:?}: {e}"));
        }
    }

    /// The first line (pending or new) that satisfies `want`; other lines stay pending.
    fn wait_line(&mut self, timeout: Duration, want: impl Fn(&str) -> bool) -> Result<String, WaitError> {
        if let Some(i) = self.pending.iter().position(|l| want(l)) {
            return Ok(self.pending.remove(i).unwrap());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if want(&l) => return Ok(l),
                Ok(l) => self.pending.push_back(l),
                Err(RecvTimeoutError::Timeout) => return Err(WaitError::Timeout),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(Duration::from_secs(2));
                    return Err(WaitError::Exited(status));
                }
            }
        }
    }

    fn timestamp(&self, line: &str) -> u128 {
        line.split_whitespace()
            .nth(2)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| self.fail(&format!("bad line {line:?}")))
    }

    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                break st;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait().expect("wait for java");
            }
            thread::sleep(Duration::from_millis(10));
        };
        if let Some((tmp, archive)) = self.dump.take() {
            publish_archive(&tmp, &archive, status.success(), self.version);
        }
        status
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "zklock-testkit: Curator contender {} (lock {}, pid {}): {what}\n----- its stderr -----\n{}",
            self.name,
            self.path,
            self.child.id(),
            self.stderr()
        )
    }
}

impl Drop for CuratorContender {
    fn drop(&mut self) {
        // EOF on stdin: the child closes its session and exits (halting itself after 5 s)
        drop(self.stdin.take());
        let _ = self.wait_exit(Duration::from_secs(6));
    }
}

#[derive(Debug)]
enum WaitError {
    Timeout,
    Exited(ExitStatus),
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::Timeout => write!(f, "timed out"),
            WaitError::Exited(s) => write!(f, "the JVM exited ({s})"),
        }
    }
}

// ------------------------------------------------------------------------------- build & cache

/// Path of the contender's Java source.
pub fn contender_source() -> PathBuf {
    repo_root().join("tools/curator-contender/CuratorContender.java")
}

/// How the contender runs on this machine (computed once per process and Curator version).
struct Build {
    /// Its compiled class (a jar if the JDK has `jar`, which class-data sharing needs) and
    /// the version's jars ([`CuratorVersion::jars`]).
    classpath: String,
    /// Where its class-data-sharing archive is (or will be), if CDS is possible and wanted.
    archive: Option<PathBuf>,
}

/// Installs (or fetches) and compiles on first use (once per process and version, cached per
/// machine).
fn build(version: CuratorVersion) -> &'static Build {
    static BUILDS: [OnceLock<Build>; 2] = [OnceLock::new(), OnceLock::new()];
    BUILDS[version as usize].get_or_init(|| {
        ensure_installed(version);
        sweep_cache();
        let jars = version.jars();
        for j in &jars {
            assert!(j.is_file(), "zklock-testkit: Curator {version} jar {} missing", j.display());
        }
        let (dir, key) = compile_cached(version, &jars);
        let jar = dir.join(JAR_NAME);
        let mut classpath = if jar.is_file() { jar.display().to_string() } else { dir.display().to_string() };
        for j in &jars {
            classpath.push_str(&format!(":{}", j.display()));
        }
        let cds_off = std::env::var("ZK_CDS").is_ok_and(|v| v.trim() == "0");
        let archive = (jar.is_file() && !cds_off).then(|| {
            let mut k = key;
            if let Some(java) = which("java") {
                let java = fs::canonicalize(&java).unwrap_or(java);
                fnv1a(&mut k, java.as_os_str().as_encoded_bytes());
                // the JVM itself: <java.home>/lib/server/libjvm.so
                if let Some(home) = java.parent().and_then(Path::parent) {
                    fnv1a_meta(&mut k, &home.join("lib/server/libjvm.so"));
                }
            }
            cache_root().join(format!("curator-contender-{k:016x}.jsa"))
        });
        Build { classpath, archive }
    })
}

/// The CDS flag for a new contender: use the archive if it exists; otherwise the first
/// contender of this process writes it when it exits (`-XX:ArchiveClassesAtExit`, into a
/// temporary file that [`publish_archive`] moves into place). Saves ~100 ms (~25%) of every
/// later JVM start; best effort, like `scripts/zk`'s archive for the servers.
fn cds_for_spawn(build: &Build) -> (Option<String>, Option<(PathBuf, PathBuf)>) {
    static DUMPING: AtomicBool = AtomicBool::new(false);
    let Some(archive) = &build.archive else { return (None, None) };
    if archive.is_file() {
        return (Some(format!("-XX:SharedArchiveFile={}", archive.display())), None);
    }
    if DUMPING.swap(true, Ordering::SeqCst) {
        return (None, None);
    }
    let tmp = archive.with_extension(format!("jsa.tmp.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    (Some(format!("-XX:ArchiveClassesAtExit={}", tmp.display())), Some((tmp, archive.clone())))
}

/// Moves a freshly dumped archive into place if its JVM exited normally and a JVM can really
/// map it (a damaged archive could crash the JVMs that use it); removes it otherwise.
fn publish_archive(tmp: &Path, archive: &Path, exited_ok: bool, version: CuratorVersion) {
    let ok = exited_ok
        && tmp.is_file()
        && Command::new("java")
            .args(JVM_FLAGS)
            .arg("-Xshare:on")
            .arg(format!("-XX:SharedArchiveFile={}", tmp.display()))
            .args(["-cp", &build(version).classpath, "-version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !(ok && fs::rename(tmp, archive).is_ok()) {
        let _ = fs::remove_file(tmp);
    }
}

fn jars_present() -> bool {
    CURATOR_JARS.iter().all(|j| Path::new(JAVA_DIR).join(format!("{j}.jar")).exists())
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// Installs Curator, slf4j and a JDK with apt-get if anything is missing (as root, or via sudo);
/// for Curator 5.7 only the JDK (its jars come from `scripts/field`).
fn ensure_installed(version: CuratorVersion) {
    let need_jars = version == CuratorVersion::V5_4;
    if (!need_jars || jars_present()) && on_path("javac") && on_path("java") {
        return;
    }
    let pkgs: &[&str] = if need_jars {
        &["libcurator-recipes-java", "libslf4j-java", "default-jdk-headless"]
    } else {
        &["default-jdk-headless"]
    };
    eprintln!("zklock-testkit: installing {} with apt-get", pkgs.join(" "));
    let root = unsafe { libc::geteuid() } == 0;
    let apt = |args: &[&str]| -> bool {
        let mut cmd = if root {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.arg("-n").arg("apt-get");
            c
        };
        cmd.args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let lock_wait = ["-o", "DPkg::Lock::Timeout=300"];
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend_from_slice(&lock_wait);
    install.extend_from_slice(pkgs);
    // like scripts/zk: apt-get update at most once per boot unless the install then fails
    let stamp = Path::new("/tmp/.zklock-apt-updated");
    if !stamp.exists() && apt(&["update", "-qq"]) {
        let _ = fs::write(stamp, b"");
    }
    if !apt(&install) {
        apt(&["update", "-qq"]);
        assert!(apt(&install), "zklock-testkit: apt-get install {} failed", pkgs.join(" "));
    }
    assert!(
        !need_jars || jars_present(),
        "zklock-testkit: Curator jars still missing in {JAVA_DIR} after apt-get install"
    );
}

fn cache_root() -> PathBuf {
    match std::env::var_os("ZK_TOOLS_CACHE") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => std::env::temp_dir().join(format!("zklock-tools-{}", unsafe { libc::getuid() })),
    }
}

/// FNV-1a, for a cache key that is stable across processes.
fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// Compiles the contender against `jars` into `<cache>/curator-contender-<key>` (class and jar)
/// unless a previous run did; the key (also returned) covers the source, the javac binary, the
/// Curator version and the jars (paths, sizes, mtimes). Concurrency-safe: each compile goes to a
/// private temporary directory that is renamed into place (a loser of the race discards its
/// copy).
fn compile_cached(version: CuratorVersion, jars: &[PathBuf]) -> (PathBuf, u64) {
    let src = contender_source();
    let source = fs::read(&src).unwrap_or_else(|e| panic!("zklock-testkit: read {}: {e}", src.display()));
    let javac = which("javac").unwrap_or_else(|| panic!("zklock-testkit: javac not found"));
    let javac = fs::canonicalize(&javac).unwrap_or(javac);
    let mut key = 0xcbf2_9ce4_8422_2325u64;
    fnv1a(&mut key, &source);
    fnv1a(&mut key, javac.as_os_str().as_encoded_bytes());
    fnv1a_meta(&mut key, &javac);
    // (5.4's key stays what it was before there were versions: its cached builds stay valid)
    if version != CuratorVersion::V5_4 {
        fnv1a(&mut key, format!("curator {version}").as_bytes());
    }
    for p in jars {
        if version != CuratorVersion::V5_4 {
            fnv1a(&mut key, p.as_os_str().as_encoded_bytes());
        }
        fnv1a_meta(&mut key, p);
    }
    let root = cache_root();
    let dir = root.join(format!("curator-contender-{key:016x}"));
    if dir.join(format!("{MAIN_CLASS}.class")).is_file() {
        return (dir, key);
    }
    fs::create_dir_all(&root).unwrap_or_else(|e| panic!("zklock-testkit: create {}: {e}", root.display()));
    static N: AtomicUsize = AtomicUsize::new(0);
    let tmp = root.join(format!(
        "curator-contender-{key:016x}.tmp.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("zklock-testkit: create {}: {e}", tmp.display()));
    let jars: Vec<String> = jars.iter().map(|j| j.display().to_string()).collect();
    let out = Command::new(&javac)
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&tmp)
        .arg("-cp")
        .arg(jars.join(":"))
        .arg(&src)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("zklock-testkit: run javac: {e}"));
    if !out.status.success() || !tmp.join(format!("{MAIN_CLASS}.class")).is_file() {
        let _ = fs::remove_dir_all(&tmp);
        panic!(
            "zklock-testkit: javac {} failed ({}):\n{}{}",
            src.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // a jar too: class-data sharing does not take directories on the classpath (best effort)
    if let Some(jar) = which("jar") {
        let _ = Command::new(jar)
            .arg("cf")
            .arg(tmp.join(JAR_NAME))
            .arg("-C")
            .arg(&tmp)
            .arg(format!("{MAIN_CLASS}.class"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    // atomic publish; if a concurrent compile won the race, keep its copy
    if fs::rename(&tmp, &dir).is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    assert!(
        dir.join(format!("{MAIN_CLASS}.class")).is_file(),
        "zklock-testkit: {} missing after compile",
        dir.display()
    );
    (dir, key)
}

/// Removes temporary files and directories (`curator-contender-*.tmp.<pid>[.<n>]`) left in the
/// cache by test processes that died while compiling or dumping an archive.
fn sweep_cache() {
    let Ok(entries) = fs::read_dir(cache_root()) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((_, rest)) = name.strip_prefix("curator-contender-").and_then(|n| n.split_once(".tmp.")) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Adds a file's size and mtime to the key (nothing if it does not exist).
fn fnv1a_meta(h: &mut u64, p: &Path) {
    if let Ok(m) = fs::metadata(p) {
        fnv1a(h, &m.len().to_le_bytes());
        let mtime = m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        fnv1a(h, &mtime.to_le_bytes());
    }
}

fn which(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(cmd)).find(|p| p.is_file())
}

#[allow(dead_code)]
fn _assert_send() {
    fn is<T: Send>() {}
    is::<CuratorContender>();
}
