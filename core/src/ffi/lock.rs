//! `zkl_lock`: a fair, reentrant lock on one path, with its owners' holds.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use super::callback::CallbackSlot;
use super::convert::{c_str, timeout};
use super::error::{zkl_result, Failure};
use super::owner::{explicit_owner, thread_owner};
use super::{handles, runtime};
use crate::binding::LockBinding;
use crate::{Acquired, HoldState, Lock, LostReason, LostSubscription, Owner};
use tokio_util::sync::CancellationToken;

/// A fair, reentrant lock on one path: a mutex from zkl_lock_new, or one side of a read/write
/// lock from zkl_rwlock_new; freed with zkl_lock_free. Opaque.
/// Safe to use from any number of threads at once: each thread is its own owner (two threads
/// sharing one handle are two fair contenders, as in Curator), and re-acquiring by the same
/// owner only counts up, with no ZooKeeper traffic.
pub struct zkl_lock {
    _private: [u8; 0],
}

impl handles::Handle for zkl_lock {
    type Object = LockHandle;
    const NAME: &'static str = "zkl_lock";
    const MADE_BY: &'static str = "zkl_lock_new";
}

/// The state of an owner's hold on a lock.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zkl_hold_state {
    /// The owner holds nothing.
    ZKL_HOLD_NONE = 0,
    /// Connected, and the lock node is ours: work.
    ZKL_HOLD_HELD = 1,
    /// The connection is down; the lock may still be ours, but stop touching the resource. Held
    /// again on reconnecting within the session, or lost.
    ZKL_HOLD_SUSPENDED = 2,
    /// The lock is gone (see the lost callback's reason). Stop; release it, which returns
    /// ZKL_LOCK_LOST and deletes nothing.
    ZKL_HOLD_LOST = 3,
}

impl From<HoldState> for zkl_hold_state {
    fn from(state: HoldState) -> Self {
        match state {
            HoldState::Held => zkl_hold_state::ZKL_HOLD_HELD,
            HoldState::Suspended => zkl_hold_state::ZKL_HOLD_SUSPENDED,
            HoldState::Lost => zkl_hold_state::ZKL_HOLD_LOST,
            HoldState::Released => zkl_hold_state::ZKL_HOLD_NONE,
        }
    }
}

/// Why a hold was lost, as the lost callback reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zkl_lost_reason {
    /// The server expired the session, deleting its lock nodes.
    ZKL_LOST_SESSION_EXPIRED = 1,
    /// The client stayed disconnected so long that the server may already have expired the
    /// session and let the next waiter in; the client gave the session up itself.
    ZKL_LOST_DISCONNECTED_TOO_LONG = 2,
    /// The client was closed.
    ZKL_LOST_CLOSED = 3,
    /// Someone else deleted the lock node.
    ZKL_LOST_NODE_DELETED = 4,
    /// The servers rejected the client's credentials.
    ZKL_LOST_AUTH_FAILED = 5,
}

impl From<LostReason> for zkl_lost_reason {
    fn from(reason: LostReason) -> Self {
        match reason {
            LostReason::SessionExpired => zkl_lost_reason::ZKL_LOST_SESSION_EXPIRED,
            LostReason::DisconnectedTooLong => zkl_lost_reason::ZKL_LOST_DISCONNECTED_TOO_LONG,
            LostReason::Closed => zkl_lost_reason::ZKL_LOST_CLOSED,
            LostReason::NodeDeleted => zkl_lost_reason::ZKL_LOST_NODE_DELETED,
            LostReason::AuthFailed => zkl_lost_reason::ZKL_LOST_AUTH_FAILED,
        }
    }
}

/// Called when a hold on a lock is lost, with the lock, the owner whose hold it was, and why; on
/// a zklock background thread (see zkl_lock_set_lost_callback).
pub type zkl_lost_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, lock: *mut zkl_lock, owner: u64, reason: zkl_lost_reason)>;

type LostCallback = unsafe extern "C" fn(*mut c_void, *mut zkl_lock, u64, zkl_lost_reason);

pub(crate) struct LockHandle {
    pub(crate) lock: Lock,
    lost_callback: Arc<CallbackSlot<LostCallback>>,
    /// The core's lost callback that calls `lost_callback`, from the first one set.
    lost_subscription: parking_lot::Mutex<Option<LostSubscription>>,
    /// Set by zkl_lock_free: an acquisition still in progress then gives its hold back.
    freed: AtomicBool,
    /// Cancelled by zkl_lock_cancel and zkl_lock_free: the acquisitions waiting then end, their
    /// nodes removed. zkl_lock_cancel puts a fresh one in its place for later acquisitions.
    cancel: parking_lot::Mutex<CancellationToken>,
}

