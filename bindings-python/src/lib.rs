//! The native module `zklock._native` of the Python package `zklock`: thin classes over the core
//! crate. The pure-Python package (`bindings-python/python/zklock`) adds the asyncio API, the
//! exception classes and owner bookkeeping for tasks.
//!
//! One background tokio runtime per process runs every session and watch (see `runtime`).
//! Blocking calls release the GIL; callbacks run on runtime threads holding the GIL.

mod acl;
mod callbacks;
mod client;
mod error;
mod lock;
mod multi_lock;
mod pending;
mod runtime;
mod rwlock;
mod semaphore;

use pyo3::prelude::*;

/// Called at interpreter exit (registered by the Python package with `atexit`). Closes the
/// clients still open, so that their lock nodes go at once rather than when their sessions time
/// out (waiting at most a second for the servers), then stops runtime threads from entering
/// Python again. The runtime itself is left running: the process is about to end, and shutting it
/// down could wait on sessions.
///
/// Threads still blocked in zklock calls are stopped from returning into Python first (they stay
/// blocked rather than wake up to raise ClosedError into an exiting interpreter), and those
/// already returning are waited for (see `runtime::set_exiting`). Callbacks and asyncio
/// completions go on: they run on the package's callback threads, Python threads, so exit
/// handlers after this one may still use zklock's asyncio API.
#[pyfunction]
fn _at_exit(py: Python<'_>, clients: Vec<Bound<'_, client::Client>>) {
    let open: Vec<zklock::Client> = clients
        .iter()
        .filter_map(|client| client.get().core(py).ok())
        .filter(|client| !client.is_closed())
        .cloned()
        .collect();
    runtime::set_exiting(py, AT_EXIT_CLOSE_TIMEOUT);
    // Clients collected unclosed were closed in the background: their closes are waited for too.
    let collected = client::take_closing();
    if !open.is_empty() || !collected.is_empty() {
        let closing = futures::future::join(
            futures::future::join_all(open.iter().map(|client| client.close())),
            futures::future::join_all(collected),
        );
        let handle = runtime::handle();
        let _ = runtime::detach(py, || {
            handle.block_on(async { tokio::time::timeout(AT_EXIT_CLOSE_TIMEOUT, closing).await })
        });
    }
}

const AT_EXIT_CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The `zklock` command, the cli crate's own (linked in rather than shipped as a second binary):
/// runs the command line `argv` (the program name first) and returns its exit status. For the
/// package's console script and `python -m zklock`, which set the process up as the command
/// expects (see `zklock/__main__.py`).
#[pyfunction]
fn _command(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> i32 {
    runtime::detach(py, || zklock_cli::main(argv))
}

#[pymodule(gil_used = true)]
mod _native {
    #[pymodule_export]
    use super::_at_exit;
    #[pymodule_export]
    use super::_command;
    #[pymodule_export]
    use super::callbacks::{_callback_pipe, _take_callback, _unraisable, Finished};
    #[pymodule_export]
    use super::client::Client;
    #[pymodule_export]
    use super::lock::{Lock, Owner, Participant};
    #[pymodule_export]
    use super::multi_lock::{MultiGuard, MultiLock};
    #[pymodule_export]
    use super::pending::AsyncOp;
    #[pymodule_export]
    use super::rwlock::ReadWriteLock;
    #[pymodule_export]
    use super::semaphore::{Leases, Semaphore, SemaphoreParticipants};

    // Permission bits of custom ACL entries (ZooKeeper's, as the core numbers them).
    #[pymodule_export]
    const PERM_READ: u32 = zklock::Perms::READ.bits();
    #[pymodule_export]
    const PERM_WRITE: u32 = zklock::Perms::WRITE.bits();
    #[pymodule_export]
    const PERM_CREATE: u32 = zklock::Perms::CREATE.bits();
    #[pymodule_export]
    const PERM_DELETE: u32 = zklock::Perms::DELETE.bits();
    #[pymodule_export]
    const PERM_ADMIN: u32 = zklock::Perms::ADMIN.bits();
    #[pymodule_export]
    const PERM_ALL: u32 = zklock::Perms::ALL.bits();

    // The core's defaults of the client's options, in seconds (Python's unit for them).
    #[pymodule_export]
    const DEFAULT_SESSION_TIMEOUT: f64 = zklock::DEFAULT_SESSION_TIMEOUT.as_secs_f64();
    #[pymodule_export]
    const DEFAULT_CONNECT_TIMEOUT: f64 = zklock::DEFAULT_CONNECT_TIMEOUT.as_secs_f64();

    /// The version of zklock, the same for the crate, the wheel and the npm package.
    #[pymodule_export]
    #[allow(non_upper_case_globals)] // Python's own name for it
    const __version__: &str = env!("CARGO_PKG_VERSION");
}
