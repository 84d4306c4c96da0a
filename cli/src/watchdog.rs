//! The watchdog: a small process of zklock's own, forked before zklock starts any thread, that
//! starts COMMAND and ends the whole job when zklock cannot.
//!
//! zklock's own process may be killed outright (SIGKILL, the OOM killer) or stopped (SIGSTOP)
//! while COMMAND runs; its session, and so the lock, then outlives it by up to the session
//! timeout, after which the server lets the next holder in. The watchdog is COMMAND's parent and
//! a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every process of the job, in COMMAND's process
//! group or in groups and sessions of their own, stays its descendant. It ends the job (SIGTERM
//! and SIGCONT to every descendant, SIGKILL after the grace):
//!
//! * at once when zklock's end of the control pipe closes while the job runs (zklock died);
//! * when zklock's heartbeats stop for longer than the overdue time while COMMAND is not stopped
//!   (zklock is stopped, or wedged);
//! * when zklock asks (the lock was lost).
//!
//! It reports COMMAND's start, stops, continues and exit, and that every process of the job is
//! gone, over the report pipe. Only plain system calls and no threads: it is the fork of a
//! process that had none.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use crate::child::Placement;

/// Signals the watchdog ignores (the terminal's, and those sent to zklock's whole process
/// group): it must live on to end the job. COMMAND gets them back as zklock found them.
const IGNORED_IN_WATCHDOG: [libc::c_int; 10] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// The secret-bearing variables of zklock's environment, never COMMAND's.
pub(crate) const SECRET_VARIABLES: [&str; 2] =
    [crate::connection::SASL_PASSWORD_ENV, crate::connection::KEY_PASSWORD_ENV];

// zklock → watchdog.
const BEAT: u8 = b'h';
const SPAWN: u8 = b's';
const KILL: u8 = b'k';

/// What the watchdog reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// COMMAND started, with this pid (its process group's id too).
    Spawned(libc::pid_t),
    /// COMMAND could not be started: the errno.
    SpawnFailed(i32),
    /// COMMAND was stopped by this signal.
    Stopped(libc::c_int),
    /// COMMAND was continued.
    Continued,
    /// COMMAND exited: its raw wait status.
    Exited(i32),
    /// Every process of the job is gone (after COMMAND exited).
    AllGone,
    /// zklock's heartbeats stopped for this many ms: the watchdog is ending the job.
    Overdue(i32),
}

impl Report {
    fn encode(self) -> [u8; 5] {
        let (tag, value) = match self {
            Report::Spawned(pid) => (b'P', pid),
            Report::SpawnFailed(errno) => (b'E', errno),
            Report::Stopped(signal) => (b'S', signal),
            Report::Continued => (b'C', 0),
            Report::Exited(status) => (b'X', status),
            Report::AllGone => (b'Z', 0),
            Report::Overdue(ms) => (b'O', ms),
        };
        let v = value.to_le_bytes();
        [tag, v[0], v[1], v[2], v[3]]
    }

    fn decode(frame: [u8; 5]) -> Option<Report> {
        let value = i32::from_le_bytes([frame[1], frame[2], frame[3], frame[4]]);
        Some(match frame[0] {
            b'P' => Report::Spawned(value),
            b'E' => Report::SpawnFailed(value),
            b'S' => Report::Stopped(value),
            b'C' => Report::Continued,
            b'X' => Report::Exited(value),
            b'Z' => Report::AllGone,
            b'O' => Report::Overdue(value),
            _ => return None,
        })
    }
}

