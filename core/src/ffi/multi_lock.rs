//! `zkl_multi_lock` and `zkl_multi_guard`: the core's multi-lock over C lock and semaphore
//! handles, and what one acquisition of it holds.

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::callback::CallbackSlot;
use super::convert::timeout;
use super::error::{zkl_result, Failure};
use super::lock::{zkl_hold_state, zkl_lock, zkl_lost_reason};
use super::owner::{explicit_owner, thread_owner};
use super::semaphore::zkl_semaphore;
use super::{handles, runtime};
use crate::binding::{ClientBinding, MultiGuardBinding};
use crate::{Hold, Member, MemberKind, MultiGuard, MultiLock, Owner};

/// Several locks taken together, all or nothing (Curator's InterProcessMultiLock, without its
/// deadlock): mutexes, sides of read/write locks and semaphore leases, from zkl_multi_lock_new,
/// freed with zkl_multi_lock_free. Opaque. Safe to use from any number of threads at once.
pub struct zkl_multi_lock {
    _private: [u8; 0],
}

impl handles::Handle for zkl_multi_lock {
    type Object = MultiLockHandle;
    const NAME: &'static str = "zkl_multi_lock";
    const MADE_BY: &'static str = "zkl_multi_lock_new";
}

/// Every member of a zkl_multi_lock, held by one acquisition: from zkl_multi_lock_acquire,
/// released with zkl_multi_guard_release (from any thread), freed with zkl_multi_guard_free.
/// Opaque.
pub struct zkl_multi_guard {
    _private: [u8; 0],
}

impl handles::Handle for zkl_multi_guard {
    type Object = MultiGuardHandle;
    const NAME: &'static str = "zkl_multi_guard";
    const MADE_BY: &'static str = "zkl_multi_lock_acquire";
}

/// One member of a multi-lock: set lock, or semaphore and leases.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zkl_multi_member {
    /// A mutex (zkl_lock_new) or one side of a read/write lock (zkl_rwlock_new), taken for the
    /// multi-lock's owner (re-entered if that owner holds it); NULL for a semaphore member.
    pub lock: *mut zkl_lock,
    /// A semaphore, of which `leases` leases are taken; NULL for a lock member.
    pub semaphore: *mut zkl_semaphore,
    /// How many leases of semaphore, at least 1; 0 for a lock member.
    pub leases: i32,
}

/// What a member of a multi-lock takes (see zkl_multi_lock_member).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zkl_member_kind {
    /// A mutex.
    ZKL_MEMBER_MUTEX = 1,
    /// The read side of a read/write lock.
    ZKL_MEMBER_READ = 2,
    /// The write side of a read/write lock.
    ZKL_MEMBER_WRITE = 3,
    /// Leases of a semaphore.
    ZKL_MEMBER_LEASES = 4,
}

impl From<MemberKind> for zkl_member_kind {
    fn from(kind: MemberKind) -> Self {
        match kind {
            MemberKind::Mutex => zkl_member_kind::ZKL_MEMBER_MUTEX,
            MemberKind::Read => zkl_member_kind::ZKL_MEMBER_READ,
            MemberKind::Write => zkl_member_kind::ZKL_MEMBER_WRITE,
            MemberKind::Leases => zkl_member_kind::ZKL_MEMBER_LEASES,
        }
    }
}

/// Called when a held multi-lock is lost, once per guard: with the guard, the index (in
/// canonical order) of the first member found lost, and why; on a zklock background thread (see
/// zkl_multi_lock_set_lost_callback).
pub type zkl_multi_lost_callback = Option<
    unsafe extern "C" fn(userdata: *mut c_void, guard: *mut zkl_multi_guard, member: usize, reason: zkl_lost_reason),
>;

type MultiLostCallback = unsafe extern "C" fn(*mut c_void, *mut zkl_multi_guard, usize, zkl_lost_reason);

pub(crate) struct MultiLockHandle {
    multi: MultiLock,
    /// Each member's path, in canonical order, for zkl_multi_lock_member.
    paths: Vec<CString>,
    lost_callback: Arc<CallbackSlot<MultiLostCallback>>,
    /// Set by zkl_multi_lock_free: an acquisition still in progress then gives what it got back.
    freed: AtomicBool,
    /// Cancelled by zkl_multi_lock_cancel and zkl_multi_lock_free (as a zkl_lock's).
    cancel: parking_lot::Mutex<CancellationToken>,
}

impl MultiLockHandle {
    fn cancel_waiting(&self) {
        std::mem::take(&mut *self.cancel.lock()).cancel();
    }
}

