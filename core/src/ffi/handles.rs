//! The registry behind `zkl_client *`, `zkl_lock *` and the semaphore's and multi-lock's handles.
//! A handle's value is an id, unique for the
//! life of the process, not an address: looking it up instead of dereferencing it makes a NULL,
//! closed, freed, forged or wrong-kind handle a clear `ZKL_INVALID_ARGUMENT` rather than
//! undefined behaviour.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::client::{zkl_client, ClientHandle};
use super::error::Failure;
use super::lock::{zkl_lock, LockHandle};
use super::multi_lock::{zkl_multi_guard, zkl_multi_lock, MultiGuardHandle, MultiLockHandle};
use super::semaphore::{zkl_leases, zkl_semaphore, LeasesHandle, SemaphoreHandle};

enum Object {
    Client(Arc<ClientHandle>),
    Lock(Arc<LockHandle>),
    Semaphore(Arc<SemaphoreHandle>),
    Leases(Arc<LeasesHandle>),
    MultiLock(Arc<MultiLockHandle>),
    MultiGuard(Arc<MultiGuardHandle>),
}

impl Object {
    /// The C type of the handle, for messages.
    fn name(&self) -> &'static str {
        match self {
            Object::Client(_) => "zkl_client",
            Object::Lock(_) => "zkl_lock",
            Object::Semaphore(_) => "zkl_semaphore",
            Object::Leases(_) => "zkl_leases",
            Object::MultiLock(_) => "zkl_multi_lock",
            Object::MultiGuard(_) => "zkl_multi_guard",
        }
    }
}

type Registry = RwLock<BTreeMap<usize, Object>>;

/// The live handles of this process. A forked child gets a fresh, empty registry (see
/// `forget_after_fork`): the parent's may be locked by a thread the child does not have, and its
/// objects belong to the parent's runtime and sessions. Never freed.
static HANDLES: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
/// The parent's registry in a forked child, kept reachable for leak checkers; never used.
static ABANDONED: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
/// In a forked child, ids below this were handed out before the fork (0 elsewhere).
static MADE_BEFORE_FORK: AtomicUsize = AtomicUsize::new(0);

