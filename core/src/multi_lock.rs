//! The multi-lock: several locks taken together (Curator's InterProcessMultiLock), each member by
//! its own recipe's acquire path, in one canonical order and under one deadline.

use std::time::Duration;

use crate::connection::ClientInner;
use crate::engine::Wait;
use crate::error::LostReason;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::{HeldTogether, Hold, HoldState, Releasable};
use crate::lock::{Lock, LockBinding, LockGuard};
use crate::mode::Mode;
use crate::owners::{Owner, OwnerBinding};
use crate::semaphore::{Leases, Semaphore};

/// What a member of a [`MultiLock`] takes. The order of the variants is the tie-break of the
/// canonical order (after the path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberKind {
    /// A mutex ([`crate::Client::lock`]).
    Mutex,
    /// The read side of a read/write lock.
    Read,
    /// The write side of a read/write lock.
    Write,
    /// Leases of a semaphore.
    Leases,
}

impl MemberKind {
    /// Its name in every language: `mutex`, `read`, `write` or `leases`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Mutex => "mutex",
            MemberKind::Read => "read",
            MemberKind::Write => "write",
            MemberKind::Leases => "leases",
        }
    }
}

/// One member of a [`MultiLock`]: a lock (a mutex or a side of a read/write lock), or `n`
/// leases of a semaphore.
#[derive(Clone, Debug)]
pub enum Member {
    /// A mutex or one side of a read/write lock, taken for the multi-lock's owner.
    Lock(Lock),
    /// This many leases of the semaphore, all or nothing.
    Leases(Semaphore, u32),
}

impl Member {
    /// `n` leases of `semaphore`.
    pub fn leases(semaphore: &Semaphore, n: u32) -> Member {
        Member::Leases(semaphore.clone(), n)
    }

    /// The member's path (the lock's, or the semaphore's), relative to its client's chroot.
    pub fn path(&self) -> &str {
        match self {
            Member::Lock(lock) => lock.path(),
            Member::Leases(semaphore, _) => semaphore.path(),
        }
    }

    /// What it takes.
    pub fn kind(&self) -> MemberKind {
        match self {
            Member::Lock(lock) => match lock.mode() {
                Mode::Exclusive => MemberKind::Mutex,
                Mode::Read => MemberKind::Read,
                Mode::Write => MemberKind::Write,
            },
            Member::Leases(..) => MemberKind::Leases,
        }
    }

    /// The connection of the client this member was made from.
    fn client(&self) -> &ClientInner {
        match self {
            Member::Lock(lock) => &lock.recipe.client,
            Member::Leases(semaphore, _) => &semaphore.mutex().recipe.client,
        }
    }

    /// The path on the server (the client's chroot and the path): members of clients with other
    /// chroots sort, and are told apart, by where their nodes really are.
    fn server_path(&self) -> String {
        format!("{}{}", self.client().chroot, self.path())
    }
}

impl From<Lock> for Member {
    fn from(lock: Lock) -> Member {
        Member::Lock(lock)
    }
}

/// Several locks taken together, from [`crate::Client::multi_lock`]: mutexes, sides of
/// read/write locks and semaphore leases, all held or none.
///
/// * **One canonical order.** Members are taken sorted by path (on the server: the client's
///   chroot and the path), then by [`MemberKind`], whatever order they were given in, so two multi-locks over the same paths never each hold what the
///   other waits for. (Curator's InterProcessMultiLock takes them in list order.)
/// * **One deadline** for all of them (Curator gives each member the full timeout).
/// * **Nothing left behind.** On a timeout, an error or a cancel (the future dropped), what was
///   taken is released in reverse order, and the member being acquired removes its own nodes.
///   Release is in reverse order too.
/// * **Lost if any member is lost**: [`MultiGuard::state`] and [`MultiGuard::lost`] say which.
///   An acquire never returns with a member lost: one lost before the last is taken (its session
///   ended while a later member was waited for, or someone deleted its node) makes it release
///   everything and take every member again, within the deadline.
///
/// Mutexes and sides are taken for one [`Owner`], so they re-enter as a lock does; leases are
/// not reentrant (as a semaphore's). Each member is taken by its own recipe, so it queues fairly
/// with every other user of its path.
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Vec<Member>,
    runtime: tokio::runtime::Handle,
}

