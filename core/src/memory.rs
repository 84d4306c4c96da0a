//! Gives the memory a burst of acquisitions leaves behind back to the system.
//!
//! A burst of acquisitions allocates its waiters' state in the order they queue, and frees it
//! in the same order as the queue drains. glibc's malloc returns only the top of a heap to the
//! system, and freed waiters lie below those still queued: a process that queued 10,000 waiters
//! kept their pages, resident and unused, through every handoff that followed (and the pages
//! its creates' requests and replies took, once they were all queued). So `malloc_trim` returns
//! the free pages of every arena at two moments:
//! - each time the acquisitions in progress (process-wide) fall [`GIVE_BACK_AFTER`] below their
//!   peak since the last time (a queue drained that much);
//! - when a client's window of creates in flight empties after a burst filled it (the burst is
//!   queued: see `connection::CreateSlot`).
//!
//! Never in steady use, which neither fills the window nor falls that far. It walks every arena,
//! so it runs on the client's callback thread: never on a thread that keeps sessions alive, nor on
//! the caller's.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::dispatch::CallbackDispatcher;

/// Acquisitions ended below the peak before memory is given back: a burst's worth (the size of
/// the window of creates in flight, `connection::CREATE_WINDOW`, which checks that it is), so
/// that a steady load never trims.
pub(crate) const GIVE_BACK_AFTER: usize = 1024;

static IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// One acquisition in progress, from its start until it ends (however: held, timed out,
/// failed, or dropped).
pub(crate) struct InProgress<'a> {
    /// The client's callback thread, where the memory is given back.
    callbacks: &'a CallbackDispatcher,
}

impl<'a> InProgress<'a> {
    pub(crate) fn new(callbacks: &'a CallbackDispatcher) -> InProgress<'a> {
        let now = IN_PROGRESS.fetch_add(1, Ordering::Relaxed) + 1;
        PEAK.fetch_max(now, Ordering::Relaxed);
        InProgress { callbacks }
    }
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        let now = IN_PROGRESS.fetch_sub(1, Ordering::Relaxed) - 1;
        let peak = PEAK.load(Ordering::Relaxed);
        // One of the acquisitions that end together wins the peak, and gives back.
        if peak >= now + GIVE_BACK_AFTER
            && PEAK.compare_exchange(peak, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.callbacks.dispatch(give_back);
        }
    }
}

static GIVEN_BACK: AtomicUsize = AtomicUsize::new(0);

/// How many times memory was given back (or would have been, with an allocator that needs no
/// help): for tests.
#[doc(hidden)]
pub fn times_given_back() -> usize {
    GIVEN_BACK.load(Ordering::Relaxed)
}

pub(crate) fn give_back() {
    trim();
    GIVEN_BACK.fetch_add(1, Ordering::Relaxed);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: takes no pointer; glibc locks each arena while it walks it.
    unsafe { libc::malloc_trim(0) };
}

/// Other allocators (musl's, macOS's) return freed pages themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
