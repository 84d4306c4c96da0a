//! The chaos soak's Rust contender: one zklock client (one session) that loops taking the mutex
//! `/chaos/mutex`, a side of the read/write lock `/chaos/rw`, or one or two leases of the
//! semaphore `/chaos/semaphore` (max 3), and reports every wait, hold, operation and loss to the
//! fenced resource (`chaos-resource`), until SIGTERM.
//!
//!   chaos-contender --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS
//!                   [--curator-mutex-only] [--op-sleep-ms N] [--idle-ms N] [--unanswered-first-address]
//!                   [--sasl-digest USER:PASSWORD]
//!
//! The protocol (shared by the C, Python, Node and Curator contenders) is described in
//! `scripts/chaos` and `chaos-resource`. Exit status: 0 after SIGTERM, 2 for bad arguments, 3 if
//! the resource connection drops.
//!
//! The pace: after each operation it sleeps uniform [0, `--op-sleep-ms`] (default 30) ms, between
//! iterations uniform [0, `--idle-ms`] (default 50) ms. A BEGIN answered `OK PIN ms` makes the
//! hold last `ms` from that reply, one operation every 100 ms: the orchestrator stalls or cuts
//! this contender meanwhile, so the hold lives through the fault (or is told lost during it).
//!
//! Downgrades: one write hold (of `/chaos/rw`) in 3 that is not pinned, after its writes, takes
//! the read side with the same owner (zklock's downgrade: a read node with the write node's
//! sequence, the same fencing token), says `DOWNGRADE`, releases the write side, READs once or
//! twice and ENDs. Zombies: one write hold in 10 (one pinned write hold in 2) ignores its loss:
//! it says LOST as soon as zklock does (the promise judged), then waits out the fault (the rest
//! of its pinned time, or a session timeout) and writes anyway with its old token
//! (`ZOMBIE-WRITE`, once or twice), which the fenced resource must refuse if anyone else has
//! begun since.
//!
//! `--unanswered-first-address` (one Rust contender of the soak): each server of the connect string
//! is reached by a host name of its own, `server-I.chaos.zklock.test`, that resolves (through the
//! ZooKeeper client's resolver override) first to 127.0.0.2 on the server's port, an address that
//! never answers a connection (`UnansweredAddress`), then to the server's own address: every
//! connection, and every reconnect under the faults, must get past the first address.
//!
//! `--sasl-digest USER:PASSWORD` (every contender of a soak whose servers require SASL):
//! authenticate each connection with SASL DIGEST-MD5 as USER, so that every reconnect under the
//! faults is one the servers refuse unless SASL comes first.
//!
//! Leases: one iteration in 5 (not with `--curator-mutex-only`) acquires 1 or 2 leases of the
//! semaphore, all or nothing, with the same timeouts, cancels and tries. Each lease is a hold of
//! its own at the resource (mode `l`, its own token), READ in each operation; all of them END
//! and are released together. No downgrade, no zombie.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Mutex};
use zklock::{
    Client, ClientOptions, ErrorKind, Hold, HoldState, Leases, Lock, LockGuard, Owner, SaslOptions, Semaphore,
};
use zklock_testkit::chaos::{SplitMix64, MUTEX_PATH, RW_PATH, SEMAPHORE_MAX, SEMAPHORE_PATH};
use zklock_testkit::UnansweredAddress;

