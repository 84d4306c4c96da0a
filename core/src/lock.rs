//! The fair, reentrant lock: Curator's InterProcessMutex recipe, node for node.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
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

    fn label(&self) -> String {
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
}

impl Lock {
    pub(crate) fn new(client: Arc<ClientInner>, path: String, options: crate::LockOptions) -> Lock {
        Lock {
            inner: Arc::new(LockInner {
                client,
                path,
                identifier: options.identifier,
                before_watch: options.before_watch,
                owners: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The lock path, relative to the client's chroot.
    pub fn path(&self) -> &str {
        &self.inner.path
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

    /// Whether `owner` holds the lock (as far as this process knows).
    pub fn is_held_by(&self, owner: &Owner) -> bool {
        self.inner.owners.lock().iter().any(|slot| slot.owner == owner.id && slot.held.is_some())
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

    async fn acquire_hold(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        if let Some(hold) = self.inner.reenter_or_claim(owner)? {
            return Ok(Some(hold));
        }
        // From here on the owner's slot says "acquiring"; this guard clears it unless the
        // acquisition succeeds, including when the future is dropped.
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
                Some(held) if held.hold.inner.is_lost() => Err(self.error(
                    ErrorKind::LockLost,
                    format!(
                        "owner {} cannot re-enter: {}; release it",
                        owner.label(),
                        held.hold.lost_reason().map_or("it was lost", |r| r.describe())
                    ),
                )),
                Some(held) => {
                    held.count += 1;
                    Ok(Some(held.hold.clone()))
                }
                None => Err(self.error(
                    ErrorKind::InvalidArgument,
                    format!("owner {} is already acquiring this lock; an owner acquires one at a time", owner.label()),
                )),
            };
        }
        owners.push(Slot { owner: owner.id, held: None });
        Ok(None)
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
        let host = &self.client.identity;
        let identity = Identity {
            host: host.host.clone(),
            pid: host.pid,
            owner: owner.label(),
            lang: host.language.clone(),
            identifier: self.identifier.clone(),
        };
        serde_json::to_vec(&identity).expect("identity serializes")
    }

    fn child_path(&self, name: &str) -> String {
        format!("{}/{}", self.path, name)
    }

    /// Awaits `future` unless the client is closed, the session is over, or the deadline passes.
    async fn bounded<F: Future>(
        &self,
        session: &Session,
        future: F,
        deadline: Option<Instant>,
    ) -> std::result::Result<F::Output, Stop> {
        let expiry = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = self.client.closed.cancelled() => Err(Stop::Closed),
            _ = session.ended.cancelled() => Err(Stop::SessionOver),
            output = future => Ok(output),
            _ = expiry => Err(Stop::Deadline),
        }
    }

    /// Waits (briefly backing off first) until the session is connected again or has ended.
    async fn await_connected(&self, session: &Session, deadline: Option<Instant>) -> std::result::Result<(), Stop> {
        self.bounded(session, tokio::time::sleep(RECONNECT_BACKOFF), deadline).await?;
        let mut lease = session.lease.clone();
        let reconnected = self.bounded(session, lease.wait_for(|lease| *lease != Lease::Suspended), deadline).await?;
        reconnected.map(|_| ()).map_err(|_| Stop::SessionOver)
    }

    /// One acquisition attempt, with its node removed on every way out but success.
    async fn contend(&self, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
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
        let mut result = self.queue_and_wait(&session, owner, wait, &mut attempt).await;
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
        owner: &Owner,
        wait: Wait,
        attempt: &mut Attempt,
    ) -> Result<Option<Hold>> {
        let started = Instant::now();
        let deadline = match wait {
            Wait::Forever => None,
            Wait::For(timeout) => Some(started + timeout),
            // Trying still completes its one round trip, unless the session is stuck.
            Wait::No => Some(started + session.timeout),
        };
        let zk = &session.zk;
        let stopped = |stop: Stop| match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            // Under Wait::For, `contend` turns this into "not obtained in time".
            Stop::Deadline => match wait {
                Wait::No => self.error(ErrorKind::Timeout, "no answer from ZooKeeper while trying the lock"),
                _ => self.error(ErrorKind::Timeout, "the attempt's deadline passed"),
            },
        };
        let data = self.node_data(owner);
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
                match self.bounded(session, create, deadline).await.map_err(stopped)? {
                    Ok((stat, sequence)) => {
                        let name = format!("{}{}", attempt.name_prefix, sequence);
                        attempt.node = Some(self.child_path(&name));
                        mine = Some((name, sequence.into_i64(), stat.czxid));
                    }
                    Err(zk::Error::NoNode) => {
                        self.make_parents(session, deadline).await.map_err(|e| e.map_stop(stopped))?;
                        continue;
                    }
                    Err(err) if connection_lost(&err) => {
                        // The create may or may not have happened: find it by our uuid rather
                        // than make a second node.
                        self.await_connected(session, deadline).await.map_err(stopped)?;
                        mine = self
                            .find_mine(session, &attempt.name_prefix, deadline)
                            .await
                            .map_err(|e| e.map_stop(stopped))?;
                        attempt.node = mine.as_ref().map(|(name, ..)| self.child_path(name));
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "creating the lock node")),
                }
                match self.bounded(session, listing, deadline).await.map_err(stopped)? {
                    Ok(children) => children,
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, deadline).await.map_err(stopped)?;
                        continue;
                    }
                    Err(zk::Error::NoNode) => continue,
                    Err(err) => return Err(self.zk_error(err, "listing the contenders")),
                }
            } else {
                match self.bounded(session, zk.list_children(&self.path), deadline).await.map_err(stopped)? {
                    Ok(children) => children,
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, deadline).await.map_err(stopped)?;
                        continue;
                    }
                    // The lock path vanished, and our node with it: queue again (kazoo #563).
                    Err(zk::Error::NoNode) => {
                        mine = None;
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "listing the contenders")),
                }
            };
            let (name, sequence, czxid) = mine.clone().expect("created above");
            let queue = match self.in_queue_order(session, children, deadline).await {
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
                match self.bounded(session, zk.get_and_watch_data(&predecessor), deadline).await.map_err(stopped)? {
                    Ok((_, _, watcher)) => watcher,
                    Err(zk::Error::NoNode) => continue,
                    Err(err) if connection_lost(&err) => {
                        self.await_connected(session, deadline).await.map_err(stopped)?;
                        continue;
                    }
                    Err(err) => return Err(self.zk_error(err, "watching the predecessor")),
                };
            let event = self.bounded(session, watcher.changed(), deadline).await.map_err(stopped)?;
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
        deadline: Option<Instant>,
    ) -> std::result::Result<Vec<String>, Retry> {
        if order::sort_by_suffix(&mut names) {
            return Ok(names);
        }
        let stats = self.read_children(session, &names, deadline).await?;
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
        deadline: Option<Instant>,
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
        let results = match self.bounded(session, reader.commit(), deadline).await.map_err(Retry::Stop)? {
            Ok(results) => results,
            Err(err) if connection_lost(&err) => {
                self.await_connected(session, deadline).await.map_err(Retry::Stop)?;
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
    async fn make_parents(&self, session: &Session, deadline: Option<Instant>) -> std::result::Result<(), Retry> {
        match self.bounded(session, session.zk.mkdir(&self.path, &CONTAINER), deadline).await.map_err(Retry::Stop)? {
            Ok(()) => Ok(()),
            Err(err) if connection_lost(&err) => {
                self.await_connected(session, deadline).await.map_err(Retry::Stop)?;
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
        deadline: Option<Instant>,
    ) -> std::result::Result<Option<(String, i64, i64)>, Retry> {
        loop {
            // sync first, so a lagging server we reconnected to has seen our create.
            let sync = session.zk.sync(&self.path);
            let listing = session.zk.list_children(&self.path);
            let _ = self.bounded(session, sync, deadline).await.map_err(Retry::Stop)?;
            let names = match self.bounded(session, listing, deadline).await.map_err(Retry::Stop)? {
                Ok(names) => names,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(err) if connection_lost(&err) => {
                    self.await_connected(session, deadline).await.map_err(Retry::Stop)?;
                    continue;
                }
                Err(err) => return Err(Retry::Fail(self.zk_error(err, "looking for our lock node"))),
            };
            let Some(name) = names.into_iter().find(|name| name.starts_with(name_prefix)) else { return Ok(None) };
            let read = self.read_children(session, std::slice::from_ref(&name), deadline).await;
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
        let deadline = Some(Instant::now() + session.timeout);
        let stopped = |stop: Stop| match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            Stop::Deadline => self.error(ErrorKind::ConnectionLoss, "no answer from ZooKeeper listing the contenders"),
        };
        loop {
            let names = match self.bounded(session, zk.list_children(&self.path), deadline).await.map_err(stopped)? {
                Ok(names) => names,
                Err(zk::Error::NoNode) => return Ok(Vec::new()),
                Err(err) if connection_lost(&err) => {
                    self.await_connected(session, deadline).await.map_err(stopped)?;
                    continue;
                }
                Err(err) => return Err(self.zk_error(err, "listing the contenders")),
            };
            let reads = match self.read_children(session, &names, deadline).await {
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
    let work = async {
        loop {
            let node = match &node {
                Some(node) => node.clone(),
                None => {
                    // Behind the create in the session's order, so the listing shows it if it exists.
                    let sync = zk.sync(&path);
                    let listing = zk.list_children(&path);
                    let _ = sync.await;
                    match listing.await {
                        Ok(names) => match names.into_iter().find(|name| name.starts_with(&name_prefix)) {
                            Some(name) => format!("{path}/{name}"),
                            None => return,
                        },
                        Err(err) if connection_lost(&err) => {
                            wait_reconnect(&session).await;
                            continue;
                        }
                        Err(_) => return,
                    }
                }
            };
            match zk.delete(&node, None).await {
                Err(err) if connection_lost(&err) => wait_reconnect(&session).await,
                _ => return,
            }
        }
    };
    tokio::select! {
        _ = work => {},
        _ = client.closed.cancelled() => {},
        _ = session.ended.cancelled() => {},
    }
}

async fn wait_reconnect(session: &Session) {
    tokio::time::sleep(RECONNECT_BACKOFF).await;
    let _ = session.lease.clone().wait_for(|lease| *lease != Lease::Suspended).await;
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
