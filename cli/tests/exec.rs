//! `zklock exec` against a real ZooKeeper (the testkit's shared server, and its fault proxy): the
//! binary is run as users run it, and the server is observed through a zklock client of the test.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zklock::{Mode, Owner, Participant};
use zklock_testkit::{shared_connect_string, Proxy};

const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const LOCK_LOST: i32 = 75;
/// A bound for what should take well under a second: generous, as CI machines are loaded.
const WAIT: Duration = Duration::from_secs(60);

/// A COMMAND that says when it started and when it got SIGTERM (then exits 0).
const TRAPS_TERM: &str =
    r#"trap 'echo got-TERM >> "$D/log"; exit 0' TERM; echo started >> "$D/log"; while :; do sleep 0.1; done"#;

fn zklock() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zklock"));
    command.env_remove("ZK_CONNECT").stdin(Stdio::null());
    // The signals the tests send start at their defaults in zklock and so in COMMAND, whatever
    // the test runner inherited: under nohup SIGHUP is ignored, a shell cannot trap a signal
    // ignored on entry, and zklock rightly passes an ignored disposition on (as nohup means).
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    command
}

/// `zklock exec --zk CONNECT [options] PATH -- sh -c SCRIPT`, with stderr captured; the script
/// finds the test's scratch directory in $D.
fn exec(connect: &str, options: &[&str], path: &str, dir: &Path, script: &str) -> Command {
    let mut command = zklock();
    command
        .args(["exec", "--zk", connect])
        .args(options)
        .args([path, "--", "sh", "-c", script])
        .env("D", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// A running zklock, killed (with its COMMAND, through the parent-death signal) if a test fails.
struct Running {
    child: Child,
}

impl Running {
    fn start(mut command: Command) -> Running {
        Running { child: command.spawn().expect("start zklock") }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether zklock has exited (it is reaped then, and `finish` still gives its status).
    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill has no memory effects; the child is not reaped yet, so its pid is its own.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// Waits for zklock to exit: its status and stderr.
    fn finish(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                // Say what zklock had said, for whoever reads the failure.
                let _ = self.child.kill();
                let _ = self.child.wait();
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                panic!("zklock did not exit within {WAIT:?}; its stderr: {stderr}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut stderr).unwrap();
        }
        (status, stderr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run(command: Command) -> (ExitStatus, String) {
    Running::start(command).finish()
}

/// A lock path and a scratch directory of one test.
struct Scratch {
    path: String,
    dir: PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = format!("{test}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(format!("zklock-cli-{unique}"));
        fs::create_dir_all(&dir).unwrap();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        Scratch { path: format!("/zklock-cli-test/{unique}-{nanos}"), dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.file(name)).unwrap_or_default()
    }

    fn wait_for_line(&self, name: &str, line: &str) {
        wait_until(&format!("{name} has the line {line:?}"), || self.read(name).lines().any(|l| l == line));
    }

    fn touch(&self, name: &str) {
        fs::write(self.file(name), b"").unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Polls a condition of the server or the file system until it holds (panics after WAIT).
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A zklock client of the test's own: sees the queue, and holds locks against the command.
struct Observer {
    runtime: tokio::runtime::Runtime,
    client: zklock::Client,
}

impl Observer {
    fn new(connect: &str) -> Observer {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let client = runtime.block_on(zklock::Client::connect(connect)).expect("observer connects");
        Observer { runtime, client }
    }

    fn contenders(&self, path: &str) -> Vec<Participant> {
        let lock = self.client.lock(path).unwrap();
        self.runtime.block_on(lock.contenders()).expect("list the contenders")
    }

    fn wait_contenders(&self, path: &str, n: usize) -> Vec<Participant> {
        let mut seen = Vec::new();
        wait_until(&format!("{path} has {n} contenders"), || {
            seen = self.contenders(path);
            seen.len() == n
        });
        seen
    }

    /// Holds the mutex at `path` until the guard is released.
    fn hold(&self, path: &str, label: &str) -> zklock::LockGuard {
        let lock = self.client.lock(path).unwrap();
        let owner = Owner::unique_labelled(|_| label.to_owned());
        self.runtime.block_on(lock.acquire(&owner)).expect("the test's holder acquires")
    }

    fn release(&self, guard: zklock::LockGuard) {
        self.runtime.block_on(guard.release()).expect("the test's holder releases");
    }

    /// The semaphore at `path` as the core lists it: (leases held, acquirers queued).
    fn semaphore_parts(&self, path: &str) -> (usize, usize) {
        let semaphore = self.client.semaphore(path, 1).unwrap();
        let view = self.runtime.block_on(semaphore.participants()).expect("list the semaphore");
        (view.leases.len(), view.queue.len())
    }

    fn wait_semaphore_parts(&self, path: &str, leases: usize, queued: usize) {
        wait_until(&format!("{path} has {leases} leases and {queued} queued"), || {
            self.semaphore_parts(path) == (leases, queued)
        });
    }
}

/// The code a shell gives for a status: the exit code, or 128+N for death by signal N.
fn shell_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn exits_with_the_commands_code_or_128_plus_its_signal() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("codes");
    for (script, code) in [("true", 0), ("exit 7", 7), ("exit 255", 255), ("kill -USR1 $$", 128 + libc::SIGUSR1)] {
        let (status, stderr) = run(exec(&connect, &[], &scratch.path, &scratch.dir, script));
        assert_eq!(shell_code(status), code, "{script}: {stderr}");
    }
    // COMMAND killed by a signal: zklock dies of the same signal (a shell sees 128+N either way).
    let (status, _) = run(exec(&connect, &[], &scratch.path, &scratch.dir, "kill -USR1 $$"));
    assert_eq!(status.signal(), Some(libc::SIGUSR1), "{status:?}");
    let mut missing = zklock();
    missing.args(["exec", "--zk", &connect, &scratch.path, "--", "/nonexistent/command"]).stderr(Stdio::piped());
    let (status, stderr) = run(missing);
    assert_eq!(status.code(), Some(127), "{stderr}");
    assert!(stderr.contains("/nonexistent/command"), "{stderr}");
    assert!(observer.contenders(&scratch.path).is_empty(), "every run released its node");
}

#[test]
fn command_finds_the_lock_in_its_environment() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("env");
    let script = r#"env | grep '^ZKLOCK_' > "$D/env"; while [ ! -e "$D/go" ]; do sleep 0.05; done"#;
    let running = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, script));
    wait_until("the command wrote its environment", || scratch.read("env").lines().count() == 4);
    let env: std::collections::HashMap<String, String> = scratch
        .read("env")
        .lines()
        .map(|line| line.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).unwrap())
        .collect();
    let holder = observer.contenders(&scratch.path).remove(0);
    assert_eq!(env["ZKLOCK_PATH"], scratch.path);
    assert_eq!(env["ZKLOCK_NODE"], format!("{}/{}", scratch.path, holder.node));
    assert_eq!(env["ZKLOCK_FENCING_TOKEN"], holder.fencing_token.to_string());
    assert_eq!(env["ZKLOCK_SESSION_ID"], format!("0x{:x}", holder.session_id));
    let identity = holder.identity.expect("zklock's identity in the node");
    assert_eq!((identity.pid, identity.owner.as_str(), identity.lang.as_str()), (running.pid() as u32, "sh", "cli"));
    scratch.touch("go");
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(observer.contenders(&scratch.path).is_empty());
}

#[test]
fn fencing_token_rises_across_runs() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("fencing");
    for _ in 0..3 {
        let script = r#"echo "$ZKLOCK_FENCING_TOKEN" >> "$D/tokens""#;
        let (status, stderr) = run(exec(&connect, &[], &scratch.path, &scratch.dir, script));
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
    let tokens: Vec<i64> = scratch.read("tokens").lines().map(|t| t.parse().unwrap()).collect();
    assert_eq!(tokens.len(), 3);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens rise: {tokens:?}");
}

#[test]
fn execs_on_one_path_never_overlap() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("overlap");
    let script = r#"echo "start $$ $ZKLOCK_FENCING_TOKEN" >> "$D/log"; sleep 0.05; echo "end $$" >> "$D/log""#;
    for _round in 0..3 {
        let running: Vec<Running> =
            (0..4).map(|_| Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, script))).collect();
        for zklock in running {
            let (status, stderr) = zklock.finish();
            assert_eq!(status.code(), Some(0), "{stderr}");
        }
    }
    let log = scratch.read("log");
    let lines: Vec<Vec<&str>> = log.lines().map(|line| line.split(' ').collect()).collect();
    assert_eq!(lines.len(), 24, "{log}");
    let mut tokens = Vec::new();
    for pair in lines.chunks(2) {
        // Each start is followed by its own end, before any other command starts.
        assert_eq!((pair[0][0], pair[1][0], pair[0][1]), ("start", "end", pair[1][1]), "overlap in:\n{log}");
        tokens.push(pair[0][2].parse::<i64>().unwrap());
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "holders in token order: {tokens:?}");
    assert!(observer.contenders(&scratch.path).is_empty());
}

