//! The one background tokio runtime of the process, owned by the native module, and the helpers
//! that run core futures from Python: blocking (GIL released, interruptible) and in the background.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};

static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());
static AT_FORK: AtomicBool = AtomicBool::new(false);

/// Counts forks (in the child): objects made before a fork belong to the parent's runtime and
/// sessions, and refuse to work, or even to drop their Rust side, in the child (see [`ForkSafe`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Set at interpreter exit (by `_at_exit`): from then on no thread returns into Python from a
/// native frame of ours but the one running the exit hooks (see [`detach`]).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Threads between [`detach`]'s check of [`EXITING`] and holding the GIL again.
static ENTERING: AtomicUsize = AtomicUsize::new(0);

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
    crate::callbacks::forget_after_fork();
    // Threads of the parent's that were entering do not exist here.
    ENTERING.store(0, Ordering::SeqCst);
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

/// Marks the interpreter as exiting, on the thread that runs the exit hooks, and waits (at most
/// `bound`, with the GIL released) for the threads already past [`detach`]'s check to hold the
/// GIL again. From then on any other thread that would return into Python from one of our native
/// frames parks there for good: once the interpreter finalizes, CPython ends a thread that waits
/// for the GIL with `pthread_exit`, and that unwinding through our Rust frames crashed the
/// process. Threads inside Python code then are only in CPython's frames (a blocking call of
/// ours either returned, or has not yet let go of its thread).
pub(crate) fn set_exiting(py: Python<'_>, bound: Duration) {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    EXITING.store(true, Ordering::SeqCst);
    detach(py, || {
        let deadline = std::time::Instant::now() + bound;
        while ENTERING.load(Ordering::SeqCst) != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    });
}

/// The thread running the exit hooks: later hooks may still use zklock there.
static EXIT_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// `py.detach(f)`, for every native call that lets go of the GIL: unless the interpreter is
/// exiting, when only the exit hooks' thread may take the GIL back here; another thread (a daemon
/// thread still blocked in a zklock call at exit) parks for good instead, and the process ends
/// around it. The check and the count of threads past it pair with [`set_exiting`]'s flag and
/// wait (sequentially consistent): a thread either sees the flag or is waited for.
pub(crate) fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    let output = py.detach(|| {
        let output = f();
        ENTERING.fetch_add(1, Ordering::SeqCst);
        if EXITING.load(Ordering::SeqCst) && EXIT_THREAD.get() != Some(&std::thread::current().id()) {
            ENTERING.fetch_sub(1, Ordering::SeqCst);
            std::mem::forget(output);
            loop {
                std::thread::park();
            }
        }
        output
    });
    ENTERING.fetch_sub(1, Ordering::SeqCst);
    output
}

/// Runs `future` to completion with the GIL released, without interruption: for calls that must
/// not be cut short, such as a release (dropping it could leave the node behind until the session
/// ends).
pub(crate) fn block_on_uninterrupted<F>(py: Python<'_>, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    detach(py, || handle().block_on(future))
}

/// Runs `future` to completion for a blocking Python call.
///
/// The future is driven on this thread with the GIL released, in short slices between which
/// pending signals are handled: if a handler raises (KeyboardInterrupt), the future is dropped,
/// which cancels it (core removes an acquisition attempt's node when its future is dropped).
/// Calls that never wait (a re-entry, an inner release) do not come here: core answers them
/// synchronously (`Lock::begin_acquire`, `Lock::release_nested`), with the GIL held.
///
/// Only the main thread receives signals: any other thread waits in one piece, never taking the
/// GIL back until the future is over (200 waiting threads that each woke up every 50 ms cost a
/// tenth of a core, and slowed a CPU-bound main thread by a third).
pub(crate) fn block_on<F>(py: Python<'_>, future: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let mut future = pin!(future);
    let handle = handle();
    if !receives_signals(py) {
        return Ok(detach(py, || handle.block_on(future)));
    }
    loop {
        // The timer is made inside block_on: it needs the runtime's context.
        let slice = detach(py, || {
            handle.block_on(async { tokio::time::timeout(SIGNAL_CHECK_INTERVAL, future.as_mut()).await })
        });
        match slice {
            Ok(output) => return Ok(output),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}

thread_local! {
    /// Whether this thread is the main thread (the one Python runs signal handlers on), and the
    /// fork generation that was true in: a forked child's main thread is the one that forked.
    static MAIN_THREAD: std::cell::Cell<Option<(u64, bool)>> = const { std::cell::Cell::new(None) };
}

/// Whether Python delivers signals to the calling thread: only the main thread (of the main
/// interpreter, the only one zklock runs in) has its handlers run and can see KeyboardInterrupt.
fn receives_signals(py: Python<'_>) -> bool {
    let generation = GENERATION.load(Ordering::Acquire);
    if let Some((known, main)) = MAIN_THREAD.with(std::cell::Cell::get) {
        if known == generation {
            return main;
        }
    }
    let main = py
        .import("threading")
        .and_then(|threading| Ok(threading.call_method0("current_thread")?.is(&threading.call_method0("main_thread")?)))
        // Not known: look for signals, as before.
        .unwrap_or(true);
    MAIN_THREAD.with(|cell| cell.set(Some((generation, main))));
    main
}

/// Starts `future` here and now, on the calling thread, and lets the runtime finish it: for a
/// release whose first step (core counts the level down, and the hold is gone from this process)
/// must be over when the call returns, so that no view says held once a caller was told it was
/// not, while the delete goes on in the background.
pub(crate) fn spawn_begun<F>(future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let handle = handle();
    let mut future = Box::pin(future);
    let _runtime = handle.enter();
    let waker = futures::task::noop_waker();
    if future.as_mut().poll(&mut std::task::Context::from_waker(&waker)).is_pending() {
        // Polled again there with the runtime's waker.
        handle.spawn(future);
    }
}
