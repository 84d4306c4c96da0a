//! `zklock exec PATH -- COMMAND [ARGS...]`: run COMMAND while holding the lock at PATH. Its
//! process (spawning, the terminal, signals, waiting) is `child`, the line drawn while waiting
//! `status_line`.
//!
//! COMMAND runs as a child in its own process group, so that zklock can signal everything it
//! started at once when the lock is lost. zklock stays its parent the whole time: it forwards
//! signals, watches the hold, and releases the lock once the child has exited.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use zklock::{
    Client, ErrorKind, Hold, HoldState, HoldStateChanges, Leases, Lock, MaxLeases, Mode, Owner, PathRecipe,
    SemaphoreOptions, SessionState,
};

use crate::child::{
    die_by, forward, forwarded_signals, give_terminal, signal_group, status_code, stop_with_command, terminal_is_with,
    Placement, Signal,
};
use crate::codes;
use crate::status_line::{clear_status, show_semaphore_status, show_status};
use crate::watchdog::{Report, Watchdog};

/// The longest time any option takes, in seconds (about 31 years): a deadline further away
/// cannot be told from none, and would overflow the clock.
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// The grace (SIGTERM to SIGKILL) is at most this fraction of the session timeout. The core gives
/// up a hold 9/10 of the session timeout after the send of the last request the server
/// answered, and the server cannot let the next holder in sooner than a whole timeout after that
/// send: SIGKILL after a twentieth lands with a twentieth to spare.
const GRACE_PER_SESSION: u32 = 20;
/// The default grace: a fortieth of the session timeout (250 ms of the default 10 s), so that
/// SIGKILL lands with three fortieths to spare (signal delivery and a loaded machine).
const DEFAULT_GRACE_PER_SESSION: u32 = 40;

/// How long zklock may go without running (stopped, wedged) while COMMAND runs before the
/// watchdog ends the job: half the session timeout, so that, with the grace, the job is gone
/// by 6/10 of it, before the server can expire the session.
const OVERDUE_PER_SESSION: u32 = 2;

/// How long past -w zklock waits for the core's answer before it decides by itself; and how
/// long a -n try may take: the look at the path's recipe and the core's try, each answering
/// within the core's `TRY_BOUND` (2 s), and the margin.
const WAIT_MARGIN: Duration = Duration::from_millis(250);
const TRY_BOUND: Duration = Duration::from_millis(4250);
/// How long zklock waits for its session's close before it exits anyway.
const CLOSE_BOUND: Duration = Duration::from_millis(500);

/// When the core refuses a recipe because the path holds the other's nodes (a race to an empty
/// path, or a contender that just left), exec looks at the path again after 50 ms, then 100 ms,
/// ..., this many times (1.55 s in all) before it gives up.
const RECIPE_LOOKS: usize = 6;
const RECIPE_BACKOFF: Duration = Duration::from_millis(50);

