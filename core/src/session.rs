//! One ZooKeeper session as zklock sees it: the handle, and a lease saying whether locks held in
//! it can still be trusted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::error::LostReason;

/// Told by a session's monitor of each change of the session's state: its id, the state, and
/// whether the session is over. The client's connection hears its sessions this way, holding
/// nothing of theirs.
pub(crate) type OnChange = Box<dyn Fn(i64, SessionState, bool) + Send + Sync>;

/// The state of a client's ZooKeeper session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionState {
    /// Connected to a server; the session is live.
    Connected,
    /// The connection is down; the session may still be live on the servers.
    Disconnected,
    /// The session expired (or the client gave it up after being disconnected for too long):
    /// its locks are lost. The next acquisition establishes a new session.
    Expired,
    /// The servers rejected the credentials.
    AuthFailed,
    /// The client was closed. Nothing follows.
    Closed,
}

impl SessionState {
    /// The state's stable snake_case name: `connected`, `disconnected`, `expired`,
    /// `auth_failed`, `closed` (each binding shows these, in its own case style).
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionState::Connected => "connected",
            SessionState::Disconnected => "disconnected",
            SessionState::Expired => "expired",
            SessionState::AuthFailed => "auth_failed",
            SessionState::Closed => "closed",
        }
    }

    /// Whether the session in this state is over (a client may go on with a new one, unless
    /// closed).
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
    }
}

/// Whether the client was closed (or dropped): the token wakes those waiting, and the flag
/// answers the reentrant fast path, as the token's own check takes a mutex.
#[derive(Clone, Default)]
pub(crate) struct Closed {
    pub(crate) token: CancellationToken,
    flag: Arc<AtomicBool>,
}

impl Closed {
    pub(crate) fn close(&self) {
        self.flag.store(true, Ordering::Release);
        note_loss();
        self.token.cancel();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }
}

/// How many losses this process has seen (a hold's node deleted by someone else, a session
/// over, a client closed), bumped after each is recorded and before it is announced, and again
/// by whoever reads a hold as lost (so a thread that saw a loss never re-enters past it). The
/// owner table's lock-free re-entry trusts a hold it checked while this count stood still, so it
/// reads no hold (see `owners::Fast`); any loss anywhere sends each re-entry through the checked
/// path once.
static LOSSES: AtomicU64 = AtomicU64::new(0);

/// Counts a loss; call after the flag that records it is set.
pub(crate) fn note_loss() {
    LOSSES.fetch_add(1, Ordering::AcqRel);
}

/// The count of losses so far, and of session timeouts that a reconnect shortened (a deadline
/// kept from before may be too late since: see `owners::Fast`); read it before checking a hold,
/// so a loss recorded after that check changes it.
#[inline]
pub(crate) fn losses() -> u64 {
    LOSSES.load(Ordering::Acquire).wrapping_add(zookeeper_client::timeout_shrinks())
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
    pub(crate) trust: Arc<Trust>,
    /// Who the server knows this session as, asked once, when a protected lock first needs it.
    pub(crate) identities: tokio::sync::OnceCell<crate::acl::Identities>,
}

impl Session {
    pub(crate) fn is_over(&self) -> bool {
        self.trust.is_over()
    }

    /// Why the session is over, if it is: as the lease says, or, before the monitor published
    /// it, as the monitor recorded it when it ended the session (or a lapse seen meanwhile).
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        match *self.lease.borrow() {
            Lease::Over(reason) => Some(reason),
            _ => self.trust.reason(),
        }
    }

    /// Starts the session's monitor and returns the session.
    pub(crate) fn start(
        zk: zk::Client,
        on_change: OnChange,
        closed: &CancellationToken,
        runtime: &tokio::runtime::Handle,
    ) -> Arc<Session> {
        let (lease_sender, lease) = watch::channel(Lease::Live);
        let session = Arc::new(Session {
            id: zk.session_id().0,
            timeout: zk.session_timeout(),
            trust: Arc::new(Trust::new(zk.answered_sends())),
            zk,
            lease,
            ended: closed.child_token(),
            identities: tokio::sync::OnceCell::new(),
        });
        // The monitor holds only a state watcher and weak references, never the session
        // handle, so it cannot keep the session alive.
        let states = session.zk.state_watcher();
        runtime.spawn(monitor(Arc::downgrade(&session), on_change, states, lease_sender));
        session
    }
}

