//! The scale workload (bench/README.md): N waiters in one process queue on one lock through one
//! client, behind a gate holder; then the whole chain of handoffs is timed. Measures what a
//! long queue costs: handoffs/s, the process's peak RSS, the server's watches while queued (the
//! `wchs` four-letter word), FIFO order and mutual exclusion.
//!
//! The queue is counted on the server (`dump`: the ephemeral nodes under the lock path), not
//! through the lock, so the figures depend on nothing inside the recipe.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zklock::binding::LockBinding;
use zklock::{Client, Owner};

/// One N's figures, or why there are none.
pub struct ScaleRun {
    pub waiters: usize,
    pub outcome: Result<ScaleFigures, String>,
}

pub struct ScaleFigures {
    pub handoffs_per_s: f64,
    pub peak_rss_mb: f64,
    pub queued_rss_mb: f64,
    pub watches: Option<u64>,
    pub queue_s: f64,
    pub fifo: bool,
    pub overlaps: u64,
}

/// The N of `BENCH_SCALE_WAITERS` (default 1000,5000,10000).
pub fn waiters_from_env() -> Vec<usize> {
    let list = std::env::var("BENCH_SCALE_WAITERS").unwrap_or_default();
    let list = if list.trim().is_empty() { "1000,5000,10000".to_string() } else { list };
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("BENCH_SCALE_WAITERS: a comma-separated list of counts"))
        .collect()
}

/// `BENCH_SCALE_TIMEOUT` (seconds, default 300): the bound on one N's run, queueing included.
pub fn timeout_from_env() -> Duration {
    let secs = std::env::var("BENCH_SCALE_TIMEOUT").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(300.0);
    Duration::from_secs_f64(secs)
}

