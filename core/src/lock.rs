//! The fair, reentrant lock: Curator's InterProcessMutex recipe, node for node, and each side of
//! Curator's InterProcessReadWriteLock. The recipe itself is in `engine`; this is its public face.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::engine::{LockOptions, Participant, Recipe, UserHandles, Wait};
use crate::error::{ErrorKind, Result};
use crate::hold::Hold;
use crate::mode::Mode;
use crate::owners::{Entered, Owner, OwnerBinding};

/// A fair, reentrant lock on one ZooKeeper path: the mutex from [`crate::Client::lock`], or one
/// side of a [`crate::ReadWriteLock`]. Cheap to clone; clones share the per-owner hold counts
/// (and the two sides of a read/write lock share one table, for the downgrade).
#[derive(Clone)]
pub struct Lock {
    pub(crate) recipe: Arc<Recipe>,
    mode: Mode,
    /// The user's reach into the client, which a lock keeps (see [`crate::Client`]'s "Dropping").
    pub(crate) handles: Arc<UserHandles>,
}

impl Lock {
    pub(crate) fn new(handles: &Arc<UserHandles>, path: String, options: LockOptions) -> Result<Lock> {
        let recipe = handles.registry.recipe(path, false, options)?;
        Ok(Lock { recipe, mode: Mode::Exclusive, handles: handles.clone() })
    }

    /// The read and write sides of one read/write lock on `path`.
    pub(crate) fn pair(handles: &Arc<UserHandles>, path: String, options: LockOptions) -> Result<(Lock, Lock)> {
        let recipe = handles.registry.recipe(path, true, options)?;
        Ok((
            Lock { recipe: recipe.clone(), mode: Mode::Read, handles: handles.clone() },
            Lock { recipe, mode: Mode::Write, handles: handles.clone() },
        ))
    }

    /// The lock path, relative to the client's chroot.
    pub fn path(&self) -> &str {
        &self.recipe.path
    }

    /// How this lock is taken: [`Mode::Exclusive`] for the mutex, [`Mode::Read`] or
    /// [`Mode::Write`] for the sides of a read/write lock.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Acquires the lock for `owner`, waiting as long as it takes.
    ///
    /// An owner that already holds it only counts up, with no ZooKeeper traffic. Otherwise one
    /// EPHEMERAL_SEQUENTIAL child is created and the owner queues, first come first served,
    /// watching only the node it waits for.
    ///
    /// # Notable errors
    /// * [`ErrorKind::Closed`] if the client is or gets closed.
    /// * [`ErrorKind::SessionExpired`] if the session expires while waiting.
    /// * [`ErrorKind::InvalidArgument`] if the same owner already has an acquisition in progress,
    ///   or the path holds nodes of the other recipe (mutex or read/write lock).
    /// * [`ErrorKind::Deadlock`] for the write side, if `owner` holds the read side.
    /// * [`ErrorKind::PermissionDenied`] if the lock path's ACL does not let this client queue
    ///   (ZooKeeper's NoAuth), or, for a lock with an [`Acl`](crate::Acl), grants others more than it asks.
    ///   The attempt's node, if one was made, is removed.
    ///
    /// # Cancellation safety
    /// Dropping the future removes the attempt's node in the background: nothing is orphaned.
    pub async fn acquire(&self, owner: &Owner) -> Result<LockGuard> {
        let hold = self.acquire_hold(owner, Wait::from_timeout(None)).await?.expect("waiting forever never gives up");
        Ok(self.guard(owner, hold))
    }

    /// As [`Lock::acquire`], giving up with [`ErrorKind::Timeout`] after `timeout`: one deadline
    /// for the whole attempt, retries included, kept within [`crate::REMOVAL_GRACE`] whether or
    /// not the server answers. The attempt's node is deleted before this returns if the server
    /// confirms in time, else in the background. A zero timeout only tries, as
    /// [`Lock::try_acquire`] does. See the crate docs' "Timeouts and deadlines".
    pub async fn acquire_timeout(&self, owner: &Owner, timeout: Duration) -> Result<LockGuard> {
        match self.acquire_hold(owner, Wait::from_timeout(Some(timeout))).await? {
            Some(hold) => Ok(self.guard(owner, hold)),
            None => Err(self.timeout_error(timeout)),
        }
    }