impl LockHandle {
    fn new(lock: Lock) -> LockHandle {
        LockHandle {
            lock,
            lost_callback: Arc::new(CallbackSlot::new()),
            lost_subscription: parking_lot::Mutex::new(None),
            freed: AtomicBool::new(false),
            cancel: parking_lot::Mutex::new(CancellationToken::new()),
        }
    }

    /// Ends the acquisitions waiting now; later ones are not affected.
    fn cancel_waiting(&self) {
        std::mem::take(&mut *self.cancel.lock()).cancel();
    }

    /// Sets the C callback, subscribing to the core's lost callbacks at the first one: which
    /// holds it covers, and when and how often it is called, is the core's rule
    /// ([`Lock::on_lost`]); this only calls the C function.
    fn set_lost_callback(&self, lock: *mut zkl_lock, callback: zkl_lost_callback, userdata: *mut c_void) {
        self.lost_callback.set(callback, userdata);
        let mut subscription = self.lost_subscription.lock();
        if callback.is_none() || subscription.is_some() {
            return;
        }
        let slot = self.lost_callback.clone();
        let id = lock as usize;
        *subscription = Some(self.lock.on_lost(move |owner, reason| {
            runtime::in_callback(|| {
                // SAFETY: a C function pointer registered by the caller, with its userdata.
                slot.call(|callback, userdata| unsafe { callback(userdata, id as *mut zkl_lock, owner, reason.into()) })
            })
        }));
    }
}

/// Makes a lock on path (relative to the client's chroot). Sends nothing to ZooKeeper; the lock
/// shares the client's session.
///
/// Ownership: path is borrowed for the call. On ZKL_OK, *out receives a new lock that the caller
/// owns and frees with zkl_lock_free (before or after closing the client); on failure *out is
/// left unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments, a closed client, or an invalid path
/// (relative, the root, ending in '/', empty segments, '.' or '..', control characters, or under
/// /zookeeper), or one over the limits that keep one client from harming a shared server: more
/// than ZKL_MAX_PATH_DEPTH segments deep, or parents with more than ZKL_MAX_NEW_PARENT_BYTES
/// bytes of path in all; the message names the limit.
#[no_mangle]
pub extern "C" fn zkl_lock_new(
    client: *mut super::zkl_client,
    path: *const c_char,
    out: *mut *mut zkl_lock,
) -> zkl_result {
    ffi_result!("zkl_lock_new", { new_lock(client, path, std::ptr::null(), out) })
}

/// Makes a fair read/write lock on path (Curator's InterProcessReadWriteLock recipe, whose
/// nodes it shares a path with): *read receives its read side, shared by many owners at once,
/// and *write its write side, exclusive. Each is an ordinary lock handle that every zkl_lock_*
/// function accepts (acquire, release, timeouts, state, fencing token, callbacks) and that is
/// freed with zkl_lock_free, each on its own. A reader that comes after a waiting writer waits
/// behind it. An owner holding the write side may acquire the read side (it reads on the write
/// node; releasing the write side then leaves it reading, and writers already waiting stay out
/// until the read is released). An owner holding the read side that acquires the write side
/// gets ZKL_DEADLOCK at once. Sends nothing to ZooKeeper.
///
/// Ownership: path is borrowed for the call. On ZKL_OK, *read and *write receive new locks that
/// the caller owns and frees with zkl_lock_free; on failure both are left unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: as zkl_lock_new.
#[no_mangle]
pub extern "C" fn zkl_rwlock_new(
    client: *mut super::zkl_client,
    path: *const c_char,
    read: *mut *mut zkl_lock,
    write: *mut *mut zkl_lock,
) -> zkl_result {
    ffi_result!("zkl_rwlock_new", { new_rwlock(client, path, std::ptr::null(), read, write) })
}

/// The deepest lock path (and shared count path) zklock takes, in segments ("/a/b/c" is 3 deep):
/// a deeper one is refused with ZKL_INVALID_ARGUMENT before any traffic. Each of the ZKL_MAX_*
/// limits bounds what one client's input may cost a shared server (a 300,000-deep path once
/// had the client create every parent until the server ran out of memory).
pub const ZKL_MAX_PATH_DEPTH: u32 = 64;
/// The most parents one acquisition may create: the missing ancestors of its lock path (of every
/// member of a multi-lock, and of a semaphore's parts and shared count), each counted once.
pub const ZKL_MAX_NEW_PARENTS: u32 = 1024;
/// The most bytes of path, in all, of the parents one acquisition may create.
pub const ZKL_MAX_NEW_PARENT_BYTES: u32 = 65536;
/// The longest identifier (zkl_lock_options.identifier, zkl_semaphore_options.identifier), in
/// bytes.
pub const ZKL_MAX_IDENTIFIER_BYTES: u32 = 1024;
/// The longest owner label, in bytes, in any language (a C owner is labelled after its thread,
/// well within it).
pub const ZKL_MAX_LABEL_BYTES: u32 = 1024;
/// The most entries of a custom ACL (zkl_lock_options.acl_entries_len).
pub const ZKL_MAX_ACL_ENTRIES: u32 = 32;
/// The longest scheme or id of an ACL entry, in bytes.
pub const ZKL_MAX_ACL_ID_BYTES: u32 = 1024;
/// The most leases one semaphore acquisition may ask for.
pub const ZKL_MAX_LEASES_PER_ACQUISITION: u32 = 1024;
/// The most members of one multi-lock.
pub const ZKL_MAX_MULTI_LOCK_MEMBERS: u32 = 256;

