//! `zkl_semaphore` and `zkl_leases`: the core's counting semaphore, and the leases one
//! acquisition took (a handle of their own, since a lease is a thing held, not an owner's count).

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::callback::CallbackSlot;
use super::convert::{c_str, timeout};
use super::error::{zkl_result, Failure};
use super::lock::{zkl_hold_state, zkl_lost_reason};
use super::{handles, runtime};
use crate::binding::ClientBinding;
use crate::{Hold, Leases, MaxLeases, Semaphore, SemaphoreOptions};

/// A counting semaphore on one path (Curator's InterProcessSemaphoreV2, node for node): at most
/// max leases held at once, across every process and language using the path. From
/// zkl_semaphore_new or zkl_semaphore_new_with, freed with zkl_semaphore_free. Opaque. Safe to
/// use from any number of threads at once. Not reentrant: each acquisition takes new leases.
pub struct zkl_semaphore {
    _private: [u8; 0],
}

impl handles::Handle for zkl_semaphore {
    type Object = SemaphoreHandle;
    const NAME: &'static str = "zkl_semaphore";
    const MADE_BY: &'static str = "zkl_semaphore_new";
}

/// The leases one zkl_semaphore_acquire took, all together: each with its node, fencing token
/// and hold state. Released with zkl_leases_release (from any thread), freed with
/// zkl_leases_free. Opaque. Independent of its semaphore handle, which may be freed first.
pub struct zkl_leases {
    _private: [u8; 0],
}

impl handles::Handle for zkl_leases {
    type Object = LeasesHandle;
    const NAME: &'static str = "zkl_leases";
    const MADE_BY: &'static str = "zkl_semaphore_acquire";
}

/// Options for zkl_semaphore_new_with. Fill it with zkl_semaphore_options_init, then set
/// either max_leases or shared_count_path.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zkl_semaphore_options {
    /// A fixed max, at least 1, that every user of the path agrees on (as in Curator, nothing
    /// checks that they do). 0 with shared_count_path.
    pub max_leases: i32,
    /// The max from a shared count at this path (relative to the client's chroot), stored as
    /// Curator's SharedCount stores it (a 4-byte big-endian int): anyone may change it at run
    /// time, and waiting acquirers follow. NULL for a fixed max. Borrowed for the call.
    pub shared_count_path: *const c_char,
    /// The shared count's value if its node is missing (it is then made, as Curator's
    /// SharedCount.start does): at least 1. Only with shared_count_path.
    pub shared_count_seed: i32,
    /// Recorded in each node's identity (see zkl_participant.identifier), or NULL. Borrowed for
    /// the call.
    pub identifier: *const c_char,
    /// One of ZKL_ACL_*, as zkl_lock_options.acl. 0: ZKL_ACL_OPEN, as Curator makes the nodes:
    /// anyone may delete a lease or change the shared count. With another, every node the
    /// semaphore makes (its path, PATH/locks, PATH/leases, the leases, the mutex's nodes, the
    /// shared count and the count's parent) gets it, and an existing path, mutex or lease parent,
    /// shared count or count parent whose ACL grants others more is refused with
    /// ZKL_PERMISSION_DENIED.
    pub acl: i32,
    /// For ZKL_ACL_CUSTOM: acl_entry_count entries (borrowed for the call); NULL otherwise.
    pub acl_entries: *const super::lock::zkl_acl_entry,
    /// How many entries acl_entries has.
    pub acl_entry_count: usize,
}

const UNSET_SEMAPHORE_OPTIONS: zkl_semaphore_options = zkl_semaphore_options {
    max_leases: 0,
    shared_count_path: std::ptr::null(),
    shared_count_seed: 0,
    identifier: std::ptr::null(),
    acl: super::lock::ZKL_ACL_OPEN,
    acl_entries: std::ptr::null(),
    acl_entry_count: 0,
};

/// Called when leases are lost, once per leases handle: with the handle, the index of the first
/// lease found lost and why; on a zklock background thread (see zkl_semaphore_set_lost_callback).
pub type zkl_lease_lost_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, leases: *mut zkl_leases, index: usize, reason: zkl_lost_reason)>;

type LeaseLostCallback = unsafe extern "C" fn(*mut c_void, *mut zkl_leases, usize, zkl_lost_reason);