#[test]
fn a_held_lock_gives_the_conflict_code_with_nonblock_and_wait() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("conflict");
    let holder = observer.hold(&scratch.path, "holder");
    let ran = r#"touch "$D/ran""#;
    let (status, stderr) = run(exec(&connect, &["-n"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is held by another: not acquired (-n)"), "said on stderr, terminal or not: {stderr}");
    let (status, stderr) = run(exec(&connect, &["-n", "-q"], &scratch.path, &scratch.dir, ran));
    assert_eq!((status.code(), stderr.as_str()), (Some(1), ""), "quiet with -q");
    let (status, _) = run(exec(&connect, &["--nonblock", "-E", "42"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(42));
    let started = Instant::now();
    let (status, stderr) = run(exec(&connect, &["-w", "0.5"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(500), "waited the whole -w");
    assert!(stderr.contains("not acquired within -w 0.5 s"), "{stderr}");
    let (status, stderr) =
        run(exec(&connect, &["--wait", "0.2", "--conflict-exit-code", "3"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(!scratch.file("ran").exists(), "COMMAND never ran without the lock");
    assert_eq!(observer.contenders(&scratch.path).len(), 1, "no attempt left a node");

    // Within -w, the lock is had once released.
    let waiting = Running::start(exec(&connect, &["-w", "20"], &scratch.path, &scratch.dir, ran));
    observer.wait_contenders(&scratch.path, 2);
    observer.release(holder);
    let (status, stderr) = waiting.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(scratch.file("ran").exists());
    assert!(observer.contenders(&scratch.path).is_empty());
}

/// A kazoo `Lock`/`WriteLock` node fits either recipe (core decides, `Participant::fits_with`):
/// a `--shared` exec waits behind it as behind a writer, rather than refusing the path.
#[test]
fn a_shared_exec_waits_behind_kazoos_write_lock() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("kazoo");
    let zk = observer.runtime.block_on(zookeeper_client::Client::connect(&connect)).unwrap();
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let _ = observer.runtime.block_on(zk.mkdir(&scratch.path, &persistent));
    let ephemeral_sequential =
        zookeeper_client::CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let prefix = format!("{}/0abad91753a64ed9bfac3327be0d1234__lock__", scratch.path);
    let (_, sequence) = observer.runtime.block_on(zk.create(&prefix, b"kazoo", &ephemeral_sequential)).unwrap();
    let ran = r#"touch "$D/ran""#;
    let (status, stderr) = run(exec(&connect, &["-n", "--shared"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(1), "held by kazoo's writer: the conflict code, not a usage error: {stderr}");
    assert!(!scratch.file("ran").exists());
    observer.runtime.block_on(zk.delete(&format!("{prefix}{sequence}"), None)).unwrap();
    let (status, stderr) = run(exec(&connect, &["-n", "--shared"], &scratch.path, &scratch.dir, ran));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(scratch.file("ran").exists());
}

#[test]
fn a_signal_while_waiting_stops_zklock_and_leaves_no_node() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("signal-waiting");
    let holder = observer.hold(&scratch.path, "holder");
    let waiting = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, r#"touch "$D/ran""#));
    observer.wait_contenders(&scratch.path, 2);
    waiting.signal(libc::SIGTERM);
    let (status, stderr) = waiting.finish();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "zklock dies of the signal: {stderr}");
    assert_eq!(observer.contenders(&scratch.path).len(), 1, "the waiter's node is gone");
    assert!(!scratch.file("ran").exists());
    observer.release(holder);
}

#[test]
fn signals_to_zklock_reach_the_command_and_leave_no_node() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    for (signal, name) in [(libc::SIGTERM, "TERM"), (libc::SIGINT, "INT"), (libc::SIGHUP, "HUP")] {
        let scratch = Scratch::new("forward");
        let script = format!(
            r#"trap 'echo got-{name} >> "$D/log"; exit 3' {name}; echo started >> "$D/log"; while :; do sleep 0.1; done"#
        );
        let running = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, &script));
        scratch.wait_for_line("log", "started");
        running.signal(signal);
        let (status, stderr) = running.finish();
        assert_eq!(status.code(), Some(3), "the command's own code after SIG{name}: {stderr}");
        assert!(scratch.read("log").contains(&format!("got-{name}")));
        assert!(observer.contenders(&scratch.path).is_empty(), "released after SIG{name}");
    }
}

#[test]
fn a_killed_zklock_signals_its_command_and_its_node_goes() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("sigkill");
    let running = Running::start(exec(&connect, &["--session-timeout", "2"], &scratch.path, &scratch.dir, TRAPS_TERM));
    scratch.wait_for_line("log", "started");
    assert_eq!(observer.contenders(&scratch.path).len(), 1);
    running.signal(libc::SIGKILL);
    let (status, _) = running.finish();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    scratch.wait_for_line("log", "got-TERM");
    // The session of the killed zklock expires, and its node with it.
    observer.wait_contenders(&scratch.path, 0);
}

/// A zklock whose connection goes through a proxy of the shared server, with a 2 s session.
fn through_proxy() -> (Proxy, String) {
    let connect = shared_connect_string();
    let server = connect.split(['/', ',']).next().unwrap().to_owned();
    let proxy = Proxy::start(&server);
    let address = proxy.address();
    (proxy, address)
}

#[test]
fn a_lost_lock_terminates_the_command_and_exits_with_the_lost_code() {
    let (observer, scratch) = lose_the_hold_while_command_runs("lost", &[]);
    observer.wait_contenders(&scratch.path, 0);
}

/// Runs an exec with `options` through a proxy with a 2 s session, stalls the proxy while
/// COMMAND runs, and checks that COMMAND got SIGTERM and zklock exited with the lost code.
fn lose_the_hold_while_command_runs(test: &str, options: &[&str]) -> (Observer, Scratch) {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new(test);
    let options = [&["--session-timeout", "2"], options].concat();
    let running = Running::start(exec(&proxied, &options, &scratch.path, &scratch.dir, TRAPS_TERM));
    scratch.wait_for_line("log", "started");
    proxy.stall();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(LOCK_LOST), "lost, though COMMAND exited 0: {stderr}");
    assert!(stderr.contains("lost the lock"), "{stderr}");
    assert!(scratch.read("log").contains("got-TERM"), "COMMAND got SIGTERM");
    (observer, scratch)
}

#[test]
fn a_command_that_ignores_sigterm_gets_sigkill_after_the_grace() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new("grace");
    let script = r#"trap '' TERM; echo $$ > "$D/pid"; while :; do sleep 0.1; done"#;
    let options = ["--session-timeout", "2", "--grace", "0.1"];
    let running = Running::start(exec(&proxied, &options, &scratch.path, &scratch.dir, script));
    wait_until("COMMAND wrote its pid", || scratch.read("pid").ends_with('\n'));
    let pid: i32 = scratch.read("pid").trim().parse().unwrap();
    let stalled = Instant::now();
    proxy.stall();
    let (status, stderr) = running.finish();
    assert!(stalled.elapsed() >= Duration::from_millis(200), "the grace passed before SIGKILL");
    assert_eq!(status.code(), Some(LOCK_LOST), "{stderr}");
    let term_at = stderr.find("SIGTERM").expect("SIGTERM first");
    let kill_at = stderr.find("SIGKILL").expect("then SIGKILL");
    assert!(term_at < kill_at, "{stderr}");
    assert!(!process_exists(pid), "COMMAND is gone");
    observer.wait_contenders(&scratch.path, 0);
}

#[test]
fn on_suspend_term_terminates_the_command_when_the_connection_drops() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new("suspend");
    // A session long enough that the loss comes well after the suspension.
    let options = ["--session-timeout", "4", "--on-suspend", "term"];
    let running = Running::start(exec(&proxied, &options, &scratch.path, &scratch.dir, TRAPS_TERM));
    scratch.wait_for_line("log", "started");
    proxy.stall();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(LOCK_LOST), "{stderr}");
    assert!(stderr.contains("--on-suspend term"), "terminated on the suspension: {stderr}");
    assert!(scratch.read("log").contains("got-TERM"));
    observer.wait_contenders(&scratch.path, 0);
}

