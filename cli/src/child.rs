//! COMMAND's process: spawned in its own process group (with the terminal, when zklock has it),
//! its exit awaited on a thread of its own, signals forwarded to its group, and its exit status.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitStatus;

use tokio::sync::mpsc::UnboundedReceiver;
use zklock::Hold;

use crate::codes;

/// The signals zklock forwards to COMMAND (and that stop zklock while it waits for the lock).
pub(crate) const FORWARDED_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The signal COMMAND gets when zklock dies without releasing (killed with SIGKILL, say). The
/// session, and so the lock, outlives zklock by up to --session-timeout: time for COMMAND to stop
/// cleanly while nobody else can have the lock yet. (Linux only: prctl's PR_SET_PDEATHSIG.)
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) const PARENT_DEATH_SIGNAL: libc::c_int = libc::SIGTERM;

/// Starts COMMAND in its own process group, with the lock's facts in its environment.
/// With `terminal`, COMMAND also takes the terminal on stdin, as a shell gives it to a job.
pub(crate) fn spawn(
    command: &[OsString],
    path: &str,
    hold: &Hold,
    session_id: i64,
    terminal: bool,
) -> io::Result<std::process::Child> {
    #[cfg(target_os = "linux")]
    let parent = std::process::id();
    let mut child = std::process::Command::new(&command[0]);
    child
        .args(&command[1..])
        .env("ZKLOCK_PATH", path)
        .env("ZKLOCK_NODE", hold.node_path())
        .env("ZKLOCK_FENCING_TOKEN", hold.fencing_token().to_string())
        .env("ZKLOCK_SESSION_ID", format!("0x{session_id:x}"))
        // The passwords were zklock's, not COMMAND's.
        .env_remove(crate::connection::KEY_PASSWORD_ENV)
        .env_remove(crate::connection::SASL_PASSWORD_ENV)
        .process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec, and no allocation.
    unsafe {
        child.pre_exec(move || {
            let empty = {
                let mut set = std::mem::zeroed::<libc::sigset_t>();
                libc::sigemptyset(&mut set);
                set
            };
            // zklock blocks the signals it forwards; COMMAND must get them.
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Linux only (prctl): elsewhere COMMAND outlives a zklock killed outright.
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL as libc::c_ulong, 0, 0, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // zklock may have died before the prctl: then no signal will come.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            // Before the exec, so that COMMAND never reads the terminal from the background
            // (which would stop it, with SIGTTIN).
            if terminal {
                give_terminal(libc::getpid());
            }
            Ok(())
        });
    }
    child.spawn()
}

/// Whether zklock is in the foreground of the terminal on its stdin. COMMAND, in a process group
/// of its own, then needs the terminal handed over: to read it, and to get the terminal's Ctrl-C.
pub(crate) fn foreground_terminal() -> bool {
    // SAFETY: these only inspect the descriptor and the process.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
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

/// What the thread that waits for COMMAND reports.
pub(crate) enum ChildEvent {
    /// Stopped by this signal (Ctrl-Z on its terminal, say).
    Stopped(libc::c_int),
    Exited(io::Result<ExitStatus>),
}

/// Waits for the child on a thread of its own, reporting its stops and its exit.
pub(crate) fn wait_in_thread(child: std::process::Child) -> UnboundedReceiver<ChildEvent> {
    let pid = child.id() as libc::pid_t;
    // Reaped with waitpid rather than through `child`, to hear of stops too.
    drop(child);
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("zklock-wait".into())
        .spawn(move || loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local.
            if unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) } == -1 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                let _ = sender.send(ChildEvent::Exited(Err(err)));
                return;
            }
            if libc::WIFSTOPPED(status) {
                if sender.send(ChildEvent::Stopped(libc::WSTOPSIG(status))).is_err() {
                    return;
                }
                continue;
            }
            let _ = sender.send(ChildEvent::Exited(Ok(ExitStatus::from_raw(status))));
            return;
        })
        .expect("start the thread that waits for COMMAND");
    receiver
}

/// COMMAND was stopped from its terminal (Ctrl-Z): zklock stops too, so that the shell sees its
/// job stopped and takes the terminal back, rather than wait for a job that cannot go on. On `fg`
/// (or `bg`) zklock continues, and COMMAND with it. (A stop long enough loses the lock: then
/// COMMAND is terminated as it continues.)
pub(crate) fn stop_with_command(group: libc::pid_t, signal: libc::c_int) {
    if !matches!(signal, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
        return;
    }
    // SAFETY: getpgrp and kill have no memory effects; SIGSTOP to ourselves is delivered before
    // kill returns, so it returns once zklock is continued.
    unsafe {
        give_terminal(libc::getpgrp());
        libc::kill(libc::getpid(), libc::SIGSTOP);
        // `fg` gave zklock the terminal; `bg` did not, and then COMMAND goes on in the background.
        if libc::tcgetpgrp(0) == libc::getpgrp() {
            give_terminal(group);
        }
    }
    signal_group(group, libc::SIGCONT);
}

pub(crate) fn signal_group(group: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory effects; ESRCH (the group is gone) is fine.
    unsafe { libc::kill(-group, signal) };
}

pub(crate) fn group_alive(group: libc::pid_t) -> bool {
    // SAFETY: as above; signal 0 only checks.
    unsafe { libc::kill(-group, 0) == 0 }
}

/// The shell's convention: the exit code, or 128+N for death by signal N.
pub(crate) fn status_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => codes::killed_by(signal),
        (None, None) => codes::SOFTWARE,
    }
}

/// Blocks the forwarded signals in this thread (and so in every thread started after) and
/// delivers them, as they come, from a thread that waits for nothing else.
pub(crate) fn forwarded_signals() -> io::Result<UnboundedReceiver<libc::c_int>> {
    // SAFETY: plain sigset manipulation on a local set.
    let set = unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for signal in FORWARDED_SIGNALS {
            libc::sigaddset(&mut set, signal);
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
        let mut signal: libc::c_int = 0;
        // SAFETY: sigwait writes the signal number to a local.
        if unsafe { libc::sigwait(&set, &mut signal) } == 0 && sender.send(signal).is_err() {
            return;
        }
    })?;
    Ok(receiver)
}
