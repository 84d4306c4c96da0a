//! The fair, reentrant lock: Curator's InterProcessMutex recipe, node for node.

use std::future::Future;

use futures::future::BoxFuture;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::order::{self, LOCK_NAME};
use crate::session::{Lease, Session};
use crate::validate;

const EPHEMERAL_SEQUENTIAL: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
const CONTAINER: zk::CreateOptions<'static> = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());

/// Whether an operation failed because the connection did, not because of what it asked: the
/// ZooKeeper client reports requests cut off by a broken or silent connection either as
/// ConnectionLoss or as a custom I/O or timeout error.
pub(crate) fn connection_lost(err: &zk::Error) -> bool {
    matches!(err, zk::Error::ConnectionLoss | zk::Error::Custom(_))
}

/// Pause before retrying after a connection loss, so a dead connection is not hammered before
/// the session notices it is down.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(20);

/// A server closes the connection of a client whose request it refuses (one over its packet
/// limit); the client reconnects and the request would be sent again, forever. So an attempt
/// that loses the connection this many times in a row, with no request of its own answered in
/// between that moved it on (a create, a listing, a watch), ends with an error instead. A
/// network that drops a connection this often, each time a request is in flight, leaves an
/// attempt no better off waiting. (A time window since reconnecting would not do: marshalling
/// and writing a request of megabytes takes seconds.)
const REFUSAL_LIMIT: u32 = 8;

/// What bounds one attempt's steps: its deadline (`None`: none), which also bounds removing its
/// node, and the run of connections lost with no progress in between.
struct Budget {
    deadline: Option<Instant>,
    losses: std::sync::atomic::AtomicU32,
}

impl Budget {
    fn until(deadline: Option<Instant>) -> Budget {
        Budget { deadline, losses: std::sync::atomic::AtomicU32::new(0) }
    }

    /// Counts a connection loss; `Err(Stop::Refused)` at the [`REFUSAL_LIMIT`]th in a row.
    fn lost_connection(&self) -> std::result::Result<(), Stop> {
        if self.losses.fetch_add(1, Ordering::Relaxed) + 1 >= REFUSAL_LIMIT {
            return Err(Stop::Refused);
        }
        Ok(())
    }

    /// A request of the attempt was answered and moved it on.
    fn progressed(&self) {
        self.losses.store(0, Ordering::Relaxed);
    }
}

/// The message of [`Stop::Refused`].
const REFUSED: &str = "ZooKeeper closed the connection each time this attempt sent its request (8 times in a row): \
     it is most likely over the server's packet limit (jute.maxbuffer); set the client option jute_maxbuffer to the \
     servers' value so that such requests are refused up front";

/// Who holds a lock, for reentrancy: an opaque id chosen by the caller (a thread, an asyncio
/// task, a Node async flow). Acquisitions by the same owner nest; different owners on the same
/// [`Lock`] are separate contenders in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    id: u64,
    label: Option<Arc<str>>,
}

impl Owner {
    /// An owner with the given id; its label in the node data is the id.
    pub const fn new(id: u64) -> Owner {
        Owner { id, label: None }
    }

    /// An owner with the given id, labelled in the node data (e.g. `"thread:worker-3"`).
    pub fn with_label(id: u64, label: impl Into<Arc<str>>) -> Owner {
        Owner { id, label: Some(label.into()) }
    }

    /// A fresh owner, distinct from every other `Owner::unique()` in this process.
    pub fn unique() -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(1 << 63);
        Owner::new(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The owner's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How messages and lock nodes name this owner: its label, or else its id.
    pub fn label(&self) -> String {
        match &self.label {
            Some(label) => label.to_string(),
            None => self.id.to_string(),
        }
    }
}

/// Options for [`crate::Client::lock_with`].
#[derive(Clone, Default)]
pub struct LockOptions {
    /// Recorded in each lock node's identity, like kazoo's `identifier`.
    pub identifier: Option<String>,
    /// Test seam: runs with the predecessor's path after the listing and before the watch is
    /// set, so tests can make the predecessor vanish in exactly that window.
    #[doc(hidden)]
    pub before_watch: Option<BeforeWatch>,
}

#[doc(hidden)]
pub type BeforeWatch = Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

impl std::fmt::Debug for LockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockOptions").field("identifier", &self.identifier).finish_non_exhaustive()
    }
}

/// Who a lock node belongs to, as recorded in its data (JSON) by zklock in any language.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Host name of the process.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// The owner's label (see [`Owner::with_label`]).
    pub owner: String,
    /// The language of the caller: `rust`, `c`, `python` or `node`.
    pub lang: String,
    /// The lock's identifier, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
}

/// One contender in a lock's queue, from [`Lock::contenders`] and [`Lock::holder`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The child node's name.
    pub node: String,
    /// The sequence suffix, if the name has one.
    pub sequence: Option<i64>,
    /// The node's creation zxid, which is also its holder's fencing token.
    pub fencing_token: i64,
    /// The session that owns the (ephemeral) node.
    pub session_id: i64,
    /// The identity in the node data, when it was written by zklock.
    pub identity: Option<Identity>,
    /// The raw node data (Curator writes the client's IP address).
    pub data: Vec<u8>,
}

/// A fair, reentrant lock on one ZooKeeper path, from [`crate::Client::lock`]. Cheap to clone;
/// clones share the per-owner hold counts.
#[derive(Clone)]
pub struct Lock {
    inner: Arc<LockInner>,
}

