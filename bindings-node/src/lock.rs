//! A lock, driven by owner ids that the JavaScript layer assigns to async flows.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Buffer, Function, Object, PromiseRaw, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, JsValue};
use napi_derive::napi;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use zklock::binding::{LockBinding, OwnerBinding};
use zklock::{HoldState, Owner};

use crate::error;
use crate::hold::NativeHold;
use crate::names::camel_case;
use crate::runtime::{self, Shared};

#[napi]
pub struct NativeLock {
    pub(crate) lock: zklock::Lock,
    /// This lock's key in [`LOCKS`], for the reentrant fast path.
    key: u32,
    /// Keeps the client (and its exit hook entry) alive as long as a lock made from it.
    pub(crate) shared: Arc<Shared>,
    /// Abortable acquisitions in flight, by owner (the core allows one per owner).
    aborts: Arc<Mutex<Vec<(u64, CancellationToken)>>>,
}

thread_local! {
    /// The live locks of this JavaScript thread, by key: the reentrant fast path takes plain
    /// numbers, because napi-rs's per-call borrow tracking of a `&self` receiver costs more than
    /// the whole re-entry (~0.45 µs against ~0.15 µs for a function of numbers).
    static LOCKS: std::cell::RefCell<(u32, LocksByKey)> = std::cell::RefCell::default();
    /// The JavaScript thread's `worker_threads.threadId` (0 on the main thread), set by the
    /// JavaScript layer when it loads: labels tell the workers of one process apart.
    static THREAD_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static LAST_OWNER: std::cell::RefCell<Option<Owner>> = const { std::cell::RefCell::new(None) };
}

type LocksByKey = std::collections::HashMap<u32, zklock::Lock, std::hash::BuildHasherDefault<KeyHasher>>;

/// Keys are distinct small numbers: one multiply spreads them, where SipHash cost a tenth of a
/// re-entry.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8 | u64::from(*byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, key: u32) {
        self.0 = u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Records the `worker_threads.threadId` of the calling JavaScript thread.
#[napi]
pub fn set_thread_id(thread_id: u32) {
    THREAD_ID.with(|id| id.set(thread_id));
    LAST_OWNER.with(|last| last.borrow_mut().take());
}

/// A new owner (an async flow) from the core's allocator, as a JavaScript number (the core's
/// serial of a unique owner).
#[napi]
pub fn new_owner() -> i64 {
    Owner::unique_serial()
}

/// The owner for an id from [`new_owner`], labelled as messages and lock nodes name it: the async
/// flow, and the JavaScript thread it runs on.
pub(crate) fn owner(id: i64) -> Owner {
    with_owner(id, Owner::clone)
}

/// Calls `f` with the owner for an id from [`new_owner`] (see [`owner`]), lent: the last one made
/// is kept, because a label costs more than a re-entry and a flow re-enters in runs.
fn with_owner<R>(id: i64, f: impl FnOnce(&Owner) -> R) -> R {
    LAST_OWNER.with(|last| {
        let mut last = last.borrow_mut();
        let owner = match &*last {
            Some(owner) if owner.id() == Owner::unique_id(id) => owner,
            _ => {
                let thread = THREAD_ID.with(|thread| thread.get());
                let label = format!("async-flow:{id}@thread:{thread}");
                last.insert(Owner::from_serial(id, label))
            }
        };
        f(owner)
    })
}

impl NativeLock {
    pub(crate) fn new(lock: zklock::Lock, shared: Arc<Shared>) -> NativeLock {
        let key = LOCKS.with(|locks| {
            let (last, locks) = &mut *locks.borrow_mut();
            *last = last.wrapping_add(1);
            while locks.contains_key(last) {
                *last = last.wrapping_add(1);
            }
            locks.insert(*last, lock.clone());
            *last
        });
        NativeLock { lock, key, shared, aborts: Arc::default() }
    }
}

impl Drop for NativeLock {
    fn drop(&mut self) {
        // Finalized on its JavaScript thread; `try_with`, as the thread may be ending.
        let _ = LOCKS.try_with(|locks| locks.borrow_mut().1.remove(&self.key));
    }
}

fn with_lock<T>(
    env: &Env,
    key: u32,
    f: impl FnOnce(&zklock::Lock) -> Option<zklock::Result<T>>,
) -> napi::Result<Option<T>> {
    LOCKS.with(|locks| match locks.borrow().1.get(&key) {
        Some(lock) => f(lock).transpose().map_err(|err| error::to_js(env, &err)),
        None => Err(napi::Error::new(napi::Status::InvalidArg, format!("no live lock with key {key}"))),
    })
}