// The C names of the core's limits, written out for cbindgen: they must agree.
const _: () = {
    assert!(ZKL_MAX_PATH_DEPTH as usize == crate::MAX_PATH_DEPTH);
    assert!(ZKL_MAX_NEW_PARENTS as usize == crate::MAX_NEW_PARENTS);
    assert!(ZKL_MAX_NEW_PARENT_BYTES as usize == crate::MAX_NEW_PARENT_BYTES);
    assert!(ZKL_MAX_IDENTIFIER_BYTES as usize == crate::MAX_IDENTIFIER_BYTES);
    assert!(ZKL_MAX_LABEL_BYTES as usize == crate::MAX_LABEL_BYTES);
    assert!(ZKL_MAX_ACL_ENTRIES as usize == crate::MAX_ACL_ENTRIES);
    assert!(ZKL_MAX_ACL_ID_BYTES as usize == crate::MAX_ACL_ID_BYTES);
    assert!(ZKL_MAX_LEASES_PER_ACQUISITION == crate::MAX_LEASES_PER_ACQUISITION);
    assert!(ZKL_MAX_MULTI_LOCK_MEMBERS as usize == crate::MAX_MULTI_LOCK_MEMBERS);
};

/// zkl_lock_options.acl: anyone may do anything with the lock's nodes, so any client can delete
/// a holder's node and take the lock (the default, and what zkl_lock_new does).
pub const ZKL_ACL_OPEN: i32 = 0;
/// zkl_lock_options.acl: full rights for the authenticated creator (every client connected with
/// the same digest credentials), read for everyone: others can list the queue and read who
/// holds, but can neither queue nor delete. Needs digest auth on the client.
pub const ZKL_ACL_CREATOR_ALL_WORLD_READ: i32 = 1;
/// zkl_lock_options.acl: full rights for the authenticated creator, nothing for anyone else
/// (others cannot even list the queue). Needs digest auth on the client.
pub const ZKL_ACL_CREATOR_ALL: i32 = 2;
/// zkl_lock_options.acl: the entries in acl_entries, as given.
pub const ZKL_ACL_CUSTOM: i32 = 3;

/// Permission bits of a zkl_acl_entry, as ZooKeeper numbers them: get a node's data and list
/// its children.
pub const ZKL_PERM_READ: u32 = 1;
/// Set a node's data.
pub const ZKL_PERM_WRITE: u32 = 2;
/// Create children: join a lock's queue.
pub const ZKL_PERM_CREATE: u32 = 4;
/// Delete children: release, or take away a holder's node.
pub const ZKL_PERM_DELETE: u32 = 8;
/// Set a node's ACL.
pub const ZKL_PERM_ADMIN: u32 = 16;
/// All of the above.
pub const ZKL_PERM_ALL: u32 = 31;

/// One entry of a custom ACL: perms (ZKL_PERM_* bits) for the identity id of the auth scheme,
/// as ZooKeeper has them: "world"/"anyone", "auth"/"" (the authenticated creator), "digest" with
/// "user:base64(sha1(user:password))", "ip" with "10.0.0.0/8", ...
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zkl_acl_entry {
    /// The rights granted: ZKL_PERM_* bits.
    pub perms: u32,
    /// The auth scheme, e.g. "world", "auth", "digest", "ip" (borrowed for the call).
    pub scheme: *const c_char,
    /// The identity in that scheme, e.g. "anyone" (borrowed for the call).
    pub id: *const c_char,
}

