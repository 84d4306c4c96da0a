//! Client CPU per cycle, user and system, and throughput, in alternating rounds: zklock's
//! acquire+release; the raw floor (create+delete with the same ZooKeeper client); and the floor
//! plus the listing the recipe pipelines behind the create (what one uncontended cycle must send,
//! with no lock code). CPU time, unlike throughput, barely moves when the machine is busy, so this
//! finds client-side overhead that a noisy 2-core box hides; many short rounds give medians.
//!
//!   scripts/zk run -- cargo run --release -p zklock-bench --example client_cost
//!   N (cycles per phase and round, default 3000), ROUNDS (default 3),
//!   ONLY=lock|floor|listed (one phase only; e.g. under strace -c -f)
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use zklock::{Client, Owner};
use zookeeper_client as zk;

/// Counts allocations: a cycle's allocations are client CPU that no request needs.
struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// User and system CPU, and context switches (voluntary + involuntary: each is a thread put to
/// sleep or woken, which on a 2-core VM costs more latency than the code between them).
fn cpu() -> (Duration, Duration, i64, u64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let us = |t: libc::timeval| Duration::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64);
    (us(usage.ru_utime), us(usage.ru_stime), usage.ru_nvcsw + usage.ru_nivcsw, ALLOCS.load(Ordering::Relaxed))
}
fn per(a: (Duration, Duration, i64, u64), b: (Duration, Duration, i64, u64), n: u32) -> String {
    format!(
        "usr {:.0} sys {:.0} csw {:.1} allocs {:.1}",
        (b.0 - a.0).as_secs_f64() * 1e6 / n as f64,
        (b.1 - a.1).as_secs_f64() * 1e6 / n as f64,
        (b.2 - a.2) as f64 / n as f64,
        (b.3 - a.3) as f64 / n as f64
    )
}

/// TCP_NODELAY on every TCP socket of the process, so the raw client pipelines as zklock's does
/// (zklock sets it on its own connections; `zookeeper-client` leaves Nagle on).
fn nodelay_everywhere() {
    for entry in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else { continue };
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on a descriptor of ours; it fails harmlessly on anything but TCP.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
}

#[tokio::main]
async fn main() {
    let connect = std::env::var("ZK_CONNECT").unwrap();
    let n: u32 = std::env::var("N").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let base = format!("/probe/{}", std::process::id());
    let client = Client::connect(&connect).await.unwrap();
    let lock = client.lock(&format!("{base}/lock")).unwrap();
    let owner = Owner::new(1);
    let zkc = zk::Client::connect(&connect).await.unwrap();
    zkc.mkdir(&format!("{base}/floor"), &zk::CreateMode::Container.with_acls(zk::Acls::anyone_all())).await.unwrap();
    nodelay_everywhere();
    let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let data = [b'x'; 110];
    let prefix = format!("{base}/floor/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-");
    let rounds: u32 = std::env::var("ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    for round in 0..rounds {
        let (c0, t0) = (cpu(), Instant::now());
        let only = std::env::var("ONLY").unwrap_or_default();
        for _ in 0..if only.is_empty() || only == "lock" { n } else { 0 } {
            let g = lock.acquire(&owner).await.unwrap();
            g.release().await.unwrap();
        }
        let (c1, t1) = (cpu(), Instant::now());
        for _ in 0..if only.is_empty() || only == "floor" { n } else { 0 } {
            let (_, seq) = zkc.create(&prefix, &data, &mode).await.unwrap();
            zkc.delete(&format!("{prefix}{seq}"), None).await.unwrap();
        }
        let (c2, t2) = (cpu(), Instant::now());
        let parent = format!("{base}/floor");
        for _ in 0..if only.is_empty() || only == "listed" { n } else { 0 } {
            let create = zkc.create(&prefix, &data, &mode);
            let listing = zkc.list_children(&parent);
            let (_, seq) = create.await.unwrap();
            std::hint::black_box(listing.await.unwrap());
            zkc.delete(&format!("{prefix}{seq}"), None).await.unwrap();
        }
        let (c3, t3) = (cpu(), Instant::now());
        println!(
            "round {round}: lock {} us/cycle {:.0}/s | floor {} {:.0}/s | floor+listing {} {:.0}/s",
            per(c0, c1, n),
            n as f64 / (t1 - t0).as_secs_f64(),
            per(c1, c2, n),
            n as f64 / (t2 - t1).as_secs_f64(),
            per(c2, c3, n),
            n as f64 / (t3 - t2).as_secs_f64()
        );
    }
}