/// The reentrant fast path, as two plain Node-API functions of numbers: `reenter(lockKey,
/// ownerId)` and `releaseNested(lockKey, ownerId)`. They skip napi-rs's per-call machinery (its
/// borrow scope allocates and locks on every call), which cost more than the re-entry itself.
#[napi]
pub fn fast_path(env: &Env) -> napi::Result<napi::bindgen_prelude::Object<'_>> {
    use napi::sys;
    let object = napi::bindgen_prelude::Object::new(env)?;
    let functions: [(&std::ffi::CStr, sys::napi_callback); 2] =
        [(c"reenter", Some(reenter_raw)), (c"releaseNested", Some(release_nested_raw))];
    for (name, callback) in functions {
        let mut function = std::ptr::null_mut();
        // SAFETY: Node-API calls on this JavaScript thread's env, with a live object.
        unsafe {
            napi::check_status!(sys::napi_create_function(
                env.raw(),
                name.as_ptr(),
                name.count_bytes() as isize,
                callback,
                std::ptr::null_mut(),
                &mut function,
            ))?;
            napi::check_status!(sys::napi_set_named_property(
                env.raw(),
                napi::JsValue::raw(&object),
                name.as_ptr(),
                function
            ))?;
        }
    }
    Ok(object)
}

/// Re-enters at once if `owner` holds the lock of `lock_key` (no ZooKeeper traffic, no promise)
/// and returns its hold's id ([`zklock::Hold::id`]), or 0 if it must acquire; throws
/// ZKLOCK_LOCK_LOST if its hold was lost.
unsafe extern "C" fn reenter_raw(
    env: napi::sys::napi_env,
    info: napi::sys::napi_callback_info,
) -> napi::sys::napi_value {
    fast_call(env, info, |env, lock_key, owner_id| {
        let id = with_lock(env, lock_key, |lock| with_owner(owner_id, |owner| lock.try_reenter(owner)))?;
        Ok(Answer::Number(id.map_or(0.0, |id| id as f64)))
    })
}

/// Releases one nested level at once when `owner` holds more than one (no ZooKeeper traffic,
/// no promise) and returns true, or throws ZKLOCK_LOCK_LOST for a lost hold; false when the
/// release needs [`NativeLock::release`].
unsafe extern "C" fn release_nested_raw(
    env: napi::sys::napi_env,
    info: napi::sys::napi_callback_info,
) -> napi::sys::napi_value {
    fast_call(env, info, |env, lock_key, owner_id| {
        let released = with_lock(env, lock_key, |lock| with_owner(owner_id, |owner| lock.release_nested(owner)))?;
        Ok(Answer::Boolean(released.is_some()))
    })
}

/// What a fast-path function returns.
enum Answer {
    Number(f64),
    Boolean(bool),
}

/// Calls `f(env, lock_key, owner_id)` with the two numbers a fast-path function takes, throwing
/// what it fails with (and a panic as an error, never across the C boundary).
///
/// # Safety
/// A Node-API callback's own `env` and `info`.
unsafe fn fast_call(
    env: napi::sys::napi_env,
    info: napi::sys::napi_callback_info,
    f: impl FnOnce(&Env, u32, i64) -> napi::Result<Answer>,
) -> napi::sys::napi_value {
    use napi::sys;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let env = Env::from_raw(env);
        let mut argc = 2;
        let mut argv = [std::ptr::null_mut(); 2];
        let (mut lock_key, mut owner_id) = (0u32, 0i64);
        // SAFETY: the callback's own env and info; argv has room for argc values.
        let read = unsafe {
            sys::napi_get_cb_info(
                env.raw(),
                info,
                &mut argc,
                argv.as_mut_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            ) == sys::Status::napi_ok
                && argc == 2
                && sys::napi_get_value_uint32(env.raw(), argv[0], &mut lock_key) == sys::Status::napi_ok
                && sys::napi_get_value_int64(env.raw(), argv[1], &mut owner_id) == sys::Status::napi_ok
        };
        if !read {
            return Err(napi::Error::new(napi::Status::InvalidArg, "expected (lockKey: number, ownerId: number)"));
        }
        let mut value = std::ptr::null_mut();
        // SAFETY: as above.
        let status = unsafe {
            match f(&env, lock_key, owner_id)? {
                Answer::Number(number) => sys::napi_create_double(env.raw(), number, &mut value),
                Answer::Boolean(boolean) => sys::napi_get_boolean(env.raw(), boolean, &mut value),
            }
        };
        napi::check_status!(status).map(|()| value)
    }));
    let error = match result {
        Ok(Ok(value)) => return value,
        Ok(Err(error)) => error,
        Err(_) => napi::Error::from_reason("zklock: a panic in the reentrant fast path"),
    };
    // SAFETY: throwing on this callback's env, which then returns no value.
    unsafe { napi::JsError::from(error).throw_into(env) };
    std::ptr::null_mut()
}