    /// The [`ErrorKind::Timeout`] for this lock not had within `timeout` (zero: only tried): what
    /// [`Lock::acquire_timeout`] reports, and every binding with it.
    pub fn timeout_error(&self, timeout: Duration) -> crate::error::Error {
        if timeout.is_zero() {
            self.recipe.error(ErrorKind::Timeout, "held by another contender (tried once: zero timeout)")
        } else {
            self.recipe.error(ErrorKind::Timeout, format!("not acquired within {timeout:?}"))
        }
    }

    /// Acquires the lock only if no one is ahead in the queue; `Ok(None)` otherwise, with the
    /// attempt's node deleted (before this returns if the server confirms in time, else in the
    /// background). Answers within [`crate::TRY_BOUND`]: past it, [`ErrorKind::ConnectionLoss`]
    /// (ZooKeeper could not be reached), never `Ok(None)`.
    pub async fn try_acquire(&self, owner: &Owner) -> Result<Option<LockGuard>> {
        Ok(self
            .acquire_hold(owner, Wait::from_timeout(Some(Duration::ZERO)))
            .await?
            .map(|hold| self.guard(owner, hold)))
    }

    /// The binding-level acquire: `timeout` of `None` waits forever, `Some(ZERO)` only tries.
    /// Returns `Ok(None)` when the lock was held by others until the timeout; any other failure
    /// is an error, including [`ErrorKind::ConnectionLoss`] when a try got no answer within
    /// [`crate::TRY_BOUND`], and [`ErrorKind::Timeout`] when a wait with a longer deadline found
    /// no session within the connect timeout. The hold is released with [`Lock::release`], not by a guard.
    pub async fn acquire_for(&self, owner: &Owner, timeout: Option<Duration>) -> Result<Acquired> {
        // The reentrant fast path before any state machine is made (see `Lock::entry`).
        if self.recipe.owners.reenter_fast(owner, self.mode).is_some() {
            return Ok(Acquired::Reentered);
        }
        self.acquire_as(owner, Wait::from_timeout(timeout)).await
    }

    /// Releases one level of `owner`'s hold; at zero the lock node is deleted, and this returns
    /// only once the server confirmed the delete. (Past the sequence limit the write holder's
    /// read, taken on its write node, keeps that node until the read is released too.)
    ///
    /// # Notable errors
    /// * [`ErrorKind::NotOwner`] if `owner` does not hold the lock; nothing is changed.
    /// * [`ErrorKind::LockLost`] if the hold was lost (session expired, client closed, or node
    ///   deleted by someone else): the level is counted down all the same, as in every binding,
    ///   and at the last one the hold is dropped and nothing is deleted.
    /// * [`ErrorKind::ConnectionLoss`] if the connection dropped before the server confirmed the
    ///   delete. The hold is gone from this process, and the delete goes on in the background
    ///   until the node is gone or the session is over: the node is never left behind.
    ///
    /// Dropped before the server answered (a timeout around it, a cancelled task), the release
    /// has counted the level down all the same, and the delete goes on in the background too.
    pub async fn release(&self, owner: &Owner) -> Result<()> {
        match self.recipe.count_down(owner, self.mode)? {
            None => Ok(()),
            // Boxed so the reentrant path's future stays small: no network, no big state machine.
            Some(hold) => Box::pin(self.recipe.delete_held(&hold)).await,
        }
    }

