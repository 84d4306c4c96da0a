//! The one background tokio runtime of the process: started on first use, it owns the sessions
//! and watches (user callbacks run on each client's callback thread instead); every blocking
//! entry point waits on it with `block_on`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use tokio::runtime::Runtime;

use super::error::{zkl_result, Failure};

/// Never freed: handles and background tasks live as long as the process, and dropping a
/// runtime from a C atexit handler could block on its threads. Published with a compare-exchange
/// rather than under a lock: a lock held by another thread at fork() would stay held in the
/// child, by a thread the child does not have.
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
/// The parent's runtime in a forked child, kept reachable (leak checkers then see it as held, not
/// lost); never used.
static ABANDONED: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

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
    static ATFORK: AtomicBool = AtomicBool::new(false);
    if !ATFORK.swap(true, Ordering::AcqRel) {
        // SAFETY: registers a handler that only swaps pointers and counters, allocating nothing.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    }
    static THREAD: AtomicUsize = AtomicUsize::new(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // Sessions and watches are light; user callbacks run elsewhere (one thread per client).
        .worker_threads(2)
        .thread_name_fn(|| format!("zklock-rt-{}", THREAD.fetch_add(1, Ordering::Relaxed)))
        .enable_all()
        .build()
        .map_err(|err| Failure::new(zkl_result::ZKL_PANIC, format!("could not start the zklock runtime: {err}")))?;
    let fresh = Box::into_raw(Box::new(runtime));
    match RUNTIME.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: published, so leaked and never freed.
        Ok(_) => Ok(unsafe { &*fresh }),
        Err(winner) => {
            // Another thread started one first; this one never ran anything.
            // SAFETY: `fresh` came from Box::into_raw above and was never published.
            unsafe { Box::from_raw(fresh) }.shutdown_background();
            // SAFETY: published, so never freed.
            Ok(unsafe { &*winner })
        }
    }
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
    super::handles::forget_after_fork();
}

/// Runs `future` to completion on the runtime, blocking the calling thread.
///
/// Refused on a runtime thread (inside a zklock callback, or on another tokio runtime): waiting
/// there could deadlock the very threads that must make progress, and tokio would panic.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, Failure> {
    check_may_block()?;
    Ok(runtime()?.block_on(future))
}

thread_local! {
    static IN_CALLBACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a user callback, during which blocking zkl_ calls are refused: one that waited on the
/// client (a close, say) could wait for the very callback thread it runs on.
pub(crate) fn in_callback<T>(callback: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_CALLBACK.with(|flag| flag.set(false));
        }
    }
    IN_CALLBACK.with(|flag| flag.set(true));
    let _reset = Reset;
    callback()
}

/// Fails on a thread where `block_on` is refused.
pub(crate) fn check_may_block() -> Result<(), Failure> {
    if tokio::runtime::Handle::try_current().is_ok() || IN_CALLBACK.with(|flag| flag.get()) {
        return Err(Failure::invalid(
            "blocking zkl_ functions cannot be called from a zklock callback (or any tokio runtime thread); \
             hand the work to another thread",
        ));
    }
    Ok(())
}
