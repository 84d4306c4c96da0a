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
    /// The completion callable, for the garbage collector.
    done: Callback,
}

#[pymethods]
impl AsyncOp {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.done.traverse(&visit)
    }

    fn __clear__(&self) {
        Python::attach(|py| self.done.clear(py));
    }

    /// Drops the acquisition if it has not finished, here and now: core removes what it made
    /// (in the background). In a forked child it does nothing: the task is the parent's.
    fn cancel(&self, py: Python<'_>) {
        if let Ok(cancel) = self.cancel.get(py, "this acquisition") {
            cancel();
        }
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
        cancel: ForkSafe::new(Box::new(move || {
            // Taken out before dropped: dropping runs core's clean-up, outside the mutex.
            let acquisition = running.lock().take();
            drop(acquisition);
            abort.abort();
        })),
    }
}
