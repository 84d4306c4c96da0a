//! The chaos soak's orchestrator (run it through `scripts/chaos`, which builds everything and
//! explains the options): a real 3-server ensemble, one fault proxy per server in front of each
//! contender process, the fenced resource (`chaos-resource`), contenders in every language, and
//! faults injected from a plan drawn from one seed. At the end it heals everything, shuts the
//! contenders down, counts the lock nodes left, prints the figures (and writes them as JSON), and
//! exits non-zero if one that must be 0 is not.
//!
//! Exit status: 0 all figures good, 1 a must-be-0 figure is not 0 (or a language made no
//! handoff), 2 bad arguments or the soak itself could not run.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use zklock_testkit::chaos::census::Census;
use zklock_testkit::chaos::{
    contender_seed, SplitMix64, MUTEX_PATH, RW_PATH, SASL_CONTENDER, SASL_OPERATOR, SEMAPHORE_MAX,
};
use zklock_testkit::{txnlog, Cluster, ProxiedCluster};

const LANGS: [&str; 7] = ["rust", "c", "python", "node", "curator", "curator57", "kazoo"];
/// The peers' languages (Curator 5.4, Curator 5.7.1, kazoo): their figures are reported apart and
/// do not fail the soak (a zombie write let through by the fence does, whoever wrote it).
const PEERS: [&str; 3] = ["curator", "curator57", "kazoo"];

fn is_peer(lang: &str) -> bool {
    PEERS.contains(&lang)
}
/// Contenders get this long to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(10);
/// The main loop's longest nap between looking at contenders, faults and the clock.
const TICK: Duration = Duration::from_millis(50);
/// Before the first fault: the contenders (JVMs included) start up and make their first holds.
const WARM_UP: Duration = Duration::from_secs(3);
/// A planned fault that does not apply when due (say, a kill of a holder while no one holds) is
/// tried again for this long.
const RETRY_FOR: Duration = Duration::from_secs(3);
/// A contender that exits this soon after starting, 3 times in a row, cannot run: give up.
const QUICK_CRASH: Duration = Duration::from_secs(5);
/// A pinned fault waits this long for its contender to begin the pinned hold, else is skipped.
const PIN_WAIT: Duration = Duration::from_secs(10);
/// A pinned hold lasts the fault, then the session timeout and this much more: a short fault's
/// hold must go on holding after it (no overlap), a long fault's hold must be told lost during it.
const PIN_MARGIN: Duration = Duration::from_millis(500);

fn usage() -> &'static str {
    "usage: chaos [--minutes M] [--handoffs N] [--seed S] [--json FILE] [--contenders-per-lang K]\n\
     \x20            [--session-timeout-ms MS] [--langs rust,c,python,node,curator,curator57,kazoo] [--pace normal|fast]\n\
     \x20            [--sasl required|off] [--contender LANG=COMMAND]... [--bin-dir DIR] [--dir RUN_DIR]"
}

fn fail_usage(msg: &str) -> ! {
    eprintln!("chaos: {msg}\n{}", usage());
    std::process::exit(2);
}

fn fatal(msg: &str) -> ! {
    eprintln!("chaos: FATAL: {msg}");
    std::process::exit(2);
}

// ------------------------------------------------------------------------------------ options

struct Options {
    minutes: f64,
    handoffs: Option<u64>,
    seed: u64,
    seed_given: bool,
    json: Option<PathBuf>,
    per_lang: usize,
    session_timeout: Duration,
    langs: Vec<String>,
    langs_given: bool,
    commands: BTreeMap<String, Vec<String>>,
    bin_dir: PathBuf,
    run_dir: Option<PathBuf>,
    /// `--pace fast`: contenders sleep [0, 3] ms after an operation and [0, 5] ms between
    /// iterations instead of [0, 30] and [0, 50], for more handoffs per second.
    fast: bool,
    /// `--sasl required` (the default): the servers require SASL (`enforce.auth.enabled`, schemes
    /// sasl) and every client authenticates with DIGEST-MD5: contenders, census and operator.
    /// `--sasl off`: no SASL at all.
    sasl_required: bool,
}

fn parse_options() -> Options {
    let mut args = std::env::args().skip(1);
    let bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let mut o = Options {
        minutes: 3.0,
        handoffs: None,
        seed: 0,
        seed_given: false,
        json: None,
        per_lang: 2,
        session_timeout: Duration::from_millis(4000),
        langs: Vec::new(),
        langs_given: false,
        commands: BTreeMap::new(),
        bin_dir,
        run_dir: None,
        fast: false,
        sasl_required: true,
    };
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            println!("{}", usage());
            std::process::exit(0);
        }
        let (flag, value) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") && f != "--contender" => (f.to_string(), v.to_string()),
            _ => {
                let v = args.next().unwrap_or_else(|| fail_usage(&format!("{flag} needs a value")));
                (flag, v)
            }
        };
        let num = |what: &str| -> f64 {
            value
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .unwrap_or_else(|| fail_usage(&format!("{what} wants a positive number, got {value:?}")))
        };
        match flag.as_str() {
            "--minutes" => o.minutes = num("--minutes"),
            "--handoffs" => o.handoffs = Some(num("--handoffs") as u64),
            "--seed" => {
                o.seed =
                    value.parse().unwrap_or_else(|_| fail_usage(&format!("--seed wants an integer, got {value:?}")));
                o.seed_given = true;
            }
            "--json" => o.json = Some(PathBuf::from(value)),
            "--contenders-per-lang" => o.per_lang = num("--contenders-per-lang") as usize,
            "--session-timeout-ms" => o.session_timeout = Duration::from_millis(num("--session-timeout-ms") as u64),
            "--langs" => {
                o.langs = value.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                o.langs_given = true;
            }
            "--contender" => {
                let (lang, command) = value
                    .split_once('=')
                    .unwrap_or_else(|| fail_usage(&format!("--contender {value:?}: want LANG=COMMAND")));
                let words: Vec<String> = command.split(' ').filter(|w| !w.is_empty()).map(String::from).collect();
                if words.is_empty() {
                    fail_usage(&format!("--contender {value:?}: empty command"));
                }
                o.commands.insert(lang.to_string(), words);
            }
            "--bin-dir" => o.bin_dir = PathBuf::from(value),
            "--dir" => o.run_dir = Some(PathBuf::from(value)),
            "--sasl" => {
                o.sasl_required = match value.as_str() {
                    "required" => true,
                    "off" => false,
                    _ => fail_usage(&format!("--sasl wants required or off, got {value:?}")),
                }
            }
            "--pace" => {
                o.fast = match value.as_str() {
                    "normal" => false,
                    "fast" => true,
                    _ => fail_usage(&format!("--pace wants normal or fast, got {value:?}")),
                }
            }
            other => fail_usage(&format!("unknown option {other:?}")),
        }
    }
    if o.per_lang == 0 {
        fail_usage("--contenders-per-lang must be at least 1");
    }
    for lang in o.commands.keys() {
        if !LANGS.contains(&lang.as_str()) {
            fail_usage(&format!("--contender: unknown language {lang:?} (one of {})", LANGS.join(", ")));
        }
    }
    o.commands
        .entry("rust".to_string())
        .or_insert_with(|| vec![o.bin_dir.join("chaos-contender").display().to_string()]);
    if !o.seed_given {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        o.seed = SplitMix64::new(nanos as u64 ^ u64::from(std::process::id())).next_u64() % 1_000_000_000;
    }
    if o.langs_given {
        for lang in &o.langs {
            if !LANGS.contains(&lang.as_str()) {
                fail_usage(&format!("--langs: unknown language {lang:?} (one of {})", LANGS.join(", ")));
            }
            if !o.commands.contains_key(lang) {
                fail_usage(&format!(
                    "--langs names {lang} but no contender command was given for it (--contender {lang}=...)"
                ));
            }
        }
    } else {
        o.langs = LANGS.iter().filter(|l| o.commands.contains_key(**l)).map(|l| l.to_string()).collect();
    }
    if o.langs.is_empty() {
        fail_usage("no language to run");
    }
    o
}

// ----------------------------------------------------------------------------------- the plan

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    LeaderKill,
    FollowerPause,
    EnsemblePause,
    ClientCut,
    ClientStall,
    /// One-way loss: what the contender sends is held, what the servers send is delivered.
    ClientStallUp,
    /// One-way loss: what the servers send is held, what the contender sends is delivered.
    ClientStallDown,
    ClientServerCut,
    /// An operator (a plain client) deletes the lock node of the mutex's holder: the holder must
    /// be told it lost; whether before the next holder acts is a race (see chaos-resource).
    OperatorDelete,
    KillHolding,
    KillWaiting,
    /// A contender is made to hold (PIN) across a stall of its connections shorter than the
    /// session timeout: the hold must survive.
    PinnedStallShort,
    /// ... across a stall or cut longer than the session timeout: the hold must be told lost
    /// before the next holder acts.
    PinnedStallLong,
    PinnedCutLong,
    /// ... across a one-way stall longer than the session timeout, each way.
    PinnedStallUpLong,
    PinnedStallDownLong,
}

