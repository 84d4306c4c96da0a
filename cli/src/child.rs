//! COMMAND's process as zklock sees it: where it runs (a process group of its own, or zklock's),
//! the terminal, the signals zklock forwards to it, job control, and its exit status. The
//! watchdog (`watchdog`) starts and reaps it.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::codes;

/// The catchable signals that would end zklock: forwarded to COMMAND while it runs, and the end
/// of zklock (after its cleanup, dying of the same signal) while it waits for the lock. One the
/// caller left ignored (nohup, `&` in a script) stays ignored, in zklock and in COMMAND.
const TERMINATING_SIGNALS: [libc::c_int; 7] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM];

/// A signal zklock got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal {
    pub number: libc::c_int,
    /// Sent by the terminal to zklock's whole process group (Ctrl-C, Ctrl-\, a hangup), rather
    /// than by `kill` to zklock alone.
    pub from_terminal: bool,
}

/// Where COMMAND runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In a process group of its own: zklock leads its own group (a shell's job of its own), so
    /// COMMAND is put where zklock's signals and the terminal reach it as a job's do.
    OwnGroup {
        /// zklock was in the foreground of its terminal, alone in its group: COMMAND gets the
        /// terminal (and gives it back when stopped).
        terminal: bool,
    },
    /// In zklock's process group (zklock runs in a script's group, or a pipeline's): the
    /// terminal's signals and the shell's job control reach zklock and COMMAND alike, as with
    /// flock(1); zklock never touches the terminal.
    SharedGroup,
}

impl Placement {
    pub(crate) fn choose() -> Placement {
        // SAFETY: these only read the process's ids.
        let leader = unsafe { libc::getpgrp() == libc::getpid() };
        if !leader {
            return Placement::SharedGroup;
        }
        Placement::OwnGroup { terminal: foreground_terminal() && alone_in_group() }
    }

    pub(crate) fn own_group(self) -> bool {
        matches!(self, Placement::OwnGroup { .. })
    }

    pub(crate) fn terminal(self) -> bool {
        self == Placement::OwnGroup { terminal: true }
    }
}

/// Whether zklock is in the foreground of the terminal on its stdin.
pub(crate) fn foreground_terminal() -> bool {
    // SAFETY: these only inspect the descriptor and the process.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Whether stderr is a terminal whose foreground zklock is in (for the status line: a
/// background zklock does not draw over the prompt).
pub(crate) fn foreground_on_stderr() -> bool {
    // SAFETY: as above. A terminal that is not zklock's controlling one has no foreground of
    // zklock's to compare with (tcgetpgrp fails): drawn.
    unsafe {
        if libc::isatty(2) != 1 {
            return false;
        }
        let foreground = libc::tcgetpgrp(2);
        foreground == -1 || foreground == libc::getpgrp()
    }
}

/// The (pid, parent, process group) of every process, from /proc.
pub(crate) fn processes() -> Vec<(libc::pid_t, libc::pid_t, libc::pid_t)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid pgrp ...: comm may hold anything, so read after its last ')'.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else { continue };
        let mut fields = rest.split_whitespace().skip(1).map(|field| field.parse::<libc::pid_t>().ok());
        if let (Some(Some(ppid)), Some(Some(pgrp))) = (fields.next(), fields.next()) {
            found.push((pid, ppid, pgrp));
        }
    }
    found
}

/// Every descendant of `root`.
pub(crate) fn descendants(root: libc::pid_t) -> Vec<(libc::pid_t, libc::pid_t)> {
    let all = processes();
    let mut found: Vec<(libc::pid_t, libc::pid_t)> = Vec::new();
    let mut parents = vec![root];
    let mut next = 0;
    while next < parents.len() {
        let parent = parents[next];
        next += 1;
        for &(pid, ppid, pgrp) in &all {
            if ppid == parent && !parents.contains(&pid) {
                parents.push(pid);
                found.push((pid, pgrp));
            }
        }
    }
    found
}

