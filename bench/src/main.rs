//! zklock benchmark against the server named by `ZK_CONNECT` (scripts/bench starts one).
//! Prints one JSON line with the same keys as bench/curator/CuratorBench.java, so the two sit
//! side by side. Progress goes to stderr.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zklock::{Client, ClientOptions, Owner, TlsOptions};
use zookeeper_client as zk;

mod many;
mod scale;

const CONTENDERS: usize = 8;
/// The semaphore workload: this many sessions contend for one lease each of a semaphore of
/// [`SEMAPHORE_MAX`] (Curator's InterProcessSemaphoreV2 in CuratorBench.java).
const SEMAPHORE_SESSIONS: usize = 16;
const SEMAPHORE_MAX: u32 = 4;
/// One operation in this many of the read-mostly workload is a write.
const WRITE_ONE_IN: u64 = 10;

fn seconds_from_env() -> Duration {
    let secs = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(5.0);
    Duration::from_secs_f64(secs)
}

fn hold_from_env() -> Duration {
    let us = std::env::var("BENCH_HOLD_US").ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_micros(us)
}

/// The server the workloads connect to: `ZK_CONNECT`, plaintext, or with `BENCH_TLS_DIR` its TLS
/// address (scripts/bench passes `scripts/zk run --tls`'s), trusting that directory's ca.pem and
/// presenting alice.pem/alice.key, as made by `scripts/zk tls-certs` (its servers require a
/// client certificate).
struct Server {
    connect: String,
    tls: Option<TlsFiles>,
}

struct TlsFiles {
    ca: String,
    cert: String,
    key: String,
}

impl Server {
    fn from_env() -> Server {
        let connect = std::env::var("ZK_CONNECT").expect("ZK_CONNECT names the server (scripts/bench sets it)");
        let tls = std::env::var_os("BENCH_TLS_DIR").filter(|dir| !dir.is_empty()).map(|dir| {
            let dir = std::path::PathBuf::from(dir);
            let read = |name: &str| {
                let path = dir.join(name);
                std::fs::read_to_string(&path)
                    .unwrap_or_else(|err| panic!("BENCH_TLS_DIR: cannot read {}: {err}", path.display()))
            };
            TlsFiles { ca: read("ca.pem"), cert: read("alice.pem"), key: read("alice.key") }
        });
        Server { connect, tls }
    }

    async fn client(&self) -> Client {
        let tls = self.tls.as_ref().map(|files| {
            let mut tls = TlsOptions::new(files.ca.clone());
            tls.client_cert_pem = Some(files.cert.clone());
            tls.client_key_pem = Some(files.key.clone());
            tls
        });
        Client::connect_with(&self.connect, ClientOptions { tls, ..ClientOptions::default() }).await.unwrap()
    }

    /// A bare ZooKeeper client (the same crate, the same transport) for the floors.
    async fn raw_client(&self) -> zk::Client {
        match &self.tls {
            None => zk::Client::connect(&self.connect).await.unwrap(),
            Some(files) => {
                let tls = zk::TlsOptions::new()
                    .with_pem_ca(&files.ca)
                    .and_then(|tls| tls.with_pem_identity(&files.cert, &files.key))
                    .expect("BENCH_TLS_DIR: usable PEM certificates");
                zk::Client::connector().with_tls(tls).secure_connect(&self.connect).await.unwrap()
            }
        }
    }
}

fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1e6
}

/// Which operations of the read-mostly workload write: splitmix64 from the session's index, the
/// same sequence in every impl (CuratorBench.java, bench.py), one write in [`WRITE_ONE_IN`].
struct OpSequence(u64);

impl OpSequence {
    fn for_session(index: usize) -> OpSequence {
        OpSequence(index as u64 + 1)
    }

    fn next_is_write(&mut self) -> bool {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % WRITE_ONE_IN == 0
    }
}

struct Uncontended {
    cycles_per_s: f64,
    acquire: Vec<Duration>,
    release: Vec<Duration>,
}

