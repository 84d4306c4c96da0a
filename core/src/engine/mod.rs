//! The recipe engine: the contend loop, written once for every kind of lock. An attempt creates
//! its uuid-marked EPHEMERAL_SEQUENTIAL node (finding it again after a connection loss instead
//! of making a second), lists the queue, asks its [`Mode`] whether it holds or which node to
//! wait for, watches that node and looks again when it goes; on a timeout, a cancel or an error
//! its node is removed.
//!
//! Around the loop, one module per concept: `attempt` (an attempt's node, found again and
//! removed), `listing` (the shared listing and queue order), `path` (the lock path: made, its
//! ACL checked, the recipe it holds), `released` (nodes this client released after holding),
//! `downgrade`, `release` and `participants`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::acl::Acl;
use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::{Hold, NodeEvent};
use crate::lock::BeforeWatch;
use crate::lost_callbacks::LostCallbacks;
use crate::owners::{Owner, OwnerTable};
use crate::policy::{AfterWait, Decision, Mode};
use crate::retry::{self, Reply, Requests, Stop, REFUSED};
use crate::session::{LostReason, Session};
use crate::validate;

mod attempt;
mod downgrade;
mod listing;
mod participants;
mod path;
mod release;
mod released;
mod semaphore;

use attempt::{find_mine, Attempt, Made, NodeName};
use listing::{in_queue_order, list, Listing, ListingReply, SharedListing};
use path::PathVersion;
pub(crate) use released::ReleasedNodes;

static ANYONE_ALL: [zk::Acl; 1] = [zk::Acl::new_const(zk::Permission::ALL, "world", "anyone")];

/// How long an acquisition may wait: fixed when the acquisition begins.
#[derive(Clone, Debug)]
pub(crate) struct Wait {
    /// `None`: as long as it takes.
    pub(crate) deadline: Option<Instant>,
    /// Only try: one create and one listing, then give up if the lock is not had.
    pub(crate) only_try: bool,
    /// Cancelled: the acquisition ends as at its deadline, its node removed before it returns.
    pub(crate) abort: Option<tokio_util::sync::CancellationToken>,
}

impl Wait {
    /// From the bindings' form: `None` waits forever, `Some(ZERO)` only tries.
    pub(crate) fn from_timeout(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait { deadline: None, only_try: false, abort: None },
            Some(timeout) if timeout.is_zero() => Wait { deadline: None, only_try: true, abort: None },
            // Past what an Instant holds is forever, for all practical purposes.
            Some(timeout) => Wait { deadline: Instant::now().checked_add(timeout), only_try: false, abort: None },
        }
    }

    /// `future`'s output, or `None` once the deadline passes or the acquisition is aborted.
    fn within<F: std::future::Future>(&self, future: F) -> retry::Within<'_, F> {
        retry::within(self.deadline, self.abort.as_ref(), future)
    }

    /// Whether the deadline passed, or the acquisition was aborted.
    fn is_over(&self) -> bool {
        self.deadline.is_some_and(|deadline| Instant::now() >= deadline)
            || self.abort.as_ref().is_some_and(|abort| abort.is_cancelled())
    }
}

/// A lock path as this process uses it: the mutex, or both sides of a read/write lock, sharing
/// one owner table.
pub(crate) struct Recipe {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) path: String,
    identifier: Option<String>,
    before_watch: Option<BeforeWatch>,
    /// The lock's ACL and, unless open, its entries as sent.
    acl: Acl,
    zk_acl: Vec<zk::Acl>,
    /// The lock path (incarnation and ACL version) whose ACL was found to be the lock's: a
    /// protected lock decides only by listings of that path (see `check_path_acl`).
    acl_checked: parking_lot::Mutex<Option<PathVersion>>,
    pub(crate) owners: OwnerTable,
    /// The lost callbacks of the holds in `owners` ([`crate::Lock::on_lost`]).
    pub(crate) lost: Arc<LostCallbacks>,
    /// Whether a create under the path has succeeded (and no NoNode said otherwise since). Until
    /// then an attempt keeps the client's send turn until its create is answered, so that
    /// attempts whose creates failed for want of the path send them again in their order.
    path_known: AtomicBool,
    /// Whether a listing showed no node of another recipe under the path. Until then an attempt
    /// lists before it creates, so a conflict is told before any node is made.
    kinds_checked: AtomicBool,
    /// Creates sent under the path, counted right after each is sent (in the client's send turn):
    /// an attempt's ticket is the count after its own.
    creates_sent: AtomicU64,
    /// The last listing sent to decide by, shared by every attempt whose create it covers (see
    /// `listing_after`). Kept until the next replaces it: one listing per lock object.
    shared_listing: parking_lot::Mutex<Option<SharedListing>>,
    /// A read/write lock (else a mutex): the kind the client's handles for the path share.
    read_write: bool,
    /// A handle of its own (`LockOptions::separate`): never shared.
    separate: bool,
    /// This recipe itself while its owner table holds anything, so that the holds outlive the
    /// handles: a handle made later for the path finds them (see `ClientInner::recipe`). Taken
    /// at the last release, and when the client closes.
    pin: parking_lot::Mutex<Option<Arc<Recipe>>>,
}

