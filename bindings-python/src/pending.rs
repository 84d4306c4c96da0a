//! `zklock._native.AsyncOp`: an acquisition (a lock's, a semaphore's, a multi-lock's) running on
//! the runtime for an asyncio task; its outcome is handed to a Python callback.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use crate::callbacks::{self, Callback};
use crate::error::to_py;
use crate::runtime::{self, ForkSafe};

type Running<T> = Arc<Mutex<Option<Pin<Box<dyn Future<Output = T> + Send>>>>>;

/// An acquisition running on the runtime; `cancel()` drops it.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct AsyncOp {
    cancel: ForkSafe<Box<dyn Fn() + Send + Sync>>,
    /// A lock's: takes the grant for the task that awaited it (see [`spawn_lock`]).
    claim: Option<ForkSafe<Box<dyn Fn() -> bool + Send + Sync>>>,
    /// The completion callable, for the garbage collector.
    done: Callback,
}

/// A lock acquisition for an asyncio task, from start to the task's hands.
enum Grant<F> {
    /// Acquiring (with what gives the lock back once granted).
    Running(Pin<Box<F>>, Box<dyn FnOnce() + Send>),
    /// Acquired: the lock is the owner's, but the task has not received it yet.
    Granted(Box<dyn FnOnce() + Send>),
    /// Received by the task, given back, or not acquired.
    Over,
}

#[pymethods]
impl AsyncOp {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Only once the runtime let go of it: until then the completion is the runtime's to
        // call, and what it reaches (the future, the waiting task) must not look like garbage.
        // Visited while the runtime held it, a task waiting on an acquisition made a cycle the
        // collector cleared (its function's globals among the rest) just before a callback
        // thread called it: a crash. (A count read as 2 while the runtime drops its share only
        // defers the collection.)
        if Arc::strong_count(&self.done) == 1 {
            self.done.traverse(&visit)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        Python::attach(|py| self.done.clear(py));
    }

    /// Drops the acquisition if it has not finished, here and now: core removes what it made
    /// (in the background). A lock's granted but not yet received (`_claim`) is given back here
    /// and now: its level is counted down before this returns (the delete goes on in the
    /// background), so no view says held for an acquisition its task gave up. In a forked child
    /// it does nothing: the task is the parent's.
    fn cancel(&self, py: Python<'_>) {
        if let Ok(cancel) = self.cancel.get(py, "this acquisition") {
            cancel();
        }
    }

    /// A lock's: takes the grant for the task (True), unless there is none to take (given back
    /// by `cancel()`, or not acquired). Only a claimed grant is the task's to release.
    fn _claim(&self) -> bool {
        self.claim.as_ref().and_then(ForkSafe::get_here).is_some_and(|claim| claim())
    }
}

/// Collected (nobody can await the acquisition any more): dropped, or a grant nobody received
/// given back, as by `cancel()`, rather than held for good.
impl Drop for AsyncOp {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.get_here() {
            cancel();
        }
    }
}