pub(crate) struct MultiGuardHandle {
    /// None once released.
    guard: parking_lot::Mutex<Option<MultiGuard>>,
    /// Each member's holds (one for a lock, one per lease), in canonical order.
    holds: Vec<Vec<Hold>>,
}

/// Makes a multi-lock over count members. They are taken in one canonical order, by path (on
/// the server: chroot and path) then kind, whatever order they are given in, so two multi-locks
/// over the same paths, in any processes, never each hold what the other waits for; see
/// zkl_multi_lock_member for that order. Sends nothing to ZooKeeper. The multi-lock takes its
/// members through the given handles: zkl_lock_free of a member lock releases the holds taken
/// through it, the multi-lock's included, so keep the member handles until the multi-lock's
/// guards are released. A semaphore handle may be freed once this returns.
///
/// Ownership: members (count of them) is borrowed for the call. On ZKL_OK, *out receives a new
/// multi-lock that the caller owns and frees with zkl_multi_lock_free; on failure *out is left
/// unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT, before any traffic, for NULL arguments, no member (count 0), a
/// member with both or neither of lock and semaphore, leases below 1 for a semaphore member or
/// not 0 for a lock member, more leases than a fixed max, a freed handle, or two members on one
/// path (the same lock twice, or both sides of one read/write lock).
#[no_mangle]
pub extern "C" fn zkl_multi_lock_new(
    members: *const zkl_multi_member,
    count: usize,
    out: *mut *mut zkl_multi_lock,
) -> zkl_result {
    ffi_result!("zkl_multi_lock_new", {
        non_null!(members, "members");
        non_null!(out, "out");
        if count == 0 {
            return Err(Failure::invalid("count is 0: a multi-lock needs at least one member"));
        }
        // SAFETY: the caller passes count initialized members (checked non-NULL).
        let given = unsafe { std::slice::from_raw_parts(members, count) };
        let mut core_members = Vec::with_capacity(count);
        for (i, member) in given.iter().enumerate() {
            let what = |field: &str| format!("members[{i}].{field}");
            let core = match (member.lock.is_null(), member.semaphore.is_null()) {
                (false, true) => {
                    if member.leases != 0 {
                        return Err(Failure::invalid(format!(
                            "members[{i}].leases is {}: leases are for a semaphore member, and this one is a lock",
                            member.leases
                        )));
                    }
                    Member::Lock(handles::get(member.lock, &what("lock"))?.lock.clone())
                }
                (true, false) => {
                    let semaphore = handles::get(member.semaphore, &what("semaphore"))?;
                    let n = u32::try_from(member.leases).map_err(|_| {
                        Failure::invalid(format!("members[{i}].leases is {}: it must be at least 1", member.leases))
                    })?;
                    Member::leases(&semaphore.semaphore, n)
                }
                (false, false) => {
                    return Err(Failure::invalid(format!(
                        "members[{i}] has both a lock and a semaphore: a member is one or the other"
                    )))
                }
                (true, true) => {
                    return Err(Failure::invalid(format!(
                        "members[{i}] has neither a lock nor a semaphore: set one of them"
                    )))
                }
            };
            core_members.push(core);
        }
        let multi = MultiLock::new(core_members)?;
        let paths =
            multi.members().iter().map(|member| CString::new(member.path()).expect("lock paths have no NUL")).collect();
        let handle = MultiLockHandle {
            multi,
            paths,
            lost_callback: Arc::new(CallbackSlot::new()),
            freed: AtomicBool::new(false),
            cancel: parking_lot::Mutex::new(CancellationToken::new()),
        };
        write_out!(out, handles::new::<zkl_multi_lock>(handle));
        Ok(())
    })
}

/// How many members the multi-lock has, in *out.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed multi-lock.
#[no_mangle]
pub extern "C" fn zkl_multi_lock_member_count(multi: *const zkl_multi_lock, out: *mut usize) -> zkl_result {
    ffi_result!("zkl_multi_lock_member_count", {
        non_null!(multi, "multi");
        non_null!(out, "out");
        write_out!(out, handles::get(multi, "multi")?.paths.len());
        Ok(())
    })
}

/// Member index (from 0) in the order the members are taken, which is the order that
/// zkl_multi_guard_fencing_token, zkl_multi_guard_lost_member and the lost callback number them
/// in: its path in *path and what it takes in *kind (either may be NULL if not wanted).
///
/// Ownership: *path belongs to the multi-lock and stays valid until zkl_multi_lock_free.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed multi-lock, or an index out of range.
#[no_mangle]
pub extern "C" fn zkl_multi_lock_member(
    multi: *const zkl_multi_lock,
    index: usize,
    path: *mut *const c_char,
    kind: *mut zkl_member_kind,
) -> zkl_result {
    ffi_result!("zkl_multi_lock_member", {
        non_null!(multi, "multi");
        let handle = handles::get(multi, "multi")?;
        let Some(member) = handle.multi.members().get(index) else {
            return Err(Failure::invalid(format!(
                "index {index} is out of range: the multi-lock has {} members",
                handle.paths.len()
            )));
        };
        if !path.is_null() {
            write_out!(path, handle.paths[index].as_ptr());
        }
        if !kind.is_null() {
            write_out!(kind, member.kind().into());
        }
        Ok(())
    })
}

