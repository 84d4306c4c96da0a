//! Calls into Python from the runtime: user callbacks (`on_lost`, `on_state_change`) and the
//! completions of asyncio calls.
//!
//! User callbacks run on their client's callback thread, one at a time in order; completions on
//! the runtime's blocking-pool threads. Both hold the GIL, and neither is a thread that drives
//! ZooKeeper sessions, so a slow callback never stalls a session. An exception raised by a
//! callback goes to `sys.unraisablehook`: it is reported, never propagated into the runtime.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::runtime;

/// A Python callable shared with runtime tasks (an `Arc`, so that sharing needs no GIL).
pub(crate) type Callback = Arc<Py<PyAny>>;

/// Runs a user callback (`on_lost`, `on_state_change`) on `client`'s callback thread, after the
/// ones dispatched before it: in order, and never on the threads that keep sessions alive.
pub(crate) fn dispatch<F>(client: &zklock::Client, callback: Callback, call: F)
where
    F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<()> + Send + 'static,
{
    if runtime::python_alive() {
        client.dispatch_callback(move || run_now(&callback, call));
    }
}

/// Runs `call(callback)` with the GIL on a blocking-pool thread: for the completions of asyncio
/// calls, which only hand their outcome to the event loop.
pub(crate) fn call_soon<F>(callback: Callback, call: F)
where
    F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<()> + Send + 'static,
{
    if runtime::python_alive() {
        runtime::handle().spawn_blocking(move || run_now(&callback, call));
    }
}

/// As [`call_soon`], on the current thread (which must not be a runtime worker).
///
/// Nothing runs once the interpreter is exiting: entering a finalizing interpreter from a
/// foreign thread is not safe, and nobody is left to care.
pub(crate) fn run_now<F>(callback: &Py<PyAny>, call: F)
where
    F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<()>,
{
    if !runtime::python_alive() {
        return;
    }
    Python::try_attach(|py| {
        if !runtime::python_alive() {
            return;
        }
        let callback = callback.bind(py);
        if let Err(err) = call(callback) {
            err.write_unraisable(py, Some(callback));
        }
    });
}