/// How long after the send of a request the server answered a session's locks are trusted:
/// 9/10 of the session timeout T.
///
/// Safety. The server touched the session when it got that request, after it was sent, and
/// cannot expire the session, and let another waiter in, sooner than a full T after the touch
/// (it even rounds the expiry up to its next tick). So giving up at 9/10 T gives the hold up
/// at least T/10 (400 ms for a 4 s session, 1 s for the default 10 s) before the next holder
/// can be let in, whatever the client received meanwhile (watch notifications arrive over a
/// connection whose other direction is dead) and whatever state it reports (a handshake can
/// fail after the server said connected). That margin covers the clocks (the boot clock here,
/// the servers' monotonic clocks there: rates apart by parts per million) with room to spare;
/// a read of a hold's state checks the deadline itself, so the holder hears at once.
///
/// What this does not cover, on an ensemble (where the leader expires sessions and a follower
/// passes its clients' touches on to it only when the leader pings it, every half tick h):
/// a follower that fails before passing the last touches on leaves the leader with older ones,
/// by up to h plus the gap between answered sends (2/20 T): 100 ms with the test kit's 200 ms
/// tick, up to 1 s with ZooKeeper's default 2 s tick, beyond the margin T/10 there. And a
/// follower cut off from its leader (or a paused leader) keeps answering its clients' pings
/// for up to syncLimit x tickTime, while the leader expires their sessions from the touches it
/// had: the holder then trusts a session the leader has ended, for up to that long (5 s in the
/// test kit; 4.1 s past the margin for a 10 s session). Both need a proof of the leader's
/// touch the client cannot see today; core/tests/outages.rs has the failing test (ignored).
///
/// Liveness. The client pings after one tick (T/20) without a send, checked each
/// tick, so while the server answers, the latest answered send is at most 2/20 T old. A server
/// that pauses (a GC, a stopped VM) then keeps the hold for a pause of up to 9/10 - 2/20 = 8/10
/// of T (3.2 s of a 4 s session): the answers after it come before the deadline. (Before: 17/20
/// and a ping after 3/20, so as little as 13/20 T; a 3 s pause lost a 4 s session's lock at
/// 2.7 s although the server kept the session.) The client drops a silent connection after
/// 2/5 T (its read timeout; Java's is 2/3 T): a dropped connection costs no hold, and reading
/// early leaves 9/10 - 2/20 - 2/5 = 2/5 T to reach another server before the deadline.
const TRUSTED_FOR: (u32, u32) = (9, 10);

/// Whether the locks of a session can still be trusted: not once the session is over, nor past
/// the deadline that the latest answered send sets, with the session timeout negotiated for it.
/// Checked by every read of a hold's state (on the boot clock, which counts a suspended
/// machine's time, as the servers' clocks do), so a holder paused past the deadline reads lost
/// as soon as it runs, before the monitor wakes; and by the owner tables' lock-free re-entry,
/// against the deadline it last saw.
pub(crate) struct Trust {
    over: AtomicBool,
    /// Why the session is over: set by the monitor, with `over`, before it ends the session.
    reason: OnceLock<LostReason>,
    /// Set the first time the deadline is seen passed, never cleared. An answer that comes
    /// later would move the deadline on, but whoever read the lapse may have acted on it (a
    /// release that deleted nothing, an attempt that let its node go): the session must end.
    lapsed: AtomicBool,
    answered: zk::AnsweredSends,
    /// Wakes the monitor at the first lapse anyone sees, to end the session at once.
    lapse_seen: Notify,
}

impl Trust {
    fn new(answered: zk::AnsweredSends) -> Trust {
        Trust {
            over: AtomicBool::new(false),
            reason: OnceLock::new(),
            lapsed: AtomicBool::new(false),
            answered,
            lapse_seen: Notify::new(),
        }
    }