/// Options for zkl_lock_new_with and zkl_rwlock_new_with. Fill it with zkl_lock_options_init,
/// then set fields.
///
/// acl (ZKL_ACL_*) is given to the lock path (when zklock creates it) and to every lock node.
/// ZooKeeper checks the rights to create and delete a node on its parent, so the lock path's ACL
/// is what keeps others from queueing or deleting a holder's node. With any ACL but
/// ZKL_ACL_OPEN, the lock path is made persistent (a container would be deleted when empty, and
/// anyone could make it again, open), its ACL is checked before the lock queues under it (an ACL
/// granting others more than asked is refused with ZKL_PERMISSION_DENIED), and the parents
/// zklock creates above it stay open.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zkl_lock_options {
    /// One of ZKL_ACL_*. 0: ZKL_ACL_OPEN.
    pub acl: i32,
    /// For ZKL_ACL_CUSTOM: acl_entry_count entries (borrowed for the call); NULL otherwise.
    pub acl_entries: *const zkl_acl_entry,
    /// How many entries acl_entries has.
    pub acl_entry_count: usize,
}

const UNSET_LOCK_OPTIONS: zkl_lock_options =
    zkl_lock_options { acl: ZKL_ACL_OPEN, acl_entries: std::ptr::null(), acl_entry_count: 0 };

/// Fills *opts with the defaults: an open ACL.
///
/// Ownership: opts is the caller's. Concurrency: any thread.
/// Errors: ZKL_INVALID_ARGUMENT if opts is NULL.
#[no_mangle]
pub extern "C" fn zkl_lock_options_init(opts: *mut zkl_lock_options) -> zkl_result {
    ffi_result!("zkl_lock_options_init", {
        non_null!(opts, "opts");
        write_out!(opts, UNSET_LOCK_OPTIONS);
        Ok(())
    })
}

fn lock_options(options: *const zkl_lock_options) -> Result<crate::LockOptions, Failure> {
    // SAFETY: a non-NULL options pointer points to an initialized zkl_lock_options.
    let options = if options.is_null() { &UNSET_LOCK_OPTIONS } else { unsafe { &*options } };
    let acl = acl_of(options.acl, options.acl_entries, options.acl_entry_count)?;
    // Each handle keeps its holds: zkl_lock_free releases the holds taken through it.
    Ok(crate::LockOptions { acl, separate: true, ..Default::default() })
}

/// The core's ACL for the acl fields of a zkl_lock_options or zkl_semaphore_options (`opts->`).
pub(super) fn acl_of(acl: i32, entries: *const zkl_acl_entry, count: usize) -> Result<crate::Acl, Failure> {
    let acl = match acl {
        ZKL_ACL_OPEN => crate::Acl::Open,
        ZKL_ACL_CREATOR_ALL_WORLD_READ => crate::Acl::CreatorAllWorldRead,
        ZKL_ACL_CREATOR_ALL => crate::Acl::CreatorAll,
        ZKL_ACL_CUSTOM => return Ok(crate::Acl::Custom(acl_entries(entries, count)?)),
        other => return Err(Failure::invalid(format!("opts->acl is {other}: it must be one of ZKL_ACL_*"))),
    };
    if !entries.is_null() || count != 0 {
        return Err(Failure::invalid("opts->acl_entries is only for ZKL_ACL_CUSTOM: set opts->acl to it"));
    }
    Ok(acl)
}

fn acl_entries(entries: *const zkl_acl_entry, count: usize) -> Result<Vec<crate::AclEntry>, Failure> {
    if count == 0 {
        return Err(Failure::invalid("opts->acl is ZKL_ACL_CUSTOM but opts->acl_entry_count is 0"));
    }
    non_null!(entries, "opts->acl_entries");
    // SAFETY: the caller passes acl_entry_count initialized entries (checked non-NULL).
    let entries = unsafe { std::slice::from_raw_parts(entries, count) };
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let perms = crate::Perms::from_bits(entry.perms).ok_or_else(|| {
                Failure::invalid(format!("opts->acl_entries[{i}].perms is {:#x}: only ZKL_PERM_* bits", entry.perms))
            })?;
            if entry.scheme.is_null() || entry.id.is_null() {
                return Err(Failure::invalid(format!("opts->acl_entries[{i}] has a NULL scheme or id")));
            }
            let scheme = c_str(entry.scheme, &format!("opts->acl_entries[{i}].scheme"))?;
            let id = c_str(entry.id, &format!("opts->acl_entries[{i}].id"))?;
            Ok(crate::AclEntry::new(perms, scheme, id))
        })
        .collect()
}