impl MultiLock {
    /// The members in canonical order. Refuses, before any traffic and with
    /// [`ErrorKind::InvalidArgument`]: no member, two members on one path (the same lock twice,
    /// or both sides of one read/write lock), 0 leases, or more leases than a fixed max; more
    /// than [`crate::MAX_MULTI_LOCK_MEMBERS`] members, or members whose parents together are over
    /// [`crate::MAX_NEW_PARENTS`] or [`crate::MAX_NEW_PARENT_BYTES`].
    pub fn new(members: impl IntoIterator<Item = Member>) -> Result<MultiLock> {
        let mut members: Vec<Member> = members.into_iter().collect();
        let Some(first) = members.first() else {
            return Err(Error::invalid("a multi-lock needs at least one member, got none"));
        };
        crate::validate::multi_lock_members(members.len())?;
        let runtime = first.client().runtime.clone();
        // The order is the paths' and kinds', never the caller's.
        members.sort_by_cached_key(|member| (member.server_path(), member.kind()));
        for pair in members.windows(2) {
            if pair[0].server_path() == pair[1].server_path() {
                return Err(Error::invalid(format!(
                    "{:?} and {:?} are both on this path: a multi-lock takes each path once",
                    pair[0].kind(),
                    pair[1].kind()
                ))
                .with_path(pair[0].path()));
            }
        }
        for member in &members {
            if let Member::Leases(semaphore, n) = member {
                semaphore.check_lease_count(*n)?;
            }
        }
        // The parents of every member together: each is within the limits alone, but not
        // necessarily all of them. (Members on several clients may have several chroots: their
        // paths count as given.)
        let queues: Vec<String> = members
            .iter()
            .flat_map(|member| match member {
                Member::Lock(lock) => vec![lock.path().to_owned()],
                Member::Leases(semaphore, _) => semaphore.queue_paths(),
            })
            .collect();
        crate::validate::new_parents(queues.iter().map(String::as_str))?;
        Ok(MultiLock { members, runtime })
    }

    /// The members, in the order they are taken.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Takes every member for `owner`, waiting as long as it takes.
    ///
    /// # Notable errors
    /// Any member's (see [`Lock::acquire`] and [`Semaphore::acquire`]); what was taken is
    /// released, in reverse order, before this returns. [`ErrorKind::LockLost`] if a member is
    /// lost before the last is taken for another reason than its session or its node (a closed
    /// client), or for any reason when only trying.
    ///
    /// # Cancellation safety
    /// Dropping the future releases what was taken in the background, in reverse order, and the
    /// member being acquired removes its nodes as its own acquire does.
    pub async fn acquire(&self, owner: &Owner) -> Result<MultiGuard> {
        let guard = self.acquire_within(owner, Wait::from_timeout(None)).await?;
        Ok(guard.expect("waiting forever never gives up"))
    }

    /// As [`MultiLock::acquire`], giving up with [`ErrorKind::Timeout`] (naming the member it
    /// waited for) after `timeout`: one deadline for all the members. Every node taken is
    /// removed (before this returns if the server confirms within [`crate::REMOVAL_GRACE`] of the
    /// deadline, else in the background). A zero timeout tries each member once, within
    /// [`crate::TRY_BOUND`] for all of them ([`ErrorKind::ConnectionLoss`] past it).
    pub async fn acquire_timeout(&self, owner: &Owner, timeout: Duration) -> Result<MultiGuard> {
        self.acquire_within(owner, Wait::from_timeout(Some(timeout)))
            .await?
            .map_err(|index| MultiLock::timeout_error(&self.members[index], timeout))
    }

    /// The binding-level acquire: `timeout` of `None` waits forever, `Some(ZERO)` tries each
    /// member once; once `abort` is cancelled it ends as at its deadline. `Ok(Err(index))`: not
    /// acquired in time (or aborted), with the index in [`MultiLock::members`] of the member it
    /// waited for (see [`MultiLock::timeout_error`]), and every node taken removed.
    pub async fn acquire_for(
        &self,
        owner: &Owner,
        timeout: Option<Duration>,
        abort: Option<tokio_util::sync::CancellationToken>,
    ) -> Result<std::result::Result<MultiGuard, usize>> {
        self.acquire_within(owner, Wait { abort, ..Wait::from_timeout(timeout) }).await
    }