#[test]
fn shared_execs_hold_together_while_a_plain_exec_waits() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("shared");
    let reader = r#"echo "reader $$" >> "$D/log"; while [ ! -e "$D/go" ]; do sleep 0.05; done; echo "reader-done $$" >> "$D/log""#;
    let readers: Vec<Running> = (0..2)
        .map(|_| {
            Running::start(exec(
                &connect,
                &["--shared", "--label", "nightly-backup"],
                &scratch.path,
                &scratch.dir,
                reader,
            ))
        })
        .collect();
    wait_until("both readers run at once", || scratch.read("log").lines().count() == 2);
    let writer = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, r#"echo writer >> "$D/log""#));
    let queue = observer.wait_contenders(&scratch.path, 3);
    let modes: Vec<Option<Mode>> = queue.iter().map(|p| p.mode).collect();
    assert_eq!(modes, [Some(Mode::Read), Some(Mode::Read), Some(Mode::Write)], "the plain exec takes the write side");
    let labels: Vec<String> = queue.iter().map(|p| p.identity.as_ref().unwrap().owner.clone()).collect();
    assert_eq!(labels, ["nightly-backup", "nightly-backup", "sh"], "--label, or else COMMAND's name");
    assert_eq!(scratch.read("log").lines().count(), 2, "the writer waits for the readers");
    scratch.touch("go");
    for zklock in readers.into_iter().chain([writer]) {
        let (status, stderr) = zklock.finish();
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
    let log = scratch.read("log");
    assert_eq!(log.lines().last(), Some("writer"), "{log}");
    assert!(observer.contenders(&scratch.path).is_empty());
}

/// On an empty path a plain exec takes the mutex, a --shared one the read side, and the core
/// refuses either once the other's node is there: started together, they settle on the
/// read/write lock rather than fail.
#[test]
fn a_plain_and_a_shared_exec_racing_to_an_empty_path_both_run() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    for _ in 0..5 {
        let scratch = Scratch::new("race");
        let plain = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, "sleep 0.05"));
        let shared = Running::start(exec(&connect, &["--shared"], &scratch.path, &scratch.dir, "sleep 0.05"));
        for zklock in [plain, shared] {
            let (status, stderr) = zklock.finish();
            assert_eq!(status.code(), Some(0), "{stderr}");
        }
        assert!(observer.contenders(&scratch.path).is_empty());
    }
}

#[test]
fn bad_arguments_exit_64_naming_the_argument() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("usage");
    let path = scratch.path.as_str();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["exec", "--zk", &connect, path], "COMMAND"),
        (vec!["exec", "--zk", &connect, "--", "true"], "PATH"),
        (vec!["exec", "--zk", &connect, "-w", "soon", path, "--", "true"], "--wait"),
        (vec!["exec", "--zk", &connect, "-w", "-1", path, "--", "true"], "--wait"),
        (vec!["exec", "--zk", &connect, "--grace", "x", path, "--", "true"], "--grace"),
        (vec!["exec", "--zk", &connect, "-n", "-w", "1", path, "--", "true"], "--wait"),
        (vec!["exec", "--zk", &connect, "-E", "300", path, "--", "true"], "--conflict-exit-code"),
        (vec!["exec", "--zk", &connect, "--on-suspend", "maybe", path, "--", "true"], "--on-suspend"),
        (vec!["exec", "--zk", &connect, "--session-timeout", "0", path, "--", "true"], "--session-timeout"),
        (vec!["exec", "--zk", &connect, "--shared", "--write", path, "--", "true"], "--write"),
        (vec!["exec", "--zk", "127.0.0.1:1", "--max", "0", path, "--", "true"], "--max"),
        (vec!["exec", "--zk", "127.0.0.1:1", "--max", "-2", path, "--", "true"], "--max"),
        (vec!["exec", "--zk", "127.0.0.1:1", "--max", "many", path, "--", "true"], "--max"),
        (vec!["exec", "--zk", "127.0.0.1:1", "--max", "2", "--shared", path, "--", "true"], "--max"),
        (vec!["exec", "--zk", "127.0.0.1:1", "--max-from", "count", path, "--", "true"], "--max-from"),
        (vec!["exec", "--zk", &connect, "--bogus", path, "--", "true"], "--bogus"),
        (vec!["exec", path, "--", "true"], "--zk"),
        (vec!["exec", "--zk", "host:notaport", path, "--", "true"], "--zk"),
        (vec!["exec", "--zk", &connect, "relative/path", "--", "true"], "PATH"),
        (vec!["exec", "--zk", &connect, "/", "--", "true"], "PATH"),
        // Told before any network traffic: the same with no server to reach.
        (vec!["exec", "--zk", "127.0.0.1:1", "relative/path", "--", "true"], "PATH"),
    ];
    for (args, named) in cases {
        let mut command = zklock();
        command.args(&args).stderr(Stdio::piped());
        let (status, stderr) = run(command);
        assert_eq!(status.code(), Some(USAGE), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?} names {named}: {stderr}");
    }
}

/// A path deeper than zklock's limit (the field's 300,000 segments once killed the server with
/// the parents it made), a --max-from count as deep, and a label over the limit: bad usage, told
/// at once, naming the limit, with no server to reach (so before any traffic).
#[test]
fn input_over_zklocks_limits_is_bad_usage_before_connecting() {
    // As deep as one argument may be (Linux takes at most 128 KiB in one).
    let deep = "/a".repeat(60_000);
    let just_over = format!("/zklock-cli-test{}", "/a".repeat(64));
    let long_label = "l".repeat(1025);
    let cases = [
        (vec!["exec", "--zk", "127.0.0.1:1", &deep, "--", "true"], "PATH: ", "60000 segments deep"),
        (vec!["exec", "--zk", "127.0.0.1:1", &just_over, "--", "true"], "PATH: ", "65 segments deep"),
        (
            vec!["exec", "--zk", "127.0.0.1:1", "--max-from", &just_over, "/s", "--", "true"],
            "--max-from: ",
            "65 segments",
        ),
        (vec!["exec", "--zk", "127.0.0.1:1", "--label", &long_label, "/l", "--", "true"], "--label: ", "1025 bytes"),
        (vec!["hold", "--zk", "127.0.0.1:1", "--label", &long_label, "/l"], "--label: ", "1025 bytes"),
        (vec!["status", "--zk", "127.0.0.1:1", &just_over], "PATH: ", "65 segments deep"),
    ];
    for (args, option, named) in cases {
        let mut command = zklock();
        command.args(&args).stderr(Stdio::piped());
        let started = Instant::now();
        let (status, stderr) = run(command);
        let shown = &args[..args.len().min(4)];
        assert_eq!(status.code(), Some(USAGE), "{shown:?}: {stderr}");
        assert!(stderr.contains(option) && stderr.contains(named), "{shown:?} names {named}: {stderr}");
        assert!(stderr.contains("over zklock's limit of"), "{shown:?} names the limit: {stderr}");
        assert!(stderr.len() < 10_000, "the path is not quoted whole: {} bytes", stderr.len());
        assert!(started.elapsed() < Duration::from_secs(5), "{shown:?}: told at once");
    }
}