impl Kind {
    /// Relative frequency in the plan.
    /// Pinned faults are ~30% of the client faults: only they make a hold outlive the time
    /// zklock takes to declare it lost, so only they exercise the lost-lock promise.
    const WEIGHTS: [(Kind, u64); 16] = [
        (Kind::LeaderKill, 8),
        (Kind::FollowerPause, 8),
        (Kind::EnsemblePause, 5),
        (Kind::ClientCut, 12),
        (Kind::ClientStall, 12),
        (Kind::ClientStallUp, 6),
        (Kind::ClientStallDown, 6),
        (Kind::ClientServerCut, 8),
        (Kind::OperatorDelete, 6),
        (Kind::KillHolding, 8),
        (Kind::KillWaiting, 6),
        (Kind::PinnedStallShort, 5),
        (Kind::PinnedStallLong, 5),
        (Kind::PinnedCutLong, 4),
        (Kind::PinnedStallUpLong, 3),
        (Kind::PinnedStallDownLong, 3),
    ];

    fn is_ensemble(self) -> bool {
        matches!(self, Kind::LeaderKill | Kind::FollowerPause | Kind::EnsemblePause)
    }

    fn is_pinned(self) -> bool {
        matches!(
            self,
            Kind::PinnedStallShort
                | Kind::PinnedStallLong
                | Kind::PinnedCutLong
                | Kind::PinnedStallUpLong
                | Kind::PinnedStallDownLong
        )
    }
}

/// One fault of the plan. Targets are drawn numbers (`pick`), resolved when the fault is due
/// against what exists then (the leader, the followers, the contenders holding).
#[derive(Clone, Debug)]
struct Planned {
    at: Duration,
    kind: Kind,
    pick: u64,
    /// How long the fault lasts (the leader's downtime; a contender's time dead before restart).
    duration: Duration,
}

impl Planned {
    /// Its name in the figures: client faults longer than the session timeout are told apart.
    fn key(&self, session: Duration) -> &'static str {
        let long = self.duration > session;
        match self.kind {
            Kind::LeaderKill => "leader_kill",
            Kind::FollowerPause => "follower_pause",
            Kind::EnsemblePause => "ensemble_pause",
            Kind::ClientCut if long => "client_cut_long",
            Kind::ClientCut => "client_cut",
            Kind::ClientStall if long => "client_stall_long",
            Kind::ClientStall => "client_stall",
            Kind::ClientStallUp if long => "client_stall_up_long",
            Kind::ClientStallUp => "client_stall_up",
            Kind::ClientStallDown if long => "client_stall_down_long",
            Kind::ClientStallDown => "client_stall_down",
            Kind::ClientServerCut => "client_server_cut",
            Kind::OperatorDelete => "operator_delete",
            Kind::KillHolding => "contender_kill_holding",
            Kind::KillWaiting => "contender_kill_waiting",
            Kind::PinnedStallShort => PINNED_STALL_SHORT,
            Kind::PinnedStallLong => PINNED_STALL_LONG,
            Kind::PinnedCutLong => PINNED_CUT_LONG,
            Kind::PinnedStallUpLong => PINNED_STALL_UP_LONG,
            Kind::PinnedStallDownLong => PINNED_STALL_DOWN_LONG,
        }
    }
}

const PINNED_STALL_SHORT: &str = "pinned_stall_short";
const PINNED_STALL_LONG: &str = "pinned_stall_long";
const PINNED_CUT_LONG: &str = "pinned_cut_long";
const PINNED_STALL_UP_LONG: &str = "pinned_stall_up_long";
const PINNED_STALL_DOWN_LONG: &str = "pinned_stall_down_long";
/// Pinned faults after which the hold must have been told lost.
const PINNED_LONG: [&str; 4] = [PINNED_STALL_LONG, PINNED_CUT_LONG, PINNED_STALL_UP_LONG, PINNED_STALL_DOWN_LONG];

fn plan(seed: u64, run: Duration, session: Duration) -> Vec<Planned> {
    let mut rng = SplitMix64::new(seed);
    let total: u64 = Kind::WEIGHTS.iter().map(|(_, w)| w).sum();
    let frac = |rng: &mut SplitMix64, lo: f64, hi: f64| session.mul_f64(lo + (hi - lo) * rng.unit());
    let ms = |rng: &mut SplitMix64, lo: u64, hi: u64| Duration::from_millis(rng.between(lo, hi));
    let mut at = WARM_UP;
    let mut out = Vec::new();
    loop {
        at += ms(&mut rng, 400, 2400);
        if at >= run {
            return out;
        }
        let mut roll = rng.below(total);
        let kind = Kind::WEIGHTS
            .iter()
            .find(|(_, w)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .map(|(k, _)| *k)
            .expect("weights");
        let duration = match kind {
            Kind::LeaderKill => ms(&mut rng, 300, 2000),
            Kind::FollowerPause => frac(&mut rng, 0.25, 1.5),
            // A whole-ensemble pause stays shorter than the session timeout.
            Kind::EnsemblePause => frac(&mut rng, 0.15, 0.75),
            // Half of them outlast the session timeout: expiry, lost locks.
            Kind::ClientCut | Kind::ClientStall | Kind::ClientStallUp | Kind::ClientStallDown if rng.below(2) == 0 => {
                frac(&mut rng, 0.1, 0.9)
            }
            Kind::ClientCut | Kind::ClientStall | Kind::ClientStallUp | Kind::ClientStallDown => {
                frac(&mut rng, 1.1, 2.0)
            }
            Kind::ClientServerCut => frac(&mut rng, 0.2, 2.0),
            Kind::OperatorDelete => Duration::ZERO,
            Kind::KillHolding | Kind::KillWaiting => ms(&mut rng, 100, 1500),
            // zklock declares a loss ~0.85 x the session timeout after the connection goes
            // silent: well before the short ones end, and well after the long ones.
            Kind::PinnedStallShort => frac(&mut rng, 0.3, 0.6),
            Kind::PinnedStallLong | Kind::PinnedCutLong | Kind::PinnedStallUpLong | Kind::PinnedStallDownLong => {
                frac(&mut rng, 1.3, 2.0)
            }
        };
        let pick = rng.next_u64();
        out.push(Planned { at, kind, pick, duration });
    }
}

// ------------------------------------------------------------------------------- the resource

struct Resource {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    address: String,
}

impl Resource {
    fn start(bin_dir: &Path, log: &Path) -> Resource {
        let exe = bin_dir.join("chaos-resource");
        let mut child = Command::new(&exe)
            .arg("--log")
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| fatal(&format!("start {}: {e}", exe.display())));
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let address = line
            .trim()
            .strip_prefix("LISTEN ")
            .unwrap_or_else(|| fatal(&format!("chaos-resource did not say where it listens: {line:?}")))
            .to_string();
        Resource { child, stdin, stdout, address }
    }

    fn command(&mut self, line: &str) -> String {
        if writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()).is_err() {
            fatal("the resource process is gone");
        }
        let mut reply = String::new();
        match self.stdout.read_line(&mut reply) {
            Ok(n) if n > 0 => reply.trim_end().to_string(),
            _ => fatal("the resource process is gone"),
        }
    }

    fn note(&mut self, text: &str) {
        self.command(&format!("NOTE {text}"));
    }

    fn holders(&mut self) -> BTreeSet<String> {
        let reply = self.command("HOLDERS");
        reply.split_whitespace().skip(1).map(String::from).collect()
    }

    fn count(&mut self) -> u64 {
        self.command("COUNT").split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

// ------------------------------------------------------------------------------ the contenders

struct Slot {
    lang: String,
    n: usize,
    argv: Vec<String>,
    proxies: ProxiedCluster,
    child: Option<Child>,
    incarnation: u32,
    name: String,
    /// Dead on purpose (or crashed): start again at this time.
    respawn_at: Option<Instant>,
    /// A client fault is under way: heal at this time.
    heal_at: Option<Instant>,
    /// A pinned fault waits for this contender to begin its pinned hold.
    pin: Option<PinWait>,
    /// A pinned hold under a fault lasts until then: no other fault picks this contender.
    pinned_until: Option<Instant>,
    started_at: Instant,
    /// Exits soon after starting, in a row: a contender that cannot run at all.
    quick_crashes: u32,
}

impl Slot {
    fn spawn(&mut self, index: usize, o: &Options, resource: &str, run_dir: &Path) {
        let seed = contender_seed(o.seed, index, self.incarnation);
        self.name = format!("{}-{}.{}", self.lang, self.n, self.incarnation);
        let log_path = run_dir.join(format!("{}-{}.log", self.lang, self.n));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| fatal(&format!("open {}: {e}", log_path.display())));
        let _ = writeln!(&log, "=== {} seed {seed}", self.name);
        let log2 = log.try_clone().expect("dup log");
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .arg("--zk")
            .arg(self.proxies.connect_string())
            .arg("--resource")
            .arg(resource)
            .arg("--name")
            .arg(&self.name)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--session-timeout-ms")
            .arg(o.session_timeout.as_millis().to_string());
        // Curator 5.4 contends for the mutex only (its downgrade is CURATOR-621's bug).
        if self.lang == "curator" {
            cmd.arg("--curator-mutex-only");
        }
        // The first Rust contender reaches each server by a host name whose first address never
        // answers (issue 44: every address of a name is tried, happy-eyeballs style).
        if self.lang == "rust" && self.n == 0 {
            cmd.arg("--unanswered-first-address");
        }
        // Servers that require SASL: every contender authenticates (issue 44: every reconnect
        // under the faults must do SASL before anything else, or the servers end the session).
        if o.sasl_required {
            cmd.arg("--sasl-digest").arg(format!("{}:{}", SASL_CONTENDER.0, SASL_CONTENDER.1));
        }
        if o.fast {
            cmd.args(["--op-sleep-ms", "3", "--idle-ms", "5"]);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::from(log)).stderr(Stdio::from(log2));
        // Its own process group, so a wrapper's children are signalled too; and killed if this
        // process dies (the main thread spawns, and lives as long as the process).
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.started_at = Instant::now();
        match cmd.spawn() {
            Ok(child) => self.child = Some(child),
            Err(e) => fatal(&format!("start the {} contender ({}): {e}", self.lang, self.argv.join(" "))),
        }
        self.respawn_at = None;
    }

    fn signal(&self, sig: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the process group of our own unreaped child.
            unsafe {
                libc::kill(-(child.id() as i32), sig);
            }
        }
    }

    /// Free for a new client fault: none under way, no pin pending or pinned hold running.
    fn free(&self, now: Instant) -> bool {
        self.heal_at.is_none() && self.pin.is_none() && self.pinned_until.is_none_or(|t| t <= now)
    }

    /// SIGKILL and reap; it starts again at `respawn_at`.
    fn kill(&mut self, respawn_at: Instant) {
        self.signal(libc::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        self.incarnation += 1;
        self.respawn_at = Some(respawn_at);
    }
}