fn after_help() -> String {
    format!(
        "\
The lock: by default the mutex at PATH (zklock's, and Curator's InterProcessMutex). --shared
takes the read side of the read/write lock at PATH (Curator's InterProcessReadWriteLock), which
any number of --shared execs hold together; --write takes its write side, alone. A plain exec on
a path that already is a read/write lock takes the write side too, but on an empty path the
mutex: give the exclusive users of a path shared with --shared execs --write. --max N takes one
lease of the counting semaphore at PATH instead (Curator's InterProcessSemaphoreV2): up to N execs
run at once, the others wait in order. --max-from COUNT takes the max from the shared count at
COUNT (Curator's SharedCount, a 4-byte int: change it at run time and waiters follow; made with
--max, default 1, if missing). Every user of a semaphore must agree on its max.

COMMAND gets in its environment:
  ZKLOCK_PATH           PATH
  ZKLOCK_NODE           the lock node's path (with --max, the lease node's)
  ZKLOCK_FENCING_TOKEN  a number that rises with each holder of PATH: a resource can refuse a
                        writer whose token is lower than one it has seen (with --max, it rises
                        with each lease)
  ZKLOCK_SESSION_ID     the ZooKeeper session holding the lock (0x...)
zklock's secret-bearing variables (ZKLOCK_SASL_PASSWORD, ZKLOCK_TLS_KEY_PASSWORD) are taken out
of it, but COMMAND, as the same user, can read zklock's own environment in /proc: password files
are safer.

The job: COMMAND and every process it starts, in its process group or not (setsid, daemons).
COMMAND is started by a small watchdog process of zklock's, a child subreaper, so that every
process of the job stays its descendant. The lock is released once every process of the job has
exited (as flock(1) holds its lock while COMMAND's children hold its descriptor): a daemon
started by COMMAND keeps the lock while it runs.

Without -w or -n, exec waits for the lock as long as it takes, also through ZooKeeper outages of
any length: when its session ends meanwhile it tries for a new one again after each
--connect-timeout and queues again on it, never giving up. Only starting is bounded: no session
within --connect-timeout at start exits {unavailable}.

When the lock is lost (session expired, node deleted, disconnected too long), every process of
the job gets SIGTERM (and SIGCONT) at once and SIGKILL after --grace, before the server can let
the next holder in: the core gives the hold up 9/10 of the session timeout after the send of the
last request the server answered, and --grace is at most a twentieth of the session timeout (a
fortieth by default). The watchdog does the same when zklock itself is killed (SIGKILL, the OOM
killer: at once) or does not run (SIGSTOP, a wedged process: after half the session timeout), so
the job is gone before the server can let the next holder in, in every case but the watchdog
itself being killed (then COMMAND gets SIGKILL, its children are on their own). A zklock stopped
with its COMMAND (Ctrl-Z) keeps the job stopped, and loses the lock if stopped longer than
--session-timeout. No cgroup is used: a process of the job that makes itself a subreaper of its
own, or moves out of the process tree, escapes.

Signals: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and SIGALRM sent to zklock are
forwarded to COMMAND's process group (followed by SIGCONT if COMMAND is stopped); ones the caller
ignored (nohup, `&` in a script) stay ignored, in zklock and in COMMAND. While waiting, such a
signal ends zklock, which removes its place in the queue and then dies of that signal. COMMAND
killed by one of these signals (or SIGPIPE): zklock dies of the same signal once the lock is
released, so a calling shell sees the job interrupted (a loop stops on Ctrl-C) as it would see
COMMAND; killed by another (a crash, SIGKILL), zklock exits 128+N.

The terminal and process groups: run by a shell as a job of its own (zklock leads its process
group), COMMAND runs in a process group of its own and, when zklock is in the foreground and alone
in its group, gets the terminal as a shell gives it to a job: it can read it, Ctrl-C reaches it,
and Ctrl-Z stops it and zklock; a COMMAND stopped for reading the terminal in the background stops
zklock too (the shell says so), and `fg` continues both. As the first member of a pipeline
(`zklock exec ... | less`), COMMAND never gets the terminal: the pipeline keeps it. Run within
another's process group (a script's; a later member of a pipeline), COMMAND runs in zklock's
group, the terminal's signals reach it directly (zklock does not send them again), job control is
the shell's, as with flock(1), and signals sent to zklock alone are forwarded to the job's
processes in that group.

While waiting, in the foreground of a terminal, one line on stderr says how many are ahead and who
holds the lock. Not had with -n or -w, zklock says so on stderr (not with -q).

Exit status:
  N    COMMAND's own exit status, when it ran while the lock was held
  {signalled}  COMMAND was killed by signal N (also zklock's own, stopped by signal N while waiting)
  {conflict}    the lock was not had: held with -n, or not within -w SECS (-E sets another code)
  {usage}   bad usage: an unknown option, a missing or invalid argument, an invalid PATH
       (also one over zklock's limits, which keep one client from harming a shared server:
       PATH and COUNT at most {depth} segments deep, their parents at most {parent_bytes} bytes of
       path in all; --label at most {label} bytes)
  {unavailable}   ZooKeeper could not be reached, or no session could be established (also when the
       server was unreachable as -n or -w ran out: not the conflict code)
  {software}   any other failure of zklock itself
  {lost}   the lock was lost while COMMAND ran (or, with --on-suspend term, the connection
       dropped; or zklock did not run for half the session timeout): the job got SIGTERM, and
       SIGKILL after --grace; never COMMAND's status
  {cannot_run}  COMMAND could not be run (not executable)
  {not_found}  COMMAND was not found

Examples:
  # Cron: skip this run if the last one still runs (anywhere):
  */5 * * * * zklock exec -n --zk zk1:2181,zk2:2181 /locks/report -- /usr/local/bin/report
  # Deploy: wait up to 10 minutes for the previous deploy:
  zklock exec -w 600 --label deploy-$USER /locks/deploy -- ./deploy.sh production
  # Readers together, a writer alone:
  zklock exec --shared /locks/db -- ./backup.sh
  zklock exec --write /locks/db -- ./migrate.sh
  # At most 3 at once (the others wait their turn):
  zklock exec --max 3 /semaphores/backend -- ./nightly-job.sh",
        signalled = "128+N",
        conflict = codes::CONFLICT,
        usage = codes::USAGE,
        unavailable = codes::UNAVAILABLE,
        software = codes::SOFTWARE,
        lost = codes::LOCK_LOST,
        cannot_run = codes::CANNOT_RUN,
        not_found = codes::NOT_FOUND,
        depth = zklock::MAX_PATH_DEPTH,
        parent_bytes = zklock::MAX_NEW_PARENT_BYTES,
        label = zklock::MAX_LABEL_BYTES,
    )
}

/// Run COMMAND while holding the lock at PATH; release it when COMMAND exits
#[derive(clap::Args, Debug)]
#[command(after_help = after_help())]
pub struct Args {
    #[command(flatten)]
    pub connection: crate::connection::Connection,
    #[command(flatten)]
    pub taking: Taking,
    /// After the lock is lost and the job got SIGTERM, SIGKILL it after SECS: at most a twentieth
    /// of --session-timeout (default: a fortieth), so that it lands before the server can let the
    /// next holder in
    #[arg(long, value_name = "SECS", value_parser = seconds, allow_negative_numbers = true)]
    pub grace: Option<Duration>,
    /// What to do when the connection drops while COMMAND runs (the lock may still be ours)
    #[arg(long, value_enum, value_name = "ACTION", default_value_t = OnSuspend::Continue)]
    pub on_suspend: OnSuspend,
    /// The owner label others see for this holder (default: COMMAND's file name)
    #[arg(long)]
    pub label: Option<String>,
    /// No status line while waiting
    #[arg(short, long)]
    pub quiet: bool,
    /// The lock path (relative to the chroot of --zk, if any)
    pub path: String,
    /// Run STRING with `sh -c` instead of a COMMAND after `--` (as flock -c)
    #[arg(short = 'c', long = "command", value_name = "STRING", conflicts_with = "command")]
    pub shell_command: Option<OsString>,
    /// The command to run, after `--`
    #[arg(last = true, required_unless_present = "shell_command", value_name = "COMMAND")]
    pub command: Vec<OsString>,
    /// `zklock hold`'s own: its name in messages, and whom to signal when the hold is lost.
    #[arg(skip)]
    pub hold: Option<HoldRole>,
}

/// What `zklock hold` adds to an exec.
#[derive(Debug, Clone)]
pub struct HoldRole {
    /// The process to send SIGTERM when the hold is lost.
    pub notify: Option<libc::pid_t>,
}

/// How exec and hold take the lock: which side, and how long to wait.
#[derive(clap::Args, Debug)]
pub struct Taking {
    /// Take the read side of the read/write lock at PATH, together with other --shared holders
    #[arg(short = 's', long, conflicts_with = "write")]
    pub shared: bool,
    /// Take the write side of the read/write lock at PATH (alone, excluding --shared holders)
    #[arg(short = 'x', long)]
    pub write: bool,
    /// Do not wait: if the lock is held, exit at once with the conflict code; within 4.25 s in any
    /// case (ZooKeeper not answering by then: code 69, "cannot reach ZooKeeper")
    #[arg(short = 'n', long, conflicts_with = "wait")]
    pub nonblock: bool,
    /// Wait at most SECS (connecting included), then exit with the conflict code (69 if the
    /// server could not be reached); zklock exits within SECS + 0.25 s whatever the server does.
    /// Without it, wait as long as it takes, through outages and new sessions
    #[arg(short = 'w', long, value_name = "SECS", value_parser = seconds, allow_negative_numbers = true)]
    pub wait: Option<Duration>,
    /// The exit code when the lock was not had with -n or -w
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = codes::CONFLICT as u8, allow_negative_numbers = true)]
    pub conflict_exit_code: u8,
    /// Take one of N leases of the semaphore at PATH (Curator's InterProcessSemaphoreV2), not a
    /// lock; with --max-from, the shared count's value if it has to be made
    #[arg(long, value_name = "N", value_parser = max_leases, allow_negative_numbers = true, conflicts_with_all = ["shared", "write"])]
    pub max: Option<u32>,
    /// Take a lease of the semaphore at PATH whose max is the shared count at COUNT (Curator's
    /// SharedCount), changeable at run time
    #[arg(long, value_name = "COUNT", conflicts_with_all = ["shared", "write"])]
    pub max_from: Option<String>,
}