impl Recipe {
    /// Refuses a path and identifier that could not fit in a request, whoever the owner.
    pub(crate) fn new(
        client: Arc<ClientInner>,
        path: String,
        read_write: bool,
        options: crate::LockOptions,
    ) -> Result<Recipe> {
        options.acl.check(&client.identities).map_err(|err| err.with_path(&path))?;
        let zk_acl = if options.acl.is_open() { Vec::new() } else { options.acl.to_zk() };
        let recipe = Recipe {
            client,
            path,
            identifier: options.identifier,
            before_watch: options.before_watch,
            acl: options.acl,
            zk_acl,
            acl_checked: parking_lot::Mutex::new(None),
            owners: OwnerTable::default(),
            lost: Arc::default(),
            path_known: AtomicBool::new(false),
            kinds_checked: AtomicBool::new(false),
            creates_sent: AtomicU64::new(0),
            shared_listing: parking_lot::Mutex::new(None),
            read_write,
            separate: options.separate,
            pin: parking_lot::Mutex::new(None),
        };
        recipe.check_fits(recipe.node_data_len(&Owner::with_label(0, "")), || "the identity".to_owned())?;
        Ok(recipe)
    }

    /// Whether a handle asked for with these options may share this recipe (and so its holds):
    /// the same path and kind, identifier and ACL (and neither separate nor a test seam).
    pub(crate) fn serves(&self, path: &str, read_write: bool, options: &crate::LockOptions) -> bool {
        !self.separate
            && !options.separate
            && self.path == path
            && self.read_write == read_write
            && self.identifier == options.identifier
            && self.acl == options.acl
            && self.before_watch.is_none()
            && options.before_watch.is_none()
    }

    /// The claimed acquisition succeeded: the owner holds `hold`, and this recipe is kept while
    /// it holds anything, so that the holds outlive the handles.
    pub(crate) fn settle(self: &Arc<Self>, owner: u64, mode: Mode, hold: &Hold) {
        self.owners.settle(owner, mode, hold);
        self.hold_taken(owner, mode, hold);
        let mut pin = self.pin.lock();
        if pin.is_none() {
            *pin = Some(self.clone());
        }
    }

    /// A new hold entered the owner table: the lost callbacks cover it.
    pub(crate) fn hold_taken(&self, owner: u64, mode: Mode, hold: &Hold) {
        self.lost.hold_taken(&self.client, owner, mode, hold);
    }

    /// Counts down a level of `owner`'s hold (see `OwnerTable::count_down`); once nothing is held
    /// any more, lets go of the pin (the caller holds another handle: that frees nothing here).
    pub(crate) fn count_down(&self, owner: &Owner, mode: Mode) -> Result<Option<Hold>> {
        let last = self.owners.count_down(owner, mode, &self.path)?;
        if last.is_some() && !self.owners.holds_anything() {
            drop(self.pin.lock().take());
        }
        Ok(last)
    }

    /// Lets go of the pin whatever is held: the client is closed, so every hold is lost.
    pub(crate) fn unpin(&self) {
        drop(self.pin.lock().take());
    }

    pub(crate) fn error(&self, kind: ErrorKind, message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
        Error::new(kind, message).with_path(&self.path)
    }

    fn zk_error(&self, err: zk::Error, doing: &str) -> Error {
        Error::from_zk(err, &self.path, doing)
    }

    pub(crate) fn closed_error(&self) -> Error {
        self.error(ErrorKind::Closed, "the client was closed")
    }

    fn session_over_error(&self, session: &Session) -> Error {
        let reason = session.lost_reason().unwrap_or(LostReason::SessionExpired);
        self.error(ErrorKind::SessionExpired, format!("{}; a new attempt starts a new session", reason.describe()))
            .with_lost_reason(Some(reason))
    }

