//! The recipe engine: the contend loop, written once for every kind of lock. An attempt creates
//! its uuid-marked EPHEMERAL_SEQUENTIAL node (finding it again after a connection loss instead
//! of making a second), lists the queue, asks its [`Mode`] whether it holds or which node to
//! wait for, watches that node and looks again when it goes; on a timeout, a cancel or an error
//! its node is removed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use crate::acl::Acl;
use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::lock::{BeforeWatch, Identity, Participant};
use crate::order;
use crate::owners::{Owner, OwnerTable};
use crate::policy::{AfterWait, Decision, Mode};
use crate::retry::{Reply, Requests, Stop, ZkResult, REFUSED};
use crate::session::Session;
use crate::validate;

static ANYONE_ALL: [zk::Acl; 1] = [zk::Acl::new_const(zk::Permission::ALL, "world", "anyone")];
const CONTAINER: zk::CreateOptions<'static> = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());

/// Which incarnation of a lock path, with which ACL: its creation zxid and ACL version, from the
/// stat of a listing or of a getACL.
type PathVersion = (i64, i32);

fn path_version(stat: &zk::Stat) -> PathVersion {
    (stat.czxid, stat.aversion)
}

/// How long an acquisition may wait: one value, fixed when the acquisition begins.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    /// `None`: as long as it takes.
    pub(crate) deadline: Option<Instant>,
    /// Only try: one create and one listing, then give up if the lock is not had.
    pub(crate) only_try: bool,
}

impl Wait {
    /// From the bindings' form: `None` waits forever, `Some(ZERO)` only tries.
    pub(crate) fn from_timeout(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait { deadline: None, only_try: false },
            Some(timeout) if timeout.is_zero() => Wait { deadline: None, only_try: true },
            // Past what an Instant holds is forever, for all practical purposes.
            Some(timeout) => Wait { deadline: Instant::now().checked_add(timeout), only_try: false },
        }
    }
}

/// The last nodes of exclusive and write holds that a client's holders released (full paths,
/// relative to the chroot). Such a node held, so when it held nothing was ahead of it, and
/// nothing can come ahead of it later: a waiter that watched it, and finds it gone, has nothing
/// ahead of it either. Bounded: an entry pushed out only costs its waiter a listing.
#[derive(Default)]
pub(crate) struct ReleasedNodes(parking_lot::Mutex<ReleasedRing>);

#[derive(Default)]
struct ReleasedRing {
    order: std::collections::VecDeque<Arc<str>>,
    set: std::collections::HashSet<Arc<str>>,
}

impl ReleasedNodes {
    const CAPACITY: usize = 1024;

    fn remember(&self, node_path: &str) {
        let name = node_path.rsplit('/').next().unwrap_or_default();
        if !matches!(Mode::of_node(name), Some(Mode::Exclusive | Mode::Write)) {
            // A reader that held may have had other readers ahead of it: no proof of anything.
            return;
        }
        let mut ring = self.0.lock();
        let node: Arc<str> = node_path.into();
        if ring.set.insert(node.clone()) {
            ring.order.push_back(node);
        }
        while ring.order.len() > Self::CAPACITY {
            if let Some(old) = ring.order.pop_front() {
                ring.set.remove(&old);
            }
        }
    }

    fn contains(&self, node_path: &str) -> bool {
        self.0.lock().set.contains(node_path)
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
}

/// A lock path's children, in queue order as far as their names tell (see `order`).
pub(crate) struct Listing {
    names: Vec<String>,
    /// How many of `names`, from the front, are in queue order: the rest are to be ordered by
    /// creation zxid (past the sequence limit, say).
    ordered: usize,
    /// The lock path's version at the listing, for a protected lock (whose listings ask for it).
    path: Option<PathVersion>,
}

impl Listing {
    fn of(mut names: Vec<String>, path: Option<PathVersion>) -> Listing {
        let ordered = order::sort_by_name(&mut names);
        Listing { names, ordered, path }
    }
}

/// Lists `path`'s children, and for a protected lock the path's version with them (one request
/// either way: getChildren2 instead of getChildren).
fn list(zk: &zk::Client, path: &str, protected: bool) -> impl std::future::Future<Output = ZkResult<Listing>> + Send {
    let (zk, path) = (zk.clone(), path.to_owned());
    async move {
        if protected {
            zk.get_children(&path).await.map(|(names, stat)| Listing::of(names, Some(path_version(&stat))))
        } else {
            zk.list_children(&path).await.map(|names| Listing::of(names, None))
        }
    }
}

type ListingReply = futures::future::Shared<futures::future::BoxFuture<'static, ZkResult<Arc<Listing>>>>;

/// A listing in flight or done, and the creates it was sent behind.
struct SharedListing {
    /// It was sent after the create with this ticket (and every earlier one): it shows their
    /// nodes, if they still exist.
    covers: u64,
    reply: ListingReply,
}

impl Recipe {
    /// Refuses a path and identifier that could not fit in a request, whoever the owner.
    pub(crate) fn new(client: Arc<ClientInner>, path: String, options: crate::LockOptions) -> Result<Recipe> {
        options.acl.check(client.options.digest_auth.as_deref()).map_err(|err| err.with_path(&path))?;
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
            path_known: AtomicBool::new(false),
            kinds_checked: AtomicBool::new(false),
            creates_sent: AtomicU64::new(0),
            shared_listing: parking_lot::Mutex::new(None),
        };
        recipe.check_fits(recipe.node_data_labelled(String::new()).len(), || "the identity".to_owned())?;
        Ok(recipe)
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
        let reason = session.lost_reason().unwrap_or(crate::LostReason::SessionExpired);
        self.error(ErrorKind::SessionExpired, format!("{}; a new attempt starts a new session", reason.describe()))
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
        format!("{}/{}", self.path, name)
    }