impl Taking {
    /// The semaphore's max, if a lease is taken rather than a lock.
    fn max_leases(&self) -> Option<MaxLeases> {
        match (&self.max_from, self.max) {
            (Some(count), seed) => Some(MaxLeases::SharedCount { path: count.clone(), seed: seed.unwrap_or(1) }),
            (None, Some(max)) => Some(MaxLeases::Fixed(max)),
            (None, None) => None,
        }
    }
}

/// A semaphore's max: from 1 to 2^31-1 (what Curator's SharedCount can hold).
fn max_leases(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(max) if (1..=i64::from(i32::MAX)).contains(&max) => Ok(max as u32),
        Ok(max) => Err(format!("a semaphore's max leases must be from 1 to {}, not {max}", i32::MAX)),
        Err(_) => Err("not a whole number".to_owned()),
    }
}

/// `zklock hold`: exec's lock-taking options, with no command of one's own.
#[derive(clap::Args, Debug)]
pub struct HoldArgs {
    #[command(flatten)]
    pub connection: crate::connection::Connection,
    #[command(flatten)]
    pub taking: Taking,
    /// The owner label others see for this holder
    #[arg(long, default_value = "zklock-hold")]
    pub label: String,
    /// No status line while waiting
    #[arg(short, long)]
    pub quiet: bool,
    /// When the hold is lost, send SIGTERM to PID (the script that took it: --notify $$); the
    /// line "lost REASON" goes to stdout in any case
    #[arg(long, value_name = "PID", value_parser = notify_pid)]
    pub notify: Option<i32>,
    /// The lock path (relative to the chroot of --zk, if any)
    pub path: String,
}

fn notify_pid(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 1 => Ok(pid),
        _ => Err("a process id (greater than 1)".to_owned()),
    }
}

pub(crate) fn hold_after_help() -> String {
    format!(
        "\
Prints NODE TOKEN on stdout once the lock is held, and holds it until stdin closes (or a signal
ends zklock). When the hold is lost, zklock prints \"lost REASON\" on stdout (the line a coproc's
reader gets after NODE TOKEN), says why on stderr, sends SIGTERM to --notify's process if given,
and exits {lost}: a script that took the hold must stop its locked work then.