/// As zkl_lock_new, with options (NULL: the defaults, as zkl_lock_new). With an ACL naming the
/// authenticated creator the client must have digest auth (zkl_options.digest_auth) or SASL
/// (zkl_options.sasl_mechanism).
///
/// Ownership: path and opts (and what it points to) are borrowed for the call. On ZKL_OK, *out
/// receives a new lock that the caller owns and frees with zkl_lock_free; on failure *out is
/// left unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: as zkl_lock_new; ZKL_INVALID_ARGUMENT also for an unknown opts->acl, a bad custom
/// entry (perms outside ZKL_PERM_ALL or 0, NULL or non-UTF-8 strings, a world id other than
/// "anyone", a digest id without ':'), an ACL that gives this client less than READ, CREATE and
/// DELETE, or one naming the creator on a client without digest auth; all before any network
/// traffic. The acquisitions of a lock with an ACL return ZKL_PERMISSION_DENIED if the lock
/// path's ACL lets this client not queue, or grants others more than asked.
#[no_mangle]
pub extern "C" fn zkl_lock_new_with(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: *const zkl_lock_options,
    out: *mut *mut zkl_lock,
) -> zkl_result {
    ffi_result!("zkl_lock_new_with", { new_lock(client, path, opts, out) })
}

/// zkl_lock_new_with's work (NULL `opts`: zkl_lock_new's).
fn new_lock(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: *const zkl_lock_options,
    out: *mut *mut zkl_lock,
) -> Result<(), Failure> {
    non_null!(client, "client");
    non_null!(path, "path");
    non_null!(out, "out");
    let client = handles::get(client, "client")?;
    let options = lock_options(opts)?;
    let lock = client.client.lock_with(c_str(path, "path")?, options)?;
    write_out!(out, handles::new::<zkl_lock>(LockHandle::new(lock)));
    Ok(())
}

/// As zkl_rwlock_new, with options (see zkl_lock_new_with): both sides share them.
///
/// Ownership: as zkl_rwlock_new; opts is borrowed for the call.
/// Concurrency: any thread, including inside callbacks.
/// Errors: as zkl_lock_new_with.
#[no_mangle]
pub extern "C" fn zkl_rwlock_new_with(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: *const zkl_lock_options,
    read: *mut *mut zkl_lock,
    write: *mut *mut zkl_lock,
) -> zkl_result {
    ffi_result!("zkl_rwlock_new_with", { new_rwlock(client, path, opts, read, write) })
}

/// zkl_rwlock_new_with's work (NULL `opts`: zkl_rwlock_new's).
fn new_rwlock(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: *const zkl_lock_options,
    read: *mut *mut zkl_lock,
    write: *mut *mut zkl_lock,
) -> Result<(), Failure> {
    non_null!(client, "client");
    non_null!(path, "path");
    non_null!(read, "read");
    non_null!(write, "write");
    let client = handles::get(client, "client")?;
    let options = lock_options(opts)?;
    let pair = client.client.read_write_lock_with(c_str(path, "path")?, options)?;
    write_out!(read, handles::new::<zkl_lock>(LockHandle::new(pair.read().clone())));
    write_out!(write, handles::new::<zkl_lock>(LockHandle::new(pair.write().clone())));
    Ok(())
}

/// Wakes every acquisition of this lock handle that is waiting now, on any thread: each returns
/// ZKL_CANCELLED once its node is removed. Holds are not touched, and later acquisitions are not
/// affected. Without it, only a timeout, zkl_lock_free or closing the client ends a wait.
///
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_cancel(lock: *mut zkl_lock) -> zkl_result {
    ffi_result!("zkl_lock_cancel", {
        non_null!(lock, "lock");
        handles::get(lock, "lock")?.cancel_waiting();
        Ok(())
    })
}

/// Frees a lock handle. Holds still held through it are released in the background, as if each
/// owner released them (their nodes are deleted; nothing is left behind). (Each C handle keeps
/// its holds, which is what lets this release them: unlike the handles of the other languages,
/// two handles for one path are two contenders, even for one thread.) A registered lost
/// callback is not running once this returns, and is never called again.
///
/// The handle is invalid afterwards: any use of it, including a second free, returns
/// ZKL_INVALID_ARGUMENT (it is never dereferenced, so this is safe).
///
/// Ownership: takes the lock. Freeing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, including inside callbacks. Calls in progress on other threads
/// finish; an acquisition still waiting is woken and returns ZKL_CANCELLED, its node removed
/// (one that got the lock just then gives its hold back and returns ZKL_INVALID_ARGUMENT).
#[no_mangle]
pub extern "C" fn zkl_lock_free(lock: *mut zkl_lock) -> zkl_result {
    ffi_result!("zkl_lock_free", {
        if lock.is_null() {
            return Ok(());
        }
        let handle = handles::remove(lock, "lock")?;
        handle.lost_callback.set(None, std::ptr::null_mut());
        drop(handle.lost_subscription.lock().take());
        handle.freed.store(true, Ordering::Release);
        handle.cancel_waiting();
        runtime::runtime()?;
        handle.lock.release_all_in_background();
        Ok(())
    })
}