    /// Whether `owner` holds the lock and may act on it: its hold is [`HoldState::Held`]
    /// (connected, and trusted). Not while it is `Suspended`: the node may still be ours, but the
    /// server may be about to let the next holder in, so "may I act" has no yes for an answer
    /// then ([`Lock::state_of`] tells suspended from lost). A lost hold is not held, though it
    /// stays `owner`'s until released (see [`Lock::hold_of`]).
    ///
    /// [`HoldState::Held`]: crate::HoldState::Held
    pub fn is_held_by(&self, owner: &Owner) -> bool {
        self.hold_of(owner).is_some_and(|(hold, _)| hold.state() == crate::hold::HoldState::Held)
    }

    /// The state of `owner`'s hold, if it holds the lock.
    pub fn state_of(&self, owner: &Owner) -> Option<crate::hold::HoldState> {
        self.hold_of(owner).map(|(hold, _)| hold.state())
    }

    /// `owner`'s hold and reentrancy count, if it holds the lock.
    pub fn hold_of(&self, owner: &Owner) -> Option<(Hold, u64)> {
        self.recipe.owners.hold_of(owner, self.mode)
    }

    /// `owner`'s hold, if it holds the lock and the hold is not lost: a lost hold is not held, so
    /// its numbers (fencing token, sequence) must not pass for a holder's.
    ///
    /// # Notable errors
    /// * [`ErrorKind::LockLost`] if `owner`'s hold was lost, saying why (release it).
    pub fn live_hold_of(&self, owner: &Owner) -> Result<Option<Hold>> {
        let Some((hold, _)) = self.hold_of(owner) else { return Ok(None) };
        match hold.lost_reason() {
            None => Ok(Some(hold)),
            Some(reason) => Err(crate::error::Error::lost(
                Some(reason),
                format!("owner {}'s hold is lost ({}); release it", owner.label(), reason.describe()),
            )
            .with_path(self.path())),
        }
    }

    /// Every participant under the lock path, holders first, in queue order, each with its
    /// [`Mode`] and the identity recorded in its node. Answered within [`crate::TRY_BOUND`], or
    /// [`ErrorKind::ConnectionLoss`]: ZooKeeper could not be reached (as [`Lock::holder`] and
    /// [`Lock::holders`]).
    pub async fn contenders(&self) -> Result<Vec<Participant>> {
        self.recipe
            .participants(self.mode != Mode::Exclusive, tokio::time::Instant::now() + crate::engine::TRY_BOUND)
            .await
    }

    /// [`Lock::contenders`], answered by `deadline`.
    pub(crate) async fn contenders_by(&self, deadline: tokio::time::Instant) -> Result<Vec<Participant>> {
        self.recipe.participants(self.mode != Mode::Exclusive, deadline).await
    }

    /// The first holder, if any.
    pub async fn holder(&self) -> Result<Option<Participant>> {
        Ok(self.holders().await?.into_iter().next())
    }

    /// Every participant that holds the lock now, in queue order: the one holder of a mutex or
    /// of the write side, or the readers that hold together.
    pub async fn holders(&self) -> Result<Vec<Participant>> {
        Ok(holding(
            self.recipe
                .participants(self.mode != Mode::Exclusive, tokio::time::Instant::now() + crate::engine::TRY_BOUND)
                .await?,
        ))
    }

    /// Inline, so that the reentrant fast path is in the caller's crate (a binding's).
    #[inline]
    fn begin(
        &self,
        owner: &Owner,
        timeout: Option<Duration>,
        abort: Option<tokio_util::sync::CancellationToken>,
    ) -> Acquire {
        // The reentrant fast path before the deadline is even computed (see `Lock::entry`).
        if self.recipe.owners.reenter_fast(owner, self.mode).is_some() {
            return Acquire::done(Ok(Acquired::Reentered));
        }
        self.begin_contending(owner, timeout, abort)
    }