/// A pinned fault that waits for its contender to hold pinned.
struct PinWait {
    kind: Kind,
    key: &'static str,
    duration: Duration,
    pinned_for: Duration,
    name: String,
    give_up_at: Instant,
}

// ---------------------------------------------------------------------------- the ensemble

enum EnsembleFault {
    None,
    LeaderDown { server: usize, restart_at: Instant },
    Restarting(JoinHandle<()>),
    FollowerPaused { server: usize, until: Instant },
    AllPaused { until: Instant },
}

// ---------------------------------------------------------------------------------- the soak

struct Soak {
    o: Options,
    run_dir: PathBuf,
    cluster: Arc<Cluster>,
    resource: Resource,
    slots: Vec<Slot>,
    ensemble: EnsembleFault,
    started: Instant,
    faults: BTreeMap<&'static str, u64>,
    skipped: BTreeMap<&'static str, u64>,
    /// Pinned faults the plan put too late to run their course before the end: not owed by the
    /// floors (a short run may have none of a kind but that one).
    too_late: BTreeMap<&'static str, u64>,
    crashes: BTreeMap<String, Vec<String>>,
    fault_log: File,
    /// A plain client straight to the ensemble, for operator deletes.
    operator: Census,
}

impl Soak {
    fn log_fault(&mut self, text: &str) {
        let t = self.started.elapsed().as_secs_f64();
        let _ = writeln!(self.fault_log, "{t:9.3}s {text}");
        self.resource.note(text);
    }