fn acquire(lock: *mut zkl_lock, owner: Result<Owner, Failure>, timeout_ms: i64) -> Result<(), Failure> {
    non_null!(lock, "lock");
    let wait = timeout(timeout_ms)?;
    let handle = handles::get(lock, "lock")?;
    let owner = owner?;
    runtime::check_may_block()?;
    // Re-entry is counted at once, with no ZooKeeper traffic and no trip through the runtime;
    // otherwise the attempt's create is sent, and this waits for it.
    let cancel = handle.cancel.lock().clone();
    let mut begun = handle.lock.begin_acquire_abortable(&owner, wait, cancel.clone());
    let acquired = match begun.take_now() {
        Some(result) => result,
        None => runtime::block_on(begun)?,
    };
    match acquired? {
        Acquired::Reentered => return Ok(()),
        Acquired::Held(_) => {}
        Acquired::NotAcquired if cancel.is_cancelled() => {
            let by = if handle.freed.load(Ordering::Acquire) { "zkl_lock_free" } else { "zkl_lock_cancel" };
            return Err(Failure::new(
                zkl_result::ZKL_CANCELLED,
                format!("the acquisition on {} was cancelled by {by}; its node was removed", handle.lock.path()),
            ));
        }
        Acquired::NotAcquired => {
            return Err(handle.lock.timeout_error(Duration::from_millis(timeout_ms.max(0) as u64)).into());
        }
    }
    // A fresh hold (the write holder's read included).
    if handle.freed.load(Ordering::Acquire) {
        handle.lock.release_all_in_background();
        return Err(Failure::invalid(
            "lock was freed (zkl_lock_free) while this call waited; the hold it got was released",
        ));
    }
    Ok(())
}

fn release(lock: *mut zkl_lock, owner: Result<Owner, Failure>) -> Result<(), Failure> {
    non_null!(lock, "lock");
    let handle = handles::get(lock, "lock")?;
    let owner = owner?;
    runtime::check_may_block()?;
    // Inner levels are counted down at once; the last one deletes the node.
    if let Some(nested) = handle.lock.release_nested(&owner) {
        return Ok(nested?);
    }
    Ok(runtime::block_on(handle.lock.release(&owner))??)
}

/// Acquires the lock for the calling thread, waiting at most timeout_ms: -1 waits as long as it
/// takes, 0 only tries, else at most that many ms:
///
///   timeout_ms   waits                   C      Python (s)          Node (timeoutMs)        zklock
///   forever      as long as it takes     -1     None, -1 or inf     left out or Infinity    (neither)
///   try          not at all              0      0 / blocking=False  0                       -n
///   bounded      at most that long       N ms   N s (a float)       N ms (up to 2^31-1)     -w SECS
///
/// A try answers within 2 s (one round trip when the server answers): ZKL_OK, ZKL_TIMEOUT (held
/// by someone else), or ZKL_CONNECTION_LOSS if ZooKeeper could not be reached in that time (never
/// ZKL_TIMEOUT or ZKL_SESSION_EXPIRED for a server that did not answer). A bounded wait returns
/// within 100 ms of its deadline, reachable server or not; a node it made whose removal the server
/// has not confirmed by then is removed in the background. Fair: first come, first served, across
/// processes and threads. A thread that holds it already only counts up (release as often), with
/// no ZooKeeper traffic. An attempt that times out or fails leaves no node behind.
///
/// -1 means forever, also through ZooKeeper outages of any length: when the session ends
/// meanwhile, the acquisition tries for a new one again after each connect timeout and queues
/// again on it; it never returns ZKL_TIMEOUT. Only closing the client, zkl_lock_cancel or
/// zkl_lock_free ends such a wait early.
///
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT). While one
/// thread waits here, others may use the same lock and client, or close the client (this then
/// returns ZKL_CLOSED).
/// Thread exit: as with a pthread mutex, a thread that exits while holding leaves the lock held
/// (other contenders wait) until its owner id releases it (zkl_lock_release_as with the id
/// zkl_thread_owner() gave that thread) or the lock handle is freed (zkl_lock_free releases every
/// hold taken through it), or the client is closed.
/// Errors: ZKL_TIMEOUT if not obtained in time (nothing is held then); ZKL_INVALID_ARGUMENT for a
/// NULL or freed lock, a timeout below -1, or a path that holds nodes of the other recipe (a
/// mutex from zkl_lock_new where a read/write lock from zkl_rwlock_new has nodes, or the
/// reverse: the message names the node; nothing is created); ZKL_DEADLOCK for the write side of
/// a read/write lock when this owner holds its read side, or when this owner holds the path
/// through another lock handle (zkl_lock_new makes each its own: a second handle on a path this
/// thread holds would wait for itself; two reads excepted), at once, nothing created;
/// ZKL_CLOSED if the client was closed; ZKL_SESSION_EXPIRED if the session expired while
/// waiting; ZKL_LOCK_LOST if this owner's existing hold was lost (release it first);
/// ZKL_CONNECTION_LOSS (a try that got no answer within 2 s), ZKL_ZOOKEEPER.
#[no_mangle]
pub extern "C" fn zkl_lock_acquire(lock: *mut zkl_lock, timeout_ms: i64) -> zkl_result {
    ffi_result!("zkl_lock_acquire", { acquire(lock, thread_owner(), timeout_ms) })
}