struct Args {
    zk: String,
    resource: String,
    name: String,
    seed: u64,
    session_timeout: Duration,
    mutex_only: bool,
    op_sleep_ms: u64,
    idle_ms: u64,
    unanswered_first: bool,
    /// `--sasl-digest USER:PASSWORD`.
    sasl: Option<(String, String)>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut zk, mut resource, mut name, mut seed, mut session, mut mutex_only) = (None, None, None, None, None, false);
    let (mut op_sleep_ms, mut idle_ms, mut unanswered_first, mut sasl) = (30, 50, false, None);
    while let Some(flag) = args.next() {
        if flag == "--curator-mutex-only" {
            mutex_only = true;
            continue;
        }
        if flag == "--unanswered-first-address" {
            unanswered_first = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--zk" => zk = Some(value),
            "--resource" => resource = Some(value),
            "--name" => name = Some(value),
            "--seed" => seed = Some(value.parse::<u64>().map_err(|e| format!("--seed {value:?}: {e}"))?),
            "--op-sleep-ms" => op_sleep_ms = value.parse().map_err(|e| format!("--op-sleep-ms {value:?}: {e}"))?,
            "--idle-ms" => idle_ms = value.parse().map_err(|e| format!("--idle-ms {value:?}: {e}"))?,
            "--sasl-digest" => {
                let (user, password) =
                    value.split_once(':').ok_or_else(|| "--sasl-digest wants USER:PASSWORD".to_string())?;
                sasl = Some((user.to_string(), password.to_string()));
            }
            "--session-timeout-ms" => {
                session = Some(value.parse::<u64>().map_err(|e| format!("--session-timeout-ms {value:?}: {e}"))?)
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Args {
        zk: zk.ok_or("--zk is required")?,
        resource: resource.ok_or("--resource is required")?,
        name: name.ok_or("--name is required")?,
        seed: seed.ok_or("--seed is required")?,
        session_timeout: Duration::from_millis(session.ok_or("--session-timeout-ms is required")?),
        mutex_only,
        op_sleep_ms,
        idle_ms,
        unanswered_first,
        sasl,
    })
}

/// `--unanswered-first-address`: the connect string with each server by a name that resolves to
/// an address that never answers first, then to the server's; and those addresses, held.
fn names_with_unanswered_first(zk: &str) -> (String, Vec<UnansweredAddress>) {
    let mut names = Vec::new();
    let mut held = Vec::new();
    let mut table = std::collections::HashMap::new();
    for (i, server) in zk.split(',').enumerate() {
        let server: SocketAddr = server.parse().unwrap_or_else(|e| {
            eprintln!("chaos-contender: --unanswered-first-address needs addresses in --zk: {server:?}: {e}");
            std::process::exit(2);
        });
        let unanswered = SocketAddr::from(([127, 0, 0, 2], server.port()));
        held.push(UnansweredAddress::start(unanswered).unwrap_or_else(|e| {
            eprintln!("chaos-contender: cannot make {unanswered} unanswered: {e}");
            std::process::exit(2);
        }));
        let name = format!("server-{i}.chaos.zklock.test");
        table.insert((name.clone(), server.port()), vec![unanswered, server]);
        names.push(format!("{name}:{}", server.port()));
    }
    zookeeper_client::set_resolver(Some(Arc::new(move |host: &str, port: u16| {
        table.get(&(host.to_owned(), port)).cloned().map(Ok)
    })));
    (names.join(","), held)
}

/// The connection to the resource: one request awaiting its reply at a time.
struct Wire {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Wire {
    async fn send(&mut self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        if self.writer.write_all(&bytes).await.is_err() {
            resource_gone();
        }
    }

    async fn request(&mut self, line: &str) -> String {
        self.send(line).await;
        let mut reply = String::new();
        match self.reader.read_line(&mut reply).await {
            Ok(n) if n > 0 => reply.trim_end().to_string(),
            _ => resource_gone(),
        }
    }
}

fn resource_gone() -> ! {
    eprintln!("chaos-contender: the resource connection dropped");
    std::process::exit(3);
}

/// What the resource has been told about the current hold. Changed only under the wire's lock,
/// so that LOST (from the loss watcher) and END (from the loop) are never both sent, and no
/// operation follows a LOST.
#[derive(Default)]
struct Told {
    lost: AtomicBool,
    ended: AtomicBool,
}

struct Target {
    lock: Lock,
    path: &'static str,
    mode: &'static str,
}

enum How {
    Timeout(Duration),
    CancelAfter(Duration),
    Try,
}

fn kind_name(kind: ErrorKind) -> String {
    format!("{kind:?}")
}

fn lost_reason(hold: &Hold) -> String {
    hold.lost_reason().map_or("unknown".to_string(), |r| format!("{r:?}"))
}

/// Sends LOST for the hold unless END or LOST was sent already; under the wire's lock.
async fn tell_lost(wire: &mut Wire, told: &Told, path: &str, hold: &Hold) {
    if told.ended.load(Ordering::Acquire) || told.lost.swap(true, Ordering::AcqRel) {
        return;
    }
    wire.request(&format!("LOST {path} {} {}", hold.fencing_token(), lost_reason(hold))).await;
}

/// Under the wire's lock: true if the hold may still act; if it is lost, says so first.
async fn still_held(wire: &mut Wire, told: &Told, path: &str, hold: &Hold) -> bool {
    if told.lost.load(Ordering::Acquire) {
        return false;
    }
    if hold.state() == HoldState::Lost {
        tell_lost(wire, told, path, hold).await;
        return false;
    }
    true
}

struct Contender {
    wire: Arc<Mutex<Wire>>,
    name: String,
    owner: Owner,
    rng: SplitMix64,
    targets: Vec<Target>,
    /// The semaphore, unless `--curator-mutex-only`.
    semaphore: Option<Semaphore>,
    stop: watch::Receiver<bool>,
    /// The longest sleep after an operation, and between iterations.
    op_sleep_ms: u64,
    idle_ms: u64,
    session_timeout: Duration,
}

/// A pinned hold operates this often.
const PINNED_OP_EVERY: Duration = Duration::from_millis(100);
/// How long the read side of a downgrade may take.
const DOWNGRADE_WAIT: Duration = Duration::from_secs(3);

impl Contender {
    async fn sleep_ms(&mut self, lo: u64, hi: u64) {
        let ms = self.rng.between(lo, hi);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// One iteration; false once SIGTERM came while waiting.
    async fn iteration(&mut self) -> bool {
        // One in three: often enough that both Rust contenders' leases fill the semaphore (the
        // soak's floor) on a loaded machine too, where they make fewer attempts.
        if self.semaphore.is_some() && self.rng.below(3) == 0 {
            return self.lease_iteration().await;
        }
        let pick = self.rng.below(100);
        let target = if self.targets.len() == 1 || pick < 50 {
            0
        } else if pick < 75 {
            1
        } else {
            2
        };
        let how = match self.rng.below(100) {
            0..=69 => How::Timeout(Duration::from_millis(self.rng.between(200, 3000))),
            70..=84 => How::CancelAfter(Duration::from_millis(self.rng.between(0, 1000))),
            _ => How::Try,
        };
        let (lock, path, mode) = {
            let t = &self.targets[target];
            (t.lock.clone(), t.path, t.mode)
        };
        let started = Instant::now();
        let owner = self.owner.clone();
        let attempt = async {
            match how {
                How::Timeout(timeout) => match lock.acquire_timeout(&owner, timeout).await {
                    Ok(guard) => (Some(guard), "held".to_string()),
                    Err(e) if e.kind() == ErrorKind::Timeout => (None, "timeout".to_string()),
                    Err(e) => (None, format!("error:{}", kind_name(e.kind()))),
                },
                How::CancelAfter(delay) => {
                    tokio::select! {
                        result = lock.acquire(&owner) => match result {
                            Ok(guard) => (Some(guard), "held".to_string()),
                            Err(e) => (None, format!("error:{}", kind_name(e.kind()))),
                        },
                        _ = tokio::time::sleep(delay) => (None, "cancelled".to_string()),
                    }
                }
                How::Try => match lock.try_acquire(&owner).await {
                    Ok(Some(guard)) => (Some(guard), "held".to_string()),
                    Ok(None) => (None, "busy".to_string()),
                    Err(e) => (None, format!("error:{}", kind_name(e.kind()))),
                },
            }
        };
        let mut stop = self.stop.clone();
        let (guard, outcome) = tokio::select! {
            r = attempt => r,
            _ = stop.wait_for(|s| *s) => return false,
        };
        let waited = started.elapsed().as_millis();
        self.wire.lock().await.send(&format!("WAIT {path} {mode} {waited} {outcome}")).await;
        match guard {
            Some(guard) => self.hold(guard, target, path, mode).await,
            None if outcome.starts_with("error:") => tokio::time::sleep(Duration::from_millis(100)).await,
            None => {}
        }
        self.sleep_ms(0, self.idle_ms).await;
        true
    }

    async fn hold(&mut self, guard: LockGuard, target: usize, path: &'static str, mode: &str) {
        let hold = guard.hold().clone();
        let token = hold.fencing_token();
        let told = Arc::new(Told::default());
        let reply = self.wire.lock().await.request(&format!("BEGIN {path} {mode} {token} rust {}", self.name)).await;
        let pinned_until = reply
            .strip_prefix("OK PIN ")
            .and_then(|ms| ms.parse::<u64>().ok())
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let (downgrade_roll, zombie_roll) = (self.rng.below(3), self.rng.below(10));
        let downgrade = mode == "w" && pinned_until.is_none() && downgrade_roll == 0;
        let zombie = mode != "r" && if pinned_until.is_some() { zombie_roll < 5 } else { zombie_roll == 0 };
        // Say LOST as soon as zklock does, whatever the loop is doing.
        let wire = self.wire.clone();
        let watch = |hold: &Hold| {
            let (wire, told, hold) = (wire.clone(), told.clone(), hold.clone());
            tokio::spawn(async move {
                if hold.lost().await.is_some() {
                    tell_lost(&mut *wire.lock().await, &told, path, &hold).await;
                }
            })
        };
        let mut watcher = watch(&hold);
        let op = format!("{} {path} {token}", if mode == "r" { "READ" } else { "WRITE" });
        let mut held = true;
        match pinned_until {
            Some(until) => {
                let mut next = Instant::now();
                while Instant::now() < until {
                    if !self.operate(&op, &told, path, &hold).await {
                        held = false;
                        break;
                    }
                    next += PINNED_OP_EVERY;
                    tokio::time::sleep_until(next.min(until).into()).await;
                }
            }
            None => {
                for _ in 0..self.rng.between(1, 3) {
                    if !self.operate(&op, &told, path, &hold).await {
                        held = false;
                        break;
                    }
                    self.sleep_ms(0, self.op_sleep_ms).await;
                }
            }
        }
        if !held && zombie {
            // Lost, and said so: a zombie waits out the fault and writes anyway, with its old token.
            let resume = pinned_until.unwrap_or_else(|| Instant::now() + self.session_timeout);
            tokio::time::sleep_until(resume.into()).await;
            for _ in 0..self.rng.between(1, 2) {
                self.wire.lock().await.request(&format!("ZOMBIE-WRITE {path} {token}")).await;
                self.sleep_ms(0, self.op_sleep_ms).await;
            }
        }
        // The downgrade: the read side with the same owner, then DOWNGRADE, then the write side
        // released; the hold goes on as a read on the read node.
        let (mut guard, mut hold) = (guard, hold);
        if held && downgrade {
            let read_lock = self.targets[target - 1].lock.clone();
            match read_lock.acquire_timeout(&self.owner, DOWNGRADE_WAIT).await {
                Ok(read) => {
                    let read_hold = read.hold().clone();
                    if read_hold.fencing_token() != token {
                        let line = format!("ERROR downgrade-token:{}!={token}", read_hold.fencing_token());
                        self.wire.lock().await.send(&line).await;
                    }
                    let mut wire = self.wire.lock().await;
                    held = still_held(&mut wire, &told, path, &hold).await;
                    if held {
                        wire.request(&format!("DOWNGRADE {path} {token}")).await;
                    }
                    drop(wire);
                    watcher.abort();
                    watcher = watch(&read_hold);
                    let write = std::mem::replace(&mut guard, read);
                    if let Err(e) = write.release().await {
                        if held {
                            self.wire.lock().await.send(&format!("ERROR release-write:{}", kind_name(e.kind()))).await;
                        }
                    }
                    hold = read_hold;
                    if held {
                        let op = format!("READ {path} {token}");
                        for _ in 0..self.rng.between(1, 2) {
                            if !self.operate(&op, &told, path, &hold).await {
                                held = false;
                                break;
                            }
                            self.sleep_ms(0, self.op_sleep_ms).await;
                        }
                    }
                }
                Err(e) => {
                    self.wire.lock().await.send(&format!("ERROR downgrade:{}", kind_name(e.kind()))).await;
                }
            }
        }
        if held {
            let mut wire = self.wire.lock().await;
            held = still_held(&mut wire, &told, path, &hold).await;
            if held {
                // END is acknowledged before the release, so the resource never sees the next
                // holder before it.
                wire.request(&format!("END {path} {token}")).await;
                told.ended.store(true, Ordering::Release);
            }
        }
        watcher.abort();
        let released = guard.release().await;
        match released {
            Ok(()) => {}
            // After END, a loss can no longer be said (LOST never follows END): count it.
            Err(e) if held => self.wire.lock().await.send(&format!("ERROR release:{}", kind_name(e.kind()))).await,
            // The hold was lost: the release is expected to fail.
            Err(_) => {}
        }
    }
}

impl Contender {
    /// One acquisition of 1 or 2 leases, and their hold; false once SIGTERM came while waiting.
    async fn lease_iteration(&mut self) -> bool {
        let semaphore = self.semaphore.clone().expect("a semaphore");
        let n = if self.rng.below(2) == 0 { 2 } else { 1 };
        let how = match self.rng.below(100) {
            0..=69 => How::Timeout(Duration::from_millis(self.rng.between(200, 3000))),
            70..=84 => How::CancelAfter(Duration::from_millis(self.rng.between(0, 1000))),
            _ => How::Try,
        };
        let started = Instant::now();
        let attempt = async {
            let outcome = |result: zklock::Result<Option<Leases>>| match result {
                Ok(Some(leases)) => (Some(leases), "held".to_string()),
                Ok(None) => (None, "busy".to_string()),
                Err(e) if e.kind() == ErrorKind::Timeout => (None, "timeout".to_string()),
                Err(e) => (None, format!("error:{}", kind_name(e.kind()))),
            };
            match how {
                How::Timeout(timeout) => outcome(semaphore.acquire_timeout(n, timeout).await.map(Some)),
                How::CancelAfter(delay) => tokio::select! {
                    result = semaphore.acquire(n) => outcome(result.map(Some)),
                    _ = tokio::time::sleep(delay) => (None, "cancelled".to_string()),
                },
                How::Try => outcome(semaphore.try_acquire(n).await),
            }
        };
        let mut stop = self.stop.clone();
        let (leases, outcome) = tokio::select! {
            r = attempt => r,
            _ = stop.wait_for(|s| *s) => return false,
        };
        let waited = started.elapsed().as_millis();
        self.wire.lock().await.send(&format!("WAIT {SEMAPHORE_PATH} l {waited} {outcome}")).await;
        match leases {
            Some(leases) => self.hold_leases(leases).await,
            None if outcome.starts_with("error:") => tokio::time::sleep(Duration::from_millis(100)).await,
            None => {}
        }
        self.sleep_ms(0, self.idle_ms).await;
        true
    }

    /// Holds the leases as `hold` holds a lock: BEGIN each (the first's reply may pin them all),
    /// READ with each per operation while none is lost, END each, release them.
    async fn hold_leases(&mut self, leases: Leases) {
        let path = SEMAPHORE_PATH;
        let holds: Vec<Hold> = leases.leases().iter().map(|lease| lease.hold().clone()).collect();
        let told: Vec<Arc<Told>> = holds.iter().map(|_| Arc::new(Told::default())).collect();
        let mut pinned_until = None;
        for hold in &holds {
            let line = format!("BEGIN {path} l {} rust {}", hold.fencing_token(), self.name);
            let reply = self.wire.lock().await.request(&line).await;
            if let Some(ms) = reply.strip_prefix("OK PIN ").and_then(|ms| ms.parse::<u64>().ok()) {
                pinned_until = Some(Instant::now() + Duration::from_millis(ms));
            }
        }
        let watchers: Vec<_> = holds
            .iter()
            .zip(&told)
            .map(|(hold, told)| {
                let (wire, told, hold) = (self.wire.clone(), told.clone(), hold.clone());
                tokio::spawn(async move {
                    if hold.lost().await.is_some() {
                        tell_lost(&mut *wire.lock().await, &told, path, &hold).await;
                    }
                })
            })
            .collect();
        let rounds = match pinned_until {
            Some(until) => until.saturating_duration_since(Instant::now()).as_millis() as u64 / 100 + 1,
            None => self.rng.between(1, 3),
        };
        let mut held = true;
        'rounds: for _ in 0..rounds {
            for (hold, told) in holds.iter().zip(&told) {
                let op = format!("READ {path} {}", hold.fencing_token());
                if !self.operate(&op, told, path, hold).await {
                    held = false;
                    break 'rounds;
                }
            }
            match pinned_until {
                Some(until) if Instant::now() >= until => break,
                Some(until) => tokio::time::sleep_until(until.min(Instant::now() + PINNED_OP_EVERY).into()).await,
                None => self.sleep_ms(0, self.op_sleep_ms).await,
            }
        }
        // Every lease not lost ENDs (acknowledged before the release, as a lock's END).
        let mut wire = self.wire.lock().await;
        for (hold, told) in holds.iter().zip(&told) {
            if still_held(&mut wire, told, path, hold).await {
                wire.request(&format!("END {path} {}", hold.fencing_token())).await;
                told.ended.store(true, Ordering::Release);
            } else {
                held = false;
            }
        }
        drop(wire);
        watchers.iter().for_each(|watcher| watcher.abort());
        match leases.release().await {
            Ok(()) => {}
            Err(e) if held => self.wire.lock().await.send(&format!("ERROR release:{}", kind_name(e.kind()))).await,
            Err(_) => {}
        }
    }

    /// One operation unless the hold is lost (then says LOST if not said yet); false if lost.
    async fn operate(&self, op: &str, told: &Told, path: &str, hold: &Hold) -> bool {
        let mut wire = self.wire.lock().await;
        if !still_held(&mut wire, told, path, hold).await {
            return false;
        }
        wire.request(op).await;
        true
    }
}

async fn connect_resource(address: &str) -> Wire {
    match TcpStream::connect(address).await {
        Ok(stream) => {
            let _ = stream.set_nodelay(true);
            let (read, write) = stream.into_split();
            Wire { reader: BufReader::new(read), writer: write }
        }
        Err(e) => {
            eprintln!("chaos-contender: cannot connect to the resource at {address}: {e}");
            std::process::exit(3);
        }
    }
}

async fn run(args: Args) {
    let (stop_tx, stop) = watch::channel(false);
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::spawn(async move {
        sigterm.recv().await;
        let _ = stop_tx.send(true);
    });
    let wire = Arc::new(Mutex::new(connect_resource(&args.resource).await));
    let (zk, _unanswered) = match args.unanswered_first {
        true => names_with_unanswered_first(&args.zk),
        false => (args.zk.clone(), Vec::new()),
    };
    let options = ClientOptions {
        session_timeout: args.session_timeout,
        sasl: args.sasl.as_ref().map(|(user, password)| SaslOptions::digest_md5(user, password)),
        ..Default::default()
    };
    // Faults may be under way when this process starts: try until a session is established.
    let client = loop {
        if *stop.borrow() {
            return;
        }
        match Client::connect_with(&zk, options.clone()).await {
            Ok(client) => break client,
            Err(e) => {
                wire.lock().await.send(&format!("ERROR connect:{}", kind_name(e.kind()))).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut targets = vec![Target { lock: client.lock(MUTEX_PATH).expect("mutex path"), path: MUTEX_PATH, mode: "x" }];
    if !args.mutex_only {
        let rw = client.read_write_lock(RW_PATH).expect("rw path");
        targets.push(Target { lock: rw.read().clone(), path: RW_PATH, mode: "r" });
        targets.push(Target { lock: rw.write().clone(), path: RW_PATH, mode: "w" });
    }
    let semaphore =
        (!args.mutex_only).then(|| client.semaphore(SEMAPHORE_PATH, SEMAPHORE_MAX).expect("semaphore path"));
    let name = args.name.clone();
    let mut contender = Contender {
        wire,
        owner: Owner::unique_labelled(|_| name),
        name: args.name,
        rng: SplitMix64::new(args.seed),
        targets,
        semaphore,
        stop: stop.clone(),
        op_sleep_ms: args.op_sleep_ms,
        idle_ms: args.idle_ms,
        session_timeout: args.session_timeout,
    };
    while !*stop.borrow() {
        if !contender.iteration().await {
            break;
        }
    }
    drop(contender);
    client.close().await;
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("chaos-contender: {e}");
        eprintln!(
            "usage: chaos-contender --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS \
             [--curator-mutex-only] [--op-sleep-ms N] [--idle-ms N] [--unanswered-first-address] \
             [--sasl-digest USER:PASSWORD]"
        );
        std::process::exit(2);
    });
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    runtime.block_on(run(args));
    // Close the socket last: the resource then sees this process end.
    drop(runtime);
}