    /// [`Lock::begin`] past the fast path: claims the owner's slot and sends the attempt's create.
    fn begin_contending(
        &self,
        owner: &Owner,
        timeout: Option<Duration>,
        abort: Option<tokio_util::sync::CancellationToken>,
    ) -> Acquire {
        let wait = Wait { abort, ..Wait::from_timeout(timeout) };
        match self.enter(owner) {
            Err(err) => Acquire::done(Err(err)),
            Ok(Entered::Counted(_)) => Acquire::done(Ok(Acquired::Reentered)),
            Ok(Entered::ReadOnWriteNode(hold)) => Acquire::done(Ok(Acquired::Held(hold))),
            Ok(entered) => {
                let mut future = self.claimed(owner, wait, entered);
                // One poll now, with the runtime's context for its timers: it runs up to the
                // create's reply (or to its place in the send-order queue).
                let _context = self.recipe.client.runtime.enter();
                match future.as_mut().poll(&mut std::task::Context::from_waker(futures::task::noop_waker_ref())) {
                    std::task::Poll::Ready(result) => Acquire::done(result.map(Acquired::from)),
                    std::task::Poll::Pending => Acquire { now: None, running: Some(future) },
                }
            }
        }
    }

    /// Calls `callback(owner_id, reason)` once for each hold of this lock that is lost, on the
    /// client's callback thread (one callback at a time, in the order they became due; never on
    /// the threads that keep sessions alive), until the returned subscription is dropped.
    ///
    /// It covers every hold in this lock's mode, by any owner, taken before it was registered
    /// (unless lost already) or after: the holds of this lock and of the client's other
    /// handles for the path, which share them (see [`crate::Client::lock`]; a handle made with
    /// [`LockOptions::separate`] keeps its own). A hold is reported once, whatever its levels,
    /// and never once released. Every binding's lock-level lost callback is this one (C's
    /// `zkl_lock_set_lost_callback`, Python's `Lock.on_lost`, Node's `lock.onLost`).
    pub fn on_lost(
        &self,
        callback: impl Fn(u64, crate::error::LostReason) + Send + Sync + 'static,
    ) -> crate::lost_callbacks::LostSubscription {
        let recipe = &self.recipe;
        recipe.lost.subscribe(&recipe.client, self.mode, Arc::new(callback), || recipe.owners.holds(self.mode))
    }

    /// The reentrant fast path: counts up an existing hold, or marks the owner as acquiring
    /// (to contend, or to downgrade).
    fn enter(&self, owner: &Owner) -> Result<Entered> {
        Ok(self.entry(owner, true)?.expect("an entry that claims always decides"))
    }

    /// The one way in, for [`Lock::enter`] (`claim`: mark the owner as acquiring if it must) and
    /// [`Lock::try_reenter`] (`None` if it must acquire). An owner that holds here (or the other
    /// side of a read/write lock) re-enters, or learns its hold is lost (a closed client's too);
    /// any other owner of a closed client is refused as closed.
    #[inline]
    fn entry(&self, owner: &Owner, claim: bool) -> Result<Option<Entered>> {
        // Without the mutex: a hold checked since the last loss in the process (a closed
        // client's is one), counted up with one compare-and-swap.
        if let Some(id) = self.recipe.owners.reenter_fast(owner, self.mode) {
            return Ok(Some(Entered::Counted(id)));
        }
        self.entry_checked(owner, claim)
    }