/// zklock's handle on its watchdog.
pub(crate) struct Watchdog {
    pid: libc::pid_t,
    control: Mutex<File>,
    reports: Option<File>,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are open and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Watchdog {
    /// Forks the watchdog, which will run `command`. Called before zklock starts any thread.
    pub(crate) fn start(command: Vec<OsString>) -> io::Result<Watchdog> {
        let (control_read, control_write) = pipe()?;
        let (report_read, report_write) = pipe()?;
        // SAFETY: no other thread exists yet (the caller's contract), so the child may run
        // ordinary code.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                drop(control_write);
                drop(report_read);
                // A panic must never unwind out of here into the parent's code, in this child.
                let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    watchdog_main(File::from(control_read), File::from(report_write), command)
                }))
                .unwrap_or(70);
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(code) }
            }
            pid => Ok(Watchdog {
                pid,
                control: Mutex::new(File::from(control_write)),
                reports: Some(File::from(report_read)),
            }),
        }
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    fn send(&self, frame: &[u8]) {
        // A watchdog gone is seen on the report pipe; nothing to do here.
        if let Ok(mut control) = self.control.lock() {
            let _ = control.write_all(frame);
        }
    }

    pub(crate) fn beat(&self) {
        self.send(&[BEAT]);
    }

    /// Asks the watchdog to start COMMAND with `env` added to the environment (and the
    /// secret-bearing variables taken out), where `placement` says; `grace` is
    /// the time from SIGTERM to SIGKILL when the job is ended, `overdue` how long heartbeats may
    /// stop while COMMAND runs.
    pub(crate) fn spawn(&self, env: &[(&str, String)], placement: Placement, grace: Duration, overdue: Duration) {
        let mut payload = Vec::new();
        payload.push(u8::from(placement.terminal()) | (u8::from(placement.own_group()) << 1));
        payload.extend_from_slice(&(grace.as_millis().min(u64::MAX as u128) as u64).to_le_bytes());
        payload.extend_from_slice(&(overdue.as_millis().min(u64::MAX as u128) as u64).to_le_bytes());
        for (name, value) in env {
            payload.extend_from_slice(name.as_bytes());
            payload.push(0);
            payload.extend_from_slice(value.as_bytes());
            payload.push(0);
        }
        let mut frame = vec![SPAWN];
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&payload);
        self.send(&frame);
    }

    /// Asks the watchdog to end the job: SIGTERM and SIGCONT now, SIGKILL after the grace.
    pub(crate) fn end_job(&self) {
        self.send(&[KILL]);
    }

    /// The watchdog's reports, read on a thread of their own; the channel closes when the
    /// watchdog is gone.
    pub(crate) fn reports(&mut self) -> io::Result<UnboundedReceiver<Report>> {
        let mut reports = self.reports.take().ok_or_else(|| io::Error::other("the reports are read already"))?;
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new().name("zklock-reports".into()).spawn(move || {
            let mut frame = [0u8; 5];
            while reports.read_exact(&mut frame).is_ok() {
                match Report::decode(frame) {
                    Some(report) if sender.send(report).is_ok() => {}
                    _ => return,
                }
            }
        })?;
        Ok(receiver)
    }
}

/// The watchdog's state.
struct Job {
    report: File,
    /// COMMAND's pid and process group, once started.
    command: Option<libc::pid_t>,
    /// COMMAND leads a process group of its own (else it is in zklock's).
    own_group: bool,
    command_done: bool,
    all_gone: bool,
    stopped: bool,
    last_beat: Instant,
    grace: Duration,
    overdue: Duration,
    /// When SIGKILL is due, once the job is being ended.
    kill_at: Option<Instant>,
    zklock_gone: bool,
}

impl Job {
    fn report(&mut self, report: Report) {
        let _ = self.report.write_all(&report.encode());
    }

    fn running(&self) -> bool {
        self.command.is_some() && !self.all_gone
    }

    fn end(&mut self) {
        if self.kill_at.is_some() || !self.running() {
            return;
        }
        self.signal_all(libc::SIGTERM);
        self.signal_all(libc::SIGCONT);
        self.kill_at = Some(Instant::now() + self.grace);
    }

    /// `signal` to COMMAND's process group and to every descendant of the watchdog.
    fn signal_all(&self, signal: libc::c_int) {
        if let Some(group) = self.command.filter(|_| self.own_group) {
            // SAFETY: kill has no memory effects; ESRCH is fine.
            unsafe { libc::kill(-group, signal) };
        }
        // SAFETY: getpid takes nothing.
        for (pid, _) in crate::child::descendants(unsafe { libc::getpid() }) {
            // SAFETY: as above.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// Reaps what ended, reporting COMMAND's stops, continues and exit.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes a local.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::WUNTRACED | libc::WCONTINUED) };
            if pid == -1 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // ECHILD: nobody left.
                if self.command.is_some() && self.command_done && !self.all_gone {
                    self.all_gone = true;
                    self.report(Report::AllGone);
                }
                return;
            }
            if pid == 0 {
                return;
            }
            if Some(pid) != self.command {
                continue;
            }
            if libc::WIFSTOPPED(status) {
                self.stopped = true;
                self.report(Report::Stopped(libc::WSTOPSIG(status)));
            } else if libc::WIFCONTINUED(status) {
                self.stopped = false;
                self.last_beat = Instant::now();
                self.report(Report::Continued);
            } else {
                self.command_done = true;
                self.stopped = false;
                self.report(Report::Exited(status));
            }
        }
    }
}

