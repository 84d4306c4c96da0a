//! Owners: by default the calling thread; `_as` functions take an explicit id.
//!
//! The two kinds cannot collide because they live in disjoint ranges: explicit ids are below
//! 2^63, thread owners are the core's `Owner::unique()` ids (above 2^63 and never reused, unlike
//! pthread_t values). A thread owner id obtained from `zkl_thread_owner` may be
//! passed to `_as` functions too, to release from another thread what a thread acquired.

use super::error::Failure;
use crate::Owner;

const THREAD_BIT: u64 = 1 << 63;

thread_local! {
    /// The calling thread's owner, made by the core (ids from 2^63 up, never reused).
    static THREAD_OWNER: Owner = Owner::unique_labelled(thread_label);
}

/// "thread:<name>#<n>", with the thread's name as pthread knows it (C threads have one too).
fn thread_label(id: u64) -> String {
    let n = id & !THREAD_BIT;
    let mut name = [0 as libc::c_char; 64];
    // SAFETY: the buffer is writable and its length is passed.
    let named = unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr(), name.len()) } == 0;
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let name = if named { unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy() } else { "".into() };
    if name.is_empty() {
        format!("thread:#{n}")
    } else {
        format!("thread:{name}#{n}")
    }
}

/// The calling thread as an owner.
pub(crate) fn thread_owner() -> Result<Owner, Failure> {
    THREAD_OWNER
        .try_with(Owner::clone)
        .map_err(|_| Failure::invalid("called while the thread is exiting: it has no owner id any more"))
}

/// An owner id passed by the caller.
pub(crate) fn explicit_owner(id: u64) -> Result<Owner, Failure> {
    if id & THREAD_BIT == 0 {
        return Ok(Owner::with_label(id, format!("owner:{id}")));
    }
    if !Owner::is_unique_id(id) {
        return Err(Failure::invalid(format!(
            "owner {id:#x} is neither an explicit id (below 2^63) nor a thread owner from zkl_thread_owner()"
        )));
    }
    // Named by its number, which ends the label of the thread's own calls ("thread:<name>#<n>"):
    // no registry of names, which a fork() could catch locked.
    Ok(Owner::with_label(id, format!("thread:#{}", id & !THREAD_BIT)))
}

/// The calling thread's owner id: what zkl_lock_acquire and zkl_lock_release use. It is at least
/// 2^63 (explicit owner ids are below), unique to this thread for the life of the process, and
/// may be passed to the `_as` functions from another thread, e.g. to release there what this
/// thread acquired. Returns 0 only if called while the thread is exiting.
///
/// Concurrency: any thread, any time.
#[no_mangle]
pub extern "C" fn zkl_thread_owner() -> u64 {
    ffi_value!(0, { thread_owner().map_or(0, |owner| owner.id()) })
}
