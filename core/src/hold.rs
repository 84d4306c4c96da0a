//! What an owner holds, and whether it still holds it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::session::{Lease, LostReason, Session};

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Held,
    Suspended,
    Lost(LostReason),
    Released,
}

impl Status {
    fn state(self) -> HoldState {
        match self {
            Status::Held => HoldState::Held,
            Status::Suspended => HoldState::Suspended,
            Status::Lost(_) => HoldState::Lost,
            Status::Released => HoldState::Released,
        }
    }

    fn is_final(self) -> bool {
        matches!(self, Status::Lost(_) | Status::Released)
    }
}

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
    status: watch::Sender<Status>,
    /// Mirrors `Lost` for the reentrant fast path, which must not take a lock.
    lost: AtomicBool,
    /// Stops the monitor: on release, or when the last reference to the hold goes away.
    done: CancellationToken,
}

impl Drop for HoldInfo {
    fn drop(&mut self) {
        self.done.cancel();
    }
}

impl HoldInfo {
    fn set(&self, status: Status) {
        self.status.send_if_modified(|current| {
            // Final states stay: a released hold is not lost later, nor the other way round.
            if current.is_final() || *current == status {
                return false;
            }
            if let Status::Lost(_) = status {
                self.lost.store(true, Ordering::Release);
            }
            *current = status;
            true
        });
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        match *self.status.borrow() {
            Status::Lost(reason) => Some(reason),
            _ => None,
        }
    }

    /// Marks the hold released and stops its monitor, before the node is deleted, so that our
    /// own delete is not taken for a loss. Returns why it was lost, if it already was.
    pub(crate) fn finish(&self) -> Option<LostReason> {
        self.done.cancel();
        self.set(Status::Released);
        self.lost_reason()
    }
}

impl Hold {
    /// A new hold on `node_path`, watched from now on: the session's lease and the node itself.
    pub(crate) fn start(
        session: &Arc<Session>,
        closed: &CancellationToken,
        runtime: &tokio::runtime::Handle,
        node_path: String,
        sequence: i64,
        fencing_token: i64,
    ) -> Hold {
        let info = Arc::new(HoldInfo {
            node_path,
            sequence,
            fencing_token,
            session: Arc::downgrade(session),
            status: watch::Sender::new(Status::Held),
            lost: AtomicBool::new(false),
            done: CancellationToken::new(),
        });
        let monitor = monitor(Arc::downgrade(&info), session.lease.clone(), closed.clone(), info.done.clone());
        runtime.spawn(monitor);
        Hold { inner: info }
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

    /// The current state.
    pub fn state(&self) -> HoldState {
        self.inner.status.borrow().state()
    }

    /// Why the hold was lost, once it is [`HoldState::Lost`].
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.inner.lost_reason()
    }

    /// Changes of the state from now on; ends after `Lost` or `Released`.
    pub fn state_changes(&self) -> HoldStateChanges {
        HoldStateChanges { receiver: self.inner.status.subscribe(), ended: self.inner.status.borrow().is_final() }
    }