    /// The [`ErrorKind::Timeout`] for `member`, not had within `timeout`: what
    /// [`MultiLock::acquire_timeout`] reports, and every binding with it.
    pub fn timeout_error(member: &Member, timeout: Duration) -> Error {
        let kind = member.kind().as_str();
        let message = if timeout.is_zero() {
            format!("the {kind} member is held by others (each member tried once: zero timeout)")
        } else {
            format!("the {kind} member was not acquired within {timeout:?} (one deadline for all members)")
        };
        Error::new(ErrorKind::Timeout, message).with_path(member.path())
    }

    /// `Err(index)`: the member not had by the deadline.
    ///
    /// A member lost before the last one is taken (its session ended while a later member was
    /// waited for, and a waiter queues again on a new session, but a hold cannot; or someone
    /// deleted its node) is no member held: everything is released and taken again, within the
    /// deadline, as a lock's waiter queues again. Never returned with a member lost.
    async fn acquire_within(&self, owner: &Owner, wait: Wait) -> Result<Result<MultiGuard, usize>> {
        let mut retakes = 0u32;
        loop {
            let lost = match Box::pin(self.take_all(owner, &wait)).await? {
                Taking::All(taken) => return Ok(Ok(MultiGuard { taken })),
                Taking::NotInTime(index) => return Ok(Err(index)),
                Taking::Lost(lost) => lost,
            };
            let again = matches!(
                lost.reason,
                LostReason::SessionExpired | LostReason::DisconnectedTooLong | LostReason::NodeDeleted
            );
            if !again || wait.only_try {
                let message = format!(
                    "the {} member was lost ({}) before the multi-lock was held; nothing is held",
                    lost.kind.as_str(),
                    lost.reason.describe()
                );
                return Err(Error::lost(Some(lost.reason), message).with_path(&lost.path));
            }
            retakes += 1;
            // Not in a tight loop, should members keep being lost at once.
            wait.within(tokio::time::sleep(Duration::from_millis(50 * u64::from(retakes.min(20))))).await;
            if wait.is_over() {
                return Ok(Err(lost.index));
            }
        }
    }

    /// Takes each member in turn, under one deadline; stops, releasing what it took, at the
    /// first member lost meanwhile (a later member is not waited for once one is lost).
    async fn take_all(&self, owner: &Owner, wait: &Wait) -> Result<Taking> {
        let mut taken = Taken { parts: Vec::with_capacity(self.members.len()), runtime: self.runtime.clone() };
        for (index, member) in self.members.iter().enumerate() {
            // One `wait`, cloned: one deadline (an Instant) for every member.
            let acquire = async {
                match member {
                    Member::Lock(lock) => {
                        Box::pin(lock.guard_within(owner, wait.clone())).await.map(|g| g.map(Part::Lock))
                    }
                    Member::Leases(semaphore, n) => {
                        Box::pin(semaphore.acquire_within(*n, wait.clone())).await.map(|l| l.map(Part::Leases))
                    }
                }
            };
            // The acquisition, dropped if a member taken is lost first: it removes its nodes.
            let losses = first_loss(&taken.parts);
            let part = tokio::select! {
                biased;
                Some(lost) = losses => Err(lost),
                part = acquire => Ok(part),
            };
            let lost = match part {
                Ok(Ok(Some(part))) => {
                    taken.parts.push((member.clone(), part));
                    // The one just taken too: a hold may be lost as it is born.
                    taken.lost_member()
                }
                Err(lost) => Some(lost),
                // A release's own error (a lost member, or a delete that goes on in the
                // background after a connection loss) leaves no node either way.
                Ok(Ok(None)) => {
                    taken.release_by(wait.give_back_by()).await;
                    return Ok(Taking::NotInTime(index));
                }
                Ok(Err(err)) => {
                    taken.release_by(wait.give_back_by()).await;
                    return Err(err);
                }
            };
            if let Some(lost) = lost {
                taken.release_by(wait.give_back_by()).await;
                return Ok(Taking::Lost(lost));
            }
        }
        Ok(Taking::All(taken))
    }
}

/// How taking every member ended, but for an error.
enum Taking {
    All(Taken),
    /// Not had by the deadline: the member's index.
    NotInTime(usize),
    /// A member taken was lost before the last was: nothing is held any more.
    Lost(MemberLost),
}

/// What one member holds.
enum Part {
    Lock(LockGuard),
    Leases(Leases),
}