fn acquire(
    multi: *mut zkl_multi_lock,
    owner: Result<Owner, Failure>,
    timeout_ms: i64,
    out: *mut *mut zkl_multi_guard,
) -> Result<(), Failure> {
    non_null!(multi, "multi");
    non_null!(out, "out");
    let wait = timeout(timeout_ms)?;
    let handle = handles::get(multi, "multi")?;
    let owner = owner?;
    runtime::check_may_block()?;
    let cancel = handle.cancel.lock().clone();
    let acquired = runtime::block_on(handle.multi.acquire_for(&owner, wait, Some(cancel.clone())))??;
    let guard = match acquired {
        Ok(guard) => guard,
        Err(index) => return Err(not_acquired(&handle, &cancel, &handle.multi.members()[index], timeout_ms)),
    };
    if handle.freed.load(Ordering::Acquire) {
        drop(guard); // released in the background, in reverse order
        return Err(Failure::invalid(
            "multi was freed (zkl_multi_lock_free) while this call waited; what it got was released",
        ));
    }
    let holds: Vec<Vec<Hold>> = guard.holds().into_iter().map(|(_, holds)| holds).collect();
    let loss = guard.first_member_loss();
    let client = match guard.members().next().expect("a multi-lock has members") {
        Member::Lock(lock) => lock.client(),
        Member::Leases(semaphore, _) => semaphore.client(),
    };
    let id = handles::new::<zkl_multi_guard>(MultiGuardHandle { guard: parking_lot::Mutex::new(Some(guard)), holds })
        as usize;
    // Once per guard: the first member lost (core decides what a set's loss is). On the first
    // member's client's callback thread: a member of a client closed first is lost by then.
    let callback = handle.lost_callback.clone();
    client.on_member_lost(loss, move |lost| {
        if !handles::is_live(id) {
            return;
        }
        runtime::in_callback(|| {
            // SAFETY: a C function pointer registered by the caller, with its userdata.
            callback.call(|callback, userdata| unsafe {
                callback(userdata, id as *mut zkl_multi_guard, lost.index, lost.reason.into())
            })
        })
    });
    write_out!(out, id as *mut zkl_multi_guard);
    Ok(())
}

/// Acquires every member for the calling thread, all or nothing, waiting at most timeout_ms for
/// all of them (one deadline): -1 waits as long as it takes (through outages and new sessions,
/// as zkl_lock_acquire's -1), 0 tries each member once (within 2 s for all; ZKL_CONNECTION_LOSS
/// if ZooKeeper could not be reached), a bounded wait returns within 100 ms of its deadline (see
/// zkl_lock_acquire). Each
/// member is taken by its own recipe (its lock's queue, its semaphore's mutex and leases), so it
/// stays fair with everyone else on its path. On a timeout, a cancel or an error, what was taken
/// is released in reverse order and the member being acquired removes its own nodes.
///
/// Ownership: on ZKL_OK, *out receives a new guard that the caller owns: release it with
/// zkl_multi_guard_release and free it with zkl_multi_guard_free (which releases what it still
/// holds); on failure *out is left unchanged.
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT). While one
/// thread waits here, another may cancel the wait (zkl_multi_lock_cancel).
/// Errors: ZKL_TIMEOUT if not every member was obtained in time; ZKL_CANCELLED if
/// zkl_multi_lock_cancel (or zkl_multi_lock_free) ended the wait; ZKL_INVALID_ARGUMENT for NULL
/// arguments, a freed multi-lock or a timeout below -1; any member's own errors (see
/// zkl_lock_acquire and zkl_semaphore_acquire). Never a guard with a member lost: a member lost
/// before the last one is taken (its session ended, or its node was deleted) is taken again with
/// the others, within the timeout; ZKL_LOCK_LOST if lost otherwise (a closed client) or when
/// trying once (timeout 0).
#[no_mangle]
pub extern "C" fn zkl_multi_lock_acquire(
    multi: *mut zkl_multi_lock,
    timeout_ms: i64,
    out: *mut *mut zkl_multi_guard,
) -> zkl_result {
    ffi_result!("zkl_multi_lock_acquire", { acquire(multi, thread_owner(), timeout_ms, out) })
}