    pub(crate) fn node_data(&self, owner: &Owner) -> Vec<u8> {
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

    /// Sends a listing now, behind every create sent so far, for every attempt whose create it
    /// covers.
    fn send_listing(&self, zk: &zk::Client) -> ListingReply {
        let mut slot = self.shared_listing.lock();
        let covers = self.creates_sent.load(Ordering::Acquire);
        let listing = list(zk, &self.path, self.protected());
        let reply = futures::FutureExt::shared(futures::FutureExt::boxed(async move { listing.await.map(Arc::new) }));
        // One poll sends the request now, in order behind the creates it covers. Through a clone
        // of its own: a handle that has seen the reply must not be polled again, and the reply
        // may come at once (an error, or a quick server).
        let _ = futures::FutureExt::poll_unpin(
            &mut reply.clone(),
            &mut std::task::Context::from_waker(futures::task::noop_waker_ref()),
        );
        if slot.as_ref().map_or(true, |shared| shared.covers <= covers) {
            *slot = Some(SharedListing { covers, reply: reply.clone() });
        }
        reply
    }

    /// A listing that shows the node of the create with `ticket`: one already sent after it if
    /// there is one, or else a new one. (A burst of acquisitions on one client so shares a few
    /// listings, instead of each listing a queue that grows with the burst.)
    fn listing_after(&self, ticket: u64, zk: &zk::Client) -> ListingReply {
        let covering =
            self.shared_listing.lock().as_ref().filter(|shared| shared.covers >= ticket).map(|s| s.reply.clone());
        covering.unwrap_or_else(|| self.send_listing(zk))
    }

    /// Drives to its end, in the background, a listing in flight that this attempt gave up
    /// waiting for (its create failed, say): until answered it holds a handle on the session,
    /// which would keep [`crate::Client::close`] waiting for the session timeout.
    fn finish_abandoned_listing(&self) {
        let pending = self.shared_listing.lock().as_ref().filter(|s| s.reply.peek().is_none()).map(|s| s.reply.clone());
        if let Some(reply) = pending {
            self.client.runtime.spawn(async move {
                let _ = reply.await;
            });
        }
    }

    /// Whether a listing is on its way: a create sent meanwhile may wait for the next one rather
    /// than send its own right behind it.
    fn listing_in_flight(&self) -> bool {
        self.shared_listing.lock().as_ref().is_some_and(|shared| shared.reply.peek().is_none())
    }

    /// A child of another recipe in `names`, which a lock of `mode` must not share a path with.
    fn conflict(&self, mode: Mode, names: &[String]) -> Option<Error> {
        let name = names.iter().find(|name| !mode.shares_path_with(name))?;
        let other = Mode::of_node(name).expect("a node of no known lock shares any path");
        let (ours, theirs) = match mode {
            Mode::Exclusive => ("a mutex", "read/write lock"),
            _ => ("a read/write lock", "mutex"),
        };
        Some(self.error(
            ErrorKind::InvalidArgument,
            format!(
                "{ours} cannot use this path: it holds {theirs} nodes ({other} node {name}); the two recipes \
                 would ignore each other's rules, so use another path"
            ),
        ))
    }

    /// One acquisition attempt in `mode`, with its node removed on every way out but success.
    /// `Ok(None)`: not had by the deadline (or, only trying, held by others).
    pub(crate) async fn contend(&self, mode: Mode, owner: &Owner, wait: Wait) -> Result<Option<Hold>> {
        let data = self.node_data(owner);
        self.check_fits(data.len(), || format!("owner label of {} bytes", owner.label().len()))?;
        let send_turn = match wait.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, self.client.send_order.lock()).await {
                Ok(turn) => turn,
                // Acquisitions begun earlier are still establishing a session or creating the path.
                Err(_) => return Ok(None),
            },
            None => self.client.send_order.lock().await,
        };
        let session = self.client.session(&self.path).await?;
        // Trying still completes its one round trip, unless the session is stuck.
        let deadline = if wait.only_try { Some(Instant::now() + session.timeout) } else { wait.deadline };
        let requests = Requests::new(&self.client, &session, deadline);
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            path: self.path.clone(),
            name_prefix: format!("_c_{}-{}", self.client.attempt_ids.next(), mode.marker()),
            node: None,
            armed: false,
        };
        let result = self.queue_and_wait(mode, &requests, data, wait.only_try, &mut attempt, send_turn).await;
        let result = match result {
            // With a deadline, a stop at it is no error: the lock was not had in time.
            Err(Stop::Deadline) if !wait.only_try => Ok(None),
            Err(stop) => Err(Failed::Stopped(stop)),
            Ok(outcome) => outcome,
        };
        if !matches!(result, Ok(Some(_))) {
            self.finish_abandoned_listing();
        }
        match &result {
            Ok(Some(_)) => attempt.armed = false,
            // The session is gone, and its ephemeral nodes with it.
            Err(Failed::Stopped(Stop::Closed | Stop::SessionOver)) => attempt.armed = false,
            _ => attempt.remove().await,
        }
        result.map_err(|failed| match failed {
            Failed::Error(err) => err,
            Failed::Stopped(stop) => self.stopped(&session, stop, || {
                self.error(ErrorKind::Timeout, "no answer from ZooKeeper while trying the lock")
            }),
        })
    }

    /// A downgrade: `owner`, holding `write`, takes the read side with a plain ephemeral read
    /// node that carries the write node's sequence (Curator 5.5+'s form, CURATOR-621), in the
    /// write hold's session, and holds at once. The node takes the write node's place in the
    /// queue (see `order`), so the writers already waiting stay out until the read is released,
    /// and readers that come once the write side is released share with it. Its fencing token
    /// is the write hold's: the hold goes on from that place, and the writers queued behind it
    /// hold later, with higher tokens. As for any attempt, its node is removed on every way out
    /// but success. `Ok(None)`: not made by the deadline.
    pub(crate) async fn downgrade(&self, owner: &Owner, write: &Hold, wait: Wait) -> Result<Option<Hold>> {
        let data = self.node_data(owner);
        self.check_fits(data.len(), || format!("owner label of {} bytes", owner.label().len()))?;
        let lost = || crate::owners::write_lost(owner, &self.path);
        let session = match write.inner.session.upgrade() {
            Some(session) if !write.inner.is_lost() => session,
            _ => return Err(lost()),
        };
        let deadline = if wait.only_try { Some(Instant::now() + session.timeout) } else { wait.deadline };
        let requests = Requests::new(&self.client, &session, deadline);
        let name = format!("_c_{}-{}{:010}", self.client.attempt_ids.next(), Mode::Read.marker(), write.sequence());
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            path: self.path.clone(),
            name_prefix: name.clone(),
            node: None,
            armed: true,
        };
        let (options, _) = self.node_options(zk::CreateMode::Ephemeral);
        let made = loop {
            let create = requests.send(session.zk.create(&self.child_path(&name), &data, &options)).await;
            match create {
                Ok(Reply::Answered(Ok(_))) => break Ok(()),
                // The write node's path is gone, and the write node with it.
                Ok(Reply::Answered(Err(zk::Error::NoNode))) => break Err(lost()),
                Ok(Reply::Answered(Err(err))) => break Err(self.zk_error(err, "creating the read node of a downgrade")),
                // Made or not: find it rather than make a second one.
                Ok(Reply::Reconnected) => match find_mine(&requests, &self.path, &name).await {
                    Ok(Ok(Some(_))) => break Ok(()),
                    Ok(Ok(None)) => continue,
                    Ok(Err(err)) => break Err(self.zk_error(err, "finding the read node of a downgrade")),
                    Err(stop) => break Err(self.downgrade_stopped(&session, stop, owner)),
                },
                Err(stop) => break Err(self.downgrade_stopped(&session, stop, owner)),
            }
        };
        match made {
            Ok(()) => {
                attempt.armed = false;
                let hold = Hold::new(
                    &session,
                    &self.client.closed,
                    self.child_path(&name),
                    write.sequence(),
                    write.fencing_token(),
                );
                self.client.node_watcher.add(&hold);
                Ok(Some(hold))
            }
            Err(err) if err.kind() == ErrorKind::Timeout && !wait.only_try => {
                attempt.remove().await;
                Ok(None)
            }
            Err(err) => {
                attempt.remove().await;
                Err(err)
            }
        }
    }

    /// The error for a downgrade's step stopped before its answer: the end of the session is the
    /// loss of the write hold it reads under.
    fn downgrade_stopped(&self, session: &Session, stop: Stop, owner: &Owner) -> Error {
        match stop {
            Stop::SessionOver => crate::owners::write_lost(owner, &self.path),
            stop => self.stopped(session, stop, || {
                self.error(ErrorKind::Timeout, "no answer from ZooKeeper making the read node of a downgrade")
            }),
        }
    }

    async fn queue_and_wait(
        &self,
        mode: Mode,
        requests: &Requests<'_>,
        data: Vec<u8>,
        only_try: bool,
        attempt: &mut Attempt,
        send_turn: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<std::result::Result<Option<Hold>, Failed>, Stop> {
        let mut send_turn = Some(send_turn);
        let zk = requests.zk();
        let session = requests.session;
        let node_prefix = self.child_path(&attempt.name_prefix);
        // Our node: (name, sequence, creation zxid).
        let mut mine: Option<(String, i64, i64)> = None;
        if !self.kinds_checked.load(Ordering::Acquire) {
            match requests.retry(|| list(zk, &self.path, self.protected())).await? {
                Ok(listing) => {
                    // A protected lock checks an existing path's ACL before it creates anything.
                    if let Err(err) = self.check_path_acl(requests, listing.path).await? {
                        return Ok(Err(Failed::Error(err)));
                    }
                    match self.conflict(mode, &listing.names) {
                        Some(err) => return Ok(Err(Failed::Error(err))),
                        None => self.kinds_checked.store(true, Ordering::Release),
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(err) => return Ok(Err(Failed::Error(self.zk_error(err, "listing the contenders")))),
            }
        }
        loop {
            let children = match &mine {
                None => {
                    // Pipelined: ZooKeeper answers a session's requests in order, so the listing
                    // sent right behind the create already contains the new node. One round trip.
                    attempt.armed = true;
                    let create =
                        zk.create(&node_prefix, &data, &self.node_options(zk::CreateMode::EphemeralSequential).0);
                    let ticket = self.creates_sent.fetch_add(1, Ordering::AcqRel) + 1;
                    // Uncontended, the listing goes right behind the create; while another is on
                    // its way, this attempt takes the next one, sent behind more creates.
                    let listing = (!self.listing_in_flight()).then(|| self.send_listing(zk));
                    if self.path_known.load(Ordering::Acquire) {
                        // Sent: later acquisitions of this client may send theirs.
                        drop(send_turn.take());
                    }
                    match requests.send(create).await? {
                        Reply::Answered(Ok((stat, sequence))) => {
                            requests.progressed();
                            self.path_known.store(true, Ordering::Release);
                            drop(send_turn.take());
                            let name = format!("{}{}", attempt.name_prefix, sequence);
                            attempt.node = Some(self.child_path(&name));
                            mine = Some((name, sequence.into_i64(), stat.czxid));
                        }
                        Reply::Answered(Err(zk::Error::NoNode)) => {
                            self.path_known.store(false, Ordering::Release);
                            if let Err(err) = self.make_parents(requests).await? {
                                return Ok(Err(Failed::Error(err)));
                            }
                            continue;
                        }
                        Reply::Answered(Err(err)) => {
                            return Ok(Err(Failed::Error(self.zk_error(err, "creating the lock node"))))
                        }
                        Reply::Reconnected => {
                            // The create may or may not have happened: find it by our uuid rather
                            // than make a second node.
                            mine = match find_mine(requests, &self.path, &attempt.name_prefix).await? {
                                Ok(found) => found,
                                Err(err) => return Ok(Err(Failed::Error(self.zk_error(err, "finding our lock node")))),
                            };
                            attempt.node = mine.as_ref().map(|(name, ..)| self.child_path(name));
                            continue;
                        }
                    }
                    let listing = listing.unwrap_or_else(|| self.listing_after(ticket, zk));
                    match requests.send(listing).await? {
                        Reply::Answered(Ok(children)) => {
                            requests.progressed();
                            children
                        }
                        Reply::Reconnected | Reply::Answered(Err(zk::Error::NoNode)) => continue,
                        Reply::Answered(Err(err)) => {
                            return Ok(Err(Failed::Error(self.zk_error(err, "listing the contenders"))))
                        }
                    }
                }
                Some(_) => match requests.retry(|| list(zk, &self.path, self.protected())).await? {
                    Ok(children) => {
                        requests.progressed();
                        Arc::new(children)
                    }
                    // The lock path vanished, and our node with it: queue again (kazoo #563).
                    Err(zk::Error::NoNode) => {
                        self.path_known.store(false, Ordering::Release);
                        mine = None;
                        continue;
                    }
                    Err(err) => return Ok(Err(Failed::Error(self.zk_error(err, "listing the contenders")))),
                },
            };
            if let Some(err) = self.conflict(mode, &children.names) {
                return Ok(Err(Failed::Error(err)));
            }
            // Our node is in this listing, so the path cannot go (or be made anew) while we wait
            // or hold: its ACL, checked here, stays the one our place in the queue is under.
            if let Err(err) = self.check_path_acl(requests, children.path).await? {
                return Ok(Err(Failed::Error(err)));
            }
            let (name, sequence, czxid) = mine.clone().expect("created above");
            let queue = match in_queue_order(requests, &self.path, children).await? {
                Ok(queue) => queue,
                Err(err) => return Ok(Err(Failed::Error(self.zk_error(err, "reading the contenders")))),
            };
            let Some(position) = queue.names.iter().position(|child| *child == name) else {
                // Our node is gone (the path was removed, or someone deleted it): queue again.
                mine = None;
                attempt.node = None;
                continue;
            };
            let names: Vec<&str> = queue.names.iter().map(String::as_str).collect();
            let (ahead, then) = match mode.decide(&names, position, mode != Mode::Exclusive) {
                Decision::Holds => {
                    let node_path = attempt.node.clone().expect("set with mine");
                    let hold = Hold::new(session, &self.client.closed, node_path, sequence, czxid);
                    self.client.node_watcher.add(&hold);
                    return Ok(Ok(Some(hold)));
                }
                Decision::WaitFor { node, then } => (self.child_path(names[node]), then),
            };
            drop(names);
            if only_try {
                return Ok(Ok(None));
            }
            // Nothing of the listing survives into the wait: a waiter keeps O(1) memory.
            drop(queue);
            if let Some(hook) = &self.before_watch {
                hook(ahead.clone()).await;
            }
            // getData sets no watch on a missing node, so NoNode leaves nothing behind.
            let watcher = match requests.send(zk.get_and_watch_data(&ahead)).await? {
                Reply::Answered(Ok((_, _, watcher))) => {
                    requests.progressed();
                    Some(watcher)
                }
                Reply::Answered(Err(zk::Error::NoNode)) => None,
                Reply::Reconnected => continue,
                Reply::Answered(Err(err)) => {
                    return Ok(Err(Failed::Error(self.zk_error(err, "watching the node ahead"))))
                }
            };
            if let Some(watcher) = watcher {
                let event = requests.bounded(watcher.changed()).await?;
                match (event.event_type, event.session_state) {
                    (zk::EventType::NodeDeleted, _) => {}
                    (zk::EventType::Session, zk::SessionState::Expired) => return Err(Stop::SessionOver),
                    (zk::EventType::Session, zk::SessionState::Closed) => return Err(Stop::Closed),
                    (zk::EventType::Session, zk::SessionState::AuthFailed) => {
                        return Ok(Err(Failed::Error(
                            self.error(ErrorKind::AuthFailed, "authentication failed while waiting"),
                        )))
                    }
                    // Anything else (a change of its data, a disconnection): look again.
                    _ => continue,
                }
            }
            let holds = match then {
                AfterWait::Holds => true,
                AfterWait::HoldsIfReleasedHere => self.client.released.contains(&ahead),
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
            // so the set of nodes ahead of us only shrinks. The node we watched was the only one
            // in it that kept us out, or it was an exclusive or write node that held (released
            // by this client: see `ReleasedNodes`), so nothing was ahead of it, and nothing is
            // between it and us that keeps us out (it was our predecessor, or for a reader the
            // nearest writer ahead). It is gone, so we hold, once we know our node is still there
            // and still this session's (someone may have deleted it meanwhile).
            let own = attempt.node.clone().expect("set with mine");
            match requests.send(zk.check_stat(&own)).await? {
                Reply::Answered(Ok(Some(stat))) if stat.ephemeral_owner == session.id => {
                    requests.progressed();
                    let hold = Hold::new(session, &self.client.closed, own, sequence, czxid);
                    self.client.node_watcher.add(&hold);
                    return Ok(Ok(Some(hold)));
                }
                // Our node is gone: queue again.
                Reply::Answered(Ok(_)) => {
                    mine = None;
                    attempt.node = None;
                }
                Reply::Reconnected => {}
                Reply::Answered(Err(err)) => {
                    return Ok(Err(Failed::Error(self.zk_error(err, "checking our lock node"))))
                }
            }
        }
    }

    /// Creates the lock path and its missing ancestors as containers, which the server removes
    /// once they are empty again. A protected lock's path is persistent instead, with the lock's
    /// ACL: a container would go whenever the queue is empty, and anyone could make it again,
    /// open. Its ancestors stay open containers.
    async fn make_parents(&self, requests: &Requests<'_>) -> std::result::Result<Result<()>, Stop> {
        let zk = requests.zk();
        if !self.protected() {
            return match requests.send(zk.mkdir(&self.path, &CONTAINER)).await? {
                Reply::Answered(Err(err)) => Ok(Err(self.zk_error(err, "creating the lock path"))),
                _ => Ok(Ok(())),
            };
        }
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&self.zk_acl));
        let parent = &self.path[..self.path.rfind('/').unwrap_or_default()];
        // Twice at most: once more after making the parents. (The attempt's loop comes back here
        // if the parents are gone again.)
        for _ in 0..2 {
            match requests.send(zk.create(&self.path, &[], &options)).await? {
                Reply::Answered(Ok((stat, _))) => {
                    // Made by us with the lock's ACL: nothing to check.
                    *self.acl_checked.lock() = Some(path_version(&stat));
                    return Ok(Ok(()));
                }
                // Someone else's (or ours, after a lost reply): its ACL is checked at the listing.
                Reply::Answered(Err(zk::Error::NodeExists)) | Reply::Reconnected => return Ok(Ok(())),
                Reply::Answered(Err(zk::Error::NoNode)) if !parent.is_empty() => {
                    if let Reply::Answered(Err(err)) = requests.send(zk.mkdir(parent, &CONTAINER)).await? {
                        return Ok(Err(self.zk_error(err, "creating the lock path's parents")));
                    }
                }
                Reply::Answered(Err(err)) => return Ok(Err(self.zk_error(err, "creating the lock path"))),
            }
        }
        Ok(Ok(()))
    }

    /// For a protected lock: refuses to go on under a lock path whose ACL grants others more
    /// than the lock's ACL (made open by someone else, or by a zklock without an ACL, say), as
    /// its nodes would not be protected. `listed` is the path's version at the listing; its
    /// ACL is read only when that is not the version already checked.
    async fn check_path_acl(
        &self,
        requests: &Requests<'_>,
        listed: Option<PathVersion>,
    ) -> std::result::Result<Result<()>, Stop> {
        if !self.protected() || listed.is_none() || listed == *self.acl_checked.lock() {
            return Ok(Ok(()));
        }
        let (acl, stat) = match requests.retry(|| requests.zk().get_acl(&self.path)).await? {
            Ok(found) => found,
            // Gone since the listing: the next listing says what is there now.
            Err(zk::Error::NoNode) => return Ok(Ok(())),
            Err(err) => return Ok(Err(self.zk_error(err, "reading the lock path's ACL"))),
        };
        let digest_auth = self.client.options.digest_auth.as_deref();
        if let Some(missing) = crate::acl::missing_rights(&acl, digest_auth) {
            let who = digest_auth.map_or("an unauthenticated client".to_owned(), |auth| {
                format!("digest user {}", auth.split(':').next().unwrap_or_default())
            });
            return Ok(Err(self.error(
                ErrorKind::PermissionDenied,
                format!(
                    "the lock path's ACL ({}) does not grant this client ({who}) {missing}, which a contender \
                     needs: connect with digest auth as a user the ACL names, or use another path",
                    crate::acl::describe(&acl)
                ),
            )));
        }
        let excess = self.acl.excess(&acl, digest_auth);
        if excess.is_empty() {
            *self.acl_checked.lock() = Some(path_version(&stat));
            return Ok(Ok(()));
        }
        let excess: Vec<String> = excess.iter().map(ToString::to_string).collect();
        Ok(Err(self.error(
            ErrorKind::PermissionDenied,
            format!(
                "the lock path's ACL grants more than this lock's ACL ({}) allows: {}; lock nodes under it would \
                 not be protected (anyone it grants could delete a holder's node or queue). Use another path, or \
                 delete this one while it is empty, or set its ACL to the lock's",
                self.acl,
                excess.join(", ")
            ),
        )))
    }

    /// Every child of the path in queue order, with the identity in its node. `read_write`: the
    /// lock is a read/write lock, so kazoo's `__lock__` nodes are writers (they are too when the
    /// path holds read/write nodes).
    pub(crate) async fn participants(&self, read_write: bool) -> Result<Vec<Participant>> {
        let session = &self.client.session(&self.path).await?;
        let requests = Requests::new(&self.client, session, Some(Instant::now() + session.timeout));
        let stopped = |stop| {
            self.stopped(session, stop, || {
                self.error(ErrorKind::ConnectionLoss, "no answer from ZooKeeper listing the contenders")
            })
        };
        let mut names = match requests.retry(|| requests.zk().list_children(&self.path)).await.map_err(stopped)? {
            Ok(names) => names,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(err) => return Err(self.zk_error(err, "listing the contenders")),
        };
        let ordered = order::sort_by_name(&mut names);
        let read_write =
            read_write || names.iter().any(|name| matches!(Mode::of_node(name), Some(Mode::Read | Mode::Write)));
        let reads = read_children(&requests, &self.path, &names)
            .await
            .map_err(stopped)?
            .map_err(|err| self.zk_error(err, "reading the contenders"))?;
        // Children gone since the listing are left out: count those in order that are kept.
        let mut kept_in_order = 0;
        let mut participants: Vec<Participant> = names
            .into_iter()
            .zip(reads)
            .enumerate()
            .filter_map(|(i, (node, read))| {
                let (data, stat) = read?;
                kept_in_order += usize::from(i < ordered);
                Some(Participant {
                    sequence: order::suffix(&node).map(i64::from),
                    identity: serde_json::from_slice(&data).ok(),
                    mode: Mode::of_node_in(&node, read_write),
                    node,
                    fencing_token: stat.czxid,
                    session_id: stat.ephemeral_owner,
                    created_ms: stat.ctime,
                    data,
                })
            })
            .collect();
        order::sort_by_zxid(&mut participants[kept_in_order..], |p| p.fencing_token);
        Ok(participants)
    }

    /// Deletes a held node and reports how the release went. On connection loss the delete
    /// goes on in the background, until the node is gone or its session is over.
    pub(crate) async fn delete_held(&self, hold: &Hold) -> Result<()> {
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
        let requests = Requests::new(&self.client, &session, None);
        // Before the delete is sent, so a waiter of this client that sees the node go knows.
        self.client.released.remember(hold.node_path());
        match requests.bounded(session.zk.delete(hold.node_path(), None)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(zk::Error::NoNode)) => Err(lost(crate::LostReason::NodeDeleted.describe())),
            Ok(Err(zk::Error::SessionExpired)) | Err(Stop::SessionOver) => {
                Err(lost(session.lost_reason().unwrap_or(crate::LostReason::SessionExpired).describe()))
            }
            Err(Stop::Closed) => Err(lost(crate::LostReason::Closed.describe())),
            Ok(Err(err)) if crate::retry::connection_lost(&err) => {
                let removal = remove_node(self.client.clone(), session.clone(), self.path.clone(), String::new(), {
                    Some(hold.node_path().to_owned())
                });
                self.client.runtime.spawn(removal);
                Err(self.error(
                    ErrorKind::ConnectionLoss,
                    "the connection dropped before the server confirmed the release; the lock node is deleted \
                     in the background once reconnected, or goes with the session",
                ))
            }
            Err(stop) => Err(self.stopped(&session, stop, || self.error(ErrorKind::ConnectionLoss, REFUSED))),
            Ok(Err(err)) => Err(self.zk_error(err, "deleting the lock node")),
        }
    }
}