struct LockInner {
    client: Arc<ClientInner>,
    path: String,
    identifier: Option<String>,
    before_watch: Option<BeforeWatch>,
    /// Few owners per lock, so a vector beats a map for the reentrant path.
    owners: Mutex<Vec<Slot>>,
    /// Whether a create under the path has succeeded (and no NoNode said otherwise since). Until
    /// then an attempt keeps the client's send turn until its create is answered, so that
    /// attempts whose creates failed for want of the path send them again in their order.
    path_known: AtomicBool,
}

struct Slot {
    owner: u64,
    /// `None` while this owner's acquisition is in progress.
    held: Option<Held>,
}

struct Held {
    count: u64,
    hold: Hold,
}

/// How long an acquisition may wait.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Forever,
    For(Duration),
    /// Only try: one create and one listing, then give up if not first.
    No,
}

impl Wait {
    fn at_most(timeout: Duration) -> Wait {
        if timeout.is_zero() {
            Wait::No
        } else {
            Wait::For(timeout)
        }
    }
}

/// Why a bounded step stopped before its future finished.
enum Stop {
    Deadline,
    Closed,
    /// The session is over (expired, or given up after too long a disconnection).
    SessionOver,
    /// The server keeps dropping the connection when this step's request is sent.
    Refused,
}

impl Lock {
    /// Refuses a path and identifier that could not fit in a request, whoever the owner.
    pub(crate) fn new(client: Arc<ClientInner>, path: String, options: crate::LockOptions) -> Result<Lock> {
        let inner = LockInner {
            client,
            path,
            identifier: options.identifier,
            before_watch: options.before_watch,
            owners: Mutex::new(Vec::new()),
            path_known: AtomicBool::new(false),
        };
        inner.check_fits(inner.node_data_labelled(String::new()).len(), || "the identity".to_owned())?;
        Ok(Lock { inner: Arc::new(inner) })
    }

    /// The lock path, relative to the client's chroot.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The client this lock was made from.
    pub fn client(&self) -> crate::Client {
        crate::Client { inner: self.inner.client.clone() }
    }

    /// Acquires the lock for `owner`, waiting as long as it takes.
    ///
    /// An owner that already holds it only counts up, with no ZooKeeper traffic. Otherwise one
    /// EPHEMERAL_SEQUENTIAL child is created and the owner queues, first come first served,
    /// watching only its immediate predecessor.
    ///
    /// # Notable errors
    /// * [`ErrorKind::Closed`] if the client is or gets closed.
    /// * [`ErrorKind::SessionExpired`] if the session expires while waiting.
    /// * [`ErrorKind::InvalidArgument`] if the same owner already has an acquisition in progress.
    ///
    /// # Cancellation safety
    /// Dropping the future removes the attempt's node in the background: nothing is orphaned.
    pub async fn acquire(&self, owner: &Owner) -> Result<LockGuard> {
        let hold = self.acquire_hold(owner, Wait::Forever).await?.expect("waiting forever never gives up");
        Ok(self.guard(owner, hold))
    }

    /// As [`Lock::acquire`], giving up with [`ErrorKind::Timeout`] after `timeout`: one deadline
    /// for the whole attempt, retries included. The attempt's node is deleted before this returns.
    /// A zero timeout only tries, as [`Lock::try_acquire`] does.
    pub async fn acquire_timeout(&self, owner: &Owner, timeout: Duration) -> Result<LockGuard> {
        match self.acquire_hold(owner, Wait::at_most(timeout)).await? {
            Some(hold) => Ok(self.guard(owner, hold)),
            None if timeout.is_zero() => {
                Err(self.inner.error(ErrorKind::Timeout, "held by another contender (tried once: zero timeout)"))
            }
            None => Err(self.inner.error(ErrorKind::Timeout, format!("not acquired within {timeout:?}"))),
        }
    }

    /// Acquires the lock only if no one is ahead in the queue; `Ok(None)` otherwise, with the
    /// attempt's node deleted before this returns.
    pub async fn try_acquire(&self, owner: &Owner) -> Result<Option<LockGuard>> {
        Ok(self.acquire_hold(owner, Wait::No).await?.map(|hold| self.guard(owner, hold)))
    }

    /// The binding-level acquire: `timeout` of `None` waits forever, `Some(ZERO)` only tries.
    /// Returns `Ok(None)` when the lock was held by others until the timeout; any other failure
    /// is an error, including [`ErrorKind::Timeout`] when no session could be established in
    /// time or a try got no answer. The hold is released with [`Lock::release`], not by a guard.
    pub async fn acquire_for(&self, owner: &Owner, timeout: Option<Duration>) -> Result<Option<Hold>> {
        self.acquire_hold(owner, timeout.map_or(Wait::Forever, Wait::at_most)).await
    }

    /// Releases one level of `owner`'s hold; at zero the lock node is deleted, and this returns
    /// only once the server confirmed the delete.
    ///
    /// # Notable errors
    /// * [`ErrorKind::NotOwner`] if `owner` does not hold the lock; nothing is changed.
    /// * [`ErrorKind::LockLost`] if the hold was lost (session expired, client closed, or node
    ///   deleted by someone else); the hold is dropped and nothing is deleted.
    /// * [`ErrorKind::ConnectionLoss`] if the connection dropped before the server confirmed the
    ///   delete. The hold is gone from this process, and the delete goes on in the background
    ///   until the node is gone or the session is over: the node is never left behind.
    pub async fn release(&self, owner: &Owner) -> Result<()> {
        match self.inner.unhold(owner)? {
            None => Ok(()),
            // Boxed so the reentrant path's future stays small: no network, no big state machine.
            Some(hold) => Box::pin(self.inner.delete_held(&hold)).await,
        }
    }

