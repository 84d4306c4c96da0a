//! What an owner holds, and whether it still holds it.
//!
//! A hold's state is derived when asked, from facts that only ever move one way: its session's
//! lease (live, suspended, over), whether the client was closed, whether someone deleted the
//! node, and whether the owner released it. So acquiring costs no task of its own; one watcher
//! task per client sets the watches on holders' own nodes (see [`NodeWatcher`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::error::LostReason;
use crate::session::{note_loss, Closed, Lease, Session, Trust};

/// Whether a hold is still good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldState {
    /// Connected, and the lock node is ours.
    Held,
    /// The connection is down. The lock may still be ours, but stop touching the resource it
    /// guards. Becomes `Held` again on reconnecting within the session, or `Lost`.
    Suspended,
    /// The lock is gone: see [`Hold::lost_reason`]. Releasing reports
    /// [`crate::ErrorKind::LockLost`] and deletes nothing.
    Lost,
    /// Released by its owner.
    Released,
}

impl HoldState {
    /// The state's stable lowercase name: `held`, `suspended`, `lost`, `released` (each binding
    /// shows these, in its own case style).
    pub const fn as_str(self) -> &'static str {
        match self {
            HoldState::Held => "held",
            HoldState::Suspended => "suspended",
            HoldState::Lost => "lost",
            HoldState::Released => "released",
        }
    }

    fn is_final(self) -> bool {
        matches!(self, HoldState::Lost | HoldState::Released)
    }

    /// Holds taken together (a semaphore's leases, a multi-lock's members) as one: `Lost` if any
    /// is, else `Suspended` if any is, else `Held` if any is, else `Released`.
    pub fn combined(states: impl IntoIterator<Item = HoldState>) -> HoldState {
        states.into_iter().fold(HoldState::Released, |worst, state| {
            let rank = |state| match state {
                HoldState::Released => 0,
                HoldState::Held => 1,
                HoldState::Suspended => 2,
                HoldState::Lost => 3,
            };
            if rank(state) > rank(worst) {
                state
            } else {
                worst
            }
        })
    }
}

/// Holds taken together and released together, as one: a semaphore's `Leases`, a multi-lock's
/// `MultiGuard`.
#[doc(hidden)]
pub trait HeldTogether {
    /// Their combined state (see [`HoldState::combined`]).
    fn state(&self) -> HoldState;
}

/// Holds taken together, as a binding's handle keeps them: until they are taken out to be
/// released, and `Released` from then on (a lost one too: its release reports the loss once,
/// and the handle says `released` after it). Each binding's leases and multi-lock guard answer
/// `state` from here, so the rule is written once. Hidden from the docs (`zklock::binding`).
#[doc(hidden)]
pub struct Releasable<T> {
    held: Mutex<Option<T>>,
}

impl<T: HeldTogether> Releasable<T> {
    /// Holds just taken.
    pub fn new(held: T) -> Releasable<T> {
        Releasable { held: Mutex::new(Some(held)) }
    }

    /// Their combined state until taken out to be released, `Released` after.
    pub fn state(&self) -> HoldState {
        self.held.lock().as_ref().map_or(HoldState::Released, T::state)
    }

    /// Whether they are still here, not taken out to be released.
    pub fn is_held(&self) -> bool {
        self.held.lock().is_some()
    }

    /// `f` of the holds, or `None` once they were taken out to be released.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.held.lock().as_ref().map(f)
    }

    /// The holds, taken out to be released: `None` if they were already (from then on `state`
    /// says `Released`).
    pub fn take(&self) -> Option<T> {
        self.held.lock().take()
    }

    /// As [`Releasable::take`], without locking (a handle's drop).
    pub fn take_mut(&mut self) -> Option<T> {
        self.held.get_mut().take()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Releasable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releasable").field("held", &*self.held.lock()).finish()
    }
}

