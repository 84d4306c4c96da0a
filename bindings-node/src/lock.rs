//! A lock, driven by owner ids that the JavaScript layer assigns to async flows.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Buffer, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use zklock::Owner;

use crate::error;
use crate::hold::{self, NativeHold};
use crate::runtime::{self, Shared};

#[napi]
pub struct NativeLock {
    lock: zklock::Lock,
    /// Keeps the client (and its exit hook entry) alive as long as a lock made from it.
    _shared: Arc<Shared>,
    /// Abortable acquisitions in flight, by owner (the core allows one per owner).
    aborts: Arc<Mutex<Vec<(u64, CancellationToken)>>>,
}

thread_local! {
    /// The JavaScript thread's `worker_threads.threadId` (0 on the main thread), set by the
    /// JavaScript layer when it loads: labels tell the workers of one process apart.
    static THREAD_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Records the `worker_threads.threadId` of the calling JavaScript thread.
#[napi]
pub fn set_thread_id(thread_id: u32) {
    THREAD_ID.with(|id| id.set(thread_id));
}

/// The core's owner ids are 2^63 and up; JavaScript holds them without that bit, as numbers.
const UNIQUE_BIT: u64 = 1 << 63;

/// A new owner (an async flow) from the core's allocator, as a JavaScript number.
#[napi]
pub fn new_owner() -> i64 {
    (Owner::unique().id() & !UNIQUE_BIT) as i64
}

/// The owner for an id from [`new_owner`], labelled as messages and lock nodes name it: the async
/// flow, and the JavaScript thread it runs on.
fn owner(id: i64) -> Owner {
    let thread = THREAD_ID.with(|thread| thread.get());
    Owner::with_label(UNIQUE_BIT | id as u64, format!("async-flow:{id}@thread:{thread}"))
}

impl NativeLock {
    pub(crate) fn new(lock: zklock::Lock, shared: Arc<Shared>) -> NativeLock {
        NativeLock { lock, _shared: shared, aborts: Arc::default() }
    }
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

    /// Queues `owner` and resolves to its hold, or to `null` when `timeout_ms` passed (`0`: only
    /// tried) or when [`NativeLock::abort`] was called for it; the attempt's node is then removed.
    #[napi]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        owner_id: i64,
        timeout_ms: Option<f64>,
        abortable: bool,
    ) -> napi::Result<PromiseRaw<'env, Option<NativeHold>>> {
        let lock = self.lock.clone();
        let owner = owner(owner_id);
        let timeout = timeout_ms.map(|ms| Duration::from_secs_f64(ms / 1000.0));
        let abort = abortable.then(|| {
            let token = CancellationToken::new();
            self.aborts.lock().push((owner.id(), token.clone()));
            token
        });
        let aborts = self.aborts.clone();
        // Begun here, on the JavaScript thread: the attempt's create is sent before this returns,
        // so the acquisitions of one client queue in the order JavaScript made them.
        let begun = lock.begin_acquire(&owner, timeout);
        let acquisition = async move {
            let Some(abort) = abort else { return begun.await };
            // Dropping the core's future on abort removes the attempt's node in the background.
            let result = tokio::select! {
                result = begun => result,
                _ = abort.cancelled() => Ok(None),
            };
            aborts.lock().retain(|(id, _)| *id != owner.id());
            result
        };
        runtime::promise(env, acquisition, |hold| hold.map(NativeHold::new))
    }

    /// Gives up `owner`'s acquisition in flight, if any: its promise resolves to `null`.
    #[napi]
    pub fn abort(&self, owner_id: i64) {
        if let Some((_, token)) = self.aborts.lock().iter().find(|(id, _)| *id == UNIQUE_BIT | owner_id as u64) {
            token.cancel();
        }
    }

    /// Re-enters at once if `owner` holds the lock (no ZooKeeper traffic, no promise) and returns
    /// true; false if it holds nothing here; throws ZKLOCK_LOCK_LOST if its hold was lost.
    #[napi]
    pub fn reenter(&self, env: &Env, owner_id: i64) -> napi::Result<bool> {
        match self.lock.try_reenter(&owner(owner_id)) {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(err)) => Err(error::to_js(env, &err)),
        }
    }

    /// Releases one nested level at once when `owner` holds more than one (no ZooKeeper
    /// traffic, no promise) and returns true, or throws ZKLOCK_LOCK_LOST for a lost hold; false
    /// when the release needs [`NativeLock::release`].
    #[napi]
    pub fn release_nested(&self, env: &Env, owner_id: i64) -> napi::Result<bool> {
        match self.lock.release_nested(&owner(owner_id)) {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(err)) => Err(error::to_js(env, &err)),
        }
    }

    /// Releases one level of `owner`'s hold; at the last level, deletes the node and resolves
    /// once the server confirmed it.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env, owner_id: i64) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let owner = owner(owner_id);
        runtime::promise(env, async move { lock.release(&owner).await }, |()| ())
    }

    #[napi]
    pub fn is_held_by(&self, owner_id: i64) -> bool {
        self.lock.is_held_by(&owner(owner_id))
    }

    /// The state of `owner`'s hold (`held`, `suspended` or `lost`), if it holds the lock.
    #[napi]
    pub fn state_of(&self, owner_id: i64) -> Option<&'static str> {
        self.lock.state_of(&owner(owner_id)).map(hold::state_name)
    }

    /// Whether `owner` holds this lock or the other side of its read/write lock: its next
    /// acquisition here must be its own (a re-entry, a downgrade, a refused upgrade).
    #[napi]
    pub fn holds_either_side(&self, owner_id: i64) -> bool {
        self.lock.holds_either_side(&owner(owner_id))
    }

    /// `owner`'s hold, if it holds the lock.
    #[napi]
    pub fn hold_of(&self, owner_id: i64) -> Option<NativeHold> {
        self.lock.hold_of(&owner(owner_id)).map(|(hold, _)| NativeHold::new(hold))
    }

    #[napi]
    pub fn contenders<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.contenders().await }, |all| {
            all.into_iter().map(Participant::from).collect()
        })
    }

    /// Every participant holding now: the readers holding together, or the one holder.
    #[napi]
    pub fn holders<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.holders().await }, |all| {
            all.into_iter().map(Participant::from).collect()
        })
    }

    #[napi]
    pub fn holder<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Option<Participant>>> {
        let lock = self.lock.clone();
        runtime::promise(env, async move { lock.holder().await }, |holder| holder.map(Participant::from))
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