#[napi]
impl NativeLock {
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.lock.path().to_owned()
    }

    /// `exclusive` for a mutex, `read` or `write` for the sides of a read/write lock.
    #[napi(getter)]
    pub fn mode(&self) -> &'static str {
        self.lock.mode().as_str()
    }

    /// Queues `owner` and resolves to `owner` once it holds (its hold is [`NativeLock::hold_of`]),
    /// or to `null` when `timeout_ms` passed (`0`: only tried) or when [`NativeLock::abort`] was
    /// called for it, once the attempt's node is removed. With `run` (withLock's function), it
    /// resolves to `[owner, run]` once held, and rejects with ZKLOCK_TIMEOUT when not held.
    ///
    /// What the JavaScript layer needs when it settles travels with the promise, not in a
    /// closure: a queued acquisition is then its promise alone in V8's heap. (At 10,000 queued,
    /// V8 sized its young generation by what survived of the queueing, and doubled it again in
    /// the handoffs that followed.) And the promise settles with no object that would outlive
    /// the hold: made when the queue formed, it is in the old generation by then, where a value
    /// it kept would live until the next full collection.
    #[napi(ts_return_type = "Promise<number | [number, Function] | null>")]
    pub fn acquire(
        &self,
        env: &Env,
        owner_id: i64,
        timeout_ms: Option<f64>,
        abortable: bool,
        run: Option<Unknown<'_>>,
    ) -> napi::Result<napi::sys::napi_value> {
        let lock = self.lock.clone();
        let owner = owner(owner_id);
        let timeout = timeout_ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
        let abort = abortable.then(|| {
            let token = CancellationToken::new();
            self.aborts.lock().push((owner.id(), token.clone()));
            token
        });
        let aborts = self.aborts.clone();
        let run = run.map(|run| runtime::JsRef::new(env, run.raw())).transpose()?;
        // Begun here, on the JavaScript thread: the attempt's create is sent before this returns,
        // so the acquisitions of one client queue in the order JavaScript made them.
        let mut acquisition = match abort {
            None => lock.begin_acquire(&owner, timeout),
            // An abort ends it as a timeout does: it resolves to null once the node is removed.
            Some(abort) => lock.begin_acquire_abortable(&owner, timeout, abort),
        };
        // Without `run`, not held settles as null; with it, as withLock's timeout error (the
        // only way a withLock's native acquisition ends unheld: it is never aborted).
        let rejects_unheld = run.is_some();
        let acquisition = async move {
            // Awaited in place, not moved into the await: every waiter's task is this block.
            let held = (&mut acquisition).await.and_then(|acquired| match acquired {
                zklock::Acquired::Held(_) => Ok(true),
                // Only when the flow re-entered between its `reenter` and this call.
                zklock::Acquired::Reentered => Ok(lock.hold_of(&owner).is_some()),
                zklock::Acquired::NotAcquired if rejects_unheld => Err(lock.timeout_error(timeout.unwrap_or_default())),
                zklock::Acquired::NotAcquired => Ok(false),
            });
            if abortable {
                aborts.lock().retain(|(id, _)| *id != owner.id());
            }
            held
        };
        runtime::settled_by(env, acquisition, move |env, held| {
            // Taken back on the JavaScript thread, whatever the outcome.
            let run = run.map(|run| run.take(env)).transpose()?;
            match (held, run) {
                (Err(err), _) => Err(error::to_js(env, &err)),
                (Ok(false), _) => runtime::null(env),
                (Ok(true), None) => runtime::number(env, owner_id),
                (Ok(true), Some(run)) => runtime::array(env, &[runtime::number(env, owner_id)?, run]),
            }
        })
    }

    /// The ZKLOCK_TIMEOUT error for this lock not had within `timeout_ms`, in core's words (as
    /// every language reports it): for `withLock`, whose acquisition resolves to `null`.
    #[napi]
    pub fn timeout_error<'env>(&self, env: &'env Env, timeout_ms: f64) -> napi::Result<Object<'env>> {
        error::build(env, &self.lock.timeout_error(Duration::from_secs_f64(timeout_ms.max(0.0) / 1000.0)))
    }

    /// Gives up `owner`'s acquisition in flight, if any: its promise resolves to `null`.
    #[napi]
    pub fn abort(&self, owner_id: i64) {
        if let Some((_, token)) = self.aborts.lock().iter().find(|(id, _)| *id == Owner::unique_id(owner_id)) {
            token.cancel();
        }
    }

    /// Releases one level of `owner`'s hold; at the last level, deletes the node and resolves
    /// once the server confirmed it.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env, owner_id: i64) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let owner = owner(owner_id);
        runtime::promise(env, async move { lock.release(&owner).await }, |_, ()| ())
    }

    /// This lock's key for the reentrant fast path ([`reenter`], [`release_nested`]).
    #[napi(getter)]
    pub fn key(&self) -> u32 {
        self.key
    }

    /// The core's owner table of this lock ([`zklock::Lock::owner_table_id`]): the same for
    /// every lock object of the client on the path (and both sides of a read/write lock), so
    /// that an async flow is one owner through any of them. Below 2^53: a JavaScript number.
    #[napi(getter)]
    pub fn table(&self) -> f64 {
        self.lock.owner_table_id() as f64
    }

    /// `owner`'s hold, if it holds the lock.
    #[napi]
    pub fn hold_of(&self, owner_id: i64) -> Option<NativeHold> {
        self.lock.hold_of(&owner(owner_id)).map(|(hold, _)| NativeHold::new(hold))
    }

    /// Whether some owner (async flow) holds the lock through this lock object and may act on it
    /// (not suspended, not lost).
    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        self.lock.is_held_by_any()
    }

    /// The state of `owner`'s hold (`held`, `suspended` or `lost`) if it holds the lock, or else
    /// that of the latest hold through this lock object not yet released; null if none.
    #[napi]
    pub fn state_preferring(&self, owner_id: Option<i64>) -> Option<&'static str> {
        self.lock.state_preferring(owner_id.map(owner).as_ref()).map(HoldState::as_str)
    }

    /// Whether `owner` holds this lock or the other side of its read/write lock: its next
    /// acquisition here must be its own (a re-entry, a downgrade, a refused upgrade).
    #[napi]
    pub fn holds_either_side(&self, owner_id: i64) -> bool {
        self.lock.holds_either_side(&owner(owner_id))
    }

    /// Who acquires for a flow whose owner is `owner_id` (core's
    /// `LockBinding::serial_to_acquire`): that owner if it holds either side (a re-entry, a
    /// downgrade, a refused upgrade), else a new one.
    #[napi]
    pub fn owner_to_acquire(&self, owner_id: Option<i64>) -> i64 {
        self.lock.serial_to_acquire(owner_id)
    }

    /// Calls `callback` with the reason (`nodeDeleted`, ...) once for each hold of this lock that
    /// is lost, by the core's rule ([`zklock::Lock::on_lost`]), until the watch is stopped or
    /// collected. It never keeps the process alive.
    #[napi]
    pub fn watch_lost(&self, callback: Function<String, ()>) -> napi::Result<NativeLostWatch> {
        let notify = callback.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
        let subscription = self.lock.on_lost(move |_owner, reason| {
            notify.call(camel_case(reason.as_str()), ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(NativeLostWatch { subscription: Mutex::new(Some(subscription)) })
    }

    #[napi]
    pub fn contenders<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.contenders().await }, |_, all| {
            all.into_iter().map(Participant::from).collect()
        })
    }

    /// Every participant holding now: the readers holding together, or the one holder.
    #[napi]
    pub fn holders<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.holders().await }, |_, all| {
            all.into_iter().map(Participant::from).collect()
        })
    }

    #[napi]
    pub fn holder<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Option<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.holder().await }, |_, holder| holder.map(Participant::from))
    }
}