/// Resolves with the index and reason of the first of `holds` to be lost, or with `None` once
/// every one was released without a loss.
pub async fn first_loss(holds: &[Hold]) -> Option<(usize, LostReason)> {
    use futures::stream::{FuturesUnordered, StreamExt};
    let mut losses: FuturesUnordered<_> = holds
        .iter()
        .enumerate()
        .map(|(index, hold)| async move { hold.lost().await.map(|reason| (index, reason)) })
        .collect();
    while let Some(signal) = losses.next().await {
        if signal.is_some() {
            return signal;
        }
    }
    None
}

const NODE_DELETED: u8 = 1;
const RELEASED: u8 = 2;

/// What an owner holds: the lock node, its fencing token, and its current [`HoldState`].
/// Clones share the state.
#[derive(Clone)]
pub struct Hold {
    pub(crate) inner: Arc<HoldInfo>,
}

pub(crate) struct HoldInfo {
    pub(crate) node_path: String,
    pub(crate) sequence: i64,
    pub(crate) fencing_token: i64,
    /// Weak: a hold must not keep its session alive once the client lets go of it.
    pub(crate) session: Weak<Session>,
    /// The session's: over, or past the deadline its answered requests set.
    trust: Arc<Trust>,
    lease: watch::Receiver<Lease>,
    closed: Closed,
    /// NODE_DELETED and RELEASED; each is set once and never cleared.
    flags: AtomicU8,
    /// Wakes those awaiting the state when a flag is set.
    changed: Notify,
}

impl HoldInfo {
    fn flag(&self, flag: u8) -> bool {
        self.flags.load(Ordering::Acquire) & flag != 0
    }

    fn set_flag(&self, flag: u8) {
        self.flags.fetch_or(flag, Ordering::AcqRel);
        if flag == NODE_DELETED {
            // Before anyone awaiting the state hears of it (see `session::LOSSES`).
            note_loss();
        }
        self.changed.notify_waiters();
    }

    /// Cheap enough for the reentrant checked path: four atomic loads and a read of the clock.
    /// The same losses as [`Self::status`]'s, a closed client among them: its session may not
    /// be over yet.
    pub(crate) fn is_lost(&self) -> bool {
        let lost = self.flag(NODE_DELETED) || self.closed.is_closed() || self.trust.is_over();
        if lost {
            // Whoever sees a loss makes sure the loss count moved before acting on it: its
            // setter counts it only after setting its flag (see `session::LOSSES`).
            note_loss();
        }
        lost
    }

    fn status(&self) -> (HoldState, Option<LostReason>) {
        let status = self.status_as_set();
        if status.0 == HoldState::Lost {
            // As in `is_lost`.
            note_loss();
        }
        status
    }

    fn status_as_set(&self) -> (HoldState, Option<LostReason>) {
        let flags = self.flags.load(Ordering::Acquire);
        // A loss found before the release stays a loss (see `finish`).
        if flags & RELEASED != 0 {
            return (HoldState::Released, None);
        }
        if flags & NODE_DELETED != 0 {
            return (HoldState::Lost, Some(LostReason::NodeDeleted));
        }
        if self.closed.is_closed() {
            return (HoldState::Lost, Some(LostReason::Closed));
        }
        // A lapse seen first is the reason, whatever the monitor reports after it.
        if self.trust.has_lapsed() {
            return (HoldState::Lost, Some(LostReason::DisconnectedTooLong));
        }
        match *self.lease.borrow() {
            Lease::Over(reason) => (HoldState::Lost, Some(reason)),
            // Read here, not left to the monitor: a holder that ran on past the deadline (a
            // pause, a busy machine) must not read held once the next holder may be in.
            _ if self.trust.lapsed() => (HoldState::Lost, Some(LostReason::DisconnectedTooLong)),
            Lease::Live => (HoldState::Held, None),
            Lease::Suspended => (HoldState::Suspended, None),
        }
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.status().1
    }