/// Whether no process but zklock and its own children is in zklock's process group: not a
/// pipeline's member (`zklock exec ... | less`), whose other members need the terminal.
fn alone_in_group() -> bool {
    // SAFETY: these only read the process's ids.
    let (me, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    processes().iter().all(|&(pid, ppid, pgrp)| pgrp != group || pid == me || ppid == me)
}

/// Makes `group` the foreground of the terminal on stdin. The caller may be in the background
/// (zklock taking the terminal back), which takes SIGTTOU blocked. Async-signal-safe.
pub(crate) fn give_terminal(group: libc::pid_t) {
    // SAFETY: signal mask changes of the calling thread, restored; tcsetpgrp on stdin.
    unsafe {
        let mut ttou = std::mem::zeroed::<libc::sigset_t>();
        let mut before = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut ttou);
        libc::sigaddset(&mut ttou, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &ttou, &mut before);
        libc::tcsetpgrp(0, group);
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
}

/// Whether the terminal on stdin has `group` in its foreground.
pub(crate) fn terminal_is_with(group: libc::pid_t) -> bool {
    // SAFETY: tcgetpgrp only reads.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == group }
}

/// Whether process `pid` is stopped now (state T in /proc).
pub(crate) fn is_stopped(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').map(|at| stat[at + 1..].trim_start().starts_with(['T', 't'])))
        .unwrap_or(false)
}

/// COMMAND was stopped by `signal` (Ctrl-Z; reading the terminal from the background): zklock
/// stops too, with the same signal, so that the shell sees its job stopped (and says why, as it
/// does for any job) rather than wait for a job that cannot go on. On `fg` or `bg` zklock
/// continues, and COMMAND with it. With COMMAND in zklock's group the shell stops and continues
/// both; zklock only follows a stop that came to COMMAND alone.
pub(crate) fn stop_with_command(command: libc::pid_t, signal: libc::c_int, placement: Placement) {
    // Job control's stops; a SIGSTOP sent to COMMAND alone (a debugger, say) is not followed.
    if !matches!(signal, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
        return;
    }
    // Continued already (the whole group was, with zklock): nothing to follow.
    if !is_stopped(command) {
        return;
    }
    // SAFETY: getpgrp and kill have no memory effects; a stop signal to ourselves takes effect
    // before kill returns, so it returns once zklock is continued.
    unsafe {
        let own = libc::getpgrp();
        if placement.own_group() && terminal_is_with(command) {
            give_terminal(own);
        }
        // The same signal, so that the shell says "Stopped" or "Stopped (tty input)"; a stop
        // signal the kernel would discard (an orphaned process group) or that is ignored falls
        // back to SIGSTOP.
        let mut current = std::mem::zeroed::<libc::sigaction>();
        libc::sigaction(signal, std::ptr::null(), &mut current);
        let stop =
            if current.sa_sigaction == libc::SIG_IGN || !parent_does_job_control() { libc::SIGSTOP } else { signal };
        libc::kill(libc::getpid(), stop);
        if placement.own_group() {
            // `fg` gave zklock the terminal (COMMAND gets it, unless zklock shares its group
            // with a pipeline's other members); `bg` did not, and then COMMAND goes on in the
            // background.
            if foreground_terminal() && alone_in_group() {
                give_terminal(command);
            }
            signal_group(command, libc::SIGCONT);
        } else {
            libc::kill(command, libc::SIGCONT);
        }
    }
}

/// Whether zklock's parent is in zklock's session but another process group (a shell with job
/// control): then the kernel does not discard a terminal stop signal zklock sends itself, as it
/// does in an orphaned process group.
fn parent_does_job_control() -> bool {
    // SAFETY: these only read ids.
    unsafe {
        let parent = libc::getppid();
        libc::getsid(parent) == libc::getsid(0) && libc::getpgid(parent) != libc::getpgrp()
    }
}

pub(crate) fn signal_group(group: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory effects; ESRCH (the group is gone) is fine.
    unsafe { libc::kill(-group, signal) };
}

/// Forwards `signal` to COMMAND: to its process group when it has one of its own; in zklock's
/// group, to the processes under the watchdog that stayed in it (those a signal to the group
/// would reach). Then SIGCONT, as a shell's `kill` does, if COMMAND is stopped: a stopped
/// process acts on a signal only once continued.
pub(crate) fn forward(command: libc::pid_t, watchdog: libc::pid_t, signal: libc::c_int, placement: Placement) {
    let stopped = is_stopped(command);
    if placement.own_group() {
        signal_group(command, signal);
        if stopped {
            signal_group(command, libc::SIGCONT);
        }
        return;
    }
    // SAFETY: getpgrp only reads; kill has no memory effects.
    let group = unsafe { libc::getpgrp() };
    for (pid, pgrp) in descendants(watchdog) {
        if pgrp == group {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, signal);
                if stopped {
                    libc::kill(pid, libc::SIGCONT);
                }
            }
        }
    }
}

/// The shell's convention: the exit code, or 128+N for death by signal N.
pub(crate) fn status_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => codes::killed_by(signal),
        (None, None) => codes::SOFTWARE,
    }
}

/// Whether zklock dies of `signal` when COMMAND did: a signal sent from outside to end the job.
pub(crate) fn reraised(signal: libc::c_int) -> bool {
    TERMINATING_SIGNALS.contains(&signal) || signal == libc::SIGPIPE
}

/// Ends zklock by `signal`'s default action (after its cleanup), so that its parent sees it
/// killed by the signal, as it would see COMMAND (a shell stops a loop on a job killed by
/// SIGINT, not on one that exited 130). Without a core dump. Returns 128+N if the signal does
/// not end the process (its default is to ignore it).
pub(crate) fn die_by(signal: libc::c_int) -> i32 {
    use std::io::Write;
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: setrlimit, signal, sigprocmask and raise on this thread, with locals.
    unsafe {
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signal);
    }
    codes::killed_by(signal)
}

/// Blocks the terminating signals the caller has not ignored, in this thread (and so in every
/// thread started after), and delivers them, as they come, from a thread that waits for nothing
/// else. Ignored ones stay ignored (and COMMAND inherits that).
pub(crate) fn forwarded_signals() -> io::Result<UnboundedReceiver<Signal>> {
    // SAFETY: plain sigset manipulation on a local set; sigaction only reads.
    let set = unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for signal in TERMINATING_SIGNALS {
            let mut current = std::mem::zeroed::<libc::sigaction>();
            libc::sigaction(signal, std::ptr::null(), &mut current);
            if current.sa_sigaction != libc::SIG_IGN {
                libc::sigaddset(&mut set, signal);
            }
        }
        set
    };
    // SAFETY: as above.
    let result = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new().name("zklock-signals".into()).spawn(move || loop {
        // SAFETY: sigwaitinfo writes a local siginfo.
        let mut info = unsafe { std::mem::zeroed::<libc::siginfo_t>() };
        let number = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if number <= 0 {
            continue;
        }
        let from_terminal = info.si_code == libc::SI_KERNEL;
        if sender.send(Signal { number, from_terminal }).is_err() {
            return;
        }
    })?;
    Ok(receiver)
}
