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

fn check(entry: Option<&Entry>, what: &str, kind: &str, made_by: &str) -> Result<(), Failure> {
    match entry {
        None => Err(Failure::invalid(format!(
            "{what} is not a live {kind} (closed or freed already, or never returned by {made_by})"
        ))),
        Some(entry) if entry.fork_generation != runtime::fork_generation() => Err(Failure::invalid(format!(
            "{what} was created before fork(): create zklock objects in the process that uses them"
        ))),
        Some(_) => Ok(()),
    }
}

pub(crate) fn new_client(client: ClientHandle) -> *mut zkl_client {
    insert(Object::Client(Arc::new(client))) as *mut zkl_client
}

pub(crate) fn new_lock(lock: LockHandle) -> *mut zkl_lock {
    insert(Object::Lock(Arc::new(lock))) as *mut zkl_lock
}

const CLIENT: &str = "zkl_client";
const CLIENT_MAKER: &str = "zkl_client_connect";
const LOCK: &str = "zkl_lock";
const LOCK_MAKER: &str = "zkl_lock_new";

/// The client behind a handle (checked non-NULL by the caller); `what` names the argument.
pub(crate) fn client(handle: *const zkl_client, what: &str) -> Result<Arc<ClientHandle>, Failure> {
    let handles = HANDLES.read();
    let entry = handles.get(&(handle as usize));
    check(entry, what, CLIENT, CLIENT_MAKER)?;
    match entry.map(|entry| &entry.object) {
        Some(Object::Client(client)) => Ok(client.clone()),
        _ => Err(Failure::invalid(format!("{what} is a zkl_lock, not a zkl_client"))),
    }
}

/// The lock behind a handle (checked non-NULL by the caller).
pub(crate) fn lock(handle: *const zkl_lock, what: &str) -> Result<Arc<LockHandle>, Failure> {
    let handles = HANDLES.read();
    let entry = handles.get(&(handle as usize));
    check(entry, what, LOCK, LOCK_MAKER)?;
    match entry.map(|entry| &entry.object) {
        Some(Object::Lock(lock)) => Ok(lock.clone()),
        _ => Err(Failure::invalid(format!("{what} is a zkl_client, not a zkl_lock"))),
    }
}

/// Removes a client handle; every later use of it is refused. Calls already in progress keep
/// their reference.
pub(crate) fn remove_client(handle: *const zkl_client, what: &str) -> Result<Arc<ClientHandle>, Failure> {
    let mut handles = HANDLES.write();
    let id = handle as usize;
    check(handles.get(&id), what, CLIENT, CLIENT_MAKER)?;
    if !matches!(handles.get(&id), Some(Entry { object: Object::Client(_), .. })) {
        return Err(Failure::invalid(format!("{what} is a zkl_lock, not a zkl_client")));
    }
    match handles.remove(&id) {
        Some(Entry { object: Object::Client(client), .. }) => Ok(client),
        _ => unreachable!("checked above, under the same write lock"),
    }
}

/// Removes a lock handle, as `remove_client` does.
pub(crate) fn remove_lock(handle: *const zkl_lock, what: &str) -> Result<Arc<LockHandle>, Failure> {
    let mut handles = HANDLES.write();
    let id = handle as usize;
    check(handles.get(&id), what, LOCK, LOCK_MAKER)?;
    if !matches!(handles.get(&id), Some(Entry { object: Object::Lock(_), .. })) {
        return Err(Failure::invalid(format!("{what} is a zkl_client, not a zkl_lock")));
    }
    match handles.remove(&id) {
        Some(Entry { object: Object::Lock(lock), .. }) => Ok(lock),
        _ => unreachable!("checked above, under the same write lock"),
    }
}