    /// [`Lock::entry`] under the owner table's mutex.
    fn entry_checked(&self, owner: &Owner, claim: bool) -> Result<Option<Entered>> {
        let path = self.path();
        if self.recipe.client.is_closed() && !self.recipe.owners.holds_any(owner) {
            return Err(self.recipe.closed_error());
        }
        if claim
            && !self.recipe.owners.holds_any(owner)
            && self.recipe.registry.holds_path_elsewhere(&self.recipe, owner, self.mode)
        {
            // It would queue behind its own node, and wait forever.
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::Deadlock,
                format!(
                    "owner {} holds this path through a lock of another identifier or ACL: it would wait for itself (one owner re-enters only through locks of the same identifier and ACL)",
                    owner.label()
                ),
            )
            .with_path(path));
        }
        let entered = match claim {
            true => Some(self.recipe.owners.enter(owner, self.mode, path)?),
            false => self.recipe.owners.reenter(owner, self.mode, path).transpose()?,
        };
        if let Some(Entered::ReadOnWriteNode(hold)) = &entered {
            // A new hold (on the write node), which the lost callbacks cover as any other.
            self.recipe.hold_taken(owner.id(), self.mode, hold);
        }
        Ok(entered)
    }

    /// For a recipe built on this lock (the semaphore's internal mutex): `owner`'s guard, within
    /// `wait`; `Ok(None)` when not had by then.
    pub(crate) async fn guard_within(&self, owner: &Owner, wait: Wait) -> Result<Option<LockGuard>> {
        Ok(self.acquire_hold(owner, wait).await?.map(|hold| self.guard(owner, hold)))
    }

    /// For a guard, which keeps its hold: a re-entry looks its hold up.
    async fn acquire_hold(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        match self.acquire_as(owner, wait).await? {
            Acquired::Held(hold) => Ok(Some(hold)),
            Acquired::NotAcquired => Ok(None),
            Acquired::Reentered => match self.hold_of(owner) {
                Some((hold, _)) => Ok(Some(hold)),
                None => Err(self.recipe.error(
                    ErrorKind::NotOwner,
                    format!("owner {}'s hold was released by another flow while it re-entered", owner.label()),
                )),
            },
        }
    }

    async fn acquire_as(&self, owner: &Owner, wait: Wait) -> Result<Acquired> {
        match self.enter(owner)? {
            Entered::Counted(_) => Ok(Acquired::Reentered),
            Entered::ReadOnWriteNode(hold) => Ok(Acquired::Held(hold)),
            // Boxed, so the reentrant path above does not carry the contend loop's state machine.
            entered => self.claimed(owner, wait, entered).await.map(Acquired::from),
        }
    }

    /// Contends (or downgrades) for an owner whose slot says "acquiring": the future, boxed, and
    /// owning what it needs once (a waiter is this one allocation, which every waiter of a long
    /// queue keeps: no wrapper around it keeps a second copy of its arguments).
    fn claimed(&self, owner: &Owner, wait: Wait, entered: Entered) -> BoxFuture<'static, Result<Option<Hold>>> {
        // Clears the owner's "acquiring" unless the acquisition succeeds, including when the
        // future is dropped (even unpolled).
        let claim = Claim { lock: self.clone(), owner: owner.clone(), done: false };
        match entered {
            Entered::Downgrade(write) => Box::pin(async move {
                let result = claim.lock.recipe.downgrade(&claim.owner, &write, wait).await;
                claim.settle(result)
            }),
            _ => Box::pin(async move {
                let result = claim.lock.recipe.contend(claim.lock.mode, &claim.owner, &wait).await;
                claim.settle(result)
            }),
        }
    }

    fn guard(&self, owner: &Owner, hold: Hold) -> LockGuard {
        LockGuard { lock: self.clone(), owner: owner.clone(), hold, armed: true }
    }
}

/// What the bindings (the C ABI, Python, Node) need of a [`Lock`] beyond its public API: their
/// reentrant fast paths, nested releases, condition-variable levels, and the rules of handles
/// and flows that answer for several owners. Hidden from the docs; in scope with
/// `use zklock::binding::*`.
#[doc(hidden)]
pub trait LockBinding {
    /// The id of the owner table that counts this handle's holds: the same for every handle of
    /// this client on the path (with the same identifier and ACL, see [`crate::Client::lock`])
    /// and for both sides of a read/write lock, distinct from every other table's in the process
    /// (never reused). An owner holds or re-enters a lock through any handle of its table; a
    /// binding whose owners are async flows names them per table.
    fn owner_table_id(&self) -> u64;

    /// Whether some owner holds the lock through this lock or its clones and may act on it (as
    /// [`Lock::is_held_by`]: not while suspended, not once lost): for a binding whose lock
    /// object answers for all its owners.
    fn is_held_by_any(&self) -> bool;

