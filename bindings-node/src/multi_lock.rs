//! The multi-lock: the core's, translated. Its locks are taken for an owner id that the
//! JavaScript layer assigns (an async flow, as for a lock), so nested calls on a member lock
//! re-enter.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Either, Function, Object, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use zklock::binding::{MultiLockBinding, Releasable};

use crate::hold::{notify_loss, Lost, NativeHold};
use crate::lock::NativeLock;
use crate::runtime::{self, Shared};
use crate::semaphore::{abort, abortable, keep_unreleased, timeout, Aborts, NativeSemaphore};

/// A member as JavaScript sees it: where, and what it takes there.
#[napi(object)]
pub struct MemberInfo {
    pub path: String,
    /// `mutex`, `read`, `write` or `leases`.
    pub kind: String,
    /// Leases asked for (a lease member), or 1.
    pub count: u32,
}

fn member_info(member: &zklock::Member) -> MemberInfo {
    let count = match member {
        zklock::Member::Leases(_, n) => *n,
        zklock::Member::Lock(_) => 1,
    };
    MemberInfo { path: member.path().to_owned(), kind: member.kind().as_str().to_owned(), count }
}

/// Collects the members, in the caller's order (the core sorts them), then makes the multi-lock.
#[napi]
pub struct NativeMultiLockBuilder {
    members: Vec<zklock::Member>,
    shared: Option<Arc<Shared>>,
}

#[napi]
impl NativeMultiLockBuilder {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)] // a JavaScript constructor
    pub fn new() -> NativeMultiLockBuilder {
        NativeMultiLockBuilder { members: Vec::new(), shared: None }
    }

    #[napi]
    pub fn add_lock(&mut self, lock: &NativeLock) {
        self.members.push(lock.lock.clone().into());
        self.shared.get_or_insert_with(|| lock.shared.clone());
    }

    #[napi]
    pub fn add_leases(&mut self, semaphore: &NativeSemaphore, n: u32) {
        self.members.push(zklock::Member::leases(&semaphore.semaphore, n));
        self.shared.get_or_insert_with(|| semaphore.shared.clone());
    }

    /// The multi-lock; ZKLOCK_INVALID_ARGUMENT (before any traffic) for no member, two on one
    /// path, 0 leases or more than a fixed max.
    #[napi]
    pub fn build(&mut self, env: &Env) -> napi::Result<NativeMultiLock> {
        let members = std::mem::take(&mut self.members);
        let multi = zklock::MultiLock::new(members).map_err(|err| crate::error::to_js(env, &err))?;
        let shared = self.shared.take().expect("a multi-lock with members has a client");
        Ok(NativeMultiLock { multi, shared, aborts: Aborts::default() })
    }
}

#[napi]
pub struct NativeMultiLock {
    multi: zklock::MultiLock,
    shared: Arc<Shared>,
    aborts: Aborts,
}

#[napi]
impl NativeMultiLock {
    /// The members in the order they are taken (canonical: by path, then kind).
    #[napi]
    pub fn members(&self) -> Vec<MemberInfo> {
        self.multi.members().iter().map(member_info).collect()
    }

    /// Who takes the members for the calling flow, whose owners in the member locks' tables are
    /// `candidates` (core's `MultiLockBinding::serial_to_acquire`): the one holding a member
    /// lock, which it re-enters, or a new owner. Throws ZKLOCK_DEADLOCK if two hold members.
    #[napi]
    pub fn owner_to_acquire(&self, env: &Env, candidates: Vec<i64>) -> napi::Result<i64> {
        self.multi.serial_to_acquire(&candidates).map_err(|err| crate::error::to_js(env, &err))
    }