/// A lock's lost callback ([`NativeLock::watch_lost`]), registered until stopped.
#[napi]
pub struct NativeLostWatch {
    subscription: Mutex<Option<zklock::LostSubscription>>,
}

#[napi]
impl NativeLostWatch {
    #[napi]
    pub fn stop(&self) {
        drop(self.subscription.lock().take());
    }
}

/// One contender in a lock's queue.
#[napi(object)]
pub struct Participant {
    pub node: String,
    pub sequence: Option<i64>,
    /// `exclusive`, `read` or `write`, by the node's name; absent for a node of no known lock.
    pub mode: Option<String>,
    pub fencing_token: BigInt,
    pub session_id: BigInt,
    pub identity: Option<Identity>,
    pub data: Buffer,
}

/// Who a lock node belongs to, as zklock records it in any language.
#[napi(object)]
pub struct Identity {
    pub host: String,
    pub pid: u32,
    pub owner: String,
    pub lang: String,
    pub identifier: Option<String>,
}

impl From<zklock::Participant> for Participant {
    fn from(p: zklock::Participant) -> Participant {
        Participant {
            identity: p.identity.map(|i| Identity {
                host: i.host,
                pid: i.pid,
                owner: i.owner,
                lang: i.lang,
                identifier: i.identifier,
            }),
            mode: p.mode.map(|mode| mode.as_str().to_owned()),
            node: p.node,
            sequence: p.sequence,
            fencing_token: BigInt::from(p.fencing_token),
            session_id: BigInt::from(p.session_id),
            data: p.data.into(),
        }
    }
}