    /// The state of `owner`'s hold if it holds the lock, or else that of the latest hold taken
    /// through this lock or its clones and not yet released (lost holds included): for a binding
    /// whose lock object answers for all its owners, the caller's first.
    fn state_preferring(&self, owner: Option<&Owner>) -> Option<crate::hold::HoldState>;

    /// Whether `owner` holds this lock or, for a side of a read/write lock, the other side: then
    /// its next acquisition here is not a new contender's but follows from that hold (a
    /// re-entry, a downgrade, or a refused upgrade). For a binding whose owners are flows that
    /// acquire as fresh owners unless they already hold.
    fn holds_either_side(&self, owner: &Owner) -> bool;

    /// For a binding whose owners are flows known by serial (see
    /// [`crate::owners::OwnerBinding`]): `current` if that owner holds this lock or the other side
    /// of its read/write lock (see [`LockBinding::holds_either_side`]), else `None`.
    fn holding_serial(&self, current: Option<i64>) -> Option<i64>;

    /// Who acquires here for a flow whose owner's serial is `current` (if it has one): that owner
    /// if it holds this lock or the other side (its acquisition follows from that hold: a
    /// re-entry, a downgrade, or a refused upgrade), else a fresh unique owner, a new contender.
    /// The serial of either.
    fn serial_to_acquire(&self, current: Option<i64>) -> i64;

    /// Begins an acquisition for `owner` at once, for the bindings: a re-entry (or an error such
    /// as a second acquire by the same owner) is decided before this returns, and otherwise the
    /// attempt's create is sent, or queued behind those of acquisitions begun earlier on this
    /// client, before this returns. So the creates of one client reach the server in the order
    /// its acquisitions began, whichever threads later drive them. `timeout` as in
    /// [`Lock::acquire_for`]. Call inside or outside the client's runtime.
    fn begin_acquire(&self, owner: &Owner, timeout: Option<Duration>) -> Acquire;

    /// As [`Lock::begin_acquire`], ending as a timeout does once `abort` is cancelled: the
    /// acquisition gives `Ok(None)` once the attempt's node is removed (what a binding's abort
    /// promises, like its timeout). Dropping the acquisition instead removes the node in the
    /// background.
    fn begin_acquire_abortable(
        &self,
        owner: &Owner,
        timeout: Option<Duration>,
        abort: tokio_util::sync::CancellationToken,
    ) -> Acquire;

    /// Re-enters at once if `owner` holds the lock: `Some(Ok(hold))` counted up, `Some(Err(_))`
    /// (LockLost) if its hold was lost, or (Deadlock) if it holds the read side and this is the
    /// write side; `None` if it must acquire (the write holder's first read too: a downgrade
    /// makes its read node). No ZooKeeper traffic; every binding's reentrant fast path.
    fn try_reenter(&self, owner: &Owner) -> Option<Result<u64>>;

    /// Releases every level of `owner`'s hold at once (the node deleted, as at the last level)
    /// and returns how many there were: for a condition variable's wait (Python's
    /// `threading.Condition`), which gives the lock up whole, and after acquiring it again
    /// restores the levels with [`Lock::restore_levels`]. Errors as [`Lock::release`]'s; a lost hold
    /// is dropped whole.
    fn release_every_level(&self, owner: &Owner) -> impl Future<Output = Result<u64>> + Send;

    /// Gives `owner`'s hold, just acquired again, `levels` levels in all: as many as
    /// [`Lock::release_every_level`] gave up, counted up as re-entries would, with no ZooKeeper
    /// traffic.
    ///
    /// # Notable errors
    /// * [`ErrorKind::NotOwner`] if `owner` does not hold the lock.
    fn restore_levels(&self, owner: &Owner, levels: u64) -> Result<()>;