    /// Whether `owner` holds the lock (as far as this process knows). A lost hold is not held,
    /// though it stays `owner`'s until released (see [`Lock::hold_of`]).
    pub fn is_held_by(&self, owner: &Owner) -> bool {
        self.inner.owners.lock().iter().any(|slot| {
            slot.owner == owner.id && slot.held.as_ref().is_some_and(|held| held.hold.state() != crate::HoldState::Lost)
        })
    }

    /// The state of `owner`'s hold, if it holds the lock.
    pub fn state_of(&self, owner: &Owner) -> Option<crate::HoldState> {
        self.hold_of(owner).map(|(hold, _)| hold.state())
    }

    /// `owner`'s hold and reentrancy count, if it holds the lock.
    pub fn hold_of(&self, owner: &Owner) -> Option<(Hold, u64)> {
        let owners = self.inner.owners.lock();
        let held = owners.iter().find(|slot| slot.owner == owner.id)?.held.as_ref()?;
        Some((held.hold.clone(), held.count))
    }

    /// Every contender, holder first, in queue order, with the identity recorded in its node.
    pub async fn contenders(&self) -> Result<Vec<Participant>> {
        self.inner.contenders().await
    }

    /// The current holder, if any.
    pub async fn holder(&self) -> Result<Option<Participant>> {
        Ok(self.inner.contenders().await?.into_iter().next())
    }

    /// Begins an acquisition for `owner` at once, for the bindings: a re-entry (or an error such
    /// as a second acquire by the same owner) is decided before this returns, and otherwise the
    /// attempt's create is sent, or queued behind those of acquisitions begun earlier on this
    /// client, before this returns. So the creates of one client reach the server in the order
    /// its acquisitions began, whichever threads later drive them. `timeout` as in
    /// [`Lock::acquire_for`]. Call inside or outside the client's runtime.
    pub fn begin_acquire(&self, owner: &Owner, timeout: Option<Duration>) -> Acquire {
        let wait = timeout.map_or(Wait::Forever, Wait::at_most);
        match self.inner.reenter_or_claim(owner) {
            Err(err) => Acquire::done(Err(err)),
            Ok(Some(hold)) => Acquire::done(Ok(Some(hold))),
            Ok(None) => {
                let lock = self.clone();
                let owner = owner.clone();
                let mut future: BoxFuture<'static, Result<Option<Hold>>> =
                    Box::pin(async move { lock.acquire_claimed(&owner, wait).await });
                // One poll now, with the runtime's context for its timers: it runs up to the
                // create's reply (or to its place in the send-order queue).
                let _context = self.inner.client.runtime.enter();
                match future.as_mut().poll(&mut std::task::Context::from_waker(futures::task::noop_waker_ref())) {
                    std::task::Poll::Ready(result) => Acquire::done(result),
                    std::task::Poll::Pending => Acquire { now: None, running: Some(future) },
                }
            }
        }
    }

    /// Re-enters at once if `owner` holds the lock: `Some(Ok(hold))` counted up, `Some(Err(_))`
    /// (LockLost) if its hold was lost; `None` if it holds nothing here. No ZooKeeper traffic.
    pub fn try_reenter(&self, owner: &Owner) -> Option<Result<Hold>> {
        self.inner.reenter(owner)
    }

    /// Releases one nested level at once if `owner` holds more than one: `Some(Ok(()))`, or,
    /// if its hold was lost, `Some(Err(_))` (LockLost) with the level counted down all the same;
    /// `None` for the last level (use [`Lock::release`], which deletes the node, or reports the
    /// loss) or if `owner` holds nothing here. No ZooKeeper traffic.
    pub fn release_nested(&self, owner: &Owner) -> Option<Result<()>> {
        let mut owners = self.inner.owners.lock();
        let held = owners.iter_mut().find(|slot| slot.owner == owner.id)?.held.as_mut()?;
        if held.count < 2 {
            return None;
        }
        held.count -= 1;
        Some(match held.hold.lost_reason() {
            None => Ok(()),
            Some(reason) => Err(self.inner.error(
                ErrorKind::LockLost,
                format!("owner {}'s hold is lost: {}; release it", owner.label(), reason.describe()),
            )),
        })
    }

    async fn acquire_hold(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        if let Some(hold) = self.inner.reenter_or_claim(owner)? {
            return Ok(Some(hold));
        }
        self.acquire_claimed(owner, wait).await
    }

    /// Contends for an owner whose slot says "acquiring".
    async fn acquire_claimed(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        // The owner's slot says "acquiring"; this guard clears it unless the acquisition
        // succeeds, including when the future is dropped.
        let mut claim = Claim { lock: &self.inner, owner: owner.id, done: false };
        // Boxed so the reentrant path above does not carry this large state machine.
        let result = Box::pin(self.inner.contend(owner, wait)).await;
        if let Ok(Some(hold)) = &result {
            claim.done = true;
            let mut owners = self.inner.owners.lock();
            if let Some(slot) = owners.iter_mut().find(|slot| slot.owner == owner.id) {
                slot.held = Some(Held { count: 1, hold: hold.clone() });
            }
        }
        result
    }