/// Why an attempt ended without the lock: an error to report as it is, or a stopped step.
enum Failed {
    Error(Error),
    Stopped(Stop),
}

/// The children in queue order: the listing itself when their names gave that order, else with
/// the rest ordered by creation zxid, from multi-reads of their stats (children gone meanwhile
/// left out).
async fn in_queue_order(
    requests: &Requests<'_>,
    path: &str,
    listing: Arc<Listing>,
) -> std::result::Result<ZkResult<Arc<Listing>>, Stop> {
    if listing.ordered == listing.names.len() {
        return Ok(Ok(listing));
    }
    let (ordered, rest) = listing.names.split_at(listing.ordered);
    let stats = match read_children(requests, path, rest).await? {
        Ok(stats) => stats,
        Err(err) => return Ok(Err(err)),
    };
    let mut rest: Vec<(i64, &String)> =
        rest.iter().zip(stats).filter_map(|(name, read)| read.map(|(_, stat)| (stat.czxid, name))).collect();
    order::sort_by_zxid(&mut rest, |(czxid, _)| *czxid);
    let names: Vec<String> = ordered.iter().chain(rest.into_iter().map(|(_, name)| name)).cloned().collect();
    Ok(Ok(Arc::new(Listing { ordered: names.len(), names, path: listing.path })))
}