    fn reap(&mut self, stopping: bool) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            let exited = match self.slots[i].child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => Some(status),
                _ => None,
            };
            if let Some(status) = exited {
                let slot = &mut self.slots[i];
                slot.child = None;
                let what = format!("{} exited unexpectedly: {}", slot.name, describe(status));
                let log = self.run_dir.join(format!("{}-{}.log", slot.lang, slot.n));
                eprintln!("chaos: {what} (log: {})", log.display());
                slot.quick_crashes = if slot.started_at.elapsed() < QUICK_CRASH { slot.quick_crashes + 1 } else { 0 };
                if slot.quick_crashes >= 3 {
                    let tail = fs::read_to_string(&log).unwrap_or_default();
                    let tail: Vec<&str> = tail.lines().rev().take(20).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    fatal(&format!(
                        "the {} contender ({}) exits right after starting, 3 times in a row; its log ends:\n{}",
                        slot.lang,
                        slot.argv.join(" "),
                        tail.join("\n")
                    ));
                }
                self.crashes.entry(slot.lang.clone()).or_default().push(what.clone());
                slot.incarnation += 1;
                slot.respawn_at = Some(now + Duration::from_millis(500));
                self.log_fault(&format!("crash {what}"));
            }
            if !stopping && self.slots[i].child.is_none() && self.slots[i].respawn_at.is_some_and(|t| t <= now) {
                let resource = self.resource.address.clone();
                let (o, run_dir) = (&self.o, &self.run_dir);
                self.slots[i].spawn(i, o, &resource, run_dir);
                let name = self.slots[i].name.clone();
                self.log_fault(&format!("start {name}"));
            }
            let slot = &mut self.slots[i];
            if slot.heal_at.is_some_and(|t| t <= now) {
                slot.heal_at = None;
                slot.proxies.pass_all();
                let name = slot.name.clone();
                self.log_fault(&format!("heal client {name}"));
            }
        }
    }

    fn step_ensemble(&mut self) {
        let now = Instant::now();
        match std::mem::replace(&mut self.ensemble, EnsembleFault::None) {
            EnsembleFault::LeaderDown { server, restart_at } if restart_at <= now => {
                self.log_fault(&format!("restart server {server}"));
                let cluster = self.cluster.clone();
                let handle = thread::spawn(move || cluster.restart(server));
                self.ensemble = EnsembleFault::Restarting(handle);
            }
            EnsembleFault::Restarting(handle) if handle.is_finished() => {
                if handle.join().is_err() {
                    fatal("a ZooKeeper server could not be restarted (see the panic above)");
                }
                self.log_fault("server serves again");
            }
            EnsembleFault::FollowerPaused { server, until } if until <= now => {
                self.cluster.resume(server);
                self.log_fault(&format!("resume server {server}"));
            }
            EnsembleFault::AllPaused { until } if until <= now => {
                for i in 0..self.cluster.len() {
                    self.cluster.resume(i);
                }
                self.log_fault("resume all servers");
            }
            other => self.ensemble = other,
        }
    }

    /// Injects `f` if it can be now; true if it was.
    fn inject(&mut self, f: &Planned) -> bool {
        let now = Instant::now();
        let session = self.o.session_timeout;
        let key = f.key(session);
        let ms = f.duration.as_millis();
        if f.kind.is_ensemble() && !matches!(self.ensemble, EnsembleFault::None) {
            return false;
        }
        match f.kind {
            Kind::LeaderKill => {
                let Some(leader) = self.cluster.leader() else { return false };
                self.cluster.kill(leader);
                self.resource.command(&format!("MARK leader_kill server {leader}"));
                self.log_fault(&format!("{key}: kill -9 server {leader} (leader), restart in {ms}ms"));
                self.ensemble = EnsembleFault::LeaderDown { server: leader, restart_at: now + f.duration };
            }
            Kind::FollowerPause => {
                let leader = self.cluster.leader();
                let followers: Vec<usize> =
                    (0..self.cluster.len()).filter(|&i| Some(i) != leader && self.cluster.is_running(i)).collect();
                if followers.is_empty() || leader.is_none() {
                    return false;
                }
                let server = followers[(f.pick % followers.len() as u64) as usize];
                self.cluster.pause(server);
                self.log_fault(&format!("{key}: SIGSTOP server {server} (follower) for {ms}ms"));
                self.ensemble = EnsembleFault::FollowerPaused { server, until: Instant::now() + f.duration };
            }
            Kind::EnsemblePause => {
                for i in 0..self.cluster.len() {
                    self.cluster.pause(i);
                }
                self.log_fault(&format!("{key}: SIGSTOP all servers for {ms}ms"));
                self.ensemble = EnsembleFault::AllPaused { until: Instant::now() + f.duration };
            }
            Kind::ClientCut
            | Kind::ClientStall
            | Kind::ClientStallUp
            | Kind::ClientStallDown
            | Kind::ClientServerCut => {
                let free: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i].free(now)).collect();
                // Half of them hit a contender that holds now, if any: its hold goes on while
                // the connection is down.
                let holders = if f.pick & (1 << 40) == 0 { self.resource.holders() } else { BTreeSet::new() };
                let holding: Vec<usize> =
                    free.iter().copied().filter(|&i| holders.contains(&self.slots[i].name)).collect();
                let candidates = if holding.is_empty() { free } else { holding };
                if candidates.is_empty() {
                    return false;
                }
                let i = candidates[(f.pick % candidates.len() as u64) as usize];
                let slot = &self.slots[i];
                let what = match f.kind {
                    Kind::ClientCut => {
                        slot.proxies.cut_all();
                        "cut from every server".to_string()
                    }
                    Kind::ClientStall => {
                        slot.proxies.stall_all();
                        "stalled to every server".to_string()
                    }
                    Kind::ClientStallUp => {
                        slot.proxies.stall_upstream_all();
                        "stalled one way, to every server (its requests held, replies delivered)".to_string()
                    }
                    Kind::ClientStallDown => {
                        slot.proxies.stall_downstream_all();
                        "stalled one way, from every server (its requests delivered, replies held)".to_string()
                    }
                    _ => {
                        // the server it is connected to, so that it must move
                        let p = (0..slot.proxies.len())
                            .find(|&p| slot.proxies.proxy(p).connections() > 0)
                            .unwrap_or((f.pick >> 32) as usize % slot.proxies.len());
                        slot.proxies.proxy(p).cut();
                        format!("cut from server {p}")
                    }
                };
                let name = slot.name.clone();
                let holding = if holders.contains(&name) { " (holding)" } else { "" };
                self.slots[i].heal_at = Some(Instant::now() + f.duration);
                self.log_fault(&format!("{key}: {name}{holding} {what} for {ms}ms"));
            }
            Kind::KillHolding | Kind::KillWaiting => {
                let holders = self.resource.holders();
                let candidates: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| {
                        let s = &self.slots[i];
                        s.child.is_some()
                            && s.pin.is_none()
                            && s.pinned_until.is_none_or(|t| t <= now)
                            && (holders.contains(&s.name) == (f.kind == Kind::KillHolding))
                    })
                    .collect();
                if candidates.is_empty() {
                    return false;
                }
                let i = candidates[(f.pick % candidates.len() as u64) as usize];
                let name = self.slots[i].name.clone();
                self.slots[i].kill(Instant::now() + f.duration);
                self.log_fault(&format!("{key}: SIGKILL {name}, restart in {ms}ms"));
            }
            Kind::OperatorDelete => {
                // The mutex's holder: the first of its nodes, if its hold has begun at the resource.
                let Some((node, token)) = self.operator.holder_node(MUTEX_PATH) else { return false };
                let reply = self.resource.command(&format!("OPDELETE {MUTEX_PATH} {token}"));
                let Some(name) = reply.strip_prefix("OPDELETE ").filter(|n| *n != "none").map(String::from) else {
                    return false;
                };
                // A victim under no other fault: what it hears is the delete's doing alone.
                if !self.slots.iter().any(|s| s.name == name && s.child.is_some() && s.free(now)) {
                    self.resource.command(&format!("OPDELETE-DONE {MUTEX_PATH} {token} skipped"));
                    return false;
                }
                let (outcome, note) = match self.operator.delete(&node) {
                    Ok(true) => ("deleted", String::new()),
                    // released meanwhile: try again
                    Ok(false) => ("nonode", String::new()),
                    Err(e) => ("failed", format!(" (whether it was deleted is unknown: {e})")),
                };
                self.resource.command(&format!("OPDELETE-DONE {MUTEX_PATH} {token} {outcome}"));
                if outcome == "nonode" {
                    return false;
                }
                self.log_fault(&format!("{key}: deleted {name}'s lock node {node} (token {token}){note}"));
            }
            Kind::PinnedStallShort
            | Kind::PinnedStallLong
            | Kind::PinnedCutLong
            | Kind::PinnedStallUpLong
            | Kind::PinnedStallDownLong => {
                // Counted once applied, by step_pins.
                let candidates: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| self.slots[i].child.is_some() && self.slots[i].free(now))
                    .collect();
                if candidates.is_empty() {
                    return false;
                }
                let i = candidates[(f.pick % candidates.len() as u64) as usize];
                let name = self.slots[i].name.clone();
                let pinned_for = f.duration + session + PIN_MARGIN;
                self.resource.command(&format!("PIN {name} {} {key}", pinned_for.as_millis()));
                self.log_fault(&format!("{key}: PIN {name} for {}ms, then a {ms}ms fault", pinned_for.as_millis()));
                self.slots[i].pin = Some(PinWait {
                    kind: f.kind,
                    key,
                    duration: f.duration,
                    pinned_for,
                    name,
                    give_up_at: now + PIN_WAIT,
                });
                return true;
            }
        }
        *self.faults.entry(key).or_default() += 1;
        true
    }

    /// Pinned faults waiting: once the contender holds pinned, stall or cut it; after
    /// [`PIN_WAIT`] without, skip the fault.
    fn step_pins(&mut self) {
        if self.slots.iter().all(|s| s.pin.is_none()) {
            return;
        }
        let mut pinned = self.pinned();
        let now = Instant::now();
        for i in 0..self.slots.len() {
            let Some((name, key, give_up_at)) =
                self.slots[i].pin.as_ref().map(|w| (w.name.clone(), w.key, w.give_up_at))
            else {
                continue;
            };
            if !pinned.contains(&name) {
                if now < give_up_at {
                    continue;
                }
                // A pin given since the last look is a hold to fault after all.
                if self.resource.command(&format!("UNPIN {name}")) == "UNPIN cleared" || {
                    pinned = self.pinned();
                    !pinned.contains(&name)
                } {
                    self.slots[i].pin = None;
                    *self.skipped.entry(key).or_default() += 1;
                    self.log_fault(&format!("{key}: {name} did not hold within {}s; skipped", PIN_WAIT.as_secs()));
                    continue;
                }
            }
            let wait = self.slots[i].pin.take().expect("pin");
            let slot = &mut self.slots[i];
            let what = match wait.kind {
                Kind::PinnedCutLong => {
                    slot.proxies.cut_all();
                    "cut from every server"
                }
                Kind::PinnedStallUpLong => {
                    slot.proxies.stall_upstream_all();
                    "stalled one way, to every server"
                }
                Kind::PinnedStallDownLong => {
                    slot.proxies.stall_downstream_all();
                    "stalled one way, from every server"
                }
                _ => {
                    slot.proxies.stall_all();
                    "stalled to every server"
                }
            };
            let now = Instant::now();
            slot.heal_at = Some(now + wait.duration);
            slot.pinned_until = Some(now + wait.pinned_for);
            let ms = wait.duration.as_millis();
            self.log_fault(&format!("{}: {} (holding pinned) {what} for {ms}ms", wait.key, wait.name));
            *self.faults.entry(wait.key).or_default() += 1;
        }
    }

    fn pinned(&mut self) -> BTreeSet<String> {
        let reply = self.resource.command("PINNED");
        reply.split_whitespace().skip(1).map(String::from).collect()
    }

    /// Ends every fault: servers running and resumed, a leader, every proxy passing.
    fn heal_all(&mut self) {
        match std::mem::replace(&mut self.ensemble, EnsembleFault::None) {
            EnsembleFault::Restarting(handle) => {
                if handle.join().is_err() {
                    fatal("a ZooKeeper server could not be restarted (see the panic above)");
                }
            }
            EnsembleFault::FollowerPaused { server, .. } => self.cluster.resume(server),
            EnsembleFault::AllPaused { .. } => (0..self.cluster.len()).for_each(|i| self.cluster.resume(i)),
            EnsembleFault::LeaderDown { .. } | EnsembleFault::None => {}
        }
        for i in 0..self.cluster.len() {
            if !self.cluster.is_running(i) {
                self.cluster.restart(i);
            }
        }
        self.cluster.wait_for_leader(Duration::from_secs(60));
        for slot in &mut self.slots {
            slot.heal_at = None;
            slot.proxies.pass_all();
            if let Some(wait) = slot.pin.take() {
                self.resource.command(&format!("UNPIN {}", wait.name));
            }
        }
        self.log_fault("healed: every server up, every proxy passing");
    }

    /// SIGTERM every contender; SIGKILL those still there after the grace. Returns the names of
    /// those killed and of those that exited with a failure.
    fn shut_down_contenders(&mut self) -> (Vec<String>, Vec<String>) {
        for slot in &self.slots {
            slot.signal(libc::SIGTERM);
        }
        let deadline = Instant::now() + TERM_GRACE;
        let (mut forced, mut failed) = (Vec::new(), Vec::new());
        loop {
            let mut running = 0;
            for slot in &mut self.slots {
                let Some(child) = slot.child.as_mut() else { continue };
                match child.try_wait() {
                    Ok(Some(status)) => {
                        if !status.success() {
                            failed.push(format!("{}: {}", slot.name, describe(status)));
                        }
                        slot.child = None;
                    }
                    _ => running += 1,
                }
            }
            if running == 0 {
                break;
            }
            if Instant::now() >= deadline {
                for slot in &mut self.slots {
                    if slot.child.is_some() {
                        forced.push(slot.name.clone());
                        slot.kill(Instant::now());
                    }
                }
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        (forced, failed)
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

// ------------------------------------------------------------------------------------- report

/// Writes the lock paths' story, from the transaction logs of the ensemble's servers (the txns a
/// majority of them logged: those committed), to `file`, for the resource's `FACTS`.
fn write_server_facts(cluster: &Cluster, file: &Path) -> Result<(), String> {
    let mut logs = Vec::new();
    for i in 0..cluster.len() {
        let dir = cluster.server_dir(i).join("data");
        logs.push(txnlog::read_data_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?);
    }
    let committed = txnlog::committed(&logs)?;
    fs::write(file, txnlog::facts(&committed, &[MUTEX_PATH, RW_PATH])).map_err(|e| format!("{}: {e}", file.display()))
}

/// Pinned holds that ended normally (END) although their contender was stalled or cut longer
/// than the session timeout while holding: the session expired, so the hold should have been
/// told lost. A peer's (`Some(lang)`) or zklock's (`None`).
fn long_pinned_not_lost(pinned: &Value, peer: Option<&str>) -> u64 {
    PINNED_LONG
        .iter()
        .filter_map(|label| pinned[*label].as_object())
        .flat_map(|by_lang| by_lang.iter())
        .filter(|(lang, _)| match peer {
            Some(peer) => lang.as_str() == peer,
            None => !is_peer(lang),
        })
        .map(|(_, v)| get_u64(v, &["ended"]))
        .sum()
}

/// By language, the errors, wait outcomes and lost-hold reasons the contenders reported that say
/// the servers refused their authentication (`AuthFailed`, `ZKL_AUTH_FAILED`, `AuthFailedError`,
/// `auth_failed`, `connect:AuthFailed`...). Every client has the right credentials, so each one is
/// a session the client ended wrongly: under required SASL, a reconnect that sent a request
/// before SASL had completed (issue 44).
fn auth_failures(report: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for section in ["errors", "outcomes", "lost"] {
        for (lang, counts) in report[section].as_object().into_iter().flatten() {
            for (what, n) in counts.as_object().into_iter().flatten() {
                let squashed: String =
                    what.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
                if squashed.contains("authfailed") {
                    *out.entry(lang.clone()).or_default() += n.as_u64().unwrap_or(0);
                }
            }
        }
    }
    out
}

fn get_u64(v: &Value, path: &[&str]) -> u64 {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(Value::as_u64).unwrap_or(0)
}

fn sum_values(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_object).map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
}

fn main() {
    let o = parse_options();
    let session = o.session_timeout;
    let run = Duration::from_secs_f64(o.minutes * 60.0);
    let run_dir = o
        .run_dir
        .clone()
        .unwrap_or_else(|| zklock_testkit::repo_root().join("target/chaos/runs"))
        .join(o.seed.to_string());
    let _ = fs::remove_dir_all(&run_dir);
    fs::create_dir_all(&run_dir).unwrap_or_else(|e| fatal(&format!("create {}: {e}", run_dir.display())));

    let replay = {
        let mut r = format!("scripts/chaos --seed {} --minutes {}", o.seed, o.minutes);
        if let Some(n) = o.handoffs {
            r += &format!(" --handoffs {n}");
        }
        if o.fast {
            r += " --pace fast";
        }
        if !o.sasl_required {
            r += " --sasl off";
        }
        r += &format!(
            " --langs {} --contenders-per-lang {} --session-timeout-ms {}",
            o.langs.join(","),
            o.per_lang,
            session.as_millis()
        );
        r
    };
    let planned = plan(o.seed, run, session);
    println!("chaos: seed {} (replay: {replay})", o.seed);
    println!(
        "chaos: {} min{}, languages {} x {}, session timeout {} ms, {}, {} faults planned; logs in {}",
        o.minutes,
        o.handoffs.map_or(String::new(), |n| format!(" or {n} handoffs")),
        o.langs.join(","),
        o.per_lang,
        session.as_millis(),
        if o.sasl_required { "servers require SASL (DIGEST-MD5 for every client)" } else { "no SASL" },
        planned.len(),
        run_dir.display()
    );
    {
        let mut f = File::create(run_dir.join("fault-plan.txt")).expect("fault-plan.txt");
        for p in &planned {
            let _ =
                writeln!(f, "{:9.3}s {:?} {}ms pick {}", p.at.as_secs_f64(), p.kind, p.duration.as_millis(), p.pick);
        }
    }

    let t_setup = Instant::now();
    // The default tick (200 ms) allows session timeouts from 400 ms.
    let cluster = Arc::new(match o.sasl_required {
        true => Cluster::builder().servers(3).sasl_digest(&[SASL_CONTENDER, SASL_OPERATOR]).sasl_required().start(),
        false => Cluster::ensemble(3),
    });
    let operator_sasl = o.sasl_required.then_some(SASL_OPERATOR);
    let resource = Resource::start(&o.bin_dir, &run_dir.join("resource-events.log"));
    let mut slots = Vec::new();
    for lang in &o.langs {
        for n in 0..o.per_lang {
            slots.push(Slot {
                lang: lang.clone(),
                n,
                argv: o.commands[lang].clone(),
                proxies: ProxiedCluster::new(&cluster),
                child: None,
                incarnation: 0,
                name: String::new(),
                respawn_at: None,
                heal_at: None,
                pin: None,
                pinned_until: None,
                started_at: Instant::now(),
                quick_crashes: 0,
            });
        }
    }
    let fault_log = File::create(run_dir.join("faults.log")).expect("faults.log");
    let operator = Census::connect_as(&cluster.connect_string(), operator_sasl).unwrap_or_else(|e| fatal(&e));
    let mut soak = Soak {
        o,
        run_dir: run_dir.clone(),
        cluster,
        resource,
        slots,
        ensemble: EnsembleFault::None,
        started: Instant::now(),
        faults: BTreeMap::new(),
        skipped: BTreeMap::new(),
        too_late: BTreeMap::new(),
        crashes: BTreeMap::new(),
        fault_log,
        operator,
    };
    for i in 0..soak.slots.len() {
        let resource = soak.resource.address.clone();
        soak.slots[i].spawn(i, &soak.o, &resource, &run_dir);
    }
    println!(
        "chaos: ensemble {} up, {} contenders started ({:.1}s set-up)",
        soak.cluster.connect_string(),
        soak.slots.len(),
        t_setup.elapsed().as_secs_f64()
    );

    // The soak.
    soak.started = Instant::now();
    let mut next = 0;
    let mut waiting: Vec<Planned> = Vec::new();
    let mut last_count = Instant::now();
    let mut last_progress = Instant::now();
    let mut handoffs = 0;
    loop {
        let elapsed = soak.started.elapsed();
        if elapsed >= run {
            break;
        }
        if last_count.elapsed() >= Duration::from_millis(500) {
            last_count = Instant::now();
            handoffs = soak.resource.count();
            if soak.o.handoffs.is_some_and(|n| handoffs >= n) {
                break;
            }
        }
        if last_progress.elapsed() >= Duration::from_secs(30) {
            last_progress = Instant::now();
            let faults: u64 = soak.faults.values().sum();
            println!("chaos: {:>5.0}s  {handoffs} handoffs, {faults} faults", elapsed.as_secs_f64());
        }
        if let Ok(Some(status)) = soak.resource.child.try_wait() {
            fatal(&format!("the resource process exited: {}", describe(status)));
        }
        soak.reap(false);
        soak.step_ensemble();
        soak.step_pins();
        while next < planned.len() && planned[next].at <= elapsed {
            waiting.push(planned[next].clone());
            next += 1;
        }
        // A fault that cannot be applied now (no one holds, another ensemble fault is under
        // way) is tried again at each tick for a while, then skipped.
        waiting.retain(|f| {
            // A pinned fault must run its course before the end heals everything: one that
            // could not is skipped, not judged (its hold would be healed before it is lost).
            if f.kind.is_pinned() && elapsed + PIN_WAIT + f.duration + session + PIN_MARGIN > run {
                *soak.too_late.entry(f.key(session)).or_default() += 1;
                return false;
            }
            if soak.inject(f) {
                return false;
            }
            if elapsed >= f.at + RETRY_FOR {
                *soak.skipped.entry(f.key(session)).or_default() += 1;
                return false;
            }
            true
        });
        let until_next = planned.get(next).map_or(TICK, |f| f.at.saturating_sub(soak.started.elapsed()));
        let busy = !waiting.is_empty() || soak.slots.iter().any(|s| s.pin.is_some());
        thread::sleep(if busy { Duration::from_millis(20) } else { until_next.min(TICK) });
    }
    let soak_time = soak.started.elapsed();

    // The end: heal, judge what is still open, shut the contenders down, count what is left.
    println!("chaos: {:.0}s of faults done; healing and shutting down", soak_time.as_secs_f64());
    soak.reap(true);
    soak.heal_all();
    // A hold pinned when the faults ended goes on until its pin runs out (its fault healed early,
    // its session may have lived): it is no orphan, so the look for orphans begins after it.
    let pins_end = soak.slots.iter().filter_map(|s| s.pinned_until).max();
    if let Some(wait) = pins_end.map(|end| end.saturating_duration_since(Instant::now())) {
        thread::sleep(wait + PIN_MARGIN);
    }
    let census = Census::connect_as(&soak.cluster.connect_string(), operator_sasl).unwrap_or_else(|e| fatal(&e));
    let orphan_window = session + Duration::from_secs(4);
    println!("chaos: looking for orphaned lock nodes over {:.0}s", orphan_window.as_secs_f64());
    // A census that could not look fails the run: "no orphans" must mean it looked and saw none.
    let mut census_failures = Vec::new();
    let orphans = census.orphans(orphan_window).unwrap_or_else(|e| {
        census_failures.push(format!("the census could not look for orphans: {e}"));
        Vec::new()
    });
    soak.resource.command("STOP");
    let (forced, failed_exits) = soak.shut_down_contenders();
    let left = census.left(Instant::now() + session * 2 + Duration::from_secs(10)).unwrap_or_else(|e| {
        census_failures.push(format!("the census could not count the nodes left: {e}"));
        Vec::new()
    });
    let orphans_zklock: Vec<&String> = orphans.iter().filter(|(l, _)| !is_peer(l)).map(|(_, d)| d).collect();
    // The server's record decides who held without the right in each overlap (and late or
    // missing lost signal) the resource saw; without it every one is unjudged.
    let facts_file = run_dir.join("server-facts.txt");
    match write_server_facts(&soak.cluster, &facts_file) {
        Ok(()) => {
            let reply = soak.resource.command(&format!("FACTS {}", facts_file.display()));
            println!("chaos: the server's record (transaction logs) for the judge: {reply}");
        }
        Err(e) => eprintln!("chaos: the servers' transaction logs could not be read ({e}): every claim is unjudged"),
    }
    let report: Value = serde_json::from_str(&soak.resource.command("REPORT"))
        .unwrap_or_else(|e| fatal(&format!("the resource's report is not JSON: {e}")));
    let _ = fs::write(run_dir.join("resource-report.json"), report.to_string());

    // Figures.
    let mut failures = census_failures;
    let zk = &report["violations"]["zklock"];
    // A report from a client whose language is not known yet (an ERROR before its first BEGIN)
    // counts as zklock's: this fails closed.
    let auth_failed = auth_failures(&report);
    let auth_failed_zklock: u64 = auth_failed.iter().filter(|(l, _)| !is_peer(l)).map(|(_, n)| n).sum();
    let must_be_zero = [
        ("overlaps", get_u64(zk, &["overlaps"])),
        ("stale_writes_accepted", get_u64(zk, &["stale_writes_accepted"])),
        ("late_lost_signals", get_u64(zk, &["late_lost_signals"])),
        ("unsignalled_losses", get_u64(zk, &["unsignalled_losses"])),
        ("more_than_max_holding", get_u64(zk, &["more_than_max_holding"])),
        ("long_pinned_not_lost", long_pinned_not_lost(&report["pinned"], None)),
        ("nodes_left", left.len() as u64),
        ("orphaned_nodes", orphans_zklock.len() as u64),
        ("zombie_writes_accepted_superseded", get_u64(&report, &["zombie_writes_accepted_superseded"])),
        ("protocol_errors", get_u64(&report, &["protocol_errors"])),
        ("auth_failures", auth_failed_zklock),
        ("unjudged_with_zklock", get_u64(&report, &["unjudged", "with_zklock"])),
        ("contender_crashes", soak.crashes.iter().filter(|(l, _)| !is_peer(l)).map(|(_, v)| v.len() as u64).sum()),
    ];
    for (name, n) in must_be_zero {
        if n != 0 {
            failures.push(format!("{name} = {n} (must be 0)"));
        }
    }
    for lang in &soak.o.langs {
        if get_u64(&report, &["handoffs", lang]) == 0 {
            failures.push(format!("no handoffs in {lang}"));
        }
    }
    let floors = exercise_floors(soak.o.minutes, &soak.o.langs, &report, &soak.faults, &soak.skipped);
    for floor in floors.iter().filter(|f| f.seen < f.floor) {
        failures
            .push(format!("{} = {} (the run must exercise it at least {} times)", floor.what, floor.seen, floor.floor));
    }
    let recoveries: Vec<f64> =
        report["recoveries"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|r| r["ms"].as_f64()).collect());
    let recovery_max = recoveries.iter().copied().fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let lost_by_lang: BTreeMap<String, u64> = report["lost"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), sum_values(Some(v)))).collect())
        .unwrap_or_default();
    let stale_rejected_total = sum_values(report.get("stale_writes_rejected"));
    let crashes: BTreeMap<&String, usize> = soak.crashes.iter().map(|(k, v)| (k, v.len())).collect();
    let mut peers = serde_json::Map::new();
    for lang in soak.o.langs.iter().filter(|l| is_peer(l)) {
        let peer = &report["violations"][lang.as_str()];
        let orphans: Vec<&String> = orphans.iter().filter(|(l, _)| l == lang).map(|(_, d)| d).collect();
        peers.insert(
            lang.clone(),
            json!({
                "overlaps": get_u64(peer, &["overlaps"]),
                "stale_writes_accepted": get_u64(peer, &["stale_writes_accepted"]),
                "late_lost_signals": get_u64(peer, &["late_lost_signals"]),
                "unsignalled_losses": get_u64(peer, &["unsignalled_losses"]),
                "long_pinned_not_lost": long_pinned_not_lost(&report["pinned"], Some(lang)),
                "contender_crashes": soak.crashes.get(lang).map_or(0, Vec::len),
                "auth_failures": auth_failed.get(lang).copied().unwrap_or(0),
                "orphaned_nodes": orphans.len(),
                "orphaned_nodes_detail": orphans,
            }),
        );
    }
    // Between Curator's and kazoo's holders: Curator does not see kazoo's nodes in their place.
    let mut between = serde_json::Map::new();
    for (class, v) in report["violations"].as_object().into_iter().flatten().filter(|(k, _)| k.contains('~')) {
        between.insert(class.clone(), v.clone());
    }
    let peers = json!({
        "note": "peers (Curator 5.4, Curator 5.7.1, kazoo): violations whose offender is a peer's holder (for overlaps, late and unsignalled losses: the holder the server's record says held without the right) are counted here, by language, and do not fail the soak; those between a Curator holder and a kazoo holder apart (between), as Curator orders a lock's children by the sequence after its own markers and kazoo's __lock__/__rlock__ nodes have none",
        "by_lang": peers,
        "between": between,
    });
    let mut summary = json!({
        "seed": soak.o.seed,
        "replay": replay,
        "minutes": soak.o.minutes,
        "soak_seconds": (soak_time.as_secs_f64() * 10.0).round() / 10.0,
        "pace": if soak.o.fast { "fast" } else { "normal" },
        "handoffs_per_second": (get_u64(&report, &["handoffs_total"]) as f64 / soak_time.as_secs_f64() * 10.0).round() / 10.0,
        "session_timeout_ms": session.as_millis() as u64,
        "contenders_per_lang": soak.o.per_lang,
        "langs": soak.o.langs,
        "handoffs": report["handoffs"],
        "handoffs_total": report["handoffs_total"],
        "faults": soak.faults,
        "faults_skipped": soak.skipped,
        "overlaps": get_u64(zk, &["overlaps"]),
        "stale_writes_accepted": get_u64(zk, &["stale_writes_accepted"]),
        "late_lost_signals": get_u64(zk, &["late_lost_signals"]),
        "unsignalled_losses": get_u64(zk, &["unsignalled_losses"]),
        "more_than_max_holding": get_u64(zk, &["more_than_max_holding"]),
        "semaphore_max": SEMAPHORE_MAX,
        "lease_holds": report["lease_holds"],
        "most_leases_holding": report["most_leases_holding"],
        "long_pinned_not_lost": long_pinned_not_lost(&report["pinned"], None),
        "zombie_writes_accepted_superseded": report["zombie_writes_accepted_superseded"],
        "pinned_holds": report["pinned"],
        "operator_deletes": report["operator_deletes"],
        "operator_delete_violations": report["violations"]["operator_delete"],
        "stale_writes_attempted": sum_values(report.get("stale_writes_attempted")),
        "stale_writes_attempted_by_lang": report["stale_writes_attempted"],
        "stale_writes_rejected": stale_rejected_total,
        "stale_writes_rejected_by_lang": report["stale_writes_rejected"],
        "stale_reads_rejected_by_lang": report["stale_reads_rejected"],
        "zombie_writes": sum_values(report.get("zombie_writes")),
        "zombie_writes_by_lang": report["zombie_writes"],
        "zombie_writes_rejected": sum_values(report.get("zombie_writes_rejected")),
        "zombie_writes_rejected_by_lang": report["zombie_writes_rejected"],
        "downgrades": sum_values(report.get("downgrades")),
        "downgrades_by_lang": report["downgrades"],
        "nodes_left": left.len(),
        "nodes_left_detail": left,
        "orphaned_nodes": orphans_zklock.len(),
        "orphaned_nodes_detail": orphans_zklock,
    });
    let floors_json: Vec<Value> =
        floors.iter().map(|f| json!({"what": f.what, "seen": f.seen, "floor": f.floor})).collect();
    summary["floors"] = Value::Array(floors_json);
    summary["sasl_required"] = Value::Bool(soak.o.sasl_required);
    summary["faults_too_late"] = json!(soak.too_late);
    summary["auth_failures"] = json!(auth_failed_zklock);
    summary["auth_failures_by_lang"] = json!(auth_failed);
    let more = json!({
        "wait_ms": report["wait_ms"],
        "recovery_ms_after_leader_kill": recoveries,
        "recovery_ms_max": recovery_max,
        "leader_kills_without_recovery": report["unrecovered_marks"],
        "outcomes": report["outcomes"],
        "errors": report["errors"],
        "lost_holds": lost_by_lang,
        "lost_reasons": report["lost"],
        "holds_ended_by_kill": report["holds_ended_by_connection_close"],
        "lost_after_end": report["lost_after_end"],
        "peers": peers,
        "contender_crashes": crashes,
        "contender_crash_detail": soak.crashes,
        "contenders_killed_at_shutdown": forced,
        "contenders_failed_at_shutdown": failed_exits,
        "unjudged_with_zklock": get_u64(&report, &["unjudged", "with_zklock"]),
        "unjudged": report["unjudged"],
        "claims": report["claims"],
        "claims_judged": report["claims_judged"],
        "server_record": report["server_record"],
        "protocol_errors": report["protocol_errors"],
        "protocol_error_examples": report["protocol_error_examples"],
        "violation_details": report["violation_details"],
        "run_dir": run_dir.display().to_string(),
        "result": if failures.is_empty() { "pass" } else { "fail" },
        "failures": failures,
    });
    summary.as_object_mut().expect("object").extend(more.as_object().expect("object").clone());
    print_table(&summary);
    if let Some(path) = &soak.o.json {
        let text = serde_json::to_string_pretty(&summary).expect("json");
        fs::write(path, text + "\n").unwrap_or_else(|e| fatal(&format!("write {}: {e}", path.display())));
        println!("chaos: figures written to {}", path.display());
    }
    println!("chaos: seed {} — replay with: {replay}", soak.o.seed);
    let code = if failures.is_empty() { 0 } else { 1 };
    drop(soak); // proxies, servers
    std::process::exit(code);
}