    /// Releases one nested level at once if `owner` holds more than one: `Some(Ok(()))`, or,
    /// if its hold was lost, `Some(Err(_))` (LockLost) with the level counted down all the same;
    /// `None` for the last level (use [`Lock::release`], which deletes the node, or reports the
    /// loss) or if `owner` holds nothing here. No ZooKeeper traffic.
    fn release_nested(&self, owner: &Owner) -> Option<Result<()>>;

    /// Releases, in the background, every level of every hold taken through this lock (and its
    /// clones) in its mode, as each owner would: for a binding whose lock handle is freed.
    fn release_all_in_background(&self);
}

impl LockBinding for Lock {
    fn owner_table_id(&self) -> u64 {
        self.recipe.serial
    }

    fn is_held_by_any(&self) -> bool {
        self.recipe.owners.any_live(self.mode)
    }

    fn state_preferring(&self, owner: Option<&Owner>) -> Option<crate::hold::HoldState> {
        self.recipe.owners.state_preferring(owner, self.mode)
    }

    fn holds_either_side(&self, owner: &Owner) -> bool {
        self.recipe.owners.holds_any(owner)
    }

    fn holding_serial(&self, current: Option<i64>) -> Option<i64> {
        current.filter(|&serial| self.holds_either_side(&Owner::new(Owner::unique_id(serial))))
    }

    fn serial_to_acquire(&self, current: Option<i64>) -> i64 {
        self.holding_serial(current).unwrap_or_else(Owner::unique_serial)
    }

    #[inline]
    fn begin_acquire(&self, owner: &Owner, timeout: Option<Duration>) -> Acquire {
        self.begin(owner, timeout, None)
    }

    fn begin_acquire_abortable(
        &self,
        owner: &Owner,
        timeout: Option<Duration>,
        abort: tokio_util::sync::CancellationToken,
    ) -> Acquire {
        self.begin(owner, timeout, Some(abort))
    }

    #[inline]
    fn try_reenter(&self, owner: &Owner) -> Option<Result<u64>> {
        match self.entry(owner, false) {
            Ok(Some(Entered::Counted(id))) => Some(Ok(id)),
            Ok(Some(Entered::ReadOnWriteNode(hold))) => Some(Ok(hold.id())),
            Ok(_) => None,
            Err(err) => Some(Err(err)),
        }
    }

    async fn release_every_level(&self, owner: &Owner) -> Result<u64> {
        let levels = self.recipe.owners.fold_levels(owner, self.mode, self.path())?;
        self.release(owner).await.map(|()| levels)
    }

    fn restore_levels(&self, owner: &Owner, levels: u64) -> Result<()> {
        // The acquisition that took the lock again counted its first level.
        if self.recipe.owners.add_levels(owner, self.mode, levels.saturating_sub(1)) {
            return Ok(());
        }
        Err(self.recipe.error(ErrorKind::NotOwner, format!("owner {} does not hold this lock", owner.label())))
    }

    #[inline]
    fn release_nested(&self, owner: &Owner) -> Option<Result<()>> {
        self.recipe.owners.release_nested(owner, self.mode, self.path())
    }

    fn release_all_in_background(&self) {
        let owners = self.recipe.owners.holders(self.mode);
        if owners.is_empty() {
            return;
        }
        let lock = self.clone();
        self.recipe.client.runtime.spawn(async move {
            for owner in owners.into_iter().map(Owner::new) {
                // Each release counts a level down, whatever it reports (a lost hold, or a delete
                // going on in the background after a connection loss).
                while lock.hold_of(&owner).is_some() {
                    let _ = lock.release(&owner).await;
                }
            }
        });
    }
}

/// The participants that hold, by each one's own mode's rule, in queue order.
fn holding(participants: Vec<Participant>) -> Vec<Participant> {
    let holders = Participant::holders_in(&participants);
    let mut participants: Vec<Option<Participant>> = participants.into_iter().map(Some).collect();
    holders.into_iter().filter_map(|i| participants[i].take()).collect()
}