/// Data and stat of each child, `None` for a child that is already gone: multi-reads, each
/// under the server's packet limit (one multi of a long queue's reads would be over it, and the
/// server would drop the connection at every attempt), sent together.
async fn read_children(
    requests: &Requests<'_>,
    path: &str,
    names: &[String],
) -> std::result::Result<ZkResult<Vec<Option<(Vec<u8>, zk::Stat)>>>, Stop> {
    let limit = requests.client.options.jute_maxbuffer as usize;
    let chroot = requests.client.chroot.len();
    let batches = validate::multi_read_batches(names.iter().map(|name| chroot + path.len() + 1 + name.len()), limit);
    let read = |batch: &[String]| {
        let mut reader = requests.zk().new_multi_reader();
        let added = batch.iter().try_for_each(|name| reader.add_get_data(&format!("{path}/{name}")));
        async move {
            added?;
            reader.commit().await
        }
    };
    let replies =
        futures::future::join_all(batches.into_iter().map(|batch| requests.retry(move || read(&names[batch.clone()]))));
    let mut reads = Vec::with_capacity(names.len());
    for reply in replies.await {
        match reply? {
            Ok(results) => reads.extend(results.into_iter().map(|result| match result {
                zk::MultiReadResult::Data { data, stat } => Some((data, stat)),
                _ => None,
            })),
            Err(err) => return Ok(Err(err)),
        }
    }
    Ok(Ok(reads))
}