#[test]
fn an_unreachable_zookeeper_exits_69() {
    let scratch = Scratch::new("unreachable");
    let started = Instant::now();
    let (status, stderr) = run(exec("127.0.0.1:1", &["-w", "1"], &scratch.path, &scratch.dir, "true"));
    assert_eq!(status.code(), Some(UNAVAILABLE), "{stderr}");
    assert!(stderr.contains("cannot reach ZooKeeper"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "-w bounds the connect too");
}

#[test]
fn help_lists_every_exit_code() {
    let mut command = zklock();
    command.args(["exec", "--help"]).stdout(Stdio::piped());
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8(output.stdout).unwrap();
    for code in ["128+N", "  1 ", "  64 ", "  69 ", "  70 ", "  75 ", "  126 ", "  127 "] {
        assert!(help.contains(code), "{code:?} in:\n{help}");
    }
}

/// A pseudo-terminal: the master to read, the slave to give zklock as its stderr.
fn pseudo_terminal() -> (fs::File, fs::File) {
    // SAFETY: posix_openpt and friends on descriptors this function owns.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0);
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap().to_owned();
        let slave = fs::OpenOptions::new().read(true).write(true).open(name).unwrap();
        (fs::File::from(OwnedFd::from_raw_fd(master)), slave)
    }
}

#[test]
fn a_status_line_on_a_terminal_says_who_holds_and_how_many_are_ahead() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("status-line");
    let holder = observer.hold(&scratch.path, "nightly-report");
    let (mut master, slave) = pseudo_terminal();
    let mut command = exec(&connect, &[], &scratch.path, &scratch.dir, "true");
    command.stderr(slave);
    let waiting = Running::start(command);
    let (sender, received) = std::sync::mpsc::channel();
    // The terminal's output, read as it comes (the read blocks, so on a thread of its own).
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = master.read(&mut buffer) {
            if n == 0 || sender.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let deadline = Instant::now() + WAIT;
    while !(seen.contains("1 ahead") && seen.contains("nightly-report")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => panic!("no status line on the terminal; saw {seen:?}"),
        }
    }
    assert!(seen.contains(&format!("waiting for {}", scratch.path)), "{seen:?}");
    assert!(seen.contains(&format!("pid {}", std::process::id())), "the holder's pid: {seen:?}");
    observer.release(holder);
    let (status, _) = waiting.finish();
    assert_eq!(status.code(), Some(0));
}

/// `zklock exec` run as a login shell's job would be: in a session of its own, with the
/// terminal `slave` as its controlling terminal and stdin.
fn on_terminal(mut command: Command, slave: fs::File) -> Running {
    command.stdin(slave);
    // SAFETY: setsid and ioctl between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Running::start(command)
}

/// Run from a shell on a terminal, COMMAND (in a process group of its own) gets the terminal:
/// it reads it rather than being stopped by SIGTTIN.
#[test]
fn command_reads_the_terminal_zklock_was_started_from() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("terminal");
    let (mut master, slave) = pseudo_terminal();
    let script = r#"read line; echo "$line" > "$D/read""#;
    let running = on_terminal(exec(&connect, &[], &scratch.path, &scratch.dir, script), slave);
    master.write_all(b"hello\n").unwrap();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("read"), "hello\n");
}

/// Ctrl-Z stops COMMAND, and zklock with it, so that the shell sees its job stopped; continued
/// (as `fg` does), zklock gives COMMAND the terminal again and continues it.
#[test]
fn ctrl_z_stops_zklock_with_its_command_until_continued() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("ctrl-z");
    let (mut master, slave) = pseudo_terminal();
    let script = r#"echo > "$D/ready"; read line; echo "$line" > "$D/read""#;
    let running = on_terminal(exec(&connect, &[], &scratch.path, &scratch.dir, script), slave);
    wait_until("COMMAND runs", || scratch.file("ready").exists());
    master.write_all(b"\x1a").unwrap();
    wait_until("zklock stopped", || {
        let mut status = 0;
        // SAFETY: waitpid on our own child; WUNTRACED reports a stop without reaping.
        let pid = unsafe { libc::waitpid(running.pid(), &mut status, libc::WUNTRACED | libc::WNOHANG) };
        pid == running.pid() && libc::WIFSTOPPED(status)
    });
    running.signal(libc::SIGCONT);
    master.write_all(b"again\n").unwrap();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("read"), "again\n");
}

#[test]
fn quiet_draws_no_status_line() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("quiet");
    let holder = observer.hold(&scratch.path, "holder");
    let (master, slave) = pseudo_terminal();
    // Non-blocking, to read whatever is there without waiting for more.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut command = exec(&connect, &["-q", "-w", "1.5"], &scratch.path, &scratch.dir, "true");
    command.stderr(slave);
    let (status, _) = Running::start(command).finish();
    assert_eq!(status.code(), Some(1));
    let mut seen = Vec::new();
    let _ = (&master).read_to_end(&mut seen);
    assert!(seen.is_empty(), "nothing with -q: {:?}", String::from_utf8_lossy(&seen));
    observer.release(holder);
}