/// The JSON fields of the runs, each prefixed `,` (to follow the other fields).
pub fn json_fields(runs: &[ScaleRun]) -> String {
    let mut out = String::new();
    for run in runs {
        let n = run.waiters;
        match &run.outcome {
            Ok(f) => {
                let watches = f.watches.map_or("null".to_string(), |w| w.to_string());
                out += &format!(",\"scale_{n}_handoffs_per_s\":{:.1}", f.handoffs_per_s);
                out += &format!(",\"scale_{n}_peak_rss_mb\":{:.1}", f.peak_rss_mb);
                out += &format!(",\"scale_{n}_queued_rss_mb\":{:.1}", f.queued_rss_mb);
                out += &format!(",\"scale_{n}_watches\":{watches}");
                out += &format!(",\"scale_{n}_queue_s\":{:.2}", f.queue_s);
                out += &format!(",\"scale_{n}_fifo\":{},\"scale_{n}_overlaps\":{}", f.fifo, f.overlaps);
            }
            Err(why) => out += &format!(",\"scale_{n}_error\":{}", json_string(why)),
        }
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if (c as u32) < 0x20 => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out + "\""
}

/// A line of /proc/self/status (VmRSS, VmHWM), in MB.
pub fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Sends a four-letter word to the first server of `connect` and returns its reply.
fn four_letter(connect: &str, word: &str) -> std::io::Result<String> {
    let first = connect.split(',').next().unwrap_or(connect);
    let address = first.split('/').next().unwrap_or(first);
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(word.as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

async fn four(connect: &str, word: &'static str) -> std::io::Result<String> {
    let connect = connect.to_string();
    tokio::task::spawn_blocking(move || four_letter(&connect, word)).await.expect("four-letter word task")
}

/// The lock nodes under `path` on the server: the ephemerals that `dump` lists there.
async fn queued_on_server(connect: &str, path: &str) -> std::io::Result<usize> {
    let prefix = format!("{path}/");
    let dump = four(connect, "dump").await?;
    // With a chroot the server names the full path: match the end.
    Ok(dump
        .lines()
        .filter(|line| line.trim().rsplit_once('/').is_some_and(|(parent, _)| format!("{parent}/").ends_with(&prefix)))
        .count())
}

/// The server's total watches (`wchs`: "Total watches:N").
async fn server_watches(connect: &str) -> std::io::Result<u64> {
    let reply = four(connect, "wchs").await?;
    reply
        .lines()
        .find_map(|line| line.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no watch count in the wchs reply: {reply:?}")))
}

/// The watch count once it stops changing (three equal samples 200 ms apart, at most 30 s):
/// the waiters set their watches after their creates.
async fn settled_watches(connect: &str, deadline: Instant) -> std::io::Result<u64> {
    let until = (Instant::now() + Duration::from_secs(30)).min(deadline);
    let mut last = server_watches(connect).await?;
    let mut same = 1;
    while same < 3 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = server_watches(connect).await?;
        same = if now == last { same + 1 } else { 1 };
        last = now;
    }
    Ok(last)
}

/// One N: a gate holder takes the lock; N tasks (clones of one Lock, one Owner each) begin
/// their acquisitions in index order, so their creates reach the server in that order; once
/// all N nodes are queued and the watches settled, the gate is released and the chain timed
/// until the last waiter has released.
pub async fn run(client: &Client, connect: &str, path: &str, waiters: usize, timeout: Duration) -> ScaleRun {
    let deadline = Instant::now() + timeout;
    let (queued, released) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let chain = chain(client, connect, path, waiters, deadline, queued.clone(), released.clone());
    let outcome = match tokio::time::timeout(timeout, chain).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!(
            "timed out after {:.0} s (BENCH_SCALE_TIMEOUT) with {} of {waiters} queued, {} handoffs done",
            timeout.as_secs_f64(),
            queued.load(Ordering::SeqCst),
            released.load(Ordering::SeqCst)
        )),
    };
    ScaleRun { waiters, outcome }
}

async fn chain(
    client: &Client,
    connect: &str,
    path: &str,
    waiters: usize,
    deadline: Instant,
    queued_seen: Arc<AtomicU64>,
    released: Arc<AtomicU64>,
) -> Result<ScaleFigures, String> {
    let lock = client.lock(path).map_err(|e| e.to_string())?;
    let gate_owner = Owner::unique();
    let gate = lock.acquire(&gate_owner).await.map_err(|e| format!("gate acquire: {e}"))?;
    // Who is inside: the gate holder until it releases, then each waiter in turn.
    let inside = Arc::new(AtomicU64::new(1));
    let overlaps = Arc::new(AtomicU64::new(0));
    let order = Arc::new(Mutex::new(Vec::with_capacity(waiters)));

    let queueing = Instant::now();
    let mut tasks = Vec::with_capacity(waiters);
    for index in 0..waiters {
        let owner = Owner::unique();
        // Begun here, in index order: the create is sent (or queued behind earlier ones) now.
        let acquire = lock.begin_acquire(&owner, None);
        let (lock, inside, overlaps, released, order) =
            (lock.clone(), inside.clone(), overlaps.clone(), released.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            acquire.await.map_err(|e| format!("waiter {index}: {e}"))?;
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            order.lock().unwrap().push(index);
            // Let any other task run while this one holds: a second holder would be seen.
            tokio::task::yield_now().await;
            inside.fetch_sub(1, Ordering::SeqCst);
            lock.release(&owner).await.map_err(|e| format!("waiter {index} release: {e}"))?;
            released.fetch_add(1, Ordering::SeqCst);
            Ok::<(), String>(())
        }));
    }
    let mut queued = 0;
    while queued < waiters + 1 {
        // Each queued waiter watches the node ahead: the cheap watch count gates the listing of
        // every ephemeral (megabytes of reply, ten times a second, in the process measured).
        if server_watches(connect).await.map_err(|e| format!("wchs: {e}"))? >= waiters as u64 {
            queued = queued_on_server(connect, path).await.map_err(|e| format!("dump: {e}"))?;
            queued_seen.store(queued.saturating_sub(1) as u64, Ordering::SeqCst);
        }
        if queued < waiters + 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let queue_s = queueing.elapsed().as_secs_f64();
    let watches = settled_watches(connect, deadline).await.ok();
    let queued_rss_mb = status_mb("VmRSS");
    eprintln!("[zklock] scale {waiters}: queued in {queue_s:.2} s; {watches:?} watches; RSS {queued_rss_mb:.1} MB");

    let handoffs_from = Instant::now();
    inside.fetch_sub(1, Ordering::SeqCst);
    gate.release().await.map_err(|e| format!("gate release: {e}"))?;
    for task in tasks {
        task.await.map_err(|e| format!("waiter task: {e}"))??;
    }
    let elapsed = handoffs_from.elapsed().as_secs_f64();
    let order = order.lock().unwrap();
    let figures = ScaleFigures {
        handoffs_per_s: waiters as f64 / elapsed,
        peak_rss_mb: status_mb("VmHWM"),
        queued_rss_mb,
        watches,
        queue_s,
        fifo: order.iter().copied().eq(0..waiters),
        overlaps: overlaps.load(Ordering::SeqCst),
    };
    eprintln!(
        "[zklock] scale {waiters}: {:.1} handoffs/s ({} released in {elapsed:.2} s); peak RSS {:.1} MB; FIFO {}; \
         overlaps {}",
        figures.handoffs_per_s,
        released.load(Ordering::SeqCst),
        figures.peak_rss_mb,
        figures.fifo,
        figures.overlaps
    );
    Ok(figures)
}