async fn cycles(
    lock: &zklock::Lock,
    owner: &Owner,
    budget: Duration,
    samples: Option<(&mut Vec<Duration>, &mut Vec<Duration>)>,
) -> (u64, Duration) {
    let started = Instant::now();
    let mut count = 0u64;
    let mut samples = samples;
    while started.elapsed() < budget {
        let t0 = Instant::now();
        let guard = lock.acquire(owner).await.unwrap();
        let t1 = Instant::now();
        guard.release().await.unwrap();
        let t2 = Instant::now();
        if let Some((acquire, release)) = samples.as_mut() {
            acquire.push(t1 - t0);
            release.push(t2 - t1);
        }
        count += 1;
    }
    (count, started.elapsed())
}

/// Uncontended lock cycles, the raw floor and the floor with the recipe's listing, measured in
/// alternating slices so that the server's and the disk's drift over the run weighs on all alike.
async fn uncontended_and_floor(
    client: &Client,
    server: &Server,
    base: &str,
    warmup: Duration,
    measure: Duration,
) -> (Uncontended, f64, f64) {
    let lock = client.lock(&format!("{base}/uncontended")).unwrap();
    let owner = Owner::new(1);
    let floor_zk = server.raw_client().await;
    // Made by the first floor create's NoNode, like any later removal of it.
    let floor_parent = format!("{base}/floor");
    cycles(&lock, &owner, warmup / 3, None).await;
    floor_cycles(&floor_zk, &floor_parent, warmup / 3, false).await;
    floor_cycles(&floor_zk, &floor_parent, warmup / 3, true).await;

    let slices = ((measure.as_secs_f64() * 4.0).round() as u32).max(4);
    let slice = measure / slices / 3;
    let (mut acquire, mut release) = (Vec::new(), Vec::new());
    let (mut lock_count, mut lock_time) = (0, Duration::ZERO);
    let (mut floor_count, mut floor_time, mut listed_count, mut listed_time) = (0, Duration::ZERO, 0, Duration::ZERO);
    for _ in 0..slices {
        let (count, time) = cycles(&lock, &owner, slice, Some((&mut acquire, &mut release))).await;
        (lock_count, lock_time) = (lock_count + count, lock_time + time);
        let (count, time) = floor_cycles(&floor_zk, &floor_parent, slice, false).await;
        (floor_count, floor_time) = (floor_count + count, floor_time + time);
        let (count, time) = floor_cycles(&floor_zk, &floor_parent, slice, true).await;
        (listed_count, listed_time) = (listed_count + count, listed_time + time);
    }
    acquire.sort_unstable();
    release.sort_unstable();
    let cycles_per_s = lock_count as f64 / lock_time.as_secs_f64();
    let floor = floor_count as f64 / floor_time.as_secs_f64();
    let floor_listed = listed_count as f64 / listed_time.as_secs_f64();
    (Uncontended { cycles_per_s, acquire, release }, floor, floor_listed)
}

/// The raw floor: one create plus one delete with the same ZooKeeper client crate, the create
/// shaped like a lock node's (ephemeral sequential, Curator-style name, 110 bytes of data), so
/// that the floor is exactly the two writes any acquire+release needs. With `listed`, the
/// children listing the recipe needs is pipelined behind each create, as zklock sends it: what
/// an uncontended cycle costs with no lock code at all.
async fn floor_cycles(zk: &zk::Client, parent: &str, budget: Duration, listed: bool) -> (u64, Duration) {
    let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let data = [b'x'; 110];
    let prefix = format!("{parent}/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-");
    let started = Instant::now();
    let mut count = 0u64;
    while started.elapsed() < budget {
        let create = zk.create(&prefix, &data, &mode);
        let listing = listed.then(|| zk.list_children(parent));
        let sequence = match create.await {
            Ok((_, sequence)) => sequence,
            // Not made yet, or the server's container cleanup removed it while idle: make it.
            Err(zk::Error::NoNode) => {
                zk.mkdir(parent, &zk::CreateMode::Container.with_acls(zk::Acls::anyone_all())).await.unwrap();
                continue;
            }
            Err(err) => panic!("floor create: {err}"),
        };
        if let Some(listing) = listing {
            std::hint::black_box(listing.await.unwrap());
        }
        zk.delete(&format!("{prefix}{sequence}"), None).await.unwrap();
        count += 1;
    }
    (count, started.elapsed())
}