    /// Resolves when the hold is lost, with the reason; or with `None` once it was released.
    pub async fn lost(&self) -> Option<LostReason> {
        let mut receiver = self.inner.status.subscribe();
        let status = *receiver.wait_for(|status| status.is_final()).await.expect("the sender lives in the hold");
        match status {
            Status::Lost(reason) => Some(reason),
            _ => None,
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
    receiver: watch::Receiver<Status>,
    ended: bool,
}

impl HoldStateChanges {
    /// The next state, or `None` after `Lost` or `Released` was delivered.
    pub async fn next(&mut self) -> Option<HoldState> {
        if self.ended || self.receiver.changed().await.is_err() {
            return None;
        }
        let status = *self.receiver.borrow_and_update();
        self.ended = status.is_final();
        Some(status.state())
    }
}

/// Keeps a hold's state: Suspended while its session is disconnected, Lost when the session is
/// over, the client closed, or the node deleted by someone else (hence the watch on our own node).
async fn monitor(
    info: Weak<HoldInfo>,
    mut lease: watch::Receiver<Lease>,
    closed: CancellationToken,
    done: CancellationToken,
) {
    let (session, node) = match info.upgrade() {
        Some(info) => (info.session.clone(), info.node_path.clone()),
        None => return,
    };
    let watching = Arc::new(AtomicBool::new(false));
    let mut node_gone = Box::pin(watch_own_node(session, node, lease.clone(), done.clone(), watching.clone()));
    loop {
        let status = if closed.is_cancelled() {
            Status::Lost(LostReason::Closed)
        } else {
            match *lease.borrow_and_update() {
                Lease::Live => Status::Held,
                Lease::Suspended => Status::Suspended,
                Lease::Over(reason) => Status::Lost(reason),
            }
        };
        match info.upgrade() {
            Some(info) => info.set(status),
            None => return,
        }
        if status.is_final() {
            return;
        }
        tokio::select! {
            biased;
            _ = done.cancelled() => {
                // Released: let a pending watch fire on our own delete rather than drop it,
                // which would cost a RemoveWatches request on every release.
                if watching.load(Ordering::Acquire) {
                    tokio::spawn(node_gone);
                }
                return;
            },
            _ = closed.cancelled() => {},
            changed = lease.changed() => {
                if changed.is_err() {
                    // The session's monitor is gone, which only happens once it is over.
                    if let Some(info) = info.upgrade() {
                        info.set(Status::Lost(LostReason::SessionExpired));
                    }
                    return;
                }
            },
            reason = &mut node_gone => {
                if let Some(info) = info.upgrade() {
                    info.set(Status::Lost(reason));
                }
                return;
            },
        }
    }
}

/// How long a holder waits before watching its own node. A hold released sooner never needs
/// the watch (its release would report a deletion anyway), and short holds then cost no
/// request beyond the create, the listing and the delete; a deletion by someone else is still
/// noticed, at most this much later.
const OWN_NODE_WATCH_DELAY: Duration = Duration::from_millis(20);

/// Resolves when our lock node is deleted, or the session it belongs to is over. Holds the
/// session handle only while a request is in flight; sets no new watch once `done`, and says
/// in `watching` whether a watch may be pending.
async fn watch_own_node(
    session: Weak<Session>,
    node: String,
    mut lease: watch::Receiver<Lease>,
    done: CancellationToken,
    watching: Arc<AtomicBool>,
) -> LostReason {
    tokio::time::sleep(OWN_NODE_WATCH_DELAY).await;
    loop {
        let Some(zk) = session.upgrade().filter(|_| !done.is_cancelled()).map(|s| s.zk.clone()) else {
            return LostReason::Closed;
        };
        watching.store(true, Ordering::Release);
        let request = zk.check_and_watch_stat(&node).await;
        drop(zk);
        match request {
            // No node: the exists watch now waits for a creation that never comes; drop it.
            Ok((None, _)) => return LostReason::NodeDeleted,
            Err(zk::Error::SessionExpired) => return LostReason::SessionExpired,
            Err(zk::Error::ClientClosed) => return LostReason::Closed,
            Err(_) => {
                // Connection loss and the like: watch again once connected. An ended session
                // is reported through the lease instead.
                if lease.wait_for(|lease| *lease == Lease::Live).await.is_err() {
                    return std::future::pending().await;
                }
            }
            Ok((Some(_), watcher)) => {
                let event = watcher.changed().await;
                match (event.event_type, event.session_state) {
                    (zk::EventType::NodeDeleted, _) => return LostReason::NodeDeleted,
                    (zk::EventType::Session, zk::SessionState::Expired) => return LostReason::SessionExpired,
                    (zk::EventType::Session, zk::SessionState::Closed) => return LostReason::Closed,
                    (zk::EventType::Session, zk::SessionState::AuthFailed) => return LostReason::AuthFailed,
                    // Data changed, or another session event: keep watching.
                    _ => {}
                }
            }
        }
    }
}