pub(crate) struct SemaphoreHandle {
    pub(crate) semaphore: Semaphore,
    lost_callback: Arc<CallbackSlot<LeaseLostCallback>>,
    /// Set by zkl_semaphore_free: an acquisition still in progress then gives its leases back.
    freed: AtomicBool,
    /// Cancelled by zkl_semaphore_cancel and zkl_semaphore_free (as a zkl_lock's).
    cancel: parking_lot::Mutex<CancellationToken>,
}

impl SemaphoreHandle {
    fn cancel_waiting(&self) {
        std::mem::take(&mut *self.cancel.lock()).cancel();
    }
}

pub(crate) struct LeasesHandle {
    /// None once released.
    leases: parking_lot::Mutex<Option<Leases>>,
    holds: Vec<Hold>,
    names: Vec<CString>,
    path: String,
}

/// A C count (max, seed, n) that must be at least 1, as the core's u32; `what` names it. The
/// core refuses 0 with its own words, so 0 passes through.
fn at_least_one(value: i32, what: &str) -> Result<u32, Failure> {
    u32::try_from(value).map_err(|_| Failure::invalid(format!("{what} is {value}: it must be at least 1")))
}

/// Fills *opts with the defaults: no max set (set max_leases or shared_count_path), no
/// identifier, an open ACL.
///
/// Ownership: opts is the caller's. Concurrency: any thread.
/// Errors: ZKL_INVALID_ARGUMENT if opts is NULL.
#[no_mangle]
pub extern "C" fn zkl_semaphore_options_init(opts: *mut zkl_semaphore_options) -> zkl_result {
    ffi_result!("zkl_semaphore_options_init", {
        non_null!(opts, "opts");
        write_out!(opts, UNSET_SEMAPHORE_OPTIONS);
        Ok(())
    })
}

/// Makes a semaphore on path (relative to the client's chroot) allowing max_leases leases at
/// once. Its nodes are Curator's: an internal mutex at `<path>/locks` and one lease node each
/// under `<path>/leases`. With max_leases 1 it is Curator's InterProcessSemaphoreMutex: a
/// non-reentrant mutex whose lease any thread may release. Sends nothing to ZooKeeper.
///
/// Ownership: path is borrowed for the call. On ZKL_OK, *out receives a new semaphore that the
/// caller owns and frees with zkl_semaphore_free; on failure *out is left unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments, a closed client, max_leases below 1, or an
/// invalid path (as zkl_lock_new).
#[no_mangle]
pub extern "C" fn zkl_semaphore_new(
    client: *mut super::zkl_client,
    path: *const c_char,
    max_leases: i32,
    out: *mut *mut zkl_semaphore,
) -> zkl_result {
    ffi_result!("zkl_semaphore_new", {
        let opts = zkl_semaphore_options { max_leases, ..UNSET_SEMAPHORE_OPTIONS };
        new_semaphore(client, path, &opts, out)
    })
}

/// As zkl_semaphore_new, with options: a fixed max (opts->max_leases) or a shared count
/// (opts->shared_count_path and its seed), an identifier, and an ACL (opts->acl, as
/// zkl_lock_new_with's; an ACL naming the authenticated creator needs credentials on the client).
///
/// Ownership: path and opts (and its strings) are borrowed for the call. On ZKL_OK, *out
/// receives a new semaphore that the caller owns and frees with zkl_semaphore_free; on failure
/// *out is left unchanged.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT, before any traffic, for NULL arguments, a closed client, an
/// invalid path or shared count path, both or neither of max_leases and shared_count_path,
/// max_leases or shared_count_seed below 1, a seed without a shared count path, an ACL refused
/// as zkl_lock_new_with refuses one. The acquisitions of a semaphore with an ACL return
/// ZKL_PERMISSION_DENIED if one of its nodes' ACL lets this client not use it, or grants others
/// more than asked.
#[no_mangle]
pub extern "C" fn zkl_semaphore_new_with(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: *const zkl_semaphore_options,
    out: *mut *mut zkl_semaphore,
) -> zkl_result {
    ffi_result!("zkl_semaphore_new_with", {
        non_null!(opts, "opts");
        // SAFETY: a non-NULL opts points to an initialized zkl_semaphore_options.
        new_semaphore(client, path, unsafe { &*opts }, out)
    })
}

