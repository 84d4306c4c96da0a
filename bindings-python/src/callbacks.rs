//! Calls into Python from the runtime: user callbacks (`on_lost`, `on_state_change`) and the
//! completions of asyncio calls.
//!
//! No thread of zklock's ever enters the interpreter. A thread that is inside it, or waiting for
//! it, when the interpreter finalizes is ended there by CPython (`pthread_exit`), unwinding
//! through whatever native frames it has: for a runtime or callback thread of ours that unwinding
//! crossed Rust frames and crashed the process at exit. So the work is queued here instead, GIL
//! free, and run by the package's callback threads: Python threads (`zklock._callback_worker`)
//! that wait for it in `os.read` on a pipe this module writes a byte to, take it with
//! `_take_callback` (which never releases the GIL) and call the callable from Python. A callback
//! thread the interpreter ends at exit is inside CPython's frames only, as any daemon thread.
//! They are long-lived Python threads with their own thread states, so no thread state is ever
//! made for a foreign thread (which, racing a `fork()`, could deadlock the child).
//!
//! User callbacks keep their order: the client's dispatcher thread (core's) hands each one over
//! and waits until it has run, so a client's callbacks run one at a time, in order, and a slow
//! one delays only its own client's. An exception raised by a callback goes to
//! `sys.unraisablehook`: it is reported, never propagated into the runtime.

use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::{mpsc, Arc};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};
use zklock::binding::ClientBinding;

/// A Python callable shared with runtime tasks (an `Arc`, so that sharing needs no GIL).
pub(crate) type Callback = Arc<Callable>;

/// A Python callable that runtime threads may hold and let go; cleared (by the garbage
/// collector's `__clear__`, or an unregistration) it is never called again. Let go off the
/// interpreter, the reference is handed to a callback thread to drop.
pub(crate) struct Callable(Mutex<Option<Py<PyAny>>>);

/// A callable for runtime tasks to share.
pub(crate) fn callback(callable: Py<PyAny>) -> Callback {
    Arc::new(Callable(Mutex::new(Some(callable))))
}

impl Callable {
    /// The callable, unless cleared.
    fn get(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.0.lock().as_ref().map(|callable| callable.clone_ref(py))
    }

    /// For the `__traverse__` of the object that registered it.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        // try_lock: the garbage collector must never wait (the lock is only held for a moment,
        // by a thread that does not wait for the GIL meanwhile).
        if let Some(callable) = self.0.try_lock() {
            if let Some(callable) = callable.as_ref() {
                visit.call(callable)?;
            }
        }
        Ok(())
    }

    /// Lets go of the callable (with the GIL held): it is never called again.
    pub(crate) fn clear(&self, _py: Python<'_>) {
        let callable = self.0.lock().take();
        drop(callable);
    }
}

impl Drop for Callable {
    fn drop(&mut self) {
        if let Some(callable) = self.0.get_mut().take() {
            drop_anywhere(callable);
        }
    }
}

extern "C" {
    // CPython's (not in the limited API's headers, but in every CPython's ABI since 3.4).
    fn PyGILState_Check() -> std::os::raw::c_int;
}

/// Whether this thread holds the GIL.
fn attached() -> bool {
    // SAFETY: only reads the calling thread's state.
    unsafe { PyGILState_Check() == 1 }
}

/// Drops `object` here if this thread holds the GIL, else on a callback thread.
pub(crate) fn drop_anywhere(object: Py<PyAny>) {
    if attached() {
        drop(object);
    } else {
        push(Job::Drop(object));
    }
}

/// The arguments of a call, made on the callback thread with the GIL.
type Args = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send>;

enum Job {
    /// `callback(*args)`; `finished` is dropped once it has run (or will never run).
    Call { callback: Callback, args: Args, finished: Option<mpsc::Sender<()>> },
    /// A reference let go off the interpreter.
    Drop(Py<PyAny>),
}

struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    /// The write end of the package's wake-up pipe (non-blocking), or -1 before it is set.
    wake: AtomicI32,
}

/// The queue of this process; a forked child forgets its parent's (see [`forget_after_fork`]).
static QUEUE: AtomicPtr<Queue> = AtomicPtr::new(ptr::null_mut());