/// A promise the soak tests, how often this run exercised it, and the least it must have.
struct Floor {
    what: String,
    seen: u64,
    floor: u64,
}

/// What a run must have exercised, scaled with its length: a run below a floor did not test what
/// it reports on, and fails (all zeros must not pass as "no violations"). The rates are well
/// under what 3-minute runs show (about 40 faults, 30 downgrades and 2 long pinned holds told
/// lost a minute; zombie writes 0 to 8 a run, hence one per 6 minutes).
fn exercise_floors(
    minutes: f64,
    langs: &[String],
    report: &Value,
    faults: &BTreeMap<&'static str, u64>,
    skipped: &BTreeMap<&'static str, u64>,
) -> Vec<Floor> {
    let per_minute = |rate: f64| (rate * minutes).floor() as u64;
    let has = |wanted: &[&str]| langs.iter().any(|l| wanted.contains(&l.as_str()));
    let zklock_langs = ["rust", "c", "python", "node"];
    let mut floors =
        vec![Floor { what: "faults injected".into(), seen: faults.values().sum(), floor: per_minute(20.0) }];
    // Every kind the plan scheduled was applied at least once.
    for kind in faults.keys().chain(skipped.keys()).collect::<BTreeSet<_>>() {
        floors.push(Floor {
            what: format!("faults injected: {kind}"),
            seen: faults.get(kind).copied().unwrap_or(0),
            floor: 1,
        });
    }
    if has(&zklock_langs) {
        let told_lost: u64 = PINNED_LONG
            .iter()
            .filter_map(|label| report["pinned"][*label].as_object())
            .flat_map(|by_lang| by_lang.iter())
            .filter(|(lang, _)| !is_peer(lang))
            .map(|(_, v)| get_u64(v, &["lost"]))
            .sum();
        floors.push(Floor {
            what: "long pinned holds told lost (zklock)".into(),
            seen: told_lost,
            floor: (minutes / 3.0).ceil() as u64,
        });
        floors.push(Floor {
            what: "zombie writes refused".into(),
            seen: sum_values(report.get("zombie_writes_rejected")),
            floor: (minutes / 6.0).floor() as u64,
        });
    }
    if has(&["rust", "python", "node", "curator57"]) {
        floors.push(Floor {
            what: "downgrades".into(),
            seen: sum_values(report.get("downgrades")),
            floor: per_minute(5.0),
        });
    }
    if has(&["rust"]) && minutes >= 1.0 {
        floors.push(Floor {
            what: "semaphore holds at max at once".into(),
            seen: get_u64(report, &["most_leases_holding"]),
            floor: u64::from(SEMAPHORE_MAX),
        });
    }
    floors
}

