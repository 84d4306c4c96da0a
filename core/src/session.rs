//! One ZooKeeper session as zklock sees it: the handle, and a lease saying whether locks held in
//! it can still be trusted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::client::{ClientInner, SessionState};

/// Why a held lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// The server expired the session, deleting its lock nodes.
    SessionExpired,
    /// The client stayed disconnected so long that the server may already have expired the
    /// session and let the next waiter in; the client gave the session up itself.
    DisconnectedTooLong,
    /// The client was closed.
    Closed,
    /// Someone else deleted the lock node.
    NodeDeleted,
    /// The servers rejected the client's credentials.
    AuthFailed,
}

impl LostReason {
    /// The reason's stable snake_case name: `session_expired`, `disconnected_too_long`,
    /// `closed`, `node_deleted`, `auth_failed` (each binding shows these, in its own case style).
    pub const fn as_str(self) -> &'static str {
        match self {
            LostReason::SessionExpired => "session_expired",
            LostReason::DisconnectedTooLong => "disconnected_too_long",
            LostReason::Closed => "closed",
            LostReason::NodeDeleted => "node_deleted",
            LostReason::AuthFailed => "auth_failed",
        }
    }

    /// What happened, as a sentence fragment (`"the session expired"`), for messages in every
    /// language.
    pub fn describe(self) -> &'static str {
        match self {
            LostReason::SessionExpired => "the session expired",
            LostReason::DisconnectedTooLong => "the client was disconnected for too long and gave up its session",
            LostReason::Closed => "the client was closed",
            LostReason::NodeDeleted => "someone else deleted the lock node",
            LostReason::AuthFailed => "authentication failed",
        }
    }
}

/// Whether locks of a session can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// Connected: the session is live.
    Live,
    /// Disconnected: the session may be live; the locks may still be ours.
    Suspended,
    /// The session is over for us; its locks are gone or must be treated as gone.
    Over(LostReason),
}

pub(crate) struct Session {
    pub(crate) zk: zk::Client,
    pub(crate) id: i64,
    pub(crate) timeout: Duration,
    pub(crate) lease: watch::Receiver<Lease>,
    /// Cancelled once the lease is over, or the client is closed (a child of its closed token):
    /// whoever holds `zk` lets go of it then, so that the session really ends.
    pub(crate) ended: CancellationToken,
    /// Shared with the holds of this session, which must not keep the session itself alive.
    pub(crate) over: Arc<AtomicBool>,
    /// Who the server knows this session as, asked once, when a protected lock first needs it.
    pub(crate) identities: tokio::sync::OnceCell<crate::acl::Identities>,
}

impl Session {
    pub(crate) fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        match *self.lease.borrow() {
            Lease::Over(reason) => Some(reason),
            _ => None,
        }
    }

    /// Starts the session's monitor and returns the session.
    pub(crate) fn start(
        zk: zk::Client,
        client: Weak<ClientInner>,
        closed: &CancellationToken,
        runtime: &tokio::runtime::Handle,
    ) -> Arc<Session> {
        let (lease_sender, lease) = watch::channel(Lease::Live);
        let session = Arc::new(Session {
            id: zk.session_id().0,
            timeout: zk.session_timeout(),
            zk,
            lease,
            ended: closed.child_token(),
            over: Arc::new(AtomicBool::new(false)),
            identities: tokio::sync::OnceCell::new(),
        });
        // The monitor holds only a state watcher and weak references, never the session
        // handle, so it cannot keep the session alive.
        let states = session.zk.state_watcher();
        runtime.spawn(monitor(Arc::downgrade(&session), client, states, lease_sender));
        session
    }
}

/// Follows the session's state into its lease, and gives the session up on the client's side
/// when it has been disconnected too long.
///
/// The ZooKeeper client reports Disconnected once it has heard nothing for 2/5 of the session
/// timeout (checked every 1/20), so at most 9/20 of the timeout after it last heard from the
/// server; the server had heard from it shortly before that. The server cannot expire the
/// session, and let another waiter in, before a full timeout after that: at the earliest 11/20
/// of the timeout after the report. Giving up 2/5 of the timeout after the report leaves the
/// holder at least 3/20 of the timeout to hear of the loss first, and some slack for a busy
/// machine.
async fn monitor(
    session: Weak<Session>,
    client: Weak<ClientInner>,
    mut states: zk::StateWatcher,
    lease: watch::Sender<Lease>,
) {
    let Some((id, timeout, ended)) = session.upgrade().map(|s| (s.id, s.timeout, s.ended.clone())) else { return };
    let mut give_up_at: Option<Instant> = None;
    let mut state = Some(states.state());
    loop {
        let (next_lease, public) = match state {
            Some(zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly) => {
                give_up_at = None;
                (Lease::Live, SessionState::Connected)
            }
            Some(zk::SessionState::Disconnected) => {
                give_up_at.get_or_insert_with(|| Instant::now() + timeout * 2 / 5);
                (Lease::Suspended, SessionState::Disconnected)
            }
            Some(zk::SessionState::Expired) => (Lease::Over(LostReason::SessionExpired), SessionState::Expired),
            Some(zk::SessionState::AuthFailed) => (Lease::Over(LostReason::AuthFailed), SessionState::AuthFailed),
            Some(zk::SessionState::Closed) => (Lease::Over(LostReason::Closed), SessionState::Closed),
            None => (Lease::Over(LostReason::DisconnectedTooLong), SessionState::Expired),
        };
        if let Lease::Over(_) = next_lease {
            if let Some(session) = session.upgrade() {
                session.over.store(true, Ordering::Release);
                crate::hold::note_loss();
            }
        }
        lease.send_replace(next_lease);
        if let Some(client) = client.upgrade() {
            client.session_changed(id, public, matches!(next_lease, Lease::Over(_)));
        }
        if let Lease::Over(_) = next_lease {
            ended.cancel();
            return;
        }
        let give_up = async {
            match give_up_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        state = tokio::select! {
            state = states.changed() => Some(state),
            _ = give_up => None,
        };
    }
}
