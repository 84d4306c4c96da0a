//! `zklock exec PATH -- COMMAND [ARGS...]`: run COMMAND while holding the lock at PATH. Its
//! process (spawning, the terminal, signals, waiting) is `child`, the line drawn while waiting
//! `status_line`.
//!
//! COMMAND runs as a child in its own process group, so that zklock can signal everything it
//! started at once when the lock is lost. zklock stays its parent the whole time: it forwards
//! signals, watches the hold, and releases the lock once the child has exited.

use std::ffi::OsString;
use std::io;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use zklock::{
    Client, ErrorKind, Hold, HoldState, HoldStateChanges, Leases, Lock, MaxLeases, Mode, Owner, PathRecipe,
    SemaphoreOptions,
};

use crate::child::{
    foreground_terminal, forwarded_signals, give_terminal, group_alive, signal_group, spawn, status_code,
    stop_with_command, wait_in_thread, ChildEvent,
};
use crate::codes;
use crate::status_line::{show_semaphore_status, show_status};

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
zklock's passwords (ZKLOCK_SASL_PASSWORD, ZKLOCK_TLS_KEY_PASSWORD) are taken out of it, but COMMAND,
as the same user, can read zklock's own environment in /proc: password files are safer.

COMMAND runs in its own process group. SIGINT, SIGTERM and SIGHUP to zklock are forwarded to that
group; the lock is released once COMMAND has exited. If the lock is lost (session expired, node
deleted, disconnected too long), the group gets SIGTERM at once and SIGKILL after --grace. If
zklock itself dies, COMMAND gets SIGTERM: the lock lasts up to --session-timeout longer. Run from
a terminal, COMMAND gets the terminal, as a shell gives it to a job: it can read it, Ctrl-C
reaches it, and Ctrl-Z stops it and zklock.

While waiting on a terminal, one line on stderr says how many are ahead and who holds the lock.

Exit status:
  N    COMMAND's own exit status, when it ran while the lock was held
  {signalled}  COMMAND was killed by signal N (also zklock's own, stopped by signal N while waiting)
  {conflict}    the lock was not had: held with -n, or not within -w SECS (-E sets another code)
  {usage}   bad usage: an unknown option, a missing or invalid argument, an invalid PATH
  {unavailable}   ZooKeeper could not be reached, or no session could be established
  {software}   any other failure of zklock itself
  {lost}   the lock was lost while COMMAND ran (or, with --on-suspend term, the connection
       dropped): COMMAND got SIGTERM, and SIGKILL after --grace; never COMMAND's status
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
    /// After the lock is lost and COMMAND got SIGTERM, SIGKILL it after SECS
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = seconds, allow_negative_numbers = true)]
    pub grace: Duration,
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
    /// Do not wait: if the lock is held, exit at once with the conflict code; within 2 s in any
    /// case (ZooKeeper not answering by then: code 69, "cannot reach ZooKeeper")
    #[arg(short = 'n', long, conflicts_with = "wait")]
    pub nonblock: bool,
    /// Wait at most SECS (connecting included; kept within 0.1 s, ZooKeeper reachable or not),
    /// then exit with the conflict code
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
    /// The lock path (relative to the chroot of --zk, if any)
    pub path: String,
}