/// As zkl_multi_lock_acquire, for an explicit owner id (see zkl_lock_acquire_as): the lock
/// members are taken for it.
#[no_mangle]
pub extern "C" fn zkl_multi_lock_acquire_as(
    multi: *mut zkl_multi_lock,
    owner: u64,
    timeout_ms: i64,
    out: *mut *mut zkl_multi_guard,
) -> zkl_result {
    ffi_result!("zkl_multi_lock_acquire_as", { acquire(multi, explicit_owner(owner), timeout_ms, out) })
}

/// Wakes every acquisition of this multi-lock handle waiting now, on any thread: each returns
/// ZKL_CANCELLED once what it took is released and its nodes removed. Guards are not touched;
/// later acquisitions are not affected.
///
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed multi-lock.
#[no_mangle]
pub extern "C" fn zkl_multi_lock_cancel(multi: *mut zkl_multi_lock) -> zkl_result {
    ffi_result!("zkl_multi_lock_cancel", {
        non_null!(multi, "multi");
        handles::get(multi, "multi")?.cancel_waiting();
        Ok(())
    })
}

/// Registers callback to be called once for each guard of this multi-lock (acquired before or
/// after registering) when a member is lost, with the guard, the member's index (see
/// zkl_multi_lock_member) and why; never for a guard already freed or released. Replaces any
/// previous callback; NULL removes it. Runs as zkl_lock_set_lost_callback's callbacks do. Once
/// this function (or zkl_multi_lock_free) returns, the previous callback is not running and is
/// never called again.
///
/// Ownership: userdata stays the caller's; zklock only passes it back.
/// Concurrency: any thread; from inside a callback, only for the same multi-lock.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed multi-lock.
#[no_mangle]
pub extern "C" fn zkl_multi_lock_set_lost_callback(
    multi: *mut zkl_multi_lock,
    callback: zkl_multi_lost_callback,
    userdata: *mut c_void,
) -> zkl_result {
    ffi_result!("zkl_multi_lock_set_lost_callback", {
        non_null!(multi, "multi");
        handles::get(multi, "multi")?.lost_callback.set(callback, userdata);
        Ok(())
    })
}

/// Frees a multi-lock handle. Guards acquired through it are not touched: each stays valid until
/// its own zkl_multi_guard_free. A registered lost callback is not running once this returns,
/// and is never called again. The handle is invalid afterwards (any use of it, a second free
/// included, returns ZKL_INVALID_ARGUMENT).
///
/// Ownership: takes the multi-lock. Freeing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, including inside callbacks. An acquisition still waiting is woken
/// and returns ZKL_CANCELLED, what it took released (one that got every member just then gives
/// them back and returns ZKL_INVALID_ARGUMENT).
#[no_mangle]
pub extern "C" fn zkl_multi_lock_free(multi: *mut zkl_multi_lock) -> zkl_result {
    ffi_result!("zkl_multi_lock_free", {
        if multi.is_null() {
            return Ok(());
        }
        let handle = handles::remove(multi, "multi")?;
        handle.lost_callback.set(None, std::ptr::null_mut());
        handle.freed.store(true, Ordering::Release);
        handle.cancel_waiting();
        Ok(())
    })
}

/// The state of the guard, in *out: ZKL_HOLD_LOST if any member is lost (see
/// zkl_multi_guard_lost_member), else ZKL_HOLD_SUSPENDED if any is suspended, else
/// ZKL_HOLD_HELD; ZKL_HOLD_NONE once released. No ZooKeeper traffic.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed guard.
#[no_mangle]
pub extern "C" fn zkl_multi_guard_state(guard: *const zkl_multi_guard, out: *mut zkl_hold_state) -> zkl_result {
    ffi_result!("zkl_multi_guard_state", {
        non_null!(guard, "guard");
        non_null!(out, "out");
        let handle = handles::get(guard, "guard")?;
        let state = handle.guard.lock().as_ref().map_or(zkl_hold_state::ZKL_HOLD_NONE, |guard| guard.state().into());
        write_out!(out, state);
        Ok(())
    })
}