fn new_semaphore(
    client: *mut super::zkl_client,
    path: *const c_char,
    opts: &zkl_semaphore_options,
    out: *mut *mut zkl_semaphore,
) -> Result<(), Failure> {
    non_null!(client, "client");
    non_null!(path, "path");
    non_null!(out, "out");
    let client = handles::get(client, "client")?;
    let max = if opts.shared_count_path.is_null() {
        if opts.shared_count_seed != 0 {
            return Err(Failure::invalid("opts->shared_count_seed is only for opts->shared_count_path, which is NULL"));
        }
        MaxLeases::Fixed(at_least_one(opts.max_leases, "max_leases")?)
    } else {
        if opts.max_leases != 0 {
            return Err(Failure::invalid(
                "opts->max_leases and opts->shared_count_path are both set: the max is one or the other",
            ));
        }
        MaxLeases::SharedCount {
            path: c_str(opts.shared_count_path, "opts->shared_count_path")?.to_owned(),
            seed: at_least_one(opts.shared_count_seed, "opts->shared_count_seed")?,
        }
    };
    let mut options =
        SemaphoreOptions::new(max).acl(super::lock::acl_of(opts.acl, opts.acl_entries, opts.acl_entry_count)?);
    if !opts.identifier.is_null() {
        options = options.identifier(c_str(opts.identifier, "opts->identifier")?);
    }
    let semaphore = client.client.semaphore_with(c_str(path, "path")?, options)?;
    let handle = SemaphoreHandle {
        semaphore,
        lost_callback: Arc::new(CallbackSlot::new()),
        freed: AtomicBool::new(false),
        cancel: parking_lot::Mutex::new(CancellationToken::new()),
    };
    write_out!(out, handles::new::<zkl_semaphore>(handle));
    Ok(())
}

/// Acquires n leases, all or nothing, waiting at most timeout_ms for all of them (one deadline):
/// -1 waits as long as it takes (through outages and new sessions, as zkl_lock_acquire's -1), 0
/// only tries (they fit now and nobody holds the semaphore's mutex), within 2 s
/// (ZKL_CONNECTION_LOSS if ZooKeeper could not be reached by then); a bounded wait returns within
/// 100 ms of its deadline (see zkl_lock_acquire). Fair: acquirers are served in the order they queue at the mutex, across processes
/// and languages (a later one that would fit does not pass an earlier one that does not). On a
/// timeout, a cancel or an error no lease node and no mutex node is left. Not reentrant: a
/// thread that holds leases and acquires again takes more.
///
/// Ownership: on ZKL_OK, *out receives a new leases handle that the caller owns: release it
/// with zkl_leases_release and free it with zkl_leases_free (which releases leases still held);
/// on failure *out is left unchanged.
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT). While one
/// thread waits here, others may use the semaphore, or cancel the wait (zkl_semaphore_cancel).
/// Errors: ZKL_TIMEOUT if not obtained in time; ZKL_CANCELLED if zkl_semaphore_cancel (or
/// zkl_semaphore_free) ended the wait; ZKL_INVALID_ARGUMENT for NULL arguments, a freed
/// semaphore, a timeout below -1, n below 1 or above a fixed max (before any traffic), n above
/// the shared count, a shared count node that is not 4 bytes, or a path that holds lock nodes
/// (before any node is made; the message says which); ZKL_CLOSED, ZKL_CONNECTION_LOSS,
/// ZKL_PERMISSION_DENIED, ZKL_ZOOKEEPER. A waiter whose session expires queues again on a new
/// session within its deadline.
#[no_mangle]
pub extern "C" fn zkl_semaphore_acquire(
    semaphore: *mut zkl_semaphore,
    n: i32,
    timeout_ms: i64,
    out: *mut *mut zkl_leases,
) -> zkl_result {
    ffi_result!("zkl_semaphore_acquire", {
        non_null!(semaphore, "semaphore");
        non_null!(out, "out");
        let wait = timeout(timeout_ms)?;
        let handle = handles::get(semaphore, "semaphore")?;
        let n = at_least_one(n, "n")?;
        runtime::check_may_block()?;
        let cancel = handle.cancel.lock().clone();
        let acquired = runtime::block_on(handle.semaphore.acquire_for(n, wait, Some(cancel.clone())))??;
        let path = handle.semaphore.path();
        let Some(leases) = acquired else {
            if cancel.is_cancelled() {
                let by =
                    if handle.freed.load(Ordering::Acquire) { "zkl_semaphore_free" } else { "zkl_semaphore_cancel" };
                return Err(Failure::new(
                    zkl_result::ZKL_CANCELLED,
                    format!("the acquisition on {path} was cancelled by {by}; its nodes were removed"),
                ));
            }
            return Err(handle.semaphore.timeout_error(n, Duration::from_millis(timeout_ms.max(0) as u64)).into());
        };
        if handle.freed.load(Ordering::Acquire) {
            drop(leases); // released in the background
            return Err(Failure::invalid(
                "semaphore was freed (zkl_semaphore_free) while this call waited; the leases it got were released",
            ));
        }
        let holds: Vec<Hold> = leases.holds();
        let names = leases
            .leases()
            .iter()
            .map(|lease| CString::new(lease.node_name()).expect("node names have no NUL"))
            .collect();
        let id = handles::new::<zkl_leases>(LeasesHandle {
            leases: parking_lot::Mutex::new(Some(leases)),
            holds: holds.clone(),
            names,
            path: path.to_owned(),
        }) as usize;
        // Once per leases handle: the first lease lost (core decides what a set's loss is).
        let callback = handle.lost_callback.clone();
        handle.semaphore.client().on_first_loss(holds, move |index, reason| {
            // Not for a leases handle freed meanwhile: C may not name it any more.
            if !handles::is_live(id) {
                return;
            }
            runtime::in_callback(|| {
                // SAFETY: a C function pointer registered by the caller, with its userdata.
                callback.call(|callback, userdata| unsafe {
                    callback(userdata, id as *mut zkl_leases, index, reason.into())
                })
            })
        });
        write_out!(out, id as *mut zkl_leases);
        Ok(())
    })
}