fn print_table(s: &Value) {
    let n = |v: &Value| v.as_u64().map_or("-".to_string(), |x| x.to_string());
    let map_line = |v: &Value| -> String {
        v.as_object().map_or(String::new(), |m| {
            m.iter()
                .map(|(k, v)| format!("{k} {}", v.as_u64().map_or(v.to_string(), |x| x.to_string())))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    println!();
    println!("==================== zklock chaos soak: figures ====================");
    println!(
        "seed {}   {}s of faults   session timeout {} ms   {} contenders per language   {}",
        s["seed"],
        s["soak_seconds"],
        s["session_timeout_ms"],
        s["contenders_per_lang"],
        if s["sasl_required"].as_bool() == Some(true) { "SASL required" } else { "no SASL" }
    );
    println!("handoffs (holds begun)          {}   [{}]", n(&s["handoffs_total"]), map_line(&s["handoffs"]));
    println!(
        "handoffs per second             {}   (pace {})",
        s["handoffs_per_second"],
        s["pace"].as_str().unwrap_or("?")
    );
    let faults: u64 = s["faults"].as_object().map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
    println!("faults injected                 {faults}   [{}]", map_line(&s["faults"]));
    if s["faults_skipped"].as_object().is_some_and(|m| !m.is_empty()) {
        println!("  planned but not applicable    [{}]", map_line(&s["faults_skipped"]));
    }
    if s["faults_too_late"].as_object().is_some_and(|m| !m.is_empty()) {
        println!("  planned too late to finish    [{}]", map_line(&s["faults_too_late"]));
    }
    let record = &s["server_record"];
    let record = match (record["events"].as_u64(), record["error"].as_str()) {
        (Some(events), _) => format!(
            "{events} events, {} lock nodes; holds whose token names no node {}",
            n(&record["lock_nodes"]),
            n(&record["holds_without_node"])
        ),
        (None, Some(e)) => format!("unreadable: {e}"),
        (None, None) => "none".to_string(),
    };
    println!("server's record (txn logs)      {record}");
    println!(
        "claims (two holding at once)    {}: {} judged by the record, unjudged [{}]",
        n(&s["claims"]),
        n(&s["claims_judged"]),
        map_line(&s["unjudged"])
    );
    println!("--------------------------------------------------------------------");
    println!("MUST BE 0 (zklock; overlaps and losses: charged to whoever held without the right)");
    for key in [
        "overlaps",
        "stale_writes_accepted",
        "late_lost_signals",
        "unsignalled_losses",
        "more_than_max_holding",
        "long_pinned_not_lost",
        "unjudged_with_zklock",
        "nodes_left",
        "orphaned_nodes",
        "protocol_errors",
        "auth_failures",
    ] {
        println!("  {:<30}{}", key.replace('_', " "), n(&s[key]));
    }
    let crashes: u64 = s["contender_crashes"]
        .as_object()
        .map_or(0, |m| m.iter().filter(|(k, _)| !is_peer(k)).filter_map(|(_, v)| v.as_u64()).sum());
    println!("  {:<30}{crashes}", "contender crashes");
    println!("MUST BE 0 (the fence, any language)");
    println!("  {:<30}{}", "zombie writes accepted late", n(&s["zombie_writes_accepted_superseded"]));
    if let Some(peers) = s["peers"]["by_lang"].as_object().filter(|m| !m.is_empty()) {
        let names: Vec<&String> = peers.keys().collect();
        println!(
            "Peers (reported, do not fail the soak)  {}",
            names.iter().map(|k| format!("{k:>10}")).collect::<String>()
        );
        for key in [
            "overlaps",
            "stale_writes_accepted",
            "late_lost_signals",
            "unsignalled_losses",
            "long_pinned_not_lost",
            "orphaned_nodes",
            "contender_crashes",
            "auth_failures",
        ] {
            let row: String = peers.values().map(|p| format!("{:>10}", n(&p[key]))).collect();
            println!("  {:<38}{row}", key.replace('_', " "));
        }
    }
    for (pair, v) in s["peers"]["between"].as_object().into_iter().flatten() {
        println!("Between peers {pair} (Curator does not see kazoo's __lock__/__rlock__ nodes in their place)");
        println!("  {}", map_line(v));
    }
    println!("--------------------------------------------------------------------");
    println!(
        "stale writes attempted          {}   [{}]",
        n(&s["stale_writes_attempted"]),
        map_line(&s["stale_writes_attempted_by_lang"])
    );
    println!(
        "stale writes rejected (fenced)  {}   [{}]",
        n(&s["stale_writes_rejected"]),
        map_line(&s["stale_writes_rejected_by_lang"])
    );
    println!(
        "zombie writes (after LOST)      {} attempted, {} rejected   [attempted: {}]",
        n(&s["zombie_writes"]),
        n(&s["zombie_writes_rejected"]),
        map_line(&s["zombie_writes_by_lang"])
    );
    println!(
        "semaphore leases (max {})       {} held, at most {} at once",
        n(&s["semaphore_max"]),
        n(&s["lease_holds"]),
        n(&s["most_leases_holding"])
    );
    println!("downgrades (w -> r, held on)    {}   [{}]", n(&s["downgrades"]), map_line(&s["downgrades_by_lang"]));
    println!("lost holds                      [{}]", map_line(&s["lost_holds"]));
    if let Some(floors) = s["floors"].as_array() {
        println!("exercised (seen / the least a run this long must show; below it the run fails)");
        for f in floors {
            let (seen, floor) = (n(&f["seen"]), n(&f["floor"]));
            let mark = if f["seen"].as_u64() < f["floor"].as_u64() { "   BELOW THE FLOOR" } else { "" };
            println!("  {:<44} {seen} / {floor}{mark}", f["what"].as_str().unwrap_or("?"));
        }
    }
    if let Some(m) = s["pinned_holds"].as_object().filter(|m| !m.is_empty()) {
        println!("pinned holds, by fault: how they ended (taken over: lost, and the next holder acted in time)");
        for (label, by_lang) in m {
            println!("  {label}");
            for (lang, v) in by_lang.as_object().into_iter().flatten() {
                println!("    {lang:<28}{}", map_line(v));
            }
        }
    }
    if let Some(m) = s["operator_deletes"]["victims"].as_object().filter(|m| !m.is_empty()) {
        println!("operator deletes: how each victim heard, against the next holder's first act (reported, not judged:");
        println!("  the server tells the victim and the next waiter at once; the fence must still refuse the victim)");
        for (lang, v) in m {
            println!("  {lang:<30}{}", map_line(v));
        }
        let t = &s["operator_deletes"]["delete_to_lost_ms"];
        println!("  delete -> LOST ms              p50 {}  max {}  (n {})", t["p50"], t["max"], t["count"]);
        println!("  victims' violations set aside  [{}]", map_line(&s["operator_delete_violations"]));
    }
    let w = &s["wait_ms"]["all"];
    println!(
        "wait ms (held)                  p50 {}  p99 {}  max {}  (n {})",
        w["p50"], w["p99"], w["max"], w["count"]
    );
    if let Some(m) = s["wait_ms"].as_object() {
        for (lang, w) in m.iter().filter(|(k, _)| *k != "all") {
            println!("  {lang:<30}p50 {}  p99 {}  max {}  (n {})", w["p50"], w["p99"], w["max"], w["count"]);
        }
    }
    let rec: Vec<String> = s["recovery_ms_after_leader_kill"]
        .as_array()
        .map_or(Vec::new(), |a| a.iter().filter_map(Value::as_f64).map(|x| format!("{x:.0}")).collect());
    println!("recovery after leader kill ms   max {}   [{}]", s["recovery_ms_max"], rec.join(", "));
    if let Some(m) = s["outcomes"].as_object() {
        println!("wait outcomes");
        for (lang, v) in m {
            println!("  {lang:<30}{}", map_line(v));
        }
    }
    if let Some(m) = s["errors"].as_object() {
        let any = m.values().any(|v| v.as_object().is_some_and(|o| !o.is_empty()));
        if any {
            println!("errors reported by contenders");
            for (lang, v) in m.iter().filter(|(_, v)| v.as_object().is_some_and(|o| !o.is_empty())) {
                println!("  {lang:<30}{}", map_line(v));
            }
        }
    }
    if let Some(m) = s["lost_reasons"].as_object() {
        println!("lost holds by reason");
        for (lang, v) in m.iter().filter(|(_, v)| v.as_object().is_some_and(|o| !o.is_empty())) {
            println!("  {lang:<30}{}", map_line(v));
        }
    }
    println!("holds ended by contender kill   {}", n(&s["holds_ended_by_kill"]));
    for (key, label) in [
        ("nodes_left_detail", "nodes left"),
        ("orphaned_nodes_detail", "orphaned nodes (zklock)"),
        ("violation_details", "violations"),
        ("protocol_error_examples", "protocol errors"),
        ("contenders_killed_at_shutdown", "killed at shutdown (no exit 10s after SIGTERM)"),
        ("contenders_failed_at_shutdown", "failed exit at shutdown"),
    ] {
        if let Some(a) = s[key].as_array().filter(|a| !a.is_empty()) {
            println!("{label}:");
            for x in a {
                println!("  {}", x.as_str().map_or(x.to_string(), String::from));
            }
        }
    }
    for (lang, p) in s["peers"]["by_lang"].as_object().into_iter().flatten() {
        if let Some(a) = p["orphaned_nodes_detail"].as_array().filter(|a| !a.is_empty()) {
            println!("orphaned nodes ({lang}):");
            for x in a {
                println!("  {}", x.as_str().unwrap_or_default());
            }
        }
    }
    if let Some(m) = s["contender_crash_detail"].as_object().filter(|m| !m.is_empty()) {
        println!("contender crashes:");
        for x in m.values().filter_map(Value::as_array).flatten() {
            println!("  {}", x.as_str().unwrap_or_default());
        }
    }
    println!("--------------------------------------------------------------------");
    match s["failures"].as_array().filter(|a| !a.is_empty()) {
        None => println!("RESULT: PASS"),
        Some(a) => {
            println!("RESULT: FAIL");
            for x in a {
                println!("  {}", x.as_str().unwrap_or_default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn langs() -> Vec<String> {
        LANGS.iter().map(|l| l.to_string()).collect()
    }

    fn below(floors: &[Floor]) -> Vec<&str> {
        floors.iter().filter(|f| f.seen < f.floor).map(|f| f.what.as_str()).collect()
    }

    #[test]
    fn a_run_that_exercised_nothing_is_below_every_floor() {
        let report = json!({});
        let skipped = BTreeMap::from([("leader_kill", 4), ("pinned_cut_long", 2)]);
        let floors = exercise_floors(3.0, &langs(), &report, &BTreeMap::new(), &skipped);
        assert_eq!(
            below(&floors),
            [
                "faults injected",
                "faults injected: leader_kill",
                "faults injected: pinned_cut_long",
                "long pinned holds told lost (zklock)",
                "downgrades",
                "semaphore holds at max at once"
            ]
        );
        // Ten minutes: a zombie write refused is owed too.
        assert!(below(&exercise_floors(10.0, &langs(), &report, &BTreeMap::new(), &skipped))
            .contains(&"zombie writes refused"));
    }

    #[test]
    fn auth_failures_are_found_in_every_language_s_words() {
        let report = json!({
            "errors": {"rust": {"connect:AuthFailed": 1, "release:ConnectionLoss": 4}, "c": {"ZKL_AUTH_FAILED": 2},
                       "unknown": {"connect:AuthFailedError": 1}},
            "outcomes": {"node": {"error:ZKLOCK_AUTH_FAILED": 3, "held": 100}, "python": {"held": 9}},
            "lost": {"python": {"auth_failed": 1, "DisconnectedTooLong": 2}, "kazoo": {"LOST": 1}},
        });
        let found = auth_failures(&report);
        assert_eq!(
            found,
            BTreeMap::from([
                ("c".to_string(), 2),
                ("node".to_string(), 3),
                ("python".to_string(), 1),
                ("rust".to_string(), 1),
                ("unknown".to_string(), 1)
            ])
        );
        assert!(auth_failures(&json!({"errors": {"rust": {"ConnectionLoss": 1}}})).is_empty());
    }

    #[test]
    fn a_run_like_the_usual_three_minutes_meets_every_floor() {
        let report = json!({
            "pinned": {"pinned_cut_long": {"python": {"lost": 1, "taken_over": 1}, "curator": {"lost": 2}}},
            "zombie_writes_rejected": {"rust": 1},
            "downgrades": {"rust": 18, "node": 30},
            "most_leases_holding": 3,
        });
        let faults = BTreeMap::from([("leader_kill", 7), ("pinned_cut_long", 5), ("client_cut", 60)]);
        let skipped = BTreeMap::from([("ensemble_pause", 0)]);
        let floors = exercise_floors(3.0, &langs(), &report, &faults, &skipped);
        assert_eq!(below(&floors), ["faults injected: ensemble_pause"], "a kind planned and never applied");
        let floors = exercise_floors(3.0, &langs(), &report, &faults, &BTreeMap::new());
        assert!(below(&floors).is_empty(), "{:?}", below(&floors));
        // A peer's pinned losses do not count for zklock.
        let peers_only = json!({"pinned": {"pinned_cut_long": {"curator": {"lost": 5}}}, "downgrades": {"rust": 60}, "most_leases_holding": 3});
        assert_eq!(
            below(&exercise_floors(3.0, &langs(), &peers_only, &faults, &BTreeMap::new())),
            ["long pinned holds told lost (zklock)"]
        );
    }
}
