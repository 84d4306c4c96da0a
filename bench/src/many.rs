//! The many_locks workload (bench/README.md, issue 52): N distinct paths on one client, each with
//! its own task looping acquire and release of its own lock, as a service locks per entity; and
//! the floor: the same three requests per cycle (create a lock-shaped node, list its parent,
//! delete it) pipelined by the bare ZooKeeper client with N in flight and no lock code.
//!
//! Figures per N: total cycles/s over the measured phase, acquire p50/p99, the process's CPU
//! (user + system) per cycle, its peak RSS, and the memory of an idle held lock: the RSS with
//! N locks (new `Lock`s) held and idle over that before, per lock, and what is left of it once
//! they are released and dropped.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::{Client, Owner};
use zookeeper_client as zk;

use crate::scale::status_mb;

/// The longest warm-up: until every loop has finished a cycle, at most this long.
const WARMUP_BOUND: Duration = Duration::from_secs(120);

/// The N of `BENCH_MANY_PATHS` (default 16,200,1000,10000).
pub fn paths_from_env() -> Vec<usize> {
    let list = std::env::var("BENCH_MANY_PATHS").unwrap_or_default();
    let list = if list.trim().is_empty() { "16,200,1000,10000".to_string() } else { list };
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("BENCH_MANY_PATHS: a comma-separated list of counts"))
        .collect()
}

pub struct ManyFigures {
    pub paths: usize,
    pub cycles_per_s: f64,
    pub acquire: Vec<Duration>,
    pub cpu_us_per_cycle: f64,
    pub peak_rss_mb: f64,
    /// RSS with N idle held locks over that before, per lock (KB); NaN for the floor.
    pub held_kb_per_lock: f64,
    /// What of it is left once they are released and dropped, per lock (KB).
    pub kept_kb_per_lock: f64,
}

/// The process's context switches so far (voluntary + involuntary, all threads).
fn context_switches() -> u64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

/// The process's CPU time so far (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs `n` loops (each `cycle(i)` returns its acquire time) for `warmup`, then counts for
/// `measure`: (cycles/s, the acquire times of the measured phase, CPU per cycle in µs).
async fn drive<F, Fut>(n: usize, warmup: Duration, measure: Duration, cycle: F) -> (f64, Vec<Duration>, f64)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Duration> + Send,
{
    let cycle = Arc::new(cycle);
    let (count, measuring, stop) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    // Loops that have finished a cycle: the warm-up lasts until all have (with 10,000 paths one
    // cycle takes seconds), and at least `warmup`.
    let warmed = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (cycle, count, measuring, stop, warmed) =
            (cycle.clone(), count.clone(), measuring.clone(), stop.clone(), warmed.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut first = true;
            while !stop.load(Ordering::Relaxed) {
                let acquire = cycle(i).await;
                // The cycles that end in the measured phase.
                if measuring.load(Ordering::Relaxed) {
                    samples.push(acquire);
                    count.fetch_add(1, Ordering::Relaxed);
                }
                if std::mem::take(&mut first) {
                    warmed.fetch_add(1, Ordering::Relaxed);
                }
            }
            samples
        }));
    }
    let warming = Instant::now();
    tokio::time::sleep(warmup).await;
    while warmed.load(Ordering::Relaxed) < n as u64 && warming.elapsed() < WARMUP_BOUND {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (cpu0, switches0, trims0, started) =
        (cpu_time(), context_switches(), zklock::times_given_back(), Instant::now());
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(measure).await;
    measuring.store(false, Ordering::Relaxed);
    let (elapsed, cpu) = (started.elapsed(), cpu_time() - cpu0);
    let cycles = count.load(Ordering::Relaxed);
    if std::env::var_os("BENCH_MANY_SWITCHES").is_some() {
        let switches = context_switches() - switches0;
        let trims = zklock::times_given_back() - trims0;
        eprintln!(
            "[many] {n} paths: {:.2} context switches per cycle, {trims} trims, {cycles} cycles",
            switches as f64 / cycles.max(1) as f64
        );
    }
    stop.store(true, Ordering::Relaxed);
    let mut acquire = Vec::new();
    for task in tasks {
        acquire.extend(task.await.unwrap());
    }
    acquire.sort_unstable();
    let per_cycle = if cycles == 0 { f64::NAN } else { cpu.as_secs_f64() * 1e6 / cycles as f64 };
    (cycles as f64 / elapsed.as_secs_f64(), acquire, per_cycle)
}