/// Wakes every acquisition of this semaphore handle waiting now, on any thread: each returns
/// ZKL_CANCELLED once its nodes are removed. Leases held are not touched; later acquisitions
/// are not affected.
///
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed semaphore.
#[no_mangle]
pub extern "C" fn zkl_semaphore_cancel(semaphore: *mut zkl_semaphore) -> zkl_result {
    ffi_result!("zkl_semaphore_cancel", {
        non_null!(semaphore, "semaphore");
        handles::get(semaphore, "semaphore")?.cancel_waiting();
        Ok(())
    })
}

/// The max now, in *out: the fixed max, or the shared count's value read from the server (its
/// node made with the seed if missing).
///
/// Ownership: out is the caller's.
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments, a freed semaphore, or a shared count node
/// that is not 4 bytes; ZKL_PERMISSION_DENIED if the count's ACL lets this client not read it,
/// or (with opts->acl) grants others more than asked; ZKL_CLOSED, ZKL_CONNECTION_LOSS,
/// ZKL_ZOOKEEPER.
#[no_mangle]
pub extern "C" fn zkl_semaphore_max_leases(semaphore: *mut zkl_semaphore, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_semaphore_max_leases", {
        non_null!(semaphore, "semaphore");
        non_null!(out, "out");
        let handle = handles::get(semaphore, "semaphore")?;
        let max = runtime::block_on(handle.semaphore.current_max_leases())??;
        write_out!(out, max);
        Ok(())
    })
}

/// Sets the shared count that is the semaphore's max (opts->shared_count_path) to max, as
/// Curator's SharedCount.setCount does (a 4-byte big-endian setData; the node made if missing):
/// acquirers waiting for room follow, here and in every process using the count.
///
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_INVALID_ARGUMENT, before any traffic, for a NULL or freed semaphore, one with a
/// fixed max, or max below 1; ZKL_CLOSED, ZKL_CONNECTION_LOSS, ZKL_PERMISSION_DENIED,
/// ZKL_ZOOKEEPER.
#[no_mangle]
pub extern "C" fn zkl_semaphore_set_shared_count(semaphore: *mut zkl_semaphore, max: i32) -> zkl_result {
    ffi_result!("zkl_semaphore_set_shared_count", {
        non_null!(semaphore, "semaphore");
        let handle = handles::get(semaphore, "semaphore")?;
        let max = at_least_one(max, "max")?;
        runtime::check_may_block()?;
        Ok(runtime::block_on(handle.semaphore.set_shared_count(max))??)
    })
}