    /// The error for a step stopped before its answer; `deadline` says what a passed deadline
    /// means to the caller.
    fn stopped(&self, session: &Session, stop: Stop, deadline: impl FnOnce() -> Error) -> Error {
        match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            Stop::Deadline => deadline(),
            Stop::Refused => self.error(ErrorKind::ConnectionLoss, REFUSED),
        }
    }

    fn protected(&self) -> bool {
        !self.acl.is_open()
    }

    /// How lock nodes are created (EPHEMERAL_SEQUENTIAL, or EPHEMERAL for a downgrade's read
    /// node), and their ACL.
    fn node_options(&self, mode: zk::CreateMode) -> (zk::CreateOptions<'_>, &[zk::Acl]) {
        if self.protected() {
            (mode.with_acls(zk::Acls::new(&self.zk_acl)), &self.zk_acl)
        } else {
            (mode.with_acls(zk::Acls::anyone_all()), &ANYONE_ALL)
        }
    }

    fn child_path(&self, name: &str) -> String {
        // Sized once (see `attempt::name_prefix`).
        let mut path = String::with_capacity(self.path.len() + 1 + name.len());
        path.push_str(&self.path);
        path.push('/');
        path.push_str(name);
        path
    }

    pub(crate) fn node_data(&self, owner: &Owner) -> Vec<u8> {
        let mut data = Vec::with_capacity(128);
        self.write_node_data(owner, &mut data);
        data
    }

    /// The length of [`Recipe::node_data`], with nothing allocated.
    fn node_data_len(&self, owner: &Owner) -> usize {
        let mut counted = Counted(0);
        self.write_node_data(owner, &mut counted);
        counted.0
    }

    /// Writes the node's [`crate::Identity`], borrowing every field: many waiters begin at once,
    /// and the copies would only be freed again.
    fn write_node_data(&self, owner: &Owner, out: impl std::io::Write) {
        let host = &self.client.identity;
        let identity = IdentityOf {
            host: &host.host,
            pid: host.pid,
            owner: LabelOf(owner),
            lang: &host.language,
            identifier: self.identifier.as_deref(),
        };
        serde_json::to_writer(out, &identity).expect("identity serializes")
    }

    /// Refuses, before sending, a create the server would refuse by dropping the connection.
    pub(crate) fn check_fits(&self, data_len: usize, what_else: impl FnOnce() -> String) -> Result<()> {
        // The node's full path on the server: chroot, lock path, `/_c_<uuid>-<marker><10 digits>`
        // with the longest marker.
        let marker_len = [Mode::Exclusive, Mode::Read, Mode::Write].map(|mode| mode.marker().len()).into_iter().max();
        let name_len = "/_c_".len() + 36 + "-".len() + marker_len.unwrap_or_default() + 10;
        let server_path_len = self.client.chroot.len() + self.path.len() + name_len;
        let len = validate::create_request_len(
            server_path_len,
            data_len,
            validate::acl_len(self.node_options(zk::CreateMode::EphemeralSequential).1),
        );
        validate::request_fits(len, self.client.options.jute_maxbuffer, &self.client.options.language, || {
            format!(
                "the lock path of {} bytes, identifier of {} bytes and {}",
                self.path.len(),
                self.identifier.as_ref().map_or(0, String::len),
                what_else()
            )
        })
        .map_err(|err| err.with_path(&self.path))
    }

    /// An acquisition in `mode`: attempts until one holds, fails, or the deadline passes.
    /// `Ok(None)`: not had by the deadline (or, only trying, held by others).
    ///
    /// A waiter whose session ends (expired, or disconnected past its timeout) lost its node
    /// with it, and its place in the queue: as kazoo's and Curator's waiters do, it queues again,
    /// at the back, on a new session, within its deadline. (A holder's loss is a loss: holds
    /// are never in here. Nor are sessions ended by closing the client or refused credentials.)
    pub(crate) async fn contend(&self, mode: Mode, owner: &Owner, wait: &Wait) -> Result<Option<Hold>> {
        let _in_progress = crate::memory::InProgress::new(&self.client);
        again_on_new_session(wait, |wait| self.attempt(mode, owner, wait)).await
    }

    /// One acquisition attempt, with its node removed on every way out but success.
    async fn attempt(&self, mode: Mode, owner: &Owner, wait: &Wait) -> Result<Option<Hold>> {
        self.check_fits(self.node_data_len(owner), || format!("owner label of {} bytes", owner.label().len()))?;
        // In a block: what took the turns is gone before the wait (a waiter's future keeps no room
        // for it).
        let (send_turn, create_slot, session) = {
            // Uncontended, neither step below waits: taken at once, with no future boxed for it.
            let at_once = !wait.is_over();
            // Acquisitions begun earlier may still be establishing a session or creating the path.
            // (A free turn has no one queued for it: tokio's mutex hands a released turn straight to
            // the next in line.)
            let free_turn = if at_once { self.client.send_order.try_lock().ok() } else { None };
            let send_turn = match free_turn {
                Some(turn) => turn,
                None => match Box::pin(wait.within(self.client.send_order.lock())).await {
                    Some(turn) => turn,
                    None => return Ok(None),
                },
            };
            // A place in the window of creates in flight, taken under the send turn (see
            // `ClientInner::create_window`) and given back once the create and its listing are answered.
            let free_slot = if at_once { self.client.try_create_slot() } else { None };
            let create_slot = match free_slot {
                Some(slot) => slot,
                None => match Box::pin(wait.within(self.client.create_slot())).await {
                    Some(slot) => slot,
                    None => return Ok(None),
                },
            };
            // A session to queue on (a new one, after a waiter's ended), within the deadline too.
            let live = if at_once { self.client.live_session(&self.path)? } else { None };
            let session = match live {
                Some(session) => session,
                None => match Box::pin(wait.within(self.client.session(&self.path))).await {
                    Some(session) => session?,
                    None => return Ok(None),
                },
            };
            (send_turn, create_slot, session)
        };
        // Trying still completes its one round trip, unless the session is stuck.
        let deadline = if wait.only_try { Some(Instant::now() + session.timeout) } else { wait.deadline };
        let requests = Requests::new(&self.client, &session, deadline).with_abort(wait.abort.clone());
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            node: NodeName::new(&self.path, attempt::name_prefix(self.client.attempt_ids.next(), mode.marker())),
            armed: false,
        };
        let mut queueing = Queueing {
            send_turn: Some(send_turn),
            create_slot: Some(create_slot),
            mine: None,
            awaited: None,
            own_watch: None,
            own_watch_sent: None,
            then: AfterWait::LooksAgain,
        };
        // Its steps, and between them its waits, here: through a wait a waiter keeps `queueing`,
        // its node and its requests, and the wait's own future.
        let mut woke = None;
        let checked = match self.kinds_checked.load(Ordering::Acquire) {
            true => Ok(()),
            // Boxed: its listing would otherwise take room in every waiter's future.
            false => Box::pin(self.check_kinds(mode, &requests)).await,
        };
        let result = match checked {
            Err(failed) => Err(failed),
            Ok(()) => loop {
                let step = Box::pin(self.step(
                    mode,
                    &requests,
                    owner,
                    wait.only_try,
                    &mut attempt,
                    &mut queueing,
                    woke.take(),
                ));
                let informant = match step.await {
                    Ok(Step::Done(held)) => break Ok(held),
                    Ok(Step::Wait(informant)) => informant,
                    Err(failed) => break Err(failed),
                };
                // The wait, inline (but the rarer one with an informant): every waiter of a long
                // queue waits here.
                let waiting = queueing.awaited.as_mut().expect("watched, or kept");
                let ended = match informant {
                    None => requests.bounded(&mut waiting.event).await.map(|event| (event, false)),
                    Some(mut informant) => {
                        let either = futures::future::select(&mut waiting.event, &mut informant);
                        Box::pin(requests.bounded(either)).await.map(|ended| match ended {
                            futures::future::Either::Left((event, _)) => (event, false),
                            futures::future::Either::Right((event, _)) => (event, true),
                        })
                    }
                };
                match ended {
                    Ok((event, informed)) => {
                        woke = Some(Woke { event_type: event.event_type, session_state: event.session_state, informed })
                    }
                    Err(stop) => break Err(Failed::Stopped(stop)),
                }
            },
        };
        let result = match result {
            // With a deadline, a stop at it is no error: the lock was not had in time.
            Err(Failed::Stopped(Stop::Deadline)) if !wait.only_try => Ok(None),
            result => result,
        };
        match &result {
            Ok(Some(_)) => attempt.armed = false,
            // The session is gone, and its ephemeral nodes with it.
            Err(Failed::Stopped(Stop::Closed | Stop::SessionOver)) => attempt.armed = false,
            _ => Box::pin(attempt.remove()).await,
        }
        result.map_err(|failed| match failed {
            Failed::Error(err) => err,
            Failed::Stopped(stop) => self.stopped(&session, stop, || {
                self.error(ErrorKind::Timeout, "no answer from ZooKeeper while trying the lock")
            }),
        })
    }

    /// Queues the attempt: sends its create and, pipelined right behind it, the listing (or
    /// takes one sent behind it). `Ok(None)`: look again (the create's fate was unknown, or the
    /// path was made first). Boxed by the caller, so that a waiter does not carry this step's
    /// futures through its wait.
    async fn enqueue(
        &self,
        requests: &Requests<'_>,
        owner: &Owner,
        attempt: &mut Attempt,
        send_turn: &mut Option<tokio::sync::MutexGuard<'_, ()>>,
        mine: &mut Option<Made>,
    ) -> std::result::Result<Option<Arc<Listing>>, Failed> {
        let zk = requests.zk();
        // Pipelined: ZooKeeper answers a session's requests in order, so the listing
        // sent right behind the create already contains the new node. One round trip.
        attempt.armed = true;
        // Made here, not kept: a waiter's memory is what lives across its wait.
        let data = self.node_data(owner);
        // Uncontended, the listing goes right behind the create (made ready first, so that the
        // client writes both at once); while another is on its way, this attempt takes the next
        // one, sent behind more creates.
        let listing = (!self.listing_in_flight()).then(|| self.prepare_listing(zk));
        let create =
            zk.create(attempt.node.prefixed(), &data, &self.node_options(zk::CreateMode::EphemeralSequential).0);
        let ticket = self.creates_sent.fetch_add(1, Ordering::AcqRel) + 1;
        let listing = listing.map(|listing| self.send_prepared(listing));
        if self.path_known.load(Ordering::Acquire) {
            // Sent: later acquisitions of this client may send theirs.
            drop(send_turn.take());
        }
        match Box::pin(requests.send(create)).await? {
            Reply::Answered(Ok((stat, sequence))) => {
                requests.progressed();
                self.path_known.store(true, Ordering::Release);
                drop(send_turn.take());
                attempt.node.made(sequence);
                *mine = Some(Made { sequence: sequence.into_i64(), czxid: stat.czxid });
            }
            Reply::Answered(Err(zk::Error::NoNode)) => {
                self.path_known.store(false, Ordering::Release);
                Box::pin(self.make_parents(requests)).await?;
                return Ok(None);
            }
            Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "creating the lock node"))),
            Reply::Reconnected => {
                // The create may or may not have happened: find it by our uuid rather
                // than make a second node.
                *mine = match Box::pin(find_mine(requests, &self.path, attempt.node.prefix())).await? {
                    Ok(Some(found)) => {
                        attempt.node.found(&found.name);
                        Some(found.made)
                    }
                    Ok(None) => {
                        attempt.node.forget();
                        None
                    }
                    Err(err) => return Err(Failed::Error(self.zk_error(err, "finding our lock node"))),
                };
                return Ok(None);
            }
        }
        let listing = match listing {
            Some(sent) => ListingReply::Sent(sent),
            None => self.listing_after(ticket, zk),
        };
        match Box::pin(requests.send(listing)).await? {
            Reply::Answered(Ok(children)) => {
                requests.progressed();
                Ok(Some(children))
            }
            Reply::Reconnected | Reply::Answered(Err(zk::Error::NoNode)) => Ok(None),
            Reply::Answered(Err(err)) => Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
        }
    }

    /// Before this lock object's first create: refuses a path holding another recipe's nodes, so
    /// that a conflict is told before any node is made (and a protected lock checks an existing
    /// path's ACL before it creates anything).
    async fn check_kinds(&self, mode: Mode, requests: &Requests<'_>) -> std::result::Result<(), Failed> {
        match requests.retry(|| list(requests.zk(), &self.path, self.protected())).await? {
            Ok(listing) => {
                Box::pin(self.check_path_acl(requests, listing.path)).await?;
                match self.conflict(mode, &listing) {
                    Some(err) => Err(Failed::Error(err)),
                    None => {
                        self.kinds_checked.store(true, Ordering::Release);
                        Ok(())
                    }
                }
            }
            Err(zk::Error::NoNode) => Ok(()),
            Err(err) => Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
        }
    }

    /// One step of an attempt: from its create, or its look at the queue, or (`woke`) the event
    /// its last wait ended with, to its hold or its end ([`Step::Done`]), or to its next wait
    /// ([`Step::Wait`]). Boxed by the caller, so that a waiter keeps through its wait only its
    /// `Queueing` (a step's requests, listing and decisions take room only while it runs).
    #[allow(clippy::too_many_arguments)]
    async fn step<'a>(
        &self,
        mode: Mode,
        requests: &Requests<'a>,
        owner: &Owner,
        only_try: bool,
        attempt: &mut Attempt,
        q: &mut Queueing<'a>,
        mut woke: Option<Woke>,
    ) -> std::result::Result<Step, Failed> {
        let zk = requests.zk();
        let session = requests.session;
        loop {
            let (ahead, then) = match woke.take() {
                Some(Woke { event_type, session_state, informed }) => {
                    let mut ahead = String::new();
                    if !informed {
                        // Its watcher has fired: it cannot be waited on again.
                        ahead = q.awaited.take().expect("waited on").node;
                    } else if q.own_watch.is_none() && event_type != zk::EventType::Session {
                        // The informant went: most likely next in line now, so the watch on our own
                        // node goes out with the listing that follows (one round trip for both).
                        let own_path = attempt.node.node().expect("set with our node");
                        q.own_watch_sent = Some((zk.state_watcher(), Box::pin(zk.check_and_watch_stat(own_path))));
                    }
                    match (event_type, session_state) {
                        (zk::EventType::Session, zk::SessionState::Expired) => return Err(Stop::SessionOver.into()),
                        (zk::EventType::Session, zk::SessionState::Closed) => return Err(Stop::Closed.into()),
                        (zk::EventType::Session, zk::SessionState::AuthFailed) => {
                            return Err(self.error(ErrorKind::AuthFailed, "authentication failed while waiting").into())
                        }
                        (zk::EventType::NodeDeleted, _) if !informed => {}
                        // The informant went (look again while the node ahead most likely still
                        // holds), or anything else (a change of its data, a disconnection): look again.
                        _ => continue,
                    }
                    (ahead, q.then)
                }
                None => {
                    if q.mine.is_none() {
                        // Queueing (again): watches set for an earlier node say nothing of the next.
                        q.awaited = None;
                        q.own_watch = None;
                        q.own_watch_sent = None;
                    }
                    // In a block: nothing of the listing outlives the decision (a waiter keeps O(1)
                    // memory, and a step's box takes no room for it while it sends its watches).
                    let (mut ahead, then, informant) = {
                        let children = match &q.mine {
                            None => {
                                let enqueued =
                                    Box::pin(self.enqueue(requests, owner, attempt, &mut q.send_turn, &mut q.mine))
                                        .await;
                                // The first create is answered (a queueing again is no part of a burst).
                                drop(q.create_slot.take());
                                match enqueued? {
                                    Some(children) => children,
                                    None => continue,
                                }
                            }
                            Some(_) => match Box::pin(requests.retry(|| list(zk, &self.path, self.protected()))).await?
                            {
                                Ok(children) => {
                                    requests.progressed();
                                    Arc::new(children)
                                }
                                // The lock path vanished, and our node with it: queue again (kazoo #563).
                                Err(zk::Error::NoNode) => {
                                    self.path_known.store(false, Ordering::Release);
                                    q.mine = None;
                                    attempt.node.forget();
                                    continue;
                                }
                                Err(err) => return Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
                            },
                        };
                        if let Some(err) = self.conflict(mode, &children) {
                            return Err(Failed::Error(err));
                        }
                        // Our node is in this listing, so the path cannot go (or be made anew) while we wait
                        // or hold: its ACL, checked here, stays the one our place in the queue is under.
                        // (Each step boxed only when it has work: the uncontended path allocates neither.)
                        if self.path_acl_to_check(children.path) {
                            Box::pin(self.check_path_acl(requests, children.path)).await?;
                        }
                        let Made { sequence, czxid } = q.mine.expect("created above");
                        let queue = if children.in_name_order() {
                            children
                        } else {
                            match Box::pin(in_queue_order(requests, &self.path, children)).await? {
                                Ok(queue) => queue,
                                Err(err) => return Err(Failed::Error(self.zk_error(err, "reading the contenders"))),
                            }
                        };
                        let Some(position) = attempt.node.name().and_then(|ours| queue.position(ours)) else {
                            // Our node is gone (the path was removed, or someone deleted it): queue again.
                            q.mine = None;
                            attempt.node.forget();
                            continue;
                        };
                        let names = &queue.names;
                        let decided = match mode.decide_with(names, position, |end| queue.last_writer_before(end)) {
                            Decision::Holds => {
                                // The watch on our own node goes on as the hold's (one sent with this listing
                                // is answered already: dropped, it would cost a request to remove it).
                                let own_event = match (q.own_watch.take(), q.own_watch_sent.take()) {
                                    (Some(own), _) => Some(own.event),
                                    (None, Some((_, request))) => match Box::pin(requests.send(request)).await? {
                                        Reply::Answered(Ok((Some(_), watcher))) => Some(watcher),
                                        _ => None,
                                    },
                                    (None, None) => None,
                                };
                                // Taken, not copied, with no await left before the hold is returned (the
                                // attempt is disarmed then, so nothing needs the path to remove the node).
                                let node_path = attempt.node.take_node().expect("set with our node");
                                let hold = Hold::new(session, &self.client.closed, node_path, sequence, czxid);
                                self.client.node_watcher.add(&hold, own_event);
                                return Ok(Step::Done(Some(hold)));
                            }
                            Decision::WaitFor { node, then } => {
                                // A node of this client's own tells its going to the waiter behind it, if
                                // it held (see `ReleasedNodes`): no informant is needed then.
                                let informant = match then {
                                    AfterWait::HoldsIfReleasedHere { informant }
                                        if !self.client.attempt_ids.made(&names[node]) =>
                                    {
                                        Some(self.child_path(&names[informant]))
                                    }
                                    _ => None,
                                };
                                (self.child_path(&names[node]), then, informant)
                            }
                        };
                        decided
                    };
                    if only_try {
                        return Ok(Step::Done(None));
                    }
                    // The watch on the node ahead is kept across a look again that still names it. (Its
                    // name is kept once, in `awaited`, while it is watched.)
                    match &q.awaited {
                        Some(kept) if kept.node == ahead => ahead = String::new(),
                        _ => q.awaited = None,
                    }
                    // In a block: the requests end with it.
                    let (informant_event, ahead_gone) = {
                        let watch_ahead = if q.awaited.is_none() {
                            if let Some(hook) = &self.before_watch {
                                hook(ahead.clone()).await;
                            }
                            // getData sets no watch on a missing node, so NoNode leaves nothing behind.
                            // (Boxed: its room would otherwise stay in the waiter's future through the wait.)
                            Some(Box::pin(zk.get_and_watch_data(&ahead)))
                        } else {
                            None
                        };
                        // Next in line: watch our own node too (sent right behind), so that the node ahead
                        // going needs no request to know ours was still there (see `OwnWatch`).
                        // (Boxed, as the informant's: many waiters send neither, and their futures would
                        // otherwise take room in every waiter's.)
                        let own_path = attempt.node.node().expect("set with our node");
                        let watch_own = q.own_watch_sent.take().or_else(|| {
                            (then == AfterWait::Holds && q.own_watch.is_none()).then(|| -> OwnWatchRequest<'_> {
                                (zk.state_watcher(), Box::pin(zk.check_and_watch_stat(own_path)))
                            })
                        });
                        let watch_informant = informant.map(|informant| Box::pin(zk.get_and_watch_data(&informant)));
                        let mut ahead_gone = false;
                        if let Some(request) = watch_ahead {
                            match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((_, _, watcher))) => {
                                    requests.progressed();
                                    let node = std::mem::take(&mut ahead);
                                    q.awaited = Some(Awaited { node, event: watcher });
                                }
                                Reply::Answered(Err(zk::Error::NoNode)) => ahead_gone = true,
                                Reply::Reconnected => continue,
                                Reply::Answered(Err(err)) => {
                                    return Err(Failed::Error(self.zk_error(err, "watching the node ahead")))
                                }
                            }
                        }
                        if let Some((states, request)) = watch_own {
                            match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((Some(stat), watcher))) if stat.ephemeral_owner == session.id => {
                                    q.own_watch = Some(Box::new(OwnWatch { event: watcher, states }));
                                }
                                // Our node is gone: queue again.
                                Reply::Answered(Ok(_)) => {
                                    q.mine = None;
                                    attempt.node.forget();
                                    q.awaited = None;
                                    continue;
                                }
                                // No watch: the handoff asks the server instead.
                                Reply::Answered(Err(_)) | Reply::Reconnected => {}
                            }
                        }
                        // Only a hint: without it, the handoff lists again.
                        let informant_event: Option<NodeEvent> = match watch_informant {
                            None => None,
                            Some(request) => match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((_, _, watcher))) => Some(watcher),
                                // Already gone: look again now, keeping the watch on the node ahead.
                                Reply::Answered(Err(zk::Error::NoNode)) if !ahead_gone => continue,
                                Reply::Answered(_) | Reply::Reconnected => None,
                            },
                        };
                        (informant_event, ahead_gone)
                    };
                    if !ahead_gone {
                        q.then = then;
                        return Ok(Step::Wait(informant_event));
                    }
                    (ahead, then)
                }
            };
            let holds = match then {
                AfterWait::Holds => true,
                AfterWait::HoldsIfReleasedHere { .. } => self.client.released.contains(&ahead),
                AfterWait::LooksAgain => false,
            };
            if !holds {
                // Someone ahead may have given up with others still ahead of it, or a downgrade's
                // read node may have taken its place: look again.
                continue;
            }
            // The handoff without a listing. While our node exists the lock path cannot have been
            // deleted and made again (it has a child), and every node made after ours sorts
            // after ours (a higher sequence, or past the sequence limit a higher creation zxid),
            // but a downgrade's read node, which takes the place of its write node (see `order`):
            // a writer that watched a write node looks again (`AfterWait::LooksAgain`), and such
            // a read node keeps no reader out. So the set of nodes ahead of us that keep us out
            // only shrinks. The node we watched was the only one
            // in it that kept us out, or it was an exclusive or write node that held (released
            // by this client: see `ReleasedNodes`), so nothing was ahead of it, and nothing is
            // between it and us that keeps us out (it was our predecessor, or for a reader the
            // nearest writer ahead). It is gone, so we hold, once we know our node was still
            // there and this session's when it went (someone may have deleted it meanwhile).
            let own_path = attempt.node.node().expect("set with our node").to_owned();
            let Made { sequence, czxid } = q.mine.expect("set with our node");
            if let Some(own) = q.own_watch.take() {
                if let Some(event) = (*own).silent() {
                    let hold = Hold::new(session, &self.client.closed, own_path, sequence, czxid);
                    self.client.node_watcher.add(&hold, Some(event));
                    return Ok(Step::Done(Some(hold)));
                }
            }
            match Box::pin(requests.send(zk.check_stat(&own_path))).await? {
                Reply::Answered(Ok(Some(stat))) if stat.ephemeral_owner == session.id => {
                    requests.progressed();
                    let hold = Hold::new(session, &self.client.closed, own_path, sequence, czxid);
                    self.client.node_watcher.add(&hold, None);
                    return Ok(Step::Done(Some(hold)));
                }
                // Our node is gone: queue again.
                Reply::Answered(Ok(_)) => {
                    q.mine = None;
                    attempt.node.forget();
                }
                Reply::Reconnected => {}
                Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "checking our lock node"))),
            }
        }
    }
}

