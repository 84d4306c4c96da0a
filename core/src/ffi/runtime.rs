//! The one background tokio runtime of the process: started on first use, it owns the sessions
//! and watches and runs the callbacks; every blocking entry point waits on it with `block_on`.

use std::future::Future;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::runtime::Runtime;

use super::error::{zkl_result, Failure};

/// Never freed: handles and background tasks live as long as the process, and dropping a
/// runtime from a C atexit handler could block on its threads.
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
static STARTING: Mutex<()> = Mutex::new(());
/// Bumped in a forked child: handles made before the fork belong to the parent's runtime, whose
/// threads the child does not have, and to the parent's sessions.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
/// The parent's runtime in such a child, kept reachable (leak checkers then see it as held, not
/// lost); never used.
static ABANDONED: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

pub(crate) fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Acquire)
}

/// The runtime, started on first use.
pub(crate) fn runtime() -> Result<&'static Runtime, Failure> {
    let runtime = RUNTIME.load(Ordering::Acquire);
    if !runtime.is_null() {
        // SAFETY: published once by `start` and never freed.
        return Ok(unsafe { &*runtime });
    }
    start()
}

#[cold]
fn start() -> Result<&'static Runtime, Failure> {
    let _starting = STARTING.lock();
    let runtime = RUNTIME.load(Ordering::Acquire);
    if !runtime.is_null() {
        // SAFETY: as in `runtime`.
        return Ok(unsafe { &*runtime });
    }
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registers a handler that only does atomic stores (async-signal-safe).
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
    static THREAD: AtomicUsize = AtomicUsize::new(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // Sessions and watches are light; two workers keep callbacks from starving the sessions.
        .worker_threads(2)
        .thread_name_fn(|| format!("zklock-rt-{}", THREAD.fetch_add(1, Ordering::Relaxed)))
        .enable_all()
        .build()
        .map_err(|err| Failure::new(zkl_result::ZKL_PANIC, format!("could not start the zklock runtime: {err}")))?;
    let runtime = Box::into_raw(Box::new(runtime));
    RUNTIME.store(runtime, Ordering::Release);
    // SAFETY: just leaked; never freed.
    Ok(unsafe { &*runtime })
}

/// In a forked child only the forking thread exists, so the parent's runtime cannot run: it is
/// abandoned (leaked: dropping it would wait for threads that do not exist), and the child starts
/// a fresh one on first use. Everything the client needs (sockets, timers) lives on that runtime,
/// so new clients in the child work; handles made before the fork are refused (see `handles`).
extern "C" fn forked_child() {
    let parents = RUNTIME.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !parents.is_null() {
        ABANDONED.store(parents, Ordering::Release);
    }
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Runs `future` to completion on the runtime, blocking the calling thread.
///
/// Refused on a runtime thread (inside a zklock callback, or on another tokio runtime): waiting
/// there could deadlock the very threads that must make progress, and tokio would panic.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, Failure> {
    check_may_block()?;
    let runtime = runtime()?;
    let mut future = std::pin::pin!(future);
    // A reentrant acquire or inner release is done at its first poll, with no I/O: polling once
    // here, inside the runtime's context, spares it the cost of parking in `block_on` (several
    // times the work itself). A pending future goes on in `block_on`, which polls it again at
    // once with a real waker, so nothing is missed.
    let first = {
        let _context = runtime.enter();
        future.as_mut().poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
    };
    match first {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Ok(runtime.block_on(future)),
    }
}

/// Fails on a thread where `block_on` is refused.
pub(crate) fn check_may_block() -> Result<(), Failure> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Failure::invalid(
            "blocking zkl_ functions cannot be called from a zklock callback (or any tokio runtime thread); \
             hand the work to another thread",
        ));
    }
    Ok(())
}