#[test]
fn dash_c_runs_a_shell_string_holding_the_lock_as_flock_does() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("dash-c");
    let mut command = zklock();
    command
        .args(["exec", "--zk", &connect, &scratch.path, "-c", r#"echo "$ZKLOCK_FENCING_TOKEN" > "$D/token"; exit 3"#])
        .env("D", &scratch.dir)
        .stderr(Stdio::piped());
    let (status, stderr) = run(command);
    assert_eq!(status.code(), Some(3), "the string's exit status: {stderr}");
    assert!(scratch.read("token").trim().parse::<i64>().is_ok(), "it ran holding the lock");
    assert!(observer.contenders(&scratch.path).is_empty());
    // -c and a COMMAND after `--` exclude each other; one of them is needed.
    let mut both = zklock();
    both.args(["exec", "--zk", &connect, &scratch.path, "-c", "true", "--", "true"]).stderr(Stdio::piped());
    assert_eq!(run(both).0.code(), Some(64), "bad usage");
    let mut neither = zklock();
    neither.args(["exec", "--zk", &connect, &scratch.path]).stderr(Stdio::piped());
    assert_eq!(run(neither).0.code(), Some(64), "bad usage");
}

#[test]
fn hold_prints_node_and_token_and_holds_until_stdin_closes() {
    use std::io::BufRead;
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("hold");
    let mut hold = zklock();
    hold.args(["hold", "--zk", &connect, "-q", &scratch.path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = hold.spawn().expect("run zklock hold");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let (node, token) = line.trim().split_once(' ').expect("NODE TOKEN");
    let holder = observer.contenders(&scratch.path).remove(0);
    assert_eq!(node, format!("{}/{}", scratch.path, holder.node));
    assert_eq!(token, holder.fencing_token.to_string());
    assert_eq!(holder.identity.expect("zklock's identity").owner, "zklock-hold");
    drop(child.stdin.take()); // stdin closes: the hold ends
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(observer.contenders(&scratch.path).is_empty(), "released");
}

/// Three execs under a semaphore of max 2: two run together, the third waits until a lease is
/// free (and `-n` gives up at once meanwhile, a signalled waiter leaves no node, a lock is
/// refused on the path); all finish, never more than two at once.
#[test]
fn a_semaphore_runs_at_most_max_commands_at_once() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("semaphore");
    let script = r#"echo "start $ZKLOCK_FENCING_TOKEN" >> "$D/log"; while [ ! -e "$D/go" ]; do sleep 0.02; done; echo end >> "$D/log""#;
    let running: Vec<Running> =
        (0..2).map(|_| Running::start(exec(&connect, &["--max", "2"], &scratch.path, &scratch.dir, script))).collect();
    wait_until("two commands run", || scratch.read("log").lines().count() == 2);
    observer.wait_semaphore_parts(&scratch.path, 2, 0);
    let view = observer.runtime.block_on(observer.client.semaphore(&scratch.path, 2).unwrap().participants()).unwrap();
    let labels: Vec<Option<&str>> =
        view.leases.iter().map(|lease| lease.identity.as_ref().map(|id| id.owner.as_str())).collect();
    assert_eq!(labels, [Some("sh"), Some("sh")], "the leases carry exec's label (COMMAND's name)");
    let (status, stderr) = run(exec(&connect, &["--max", "2", "-n"], &scratch.path, &scratch.dir, "touch \"$D/ran\""));
    assert_eq!(status.code(), Some(1), "no lease free: {stderr}");
    assert!(!scratch.file("ran").exists());
    assert_eq!(observer.semaphore_parts(&scratch.path), (2, 0), "the try left no node");
    // A lock on the semaphore's path is refused, and a semaphore on a lock's path.
    let (status, stderr) = run(exec(&connect, &["-n"], &scratch.path, &scratch.dir, "touch \"$D/ran\""));
    assert_eq!(status.code(), Some(USAGE), "{stderr}");
    assert!(stderr.contains("semaphore") && stderr.contains("--max N"), "{stderr}");
    let lock_path = format!("{}-lock", scratch.path);
    let held = observer.hold(&lock_path, "holder");
    let (status, stderr) = run(exec(&connect, &["--max", "2"], &lock_path, &scratch.dir, "touch \"$D/ran\""));
    assert_eq!(status.code(), Some(USAGE), "{stderr}");
    assert!(stderr.starts_with("zklock exec: --max: ") && stderr.contains("lock"), "{stderr}");
    observer.release(held);
    assert!(!scratch.file("ran").exists());
    // A waiter queued at the mutex with its lease node made, waiting for it to fit, stopped by a
    // signal: both its nodes go.
    let stopped = Running::start(exec(&connect, &["--max", "2"], &scratch.path, &scratch.dir, script));
    observer.wait_semaphore_parts(&scratch.path, 3, 1);
    stopped.signal(libc::SIGTERM);
    let (status, stderr) = stopped.finish();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "zklock dies of the signal: {stderr}");
    observer.wait_semaphore_parts(&scratch.path, 2, 0);
    let third = Running::start(exec(&connect, &["--max", "2"], &scratch.path, &scratch.dir, script));
    observer.wait_semaphore_parts(&scratch.path, 3, 1);
    assert_eq!(scratch.read("log").lines().count(), 2, "the third waits while two hold");
    scratch.touch("go");
    for zklock in running.into_iter().chain([third]) {
        let (status, stderr) = zklock.finish();
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
    let log = scratch.read("log");
    let (mut running_now, mut most) = (0, 0);
    for line in log.lines() {
        running_now += if line.starts_with("start") { 1 } else { -1 };
        most = most.max(running_now);
    }
    assert_eq!((log.lines().count(), most), (6, 2), "all three ran, two at most at once:\n{log}");
    observer.wait_semaphore_parts(&scratch.path, 0, 0);
}

/// A lease lost to an expired session terminates COMMAND, as a lost lock does.
#[test]
fn a_lost_lease_terminates_the_command_and_exits_with_the_lost_code() {
    let (observer, scratch) = lose_the_hold_while_command_runs("lost-lease", &["--max", "3"]);
    observer.wait_semaphore_parts(&scratch.path, 0, 0);
}

/// --max-from: the max is a shared count (made with --max as its seed); a waiter is let in when
/// the count rises at run time.
#[test]
fn a_waiter_gets_a_lease_when_the_shared_count_rises() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("shared-count");
    let count = format!("{}-count", scratch.path);
    let options = ["--max-from", count.as_str(), "--max", "1"];
    let script = r#"echo started >> "$D/log"; while [ ! -e "$D/go" ]; do sleep 0.02; done"#;
    let first = Running::start(exec(&connect, &options, &scratch.path, &scratch.dir, script));
    scratch.wait_for_line("log", "started");
    let second = Running::start(exec(&connect, &options, &scratch.path, &scratch.dir, script));
    observer.wait_semaphore_parts(&scratch.path, 2, 1);
    let zk = observer.runtime.block_on(zookeeper_client::Client::connect(&connect)).unwrap();
    let (data, _) = observer.runtime.block_on(zk.get_data(&count)).unwrap();
    assert_eq!(data, 1i32.to_be_bytes(), "made with --max, as Curator's SharedCount stores it");
    observer.runtime.block_on(zk.set_data(&count, &2i32.to_be_bytes(), None)).unwrap();
    wait_until("both run", || scratch.read("log").lines().count() == 2);
    scratch.touch("go");
    for zklock in [first, second] {
        let (status, stderr) = zklock.finish();
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
    observer.runtime.block_on(zk.delete(&count, None)).unwrap();
}

/// Issue 44 item 6: without -w an exec waits as long as it takes. Two execs through a proxy (a 2 s
/// session, a 1 s connect timeout) wait, one for the mutex a client of the test holds, one for
/// the lease of a semaphore (max 1) another exec holds; then the proxy cuts them off for longer
/// than their session and several connect timeouts. Neither may exit during the outage (before
/// issue 44 each exited 69, "no session within the connect timeout"); once the server is
/// reachable again and the holders are gone, each runs its COMMAND, on a new session, and exits 0.
#[test]
fn an_exec_without_w_outlasts_an_outage_longer_than_the_connect_timeout_and_the_session() {
    const OUTAGE: Duration = Duration::from_secs(6);
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new("forever");
    let semaphore_path = format!("{}-semaphore", scratch.path);
    let timeouts = ["--session-timeout", "2", "--connect-timeout", "1"];
    let runs = r#"echo "$ZKLOCK_PATH $ZKLOCK_SESSION_ID" >> "$D/ran""#;

    let held = observer.hold(&scratch.path, "holder");
    let lease_holder = Running::start(exec(
        &connect,
        &["--max", "1"],
        &semaphore_path,
        &scratch.dir,
        r#"echo started >> "$D/log"; while [ ! -e "$D/go" ]; do sleep 0.02; done"#,
    ));
    scratch.wait_for_line("log", "started");
    let mutex = Running::start(exec(&proxied, &timeouts, &scratch.path, &scratch.dir, runs));
    let lease =
        Running::start(exec(&proxied, &[&timeouts[..], &["--max", "1"]].concat(), &semaphore_path, &scratch.dir, runs));
    observer.wait_contenders(&scratch.path, 2);
    observer.wait_semaphore_parts(&semaphore_path, 2, 1);
    let session_before = format!("{:#x}", observer.contenders(&scratch.path)[1].session_id);

    proxy.cut();
    // The fault itself: an outage this long.
    std::thread::sleep(OUTAGE);
    let still_waiting = |what: &str, mut running: Running| {
        if running.exited() {
            let (status, stderr) = running.finish();
            panic!("{what} exited during the outage ({status}), though it waits forever: {stderr}");
        }
        running
    };
    let mutex = still_waiting("the mutex's exec", mutex);
    let lease = still_waiting("the lease's exec", lease);

    observer.release(held);
    scratch.touch("go");
    proxy.pass();
    for (what, running) in
        [("the lease holder", lease_holder), ("the mutex's exec", mutex), ("the lease's exec", lease)]
    {
        let (status, stderr) = running.finish();
        assert_eq!(status.code(), Some(0), "{what} ran its COMMAND: {stderr}");
    }
    let ran = scratch.read("ran");
    assert_eq!(ran.lines().count(), 2, "both COMMANDs ran: {ran}");
    let mutex_ran = format!("{} ", scratch.path);
    let session = ran.lines().find_map(|line| line.strip_prefix(&mutex_ran)).expect("the mutex's COMMAND ran");
    assert_ne!(session, session_before, "the mutex's exec held on a new session");
    observer.wait_contenders(&scratch.path, 0);
    observer.wait_semaphore_parts(&semaphore_path, 0, 0);
}

/// A COMMAND whose own children ignore SIGTERM: one in COMMAND's process group, one in a session
/// of its own (setsid); each appends its pid to "$D/pids". The wrapper itself dies of SIGTERM,
/// so that its children are re-parented.
const WRAPPER: &str = r#"sh -c 'trap "" TERM; echo $$ >> "$D/pids"; while :; do sleep 0.1; done' &
setsid sh -c 'trap "" TERM; echo $$ >> "$D/pids"; while :; do sleep 0.1; done' &
wait"#;

/// The pids the WRAPPER's children wrote, once both did (panics with zklock's stderr if it
/// exited first).
fn wrapper_children(scratch: &Scratch, running: &mut Running) -> Vec<i32> {
    wait_until("both children of the wrapper run", || {
        if let Ok(Some(status)) = running.child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = running.child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            panic!("zklock exited ({status:?}) before COMMAND's children ran: {stderr}");
        }
        scratch.read("pids").lines().count() == 2
    });
    scratch.read("pids").lines().map(|pid| pid.parse().unwrap()).collect()
}

/// Kills what a test left running (ignoring SIGTERM, as the wrapper's children do).
struct Reap(Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Runs the WRAPPER under an exec with a 2 s session through a proxy, disrupts it with
/// `disrupt`, and checks that when the next holder (a client of the test's, queued meanwhile)
/// gets the lock, no process of the job is left: the job ended before the lock passed on.
fn the_job_ends_before_the_next_holder(test: &str, options: &[&str], disrupt: impl FnOnce(&Running, &Proxy)) {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new(test);
    let options = [&["--session-timeout", "2"], options].concat();
    let mut running = Running::start(exec(&proxied, &options, &scratch.path, &scratch.dir, WRAPPER));
    let pids = wrapper_children(&scratch, &mut running);
    let _reap = Reap(pids.clone());
    let pids_clone = pids.clone();
    let (sender, acquired) = std::sync::mpsc::channel();
    let (path, next_connect) = (scratch.path.clone(), connect.clone());
    let holding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let held = holding.clone();
    std::thread::spawn(move || {
        let next = Observer::new(&next_connect);
        let guard = next.hold(&path, "next-holder");
        held.store(true, Ordering::SeqCst);
        // At once: which of the job's processes still run as the next holder starts.
        let alive: Vec<i32> = pids.iter().copied().filter(|&pid| process_exists(pid)).collect();
        let _ = sender.send(alive);
        next.release(guard);
    });
    // The next holder queues (or, if zklock lost the lock on its own meanwhile, holds).
    wait_until("the next holder queued", || {
        holding.load(Ordering::SeqCst) || observer.contenders(&scratch.path).len() == 2
    });
    let disrupted = Instant::now();
    let watched = pids_clone;
    let gone = std::thread::spawn(move || {
        while watched.iter().any(|&pid| process_exists(pid)) && disrupted.elapsed() < WAIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        disrupted.elapsed()
    });
    disrupt(&running, &proxy);
    let alive = acquired.recv_timeout(WAIT).expect("the next holder gets the lock");
    let next_in = disrupted.elapsed();
    assert!(alive.is_empty(), "the job's processes {alive:?} still ran when the next holder got the lock");
    eprintln!(
        "{test}: the job was gone {:?} after the disruption, the next holder in after {next_in:?}",
        gone.join().unwrap()
    );
    // SAFETY: SIGCONT for a stopped zklock, so that it can be killed and reaped.
    unsafe { libc::kill(running.pid(), libc::SIGCONT) };
}

/// The lock lost to a cut-off connection, with the default grace (derived from the session
/// timeout): SIGKILL lands before the server can let the next holder in.
#[test]
fn a_lost_lock_ends_the_whole_job_before_the_next_holder() {
    the_job_ends_before_the_next_holder("job-lost", &[], |_, proxy| proxy.stall());
}

/// zklock killed outright: the watchdog ends every process of the job, in COMMAND's group and
/// out of it, before the server expires the session.
#[test]
fn a_killed_zklock_ends_the_whole_job_before_the_next_holder() {
    the_job_ends_before_the_next_holder("job-sigkill", &[], |running, _| running.signal(libc::SIGKILL));
}

/// zklock stopped (kill -STOP): it cannot watch its hold, so the watchdog ends the job after
/// half the session timeout.
#[test]
fn a_stopped_zklock_ends_the_whole_job_before_the_next_holder() {
    the_job_ends_before_the_next_holder("job-sigstop", &[], |running, _| running.signal(libc::SIGSTOP));
}

/// A lost lock with stderr unwritable (a full disk; a dead reader of a pipe): no message stands
/// between the loss and the signals, and zklock exits with the lost code, not a panic's.
#[test]
fn an_unwritable_stderr_never_stands_between_a_loss_and_the_signals() {
    for target in ["full", "closed-pipe"] {
        let connect = shared_connect_string();
        let observer = Observer::new(&connect);
        let (proxy, proxied) = through_proxy();
        let scratch = Scratch::new("stderr-full");
        let script = r#"trap '' TERM; echo $$ > "$D/pid"; while :; do sleep 0.1; done"#;
        let mut command = exec(&proxied, &["--session-timeout", "2"], &scratch.path, &scratch.dir, script);
        let mut reader = None;
        match target {
            "full" => {
                command.stderr(fs::OpenOptions::new().write(true).open("/dev/full").unwrap());
            }
            _ => {
                let mut fds = [0; 2];
                // SAFETY: pipe writes two descriptors, which we then own.
                assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
                let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
                command.stderr(write);
                reader = Some(read);
            }
        }
        let running = Running::start(command);
        wait_until("COMMAND wrote its pid", || scratch.read("pid").ends_with('\n'));
        let pid: i32 = scratch.read("pid").trim().parse().unwrap();
        let _reap = Reap(vec![pid]);
        drop(reader); // the pipe's reader dies
        proxy.stall();
        let (status, _) = running.finish();
        assert_eq!(status.code(), Some(LOCK_LOST), "{target}: {status:?}");
        assert!(!process_exists(pid), "{target}: COMMAND got SIGKILL after the grace");
        observer.wait_contenders(&scratch.path, 0);
    }
}

/// Durations too long for any clock, or a grace longer than zklock's head start on the server's
/// expiry, are bad usage named as such (not a panic).
#[test]
fn durations_out_of_range_are_refused_naming_the_option() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-w", "1e19"], "--wait"),
        (vec!["--grace", "1e19"], "--grace"),
        (vec!["--connect-timeout", "1e19"], "--connect-timeout"),
        (vec!["--session-timeout", "1e7"], "--session-timeout"),
        (vec!["--session-timeout", "2", "--grace", "3"], "--grace"),
        (vec!["--grace", "1.5"], "--grace"),
    ];
    // A reachable server: the old overflow came after connecting.
    let connect = shared_connect_string();
    let scratch = Scratch::new("durations");
    for (options, named) in cases {
        let mut command = zklock();
        command
            .args(["exec", "--zk", &connect])
            .args(&options)
            .args([&scratch.path, "--", "true"])
            .stderr(Stdio::piped());
        let (status, stderr) = run(command);
        assert_eq!(status.code(), Some(USAGE), "{options:?}: {stderr}");
        assert!(stderr.contains(named), "{options:?} names {named}: {stderr}");
        assert!(!stderr.contains("panicked"), "{options:?}: {stderr}");
    }
}

