//! The one background tokio runtime of the process, owned by the native module, and the helpers
//! that run core futures from Python: blocking (GIL released, interruptible) and in the background.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};

static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());
static AT_FORK: AtomicBool = AtomicBool::new(false);

/// Counts forks (in the child): objects made before a fork belong to the parent's runtime and
/// sessions, and refuse to work, or even to drop their Rust side, in the child (see [`ForkSafe`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Set at interpreter exit: from then on no runtime thread enters Python again.
static EXITING: AtomicBool = AtomicBool::new(false);

/// How long a blocking call waits with the GIL released before it looks for signals (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// The runtime, started on first use. It is never dropped: it lives as long as the process, so
/// interpreter exit never waits for (or races with) its shutdown.
pub(crate) fn handle() -> &'static Handle {
    let current = RUNTIME.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a runtime, once published, is leaked and never freed.
        return unsafe { (*current).handle() };
    }
    start()
}

thread_local! {
    static RUNTIME_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this is one of the runtime's threads (workers and blocking pool), which are never
/// attached to the interpreter but inside `Python::try_attach`.
pub(crate) fn on_runtime_thread() -> bool {
    RUNTIME_THREAD.with(std::cell::Cell::get)
}

#[cold]
fn start() -> &'static Handle {
    // A flag, not a `Once`: a `Once` caught mid-call by fork() would block the child forever.
    if !AT_FORK.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a handler that only touches atomics, which is async-signal-safe.
        unsafe { libc::pthread_atfork(None, None, Some(forget_after_fork)) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("zklock-runtime")
        .on_thread_start(|| RUNTIME_THREAD.with(|ours| ours.set(true)))
        .build()
        .expect("the zklock runtime starts");
    let fresh = Box::into_raw(Box::new(runtime));
    match RUNTIME.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: published, so leaked and never freed.
        Ok(_) => unsafe { (*fresh).handle() },
        Err(winner) => {
            // Another thread started one first: this one was never used, so it can go.
            // SAFETY: `fresh` came from Box::into_raw above and was never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: published, so leaked and never freed.
            unsafe { (*winner).handle() }
        }
    }
}

/// In a forked child only the forking thread exists: the parent's runtime has no threads and its
/// locks may be held by threads that are gone. Forget it (leaking it, never touching it) so the
/// child starts a fresh one on first use. All of a client's I/O and timers run on our runtime, so
/// new clients in the child work; only objects inherited from the parent do not.
extern "C" fn forget_after_fork() {
    RUNTIME.store(ptr::null_mut(), Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// A value tied to the process (and runtime) that made it. In a forked child it is unusable (its
/// session and runtime are the parent's), and it is leaked rather than dropped: dropping could
/// touch the parent's runtime, or locks held at the fork by threads that do not exist in the child.
pub(crate) struct ForkSafe<T> {
    value: ManuallyDrop<T>,
    generation: u64,
}

impl<T> ForkSafe<T> {
    pub(crate) fn new(value: T) -> Self {
        ForkSafe { value: ManuallyDrop::new(value), generation: GENERATION.load(Ordering::Acquire) }
    }

    /// The value, or `ClosedError` in a child process forked after it was made.
    pub(crate) fn get(&self, py: Python<'_>, subject: &str) -> PyResult<&T> {
        self.get_here().ok_or_else(|| crate::error::forked(py, subject))
    }

    /// The value, or None in a child process forked after it was made.
    pub(crate) fn get_here(&self) -> Option<&T> {
        (self.generation == GENERATION.load(Ordering::Acquire)).then_some(&*self.value)
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if self.generation == GENERATION.load(Ordering::Acquire) {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// Whether runtime threads may still call into Python (false once the interpreter is exiting).
pub(crate) fn python_alive() -> bool {
    !EXITING.load(Ordering::Acquire)
}

/// Marks the interpreter as exiting; called on the thread that runs the exit hooks.
pub(crate) fn set_exiting() {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    EXITING.store(true, Ordering::Release);
}

/// The thread running the exit hooks: later hooks may still use zklock there.
static EXIT_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Runs `future` to completion with the GIL released, without interruption: for calls that must
/// not be cut short, such as a release (dropping it could leave the node behind until the session
/// ends).
pub(crate) fn block_on_uninterrupted<F>(py: Python<'_>, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    py.detach(|| unless_exiting(handle().block_on(future)))
}

/// Passes `output` back to the Python thread that waited for it, unless the interpreter is
/// exiting: then the thread (a daemon thread still blocked at exit, whose call failed because the
/// exit hook closed its client) parks for good instead of raising into a finalizing interpreter,
/// and the process ends around it.
fn unless_exiting<T>(output: T) -> T {
    while !python_alive() && EXIT_THREAD.get() != Some(&std::thread::current().id()) {
        std::thread::park();
    }
    output
}

/// Runs `future` to completion for a blocking Python call.
///
/// The future is driven on this thread with the GIL released, in short slices between which
/// pending signals are handled: if a handler raises (KeyboardInterrupt), the future is dropped,
/// which cancels it (core removes an acquisition attempt's node when its future is dropped).
/// Calls that never wait (a re-entry, an inner release) do not come here: core answers them
/// synchronously (`Lock::begin_acquire`, `Lock::release_nested`), with the GIL held.
pub(crate) fn block_on<F>(py: Python<'_>, future: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let mut future = pin!(future);
    let handle = handle();
    loop {
        // The timer is made inside block_on: it needs the runtime's context.
        let slice = py.detach(|| {
            let slice = handle.block_on(async { tokio::time::timeout(SIGNAL_CHECK_INTERVAL, future.as_mut()).await });
            unless_exiting(slice)
        });
        match slice {
            Ok(output) => return Ok(output),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}
