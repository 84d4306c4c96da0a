//! Calls into Python from the runtime: user callbacks (`on_lost`, `on_state_change`) and the
//! completions of asyncio calls.
//!
//! User callbacks run on their client's callback thread, one at a time in order; completions on
//! the runtime's blocking-pool threads. Both hold the GIL, and neither is a thread that drives
//! ZooKeeper sessions, so a slow callback never stalls a session. An exception raised by a
//! callback goes to `sys.unraisablehook`: it is reported, never propagated into the runtime.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use pyo3::prelude::*;

use crate::runtime;

/// A Python callable shared with runtime tasks (an `Arc`, so that sharing needs no GIL).
pub(crate) type Callback = Arc<Callable>;

/// A Python callable that runtime threads may hold and let go. Let go on a runtime thread, off
/// the interpreter, it is dropped on a blocking-pool thread that attaches holding nothing else.
/// pyo3 would otherwise queue it in its reference pool, and once that pool exists every call
/// into the binding takes its mutex: that was a third of a re-entry's cost.
pub(crate) struct Callable(ManuallyDrop<Py<PyAny>>);

/// A callable for runtime tasks to share.
pub(crate) fn callback(callable: Py<PyAny>) -> Callback {
    Arc::new(Callable(ManuallyDrop::new(callable)))
}

thread_local! {
    /// Set while [`run_now`] holds the interpreter on this thread.
    static ATTACHED: Cell<bool> = const { Cell::new(false) };
}

impl Callable {
    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.0.bind(py)
    }
}

impl Drop for Callable {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again.
        let callable = unsafe { ManuallyDrop::take(&mut self.0) };
        if !runtime::on_runtime_thread() || ATTACHED.with(Cell::get) {
            // A Python thread (attached: the binding's objects are dropped by Python) or inside
            // `run_now`.
            return drop(callable);
        }
        if !runtime::python_alive() {
            // Nobody is left to care, and attaching to an exiting interpreter is not safe.
            return std::mem::forget(callable);
        }
        runtime::handle().spawn_blocking(move || {
            let mut callable = Some(callable);
            Python::try_attach(|_| drop(callable.take()));
            // Not attached: the interpreter is exiting.
            std::mem::forget(callable);
        });
    }
}

/// Runs a user callback (`on_lost`, `on_state_change`) on `client`'s callback thread, after the
/// ones dispatched before it: in order, and never on the threads that keep sessions alive.
pub(crate) fn dispatch<F>(client: &zklock::Client, callback: Callback, call: F)
where
    F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<()> + Send + 'static,
{
    if runtime::python_alive() {
        client.dispatch_callback(move || run_now(callback, call));
    }
}

/// Runs `call(callback)` with the GIL on a blocking-pool thread: for the completions of asyncio
/// calls, which only hand their outcome to the event loop.
pub(crate) fn call_soon<F>(callback: Callback, call: F)
where
    F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<()> + Send + 'static,
{
    if runtime::python_alive() {
        runtime::handle().spawn_blocking(move || run_now(callback, call));
    }
}

/// As [`call_soon`], on the current thread (which must not be a runtime worker); lets go of
/// `callback` while attached.
///
/// Nothing runs once the interpreter is exiting: entering a finalizing interpreter from a
/// foreign thread is not safe, and nobody is left to care.
pub(crate) fn run_now<F>(callback: Callback, call: F)
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
        ATTACHED.with(|attached| attached.set(true));
        let bound = callback.bind(py);
        if let Err(err) = call(bound) {
            err.write_unraisable(py, Some(bound));
        }
        drop(callback);
        ATTACHED.with(|attached| attached.set(false));
    });
}