async fn contended(server: &Server, path: &str, warmup: Duration, measure: Duration) -> f64 {
    let mut clients = Vec::new();
    for _ in 0..CONTENDERS {
        clients.push(server.client().await);
    }
    let handoffs = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let lock = client.lock(path).unwrap();
        let (handoffs, stop) = (handoffs.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let owner = Owner::new(i as u64);
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.acquire(&owner).await.unwrap();
                handoffs.fetch_add(1, Ordering::Relaxed);
                guard.release().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    let (start_count, started) = (handoffs.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(measure).await;
    let rate = (handoffs.load(Ordering::Relaxed) - start_count) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    for client in clients {
        client.close().await;
    }
    rate
}

/// The semaphore workload: [`SEMAPHORE_SESSIONS`] sessions, one task each, acquiring one lease of
/// a semaphore of [`SEMAPHORE_MAX`] and releasing it at once (as `contended` holds its lock):
/// leases/s, and the waits of the acquisitions of the measured phase.
async fn semaphore(server: &Server, path: &str, warmup: Duration, measure: Duration) -> (f64, Vec<Duration>) {
    let mut clients = Vec::new();
    for _ in 0..SEMAPHORE_SESSIONS {
        clients.push(server.client().await);
    }
    let leases = Arc::new(AtomicU64::new(0));
    // Holding now, and the acquisitions that found more than max holding (must stay 0).
    let (inside, over) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU64::new(0)));
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for client in &clients {
        let semaphore = client.semaphore(path, SEMAPHORE_MAX).unwrap();
        let (leases, measuring, stop) = (leases.clone(), measuring.clone(), stop.clone());
        let (inside, over) = (inside.clone(), over.clone());
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                // The waits of the acquisitions begun and done in the measured phase.
                let (measured, started) = (measuring.load(Ordering::Relaxed), Instant::now());
                let held = semaphore.acquire(1).await.unwrap();
                if measured && measuring.load(Ordering::Relaxed) {
                    waits.push(started.elapsed());
                }
                if inside.fetch_add(1, Ordering::SeqCst) >= SEMAPHORE_MAX {
                    over.fetch_add(1, Ordering::Relaxed);
                }
                leases.fetch_add(1, Ordering::Relaxed);
                inside.fetch_sub(1, Ordering::SeqCst);
                held.release().await.unwrap();
            }
            waits
        }));
    }
    tokio::time::sleep(warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let (start_count, started) = (leases.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(measure).await;
    let rate = (leases.load(Ordering::Relaxed) - start_count) as f64 / started.elapsed().as_secs_f64();
    measuring.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await.unwrap());
    }
    waits.sort();
    assert_eq!(over.load(Ordering::Relaxed), 0, "more than {SEMAPHORE_MAX} leases held at once");
    for client in clients {
        client.close().await;
    }
    (rate, waits)
}

/// Uncontended read cycles: one session, the read side of a read/write lock on a fresh path.
async fn read_cycles(client: &Client, path: &str, warmup: Duration, measure: Duration) -> Uncontended {
    let rw = client.read_write_lock(path).unwrap();
    let owner = Owner::new(1);
    cycles(rw.read(), &owner, warmup, None).await;
    let (mut acquire, mut release) = (Vec::new(), Vec::new());
    let (count, time) = cycles(rw.read(), &owner, measure, Some((&mut acquire, &mut release))).await;
    acquire.sort_unstable();
    release.sort_unstable();
    Uncontended { cycles_per_s: count as f64 / time.as_secs_f64(), acquire, release }
}

struct ReadMostly {
    ops_per_s: f64,
    reader_waits: Vec<Duration>,
    writer_waits: Vec<Duration>,
    mean_hold: Duration,
}

/// Waits (acquire call to grant) and holds of the operations begun in the measured window.
#[derive(Default)]
struct ReadMostlySamples {
    reader_waits: Vec<Duration>,
    writer_waits: Vec<Duration>,
    held: Duration,
    holds: u32,
}