    /// Until when (boot-clock nanoseconds) the hold's session is trusted, as of now; 0 once it
    /// is not. The owner table's lock-free re-entry compares the clock with it.
    pub(crate) fn trusted_until(&self) -> u64 {
        self.trust.deadline_nanos()
    }

    /// The node is gone, as the server told (a watch on it, or a check that failed): the hold
    /// is lost, unless it was released (its own delete, then).
    pub(crate) fn node_gone(&self) {
        // Released: our own delete. Lost already: the loss keeps its first reason (a session
        // given up takes its nodes with it).
        if !self.status().0.is_final() {
            self.set_flag(NODE_DELETED);
        }
    }

    /// Marks the hold released, unless it was already lost; returns why it was lost, if it was.
    pub(crate) fn finish(&self) -> Option<LostReason> {
        // Every way to be lost is final: a lost hold is never marked released.
        if let (HoldState::Lost, reason) = self.status() {
            return reason;
        }
        self.set_flag(RELEASED);
        None
    }

    /// Waits until the status may have changed.
    async fn changed(&self, lease: &mut watch::Receiver<Lease>) {
        let notified = self.changed.notified();
        tokio::select! {
            _ = notified => {},
            result = lease.changed() => {
                if result.is_err() {
                    // The session's monitor is gone, which happens only once it is over, and the
                    // lease then says so; avoid spinning on the closed channel.
                    std::future::pending::<()>().await;
                }
            },
            _ = self.closed.cancelled() => {},
        }
    }
}

impl Hold {
    /// This hold's identity in this process: equal for its clones (every level of one owner's
    /// hold, and past the sequence limit the downgraded read on its write node). Another hold
    /// may have it only once every clone of this one is gone, so a binding that keeps a clone
    /// beside the id can tell its handle is still the owner's hold.
    pub fn id(&self) -> u64 {
        Arc::as_ptr(&self.inner) as usize as u64
    }

    /// A new hold on `node_path`; the client's [`NodeWatcher`] starts watching the node shortly.
    pub(crate) fn new(
        session: &Arc<Session>,
        closed: &Closed,
        node_path: String,
        sequence: i64,
        fencing_token: i64,
    ) -> Hold {
        Hold {
            inner: Arc::new(HoldInfo {
                node_path,
                sequence,
                fencing_token,
                session: Arc::downgrade(session),
                trust: session.trust.clone(),
                lease: session.lease.clone(),
                closed: closed.clone(),
                flags: AtomicU8::new(0),
                changed: Notify::new(),
            }),
        }
    }

    /// Full path of the lock node (relative to the chroot).
    pub fn node_path(&self) -> &str {
        &self.inner.node_path
    }

    /// The sequence number ZooKeeper gave the node. Past the server's 32-bit limit it repeats or
    /// goes negative; see [`Hold::fencing_token`] for a value that always increases.
    pub fn sequence(&self) -> i64 {
        self.inner.sequence
    }

    /// The creation zxid of the lock node. It strictly increases across successive holders of
    /// the same lock path, even when the path is deleted and created again, so a resource can
    /// reject a holder whose token is lower than one it has already seen.
    pub fn fencing_token(&self) -> i64 {
        self.inner.fencing_token
    }

    /// The fencing token, unless the hold is lost or released: such a hold's token must not
    /// pass for a holder's, or a resource would take a stale holder's write. Every binding's
    /// token goes through here (or through [`crate::Lock::live_hold_of`]).
    ///
    /// # Notable errors
    /// * [`crate::ErrorKind::LockLost`], saying why it was lost.
    /// * [`crate::ErrorKind::NotOwner`] once it is released.
    pub fn live_fencing_token(&self) -> crate::error::Result<i64> {
        let path = self.inner.node_path.rsplit_once('/').map_or("/", |(parent, _)| parent);
        match self.inner.status() {
            (HoldState::Lost, reason) => Err(crate::error::Error::lost(
                reason,
                format!(
                    "the hold is lost ({}): a lost hold has no fencing token",
                    reason.map_or("lost", |reason| reason.describe())
                ),
            )
            .with_path(path)),
            (HoldState::Released, _) => Err(crate::error::Error::new(
                crate::error::ErrorKind::NotOwner,
                "the hold was released: a released hold has no fencing token",
            )
            .with_path(path)),
            _ => Ok(self.inner.fencing_token),
        }
    }