Exit status:
  0    stdin closed: released
  {signalled}  ended by signal N (zklock dies of it)
  {conflict}    the lock was not had: held with -n, or not within -w SECS (-E sets another code)
  {usage}   bad usage: an unknown option, a missing or invalid argument, an invalid PATH
  {unavailable}   ZooKeeper could not be reached, or no session could be established
  {software}   any other failure of zklock itself
  {lost}   the hold was lost",
        signalled = "128+N",
        conflict = codes::CONFLICT,
        usage = codes::USAGE,
        unavailable = codes::UNAVAILABLE,
        software = codes::SOFTWARE,
        lost = codes::LOCK_LOST,
    )
}

/// Takes the lock, prints its node and fencing token (one line: NODE TOKEN), and holds it until
/// stdin closes (or a signal ends it): etcdctl lock with no command, so a shell script can lock
/// its own remainder (`coproc zklock hold ...`). Exit status as exec's, 0 when stdin closed.
pub fn hold(args: HoldArgs) -> i32 {
    run(Args {
        connection: args.connection,
        taking: args.taking,
        grace: None,
        on_suspend: OnSuspend::Continue,
        label: Some(args.label),
        quiet: args.quiet,
        path: args.path,
        shell_command: Some(r#"printf '%s %s\n' "$ZKLOCK_NODE" "$ZKLOCK_FENCING_TOKEN"; exec cat >/dev/null"#.into()),
        command: Vec::new(),
        hold: Some(HoldRole { notify: args.notify }),
    })
}

/// What `--on-suspend` does while the connection is down and the session may still be live.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnSuspend {
    /// Let COMMAND run on: the lock is ours again if the connection comes back in time
    Continue,
    /// Treat it as lost at once: SIGTERM, then SIGKILL after --grace, exit 75
    Term,
}

impl OnSuspend {
    /// Whether COMMAND must be terminated with the hold in `state`.
    fn terminates(self, state: HoldState) -> bool {
        state == HoldState::Lost || (state == HoldState::Suspended && self == OnSuspend::Term)
    }
}