/// The read-mostly workload: [`CONTENDERS`] sessions, one task and one read/write lock each, one
/// shared path, each looping over its [`OpSequence`]: acquire the read (or write) side, hold for
/// `hold`, release. Sharing and exclusion are checked while holding.
async fn read_mostly(server: &Server, path: &str, warmup: Duration, measure: Duration, hold: Duration) -> ReadMostly {
    let mut clients = Vec::new();
    for _ in 0..CONTENDERS {
        clients.push(server.client().await);
    }
    let ops = Arc::new(AtomicU64::new(0));
    let (stop, measuring) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (readers_in, writers_in) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let violations = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(Mutex::new(ReadMostlySamples::default()));
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let rw = client.read_write_lock(path).unwrap();
        let (ops, stop, measuring) = (ops.clone(), stop.clone(), measuring.clone());
        let (readers_in, writers_in, violations) = (readers_in.clone(), writers_in.clone(), violations.clone());
        let samples = samples.clone();
        tasks.push(tokio::spawn(async move {
            let owner = Owner::new(i as u64);
            let mut sequence = OpSequence::for_session(i);
            let mut mine = ReadMostlySamples::default();
            while !stop.load(Ordering::Relaxed) {
                let write = sequence.next_is_write();
                let recording = measuring.load(Ordering::Relaxed);
                let asked = Instant::now();
                let side = if write { rw.write() } else { rw.read() };
                let guard = side.acquire(&owner).await.unwrap();
                let waited = asked.elapsed();
                let inside = if write { &writers_in } else { &readers_in };
                // A writer finds nobody inside; a reader finds no writer.
                let alone = if write {
                    writers_in.fetch_add(1, Ordering::SeqCst) == 0 && readers_in.load(Ordering::SeqCst) == 0
                } else {
                    readers_in.fetch_add(1, Ordering::SeqCst);
                    writers_in.load(Ordering::SeqCst) == 0
                };
                if !alone {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                let held_from = Instant::now();
                if !hold.is_zero() {
                    // An OS sleep: tokio's timer rounds 1 ms up to ~2 ms.
                    tokio::task::spawn_blocking(move || std::thread::sleep(hold)).await.unwrap();
                }
                let held = held_from.elapsed();
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
                ops.fetch_add(1, Ordering::Relaxed);
                if recording {
                    let waits = if write { &mut mine.writer_waits } else { &mut mine.reader_waits };
                    waits.push(waited);
                    (mine.held, mine.holds) = (mine.held + held, mine.holds + 1);
                }
            }
            let mut all = samples.lock().unwrap();
            all.reader_waits.extend(mine.reader_waits);
            all.writer_waits.extend(mine.writer_waits);
            (all.held, all.holds) = (all.held + mine.held, all.holds + mine.holds);
        }));
    }
    tokio::time::sleep(warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let (start_count, started) = (ops.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(measure).await;
    let ops_per_s = (ops.load(Ordering::Relaxed) - start_count) as f64 / started.elapsed().as_secs_f64();
    measuring.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    for client in clients {
        client.close().await;
    }
    assert_eq!(violations.load(Ordering::Relaxed), 0, "read/write exclusion violated");
    let mut samples = std::mem::take(&mut *samples.lock().unwrap());
    samples.reader_waits.sort_unstable();
    samples.writer_waits.sort_unstable();
    let mean_hold = samples.held.checked_div(samples.holds).unwrap_or_default();
    ReadMostly { ops_per_s, reader_waits: samples.reader_waits, writer_waits: samples.writer_waits, mean_hold }
}

async fn reentrant_ns(client: &Client, path: &str) -> f64 {
    let lock = client.lock(path).unwrap();
    let owner = Owner::new(1);
    let outer = lock.acquire(&owner).await.unwrap();
    let pairs = |n: u32| {
        let (lock, owner) = (&lock, &owner);
        async move {
            let started = Instant::now();
            for _ in 0..n {
                let acquired = lock.acquire_for(owner, None).await.unwrap();
                std::hint::black_box(acquired);
                lock.release(owner).await.unwrap();
            }
            started.elapsed().as_nanos() as f64 / n as f64
        }
    };
    pairs(200_000).await;
    // The median of 5 rounds, as the Curator benchmark reports it.
    let mut rounds = Vec::new();
    for _ in 0..5 {
        rounds.push(pairs(1_000_000).await);
    }
    rounds.sort_by(f64::total_cmp);
    outer.release().await.unwrap();
    rounds[2]
}

#[tokio::main]
async fn main() {
    let server = Server::from_env();
    let connect = server.connect.clone();
    let measure = seconds_from_env();
    let warmup = Duration::from_secs(1).min(measure);
    let base = format!("/zklock-bench/{}", std::process::id());
    let selected = std::env::var("BENCH_WORKLOADS").unwrap_or_default();
    // The many_locks workload's floor (scripts/bench's impl `floor`): the bare client alone.
    if std::env::var("BENCH_MANY_FLOOR").is_ok_and(|v| v == "1") {
        let mut runs = Vec::new();
        for n in many::paths_from_env() {
            eprintln!("[floor] many_locks: {n} paths, create + listing + delete, {n} in flight, one client...");
            runs.push(
                many::floor(server.raw_client().await, &base, n, warmup.max(Duration::from_secs(1)), measure).await,
            );
        }
        println!("{{\"impl\":\"floor (zookeeper-client)\"{}}}", many::json_fields(&runs).replace("NaN", "null"));
        return;
    }
    let client = server.client().await;

    // BENCH_WORKLOADS=uncontended,contended,reentrant,read,read_mostly,semaphore (default: all) runs a
    // subset; the skipped figures print as null. The floor is measured with the uncontended
    // workload. `scale` (long) runs only when named.
    let named = |name: &str| selected.split(',').any(|w| w.trim() == name);
    let wanted = |name: &str| selected.is_empty() || named(name);
    // It reads the queue with four-letter words, which the TLS port does not answer.
    assert!(!(named("scale") && server.tls.is_some()), "the scale workload is not run over TLS (BENCH_TLS_DIR)");
    let nan = f64::NAN;
    let (un, floor, floor_listed) = if wanted("uncontended") {
        eprintln!("[zklock] uncontended, alternating with the raw floor (create+delete, and with the listing)...");
        uncontended_and_floor(&client, &server, &base, warmup, measure).await
    } else {
        (Uncontended { cycles_per_s: nan, acquire: vec![], release: vec![] }, nan, nan)
    };
    let handoffs = if wanted("contended") {
        eprintln!("[zklock] contended, {CONTENDERS} sessions...");
        contended(&server, &format!("{base}/contended"), warmup, measure).await
    } else {
        nan
    };
    let reentrant = if wanted("reentrant") {
        eprintln!("[zklock] reentrant...");
        reentrant_ns(&client, &format!("{base}/reentrant")).await
    } else {
        nan
    };
    let read = if wanted("read") {
        eprintln!("[zklock] uncontended read cycles (read/write lock)...");
        read_cycles(&client, &format!("{base}/read"), warmup, measure).await
    } else {
        Uncontended { cycles_per_s: nan, acquire: vec![], release: vec![] }
    };
    let mostly = if wanted("read_mostly") {
        let hold = hold_from_env();
        eprintln!("[zklock] read-mostly, {CONTENDERS} sessions, 1 write in {WRITE_ONE_IN}, holds of {hold:?}...");
        let r = read_mostly(&server, &format!("{base}/read-mostly"), warmup, measure, hold).await;
        eprintln!(
            "[zklock] read-mostly: {:.1} ops/s; {} reads, {} writes measured; mean hold {:?}",
            r.ops_per_s,
            r.reader_waits.len(),
            r.writer_waits.len(),
            r.mean_hold
        );
        r
    } else {
        ReadMostly { ops_per_s: nan, reader_waits: vec![], writer_waits: vec![], mean_hold: Duration::ZERO }
    };
    let (leases_per_s, lease_waits) = if wanted("semaphore") {
        eprintln!("[zklock] semaphore, max {SEMAPHORE_MAX}, {SEMAPHORE_SESSIONS} sessions, one lease each...");
        semaphore(&server, &format!("{base}/semaphore"), warmup, measure).await
    } else {
        (nan, vec![])
    };
    let mut scale_runs = Vec::new();
    if named("scale") {
        let timeout = scale::timeout_from_env();
        for waiters in scale::waiters_from_env() {
            eprintln!("[zklock] scale: {waiters} tasks on one lock, one client...");
            let path = format!("{base}/scale-{waiters}");
            let run = scale::run(&client, &connect, &path, waiters, timeout).await;
            let failed = run.outcome.is_err();
            scale_runs.push(run);
            if failed {
                break; // its waiters may still hold the client: no further N in this process
            }
        }
    }
    let mut many_runs = Vec::new();
    if named("many_locks") {
        for n in many::paths_from_env() {
            eprintln!("[zklock] many_locks: {n} paths, a task and a Lock each, one client...");
            many_runs.push(many::locks(&client, &base, n, warmup.max(Duration::from_secs(1)), measure).await);
        }
    }
    client.close().await;

    let read_mostly_hold_us = if mostly.ops_per_s.is_nan() { nan } else { mostly.mean_hold.as_secs_f64() * 1e6 };
    // The TLS run is a column of its own beside the plaintext one.
    let impl_name = if server.tls.is_some() { "zklock (rust) over TLS" } else { "zklock (rust)" };
    let json = format!(
        "{{\"impl\":\"{}\",\"uncontended_cycles_per_s\":{:.1},\"acquire_p50_us\":{:.1},\"acquire_p99_us\":{:.1},\"release_p50_us\":{:.1},\"release_p99_us\":{:.1},\"handoffs_per_s\":{:.1},\"reentrant_ns\":{:.1},\"floor_cycles_per_s\":{:.1},\"floor_listed_cycles_per_s\":{:.1},\"read_cycles_per_s\":{:.1},\"read_acquire_p50_us\":{:.1},\"read_acquire_p99_us\":{:.1},\"read_release_p50_us\":{:.1},\"read_release_p99_us\":{:.1},\"read_mostly_ops_per_s\":{:.1},\"read_mostly_reader_wait_p50_us\":{:.1},\"read_mostly_reader_wait_p99_us\":{:.1},\"read_mostly_writer_wait_p50_us\":{:.1},\"read_mostly_writer_wait_p99_us\":{:.1},\"read_mostly_hold_us\":{:.1},\"semaphore_leases_per_s\":{:.1},\"semaphore_wait_p50_us\":{:.1},\"semaphore_wait_p99_us\":{:.1}}}",
        impl_name,
        un.cycles_per_s,
        percentile_us(&un.acquire, 0.5),
        percentile_us(&un.acquire, 0.99),
        percentile_us(&un.release, 0.5),
        percentile_us(&un.release, 0.99),
        handoffs,
        reentrant,
        floor,
        floor_listed,
        read.cycles_per_s,
        percentile_us(&read.acquire, 0.5),
        percentile_us(&read.acquire, 0.99),
        percentile_us(&read.release, 0.5),
        percentile_us(&read.release, 0.99),
        mostly.ops_per_s,
        percentile_us(&mostly.reader_waits, 0.5),
        percentile_us(&mostly.reader_waits, 0.99),
        percentile_us(&mostly.writer_waits, 0.5),
        percentile_us(&mostly.writer_waits, 0.99),
        read_mostly_hold_us,
        leases_per_s,
        percentile_us(&lease_waits, 0.5),
        percentile_us(&lease_waits, 0.99),
    );
    let json = format!(
        "{}{}}}",
        json.strip_suffix('}').unwrap(),
        scale::json_fields(&scale_runs) + &many::json_fields(&many_runs)
    );
    println!("{}", json.replace("NaN", "null"));
}

#[cfg(test)]
mod tests {
    use super::OpSequence;

    /// The first operations of sessions 0-2, as CuratorBench.java and bench.py make them: every
    /// impl runs the same read-mostly sequence.
    #[test]
    fn op_sequence_matches_the_other_impls() {
        let expected = [
            ("rrWrrrrrWWrWrrrrrrrrrrrrrrrrrrrrrrrWrrrr", 97),
            ("WrrrrrrrrrrrrrrrrWrrrrrrrrrrrrrrrrrrrrrr", 78),
            ("rrrrrrrWrrWrrrrrWrrrrrrrrrrrrrrrrrrrrrrr", 95),
        ];
        for (session, (start, writes_in_1000)) in expected.into_iter().enumerate() {
            let mut sequence = OpSequence::for_session(session);
            let ops: Vec<bool> = (0..1000).map(|_| sequence.next_is_write()).collect();
            let shown: String = ops[..40].iter().map(|&write| if write { 'W' } else { 'r' }).collect();
            assert_eq!(shown, start, "session {session}");
            assert_eq!(ops.iter().filter(|&&write| write).count(), writes_in_1000, "session {session}");
        }
    }
}