fn queue() -> &'static Queue {
    let current = QUEUE.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a queue, once published, is leaked and never freed.
        return unsafe { &*current };
    }
    let fresh = Box::into_raw(Box::new(Queue { jobs: Mutex::new(VecDeque::new()), wake: AtomicI32::new(-1) }));
    match QUEUE.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: published, so leaked and never freed.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` came from Box::into_raw above and was never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: published, so leaked and never freed.
            unsafe { &*winner }
        }
    }
}

/// In a forked child: the parent's queue may be locked by a thread that does not exist here, and
/// its jobs are the parent's. Leaked, never touched; the child's package sets up a fresh one.
pub(crate) fn forget_after_fork() {
    QUEUE.store(ptr::null_mut(), Ordering::Release);
}

fn push(job: Job) {
    let queue = queue();
    queue.jobs.lock().push_back(job);
    wake(queue);
}

/// One byte for a callback thread to wake up to. The pipe is non-blocking: when it is full, the
/// threads have plenty to wake up to already.
fn wake(queue: &Queue) {
    let fd = queue.wake.load(Ordering::Acquire);
    if fd >= 0 {
        // SAFETY: writes one byte from a valid buffer; a closed or full pipe only fails.
        let _ = unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    }
}

/// `_native._callback_pipe(fd)`: the write end (non-blocking) of the pipe the package's
/// callback threads read; woken at once for jobs queued before.
#[pyfunction]
pub(crate) fn _callback_pipe(fd: i32) {
    let queue = queue();
    queue.wake.store(fd, Ordering::Release);
    if !queue.jobs.lock().is_empty() {
        wake(queue);
    }
}

/// A user callback's turn is over once this is dropped: the client's next callback may run.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct Finished(#[allow(dead_code)] Option<mpsc::Sender<()>>);

/// `_native._take_callback()`: the next job, for a callback thread, or None if there is none:
/// `(callable, args, finished)` to call as `callable(*args)` and then let go of `finished`, or
/// `(None, object, None)` for a reference to let go of. Never releases the GIL.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn _take_callback(py: Python<'_>) -> Option<(Option<Py<PyAny>>, Py<PyAny>, Option<Finished>)> {
    loop {
        let job = queue().jobs.lock().pop_front()?;
        match job {
            Job::Drop(object) => return Some((None, object, None)),
            Job::Call { callback, args, finished } => {
                // Cleared (unregistered, or collected): dropped, and the next one.
                let Some(callable) = callback.get(py) else { continue };
                match args(py) {
                    Ok(args) => return Some((Some(callable), args.into_any().unbind(), Some(Finished(finished)))),
                    Err(err) => err.write_unraisable(py, Some(callable.bind(py))),
                }
            }
        }
    }
}

/// `_native._unraisable(exc, callable)`: reports an exception a callback raised.
#[pyfunction]
pub(crate) fn _unraisable(py: Python<'_>, exc: Bound<'_, PyAny>, callable: Bound<'_, PyAny>) {
    PyErr::from_value(exc).write_unraisable(py, Some(&callable));
}

/// Runs a user callback (`on_lost`, `on_state_change`) on `client`'s callback thread, after the
/// ones dispatched before it: in order, and never on the threads that keep sessions alive.
pub(crate) fn dispatch<F>(client: &zklock::Client, callback: Callback, args: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send + 'static,
{
    client.dispatch_callback(move || run_now(callback, args));
}

/// Calls `callback(*args(py))` on a callback thread, soon: for the completions of asyncio calls,
/// which only hand their outcome to the event loop.
pub(crate) fn call_soon<F>(callback: Callback, args: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send + 'static,
{
    push(Job::Call { callback, args: Box::new(args), finished: None });
}

/// As [`call_soon`], from a client's dispatcher thread (never a runtime worker): returns once the
/// call has run, so that the client's next callback runs after it.
pub(crate) fn run_now<F>(callback: Callback, args: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send + 'static,
{
    let (finished, done) = mpsc::channel();
    push(Job::Call { callback, args: Box::new(args), finished: Some(finished) });
    // Disconnected once it ran (or was dropped). At exit it may never run: this thread waits
    // for good, off the interpreter, and the process ends around it.
    let _ = done.recv();
}