/// [`crate::Identity`] as written, borrowed: the same fields under the same names (a test checks
/// that what it writes reads back as an `Identity`).
#[derive(serde::Serialize)]
struct IdentityOf<'a, O> {
    host: &'a str,
    pid: u32,
    owner: O,
    lang: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    identifier: Option<&'a str>,
}

/// An owner's label ([`Owner::label`]) as a JSON string, written in place.
struct LabelOf<'a>(&'a Owner);

impl serde::Serialize for LabelOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.label_display())
    }
}

/// A writer that only counts.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The watch on the node an attempt waits for.
struct Awaited {
    node: String,
    event: NodeEvent,
}

/// A waiter's watch on its own node, set once it is next in line. ZooKeeper delivers a session's
/// events in the order of the changes behind them, so while this watch is silent when the event
/// of the node ahead arrives, our node was still there when that node went: the handoff needs no
/// request. Not after a reconnection, though: the server then reports what changed meanwhile in
/// no particular order, so any change of the session's state since the watch was sent means
/// asking the server instead.
struct OwnWatch {
    event: NodeEvent,
    states: zk::StateWatcher,
}

impl OwnWatch {
    /// The watch, to go on watching the node with, if it has reported nothing, and the session
    /// has stayed connected, since it was sent.
    fn silent(mut self) -> Option<NodeEvent> {
        let reconnected = self.states.changed().now_or_never().is_some();
        let reported = (&mut self.event).now_or_never().is_some();
        (!reconnected && !reported).then_some(self.event)
    }
}