    /// Takes every member for `owner_id`; resolves to the guard, or, when `timeout_ms` passed
    /// (`0`: each member tried once) or [`NativeMultiLock::abort`] was called for `abort_id`, to
    /// the member it waited for, once what was taken is released.
    #[napi]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        owner_id: i64,
        timeout_ms: Option<f64>,
        abort_id: Option<u32>,
    ) -> napi::Result<PromiseRaw<'env, Either<NativeMultiGuard, NotAcquired>>> {
        let multi = self.multi.clone();
        let owner = crate::lock::owner(owner_id);
        let shared = self.shared.clone();
        let timeout = timeout(timeout_ms);
        let acquisition =
            abortable(
                &self.aborts,
                abort_id,
                move |abort| async move { multi.acquire_for(&owner, timeout, abort).await },
            );
        runtime::promise(env, acquisition, move |_, acquired| match acquired {
            Ok(guard) => Either::A(NativeMultiGuard::new(guard, shared)),
            Err(index) => Either::B(NotAcquired { index: index as u32 }),
        })
    }

    /// The ZKLOCK_TIMEOUT error for the member at `index` not had within `timeout_ms`, in core's
    /// words (as every language reports it): for `withLocks`.
    #[napi]
    pub fn timeout_error<'env>(&self, env: &'env Env, index: u32, timeout_ms: f64) -> napi::Result<Object<'env>> {
        let member = self
            .multi
            .members()
            .get(index as usize)
            .ok_or_else(|| napi::Error::new(napi::Status::InvalidArg, format!("no member at index {index}")))?;
        let timeout = Duration::from_secs_f64(timeout_ms.max(0.0) / 1000.0);
        crate::error::build(env, &zklock::MultiLock::timeout_error(member, timeout))
    }

    #[napi]
    pub fn abort(&self, abort_id: u32) {
        abort(&self.aborts, abort_id);
    }
}

/// The member a multi-lock's acquisition waited for when its time was up: its index in
/// canonical order (see [`NativeMultiLock::timeout_error`]).
#[napi(object)]
pub struct NotAcquired {
    pub index: u32,
}

/// Every member held.
#[napi]
pub struct NativeMultiGuard {
    guard: Releasable<zklock::MultiGuard>,
    /// Each member, in canonical order, with its holds (one per lease).
    members: Vec<(MemberInfo, Vec<zklock::Hold>)>,
    shared: Arc<Shared>,
}

impl NativeMultiGuard {
    fn new(guard: zklock::MultiGuard, shared: Arc<Shared>) -> NativeMultiGuard {
        let members = guard.holds().into_iter().map(|(member, holds)| (member_info(member), holds)).collect();
        NativeMultiGuard { guard: Releasable::new(guard), members, shared }
    }
}

impl Drop for NativeMultiGuard {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take_mut() {
            keep_unreleased(&self.shared, Box::new(guard));
        }
    }
}

/// A member lost, and why.
#[napi(object)]
pub struct MemberLost {
    pub path: String,
    pub kind: String,
    pub lost: Lost,
}

impl From<zklock::MemberLost> for MemberLost {
    fn from(lost: zklock::MemberLost) -> MemberLost {
        MemberLost { path: lost.path, kind: lost.kind.as_str().to_owned(), lost: Lost::from(lost.reason) }
    }
}

#[napi]
impl NativeMultiGuard {
    /// The members, in canonical order.
    #[napi]
    pub fn members(&self) -> Vec<MemberInfo> {
        self.members
            .iter()
            .map(|(info, _)| MemberInfo { path: info.path.clone(), kind: info.kind.clone(), count: info.count })
            .collect()
    }

    /// The holds of the member at `index` (canonical order): one for a lock, one per lease.
    #[napi]
    pub fn holds(&self, index: u32) -> Vec<NativeHold> {
        self.members
            .get(index as usize)
            .map_or_else(Vec::new, |(_, holds)| holds.iter().cloned().map(NativeHold::new).collect())
    }

    /// `held`, `suspended` or `lost` (the worst of the members'), or `released`.
    #[napi(getter)]
    pub fn state(&self) -> &'static str {
        self.guard.state().as_str()
    }

    /// The first member (in canonical order) found lost, if any.
    #[napi(getter)]
    pub fn lost_member(&self) -> Option<MemberLost> {
        self.guard.with(zklock::MultiGuard::lost_member)?.map(MemberLost::from)
    }

    /// Calls `callback` once with the member lost first (core's
    /// [`zklock::MultiGuard::first_member_loss`]), and why; never if all are released. The
    /// callback never keeps the process alive.
    #[napi]
    pub fn watch_lost_member(&self, callback: Function<MemberLost, ()>) -> napi::Result<()> {
        let Some(loss) = self.guard.first_member_loss() else {
            return Ok(()); // released: never lost any more
        };
        notify_loss(async move { loss.await.map(MemberLost::from) }, callback)
    }

    /// Releases every member in reverse canonical order, each confirmed before the next; the
    /// first error after trying all.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let guard = self.guard.take();
        runtime::promise(
            env,
            async move {
                match guard {
                    Some(guard) => guard.release().await,
                    None => Ok(()),
                }
            },
            |_, ()| (),
        )
    }
}