    fn guard(&self, owner: &Owner, hold: Hold) -> LockGuard {
        LockGuard { lock: self.clone(), owner: owner.clone(), hold, armed: true }
    }
}

/// An acquisition begun by [`Lock::begin_acquire`]: a future of its outcome (as
/// [`Lock::acquire_for`]'s), already under way.
#[must_use = "dropping an acquisition cancels it"]
pub struct Acquire {
    now: Option<Result<Option<Hold>>>,
    running: Option<BoxFuture<'static, Result<Option<Hold>>>>,
}

impl Acquire {
    fn done(result: Result<Option<Hold>>) -> Acquire {
        Acquire { now: Some(result), running: None }
    }

    /// The outcome, if the acquisition was decided as it began (a re-entry, or an error):
    /// a binding can then answer without a round trip through its event loop.
    pub fn take_now(&mut self) -> Option<Result<Option<Hold>>> {
        self.now.take()
    }
}

impl Future for Acquire {
    type Output = Result<Option<Hold>>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        if let Some(result) = self.now.take() {
            return std::task::Poll::Ready(result);
        }
        match self.running.as_mut() {
            Some(running) => running.as_mut().poll(cx),
            None => panic!("Acquire polled after it finished"),
        }
    }
}

struct Claim<'a> {
    lock: &'a LockInner,
    owner: u64,
    done: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.lock.owners.lock().retain(|slot| !(slot.owner == self.owner && slot.held.is_none()));
        }
    }
}

impl LockInner {
    fn error(&self, kind: ErrorKind, message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
        Error::new(kind, message).with_path(&self.path)
    }

    fn zk_error(&self, err: zk::Error, doing: &str) -> Error {
        Error::from_zk(err, &self.path, doing)
    }

    fn closed_error(&self) -> Error {
        self.error(ErrorKind::Closed, "the client was closed")
    }

    fn session_over_error(&self, session: &Session) -> Error {
        let reason = session.lost_reason().unwrap_or(crate::LostReason::SessionExpired);
        self.error(ErrorKind::SessionExpired, format!("{}; a new attempt starts a new session", reason.describe()))
    }

    /// The reentrant fast path: counts up an existing hold, or marks the owner as acquiring.
    fn reenter_or_claim(&self, owner: &Owner) -> Result<Option<Hold>> {
        if self.client.is_closed() {
            return Err(self.closed_error());
        }
        let mut owners = self.owners.lock();
        if let Some(slot) = owners.iter_mut().find(|slot| slot.owner == owner.id) {
            return match &mut slot.held {
                Some(held) => self.count_up(owner, held).map(Some),
                None => Err(self.error(
                    ErrorKind::InvalidArgument,
                    format!("owner {} is already acquiring this lock; an owner acquires one at a time", owner.label()),
                )),
            };
        }
        owners.push(Slot { owner: owner.id, held: None });
        Ok(None)
    }

    /// Counts up `owner`'s hold, if it has one here.
    fn reenter(&self, owner: &Owner) -> Option<Result<Hold>> {
        let mut owners = self.owners.lock();
        let held = owners.iter_mut().find(|slot| slot.owner == owner.id)?.held.as_mut()?;
        if self.client.is_closed() {
            // Closing lost the hold: say so, as for any other loss.
            let why = crate::LostReason::Closed.describe();
            return Some(Err(
                self.error(ErrorKind::LockLost, format!("owner {} cannot re-enter: {why}; release it", owner.label()))
            ));
        }
        Some(self.count_up(owner, held))
    }

    fn count_up(&self, owner: &Owner, held: &mut Held) -> Result<Hold> {
        if held.hold.inner.is_lost() {
            return Err(self.error(
                ErrorKind::LockLost,
                format!(
                    "owner {} cannot re-enter: {}; release it",
                    owner.label(),
                    held.hold.lost_reason().map_or("it was lost", |r| r.describe())
                ),
            ));
        }
        held.count += 1;
        Ok(held.hold.clone())
    }

    /// Counts down `owner`'s hold; returns the hold to delete when the count reaches zero.
    fn unhold(&self, owner: &Owner) -> Result<Option<Hold>> {
        let mut owners = self.owners.lock();
        let Some(i) = owners.iter().position(|slot| slot.owner == owner.id && slot.held.is_some()) else {
            return Err(self.error(ErrorKind::NotOwner, format!("owner {} does not hold this lock", owner.label())));
        };
        let held = owners[i].held.as_mut().expect("position() checked it is held");
        // A lost hold goes whole: re-entered levels have nothing left to protect.
        if held.count > 1 && !held.hold.inner.is_lost() {
            held.count -= 1;
            return Ok(None);
        }
        Ok(owners.swap_remove(i).held.map(|held| held.hold))
    }

