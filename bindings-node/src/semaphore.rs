//! The counting semaphore and its leases: the core's, translated. Acquisitions are not owned by
//! an async flow (a lease is not reentrant), so an abortable one is named by an id that the
//! JavaScript layer picks.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Function, Object, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use zklock::binding::Releasable;

use crate::hold::{watch_first_loss, Lost, NativeHold};
use crate::lock::Participant;
use crate::runtime::{self, Shared};

/// Abortable acquisitions in flight, by the id the JavaScript layer gave each.
pub(crate) type Aborts = Arc<Mutex<Vec<(u32, CancellationToken)>>>;

/// The acquisition `acquire(abort)`, given a token that [`abort`] with `abort_id` cancels (none
/// without an id), which is forgotten again once the acquisition ends.
pub(crate) fn abortable<F: Future>(
    aborts: &Aborts,
    abort_id: Option<u32>,
    acquire: impl FnOnce(Option<CancellationToken>) -> F,
) -> impl Future<Output = F::Output> {
    let abort = abort_id.map(|id| {
        let token = CancellationToken::new();
        aborts.lock().push((id, token.clone()));
        token
    });
    let acquisition = acquire(abort);
    let aborts = aborts.clone();
    async move {
        let result = acquisition.await;
        if let Some(id) = abort_id {
            aborts.lock().retain(|(each, _)| *each != id);
        }
        result
    }
}

pub(crate) fn abort(aborts: &Aborts, abort_id: u32) {
    if let Some((_, token)) = aborts.lock().iter().find(|(id, _)| *id == abort_id) {
        token.cancel();
    }
}

pub(crate) fn timeout(timeout_ms: Option<f64>) -> Option<Duration> {
    timeout_ms.map(|ms| Duration::from_secs_f64(ms / 1000.0))
}

#[napi]
pub struct NativeSemaphore {
    pub(crate) semaphore: zklock::Semaphore,
    pub(crate) shared: Arc<Shared>,
    aborts: Aborts,
}

impl NativeSemaphore {
    pub(crate) fn new(semaphore: zklock::Semaphore, shared: Arc<Shared>) -> NativeSemaphore {
        NativeSemaphore { semaphore, shared, aborts: Aborts::default() }
    }
}

#[napi]
impl NativeSemaphore {
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.semaphore.path().to_owned()
    }

    /// Acquires `n` leases, all or nothing; resolves to them, or to `null` when `timeout_ms`
    /// passed (`0`: only tried) or when [`NativeSemaphore::abort`] was called for `abort_id`,
    /// once every node of the attempt is removed.
    #[napi]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        n: u32,
        timeout_ms: Option<f64>,
        abort_id: Option<u32>,
    ) -> napi::Result<PromiseRaw<'env, Option<NativeLeases>>> {
        let semaphore = self.semaphore.clone();
        let shared = self.shared.clone();
        let acquisition = abortable(&self.aborts, abort_id, move |abort| async move {
            semaphore.acquire_for(n, timeout(timeout_ms), abort).await
        });
        runtime::promise(env, acquisition, move |_, leases| leases.map(|leases| NativeLeases::new(leases, shared)))
    }

    /// Gives up the acquisition in flight with this id, if any: its promise resolves to `null`.
    /// The ZKLOCK_TIMEOUT error for `leases` not had within `timeout_ms`, in core's words (as
    /// every language reports it): for `withLease`, whose acquisition resolves to `null`.
    #[napi]
    pub fn timeout_error<'env>(&self, env: &'env Env, leases: u32, timeout_ms: f64) -> napi::Result<Object<'env>> {
        let timeout = Duration::from_secs_f64(timeout_ms.max(0.0) / 1000.0);
        crate::error::build(env, &self.semaphore.timeout_error(leases, timeout))
    }

    #[napi]
    pub fn abort(&self, abort_id: u32) {
        abort(&self.aborts, abort_id);
    }

    /// The max now: the fixed one, or the shared count's value.
    #[napi]
    pub fn current_max_leases<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, i64>> {
        let semaphore = self.semaphore.clone();
        runtime::promise(env, async move { semaphore.current_max_leases().await }, |_, max| max)
    }

    #[napi]
    pub fn participants<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, SemaphoreParticipants>> {
        let semaphore = self.semaphore.clone();
        runtime::promise(env, async move { semaphore.participants().await }, |_, all| {
            let holders = all.holders().len();
            let mut leases = all.leases.into_iter().map(Participant::from);
            SemaphoreParticipants {
                holders: leases.by_ref().take(holders).collect(),
                waiting: leases.collect(),
                queue: all.queue.into_iter().map(Participant::from).collect(),
                max_leases: all.max_leases,
            }
        })
    }
}

/// Who holds a semaphore's leases and who waits (the core's `SemaphoreParticipants`).
#[napi(object)]
pub struct SemaphoreParticipants {
    /// The lease nodes held, in creation order.
    pub holders: Vec<Participant>,
    /// The lease nodes made by the acquirer at the head of `queue`, waiting until they fit.
    pub waiting: Vec<Participant>,
    /// The acquirers at the internal mutex, in order.
    pub queue: Vec<Participant>,
    pub max_leases: i64,
}

/// What an acquisition's holds become once JavaScript lets go of their handle unreleased: kept
/// until the client goes, as a lock's hold outlives its handles, rather than released at
/// whatever moment the garbage collector picks.
pub(crate) fn keep_unreleased(shared: &Shared, held: Box<dyn std::any::Any + Send>) {
    shared.kept.lock().push(held);
}

/// Leases taken together by one acquisition.
#[napi]
pub struct NativeLeases {
    leases: Releasable<zklock::Leases>,
    holds: Vec<zklock::Hold>,
    shared: Arc<Shared>,
}

impl NativeLeases {
    fn new(leases: zklock::Leases, shared: Arc<Shared>) -> NativeLeases {
        let holds = leases.holds();
        NativeLeases { leases: Releasable::new(leases), holds, shared }
    }
}

impl Drop for NativeLeases {
    fn drop(&mut self) {
        if let Some(leases) = self.leases.take_mut() {
            keep_unreleased(&self.shared, Box::new(leases));
        }
    }
}

#[napi]
impl NativeLeases {
    /// Each lease's hold (node, fencing token, state, lost signal), in the order made.
    #[napi]
    pub fn holds(&self) -> Vec<NativeHold> {
        self.holds.iter().cloned().map(NativeHold::new).collect()
    }

    /// `held`, `suspended` or `lost` (the worst of the leases', see `HoldState::combined`), or
    /// `released`.
    #[napi(getter)]
    pub fn state(&self) -> &'static str {
        self.leases.state().as_str()
    }

    /// Why the first lease found lost was lost ([`zklock::Leases::lost_lease`]), if one is.
    #[napi(getter)]
    pub fn lost(&self) -> Option<Lost> {
        let (_, reason) = self.leases.with(zklock::Leases::lost_lease)??;
        Some(Lost::from(reason))
    }

    /// Calls `callback` once with why, when the first lease is lost; never if all are released.
    #[napi]
    pub fn watch_lost(&self, callback: Function<Lost, ()>) -> napi::Result<()> {
        watch_first_loss(self.holds.clone(), callback, |_, reason| Lost::from(reason))
    }

    /// Deletes every lease node; resolves once the server confirmed each (the first error after
    /// trying them all: ZKLOCK_LOCK_LOST for a lost lease, which is not deleted).
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let leases = self.leases.take();
        runtime::promise(
            env,
            async move {
                match leases {
                    Some(leases) => leases.release().await,
                    None => Ok(()),
                }
            },
            |_, ()| (),
        )
    }
}