/// As zkl_lock_acquire, for an explicit owner instead of the calling thread: an id below 2^63
/// chosen by the caller (say, one per request of an event loop), or a thread's id from
/// zkl_thread_owner(). The owner, not the thread, holds the lock: it may be released from any
/// thread with zkl_lock_release_as. One owner acquires one lock at a time (a second concurrent
/// acquisition by the same owner returns ZKL_INVALID_ARGUMENT).
#[no_mangle]
pub extern "C" fn zkl_lock_acquire_as(lock: *mut zkl_lock, owner: u64, timeout_ms: i64) -> zkl_result {
    ffi_result!("zkl_lock_acquire_as", { acquire(lock, explicit_owner(owner), timeout_ms) })
}

/// Releases one level of the calling thread's hold; at the last level the lock node is deleted,
/// and this returns once the server confirmed it.
///
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_NOT_OWNER if the calling thread does not hold the lock (nothing changes);
/// ZKL_LOCK_LOST if the hold was lost (it is dropped and nothing is deleted);
/// ZKL_CONNECTION_LOSS if the connection dropped before the server confirmed: the hold is gone
/// here and the delete goes on in the background; ZKL_INVALID_ARGUMENT for a NULL or freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_release(lock: *mut zkl_lock) -> zkl_result {
    ffi_result!("zkl_lock_release", { release(lock, thread_owner()) })
}

/// As zkl_lock_release, for an explicit owner id (see zkl_lock_acquire_as), from any thread.
#[no_mangle]
pub extern "C" fn zkl_lock_release_as(lock: *mut zkl_lock, owner: u64) -> zkl_result {
    ffi_result!("zkl_lock_release_as", { release(lock, explicit_owner(owner)) })
}

fn is_held(lock: *const zkl_lock, owner: Result<Owner, Failure>, out: *mut bool) -> Result<(), Failure> {
    non_null!(lock, "lock");
    non_null!(out, "out");
    let handle = handles::get(lock, "lock")?;
    write_out!(out, handle.lock.is_held_by(&owner?));
    Ok(())
}

/// Whether the calling thread holds the lock and may act on it, in *out: false while its hold
/// is suspended (ZKL_HOLD_SUSPENDED: the node may still be ours, but the server may be about to
/// let the next holder in), and false once it is lost (session
/// expired, client closed, node deleted by someone else), though the lost hold stays the
/// thread's until released (zkl_lock_state says ZKL_HOLD_LOST, zkl_lock_release ZKL_LOCK_LOST).
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_is_held(lock: *const zkl_lock, out: *mut bool) -> zkl_result {
    ffi_result!("zkl_lock_is_held", { is_held(lock, thread_owner(), out) })
}

/// As zkl_lock_is_held, for an explicit owner id.
#[no_mangle]
pub extern "C" fn zkl_lock_is_held_as(lock: *const zkl_lock, owner: u64, out: *mut bool) -> zkl_result {
    ffi_result!("zkl_lock_is_held_as", { is_held(lock, explicit_owner(owner), out) })
}

fn state(lock: *const zkl_lock, owner: Result<Owner, Failure>, out: *mut zkl_hold_state) -> Result<(), Failure> {
    non_null!(lock, "lock");
    non_null!(out, "out");
    let handle = handles::get(lock, "lock")?;
    let state = match handle.lock.state_of(&owner?) {
        Some(HoldState::Held) => zkl_hold_state::ZKL_HOLD_HELD,
        Some(HoldState::Suspended) => zkl_hold_state::ZKL_HOLD_SUSPENDED,
        Some(HoldState::Lost) => zkl_hold_state::ZKL_HOLD_LOST,
        None | Some(HoldState::Released) => zkl_hold_state::ZKL_HOLD_NONE,
    };
    write_out!(out, state);
    Ok(())
}

/// The state of the calling thread's hold (ZKL_HOLD_NONE if it holds nothing), in *out. Cheap
/// (no ZooKeeper traffic): poll it before touching the protected resource.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_state(lock: *const zkl_lock, out: *mut zkl_hold_state) -> zkl_result {
    ffi_result!("zkl_lock_state", { state(lock, thread_owner(), out) })
}