impl Part {
    fn holds(&self) -> Vec<Hold> {
        match self {
            Part::Lock(guard) => vec![guard.hold().clone()],
            Part::Leases(leases) => leases.holds(),
        }
    }

    /// Releases it (the leases last made first), waiting for the server; the first error.
    async fn release(self) -> Result<()> {
        match self {
            Part::Lock(guard) => guard.release().await,
            Part::Leases(leases) => {
                let mut result = Ok(());
                for lease in leases.into_leases().into_iter().rev() {
                    let released = lease.release().await;
                    result = result.and(released);
                }
                result
            }
        }
    }
}

/// The members taken so far, in canonical order; dropped, they are released in the background
/// in reverse order (each member's own drop would release them all at once, in any order).
struct Taken {
    parts: Vec<(Member, Part)>,
    runtime: tokio::runtime::Handle,
}

impl Taken {
    async fn release(&mut self) -> Result<()> {
        release_in_reverse(&mut self.parts).await
    }

    /// Releases every part (a release's own error, a lost member or a delete that goes on in the
    /// background after a connection loss, leaves no node either way), waiting for the server
    /// until `by` at most: what is left then is released in the background, in reverse order
    /// (the parts not popped yet, by the drop; a delete in flight, by its own).
    async fn release_by(&mut self, by: tokio::time::Instant) {
        let _ = tokio::time::timeout_at(by, self.release()).await;
    }

    /// The first member (in canonical order) found lost, if any.
    fn lost_member(&self) -> Option<MemberLost> {
        self.parts.iter().enumerate().find_map(|(index, (member, part))| {
            part.holds().iter().find_map(|hold| hold.lost_reason()).map(|reason| lost(index, member, reason))
        })
    }
}

/// The first of `parts`' members to be lost, with why; `None` once every one is released without
/// a loss. Owns what it watches, so that it can outlive the borrow.
fn first_loss(parts: &[(Member, Part)]) -> impl std::future::Future<Output = Option<MemberLost>> + Send + 'static {
    let (members, holds): (Vec<(usize, Member)>, Vec<Hold>) = parts
        .iter()
        .enumerate()
        .flat_map(|(index, (member, part))| part.holds().into_iter().map(move |hold| ((index, member.clone()), hold)))
        .unzip();
    async move {
        let (which, reason) = crate::hold::first_loss(&holds).await?;
        let (index, member) = &members[which];
        Some(lost(*index, member, reason))
    }
}

/// Releases every part in reverse order, each confirmed before the next; the first error.
async fn release_in_reverse(parts: &mut Vec<(Member, Part)>) -> Result<()> {
    let mut result = Ok(());
    while let Some((_, part)) = parts.pop() {
        let released = part.release().await;
        result = result.and(released);
    }
    result
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        // A plain Vec in the task, not a `Taken`: if the runtime drops the task unfinished (at
        // shutdown), each part's own drop releases it, rather than this spawning again.
        let mut parts = std::mem::take(&mut self.parts);
        self.runtime.spawn(async move {
            let _ = release_in_reverse(&mut parts).await;
        });
    }
}

/// Every member of a [`MultiLock`], held. Dropping it releases them in the background in reverse
/// order; [`MultiGuard::release`] releases and waits for the server.
#[must_use = "dropping the guard releases every member"]
pub struct MultiGuard {
    taken: Taken,
}

/// A member of a held multi-lock that was lost, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberLost {
    /// The member's index in canonical order (see [`MultiGuard::members`]): two members of
    /// clients with different chroots may share a path and kind, never an index.
    pub index: usize,
    /// The member's path.
    pub path: String,
    /// What it took there.
    pub kind: MemberKind,
    /// Why its hold (or one of its leases) was lost.
    pub reason: LostReason,
}

