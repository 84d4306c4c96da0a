//! The exit codes of `zklock`, in one place (documented in each command's --help and the README).

/// Bad usage: an unknown option, a missing argument, an invalid path or value (sysexits' EX_USAGE).
pub const USAGE: i32 = 64;
/// ZooKeeper could not be reached, or the session could not be established (EX_UNAVAILABLE).
pub const UNAVAILABLE: i32 = 69;
/// Any other failure of zklock itself (EX_SOFTWARE).
pub const SOFTWARE: i32 = 70;

// zklock status (0 when the lock is held).
/// `zklock status`: nobody holds the lock (distinct from 1 and 2, which scripts and shells give
/// for errors of their own).
pub const FREE: i32 = 3;
/// `zklock status`: the path has children and none of them is a lock node (EX_DATAERR).
pub const NOT_A_LOCK: i32 = 65;

// zklock ls (0 when everything under PREFIX was listed).
/// `zklock ls`: listed, but ZooKeeper refused this client READ on some paths under PREFIX, so
/// locks under them may be missing (EX_NOPERM).
pub const PARTIAL: i32 = 77;

// zklock exec (otherwise COMMAND's own exit status).
/// `zklock exec`: the lock was not had with -n, or not within -w (flock(1)'s code; -E sets
/// another).
pub const CONFLICT: i32 = 1;
/// `zklock exec`: the lock was lost while COMMAND ran (session expired, node deleted,
/// disconnected too long; with --on-suspend term, the connection dropped), so COMMAND was
/// terminated. Never 0, so a script cannot mistake a run cut short for a success (EX_TEMPFAIL).
pub const LOCK_LOST: i32 = 75;
/// `zklock exec`: COMMAND was found but could not be run (as shells and env(1) say it).
pub const CANNOT_RUN: i32 = 126;
/// `zklock exec`: COMMAND was not found (as shells and env(1) say it).
pub const NOT_FOUND: i32 = 127;

/// A failure to connect, the same for every command: its code, bad input (USAGE) or else
/// UNAVAILABLE whatever stood in the way (no server answered, credentials refused, the chroot
/// missing on the server: no session with what --zk names could be had), and its message.
pub fn connect_failure(err: &zklock::Error) -> (i32, String) {
    use zklock::ErrorKind::*;
    match err.kind() {
        // The connect string, or SASL options the core found unusable (it names which).
        InvalidArgument if err.message().starts_with("SASL") => (USAGE, format!("--sasl-*: {err}")),
        InvalidArgument => (USAGE, format!("--zk: {err}")),
        Timeout | ConnectionLoss => (UNAVAILABLE, format!("cannot reach ZooKeeper: {err}")),
        _ => (UNAVAILABLE, format!("cannot connect: {err}")),
    }
}

/// The code for any other failure, the same for every command.
pub fn of_error(err: &zklock::Error) -> i32 {
    use zklock::ErrorKind::*;
    match err.kind() {
        InvalidArgument => USAGE,
        Timeout | ConnectionLoss | SessionExpired | AuthFailed | Closed => UNAVAILABLE,
        _ => SOFTWARE,
    }
}

/// The shell's code for death by `signal` (128+N): COMMAND's, or zklock's own when a signal
/// stopped it while it waited.
pub const fn killed_by(signal: i32) -> i32 {
    128 + signal
}