    /// Deletes a held node. On connection loss the delete goes on in the background, until the
    /// node is gone or its session is over; it only ever deletes this hold's own node.
    async fn delete_held(&self, hold: &Hold) -> Result<()> {
        let lost = |why: &str| self.error(ErrorKind::LockLost, format!("{why}; nothing was deleted"));
        if let Some(reason) = hold.inner.finish() {
            return Err(lost(reason.describe()));
        }
        let session = match hold.inner.session.upgrade() {
            Some(session) if !session.is_over() => session,
            gone => {
                let reason = gone.and_then(|s| s.lost_reason()).unwrap_or(crate::LostReason::SessionExpired);
                return Err(lost(reason.describe()));
            }
        };
        let result = tokio::select! {
            result = session.zk.delete(hold.node_path(), None) => result,
            _ = self.client.closed.cancelled() => return Err(lost(crate::LostReason::Closed.describe())),
            _ = session.ended.cancelled() => {
                return Err(lost(session.lost_reason().unwrap_or(crate::LostReason::SessionExpired).describe()))
            },
        };
        match result {
            Ok(()) => Ok(()),
            Err(zk::Error::NoNode) => Err(lost(crate::LostReason::NodeDeleted.describe())),
            Err(zk::Error::SessionExpired) => Err(lost(crate::LostReason::SessionExpired.describe())),
            Err(err) if connection_lost(&err) => {
                let node = Some(hold.node_path().to_owned());
                let removal = remove_node(self.client.clone(), session, self.path.clone(), String::new(), node);
                self.client.runtime.spawn(removal);
                Err(self.error(
                    ErrorKind::ConnectionLoss,
                    "the connection dropped before the server confirmed the release; the lock node is deleted \
                     in the background once reconnected, or goes with the session",
                ))
            }
            Err(err) => Err(self.zk_error(err, "deleting the lock node")),
        }
    }

    fn node_data(&self, owner: &Owner) -> Vec<u8> {
        self.node_data_labelled(owner.label())
    }

    fn node_data_labelled(&self, owner: String) -> Vec<u8> {
        let host = &self.client.identity;
        let identity = Identity {
            host: host.host.clone(),
            pid: host.pid,
            owner,
            lang: host.language.clone(),
            identifier: self.identifier.clone(),
        };
        serde_json::to_vec(&identity).expect("identity serializes")
    }

    /// Refuses, before sending, a create the server would refuse by dropping the connection.
    fn check_fits(&self, data_len: usize, what_else: impl FnOnce() -> String) -> Result<()> {
        // The node's full path on the server: chroot, lock path, `/_c_<uuid>-lock-<10 digits>`.
        let name_len = "/_c_".len() + 36 + "-".len() + LOCK_NAME.len() + 10;
        let server_path_len = self.client.chroot.len() + self.path.len() + name_len;
        let len = validate::create_request_len(server_path_len, data_len);
        validate::request_fits(len, self.client.options.jute_maxbuffer, || {
            format!(
                "the lock path of {} bytes, identifier of {} bytes and {}",
                self.path.len(),
                self.identifier.as_ref().map_or(0, String::len),
                what_else()
            )
        })
        .map_err(|err| err.with_path(&self.path))
    }

    fn child_path(&self, name: &str) -> String {
        format!("{}/{}", self.path, name)
    }

    /// Awaits `future` unless the client is closed, the session is over, or the deadline passes.
    async fn bounded<F: Future>(
        &self,
        session: &Session,
        future: F,
        budget: &Budget,
    ) -> std::result::Result<F::Output, Stop> {
        bounded(&self.client, session, future, budget).await
    }

    /// After a connection loss: waits until the session is connected again or has ended.
    async fn await_connected(&self, session: &Session, budget: &Budget) -> std::result::Result<(), Stop> {
        await_connected(&self.client, session, budget).await
    }

