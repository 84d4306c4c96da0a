//! The README demo: several worker processes contend for one lock; each prints a line per hold,
//! and the coordinator prints the order in which they held it with their fencing tokens, and
//! checks that no two holds overlapped and that tokens rose in the order of holding.
//!
//! `zklock-demo` coordinates (workers = copies of itself); `zklock-demo worker NAME ROUNDS` is
//! one worker. Other programs (the C example, say) join by printing the same `HELD` lines: list
//! their commands, one per line, in `DEMO_EXTRA_WORKERS`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zklock::{Client, Owner};

const LOCK_PATH: &str = "/zklock-demo/lock";
const WORKERS: usize = 4;
const ROUNDS: usize = 3;

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()
}

async fn worker(name: &str, rounds: usize) -> zklock::Result<()> {
    let connect = std::env::var("ZK_CONNECT").expect("ZK_CONNECT");
    let client = Client::connect(&connect).await?;
    let lock = client.lock(LOCK_PATH)?;
    let me = Owner::with_label(std::process::id() as u64, name);
    for _ in 0..rounds {
        let guard = lock.acquire(&me).await?;
        let entered = now_us();
        // The protected work: hold briefly so the others queue up behind us.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let exited = now_us();
        println!(
            "HELD {name} {} {} {} {entered} {exited} rust",
            std::process::id(),
            guard.fencing_token(),
            guard.hold().sequence()
        );
        guard.release().await?;
    }
    client.close().await;
    Ok(())
}

struct HeldLine {
    name: String,
    pid: u32,
    token: i64,
    sequence: i64,
    entered: u128,
    exited: u128,
    language: String,
}

fn parse(line: &str) -> Option<HeldLine> {
    let fields: Vec<&str> = line.strip_prefix("HELD ")?.split_whitespace().collect();
    Some(HeldLine {
        name: fields.first()?.to_string(),
        pid: fields.get(1)?.parse().ok()?,
        token: fields.get(2)?.parse().ok()?,
        sequence: fields.get(3)?.parse().ok()?,
        entered: fields.get(4)?.parse().ok()?,
        exited: fields.get(5)?.parse().ok()?,
        language: fields.get(6).unwrap_or(&"?").to_string(),
    })
}

fn coordinate() -> i32 {
    let connect = std::env::var("ZK_CONNECT").expect("ZK_CONNECT (scripts/demo starts a server and sets it)");
    let me = std::env::current_exe().unwrap();
    let mut commands: Vec<Command> = (0..WORKERS)
        .map(|i| {
            let mut command = Command::new(&me);
            command.args(["worker", &format!("rust-{i}"), &ROUNDS.to_string()]);
            command
        })
        .collect();
    for extra in std::env::var("DEMO_EXTRA_WORKERS").unwrap_or_default().lines().filter(|l| !l.trim().is_empty()) {
        let mut command = Command::new("sh");
        command.args(["-c", extra]);
        commands.push(command);
    }
    let extras = commands.len() - WORKERS;
    println!(
        "zklock demo: {WORKERS} Rust processes{} x {ROUNDS} rounds contend for {LOCK_PATH} on {connect}",
        if extras > 0 { format!(" and {extras} in other languages") } else { String::new() }
    );
    let children: Vec<_> =
        commands.iter_mut().map(|command| command.stdout(Stdio::piped()).spawn().expect("spawn a worker")).collect();
    let mut held = Vec::new();
    let mut failed = false;
    for mut child in children {
        let stdout = child.stdout.take().unwrap();
        held.extend(BufReader::new(stdout).lines().map_while(Result::ok).filter_map(|line| parse(&line)));
        failed |= !child.wait().map(|status| status.success()).unwrap_or(false);
    }
    held.sort_by_key(|h| h.entered);

    println!(
        "\n{:>5}  {:<10} {:>8} {:<6} {:>14} {:>12}",
        "order", "worker", "pid", "lang", "fencing token", "sequence"
    );
    for (i, h) in held.iter().enumerate() {
        println!("{:>5}  {:<10} {:>8} {:<6} {:>14} {:>12}", i + 1, h.name, h.pid, h.language, h.token, h.sequence);
    }
    let overlaps = held.windows(2).filter(|w| w[1].entered < w[0].exited).count();
    let rising = held.windows(2).all(|w| w[1].token > w[0].token);
    println!(
        "\n{} holds; overlapping holds: {overlaps}; fencing tokens rise in holding order: {}",
        held.len(),
        if rising { "yes" } else { "NO" }
    );
    if failed || overlaps > 0 || !rising || held.is_empty() {
        eprintln!("demo FAILED");
        return 1;
    }
    0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let name = args.get(2).cloned().unwrap_or_else(|| "worker".into());
        let rounds = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(ROUNDS);
        if let Err(err) = worker(&name, rounds).await {
            eprintln!("{name}: {err}");
            std::process::exit(1);
        }
        return;
    }
    std::process::exit(coordinate());
}