/// zklock's secret-bearing variables never reach COMMAND, each tested on its own.
#[test]
fn secret_variables_never_reach_the_command() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("secrets");
    for secret in ["ZKLOCK_SASL_PASSWORD", "ZKLOCK_TLS_KEY_PASSWORD"] {
        let mut command = exec(&connect, &[], &scratch.path, &scratch.dir, r#"env > "$D/env""#);
        command.env(secret, "s3cret");
        let (status, stderr) = run(command);
        assert_eq!(status.code(), Some(0), "{stderr}");
        let env = scratch.read("env");
        assert!(env.contains("ZKLOCK_PATH="), "{env}");
        assert!(!env.contains(secret) && !env.contains("s3cret"), "{secret} reached COMMAND");
    }
}

/// A signal the caller ignored (nohup) stays ignored: it neither ends a waiting zklock nor is
/// restored for COMMAND.
#[test]
fn a_signal_the_caller_ignored_stays_ignored() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("nohup");
    let holder = observer.hold(&scratch.path, "holder");
    let mut command = exec(&connect, &[], &scratch.path, &scratch.dir, r#"grep SigIgn /proc/$$/status > "$D/ignored""#);
    // SAFETY: signal() is async-signal-safe; run after zklock()'s own pre_exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let waiting = Running::start(command);
    observer.wait_contenders(&scratch.path, 2);
    waiting.signal(libc::SIGHUP);
    // Still queued: the waiter's node is there until its turn.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(observer.contenders(&scratch.path).len(), 2, "SIGHUP, ignored by the caller, ended the waiter");
    observer.release(holder);
    let (status, stderr) = waiting.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let line = scratch.read("ignored");
    let mask = u64::from_str_radix(line.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_ne!(mask & (1 << (libc::SIGHUP - 1)), 0, "COMMAND inherits the ignored SIGHUP: {line}");
}

/// SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM to zklock reach COMMAND, and zklock lives on.
#[test]
fn every_catchable_signal_is_forwarded() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("forward-all");
    let script = r#"for s in QUIT USR1 USR2 ALRM; do trap "echo got-$s >> \"\$D/log\"" $s; done
echo started >> "$D/log"; while [ ! -e "$D/go" ]; do sleep 0.05; done"#;
    let running = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, script));
    scratch.wait_for_line("log", "started");
    for (signal, name) in
        [(libc::SIGQUIT, "QUIT"), (libc::SIGUSR1, "USR1"), (libc::SIGUSR2, "USR2"), (libc::SIGALRM, "ALRM")]
    {
        running.signal(signal);
        scratch.wait_for_line("log", &format!("got-{name}"));
    }
    scratch.touch("go");
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(observer.contenders(&scratch.path).is_empty());
}