fn registry() -> &'static Registry {
    let current = HANDLES.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: published below and never freed.
        return unsafe { &*current };
    }
    let fresh = Box::into_raw(Box::new(Registry::new(BTreeMap::new())));
    match HANDLES.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: published, so never freed.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` came from Box::into_raw above and was never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: published, so never freed.
            unsafe { &*winner }
        }
    }
}

/// Called in a forked child, before it runs anything else: the child starts with an empty
/// registry, and every id handed out before the fork is refused as such.
pub(crate) fn forget_after_fork() {
    let parents = HANDLES.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !parents.is_null() {
        ABANDONED.store(parents, Ordering::Release);
    }
    MADE_BEFORE_FORK.store(NEXT_ID.load(Ordering::Acquire).saturating_mul(ID_STEP), Ordering::Release);
}

/// Ids step by 16 so they look like (and are as unlikely to collide with garbage as) aligned
/// pointers; they start away from 0 so NULL is never one.
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);
const ID_STEP: usize = 16;

fn insert(object: Object) -> usize {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed).checked_mul(ID_STEP).expect("handle ids exhausted");
    registry().write().insert(id, object);
    id
}

pub(crate) fn new_client(client: ClientHandle) -> *mut zkl_client {
    insert(Object::Client(Arc::new(client))) as *mut zkl_client
}

pub(crate) fn new_lock(lock: LockHandle) -> *mut zkl_lock {
    insert(Object::Lock(Arc::new(lock))) as *mut zkl_lock
}

pub(crate) fn new_semaphore(semaphore: SemaphoreHandle) -> *mut zkl_semaphore {
    insert(Object::Semaphore(Arc::new(semaphore))) as *mut zkl_semaphore
}

pub(crate) fn new_leases(leases: LeasesHandle) -> *mut zkl_leases {
    insert(Object::Leases(Arc::new(leases))) as *mut zkl_leases
}

pub(crate) fn new_multi_lock(multi: MultiLockHandle) -> *mut zkl_multi_lock {
    insert(Object::MultiLock(Arc::new(multi))) as *mut zkl_multi_lock
}

pub(crate) fn new_multi_guard(guard: MultiGuardHandle) -> *mut zkl_multi_guard {
    insert(Object::MultiGuard(Arc::new(guard))) as *mut zkl_multi_guard
}

/// One kind of handle: its names for messages, and how to find it in an entry.
struct Kind<T> {
    name: &'static str,
    made_by: &'static str,
    project: fn(&Object) -> Option<&Arc<T>>,
}

const CLIENT: Kind<ClientHandle> = Kind {
    name: "zkl_client",
    made_by: "zkl_client_connect",
    project: |object| match object {
        Object::Client(client) => Some(client),
        _ => None,
    },
};

const LOCK: Kind<LockHandle> = Kind {
    name: "zkl_lock",
    made_by: "zkl_lock_new",
    project: |object| match object {
        Object::Lock(lock) => Some(lock),
        _ => None,
    },
};

const SEMAPHORE: Kind<SemaphoreHandle> = Kind {
    name: "zkl_semaphore",
    made_by: "zkl_semaphore_new",
    project: |object| match object {
        Object::Semaphore(semaphore) => Some(semaphore),
        _ => None,
    },
};

const LEASES: Kind<LeasesHandle> = Kind {
    name: "zkl_leases",
    made_by: "zkl_semaphore_acquire",
    project: |object| match object {
        Object::Leases(leases) => Some(leases),
        _ => None,
    },
};

const MULTI_LOCK: Kind<MultiLockHandle> = Kind {
    name: "zkl_multi_lock",
    made_by: "zkl_multi_lock_new",
    project: |object| match object {
        Object::MultiLock(multi) => Some(multi),
        _ => None,
    },
};

const MULTI_GUARD: Kind<MultiGuardHandle> = Kind {
    name: "zkl_multi_guard",
    made_by: "zkl_multi_lock_acquire",
    project: |object| match object {
        Object::MultiGuard(guard) => Some(guard),
        _ => None,
    },
};

/// The live object of `kind` with id `id`, or why there is none; `what` names the argument.
fn find<'a, T>(id: usize, object: Option<&'a Object>, what: &str, kind: &Kind<T>) -> Result<&'a Arc<T>, Failure> {
    let Some(object) = object else {
        if id < MADE_BEFORE_FORK.load(Ordering::Acquire) {
            return Err(Failure::invalid(format!(
                "{what} was created before fork(): create zklock objects in the process that uses them"
            )));
        }
        return Err(Failure::invalid(format!(
            "{what} is not a live {} (closed or freed already, or never returned by {})",
            kind.name, kind.made_by
        )));
    };
    (kind.project)(object)
        .ok_or_else(|| Failure::invalid(format!("{what} is a {}, not a {}", object.name(), kind.name)))
}

fn get<T>(id: usize, what: &str, kind: &Kind<T>) -> Result<Arc<T>, Failure> {
    find(id, registry().read().get(&id), what, kind).cloned()
}

/// Removes a handle: every later use of it is refused. Calls already in progress keep their
/// reference.
fn remove<T>(id: usize, what: &str, kind: &Kind<T>) -> Result<Arc<T>, Failure> {
    let mut handles = registry().write();
    let object = find(id, handles.get(&id), what, kind)?.clone();
    handles.remove(&id);
    Ok(object)
}

/// The client behind a handle (checked non-NULL by the caller); `what` names the argument.
pub(crate) fn client(handle: *const zkl_client, what: &str) -> Result<Arc<ClientHandle>, Failure> {
    get(handle as usize, what, &CLIENT)
}

/// The lock behind a handle (checked non-NULL by the caller).
pub(crate) fn lock(handle: *const zkl_lock, what: &str) -> Result<Arc<LockHandle>, Failure> {
    get(handle as usize, what, &LOCK)
}

/// Removes a client handle (see `remove`).
pub(crate) fn remove_client(handle: *const zkl_client, what: &str) -> Result<Arc<ClientHandle>, Failure> {
    remove(handle as usize, what, &CLIENT)
}

/// Removes a lock handle (see `remove`).
pub(crate) fn remove_lock(handle: *const zkl_lock, what: &str) -> Result<Arc<LockHandle>, Failure> {
    remove(handle as usize, what, &LOCK)
}

/// The semaphore behind a handle (checked non-NULL by the caller).
pub(crate) fn semaphore(handle: *const zkl_semaphore, what: &str) -> Result<Arc<SemaphoreHandle>, Failure> {
    get(handle as usize, what, &SEMAPHORE)
}

/// Removes a semaphore handle (see `remove`).
pub(crate) fn remove_semaphore(handle: *const zkl_semaphore, what: &str) -> Result<Arc<SemaphoreHandle>, Failure> {
    remove(handle as usize, what, &SEMAPHORE)
}

/// The leases behind a handle (checked non-NULL by the caller).
pub(crate) fn leases(handle: *const zkl_leases, what: &str) -> Result<Arc<LeasesHandle>, Failure> {
    get(handle as usize, what, &LEASES)
}

/// Removes a leases handle (see `remove`).
pub(crate) fn remove_leases(handle: *const zkl_leases, what: &str) -> Result<Arc<LeasesHandle>, Failure> {
    remove(handle as usize, what, &LEASES)
}

/// The multi-lock behind a handle (checked non-NULL by the caller).
pub(crate) fn multi_lock(handle: *const zkl_multi_lock, what: &str) -> Result<Arc<MultiLockHandle>, Failure> {
    get(handle as usize, what, &MULTI_LOCK)
}

/// Removes a multi-lock handle (see `remove`).
pub(crate) fn remove_multi_lock(handle: *const zkl_multi_lock, what: &str) -> Result<Arc<MultiLockHandle>, Failure> {
    remove(handle as usize, what, &MULTI_LOCK)
}

/// The multi-lock guard behind a handle (checked non-NULL by the caller).
pub(crate) fn multi_guard(handle: *const zkl_multi_guard, what: &str) -> Result<Arc<MultiGuardHandle>, Failure> {
    get(handle as usize, what, &MULTI_GUARD)
}

/// Removes a multi-lock guard handle (see `remove`).
pub(crate) fn remove_multi_guard(handle: *const zkl_multi_guard, what: &str) -> Result<Arc<MultiGuardHandle>, Failure> {
    remove(handle as usize, what, &MULTI_GUARD)
}

/// Whether `id` is a live handle now (for a callback about to name it).
pub(crate) fn is_live(id: usize) -> bool {
    registry().read().contains_key(&id)
}