/// Takes the lock, prints its node and fencing token (one line: NODE TOKEN), and holds it until
/// stdin closes (or a signal ends it): etcdctl lock with no command, so a shell script can lock
/// its own remainder (`coproc zklock hold ...`). Exit status as exec's, 0 when stdin closed.
pub fn hold(args: HoldArgs) -> i32 {
    run(Args {
        connection: args.connection,
        taking: args.taking,
        grace: Duration::from_secs(5),
        on_suspend: OnSuspend::Continue,
        label: Some(args.label),
        quiet: args.quiet,
        path: args.path,
        shell_command: Some(r#"printf '%s %s\n' "$ZKLOCK_NODE" "$ZKLOCK_FENCING_TOKEN"; exec cat >/dev/null"#.into()),
        command: Vec::new(),
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

/// A number of seconds, zero or more.
fn seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| "not a number of seconds".to_owned())?;
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
}

impl Exit {
    fn fail(code: i32, message: impl Into<String>) -> Exit {
        Exit { code, message: Some(message.into()) }
    }

    fn quiet(code: i32) -> Exit {
        Exit { code, message: None }
    }
}

pub fn run(mut args: Args) -> i32 {
    if let Some(shell_command) = args.shell_command.take() {
        args.command = vec!["sh".into(), "-c".into(), shell_command];
    }
    let exit = start(args).unwrap_or_else(|exit| exit);
    if let Some(message) = exit.message {
        eprintln!("zklock exec: {message}");
    }
    exit.code
}

fn start(args: Args) -> Result<Exit, Exit> {
    let started = Instant::now();
    let mut options = args.connection.options().map_err(|message| Exit::fail(codes::USAGE, message))?;
    // Bad input is told before any network traffic.
    zklock::check_lock_path(&args.path).map_err(|err| Exit::fail(codes::USAGE, format!("PATH: {err}")))?;
    if let Some(count) = &args.taking.max_from {
        zklock::check_lock_path(count).map_err(|err| Exit::fail(codes::USAGE, format!("--max-from: {err}")))?;
    }
    options.language = "cli".into();
    if let Some(wait) = args.taking.wait.filter(|wait| !wait.is_zero()) {
        // One budget for connecting and waiting: -w 2 gives up after 2 s, whatever the cause.
        options.connect_timeout = options.connect_timeout.min(wait);
    }
    // Blocked before any other thread exists, so that every thread inherits the mask and only
    // the one that waits for them sees these signals.
    let signals = forwarded_signals().map_err(|err| Exit::fail(codes::SOFTWARE, format!("signals: {err}")))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|err| Exit::fail(codes::SOFTWARE, format!("cannot start the async runtime: {err}")))?;
    // The future runs on this (the main) thread, which spawns COMMAND: the parent-death signal
    // fires when the spawning thread ends, and this one ends only with the process.
    let exit = runtime.block_on(Exec::new(args, started, signals).run(options));
    runtime.shutdown_background();
    Ok(exit)
}

struct Exec {
    args: Args,
    started: Instant,
    signals: UnboundedReceiver<libc::c_int>,
    /// Whether to draw the status line: stderr is a terminal and -q was not given.
    status_line: bool,
}

impl Exec {
    fn new(args: Args, started: Instant, signals: UnboundedReceiver<libc::c_int>) -> Exec {
        // SAFETY: isatty only inspects the descriptor.
        let status_line = !args.quiet && unsafe { libc::isatty(2) } == 1;
        Exec { args, started, signals, status_line }
    }

    async fn run(mut self, options: zklock::ClientOptions) -> Exit {
        let connect = self.args.connection.connect.clone();
        let client = tokio::select! {
            connected = Client::connect_with(&connect, options) => match connected {
                Ok(client) => client,
                Err(err) => {
                    let (code, message) = codes::connect_failure(&err);
                    return Exit::fail(code, message);
                }
            },
            Some(signal) = self.signals.recv() => return Exit::quiet(codes::killed_by(signal)),
        };
        let exit = self.hold_and_run(&client).await;
        // Ends the session: whatever this process still had at PATH goes with it at once.
        client.close().await;
        exit
    }

    async fn hold_and_run(&mut self, client: &Client) -> Exit {
        let label = self.args.label.clone().unwrap_or_else(|| default_label(&self.args.command));
        let owner = Owner::unique_labelled(|_| label.clone());
        let acquired = match self.args.taking.max_leases() {
            Some(max) => self.acquire_lease(client, max, label).await,
            None => self.acquire(client, &owner).await.map(|held| held.map(|(lock, hold)| (Taken::Lock(lock), hold))),
        };
        let (taken, hold) = match acquired {
            Ok(Some(held)) => held,
            Ok(None) => {
                if self.status_line {
                    let what = if self.args.taking.max_leases().is_some() {
                        "has no lease free"
                    } else {
                        "is held by another"
                    };
                    eprintln!("zklock exec: {} {what}: not acquired", self.args.path);
                }
                return Exit::quiet(i32::from(self.args.taking.conflict_exit_code));
            }
            Err(exit) => return exit,
        };
        let exit = self.run_command(client, &hold).await;
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
            () = &mut status => unreachable!("the status line is drawn until the acquisition ends"),
            // Dropping the acquisition removes its nodes (closing the session makes sure of it).
            Some(signal) = self.signals.recv() => return Err(Exit::quiet(codes::killed_by(signal))),
        };
        if self.status_line {
            eprint!("\r\x1b[K");
        }
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
        let err = refused.expect("only a refusal looks again");
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
        let acquired = tokio::select! {
            acquired = &mut acquiring => Ok(acquired),
            () = &mut status => unreachable!("the status line is drawn until the acquisition ends"),
            Some(signal) = self.signals.recv() => Err(Exit::quiet(codes::killed_by(signal))),
        };
        if self.status_line {
            eprint!("\r\x1b[K");
        }
        acquired
    }

    /// Sleeps, unless a signal stops zklock first.
    async fn pause(&mut self, pause: Duration) -> Result<(), Exit> {
        tokio::select! {
            () = tokio::time::sleep(pause) => Ok(()),
            Some(signal) = self.signals.recv() => Err(Exit::quiet(codes::killed_by(signal))),
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
            Some(signal) = self.signals.recv() => return Err(Exit::quiet(codes::killed_by(signal))),
        };
        recipe.map_err(|err| match err.kind() {
            ErrorKind::InvalidArgument => Exit::fail(codes::USAGE, format!("PATH: {err}")),
            _ => failure(&err),
        })
    }

    /// Runs COMMAND under `hold`, until it exits; terminates it if the hold is lost.
    async fn run_command(&mut self, client: &Client, hold: &Hold) -> Exit {
        // Taken before the look at the state, so that no change falls between the two.
        let states = hold.state_changes();
        if self.args.on_suspend.terminates(hold.state()) {
            return Exit::fail(codes::LOCK_LOST, format!("lost the lock on {} before COMMAND started", self.args.path));
        }
        let session_id = client.session_id().unwrap_or_default();
        let terminal = foreground_terminal();
        let child = spawn(&self.args.command, &self.args.path, hold, session_id, terminal);
        let exit = match child {
            Ok(child) => self.supervise(child, hold, states, terminal).await,
            Err(err) => {
                let code = if err.kind() == io::ErrorKind::NotFound { codes::NOT_FOUND } else { codes::CANNOT_RUN };
                Exit::fail(code, format!("cannot run {}: {err}", self.args.command[0].to_string_lossy()))
            }
        };
        if terminal {
            // SAFETY: getpgrp only reads.
            give_terminal(unsafe { libc::getpgrp() });
        }
        exit
    }

    /// Waits for COMMAND to exit, forwarding signals, and terminates it if the hold is lost.
    async fn supervise(
        &mut self,
        child: std::process::Child,
        hold: &Hold,
        mut states: HoldStateChanges,
        terminal: bool,
    ) -> Exit {
        let group = child.id() as libc::pid_t;
        let mut events = wait_in_thread(child);
        let mut lost = false;
        let mut kill_at: Option<tokio::time::Instant> = None;
        let mut states_ended = false;
        let status = loop {
            let grace_over = async {
                match kill_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = events.recv() => match event {
                    Some(ChildEvent::Exited(status)) => break status,
                    Some(ChildEvent::Stopped(signal)) if terminal => stop_with_command(group, signal),
                    Some(ChildEvent::Stopped(_)) => {}
                    None => break Err(io::Error::other("the thread that waits for COMMAND is gone")),
                },
                state = states.next(), if !states_ended => match state {
                    Some(state) if !lost && self.args.on_suspend.terminates(state) => {
                        let why = match hold.lost_reason() {
                            Some(reason) => reason.describe(),
                            None => "the connection to ZooKeeper dropped (--on-suspend term)",
                        };
                        eprintln!(
                            "zklock exec: lost the lock on {}: {why}; sending SIGTERM to COMMAND (process group {group})",
                            self.args.path
                        );
                        signal_group(group, libc::SIGTERM);
                        // A stopped COMMAND (Ctrl-Z) must run to act on it.
                        signal_group(group, libc::SIGCONT);
                        lost = true;
                        kill_at = Some(tokio::time::Instant::now() + self.args.grace);
                    }
                    Some(_) => {}
                    None => states_ended = true,
                },
                Some(signal) = self.signals.recv() => signal_group(group, signal),
                () = grace_over => {
                    eprintln!(
                        "zklock exec: COMMAND still runs {:?} after SIGTERM: sending SIGKILL to process group {group}",
                        self.args.grace
                    );
                    signal_group(group, libc::SIGKILL);
                    kill_at = None;
                }
            }
        };
        let status = match status {
            Ok(status) => status,
            Err(err) => return Exit::fail(codes::SOFTWARE, format!("waiting for COMMAND: {err}")),
        };
        if lost {
            // COMMAND is gone, but what it started in its group runs unlocked: give it the rest
            // of the grace, then kill it.
            if let Some(at) = kill_at {
                while group_alive(group) && tokio::time::Instant::now() < at {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if group_alive(group) {
                    signal_group(group, libc::SIGKILL);
                }
            }
            return Exit::quiet(codes::LOCK_LOST);
        }
        Exit::quiet(status_code(status))
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