/// Runs `attempt` until it holds, fails, or the deadline passes; an attempt that failed because
/// its session ended (expired, or disconnected past its timeout) is made again, on a new session,
/// within the deadline (see [`Recipe::contend`]).
pub(crate) async fn again_on_new_session<'w, T, F, Fut>(wait: &'w Wait, mut attempt: F) -> Result<Option<T>>
where
    F: FnMut(&'w Wait) -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let mut requeues = 0u32;
    loop {
        let result = attempt(wait).await;
        let requeue = match &result {
            Err(err) => {
                err.kind() == ErrorKind::SessionExpired
                    && matches!(err.lost_reason(), Some(LostReason::SessionExpired | LostReason::DisconnectedTooLong))
                    && !wait.only_try
            }
            Ok(_) => false,
        };
        if !requeue {
            return result;
        }
        requeues += 1;
        // Not in a tight loop, should new sessions keep ending at once.
        wait.within(tokio::time::sleep(Duration::from_millis(50 * u64::from(requeues.min(20))))).await;
        if wait.is_over() {
            return Ok(None);
        }
    }
}

/// What an attempt keeps between its steps, through its waits (see `Recipe::step`): with its node
/// and requests, all that a waiter of a long queue keeps, so kept small.
struct Queueing<'a> {
    /// Its first create's turns: in the client's send order (given back once sent) and in its
    /// window of creates in flight (given back once answered).
    send_turn: Option<tokio::sync::MutexGuard<'a, ()>>,
    create_slot: Option<crate::client::CreateSlot<'a>>,
    mine: Option<Made>,
    /// The watch on the node ahead, kept across a look again that still names it.
    awaited: Option<Awaited>,
    /// Boxed: only the waiter next in line has one.
    own_watch: Option<Box<OwnWatch>>,
    /// The request for it, sent with the listing an informant's going calls for (its waiter is
    /// most likely next in line then), and answered after that listing.
    own_watch_sent: Option<OwnWatchRequest<'a>>,
    /// What the going of the node waited for means.
    then: AfterWait,
}