fn watchdog_main(mut control: File, report: File, command: Vec<OsString>) -> i32 {
    let mut ignored_before = Vec::new();
    for signal in IGNORED_IN_WATCHDOG {
        // SAFETY: setting a disposition to SIG_IGN.
        if unsafe { libc::signal(signal, libc::SIG_IGN) } == libc::SIG_IGN {
            ignored_before.push(signal);
        }
    }
    // SAFETY: prctl with plain integers; sigset calls on a local set.
    let signals = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if signals == -1 {
        return 1;
    }
    let mut job = Job {
        report,
        command: None,
        own_group: false,
        command_done: false,
        all_gone: false,
        stopped: false,
        last_beat: Instant::now(),
        grace: Duration::ZERO,
        overdue: Duration::MAX,
        kill_at: None,
        zklock_gone: false,
    };
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        if job.zklock_gone && !job.running() {
            return 0;
        }
        let now = Instant::now();
        let timeout = if let Some(kill_at) = job.kill_at {
            // SIGKILL again until nobody is left: what was forked meanwhile goes too.
            kill_at.saturating_duration_since(now).max(Duration::from_millis(20))
        } else if job.running() && !job.stopped && !job.zklock_gone {
            (job.last_beat + job.overdue).saturating_duration_since(now)
        } else {
            Duration::from_secs(3600)
        };
        // Once zklock is gone, only the children are watched (the pipe stays at its end).
        let mut fds = [
            libc::pollfd { fd: signals, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: control.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        let fds = if job.zklock_gone { &mut fds[..1] } else { &mut fds[..] };
        let millis = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: poll on descriptors this process owns.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        // SIGCHLD: drain the signalfd, then reap.
        let mut info = [0u8; 128];
        // SAFETY: reads into a local buffer.
        while unsafe { libc::read(signals, info.as_mut_ptr().cast(), info.len()) } > 0 {}
        job.reap();
        if !job.zklock_gone {
            let mut chunk = [0u8; 4096];
            // The control pipe is blocking: read only when poll said so.
            let readable = fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
            if readable {
                match control.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        job.zklock_gone = true;
                        job.end();
                    }
                    Ok(n) => {
                        buffer.extend_from_slice(&chunk[..n]);
                        handle_frames(&mut buffer, &mut job, &command, &ignored_before);
                    }
                }
            }
        }
        let now = Instant::now();
        if job.kill_at.is_none()
            && job.running()
            && !job.stopped
            && !job.zklock_gone
            && now >= job.last_beat + job.overdue
        {
            let late = now.duration_since(job.last_beat).as_millis().min(i32::MAX as u128) as i32;
            job.report(Report::Overdue(late));
            job.end();
        }
        if let Some(kill_at) = job.kill_at {
            if now >= kill_at && job.running() {
                job.signal_all(libc::SIGKILL);
            }
        }
        // A job ended and gone: ready for nothing more but zklock's end.
        if job.all_gone {
            job.kill_at = None;
        }
    }
}

fn handle_frames(buffer: &mut Vec<u8>, job: &mut Job, command: &[OsString], ignored_before: &[libc::c_int]) {
    loop {
        let Some(&tag) = buffer.first() else { return };
        match tag {
            BEAT => {
                job.last_beat = Instant::now();
                buffer.remove(0);
            }
            KILL => {
                buffer.remove(0);
                job.end();
            }
            SPAWN => {
                if buffer.len() < 5 {
                    return;
                }
                let len = u32::from_le_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
                if buffer.len() < 5 + len {
                    return;
                }
                let payload: Vec<u8> = buffer.drain(..5 + len).skip(5).collect();
                spawn(job, command, &payload, ignored_before);
            }
            _ => {
                buffer.clear();
                return;
            }
        }
    }
}

fn spawn(job: &mut Job, command: &[OsString], payload: &[u8], ignored_before: &[libc::c_int]) {
    use std::os::unix::ffi::OsStrExt;
    if payload.len() < 17 || job.command.is_some() {
        job.report(Report::SpawnFailed(libc::EINVAL));
        return;
    }
    let terminal = payload[0] & 1 != 0;
    job.own_group = payload[0] & 2 != 0;
    let mut number = [0u8; 8];
    number.copy_from_slice(&payload[1..9]);
    job.grace = Duration::from_millis(u64::from_le_bytes(number));
    number.copy_from_slice(&payload[9..17]);
    job.overdue = Duration::from_millis(u64::from_le_bytes(number));
    let mut child = std::process::Command::new(&command[0]);
    child.args(&command[1..]);
    let mut parts = payload[17..].split(|&b| b == 0);
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        if name.is_empty() {
            break;
        }
        child.env(std::ffi::OsStr::from_bytes(name), std::ffi::OsStr::from_bytes(value));
    }
    for secret in SECRET_VARIABLES {
        child.env_remove(secret);
    }
    if job.own_group {
        child.process_group(0);
    }
    let restore: Vec<(libc::c_int, libc::sighandler_t)> = IGNORED_IN_WATCHDOG
        .iter()
        .map(|&signal| (signal, if ignored_before.contains(&signal) { libc::SIG_IGN } else { libc::SIG_DFL }))
        .collect();
    // SAFETY: getpid has no effects.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls between fork and exec, and no allocation.
    unsafe {
        child.pre_exec(move || {
            for &(signal, disposition) in &restore {
                libc::signal(signal, disposition);
            }
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // The watchdog killed outright: COMMAND goes with it (zklock sees the watchdog gone).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            if terminal {
                crate::child::give_terminal(libc::getpid());
            }
            Ok(())
        });
    }
    match child.spawn() {
        Ok(spawned) => {
            let pid = spawned.id() as libc::pid_t;
            // Reaped by `reap`, not through `spawned`.
            drop(spawned);
            job.command = Some(pid);
            job.last_beat = Instant::now();
            job.report(Report::Spawned(pid));
        }
        Err(err) => {
            job.report(Report::SpawnFailed(err.raw_os_error().unwrap_or(libc::EIO)));
        }
    }
}