/// A number of seconds, zero or more (at most [`MAX_SECONDS`]).
pub(crate) fn seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| "not a number of seconds".to_owned())?;
    if secs > MAX_SECONDS {
        return Err(format!("at most {MAX_SECONDS:e} seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| "must be a number of seconds, zero or more".to_owned())
}

/// What the exec holds while COMMAND runs.
enum Taken {
    Lock(Lock),
    Leases(Leases),
}

/// Why zklock exits without COMMAND's status: the code, and what to say (if anything).
struct Exit {
    code: i32,
    message: Option<String>,
    /// Die of this signal rather than exit with `code` (128+N), after the cleanup.
    signal: Option<libc::c_int>,
}

impl Exit {
    fn fail(code: i32, message: impl Into<String>) -> Exit {
        Exit { code, message: Some(message.into()), signal: None }
    }

    fn quiet(code: i32) -> Exit {
        Exit { code, message: None, signal: None }
    }

    /// Ended by `signal`: zklock dies of it once it has cleaned up.
    fn signalled(signal: libc::c_int) -> Exit {
        Exit { code: codes::killed_by(signal), message: None, signal: Some(signal) }
    }
}

pub fn run(mut args: Args) -> i32 {
    if let Some(shell_command) = args.shell_command.take() {
        args.command = vec![shell(), "-c".into(), shell_command];
    }
    let name = if args.hold.is_some() { "zklock hold" } else { "zklock exec" };
    let exit = start(args).unwrap_or_else(|exit| exit);
    if let Some(message) = exit.message {
        say!("{name}: {message}");
    }
    match exit.signal {
        Some(signal) => die_by(signal),
        None => exit.code,
    }
}

/// The shell for -c and `hold`: $SHELL if it is an absolute path, else /bin/sh (as flock(1);
/// never one found through PATH).
fn shell() -> OsString {
    match std::env::var_os("SHELL") {
        Some(shell) if std::path::Path::new(&shell).is_absolute() => shell,
        _ => "/bin/sh".into(),
    }
}

fn start(args: Args) -> Result<Exit, Exit> {
    let started = Instant::now();
    let mut options = args.connection.options().map_err(|message| Exit::fail(codes::USAGE, message))?;
    // Bad input is told before any network traffic.
    zklock::check_lock_path(&args.path).map_err(|err| Exit::fail(codes::USAGE, format!("PATH: {err}")))?;
    if let Some(count) = &args.taking.max_from {
        zklock::check_lock_path(count).map_err(|err| Exit::fail(codes::USAGE, format!("--max-from: {err}")))?;
    }
    if let Some(label) = &args.label {
        zklock::check_label(label).map_err(|err| Exit::fail(codes::USAGE, format!("--label: {err}")))?;
    }
    let most_grace = options.session_timeout / GRACE_PER_SESSION;
    if let Some(grace) = args.grace.filter(|grace| *grace > most_grace) {
        return Err(Exit::fail(
            codes::USAGE,
            format!(
                "--grace {}: more than a twentieth of the session timeout ({} s): SIGKILL must land before the server \
                 can expire the session and let the next holder in; give at most {} s, or a longer --session-timeout",
                grace.as_secs_f64(),
                options.session_timeout.as_secs_f64(),
                most_grace.as_secs_f64()
            ),
        ));
    }
    options.language = "cli".into();
    if let Some(wait) = args.taking.wait.filter(|wait| !wait.is_zero()) {
        // One budget for connecting and waiting: -w 2 gives up after 2 s, whatever the cause.
        options.connect_timeout = options.connect_timeout.min(wait);
    }
    // Forked before any other thread exists; then the signals blocked, so that every thread
    // inherits the mask and only the one that waits for them sees these signals.
    let watchdog = Watchdog::start(args.command.clone())
        .map_err(|err| Exit::fail(codes::SOFTWARE, format!("cannot start the watchdog: {err}")))?;
    let signals = forwarded_signals().map_err(|err| Exit::fail(codes::SOFTWARE, format!("signals: {err}")))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|err| Exit::fail(codes::SOFTWARE, format!("cannot start the async runtime: {err}")))?;
    let exit = runtime.block_on(Exec::new(args, started, signals, watchdog).and_then_run(options));
    runtime.shutdown_background();
    Ok(exit)
}

struct Exec {
    args: Args,
    started: Instant,
    signals: UnboundedReceiver<Signal>,
    watchdog: Arc<Watchdog>,
    reports: Option<UnboundedReceiver<Report>>,
    /// Whether to draw the status line: stderr is a terminal and -q was not given (drawn only
    /// while zklock is in its foreground).
    status_line: bool,
    grace: Duration,
}

impl Exec {
    fn new(args: Args, started: Instant, signals: UnboundedReceiver<Signal>, mut watchdog: Watchdog) -> Exec {
        // SAFETY: isatty only inspects the descriptor.
        let status_line = !args.quiet && unsafe { libc::isatty(2) } == 1;
        let reports = watchdog.reports().ok();
        let grace = args.grace.unwrap_or_default();
        Exec { args, started, signals, watchdog: Arc::new(watchdog), reports, status_line, grace }
    }

    async fn and_then_run(self, options: zklock::ClientOptions) -> Exit {
        // Heartbeats to the watchdog, from the runtime itself: they stop when zklock cannot run.
        let beat = (options.session_timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
        let watchdog = self.watchdog.clone();
        let beating = tokio::spawn(async move {
            loop {
                watchdog.beat();
                tokio::time::sleep(beat).await;
            }
        });
        let exit = self.run(options).await;
        beating.abort();
        exit
    }

    fn name(&self) -> &'static str {
        if self.args.hold.is_some() {
            "zklock hold"
        } else {
            "zklock exec"
        }
    }

    async fn run(mut self, options: zklock::ClientOptions) -> Exit {
        let connect = self.args.connection.connect.clone();
        let requested = options.session_timeout;
        let client = tokio::select! {
            connected = Client::connect_with(&connect, options) => match connected {
                Ok(client) => client,
                Err(err) => {
                    let (code, message) = codes::connect_failure(&err);
                    return Exit::fail(code, message);
                }
            },
            Some(signal) = self.signals.recv() => return Exit::signalled(signal.number),
        };
        // The server may grant a shorter session than asked: the grace shrinks with it.
        let granted = client.session_timeout().min(requested);
        let most_grace = granted / GRACE_PER_SESSION;
        match self.args.grace {
            Some(grace) if grace > most_grace => {
                say!(
                    "{}: the server granted a session timeout of {} s: --grace cut to {} s",
                    self.name(),
                    granted.as_secs_f64(),
                    most_grace.as_secs_f64()
                );
                self.grace = most_grace;
            }
            Some(_) => {}
            None => self.grace = granted / DEFAULT_GRACE_PER_SESSION,
        }
        let exit = self.hold_and_run(&client, granted).await;
        // Ends the session: whatever this process still had at PATH goes with it at once. Bounded:
        // with the server unreachable the close cannot be told, and the session expires anyway.
        if client.state() == SessionState::Connected {
            let _ = tokio::time::timeout(CLOSE_BOUND, client.close()).await;
        }
        exit
    }

    async fn hold_and_run(&mut self, client: &Client, session_timeout: Duration) -> Exit {
        let label = self.args.label.clone().unwrap_or_else(|| default_label(&self.args.command));
        let owner = Owner::unique_labelled(|_| label.clone());
        // The wait's bound holds whatever the core does while the server is unreachable.
        let bound = match self.args.taking.wait {
            Some(wait) => Some(self.started + wait + WAIT_MARGIN),
            None if self.args.taking.nonblock => Some(Instant::now() + TRY_BOUND),
            None => None,
        };
        let acquiring = async {
            match self.args.taking.max_leases() {
                Some(max) => self.acquire_lease(client, max, label).await,
                None => {
                    self.acquire(client, &owner).await.map(|held| held.map(|(lock, hold)| (Taken::Lock(lock), hold)))
                }
            }
        };
        let acquired = match bound {
            // zklock's own bound firing means the core did not answer in time: the server could not
            // be reached (or not fast enough), which is never "held by another".
            Some(bound) => {
                match tokio::time::timeout_at(bound.into(), acquiring).await {
                    Ok(acquired) => acquired,
                    Err(_) => {
                        let within = match self.args.taking.wait {
                            Some(wait) => format!("within -w {} s", wait.as_secs_f64()),
                            None => format!("within {} s (-n)", TRY_BOUND.as_secs_f64()),
                        };
                        return Exit::fail(
                        codes::UNAVAILABLE,
                        format!("cannot reach ZooKeeper: no answer {within}, so whether the lock is free cannot be told"),
                    );
                    }
                }
            }
            None => acquiring.await,
        };
        if self.status_line {
            clear_status();
        }
        let (taken, hold) = match acquired {
            Ok(Some(held)) => held,
            Ok(None) => {
                // Not had: because someone holds it, or because the server could not be reached?
                if client.state() != SessionState::Connected {
                    let within = match self.args.taking.wait {
                        Some(wait) => format!("within -w {} s", wait.as_secs_f64()),
                        None => format!("within {} s (-n)", TRY_BOUND.as_secs_f64()),
                    };
                    return Exit::fail(
                        codes::UNAVAILABLE,
                        format!(
                            "cannot reach ZooKeeper: the connection was down ({}) and the lock was not had {within}",
                            client.state().as_str()
                        ),
                    );
                }
                if !self.args.quiet {
                    let what = if self.args.taking.max_leases().is_some() {
                        "has no lease free"
                    } else {
                        "is held by another"
                    };
                    let how = match self.args.taking.wait {
                        Some(wait) => format!("not acquired within -w {} s", wait.as_secs_f64()),
                        None => "not acquired (-n)".to_owned(),
                    };
                    say!("{}: {} {what}: {how}", self.name(), self.args.path);
                }
                return Exit::quiet(i32::from(self.args.taking.conflict_exit_code));
            }
            Err(exit) => return exit,
        };
        let exit = self.run_command(client, &hold, session_timeout).await;
        let released = match taken {
            Taken::Lock(lock) => lock.release(&owner).await,
            Taken::Leases(leases) => leases.release().await,
        };
        match released {
            Ok(()) => exit,
            Err(err) if err.kind() == ErrorKind::LockLost && exit.code != codes::LOCK_LOST => {
                // Lost about when COMMAND exited: it may have run its last moments unlocked.
                Exit::fail(codes::LOCK_LOST, format!("the lock was lost as COMMAND ended: {err}"))
            }
            // Lost, already reported; or the delete goes on in the background and closing the
            // session removes the node anyway.
            Err(_) => exit,
        }
    }

    /// Takes one lease of the semaphore at PATH, as the options say: `Ok(None)` when not had
    /// with -n or within -w; `label` is its owner label, as a lock's.
    async fn acquire_lease(
        &mut self,
        client: &Client,
        max: MaxLeases,
        label: String,
    ) -> Result<Option<(Taken, Hold)>, Exit> {
        let argument = if self.args.taking.max_from.is_some() { "--max-from" } else { "--max" };
        let semaphore = client
            .semaphore_with(&self.args.path, SemaphoreOptions::new(max).label(label))
            .map_err(|err| Exit::fail(codes::USAGE, format!("{argument}: {err}")))?;
        let timeout = match self.args.taking.wait {
            Some(wait) => Some(left(self.started + wait, wait)),
            None if self.args.taking.nonblock => Some(Duration::ZERO),
            None => None,
        };
        let acquiring = semaphore.acquire_for(1, timeout, None);
        let status = show_semaphore_status(&semaphore, client, self.status_line);
        tokio::pin!(acquiring, status);
        let acquired = tokio::select! {
            acquired = &mut acquiring => acquired,
            () = &mut status => return Err(Exit::fail(codes::SOFTWARE, "the status line ended")),
            // Dropping the acquisition removes its nodes (closing the session makes sure of it).
            Some(signal) = self.signals.recv() => return Err(Exit::signalled(signal.number)),
        };
        match acquired {
            Ok(Some(leases)) => {
                let hold = leases.leases()[0].hold().clone();
                Ok(Some((Taken::Leases(leases), hold)))
            }
            Ok(None) => Ok(None),
            // A lock's nodes at PATH, or a shared count that is no count.
            Err(err) if err.kind() == ErrorKind::InvalidArgument => {
                Err(Exit::fail(codes::USAGE, format!("{argument}: {err}")))
            }
            Err(err) => Err(failure(&err)),
        }
    }

    /// Acquires as the options say: `Ok(None)` when not had with -n or within -w.
    async fn acquire(&mut self, client: &Client, owner: &Owner) -> Result<Option<(Lock, Hold)>, Exit> {
        let deadline = self.args.taking.wait.map(|wait| self.started + wait);
        let plain = !self.args.taking.shared && !self.args.taking.write;
        let mut mode = self.choose_mode(client).await?;
        let mut backoff = RECIPE_BACKOFF;
        let mut refused = None;
        for _ in 0..RECIPE_LOOKS {
            if refused.is_some() {
                // Give the other recipe's nodes time to go (execs racing us to an empty path
                // take the write side, or give up), then look again.
                self.pause(backoff).await?;
                backoff *= 2;
                if !self.path_recipe(client).await?.fits(mode) {
                    continue;
                }
            }
            let lock = lock_for(client, &self.args.path, mode)
                .map_err(|err| Exit::fail(codes::USAGE, format!("PATH: {err}")))?;
            match self.attempt(&lock, client, owner, deadline).await? {
                Ok(hold) => return Ok(hold.map(|hold| (lock, hold))),
                // The core refuses a recipe on a path holding the other's nodes: one came
                // between our look at the path and our node. A plain exec then takes the write
                // side for good: the path is in use as a read/write lock.
                Err(err) if err.is_recipe_conflict() => {
                    // A semaphore's path stays one: no use looking again.
                    if self.path_recipe(client).await? == PathRecipe::Semaphore {
                        return Err(Exit::fail(codes::USAGE, format!("{err} (--max N takes one of its leases)")));
                    }
                    if plain {
                        mode = Mode::Write;
                    }
                    refused = Some(err);
                }
                Err(err) => return Err(failure(&err)),
            }
        }
        let Some(err) = refused else { return Err(Exit::fail(codes::SOFTWARE, "no refusal to report")) };
        let (argument, hint) = match mode {
            Mode::Read => ("--shared: ", " (the exclusive users of a path shared with --shared need --write)"),
            Mode::Write if self.args.taking.write => ("--write: ", ""),
            _ => ("", ""),
        };
        Err(Exit::fail(codes::USAGE, format!("{argument}{err}{hint}")))
    }

    /// One acquisition, with the status line drawn meanwhile; a signal stops it (the attempt's
    /// node is removed as the acquisition is dropped, and closing the session makes sure of it).
    async fn attempt(
        &mut self,
        lock: &Lock,
        client: &Client,
        owner: &Owner,
        deadline: Option<Instant>,
    ) -> Result<zklock::Result<Option<Hold>>, Exit> {
        let timeout = match deadline {
            Some(deadline) => Some(left(deadline, self.args.taking.wait.unwrap_or_default())),
            None if self.args.taking.nonblock => Some(Duration::ZERO),
            None => None,
        };
        // A fresh owner: never a re-entry.
        let acquiring = async { lock.acquire_for(owner, timeout).await.map(|acquired| acquired.new_hold().cloned()) };
        let status = show_status(lock, client, self.status_line);
        tokio::pin!(acquiring, status);
        tokio::select! {
            acquired = &mut acquiring => Ok(acquired),
            () = &mut status => Err(Exit::fail(codes::SOFTWARE, "the status line ended")),
            Some(signal) = self.signals.recv() => Err(Exit::signalled(signal.number)),
        }
    }

    /// Sleeps, unless a signal stops zklock first.
    async fn pause(&mut self, pause: Duration) -> Result<(), Exit> {
        tokio::select! {
            () = tokio::time::sleep(pause) => Ok(()),
            Some(signal) = self.signals.recv() => Err(Exit::signalled(signal.number)),
        }
    }

    /// --shared reads and --write writes; a plain exec takes the exclusive lock the path is
    /// (the core's `PathRecipe::exclusive_mode`): the mutex, unless the path already is a
    /// read/write lock (so that it excludes the --shared execs there rather than fail).
    async fn choose_mode(&mut self, client: &Client) -> Result<Mode, Exit> {
        if self.args.taking.shared {
            return Ok(Mode::Read);
        }
        if self.args.taking.write {
            return Ok(Mode::Write);
        }
        Ok(self.path_recipe(client).await?.exclusive_mode())
    }

    /// Which recipe's nodes are at PATH now, as the core tells it.
    async fn path_recipe(&mut self, client: &Client) -> Result<PathRecipe, Exit> {
        let recipe = tokio::select! {
            recipe = client.path_recipe(&self.args.path) => recipe,
            Some(signal) = self.signals.recv() => return Err(Exit::signalled(signal.number)),
        };
        recipe.map_err(|err| match err.kind() {
            ErrorKind::InvalidArgument => Exit::fail(codes::USAGE, format!("PATH: {err}")),
            _ => failure(&err),
        })
    }

    /// Runs COMMAND under `hold`, until every process of the job has exited; ends the job if the
    /// hold is lost.
    async fn run_command(&mut self, client: &Client, hold: &Hold, session_timeout: Duration) -> Exit {
        // Taken before the look at the state, so that no change falls between the two.
        let states = hold.state_changes();
        if self.args.on_suspend.terminates(hold.state()) {
            return Exit::fail(codes::LOCK_LOST, format!("lost the lock on {} before COMMAND started", self.args.path));
        }
        let Some(mut reports) = self.reports.take() else {
            return Exit::fail(codes::SOFTWARE, "the watchdog's reports are gone");
        };
        let session_id = client.session_id().unwrap_or_default();
        let placement = Placement::choose();
        let env = [
            ("ZKLOCK_PATH", self.args.path.clone()),
            ("ZKLOCK_NODE", hold.node_path().to_owned()),
            ("ZKLOCK_FENCING_TOKEN", hold.fencing_token().to_string()),
            ("ZKLOCK_SESSION_ID", format!("0x{session_id:x}")),
        ];
        self.watchdog.spawn(&env, placement, self.grace, session_timeout / OVERDUE_PER_SESSION);
        let command = loop {
            match reports.recv().await {
                Some(Report::Spawned(pid)) => break pid,
                Some(Report::SpawnFailed(errno)) => {
                    let err = io::Error::from_raw_os_error(errno);
                    let code = if err.kind() == io::ErrorKind::NotFound { codes::NOT_FOUND } else { codes::CANNOT_RUN };
                    let program = self.args.command[0].to_string_lossy().into_owned();
                    return Exit::fail(code, format!("cannot run {program}: {err}"));
                }
                Some(_) => {}
                None => return Exit::fail(codes::SOFTWARE, "the watchdog is gone: COMMAND was not started"),
            }
        };
        let exit = self.supervise(command, hold, states, reports, placement).await;
        // SAFETY: getpgrp only reads.
        let own = unsafe { libc::getpgrp() };
        // Taken back only from COMMAND's group: never from a shell that has it now.
        if placement.own_group() && terminal_is_with(command) {
            give_terminal(own);
        }
        exit
    }

    /// Waits until every process of the job has exited, forwarding signals and following
    /// COMMAND's stops; has the watchdog end the job if the hold is lost.
    async fn supervise(
        &mut self,
        command: libc::pid_t,
        hold: &Hold,
        mut states: HoldStateChanges,
        mut reports: UnboundedReceiver<Report>,
        placement: Placement,
    ) -> Exit {
        let mut lost = false;
        let mut status = None;
        let mut overdue = None;
        let mut states_ended = false;
        loop {
            tokio::select! {
                report = reports.recv() => match report {
                    Some(Report::Exited(raw)) => status = Some(std::process::ExitStatus::from_raw(raw)),
                    Some(Report::AllGone) => break,
                    Some(Report::Stopped(signal)) if status.is_none() => stop_with_command(command, signal, placement),
                    Some(Report::Overdue(ms)) => overdue = Some(ms),
                    Some(_) => {}
                    None => {
                        // The watchdog was killed: COMMAND got SIGKILL with it (its parent-death
                        // signal); the rest of its group goes too.
                        if placement.own_group() {
                            signal_group(command, libc::SIGKILL);
                        }
                        return Exit::fail(codes::SOFTWARE, "the watchdog was killed: COMMAND was killed");
                    }
                },
                state = states.next(), if !states_ended => match state {
                    Some(state) if !lost && self.args.on_suspend.terminates(state) => {
                        // The signals first: no message may stand before them.
                        self.watchdog.end_job();
                        lost = true;
                        let why = match hold.lost_reason() {
                            Some(reason) => reason.describe(),
                            None => "the connection to ZooKeeper dropped (--on-suspend term)",
                        };
                        self.tell_holder_lost(why);
                        say!(
                            "{}: lost the lock on {}: {why}; sent SIGTERM to every process of the job, SIGKILL after {} s",
                            self.name(),
                            self.args.path,
                            self.grace.as_secs_f64()
                        );
                    }
                    Some(_) => {}
                    None => states_ended = true,
                },
                Some(signal) = self.signals.recv() => {
                    // The terminal's signals reach a COMMAND in zklock's group by themselves.
                    if (placement.own_group() || !signal.from_terminal) && status.is_none() {
                        forward(command, self.watchdog.pid(), signal.number, placement);
                    }
                }
            }
        }
        if lost {
            return Exit::quiet(codes::LOCK_LOST);
        }
        if let Some(ms) = overdue {
            return Exit::fail(
                codes::LOCK_LOST,
                format!(
                    "zklock did not run for {} s (stopped?) while COMMAND ran: the lock could be lost meanwhile, so the \
                     watchdog ended the job",
                    f64::from(ms) / 1000.0
                ),
            );
        }
        match status {
            // Killed by a signal from outside (Ctrl-C, kill, a closed pipe): zklock dies of it
            // too; a crash (SIGSEGV), SIGKILL and the rest give 128+N, as flock(1) does.
            Some(status) => match std::os::unix::process::ExitStatusExt::signal(&status) {
                Some(signal) if crate::child::reraised(signal) => Exit::signalled(signal),
                _ => Exit::quiet(status_code(status)),
            },
            None => Exit::fail(codes::SOFTWARE, "COMMAND's exit status was not reported"),
        }
    }

    /// `zklock hold`'s holder is told the hold is lost: a line on stdout, SIGTERM to --notify.
    fn tell_holder_lost(&self, why: &str) {
        let Some(role) = &self.args.hold else { return };
        {
            use std::io::Write;
            let mut stdout = io::stdout();
            let _ = writeln!(stdout, "lost {why}");
            let _ = stdout.flush();
        }
        if let Some(pid) = role.notify {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

fn lock_for(client: &Client, path: &str, mode: Mode) -> zklock::Result<Lock> {
    Ok(match mode {
        Mode::Read => client.read_write_lock(path)?.read().clone(),
        Mode::Write => client.read_write_lock(path)?.write().clone(),
        _ => client.lock(path)?,
    })
}

/// The exit code for an error of the core while acquiring.
fn failure(err: &zklock::Error) -> Exit {
    Exit::fail(codes::of_error(err), err.to_string())
}

/// COMMAND's file name: says what holds the lock without showing its arguments, which may be
/// secret, to everyone who can list the lock.
fn default_label(command: &[OsString]) -> String {
    let program = std::path::Path::new(&command[0]);
    program.file_name().unwrap_or(program.as_os_str()).to_string_lossy().into_owned()
}

/// What is left of a wait of `wait` until `deadline`: zero only for `-w 0` (a try). A wait whose
/// deadline passed (connecting took it) ends at once, as a wait, not as a try (which may take up
/// to `zklock::TRY_BOUND` more and say the server could not be reached).
fn left(deadline: Instant, wait: Duration) -> Duration {
    match wait.is_zero() {
        true => Duration::ZERO,
        false => deadline.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_zero_or_more() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        assert!(seconds("-1").is_err());
        assert!(seconds("soon").is_err());
        assert!(seconds("inf").is_err());
    }
}