impl MultiGuard {
    /// The members, in canonical order.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.taken.parts.iter().map(|(member, _)| member)
    }

    /// Each member's holds (one for a lock, one per lease), in canonical order.
    pub fn holds(&self) -> Vec<(&Member, Vec<Hold>)> {
        self.taken.parts.iter().map(|(member, part)| (member, part.holds())).collect()
    }

    /// Each member's fencing tokens (one for a lock, one per lease), in canonical order.
    pub fn fencing_tokens(&self) -> Vec<(&Member, Vec<i64>)> {
        self.taken
            .parts
            .iter()
            .map(|(member, part)| (member, part.holds().iter().map(Hold::fencing_token).collect()))
            .collect()
    }

    /// `Lost` if any member is lost (see [`MultiGuard::lost_member`]), else `Suspended` if any
    /// is suspended, else `Held`.
    pub fn state(&self) -> HoldState {
        HoldState::combined(self.taken.parts.iter().flat_map(|(_, part)| part.holds()).map(|hold| hold.state()))
    }

    /// The first member (in canonical order) found lost, if any.
    pub fn lost_member(&self) -> Option<MemberLost> {
        self.taken.lost_member()
    }

    /// Resolves when a member is lost, saying which and why. Pending for as long as every member
    /// is held.
    pub async fn lost(&self) -> MemberLost {
        match self.first_member_loss().await {
            Some(lost) => lost,
            // Only a release ends a hold without a loss, and the guard's holds are released only
            // with the guard.
            None => std::future::pending().await,
        }
    }

    /// Releases every member in reverse canonical order, each confirmed by the server before the
    /// next; the first error (see [`Lock::release`], [`crate::Lease::release`]) after trying all.
    pub async fn release(mut self) -> Result<()> {
        self.taken.release().await
    }
}

fn lost(index: usize, member: &Member, reason: LostReason) -> MemberLost {
    MemberLost { index, path: member.path().to_owned(), kind: member.kind(), reason }
}

/// What the bindings need of a [`MultiLock`] beyond its public API. Hidden from the docs; in
/// scope with `use zklock::binding::*`.
#[doc(hidden)]
pub trait MultiLockBinding {
    /// Who takes the members for a flow known by serials (see [`OwnerBinding`]): `candidates`
    /// are the flow's owners in its member locks' owner tables (in any order). The one that
    /// holds a member lock (or the other side of one), so that the member is re-entered rather
    /// than waited for; a fresh owner if none does.
    ///
    /// # Notable errors
    /// * [`ErrorKind::Deadlock`] if two of them hold members (separate acquisitions of one
    ///   flow): taking them together would wait on itself. Before any traffic.
    fn serial_to_acquire(&self, candidates: &[i64]) -> Result<i64>;
}

impl MultiLockBinding for MultiLock {
    fn serial_to_acquire(&self, candidates: &[i64]) -> Result<i64> {
        let holds = |serial: i64| {
            let owner = Owner::new(Owner::unique_id(serial));
            self.members.iter().any(|member| matches!(member, Member::Lock(lock) if lock.holds_either_side(&owner)))
        };
        let mut holders = candidates.iter().copied().filter(|&serial| holds(serial));
        let Some(holder) = holders.next() else { return Ok(Owner::unique_serial()) };
        if holders.any(|other| other != holder) {
            let path = self.members.first().map(Member::path).unwrap_or_default();
            return Err(Error::new(
                ErrorKind::Deadlock,
                "this flow holds members of the multi-lock through separate acquisitions: taking them together \
                 would wait on itself",
            )
            .with_path(path));
        }
        Ok(holder)
    }
}

/// What the bindings need of a [`MultiGuard`] beyond its public API. Hidden from the docs; in
/// scope with `use zklock::binding::*`.
#[doc(hidden)]
pub trait MultiGuardBinding {
    /// The first member to be lost, with why; `None` once every member is released without a
    /// loss. Owns what it watches, so that it can outlive a borrow of the guard: a binding's
    /// lost callback (see `ClientBinding::on_member_lost`).
    fn first_member_loss(&self) -> impl std::future::Future<Output = Option<MemberLost>> + Send + 'static;
}

impl MultiGuardBinding for MultiGuard {
    fn first_member_loss(&self) -> impl std::future::Future<Output = Option<MemberLost>> + Send + 'static {
        first_loss(&self.taken.parts)
    }
}

impl Releasable<MultiGuard> {
    /// As [`MultiGuardBinding::first_member_loss`], or `None` once the guard was taken out to be
    /// released (never lost any more).
    pub fn first_member_loss(&self) -> Option<impl std::future::Future<Output = Option<MemberLost>> + Send + 'static> {
        self.with(|guard| first_loss(&guard.taken.parts))
    }
}

impl HeldTogether for MultiGuard {
    fn state(&self) -> HoldState {
        MultiGuard::state(self)
    }
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard").field("holds", &self.holds()).finish()
    }
}