/// Registers callback to be called once for each leases handle acquired through this semaphore
/// handle (before or after registering) when its first lease is lost: session expired, client
/// disconnected too long or closed, or lease node deleted by someone else. With the leases
/// handle and that lease's index in it; never for a leases handle already freed or released. Replaces any previous callback;
/// NULL removes it. Runs as zkl_lock_set_lost_callback's callbacks do (the client's callback
/// thread, one at a time, no blocking zkl_ call inside). Once this function (or
/// zkl_semaphore_free) returns, the previous callback is not running and is never called again.
///
/// Ownership: userdata stays the caller's; zklock only passes it back.
/// Concurrency: any thread; from inside a callback, only for the same semaphore.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or freed semaphore.
#[no_mangle]
pub extern "C" fn zkl_semaphore_set_lost_callback(
    semaphore: *mut zkl_semaphore,
    callback: zkl_lease_lost_callback,
    userdata: *mut c_void,
) -> zkl_result {
    ffi_result!("zkl_semaphore_set_lost_callback", {
        non_null!(semaphore, "semaphore");
        handles::get(semaphore, "semaphore")?.lost_callback.set(callback, userdata);
        Ok(())
    })
}

/// Frees a semaphore handle. Leases acquired through it are not touched: each leases handle
/// stays valid until its own zkl_leases_free. A registered lost callback is not running once
/// this returns, and is never called again. The handle is invalid afterwards (any use of it,
/// a second free included, returns ZKL_INVALID_ARGUMENT).
///
/// Ownership: takes the semaphore. Freeing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, including inside callbacks. An acquisition still waiting is woken
/// and returns ZKL_CANCELLED, its nodes removed (one that got its leases just then gives them
/// back and returns ZKL_INVALID_ARGUMENT).
#[no_mangle]
pub extern "C" fn zkl_semaphore_free(semaphore: *mut zkl_semaphore) -> zkl_result {
    ffi_result!("zkl_semaphore_free", {
        if semaphore.is_null() {
            return Ok(());
        }
        let handle = handles::remove(semaphore, "semaphore")?;
        handle.lost_callback.set(None, std::ptr::null_mut());
        handle.freed.store(true, Ordering::Release);
        handle.cancel_waiting();
        Ok(())
    })
}

/// The hold of lease `index` of a leases handle.
fn lease(leases: *const zkl_leases, index: usize) -> Result<(Arc<LeasesHandle>, Hold), Failure> {
    non_null!(leases, "leases");
    let handle = handles::get(leases, "leases")?;
    let hold = handle.holds.get(index).cloned().ok_or_else(|| {
        Failure::invalid(format!("index {index} is out of range: these leases are {}", handle.holds.len()))
    })?;
    Ok((handle, hold))
}

/// How many leases the handle has, in *out: the n of its zkl_semaphore_acquire.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed leases handle.
#[no_mangle]
pub extern "C" fn zkl_leases_count(leases: *const zkl_leases, out: *mut usize) -> zkl_result {
    ffi_result!("zkl_leases_count", {
        non_null!(leases, "leases");
        non_null!(out, "out");
        write_out!(out, handles::get(leases, "leases")?.holds.len());
        Ok(())
    })
}

/// The fencing token of lease index (from 0, in the order the nodes were made), in *out: its
/// node's creation zxid, which rises across the leases of the path.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_LOCK_LOST if the lease was lost (a lost lease has no token); ZKL_NOT_OWNER once
/// released; ZKL_INVALID_ARGUMENT for NULL arguments, a freed handle or an index out of range.
#[no_mangle]
pub extern "C" fn zkl_leases_fencing_token(leases: *const zkl_leases, index: usize, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_leases_fencing_token", {
        non_null!(out, "out");
        let (handle, hold) = lease(leases, index)?;
        if handle.leases.lock().is_none() {
            return Err(released(&handle));
        }
        write_out!(out, hold.live_fencing_token()?);
        Ok(())
    })
}

/// The name of lease index's node (`_c_<uuid>-lease-<sequence>`, as Curator's
/// Lease.getNodeName), in *out.
///
/// Ownership: *out belongs to the leases handle and stays valid until zkl_leases_free.
/// Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments, a freed handle or an index out of range.
#[no_mangle]
pub extern "C" fn zkl_leases_node_name(leases: *const zkl_leases, index: usize, out: *mut *const c_char) -> zkl_result {
    ffi_result!("zkl_leases_node_name", {
        non_null!(out, "out");
        let (handle, _) = lease(leases, index)?;
        // The CString lives in the handle, which the registry keeps until zkl_leases_free.
        write_out!(out, handle.names[index].as_ptr());
        Ok(())
    })
}