/// As [`spawn`], for a lock: `acquire` gives whether it acquired, and `give_back` releases what
/// it acquired. The grant waits for the task to claim it (`_claim`) or for `cancel()` to give it
/// back, whichever comes first; `done(ok, value)` only tells the task to come for it.
pub(crate) fn spawn_lock<F>(acquire: F, done: Py<PyAny>, give_back: impl FnOnce() + Send + 'static) -> AsyncOp
where
    F: Future<Output = zklock::Result<bool>> + Send + 'static,
{
    let done: Callback = callbacks::callback(done);
    let kept = done.clone();
    let grant: Arc<Mutex<Grant<F>>> = Arc::new(Mutex::new(Grant::Running(Box::pin(acquire), Box::new(give_back))));
    let polled = grant.clone();
    let task = runtime::handle().spawn(async move {
        let result = std::future::poll_fn(|cx| {
            let mut grant = polled.lock();
            let Grant::Running(acquire, _) = &mut *grant else { return Poll::Ready(None) };
            let Poll::Ready(result) = acquire.as_mut().poll(cx) else { return Poll::Pending };
            // Under the same mutex as `cancel()`: a grant is either given back or received.
            *grant = match (std::mem::replace(&mut *grant, Grant::Over), &result) {
                (Grant::Running(_, give_back), Ok(true)) => Grant::Granted(give_back),
                _ => Grant::Over,
            };
            Poll::Ready(Some(result))
        })
        .await;
        if let Some(result) = result {
            callbacks::call_soon(done, move |py| match result {
                Ok(acquired) => (true, acquired).into_pyobject(py),
                Err(err) => (false, to_py(py, &err).into_value(py)).into_pyobject(py),
            });
        }
    });
    let abort = task.abort_handle();
    let claimed = grant.clone();
    AsyncOp {
        done: kept,
        claim: Some(ForkSafe::new(Box::new(move || {
            let mut grant = claimed.lock();
            if !matches!(*grant, Grant::Granted(_)) {
                return false;
            }
            // The task holds it now: what would have given it back goes (the task releases).
            let given = std::mem::replace(&mut *grant, Grant::Over);
            drop(grant);
            drop(given);
            true
        }))),
        cancel: ForkSafe::new(Box::new(move || {
            // Taken out before dropped or given back: that runs core's code, outside the mutex.
            let taken = std::mem::replace(&mut *grant.lock(), Grant::Over);
            match taken {
                Grant::Running(acquisition, _) => drop(acquisition),
                Grant::Granted(give_back) => give_back(),
                Grant::Over => {}
            }
            abort.abort();
        })),
    }
}

/// Runs `acquire` on the runtime; `done(ok, value)` is then called on a runtime thread with the
/// GIL: `(True, into_py(outcome))` or `(False, exception)`. If `done` never runs (the interpreter
/// is exiting), the outcome is dropped, which releases what it holds.
pub(crate) fn spawn<T, F, C>(acquire: F, done: Py<PyAny>, into_py: C) -> AsyncOp
where
    T: Send + 'static,
    F: Future<Output = zklock::Result<T>> + Send + 'static,
    C: for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let done: Callback = callbacks::callback(done);
    let kept = done.clone();
    let running: Running<zklock::Result<T>> = Arc::new(Mutex::new(Some(Box::pin(acquire))));
    let polled = running.clone();
    let task = runtime::handle().spawn(async move {
        let result = std::future::poll_fn(|cx| match polled.lock().as_mut() {
            Some(acquire) => acquire.as_mut().poll(cx).map(Some),
            None => Poll::Ready(None),
        })
        .await;
        // Not awaited: once acquired, `done` must learn it even if this task is aborted.
        if let Some(result) = result {
            callbacks::call_soon(done, move |py| match result {
                Ok(value) => (true, into_py(py, value)?).into_pyobject(py),
                Err(err) => (false, to_py(py, &err).into_value(py)).into_pyobject(py),
            });
        }
    });
    let abort = task.abort_handle();
    AsyncOp {
        done: kept,
        claim: None,
        cancel: ForkSafe::new(Box::new(move || {
            // Taken out before dropped: dropping runs core's clean-up, outside the mutex.
            let acquisition = running.lock().take();
            drop(acquisition);
            abort.abort();
        })),
    }
}

/// As [`spawn`], for what must run to its end whatever becomes of its caller (a release): no
/// [`AsyncOp`] is made, so nothing cancels it when collected.
pub(crate) fn spawn_to_end<T, F, C>(work: F, done: Py<PyAny>, into_py: C)
where
    T: Send + 'static,
    F: Future<Output = zklock::Result<T>> + Send + 'static,
    C: for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let done: Callback = callbacks::callback(done);
    runtime::handle().spawn(async move {
        let result = work.await;
        callbacks::call_soon(done, move |py| match result {
            Ok(value) => (true, into_py(py, value)?).into_pyobject(py),
            Err(err) => (false, to_py(py, &err).into_value(py)).into_pyobject(py),
        });
    });
}
