//! The registry behind `zkl_client *`, `zkl_lock *` and the semaphore's and multi-lock's handles.
//! A handle's value is an id, unique for the
//! life of the process, not an address: looking it up instead of dereferencing it makes a NULL,
//! closed, freed, forged or wrong-kind handle a clear `ZKL_INVALID_ARGUMENT` rather than
//! undefined behaviour.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::error::Failure;

/// A kind of handle, implemented by its C type (`zkl_client`, ...) in its own module, as
/// rustls-ffi's `Castable`: the registry knows no kind, so no list here names them all.
pub(crate) trait Handle: Sized + 'static {
    /// The object a handle of this kind stands for.
    type Object: Send + Sync + 'static;
    /// The C type of the handle, for messages.
    const NAME: &'static str;
    /// The function that makes handles of this kind, for messages.
    const MADE_BY: &'static str;
}

/// A live handle's object, and the C type it was made as.
struct Object {
    name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl Object {
    /// The C type of the handle, for messages.
    fn name(&self) -> &'static str {
        self.name
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

/// A new handle of kind `H` for `object`.
pub(crate) fn new<H: Handle>(object: H::Object) -> *mut H {
    insert(Object { name: H::NAME, value: Arc::new(object) }) as *mut H
}

/// The live object of kind `H` with id `id`, or why there is none; `what` names the argument.
fn find<H: Handle>(id: usize, object: Option<&Object>, what: &str) -> Result<Arc<H::Object>, Failure> {
    let Some(object) = object else {
        if id < MADE_BEFORE_FORK.load(Ordering::Acquire) {
            return Err(Failure::invalid(format!(
                "{what} was created before fork(): create zklock objects in the process that uses them"
            )));
        }
        return Err(Failure::invalid(format!(
            "{what} is not a live {} (closed or freed already, or never returned by {})",
            H::NAME,
            H::MADE_BY
        )));
    };
    object
        .value
        .clone()
        .downcast::<H::Object>()
        .map_err(|_| Failure::invalid(format!("{what} is a {}, not a {}", object.name(), H::NAME)))
}

/// The object behind a handle (checked non-NULL by the caller); `what` names the argument.
pub(crate) fn get<H: Handle>(handle: *const H, what: &str) -> Result<Arc<H::Object>, Failure> {
    let id = handle as usize;
    find::<H>(id, registry().read().get(&id), what)
}

/// Removes a handle: every later use of it is refused. Calls already in progress keep their
/// reference.
pub(crate) fn remove<H: Handle>(handle: *const H, what: &str) -> Result<Arc<H::Object>, Failure> {
    let id = handle as usize;
    let mut handles = registry().write();
    let object = find::<H>(id, handles.get(&id), what)?;
    handles.remove(&id);
    Ok(object)
}

/// Whether `id` is a live handle now (for a callback about to name it).
pub(crate) fn is_live(id: usize) -> bool {
    registry().read().contains_key(&id)
}