    /// The current state.
    pub fn state(&self) -> HoldState {
        self.inner.status().0
    }

    /// Why the hold was lost, once it is [`HoldState::Lost`].
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.inner.lost_reason()
    }

    /// Changes of the state from now on; ends after `Lost` or `Released`.
    pub fn state_changes(&self) -> HoldStateChanges {
        let last = self.state();
        HoldStateChanges { hold: self.clone(), lease: self.inner.lease.clone(), last, ended: last.is_final() }
    }

    /// Resolves when the hold is lost, with the reason; or with `None` once it was released.
    pub async fn lost(&self) -> Option<LostReason> {
        let mut lease = self.inner.lease.clone();
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.inner.status() {
                (HoldState::Lost, reason) => return reason,
                (HoldState::Released, _) => return None,
                _ => {}
            }
            tokio::select! {
                _ = notified => {},
                _ = self.inner.changed(&mut lease) => {},
            }
        }
    }
}

impl PartialEq for Hold {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Hold {}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("node_path", &self.inner.node_path)
            .field("sequence", &self.inner.sequence)
            .field("fencing_token", &self.inner.fencing_token)
            .field("state", &self.state())
            .finish()
    }
}

/// A stream of [`HoldState`] changes, from [`Hold::state_changes`].
pub struct HoldStateChanges {
    hold: Hold,
    lease: watch::Receiver<Lease>,
    last: HoldState,
    ended: bool,
}

impl HoldStateChanges {
    /// The next state, or `None` after `Lost` or `Released` was delivered.
    pub async fn next(&mut self) -> Option<HoldState> {
        loop {
            if self.ended {
                return None;
            }
            let notified = self.hold.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let state = self.hold.state();
            if state != self.last {
                self.last = state;
                self.ended = state.is_final();
                return Some(state);
            }
            tokio::select! {
                _ = notified => {},
                _ = self.hold.inner.changed(&mut self.lease) => {},
            }
        }
    }
}

/// How long a holder waits before watching its own node. A hold released sooner never needs
/// the watch (its release would report a deletion anyway), so short holds cost no request
/// beyond the create, the listing and the delete; a deletion by someone else is still noticed,
/// at most this much later.
const OWN_NODE_WATCH_DELAY: Duration = Duration::from_millis(20);

/// The watcher task wakes at most once per this interval, setting every watch that has come due,
/// rather than once per hold: at hundreds of short holds a second, a wake-up per hold costs the
/// client more than the holds' own requests. Deletions are noticed at most this much later still.
const OWN_NODE_WATCH_BATCH: Duration = Duration::from_millis(10);

/// The event a watch set on a node will report: the watcher itself, a future kept in place (a
/// boxed `changed()` took 168 bytes of every waiter).
pub(crate) type NodeEvent = zk::OneshotWatcher;

/// Watches holders' own nodes, so that a deletion by someone else turns the hold `Lost`. One
/// task per client: acquiring only queues the hold, and wakes the task only if it was idle.
pub(crate) struct NodeWatcher {
    queue: Mutex<VecDeque<DueWatch>>,
    idle: AtomicBool,
    wake: Notify,
}

/// A hold whose node is to be watched from `due` on, and the watch its waiter already set on
/// that node, if any.
struct DueWatch {
    due: Instant,
    hold: Weak<HoldInfo>,
    set: Option<NodeEvent>,
}

impl NodeWatcher {
    /// Starts the task; it ends when `stop` is cancelled.
    pub(crate) fn start(runtime: &tokio::runtime::Handle, stop: CancellationToken) -> Arc<NodeWatcher> {
        let watcher = Arc::new(NodeWatcher {
            queue: Mutex::new(VecDeque::new()),
            idle: AtomicBool::new(true),
            wake: Notify::new(),
        });
        runtime.spawn(watcher.clone().run(stop));
        watcher
    }

