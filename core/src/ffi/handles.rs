//! The registry behind `zkl_client *` and `zkl_lock *`. A handle's value is an id, unique for the
//! life of the process, not an address: looking it up instead of dereferencing it makes a NULL,
//! closed, freed, forged or wrong-kind handle a clear `ZKL_INVALID_ARGUMENT` rather than
//! undefined behaviour.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::client::{zkl_client, ClientHandle};
use super::error::Failure;
use super::lock::{zkl_lock, LockHandle};
use super::runtime;

enum Object {
    Client(Arc<ClientHandle>),
    Lock(Arc<LockHandle>),
}

struct Entry {
    fork_generation: u64,
    object: Object,
}

static HANDLES: RwLock<BTreeMap<usize, Entry>> = RwLock::new(BTreeMap::new());
/// Ids step by 16 so they look like (and are as unlikely to collide with garbage as) aligned
/// pointers; they start away from 0 so NULL is never one.
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);
const ID_STEP: usize = 16;

fn insert(object: Object) -> usize {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed).checked_mul(ID_STEP).expect("handle ids exhausted");
    HANDLES.write().insert(id, Entry { fork_generation: runtime::fork_generation(), object });
    id
}

pub(crate) fn new_client(client: ClientHandle) -> *mut zkl_client {
    insert(Object::Client(Arc::new(client))) as *mut zkl_client
}

pub(crate) fn new_lock(lock: LockHandle) -> *mut zkl_lock {
    insert(Object::Lock(Arc::new(lock))) as *mut zkl_lock
}

/// One kind of handle: its names for messages, and how to find it in an entry.
struct Kind<T> {
    name: &'static str,
    made_by: &'static str,
    /// The other kind, named when a handle of that kind is passed instead.
    other: &'static str,
    project: fn(&Object) -> Option<&Arc<T>>,
}

const CLIENT: Kind<ClientHandle> = Kind {
    name: "zkl_client",
    made_by: "zkl_client_connect",
    other: "zkl_lock",
    project: |object| match object {
        Object::Client(client) => Some(client),
        Object::Lock(_) => None,
    },
};

const LOCK: Kind<LockHandle> = Kind {
    name: "zkl_lock",
    made_by: "zkl_lock_new",
    other: "zkl_client",
    project: |object| match object {
        Object::Lock(lock) => Some(lock),
        Object::Client(_) => None,
    },
};

/// The live object of `kind` in `entry`, or why there is none; `what` names the argument.
fn find<'a, T>(entry: Option<&'a Entry>, what: &str, kind: &Kind<T>) -> Result<&'a Arc<T>, Failure> {
    let Some(entry) = entry else {
        return Err(Failure::invalid(format!(
            "{what} is not a live {} (closed or freed already, or never returned by {})",
            kind.name, kind.made_by
        )));
    };
    if entry.fork_generation != runtime::fork_generation() {
        return Err(Failure::invalid(format!(
            "{what} was created before fork(): create zklock objects in the process that uses them"
        )));
    }
    (kind.project)(&entry.object)
        .ok_or_else(|| Failure::invalid(format!("{what} is a {}, not a {}", kind.other, kind.name)))
}

fn get<T>(id: usize, what: &str, kind: &Kind<T>) -> Result<Arc<T>, Failure> {
    find(HANDLES.read().get(&id), what, kind).cloned()
}

/// Removes a handle: every later use of it is refused. Calls already in progress keep their
/// reference.
fn remove<T>(id: usize, what: &str, kind: &Kind<T>) -> Result<Arc<T>, Failure> {
    let mut handles = HANDLES.write();
    let object = find(handles.get(&id), what, kind)?.clone();
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