/// The state of lease index, in *out: ZKL_HOLD_HELD, ZKL_HOLD_SUSPENDED (connection down: stop
/// touching the resource), ZKL_HOLD_LOST, or ZKL_HOLD_NONE once released (a lost lease too, once
/// zkl_leases_release reported it). No ZooKeeper traffic.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments, a freed handle or an index out of range.
#[no_mangle]
pub extern "C" fn zkl_leases_state(leases: *const zkl_leases, index: usize, out: *mut zkl_hold_state) -> zkl_result {
    ffi_result!("zkl_leases_state", {
        non_null!(out, "out");
        let (handle, hold) = lease(leases, index)?;
        // Released (a lost lease too, whose release reported it): nothing held any more.
        let released = handle.leases.lock().is_none();
        write_out!(out, if released { zkl_hold_state::ZKL_HOLD_NONE } else { hold.state().into() });
        Ok(())
    })
}

/// The state of the leases taken together, in *out: ZKL_HOLD_LOST if any lease is lost (see
/// zkl_leases_lost_lease), else ZKL_HOLD_SUSPENDED if any is suspended, else ZKL_HOLD_HELD;
/// ZKL_HOLD_NONE once released. No ZooKeeper traffic.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed handle.
#[no_mangle]
pub extern "C" fn zkl_leases_combined_state(leases: *const zkl_leases, out: *mut zkl_hold_state) -> zkl_result {
    ffi_result!("zkl_leases_combined_state", {
        non_null!(leases, "leases");
        non_null!(out, "out");
        let handle = handles::get(leases, "leases")?;
        let state = handle.leases.lock().as_ref().map_or(zkl_hold_state::ZKL_HOLD_NONE, |leases| leases.state().into());
        write_out!(out, state);
        Ok(())
    })
}

/// Which lease was lost first: its index (from 0, in the order the nodes were made) in *index
/// and why in *reason (NULL if not wanted), or -1 in *index while none is (and once released).
/// No ZooKeeper traffic.
///
/// Ownership: index and reason are the caller's. Concurrency: any thread, including inside
/// callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL leases or index, or a freed handle.
#[no_mangle]
pub extern "C" fn zkl_leases_lost_lease(
    leases: *const zkl_leases,
    index: *mut i64,
    reason: *mut zkl_lost_reason,
) -> zkl_result {
    ffi_result!("zkl_leases_lost_lease", {
        non_null!(leases, "leases");
        non_null!(index, "index");
        let handle = handles::get(leases, "leases")?;
        match handle.leases.lock().as_ref().and_then(Leases::lost_lease) {
            Some((lost, why)) => {
                write_out!(index, lost as i64);
                if !reason.is_null() {
                    write_out!(reason, why.into());
                }
            }
            None => write_out!(index, -1),
        }
        Ok(())
    })
}

fn released(handle: &LeasesHandle) -> Failure {
    Failure::new(zkl_result::ZKL_NOT_OWNER, format!("not owner on {}: these leases were released already", handle.path))
}

/// Releases every lease of the handle (each node deleted), returning once the server confirmed
/// each delete. The handle stays until zkl_leases_free.
///
/// Concurrency: any thread (not only the one that acquired); not from inside a zklock callback
/// (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_LOCK_LOST if a lease was lost (nothing is deleted for it; the others are
/// released); ZKL_CONNECTION_LOSS if the connection dropped first (the deletes go on in the
/// background); ZKL_NOT_OWNER if released already; ZKL_INVALID_ARGUMENT for a NULL or freed
/// handle.
#[no_mangle]
pub extern "C" fn zkl_leases_release(leases: *mut zkl_leases) -> zkl_result {
    ffi_result!("zkl_leases_release", {
        non_null!(leases, "leases");
        let handle = handles::get(leases, "leases")?;
        runtime::check_may_block()?;
        let Some(held) = handle.leases.lock().take() else { return Err(released(&handle)) };
        Ok(runtime::block_on(held.release())??)
    })
}

/// Frees a leases handle. Leases still held are released in the background (their nodes are
/// deleted; nothing is left behind). The handle is invalid afterwards (any use of it, a second
/// free included, returns ZKL_INVALID_ARGUMENT), and the lost callback is never called for it.
///
/// Ownership: takes the leases. Freeing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, including inside callbacks.
#[no_mangle]
pub extern "C" fn zkl_leases_free(leases: *mut zkl_leases) -> zkl_result {
    ffi_result!("zkl_leases_free", {
        if leases.is_null() {
            return Ok(());
        }
        let handle = handles::remove(leases, "leases")?;
        runtime::runtime()?;
        // Dropping the leases releases each in the background.
        drop(handle.leases.lock().take());
        Ok(())
    })
}
