//! What one waiter costs the client in memory: N acquisitions queued on one lock held by a gate,
//! then the live heap (a counting allocator), the allocations made, and RSS, per waiter; then the
//! chain runs out and the peak RSS is printed. Finds where a long queue's memory goes without a
//! heap profiler.
//!
//!   scripts/zk run -- cargo run --release -p zklock-bench --example waiter_cost
//!   N (waiters, default 10000)
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use zklock::binding::LockBinding;
use zklock::{Client, Owner};

struct Counting;
static LIVE: AtomicI64 = AtomicI64::new(0);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .map_or(f64::NAN, |kb: f64| kb / 1024.0)
}

fn report(what: &str, n: usize, base: (i64, u64)) {
    let (live, allocs) = (LIVE.load(Ordering::Relaxed), ALLOCS.load(Ordering::Relaxed));
    eprintln!(
        "{what}: live heap {:.1} MB ({:.0} B per waiter), {:.1} allocations per waiter, RSS {:.1} MB",
        live as f64 / 1e6,
        (live - base.0) as f64 / n as f64,
        (allocs - base.1) as f64 / n as f64,
        status_mb("VmRSS")
    );
}

#[tokio::main]
async fn main() {
    let connect = std::env::var("ZK_CONNECT").expect("ZK_CONNECT");
    let n: usize = std::env::var("N").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let client = Client::connect(&connect).await.unwrap();
    let lock = client.lock(&format!("/waiter-cost/{}", std::process::id())).unwrap();
    let gate = lock.acquire(&Owner::unique()).await.unwrap();
    let base = (LIVE.load(Ordering::Relaxed), ALLOCS.load(Ordering::Relaxed));
    report("before", n, base);
    let done = std::sync::Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let owner = Owner::unique();
        let acquire = lock.begin_acquire(&owner, None);
        let (lock, done) = (lock.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            acquire.await.unwrap();
            lock.release(&owner).await.unwrap();
            done.fetch_add(1, Ordering::Relaxed);
        }));
    }
    report("begun", n, base);
    // Counted from a second session: the first one's is busy with the creates.
    let observer = Client::connect(&connect).await.unwrap();
    let watching = observer.lock(lock.path()).unwrap();
    while watching.contenders().await.unwrap().len() < n + 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    report("queued", n, base);
    if let Some(secs) = std::env::var("HOLD_QUEUED_SECS").ok().and_then(|s| s.parse().ok()) {
        // For a heap profiler's snapshots of the queue at rest.
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    gate.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    report("done", n, base);
    eprintln!("peak RSS {:.1} MB", status_mb("VmHWM"));
    client.close().await;
}