    /// Over, or past the deadline.
    #[inline]
    pub(crate) fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire) || self.lapsed()
    }

    /// Past the deadline (once, for good): the server may expire the session before the holder
    /// hears of it.
    pub(crate) fn lapsed(&self) -> bool {
        if self.lapsed.load(Ordering::Acquire) {
            return true;
        }
        // Over for another reason first: that stays the reason.
        if self.over.load(Ordering::Acquire) || zk::boot_nanos() < self.deadline_nanos() {
            return false;
        }
        if !self.lapsed.swap(true, Ordering::AcqRel) {
            // Recorded, then counted (see `LOSSES`), then the monitor told.
            note_loss();
            self.lapse_seen.notify_one();
        }
        true
    }

    /// Why the session is over, once the monitor ended it or a lapse was seen.
    fn reason(&self) -> Option<LostReason> {
        match self.reason.get() {
            Some(reason) => Some(*reason),
            None => self.has_lapsed().then_some(LostReason::DisconnectedTooLong),
        }
    }

    /// Whether a lapse was seen, before the session was over for any other reason.
    pub(crate) fn has_lapsed(&self) -> bool {
        self.lapsed.load(Ordering::Acquire)
    }

    /// The deadline, in boot-clock nanoseconds (see [`zk::boot_nanos`]); 0 once it lapsed.
    pub(crate) fn deadline_nanos(&self) -> u64 {
        if self.lapsed.load(Ordering::Acquire) {
            return 0;
        }
        // A session is made by an answered handshake, so there is always an answered send.
        let Some((sent, timeout)) = self.answered.latest_with_timeout() else { return 0 };
        let deadline = sent + timeout * TRUSTED_FOR.0 / TRUSTED_FOR.1;
        u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Resolves once the deadline passed (it moves on with every answer), or anyone saw it had.
    async fn lapse(&self) {
        loop {
            let seen = self.lapse_seen.notified();
            tokio::pin!(seen);
            seen.as_mut().enable();
            if self.lapsed() {
                return;
            }
            let left = Duration::from_nanos(self.deadline_nanos().saturating_sub(zk::boot_nanos()));
            tokio::select! {
                _ = tokio::time::sleep(left) => {},
                _ = seen => {},
            }
        }
    }
}

/// Follows the session's state into its lease, and gives the session up on the client's side
/// once its [`Trust`] lapsed, whatever state the client reports.
async fn monitor(
    session: Weak<Session>,
    on_change: OnChange,
    mut states: zk::StateWatcher,
    lease: watch::Sender<Lease>,
) {
    let Some((id, trust, ended)) = session.upgrade().map(|s| (s.id, s.trust.clone(), s.ended.clone())) else {
        return;
    };
    let mut state = Some(states.state());
    loop {
        // A lapse first: state reports since do not undo it (and the holds read it already).
        if trust.lapsed() && !matches!(state, Some(zk::SessionState::Closed)) {
            state = None;
        }
        let (next_lease, public) = match state {
            Some(zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly) => {
                (Lease::Live, SessionState::Connected)
            }
            Some(zk::SessionState::Disconnected) => (Lease::Suspended, SessionState::Disconnected),
            Some(zk::SessionState::Expired) => (Lease::Over(LostReason::SessionExpired), SessionState::Expired),
            Some(zk::SessionState::AuthFailed) => (Lease::Over(LostReason::AuthFailed), SessionState::AuthFailed),
            Some(zk::SessionState::Closed) => (Lease::Over(LostReason::Closed), SessionState::Closed),
            None => (Lease::Over(LostReason::DisconnectedTooLong), SessionState::Expired),
        };
        // Over: the reason recorded, then the session ended, and only then the lease published.
        // A step waiting to be reconnected wakes on the lease: it must find the session ended
        // (and stop, to queue again on a new session), never send on a client that is dead
        // (its request failed as if answered, with no reason given). Whoever sees `ended`
        // reads the reason from the trust until the lease says it.
        if let Lease::Over(reason) = next_lease {
            let _ = trust.reason.set(reason);
            trust.over.store(true, Ordering::Release);
            note_loss();
            ended.cancel();
        }
        lease.send_replace(next_lease);
        on_change(id, public, matches!(next_lease, Lease::Over(_)));
        if let Lease::Over(_) = next_lease {
            return;
        }
        state = tokio::select! {
            state = states.changed() => Some(state),
            _ = trust.lapse() => None,
        };
    }
}