/// Which member was lost: its index (see zkl_multi_lock_member) in *member and why in *reason
/// (NULL if not wanted), or -1 in *member while none is (and once released). No ZooKeeper
/// traffic.
///
/// Ownership: member and reason are the caller's. Concurrency: any thread, including inside
/// callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL guard or member, or a freed guard.
#[no_mangle]
pub extern "C" fn zkl_multi_guard_lost_member(
    guard: *const zkl_multi_guard,
    member: *mut i64,
    reason: *mut zkl_lost_reason,
) -> zkl_result {
    ffi_result!("zkl_multi_guard_lost_member", {
        non_null!(guard, "guard");
        non_null!(member, "member");
        let handle = handles::get(guard, "guard")?;
        match handle.guard.lock().as_ref().and_then(MultiGuard::lost_member) {
            Some(lost) => {
                write_out!(member, lost.index as i64);
                if !reason.is_null() {
                    write_out!(reason, lost.reason.into());
                }
            }
            None => write_out!(member, -1),
        }
        Ok(())
    })
}

/// The fencing token of member's hold number index, in *out: index 0 for a lock member, 0 to
/// n-1 for a member of n leases (in the order their nodes were made). Pass each to the resource
/// that member protects.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_LOCK_LOST if that hold was lost (a lost hold has no token); ZKL_NOT_OWNER once
/// released; ZKL_INVALID_ARGUMENT for NULL arguments, a freed guard, or a member or index out of
/// range.
#[no_mangle]
pub extern "C" fn zkl_multi_guard_fencing_token(
    guard: *const zkl_multi_guard,
    member: usize,
    index: usize,
    out: *mut i64,
) -> zkl_result {
    ffi_result!("zkl_multi_guard_fencing_token", {
        non_null!(guard, "guard");
        non_null!(out, "out");
        let handle = handles::get(guard, "guard")?;
        let Some(holds) = handle.holds.get(member) else {
            return Err(Failure::invalid(format!(
                "member {member} is out of range: the multi-lock has {} members",
                handle.holds.len()
            )));
        };
        let Some(hold) = holds.get(index) else {
            return Err(Failure::invalid(format!(
                "index {index} is out of range: member {member} holds {} (1 for a lock, n for n leases)",
                holds.len()
            )));
        };
        if handle.guard.lock().is_none() {
            return Err(released());
        }
        write_out!(out, hold.live_fencing_token()?);
        Ok(())
    })
}

fn released() -> Failure {
    Failure::new(zkl_result::ZKL_NOT_OWNER, "not owner: this multi-lock guard was released already")
}

/// Releases every member in reverse order, each confirmed by the server before the next. The
/// guard stays until zkl_multi_guard_free.
///
/// Concurrency: any thread (the lock members are released for the owner that acquired them);
/// not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: the first error after trying every member: ZKL_LOCK_LOST if a member was lost
/// (nothing is deleted for it), ZKL_CONNECTION_LOSS (the deletes go on in the background);
/// ZKL_NOT_OWNER if released already; ZKL_INVALID_ARGUMENT for a NULL or freed guard.
#[no_mangle]
pub extern "C" fn zkl_multi_guard_release(guard: *mut zkl_multi_guard) -> zkl_result {
    ffi_result!("zkl_multi_guard_release", {
        non_null!(guard, "guard");
        let handle = handles::get(guard, "guard")?;
        runtime::check_may_block()?;
        let Some(held) = handle.guard.lock().take() else { return Err(released()) };
        Ok(runtime::block_on(held.release())??)
    })
}

/// Frees a guard. Members still held are released in the background, in reverse order (nothing
/// is left behind). The handle is invalid afterwards (any use of it, a second free included,
/// returns ZKL_INVALID_ARGUMENT), and the lost callback is never called for it.
///
/// Ownership: takes the guard. Freeing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, including inside callbacks.
#[no_mangle]
pub extern "C" fn zkl_multi_guard_free(guard: *mut zkl_multi_guard) -> zkl_result {
    ffi_result!("zkl_multi_guard_free", {
        if guard.is_null() {
            return Ok(());
        }
        let handle = handles::remove(guard, "guard")?;
        runtime::runtime()?;
        // Dropping the guard releases its members in the background, in reverse order.
        drop(handle.guard.lock().take());
        Ok(())
    })
}

/// Why an acquisition ended without every member: cancelled (by `zkl_multi_lock_cancel` or the
/// handle's free), or the deadline, naming the member it waited for as every language does.
fn not_acquired(handle: &MultiLockHandle, cancel: &CancellationToken, member: &Member, timeout_ms: i64) -> Failure {
    if cancel.is_cancelled() {
        let by = if handle.freed.load(Ordering::Acquire) { "zkl_multi_lock_free" } else { "zkl_multi_lock_cancel" };
        return Failure::new(
            zkl_result::ZKL_CANCELLED,
            format!("the multi-lock's acquisition was cancelled by {by}; what it took was released"),
        );
    }
    MultiLock::timeout_error(member, Duration::from_millis(timeout_ms.max(0) as u64)).into()
}