/// A request watching our own node, with the session's states as it was sent (see `OwnWatch`).
type OwnWatchRequest<'a> =
    (zk::StateWatcher, futures::future::BoxFuture<'a, crate::retry::ZkResult<(Option<zk::Stat>, zk::OneshotWatcher)>>);

/// Where a step of an attempt ended.
enum Step {
    /// Held, or (`None`) not had: by the deadline, or only trying.
    Done(Option<Hold>),
    /// Waiting for the node ahead to go, and for the informant (this watch) too if there is one.
    Wait(Option<NodeEvent>),
}

/// How a wait ended: the event, and whether it was the informant's.
struct Woke {
    event_type: zk::EventType,
    session_state: zk::SessionState,
    informed: bool,
}

/// Why an attempt ended without the lock: an error to report as it is, or a stopped step.
pub(super) enum Failed {
    Error(Error),
    Stopped(Stop),
}

impl From<Stop> for Failed {
    fn from(stop: Stop) -> Failed {
        Failed::Stopped(stop)
    }
}

impl From<Error> for Failed {
    fn from(err: Error) -> Failed {
        Failed::Error(err)
    }
}

#[cfg(test)]
mod tests {
    use super::{IdentityOf, LabelOf};
    use crate::lock::Identity;
    use crate::owners::Owner;

    #[test]
    fn the_borrowed_identity_reads_back_as_an_identity() {
        let owners = [Owner::with_label(7, "thread:worker-3"), Owner::new(1 << 63)];
        for (owner, identifier) in owners.iter().zip([None, Some("billing \"nightly\" job")]) {
            let written = IdentityOf { host: "host-1", pid: 42, owner: LabelOf(owner), lang: "node", identifier };
            let read: Identity = serde_json::from_slice(&serde_json::to_vec(&written).unwrap()).unwrap();
            let expected = Identity {
                host: "host-1".to_owned(),
                pid: 42,
                owner: owner.label(),
                lang: "node".to_owned(),
                identifier: identifier.map(str::to_owned),
            };
            assert_eq!(read, expected);
            // Field for field, as the owned struct writes it (other clients parse these bytes).
            assert_eq!(serde_json::to_vec(&written).unwrap(), serde_json::to_vec(&expected).unwrap());
        }
    }
}