/// -w holds while the server is unreachable, and the outage gets its own code and message
/// rather than the conflict code.
#[test]
fn wait_is_honoured_and_told_apart_while_the_server_is_unreachable() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new("wait-cut");
    let holder = observer.hold(&scratch.path, "holder");
    let started = Instant::now();
    let running = Running::start(exec(&proxied, &["-w", "3"], &scratch.path, &scratch.dir, r#"touch "$D/ran""#));
    observer.wait_contenders(&scratch.path, 2);
    proxy.cut();
    let (status, stderr) = running.finish();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(3600), "-w 3 took {took:?}");
    assert_eq!(status.code(), Some(UNAVAILABLE), "{stderr}");
    assert!(stderr.contains("cannot reach ZooKeeper"), "{stderr}");
    assert!(!scratch.file("ran").exists());
    observer.release(holder);
}

/// `zklock hold` whose hold is lost tells the script that took it: a "lost" line after NODE
/// TOKEN on stdout, SIGTERM to --notify's process, its own name on stderr, the lost code.
#[test]
fn hold_tells_its_holder_when_the_hold_is_lost() {
    use std::io::BufRead;
    let (proxy, proxied) = through_proxy();
    let scratch = Scratch::new("hold-lost");
    let mut script = Command::new("sleep").arg("60").spawn().unwrap();
    let mut hold = zklock();
    hold.args([
        "hold",
        "--zk",
        &proxied,
        "--session-timeout",
        "2",
        "--notify",
        &script.id().to_string(),
        &scratch.path,
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = hold.spawn().expect("run zklock hold");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with(&scratch.path), "{line}");
    proxy.stall();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with("lost "), "{line:?}");
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(LOCK_LOST), "{stderr}");
    assert!(stderr.contains("zklock hold: lost the lock"), "{stderr}");
    assert_eq!(script.wait().unwrap().signal(), Some(libc::SIGTERM), "--notify's process got SIGTERM");
}

/// bash running `script` on a new pseudo-terminal, as a login shell's session: zklock's path in
/// $Z, the scratch directory in $D.
fn bash_on_terminal(script: &str, scratch: &Scratch, connect: &str) -> (fs::File, Running) {
    let (master, slave) = pseudo_terminal();
    let mut command = Command::new("bash");
    command
        .args(["--norc", "--noprofile", "-c", script])
        .env("Z", env!("CARGO_BIN_EXE_zklock"))
        .env("D", &scratch.dir)
        .env("P", &scratch.path)
        .env("C", connect)
        .env_remove("ZK_CONNECT")
        .stdout(slave.try_clone().unwrap())
        // A non-interactive bash with `set -m` manages the terminal on its stderr.
        .stderr(slave.try_clone().unwrap());
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    (master, on_terminal(command, slave))
}

/// Ctrl-C in a script's loop of execs stops the loop, as it does a loop of plain commands: the
/// terminal's SIGINT reaches the shell, and zklock dies of SIGINT as COMMAND did.
#[test]
fn ctrl_c_stops_a_calling_scripts_loop() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("ctrl-c-loop");
    let script = r#"for i in 1 2 3; do "$Z" exec --zk "$C" "$P" -- sh -c 'echo run >> "$D/log"; sleep 5'; done; echo after >> "$D/log""#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    scratch.wait_for_line("log", "run");
    master.write_all(b"\x03").unwrap();
    let (status, stderr) = bash.finish();
    assert_eq!(scratch.read("log"), "run\n", "the loop went on after Ctrl-C: {stderr}");
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    observer.wait_contenders(&scratch.path, 0);
}

/// A background exec whose COMMAND reads the terminal stops (the shell says so) rather than
/// hang holding the lock, and `fg` continues it with the terminal.
#[test]
fn a_background_exec_reading_the_terminal_stops_until_fg() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("bg-read");
    let script = r#"set -m
"$Z" exec --zk "$C" "$P" -- sh -c 'read x; echo "$x" > "$D/read"' &
for i in $(seq 200); do jobs -l > "$D/jobs"; grep -q Stopped "$D/jobs" && break; sleep 0.05; done
grep -q Stopped "$D/jobs" || exit 9
fg %1"#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    wait_until("the shell saw its job stopped", || scratch.read("jobs").contains("Stopped"));
    assert!(scratch.read("jobs").contains("tty input"), "stopped for reading the terminal: {}", scratch.read("jobs"));
    master.write_all(b"hello\n").unwrap();
    let (status, stderr) = bash.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("read"), "hello\n");
}

/// In a pipeline (`zklock exec ... | less`), zklock keeps the terminal with its job: the
/// pipeline's other members read it.
#[test]
fn a_pipeline_member_keeps_the_terminal() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("pipeline");
    let script = r#"set -m
"$Z" exec --zk "$C" "$P" -- sh -c 'echo hi; sleep 1' | { read a; read b < /dev/tty; echo "$a $b" > "$D/out"; }"#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    master.write_all(b"there\n").unwrap();
    let (status, stderr) = bash.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("out"), "hi there\n");
}

/// Ctrl-Z of an exec run from an interactive shell stops it as any job (SIGTSTP: "Stopped",
/// 148, not SIGSTOP's 147), and `fg` continues it with the terminal.
#[test]
fn ctrl_z_stops_the_job_as_the_shell_expects() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("ctrl-z-148");
    let script = r#"set -m
"$Z" exec --zk "$C" "$P" -- sh -c 'echo > "$D/ready"; read line; echo "$line" > "$D/read"'
echo "rc=$?" > "$D/rc"
fg"#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    wait_until("COMMAND runs", || scratch.file("ready").exists());
    master.write_all(b"\x1a").unwrap();
    wait_until("the shell saw its job stopped", || scratch.read("rc").ends_with('\n'));
    assert_eq!(scratch.read("rc"), "rc=148\n");
    master.write_all(b"again\n").unwrap();
    let (status, stderr) = bash.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("read"), "again\n");
}