/// After a connection loss during a create: the node it made, if it went through, found by the
/// attempt's uuid and owned by this very session (Curator #1121: a mistake here would mean two
/// holders). `(name, sequence, creation zxid)`.
async fn find_mine(
    requests: &Requests<'_>,
    path: &str,
    name_prefix: &str,
) -> std::result::Result<ZkResult<Option<(String, i64, i64)>>, Stop> {
    let zk = requests.zk();
    let names = requests
        .retry(|| {
            // sync first, so a lagging server we reconnected to has seen our create; the listing
            // behind it in the session's order then shows the node if it exists.
            let sync = zk.sync(path);
            let listing = zk.list_children(path);
            async move {
                let _ = sync.await;
                listing.await
            }
        })
        .await?;
    let names = match names {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(Ok(None)),
        Err(err) => return Ok(Err(err)),
    };
    let Some(name) = names.into_iter().find(|name| name.starts_with(name_prefix)) else { return Ok(Ok(None)) };
    let read = read_children(requests, path, std::slice::from_ref(&name)).await?;
    Ok(read.map(|mut reads| match reads.pop().flatten() {
        Some((_, stat)) if stat.ephemeral_owner == requests.session.id => {
            let sequence = order::suffix(&name).map(i64::from).unwrap_or(-1);
            Some((name, sequence, stat.czxid))
        }
        _ => None,
    }))
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

/// How long an attempt that gave up waits for its node's removal before going on and leaving the
/// removal to the background: long enough for a round trip, and for a brief reconnection.
const FOREGROUND_REMOVAL: Duration = Duration::from_secs(2);

impl Attempt {
    /// Starts removing the node, if armed: a task that retries until it is gone or the session is.
    fn start_removal(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        if !std::mem::take(&mut self.armed) {
            return None;
        }
        let removal = remove_node(
            self.client.clone(),
            self.session.clone(),
            std::mem::take(&mut self.path),
            std::mem::take(&mut self.name_prefix),
            self.node.take(),
        );
        Some(self.client.runtime.spawn(removal))
    }

    /// Removes the node, waiting a bounded time, so a give-up returns in time even while
    /// disconnected; the removal itself is never abandoned.
    async fn remove(&mut self) {
        if let Some(removal) = self.start_removal() {
            let _ = tokio::time::timeout(FOREGROUND_REMOVAL.min(self.session.timeout), removal).await;
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.start_removal();
    }
}

/// Deletes a node of ours: a known one, or an attempt's node found by its uuid prefix (and owned
/// by this session) when the create's outcome is unknown. Retries across connection loss until
/// the node is gone, the session is over (the node goes with it) or the client is closed.
async fn remove_node(
    client: Arc<ClientInner>,
    session: Arc<Session>,
    path: String,
    name_prefix: String,
    node: Option<String>,
) {
    let requests = Requests::new(&client, &session, None);
    let node = match node {
        Some(node) => node,
        None => match find_mine(&requests, &path, &name_prefix).await {
            Ok(Ok(Some((name, ..)))) => format!("{path}/{name}"),
            _ => return,
        },
    };
    let _ = requests.retry(|| session.zk.delete(&node, None)).await;
}