    /// Watches `hold`'s node, through `set` if its waiter already watched it (no request then).
    pub(crate) fn add(&self, hold: &Hold, set: Option<NodeEvent>) {
        self.queue.lock().push_back(DueWatch {
            due: Instant::now() + OWN_NODE_WATCH_DELAY,
            hold: Arc::downgrade(&hold.inner),
            set,
        });
        if self.idle.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut watching = FuturesUnordered::new();
        loop {
            let now = Instant::now();
            let next_due = {
                let mut queue = self.queue.lock();
                while queue.front().is_some_and(|watch| watch.due <= now) {
                    let DueWatch { hold, set, .. } = queue.pop_front().expect("checked");
                    if let Some(info) = hold.upgrade().filter(|info| !info.status().0.is_final()) {
                        watching.push(watch_own_node(info, set));
                    }
                }
                let next = queue.front().map(|watch| watch.due);
                if next.is_none() {
                    self.idle.store(true, Ordering::Release);
                }
                next
            };
            // A hold queued between the check above and going idle has woken us through `wake`.
            let due = async {
                match next_due {
                    Some(due) => tokio::time::sleep_until(due.max(now + OWN_NODE_WATCH_BATCH)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = due => {},
                _ = self.wake.notified() => {},
                Some(()) = watching.next(), if !watching.is_empty() => {},
            }
        }
    }
}

/// Watches one holder's node until it is deleted (by someone else: the hold turns Lost), the
/// hold ends, or its session is over. Holds the session handle only while a request is in
/// flight. After a release the pending watch is left to fire on our own delete: removing it
/// would cost a request. `set`: the watch the waiter set on its node before it held, waited on
/// first (it covers the time since, so nothing is missed).
async fn watch_own_node(info: Arc<HoldInfo>, mut set: Option<NodeEvent>) {
    let (session, node) = (info.session.clone(), info.node_path.clone());
    let mut lease = info.lease.clone();
    let info = Arc::downgrade(&info);
    loop {
        if info.upgrade().map_or(true, |info| info.status().0.is_final()) {
            return;
        }
        let request = match set.take() {
            Some(event) => Ok((Some(()), event)),
            None => {
                let Some(zk) = session.upgrade().filter(|s| !s.is_over()).map(|s| s.zk.clone()) else { return };
                let request = zk.check_and_watch_stat(&node).await;
                drop(zk);
                request.map(|(stat, watcher)| (stat.map(drop), watcher))
            }
        };
        let deleted = match request {
            Ok((None, _)) => true,
            Ok((Some(()), event)) => {
                let event = event.await;
                match event.event_type {
                    zk::EventType::NodeDeleted => true,
                    // Session events: the lease reports them. Data changes: watch again.
                    zk::EventType::Session if event.session_state.is_terminated() => return,
                    _ => false,
                }
            }
            Err(zk::Error::SessionExpired | zk::Error::ClientClosed) => return,
            Err(_) => {
                // Connection loss and the like: watch again once connected.
                if lease.wait_for(|lease| *lease == Lease::Live).await.is_err() {
                    return;
                }
                false
            }
        };
        if deleted {
            if let Some(info) = info.upgrade() {
                // Our own release deletes the node too: that is no loss.
                info.node_gone();
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HoldState::{self, *};

    #[test]
    fn combined_is_the_worst_state_and_released_only_when_all_are() {
        assert_eq!(HoldState::combined([Held, Lost, Suspended, Released]), Lost);
        assert_eq!(HoldState::combined([Held, Suspended, Released]), Suspended);
        assert_eq!(HoldState::combined([Released, Held]), Held);
        assert_eq!(HoldState::combined([Released, Released]), Released);
        assert_eq!(HoldState::combined([]), Released);
    }
}