    /// One acquisition attempt, with its node removed on every way out but success.
    async fn contend(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        let started = Instant::now();
        let data = self.node_data(owner);
        self.check_fits(data.len(), || format!("owner label of {} bytes", owner.label().len()))?;
        let send_turn = match wait {
            Wait::For(timeout) => match tokio::time::timeout(timeout, self.client.send_order.lock()).await {
                Ok(turn) => turn,
                // Acquisitions begun earlier are still establishing a session or creating the path.
                Err(_) => return Ok(None),
            },
            _ => self.client.send_order.lock().await,
        };
        let session = self.client.session(&self.path).await?;
        let name_prefix = format!("_c_{}-{LOCK_NAME}", self.client.attempt_ids.next());
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            path: self.path.clone(),
            name_prefix,
            node: None,
            armed: false,
        };
        let mut result = self.queue_and_wait(&session, data, (wait, started), &mut attempt, send_turn).await;
        // With a deadline, a Timeout from the attempt can only be that deadline passing (the
        // session was established above): the lock was not obtained in time, which is no error.
        if matches!(wait, Wait::For(_)) && result.as_ref().is_err_and(|err| err.kind() == ErrorKind::Timeout) {
            result = Ok(None);
        }
        match &result {
            Ok(Some(_)) => attempt.armed = false,
            // The session is gone, and its ephemeral nodes with it.
            Err(err) if matches!(err.kind(), ErrorKind::Closed | ErrorKind::SessionExpired) => attempt.armed = false,
            _ => attempt.remove().await,
        }
        result
    }

    async fn queue_and_wait(
        &self,
        session: &Arc<Session>,
        data: Vec<u8>,
        (wait, started): (Wait, Instant),
        attempt: &mut Attempt,
        send_turn: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<Option<Hold>> {
        let mut send_turn = Some(send_turn);
        let budget = &Budget::until(match wait {
            Wait::Forever => None,
            Wait::For(timeout) => Some(started + timeout),
            // Trying still completes its one round trip, unless the session is stuck.
            Wait::No => Some(started + session.timeout),
        });
        let zk = &session.zk;
        let stopped = |stop: Stop| match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            // Under Wait::For, `contend` turns this into "not obtained in time".
            Stop::Deadline => match wait {
                Wait::No => self.error(ErrorKind::Timeout, "no answer from ZooKeeper while trying the lock"),
                _ => self.error(ErrorKind::Timeout, "the attempt's deadline passed"),
            },
            Stop::Refused => self.error(ErrorKind::ConnectionLoss, REFUSED),
        };
        let node_prefix = self.child_path(&attempt.name_prefix);
        // Our node: (name, sequence, creation zxid).
        let mut mine: Option<(String, i64, i64)> = None;
        loop {
            let children = if mine.is_none() {
                // Pipelined: ZooKeeper answers a session's requests in order, so the listing sent
                // right behind the create already contains the new node. One round trip.
                attempt.armed = true;
                let create = zk.create(&node_prefix, &data, &EPHEMERAL_SEQUENTIAL);
                let listing = zk.list_children(&self.path);
                if self.path_known.load(Ordering::Acquire) {
                    // Sent: later acquisitions of this client may send theirs.
                    drop(send_turn.take());
                }
                match self.bounded(session, create, budget).await.map_err(stopped)? {
                    Ok((stat, sequence)) => {
                        budget.progressed();
                        self.path_known.store(true, Ordering::Release);
                        drop(send_turn.take());
                        let name = format!("{}{}", attempt.name_prefix, sequence);
                        attempt.node = Some(self.child_path(&name));
                        mine = Some((name, sequence.into_i64(), stat.czxid));
                    }
                    Err(zk::Error::NoNode) => {
                        self.path_known.store(false, Ordering::Release);
                        self.make_parents(session, budget).await.map_err(|e| e.map_stop(stopped))?;
                        continue;
                    }
                    Err(err) if connection_lost(&err) => {
                        // The create may or may not have happened: find it by our uuid rather
                        // than make a second node.
                        self.await_connected(session, budget).await.map_err(stopped)?;
                        mine = self
                            .find_mine(session, &attempt.name_prefix, budget)
                            .await
                            .map_err(|e| e.map_stop(stopped))?;
                        attempt.node = mine.as_ref().map(|(name, ..)| self.child_path(name));
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "creating the lock node")),
                }
                match self.bounded(session, listing, budget).await.map_err(stopped)? {
                    Ok(children) => {
                        budget.progressed();
                        children
                    }
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, budget).await.map_err(stopped)?;
                        continue;
                    }
                    Err(zk::Error::NoNode) => continue,
                    Err(err) => return Err(self.zk_error(err, "listing the contenders")),
                }
            } else {
                match self.bounded(session, zk.list_children(&self.path), budget).await.map_err(stopped)? {
                    Ok(children) => {
                        budget.progressed();
                        children
                    }
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, budget).await.map_err(stopped)?;
                        continue;
                    }
                    // The lock path vanished, and our node with it: queue again (kazoo #563).
                    Err(zk::Error::NoNode) => {
                        self.path_known.store(false, Ordering::Release);
                        mine = None;
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "listing the contenders")),
                }
            };
            let (name, sequence, czxid) = mine.clone().expect("created above");
            let queue = match self.in_queue_order(session, children, budget).await {
                Ok(queue) => queue,
                Err(Retry::Stop(stop)) => return Err(stopped(stop)),
                Err(Retry::Again) => continue,
                Err(Retry::Fail(err)) => return Err(err),
            };
            let Some(position) = queue.iter().position(|child| *child == name) else {
                // Our node is gone (the path was removed, or someone deleted it): queue again.
                mine = None;
                attempt.node = None;
                continue;
            };
            if position == 0 {
                let node_path = attempt.node.clone().expect("set with mine");
                let hold = Hold::new(session, &self.client.closed, node_path, sequence, czxid);
                self.client.node_watcher.add(&hold);
                return Ok(Some(hold));
            }
            if let Wait::No = wait {
                return Ok(None);
            }
            // Watch only the immediate predecessor. getData sets no watch on a missing node, so
            // NoNode leaves nothing behind and we simply look again.
            let predecessor = self.child_path(&queue[position - 1]);
            if let Some(hook) = &self.before_watch {
                hook(predecessor.clone()).await;
            }
            let watcher =
                match self.bounded(session, zk.get_and_watch_data(&predecessor), budget).await.map_err(stopped)? {
                    Ok((_, _, watcher)) => {
                        budget.progressed();
                        watcher
                    }
                    Err(zk::Error::NoNode) => continue,
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, budget).await.map_err(stopped)?;
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "watching the predecessor")),
                };
            let event = self.bounded(session, watcher.changed(), budget).await.map_err(stopped)?;
            if event.event_type == zk::EventType::Session {
                match event.session_state {
                    zk::SessionState::Expired => return Err(self.session_over_error(session)),
                    zk::SessionState::Closed => return Err(self.closed_error()),
                    zk::SessionState::AuthFailed => {
                        return Err(self.error(ErrorKind::AuthFailed, "authentication failed while waiting"))
                    }
                    _ => {}
                }
            }
        }
    }

    /// Orders the children as the queue: by suffix when that is trustworthy, else by creation
    /// zxid from one multi-read of their stats.
    async fn in_queue_order(
        &self,
        session: &Session,
        mut names: Vec<String>,
        budget: &Budget,
    ) -> std::result::Result<Vec<String>, Retry> {
        if order::sort_by_suffix(&mut names) {
            return Ok(names);
        }
        let stats = self.read_children(session, &names, budget).await?;
        let mut keyed: Vec<(i64, String)> =
            names.into_iter().zip(stats).filter_map(|(name, read)| read.map(|(_, stat)| (stat.czxid, name))).collect();
        keyed.sort_unstable_by_key(|(czxid, _)| *czxid);
        Ok(keyed.into_iter().map(|(_, name)| name).collect())
    }

    /// Data and stat of each child in one multi-read; `None` for a child that is already gone.
    async fn read_children(
        &self,
        session: &Session,
        names: &[String],
        budget: &Budget,
    ) -> std::result::Result<Vec<Option<(Vec<u8>, zk::Stat)>>, Retry> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut reader = session.zk.new_multi_reader();
        for name in names {
            reader
                .add_get_data(&self.child_path(name))
                .map_err(|e| Retry::Fail(self.zk_error(e, "reading a contender")))?;
        }
        let results = match self.bounded(session, reader.commit(), budget).await.map_err(Retry::Stop)? {
            Ok(results) => results,
            Err(err) if connection_lost(&err) => {
                self.await_connected(session, budget).await.map_err(Retry::Stop)?;
                return Err(Retry::Again);
            }
            Err(err) => return Err(Retry::Fail(self.zk_error(err, "reading the contenders"))),
        };
        Ok(results
            .into_iter()
            .map(|result| match result {
                zk::MultiReadResult::Data { data, stat } => Some((data, stat)),
                _ => None,
            })
            .collect())
    }

    /// Creates the lock path and its missing ancestors as containers, which the server removes
    /// once they are empty again.
    async fn make_parents(&self, session: &Session, budget: &Budget) -> std::result::Result<(), Retry> {
        match self.bounded(session, session.zk.mkdir(&self.path, &CONTAINER), budget).await.map_err(Retry::Stop)? {
            Ok(()) => Ok(()),
            Err(err) if connection_lost(&err) => {
                self.await_connected(session, budget).await.map_err(Retry::Stop)?;
                Ok(())
            }
            Err(err) => Err(Retry::Fail(self.zk_error(err, "creating the lock path"))),
        }
    }

    /// After a connection loss during the create: our node, if the create went through.
    async fn find_mine(
        &self,
        session: &Session,
        name_prefix: &str,
        budget: &Budget,
    ) -> std::result::Result<Option<(String, i64, i64)>, Retry> {
        loop {
            // sync first, so a lagging server we reconnected to has seen our create.
            let sync = session.zk.sync(&self.path);
            let listing = session.zk.list_children(&self.path);
            let _ = self.bounded(session, sync, budget).await.map_err(Retry::Stop)?;
            let names = match self.bounded(session, listing, budget).await.map_err(Retry::Stop)? {
                Ok(names) => names,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(err) if connection_lost(&err) => {
                    self.await_connected(session, budget).await.map_err(Retry::Stop)?;
                    continue;
                }
                Err(err) => return Err(Retry::Fail(self.zk_error(err, "looking for our lock node"))),
            };
            let Some(name) = names.into_iter().find(|name| name.starts_with(name_prefix)) else { return Ok(None) };
            let read = self.read_children(session, std::slice::from_ref(&name), budget).await;
            let stat = match read {
                // Only a node of this very session is ours (Curator #1121): a session can't
                // change under one attempt, but a mistake here would mean two holders.
                Ok(mut reads) => match reads.pop().flatten() {
                    Some((_, stat)) if stat.ephemeral_owner == session.id => stat,
                    _ => return Ok(None),
                },
                Err(Retry::Again) => continue,
                Err(other) => return Err(other),
            };
            let sequence = order::suffix(&name).map(i64::from).unwrap_or(-1);
            return Ok(Some((name, sequence, stat.czxid)));
        }
    }

    async fn contenders(&self) -> Result<Vec<Participant>> {
        let session = &self.client.session(&self.path).await?;
        let zk = &session.zk;
        let budget = &Budget::until(Some(Instant::now() + session.timeout));
        let stopped = |stop: Stop| match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            Stop::Deadline => self.error(ErrorKind::ConnectionLoss, "no answer from ZooKeeper listing the contenders"),
            Stop::Refused => self.error(ErrorKind::ConnectionLoss, REFUSED),
        };
        loop {
            let names = match self.bounded(session, zk.list_children(&self.path), budget).await.map_err(stopped)? {
                Ok(names) => names,
                Err(zk::Error::NoNode) => return Ok(Vec::new()),
                Err(err) if connection_lost(&err) => {
                    self.await_connected(session, budget).await.map_err(stopped)?;
                    continue;
                }
                Err(err) => return Err(self.zk_error(err, "listing the contenders")),
            };
            let reads = match self.read_children(session, &names, budget).await {
                Ok(reads) => reads,
                Err(Retry::Again) => continue,
                Err(Retry::Stop(stop)) => return Err(stopped(stop)),
                Err(Retry::Fail(err)) => return Err(err),
            };
            // Creation zxid order is queue order, whatever the suffixes say.
            let mut participants: Vec<Participant> = names
                .into_iter()
                .zip(reads)
                .filter_map(|(node, read)| {
                    let (data, stat) = read?;
                    Some(Participant {
                        sequence: order::suffix(&node).map(i64::from),
                        identity: serde_json::from_slice(&data).ok(),
                        node,
                        fencing_token: stat.czxid,
                        session_id: stat.ephemeral_owner,
                        data,
                    })
                })
                .collect();
            participants.sort_unstable_by_key(|p| p.fencing_token);
            return Ok(participants);
        }
    }
}