/// zklock: N tasks, one `Lock` each on its own path, one client.
pub async fn locks(client: &Client, base: &str, n: usize, warmup: Duration, measure: Duration) -> ManyFigures {
    // First, while the process has allocated little else (a fresh process per N in scripts/bench).
    let (held_kb_per_lock, kept_kb_per_lock) = idle_held(client, base, n).await;
    let locks: Arc<Vec<zklock::Lock>> =
        Arc::new((0..n).map(|i| client.lock(&format!("{base}/many-{n}/p{i}")).unwrap()).collect());
    let owner = Owner::new(1);
    let cycle = {
        let locks = locks.clone();
        move |i: usize| {
            let (locks, owner) = (locks.clone(), owner.clone());
            async move {
                let t0 = Instant::now();
                let guard = locks[i].acquire(&owner).await.unwrap();
                let acquired = t0.elapsed();
                guard.release().await.unwrap();
                acquired
            }
        }
    };
    let (cycles_per_s, acquire, cpu_us_per_cycle) = drive(n, warmup, measure, cycle).await;
    drop(locks);
    ManyFigures {
        paths: n,
        cycles_per_s,
        acquire,
        cpu_us_per_cycle,
        peak_rss_mb: status_mb("VmHWM"),
        held_kb_per_lock,
        kept_kb_per_lock,
    }
}

/// The memory of an idle held lock: N new `Lock`s on new paths, each acquired and left idle; the
/// RSS then over that before, per lock; then each released and dropped, and what is left.
async fn idle_held(client: &Client, base: &str, n: usize) -> (f64, f64) {
    let before = status_mb("VmRSS");
    let owner = Owner::new(2);
    let mut guards = Vec::with_capacity(n);
    // A bounded window of acquisitions in flight, as a service would take them.
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..n {
        let lock = client.lock(&format!("{base}/held-{n}/p{i}")).unwrap();
        let owner = owner.clone();
        pending.spawn(async move { lock.acquire(&owner).await.unwrap() });
        if pending.len() >= 256 {
            guards.push(pending.join_next().await.unwrap().unwrap());
        }
    }
    while let Some(guard) = pending.join_next().await {
        guards.push(guard.unwrap());
    }
    let held = status_mb("VmRSS");
    let mut releasing = tokio::task::JoinSet::new();
    for guard in guards.drain(..) {
        releasing.spawn(async move { guard.release().await.unwrap() });
        if releasing.len() >= 256 {
            releasing.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(done) = releasing.join_next().await {
        done.unwrap();
    }
    drop(guards);
    // Let the client's tasks settle (the release's last replies) before reading the RSS.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = status_mb("VmRSS");
    let per = |mb: f64| mb * 1024.0 / n as f64;
    (per(held - before), per(after - before))
}

/// The floor: N tasks on one bare `zookeeper-client`, each looping create (lock-shaped:
/// ephemeral sequential, Curator-style name, 110 bytes) with its parent's listing pipelined
/// behind it, then delete, each on its own parent: the requests of an uncontended cycle with no
/// lock code.
pub async fn floor(zk: zk::Client, base: &str, n: usize, warmup: Duration, measure: Duration) -> ManyFigures {
    let zk = Arc::new(zk);
    let parents: Arc<Vec<String>> = Arc::new((0..n).map(|i| format!("{base}/floor-{n}/p{i}")).collect());
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    for parent in parents.iter() {
        // Made up front (the lock makes them on its first NoNode): not part of the cycle.
        match zk.create(parent, &[], &container).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(zk::Error::NoNode) => zk.mkdir(parent, &container).await.unwrap(),
            Err(err) => panic!("floor parent: {err}"),
        }
    }
    let cycle = move |i: usize| {
        let (zk, parents) = (zk.clone(), parents.clone());
        async move {
            let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
            let parent = &parents[i];
            let prefix = format!("{parent}/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-");
            let t0 = Instant::now();
            let create = zk.create(&prefix, &[b'x'; 110], &mode);
            let listing = zk.list_children(parent);
            let (_, sequence) = create.await.unwrap();
            std::hint::black_box(listing.await.unwrap());
            let acquired = t0.elapsed();
            zk.delete(&format!("{prefix}{sequence}"), None).await.unwrap();
            acquired
        }
    };
    let (cycles_per_s, acquire, cpu_us_per_cycle) = drive(n, warmup, measure, cycle).await;
    ManyFigures {
        paths: n,
        cycles_per_s,
        acquire,
        cpu_us_per_cycle,
        peak_rss_mb: status_mb("VmHWM"),
        held_kb_per_lock: f64::NAN,
        kept_kb_per_lock: f64::NAN,
    }
}

/// The JSON fields of the runs, each prefixed `,`: `many_<N>_<figure>`.
pub fn json_fields(runs: &[ManyFigures]) -> String {
    let mut out = String::new();
    for f in runs {
        let n = f.paths;
        let p = |q| crate::percentile_us(&f.acquire, q);
        out += &format!(",\"many_{n}_cycles_per_s\":{:.1}", f.cycles_per_s);
        out += &format!(",\"many_{n}_acquire_p50_us\":{:.1},\"many_{n}_acquire_p99_us\":{:.1}", p(0.5), p(0.99));
        out += &format!(",\"many_{n}_cpu_us_per_cycle\":{:.1}", f.cpu_us_per_cycle);
        out += &format!(",\"many_{n}_peak_rss_mb\":{:.1}", f.peak_rss_mb);
        out += &format!(",\"many_{n}_held_kb_per_lock\":{:.2}", f.held_kb_per_lock);
        out += &format!(",\"many_{n}_kept_kb_per_lock\":{:.2}", f.kept_kb_per_lock);
    }
    out
}
