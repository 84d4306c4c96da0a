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

/// Refuses a subinterpreter: the native module's state is the process's (one runtime, one set of
/// classes and cached exception classes, callbacks that run in the interpreter that registered
/// them), so it works in the main interpreter only, as pyo3 recommends for its modules. Checked
/// before anything of the module is made, so that a subinterpreter importing first leaves
/// nothing behind for the main one.
fn refuse_subinterpreter() -> PyResult<()> {
    // SAFETY: reads the calling thread's interpreter, which holds the GIL (module init).
    let id = unsafe { pyo3::ffi::PyInterpreterState_GetID(pyo3::ffi::PyInterpreterState_Get()) };
    // The main interpreter's id is 0 (-1: the lookup failed, and an exception is set).
    if id == 0 {
        return Ok(());
    }
    Err(pyo3::exceptions::PyImportError::new_err(
        "zklock cannot be imported in a subinterpreter: its native module keeps one state for the \
         whole process (its runtime, classes and callbacks), so it runs in the main interpreter only",
    ))
}

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    refuse_subinterpreter()?;
    m.add_function(wrap_pyfunction!(_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(_command, m)?)?;
    m.add_function(wrap_pyfunction!(callbacks::_callback_pipe, m)?)?;
    m.add_function(wrap_pyfunction!(callbacks::_take_callback, m)?)?;
    m.add_function(wrap_pyfunction!(callbacks::_unraisable, m)?)?;
    m.add_class::<callbacks::Finished>()?;
    m.add_class::<client::Client>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::Owner>()?;
    m.add_class::<lock::Participant>()?;
    m.add_class::<multi_lock::MultiGuard>()?;
    m.add_class::<multi_lock::MultiLock>()?;
    m.add_class::<pending::AsyncOp>()?;
    m.add_class::<rwlock::ReadWriteLock>()?;
    m.add_class::<semaphore::Leases>()?;
    m.add_class::<semaphore::Semaphore>()?;
    m.add_class::<semaphore::SemaphoreParticipants>()?;

    // Permission bits of custom ACL entries (ZooKeeper's, as the core numbers them).
    m.add("PERM_READ", zklock::Perms::READ.bits())?;
    m.add("PERM_WRITE", zklock::Perms::WRITE.bits())?;
    m.add("PERM_CREATE", zklock::Perms::CREATE.bits())?;
    m.add("PERM_DELETE", zklock::Perms::DELETE.bits())?;
    m.add("PERM_ADMIN", zklock::Perms::ADMIN.bits())?;
    m.add("PERM_ALL", zklock::Perms::ALL.bits())?;

    // The core's defaults of the client's options, in seconds (Python's unit for them).
    m.add("DEFAULT_SESSION_TIMEOUT", zklock::DEFAULT_SESSION_TIMEOUT.as_secs_f64())?;
    m.add("DEFAULT_CONNECT_TIMEOUT", zklock::DEFAULT_CONNECT_TIMEOUT.as_secs_f64())?;

    // The version of zklock, the same for the crate, the wheel and the npm package.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