/// Outcome of a helper step that the caller either retries, stops on, or fails with.
enum Retry {
    Again,
    Stop(Stop),
    Fail(Error),
}

impl Retry {
    fn map_stop(self, stopped: impl Fn(Stop) -> Error) -> Error {
        match self {
            Retry::Stop(stop) => stopped(stop),
            Retry::Fail(err) => err,
            Retry::Again => unreachable!("callers handle Again before mapping"),
        }
    }
}

impl From<Stop> for Retry {
    fn from(stop: Stop) -> Self {
        Retry::Stop(stop)
    }
}

/// An acquisition attempt's node. While armed, it is removed when the attempt gives up, or in
/// the background if the attempt's future is dropped.
struct Attempt {
    client: Arc<ClientInner>,
    session: Arc<Session>,
    path: String,
    name_prefix: String,
    /// Full path once known; `None` while a create is in flight or its outcome unknown.
    node: Option<String>,
    armed: bool,
}

impl Attempt {
    async fn remove(&mut self) {
        if std::mem::take(&mut self.armed) {
            let session = self.session.clone();
            remove_node(self.client.clone(), session, self.path.clone(), self.name_prefix.clone(), self.node.take())
                .await;
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if std::mem::take(&mut self.armed) {
            let removal = remove_node(
                self.client.clone(),
                self.session.clone(),
                std::mem::take(&mut self.path),
                std::mem::take(&mut self.name_prefix),
                self.node.take(),
            );
            self.client.runtime.spawn(removal);
        }
    }
}

/// Deletes a node of ours: a known one, or an attempt's node found by its uuid prefix when the
/// create's outcome is unknown. Retries across connection loss; stops when the session is over
/// (the node goes with it) or the client is closed.
async fn remove_node(
    client: Arc<ClientInner>,
    session: Arc<Session>,
    path: String,
    name_prefix: String,
    node: Option<String>,
) {
    let zk = &session.zk;
    // No deadline, but a request the server keeps refusing stops here too.
    let budget = &Budget::until(None);
    loop {
        let node = match &node {
            Some(node) => node.clone(),
            None => {
                // Behind the create in the session's order, so the listing shows it if it exists.
                let sync = zk.sync(&path);
                let listing = zk.list_children(&path);
                let _ = bounded(&client, &session, sync, budget).await;
                match bounded(&client, &session, listing, budget).await {
                    Ok(Ok(names)) => match names.into_iter().find(|name| name.starts_with(&name_prefix)) {
                        Some(name) => format!("{path}/{name}"),
                        None => return,
                    },
                    Ok(Err(err)) if connection_lost(&err) => match await_connected(&client, &session, budget).await {
                        Ok(()) => continue,
                        Err(_) => return,
                    },
                    _ => return,
                }
            }
        };
        match bounded(&client, &session, zk.delete(&node, None), budget).await {
            Ok(Err(err)) if connection_lost(&err) => {
                if await_connected(&client, &session, budget).await.is_err() {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Awaits `future` unless the client is closed, the session is over, or the budget's deadline
/// passes.
async fn bounded<F: Future>(
    client: &ClientInner,
    session: &Session,
    future: F,
    budget: &Budget,
) -> std::result::Result<F::Output, Stop> {
    let expiry = async {
        match budget.deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = client.closed.cancelled() => Err(Stop::Closed),
        _ = session.ended.cancelled() => Err(Stop::SessionOver),
        output = future => Ok(output),
        _ = expiry => Err(Stop::Deadline),
    }
}

/// The one wait after a connection loss: counts the loss against the budget (a request the
/// server keeps refusing ends here), backs off briefly so a dead connection is not hammered
/// before the session notices, then waits until the session is connected again or has ended.
async fn await_connected(client: &ClientInner, session: &Session, budget: &Budget) -> std::result::Result<(), Stop> {
    budget.lost_connection()?;
    bounded(client, session, tokio::time::sleep(RECONNECT_BACKOFF), budget).await?;
    let mut lease = session.lease.clone();
    let reconnected = bounded(client, session, lease.wait_for(|lease| *lease != Lease::Suspended), budget).await?;
    reconnected.map_err(|_| Stop::SessionOver)?;
    Ok(())
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
        if let Ok(Some(hold)) = self.lock.inner.unhold(&self.owner) {
            let lock = self.lock.inner.clone();
            self.lock.inner.client.runtime.spawn(async move {
                let _ = lock.delete_held(&hold).await;
            });
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard").field("path", &self.lock.inner.path).field("hold", &self.hold).finish()
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock").field("path", &self.inner.path).finish()
    }
}

/// The uuids in attempts' node names, without a `getrandom` call per attempt: a random v4 uuid
/// per client whose last 48 bits (the uuid's node field, free of version and variant bits) are
/// XORed with a counter, so every attempt of a client has its own uuid for 2^48 attempts.
pub(crate) struct AttemptIds {
    base: uuid::Uuid,
    next: std::sync::atomic::AtomicU64,
}

impl AttemptIds {
    pub(crate) fn new() -> AttemptIds {
        AttemptIds { base: uuid::Uuid::new_v4(), next: std::sync::atomic::AtomicU64::new(0) }
    }

    fn next(&self) -> uuid::Uuid {
        let count = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & ((1 << 48) - 1);
        uuid::Uuid::from_u128(self.base.as_u128() ^ u128::from(count))
    }
}