/// As zkl_lock_state, for an explicit owner id.
#[no_mangle]
pub extern "C" fn zkl_lock_state_as(lock: *const zkl_lock, owner: u64, out: *mut zkl_hold_state) -> zkl_result {
    ffi_result!("zkl_lock_state_as", { state(lock, explicit_owner(owner), out) })
}

/// The fencing token (0) or sequence (1) of `owner`'s hold.
fn hold_number(
    lock: *const zkl_lock,
    owner: Result<Owner, Failure>,
    out: *mut i64,
    sequence: bool,
) -> Result<(), Failure> {
    non_null!(lock, "lock");
    non_null!(out, "out");
    let handle = handles::get(lock, "lock")?;
    let owner = owner?;
    let Some(hold) = handle.lock.live_hold_of(&owner)? else {
        return Err(Failure::new(
            zkl_result::ZKL_NOT_OWNER,
            format!("not owner on {}: owner {} holds nothing", handle.lock.path(), owner.label()),
        ));
    };
    write_out!(out, if sequence { hold.sequence() } else { hold.fencing_token() });
    Ok(())
}

/// The fencing token of the calling thread's hold, in *out: the lock node's creation zxid, which
/// strictly increases across successive holders of the lock path. Pass it to the resource you
/// protect and let it refuse tokens lower than one it has seen.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_NOT_OWNER if the calling thread holds nothing; ZKL_LOCK_LOST if its hold was lost;
/// ZKL_INVALID_ARGUMENT for NULL arguments or a freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_fencing_token(lock: *const zkl_lock, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_lock_fencing_token", { hold_number(lock, thread_owner(), out, false) })
}

/// As zkl_lock_fencing_token, for an explicit owner id.
#[no_mangle]
pub extern "C" fn zkl_lock_fencing_token_as(lock: *const zkl_lock, owner: u64, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_lock_fencing_token_as", { hold_number(lock, explicit_owner(owner), out, false) })
}

/// The sequence number ZooKeeper gave the calling thread's lock node, in *out (past the server's
/// 32-bit limit it repeats or goes negative: order by fencing token instead).
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: as zkl_lock_fencing_token.
#[no_mangle]
pub extern "C" fn zkl_lock_sequence(lock: *const zkl_lock, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_lock_sequence", { hold_number(lock, thread_owner(), out, true) })
}

/// As zkl_lock_sequence, for an explicit owner id.
#[no_mangle]
pub extern "C" fn zkl_lock_sequence_as(lock: *const zkl_lock, owner: u64, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_lock_sequence_as", { hold_number(lock, explicit_owner(owner), out, true) })
}

/// Registers callback to be called once for each hold of this lock handle that is lost: session
/// expired, client disconnected too long or closed, or node deleted by someone else. It covers
/// every hold taken through the handle (or through a multi-lock it is a member of), by any
/// owner, before registering (unless lost already) or after: the core's rule, the same in every
/// language. Replaces any previous callback; NULL removes it. It runs on the client's callback
/// thread (`zklock-callback`), one callback at a time in the order they became due, with
/// userdata as given; never on the threads that keep sessions alive, so a callback that blocks
/// delays only the client's later callbacks. No blocking zkl_ call from inside it (those return
/// ZKL_INVALID_ARGUMENT there): signal another thread instead. Once this function (or
/// zkl_lock_free) returns, the previous callback is not running and is never called again, so
/// its userdata may be freed.
///
/// Ownership: userdata stays the caller's; zklock only passes it back.
/// Concurrency: any thread; from inside a callback, only for the same lock.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed lock.
#[no_mangle]
pub extern "C" fn zkl_lock_set_lost_callback(
    lock: *mut zkl_lock,
    callback: zkl_lost_callback,
    userdata: *mut c_void,
) -> zkl_result {
    ffi_result!("zkl_lock_set_lost_callback", {
        non_null!(lock, "lock");
        handles::get(lock, "lock")?.set_lost_callback(lock, callback, userdata);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permission_bits_are_the_cores() {
        use crate::Perms;
        let pairs = [
            (ZKL_PERM_READ, Perms::READ),
            (ZKL_PERM_WRITE, Perms::WRITE),
            (ZKL_PERM_CREATE, Perms::CREATE),
            (ZKL_PERM_DELETE, Perms::DELETE),
            (ZKL_PERM_ADMIN, Perms::ADMIN),
            (ZKL_PERM_ALL, Perms::ALL),
        ];
        for (c, core) in pairs {
            assert_eq!(c, core.bits());
        }
    }
}