/// What an acquisition came to, for a binding: a re-entry gives no new hold.
#[derive(Debug)]
pub enum Acquired {
    /// The owner held the lock already and counted up, with no ZooKeeper traffic (its hold:
    /// [`Lock::hold_of`]).
    Reentered,
    /// A new hold, at its first level.
    Held(Hold),
    /// Not acquired: held by others until the timeout, or aborted.
    NotAcquired,
}

impl Acquired {
    /// Whether the owner holds the lock now (a re-entry or a new hold).
    pub fn is_acquired(&self) -> bool {
        !matches!(self, Acquired::NotAcquired)
    }

    /// The new hold, if this acquisition made one.
    pub fn new_hold(&self) -> Option<&Hold> {
        match self {
            Acquired::Held(hold) => Some(hold),
            _ => None,
        }
    }
}

impl From<Option<Hold>> for Acquired {
    fn from(hold: Option<Hold>) -> Acquired {
        hold.map_or(Acquired::NotAcquired, Acquired::Held)
    }
}

/// An acquisition begun by a binding's `begin_acquire`: a future of its outcome (as
/// [`Lock::acquire_for`]'s), already under way.
#[must_use = "dropping an acquisition cancels it"]
pub struct Acquire {
    now: Option<Result<Acquired>>,
    running: Option<BoxFuture<'static, Result<Option<Hold>>>>,
}

impl Acquire {
    #[inline]
    fn done(result: Result<Acquired>) -> Acquire {
        Acquire { now: Some(result), running: None }
    }

    /// The outcome, if the acquisition was decided as it began (a re-entry, or an error):
    /// a binding can then answer without a round trip through its event loop.
    #[inline]
    pub fn take_now(&mut self) -> Option<Result<Acquired>> {
        self.now.take()
    }
}

impl Future for Acquire {
    type Output = Result<Acquired>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        if let Some(result) = self.now.take() {
            return std::task::Poll::Ready(result);
        }
        match self.running.as_mut() {
            Some(running) => running.as_mut().poll(cx).map(|result| result.map(Acquired::from)),
            None => panic!("Acquire polled after it finished"),
        }
    }
}

struct Claim {
    lock: Lock,
    owner: Owner,
    done: bool,
}

impl Claim {
    /// The acquisition's outcome: a hold settles the owner's slot as holding it.
    fn settle(mut self, result: Result<Option<Hold>>) -> Result<Option<Hold>> {
        if let Ok(Some(hold)) = &result {
            self.done = true;
            self.lock.recipe.settle(self.owner.id(), self.lock.mode, hold);
        }
        result
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            self.lock.recipe.owners.unclaim(self.owner.id(), self.lock.mode);
        }
    }
}

/// A held level of a lock. Dropping it releases that level in the background (the node is
/// deleted when the count reaches zero, never leaked); [`LockGuard::release`] releases and waits
/// for the server's confirmation.
#[must_use = "dropping the guard releases the lock"]
pub struct LockGuard {
    lock: Lock,
    owner: Owner,
    hold: Hold,
    armed: bool,
}

impl LockGuard {
    /// The hold: lock node, sequence and fencing token.
    pub fn hold(&self) -> &Hold {
        &self.hold
    }

    /// Shorthand for `hold().fencing_token()`.
    pub fn fencing_token(&self) -> i64 {
        self.hold.fencing_token()
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Releases this level and waits until the server confirmed any delete.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.lock.release(&self.owner).await
    }

    /// Keeps the hold without a guard; release it later with [`Lock::release`] and this owner.
    pub fn into_hold(mut self) -> Hold {
        self.armed = false;
        self.hold.clone()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(Some(hold)) = self.lock.recipe.count_down(&self.owner, self.lock.mode) {
            let lock = self.lock.recipe.clone();
            self.lock.recipe.client.runtime.spawn(async move {
                let _ = lock.delete_held(&hold).await;
            });
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard").field("path", &self.lock.path()).field("hold", &self.hold).finish()
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock").field("path", &self.path()).field("mode", &self.mode).finish()
    }
}