/// Variables in the environment are defaults that flags override, never a conflict: a stray
/// ZKLOCK_SASL_USER (no mechanism), or a client certificate with no key and no TLS, is left
/// alone; the same as flags is still bad usage.
#[test]
fn stray_environment_variables_are_no_usage_error() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("stray-env");
    for (name, value) in [("ZKLOCK_SASL_USER", "alice"), ("ZKLOCK_TLS_CERT", "/nonexistent/cert.pem")] {
        let mut command = exec(&connect, &[], &scratch.path, &scratch.dir, "true");
        command.env(name, value);
        let (status, stderr) = run(command);
        assert_eq!(status.code(), Some(0), "{name}={value}: {stderr}");
    }
    for flag in ["--sasl-user", "--tls-cert"] {
        let (status, stderr) = run(exec(&connect, &[flag, "x"], &scratch.path, &scratch.dir, "true"));
        assert_eq!(status.code(), Some(USAGE), "{flag} alone: {stderr}");
        assert!(stderr.contains(flag), "{stderr}");
    }
}

/// -c runs its string with $SHELL or /bin/sh, as flock(1) does, never a `sh` found through PATH.
#[test]
fn dash_c_does_not_look_for_sh_in_path() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("dash-c-path");
    let mut command = zklock();
    command
        .args(["exec", "--zk", &connect, &scratch.path, "-c", r#"echo ran > "$D/ran""#])
        .env("D", &scratch.dir)
        .env("PATH", "/nonexistent")
        .env_remove("SHELL")
        .stderr(Stdio::piped());
    let (status, stderr) = run(command);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(scratch.read("ran"), "ran\n");
}

#[test]
fn hold_help_lists_its_exit_codes() {
    let mut command = zklock();
    command.args(["hold", "--help"]).stdout(Stdio::piped());
    let output = command.output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("Exit status"), "{help}");
    for code in ["128+N", "  1 ", "  64 ", "  69 ", "  75 "] {
        assert!(help.contains(code), "{code:?} in:\n{help}");
    }
}

/// The lock covers the whole job: COMMAND's background children, in its process group or in a
/// session of their own, keep it until they exit (as flock(1)'s children keep its descriptor).
#[test]
fn background_children_keep_the_lock_until_they_exit() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("bg-children");
    let script = r#"(sh -c 'while [ ! -e "$D/go" ]; do sleep 0.05; done; echo child >> "$D/log"' &)
(setsid sh -c 'while [ ! -e "$D/go" ]; do sleep 0.05; done; sleep 0.2; echo daemon >> "$D/log"' &)
echo command-done >> "$D/log""#;
    let running = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, script));
    scratch.wait_for_line("log", "command-done");
    // COMMAND is done; its children run on, and the lock is still held.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(observer.contenders(&scratch.path).len(), 1, "released while COMMAND's children ran");
    scratch.touch("go");
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let log = scratch.read("log");
    assert!(log.contains("child") && log.contains("daemon"), "zklock exited before the children: {log}");
    assert!(observer.contenders(&scratch.path).is_empty());
}

/// A zklock waiting in the background draws no status line over the shell's prompt.
#[test]
fn a_background_waiter_draws_no_status_line() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("bg-status");
    let holder = observer.hold(&scratch.path, "holder");
    let script = r#"set -m
"$Z" exec --zk "$C" "$P" -- true &
while [ ! -e "$D/go" ]; do sleep 0.05; done
kill %1; wait"#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    observer.wait_contenders(&scratch.path, 2);
    // The status line would be drawn after 250 ms, and again every second.
    std::thread::sleep(Duration::from_millis(1500));
    scratch.touch("go");
    let (status, _) = bash.finish();
    assert_eq!(status.code(), Some(0));
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut seen = Vec::new();
    let _ = master.read_to_end(&mut seen);
    let seen = String::from_utf8_lossy(&seen);
    assert!(!seen.contains("waiting for"), "drawn from the background: {seen:?}");
    observer.release(holder);
}

/// A signal forwarded to a stopped COMMAND is followed by SIGCONT, as a shell's `kill` does: the
/// COMMAND acts on it rather than stay stopped holding the lock.
#[test]
fn a_signal_forwarded_to_a_stopped_command_is_followed_by_sigcont() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("forward-stopped");
    let script = r#"trap 'echo got-TERM >> "$D/log"; exit 0' TERM; echo $$ > "$D/pid"; kill -STOP $$; while :; do sleep 0.1; done"#;
    let running = Running::start(exec(&connect, &[], &scratch.path, &scratch.dir, script));
    wait_until("COMMAND wrote its pid", || scratch.read("pid").ends_with('\n'));
    let pid: i32 = scratch.read("pid").trim().parse().unwrap();
    wait_until("COMMAND is stopped", || {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    });
    running.signal(libc::SIGTERM);
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(scratch.read("log").contains("got-TERM"));
    assert!(observer.contenders(&scratch.path).is_empty());
}

/// Stopped with Ctrl-Z and sent on with `bg`, an exec never takes the terminal back from the
/// shell that has it when its COMMAND ends.
#[test]
fn an_exec_sent_to_the_background_leaves_the_terminal_with_the_shell() {
    let connect = shared_connect_string();
    let scratch = Scratch::new("bg-terminal");
    let script = r#"set -m
"$Z" exec --zk "$C" "$P" -- sh -c 'echo > "$D/ready"; sleep 1'
bg
while kill -0 %1 2>/dev/null; do :; done
read -r stat < /proc/$$/stat; echo "$stat" > "$D/tty""#;
    let (mut master, bash) = bash_on_terminal(script, &scratch, &connect);
    wait_until("COMMAND runs", || scratch.file("ready").exists());
    master.write_all(b"\x1a").unwrap();
    let (status, _) = bash.finish();
    assert_eq!(status.code(), Some(0));
    // The shell's own /proc stat, read with builtins (a command would be a foreground job of its
    // own, and `wait` takes the terminal back): after the name, state ppid pgrp session tty_nr
    // tpgid.
    let stat = scratch.read("tty");
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    assert!(fields.len() > 5, "{stat:?}");
    assert_eq!(fields[5], fields[2], "the terminal's foreground is no longer the shell's group: {stat}");
}

/// A TCP relay to `upstream` that delays every chunk, each way, by `delay`: a slow but healthy
/// link (a round trip of twice `delay`), which the testkit's proxy cannot make. Runs until the
/// test process exits.
fn slow_relay(upstream: &str, delay: Duration) -> String {
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let upstream = upstream.to_owned();
    fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
        let (sender, receiver) = mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if sender.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        std::thread::spawn(move || {
            while let Ok((at, chunk)) = receiver.recv() {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                if to.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Both);
        });
    }
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(&upstream) else { continue };
            pump(client.try_clone().unwrap(), server.try_clone().unwrap(), delay);
            pump(server, client, delay);
        }
    });
    address
}

/// `-n` on a free lock over a slow but healthy link (a 0.8 s round trip): zklock's look at the
/// path's recipe and the core's try (two round trips) fit in -n's bound, and it runs COMMAND.
/// (With a bound of 2 s from before the look, it dropped the try and said the lock "is held by
/// another", with nobody holding: zklock's own bound firing is never "busy".)
#[test]
fn nonblock_on_a_free_lock_over_a_slow_link_is_not_reported_busy() {
    let connect = shared_connect_string();
    let observer = Observer::new(&connect);
    let scratch = Scratch::new("slow-try");
    // The path made (and free): no round trips to make it.
    let guard = observer.hold(&scratch.path, "maker");
    observer.release(guard);
    let server = connect.split(['/', ',']).next().unwrap().to_owned();
    let chroot = connect.find('/').map(|at| &connect[at..]).unwrap_or("");
    let slow = format!("{}{chroot}", slow_relay(&server, Duration::from_millis(400)));
    let (status, stderr) = run(exec(&slow, &["-n"], &scratch.path, &scratch.dir, r#"touch "$D/ran""#));
    assert_eq!(status.code(), Some(0), "a free lock, over a slow link, said busy: {stderr}");
    assert!(scratch.file("ran").exists());
    observer.wait_contenders(&scratch.path, 0);
}
