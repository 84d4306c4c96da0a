//! The semaphore's lease step (Curator's InterProcessSemaphoreV2), on the engine's requests,
//! attempts and holds. The semaphore (`crate::semaphore`) takes its internal mutex (a [`crate::Lock`]
//! at `<path>/locks`), then this step, on the recipe of its lease parent `<path>/leases`, makes
//! the acquisition's lease nodes and waits, still under the mutex, until they fit
//! ([`policy::leases_fit`]); on every way out but success its nodes are removed, as an attempt's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::FutureExt;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::attempt::{self, create_while_held, find_mine, Attempt, Made, NodeName, Refused};
use super::listing::stat_children;
use super::participants::is_lock_node;
use super::path::{path_version, CONTAINER};
use super::{unreachable, Failed, Recipe, Wait};
use crate::error::{printable, Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::owners::Owner;
use crate::policy;
use crate::retry::{connection_lost, Reply, Requests, Stop};
use crate::session::Session;

/// How many leases a [`Semaphore`](crate::Semaphore) allows at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaxLeases {
    /// A number every user of the path agrees on (as in Curator, nothing checks that they do).
    Fixed(u32),
    /// The value of a shared count at `path`, stored as Curator's `SharedCount` stores it (a
    /// 4-byte big-endian int), so Curator and zklock processes agree on it and anyone may change
    /// it at run time (`SharedCount.setCount`, or a 4-byte `setData`): waiting acquirers follow
    /// the change. A missing node is made with `seed`, as Curator's `SharedCount.start` does.
    SharedCount {
        /// The count's node (relative to the client's chroot).
        path: String,
        /// Its value if it has to be made.
        seed: u32,
    },
}

/// A semaphore's max as the lease step reads it: fixed, or the value of a shared count, whose
/// node's recipe is made for its path with the semaphore's ACL (the count is made with it, and an
/// existing count's ACL checked as a protected lock's path is).
pub(crate) enum SemaphoreMax {
    Fixed(u32),
    Count { node: Arc<Recipe>, seed: u32 },
}

/// A lease node's creation zxid, before it is read (see `leases_and_wait`).
const CZXID_UNKNOWN: i64 = -1;

/// A shared count node as Curator's SharedCount writes it: a 4-byte big-endian int.
fn parse_count(path: &str, data: &[u8]) -> Result<i32> {
    let bytes: [u8; 4] = data.try_into().map_err(|_| {
        Error::invalid(format!(
            "the shared count node holds {} bytes, not a count (Curator's SharedCount stores a 4-byte big-endian \
             int)",
            data.len()
        ))
        .with_path(path)
    })?;
    Ok(i32::from_be_bytes(bytes))
}

impl Recipe {
    /// Before the internal mutex, once per semaphore (`checked`): its path holds no lock nodes (a
    /// lock's queue there would ignore the semaphore). And each time, for a shared count, that it
    /// reads as a count of at least `n` (made with its seed first if missing, as Curator's
    /// SharedCount does). `Ok(None)`: the deadline passed first.
    ///
    /// A protected semaphore also checks, once, the ACL of its path and of its lease parent, as a
    /// protected lock checks its path's before its first node (its mutex checks `<path>/locks`).
    pub(crate) async fn prepare_leases(
        &self,
        semaphore: &str,
        max: &SemaphoreMax,
        n: u32,
        wait: &Wait,
        checked: &AtomicBool,
    ) -> Result<Option<()>> {
        if checked.load(Ordering::Acquire) && matches!(max, SemaphoreMax::Fixed(_)) {
            return Ok(Some(()));
        }
        let session = self.client.session_waiting(&self.path, wait.forever());
        let Some(session) = Box::pin(wait.within(session)).await else { return wait.out_of_time(semaphore) };
        let session = session.map_err(|err| wait.session_error(err, semaphore))?;
        let requests = Requests::new(&self.client, &session, wait.deadline).with_abort(wait.abort.clone());
        let prepared = async {
            if !checked.load(Ordering::Acquire) {
                match requests.retry(|| requests.zk().get_children(semaphore)).await? {
                    Ok((names, stat)) => {
                        if let Some(root) = self.parent.get() {
                            Box::pin(root.check_path_acl(&requests, Some(path_version(&stat)))).await?;
                        }
                        if let Some(name) = names.iter().find(|name| is_lock_node(name)) {
                            // Escaped: another client chose the name.
                            let name = printable(name);
                            let message = format!(
                                "a semaphore cannot use this path: it holds lock nodes ({name}); the semaphore would \
                                 ignore the lock's rules, so use another path"
                            );
                            return Err(Failed::Error(Error::recipe_conflict(message).with_path(semaphore)));
                        }
                    }
                    Err(zk::Error::NoNode) => {}
                    Err(err) => return Err(Failed::Error(Error::from_zk(err, semaphore, "listing the semaphore"))),
                }
                if self.protected() {
                    match requests.retry(|| requests.zk().get_children(&self.path)).await? {
                        Ok((_, stat)) => Box::pin(self.check_path_acl(&requests, Some(path_version(&stat)))).await?,
                        Err(zk::Error::NoNode) => {}
                        Err(err) => return Err(Failed::Error(self.zk_error(err, "listing the leases"))),
                    }
                }
                checked.store(true, Ordering::Release);
            }
            if let SemaphoreMax::Count { node, seed } = max {
                let (count, _) = node.read_count(&requests, *seed, false).await?;
                if i64::from(n) > i64::from(count) {
                    return Err(Failed::Error(
                        Error::invalid(format!(
                            "{n} leases asked for, more than the shared count's max of {count}: they would never fit"
                        ))
                        .with_path(&node.path),
                    ));
                }
            }
            Ok(())
        };
        match prepared.await {
            Ok(()) => Ok(Some(())),
            Err(Failed::Stopped(Stop::Deadline)) => wait.out_of_time(semaphore),
            Err(Failed::Error(err)) => Err(err),
            Err(Failed::Stopped(stop)) => {
                Err(self.stopped(&session, stop, || unreachable(semaphore, "trying the semaphore")))
            }
        }
    }

    /// The shared count at this recipe's path, and with `watch` a watcher of its changes. A
    /// missing node is made with `seed` (persistent, with the semaphore's ACL; its missing
    /// parents containers), as Curator's SharedCount makes it when it starts. A protected
    /// semaphore refuses a count whose ACL grants others more: they could change the max.
    async fn read_count(
        &self,
        requests: &Requests<'_>,
        seed: u32,
        watch: bool,
    ) -> std::result::Result<(i32, Option<zk::OneshotWatcher>), Failed> {
        let (zk, path) = (requests.zk(), self.path.as_str());
        let read = || {
            if watch {
                zk.get_and_watch_data(path)
                    .map(|read| read.map(|(data, stat, watcher)| (data, stat, Some(watcher))))
                    .boxed()
            } else {
                zk.get_data(path).map(|read| read.map(|(data, stat)| (data, stat, None))).boxed()
            }
        };
        let (persistent, _) = self.node_options(zk::CreateMode::Persistent);
        loop {
            match requests.retry(read).await? {
                Ok((data, stat, watcher)) => {
                    self.check_count_acl(requests, &stat).await?;
                    return Ok((parse_count(path, &data)?, watcher));
                }
                Err(zk::Error::NoNode) => {}
                Err(err) => return Err(Failed::Error(Error::from_zk(err, path, "reading the shared count"))),
            }
            let seed = i32::try_from(seed).unwrap_or(i32::MAX).to_be_bytes();
            match requests.send(zk.create(path, &seed, &persistent)).await? {
                Reply::Answered(Ok((stat, _))) if self.protected() => {
                    // Made by us with the ACL: nothing to check.
                    *self.acl_checked.lock() = Some(path_version(&stat));
                }
                Reply::Answered(Ok(_) | Err(zk::Error::NodeExists)) | Reply::Reconnected => {}
                Reply::Answered(Err(zk::Error::NoNode)) => match self.parent.get() {
                    // A protected count's parent: made with the ACL (see `Semaphore::new`).
                    Some(parent) => Box::pin(parent.make_parents(requests)).await?,
                    None => {
                        let parent = &path[..path.rfind('/').unwrap_or_default()];
                        if let Reply::Answered(Err(err)) = requests.send(zk.mkdir(parent, &CONTAINER)).await? {
                            return Err(Failed::Error(Error::from_zk(
                                err,
                                path,
                                "creating the shared count's parents",
                            )));
                        }
                    }
                },
                Reply::Answered(Err(err)) => {
                    return Err(Failed::Error(Error::from_zk(err, path, "creating the shared count")))
                }
            }
        }
    }

    /// For a protected semaphore, the shared count's ACL as read with `stat` (checked again only
    /// when the node was made again or its ACL changed), as a protected lock checks its path's.
    async fn check_count_acl(&self, requests: &Requests<'_>, stat: &zk::Stat) -> std::result::Result<(), Failed> {
        let version = Some(path_version(stat));
        if !self.path_acl_to_check(version) {
            return Ok(());
        }
        let checked = async {
            // The parent first: whoever may delete the count there could have made this one.
            if let Some(parent) = self.parent.get() {
                match requests.retry(|| requests.zk().check_stat(&parent.path)).await? {
                    Ok(Some(stat)) => Box::pin(parent.check_path_acl(requests, Some(path_version(&stat)))).await?,
                    // Gone since the count was read: the count with it; the next read says so.
                    Ok(None) => {}
                    Err(err) => {
                        return Err(Failed::Error(Error::from_zk(
                            err,
                            &parent.path,
                            "reading the shared count's parent",
                        )))
                    }
                }
            }
            Box::pin(self.check_path_acl(requests, version)).await
        };
        checked.await.map_err(|failed| match failed {
            Failed::Error(err) => {
                let message = format!("the shared count (the semaphore's max): {}", err.message());
                Failed::Error(err.with_message(message))
            }
            stopped => stopped,
        })
    }

    /// Under the semaphore's internal mutex (`mutex`): makes `n` lease nodes on `session` (the
    /// mutex hold's) and waits until they fit, within `wait`. All or nothing: `Ok(None)` (the
    /// deadline passed, or only trying they did not fit) and every error leave no lease node
    /// behind. Each lease node is made in one multi with a check of the mutex node: once someone
    /// has deleted it, [`ErrorKind::LockLost`] (`node_deleted`), the mutex hold marked lost.
    pub(crate) async fn take_leases(
        &self,
        session: &Arc<Session>,
        mutex: &Hold,
        n: u32,
        max: &SemaphoreMax,
        owner: &Owner,
        wait: &Wait,
    ) -> Result<Option<Vec<Hold>>> {
        let requests = Requests::new(&self.client, session, wait.deadline).with_abort(wait.abort.clone());
        let mut attempts: Vec<Attempt> = (0..n)
            .map(|_| Attempt {
                client: self.client.clone(),
                session: session.clone(),
                // Each lease node its own uuid, as Curator's protected creates have.
                node: NodeName::new(
                    &self.path,
                    attempt::name_prefix(self.client.attempt_ids.next(), policy::LEASE_MARKER),
                ),
                armed: false,
            })
            .collect();
        let result = Box::pin(self.leases_and_wait(&requests, mutex, max, owner, wait.only_try, &mut attempts)).await;
        let result = match result {
            Err(Failed::Stopped(Stop::Deadline)) => wait.out_of_time(&self.path).map_err(Failed::Error),
            result => result,
        };
        match &result {
            Ok(Some(_)) | Err(Failed::Stopped(Stop::Closed | Stop::SessionOver)) => {
                // Held; or the session is gone, and its ephemeral nodes with it.
                attempts.iter_mut().for_each(|attempt| attempt.armed = false);
            }
            _ => {
                let by = wait.give_back_by();
                futures::future::join_all(attempts.iter_mut().map(|attempt| attempt.remove(by))).await;
            }
        }
        result.map_err(|failed| match failed {
            Failed::Error(err) => err,
            Failed::Stopped(stop) => self.stopped(session, stop, || unreachable(&self.path, "trying the semaphore")),
        })
    }

    async fn leases_and_wait(
        &self,
        requests: &Requests<'_>,
        mutex: &Hold,
        max: &SemaphoreMax,
        owner: &Owner,
        only_try: bool,
        attempts: &mut [Attempt],
    ) -> std::result::Result<Option<Vec<Hold>>, Failed> {
        let zk = requests.zk();
        let session = requests.session;
        let mut made: Vec<Option<Made>> = vec![None; attempts.len()];
        loop {
            // The lease nodes not made yet, and right behind them the listing (and the shared
            // count): ZooKeeper answers a session's requests in order, so one round trip, and the
            // listing shows the nodes.
            let missing: Vec<usize> = (0..attempts.len()).filter(|&i| made[i].is_none()).collect();
            let data = if missing.is_empty() { Vec::new() } else { self.node_data(owner) };
            let (options, _) = self.node_options(zk::CreateMode::EphemeralSequential);
            // Copied: the creates are in flight while the attempts learn their sequences.
            let prefixes: Vec<String> = missing.iter().map(|&i| attempts[i].node.prefixed().to_owned()).collect();
            // Each with a check of the mutex node: a lease made once it is gone would count
            // against the acquirer that has the mutex now, and wait beside its leases.
            let creates: Vec<_> = prefixes
                .iter()
                .map(|prefix| create_while_held(zk, mutex.node_path(), prefix, &data, &options))
                .collect();
            for &i in &missing {
                attempts[i].armed = true;
            }
            let listing = zk.get_and_watch_children(&self.path);
            let count = match max {
                SemaphoreMax::Count { node, .. } => Some(zk.get_and_watch_data(&node.path)),
                SemaphoreMax::Fixed(_) => None,
            };
            let mut unknown = Vec::new();
            let mut no_parent = false;
            let mut mutex_gone = false;
            for (&i, create) in missing.iter().zip(creates) {
                match requests.bounded(create).await? {
                    Ok(Ok((path, stat))) => {
                        let name = path.rsplit('/').next().unwrap_or_default();
                        attempts[i].node.found(name);
                        let digits = name.strip_prefix(attempts[i].node.prefix()).unwrap_or_default();
                        let sequence = digits.parse::<i32>().map_or(-1, i64::from);
                        // A server before 3.7.2 or 3.8.2 answers a multi's create without its stat
                        // (ZOOKEEPER-4026): the czxid is read before the lease is held.
                        let czxid = if stat.is_invalid() { CZXID_UNKNOWN } else { stat.czxid };
                        made[i] = Some(Made { sequence, czxid });
                    }
                    Ok(Err(Refused::HoldGone)) => {
                        attempts[i].armed = false; // nothing was made
                        mutex_gone = true;
                    }
                    Ok(Err(Refused::Error(zk::Error::NoNode))) => no_parent = true,
                    Err(err) if connection_lost(&err) => unknown.push(i),
                    Ok(Err(Refused::Error(err))) | Err(err) => {
                        return Err(Failed::Error(self.zk_error(err, "creating a lease node")))
                    }
                }
            }
            // The listing went out behind the creates: if one was cut off, so was it, and this is
            // where the reconnection is waited for.
            let listed = requests.send(listing).await?;
            for i in unknown {
                made[i] = match find_mine(requests, &self.path, attempts[i].node.prefix()).await? {
                    Ok(Some(found)) => {
                        attempts[i].node.found(&found.name);
                        Some(found.made)
                    }
                    Ok(None) => {
                        attempts[i].node.forget();
                        None
                    }
                    Err(err) => return Err(Failed::Error(self.zk_error(err, "finding our lease node"))),
                };
            }
            if mutex_gone {
                // Someone deleted it: another acquirer may have the mutex now. The leases made
                // are removed by the caller.
                mutex.inner.node_gone();
                return Err(Failed::Error(
                    Error::lost(
                        Some(crate::error::LostReason::NodeDeleted),
                        "the semaphore's internal mutex node was deleted by someone else before the leases were made",
                    )
                    .with_path(&self.path),
                ));
            }
            if no_parent {
                self.make_parents(requests).await?;
                continue;
            }
            let (children, stat, children_changed) = match listed {
                Reply::Answered(Ok(listed)) => listed,
                Reply::Answered(Err(zk::Error::NoNode)) | Reply::Reconnected => continue,
                Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "listing the leases"))),
            };
            // Our leases are in this listing, so the lease parent cannot go (or be made anew) while
            // we wait or hold: its ACL, checked here, stays the one they are under.
            if self.path_acl_to_check(Some(path_version(&stat))) {
                Box::pin(self.check_path_acl(requests, Some(path_version(&stat)))).await?;
            }
            if made.iter().any(Option::is_none) {
                continue;
            }
            requests.progressed();
            let (max_now, max_changed) = match (max, count) {
                (SemaphoreMax::Fixed(max), _) => (i64::from(*max), None),
                (SemaphoreMax::Count { node, .. }, Some(count)) => match requests.send(count).await? {
                    Reply::Answered(Ok((data, stat, watcher))) => {
                        node.check_count_acl(requests, &stat).await?;
                        (i64::from(parse_count(&node.path, &data)?), Some(watcher))
                    }
                    Reply::Answered(Err(zk::Error::NoNode)) => {
                        return Err(Failed::Error(
                            Error::invalid("the shared count node is gone").with_path(&node.path),
                        ))
                    }
                    Reply::Reconnected => continue,
                    Reply::Answered(Err(err)) => {
                        return Err(Failed::Error(Error::from_zk(err, &node.path, "reading the shared count")))
                    }
                },
                (SemaphoreMax::Count { .. }, None) => unreachable!("a shared count is read with each listing"),
            };
            if let Some(name) = children.iter().find(|name| is_lock_node(name)) {
                let name = printable(name);
                let message = format!(
                    "a semaphore cannot use this path: its lease parent holds lock nodes ({name}), which are not \
                     leases; use another path"
                );
                return Err(Failed::Error(Error::recipe_conflict(message).with_path(&self.path)));
            }
            let gone =
                |attempt: &Attempt| attempt.node.name().is_some_and(|name| !children.iter().any(|child| child == name));
            if let Some(i) = attempts.iter().position(gone) {
                // Someone deleted a lease node of ours: make it again (we still hold the mutex).
                made[i] = None;
                attempts[i].node.forget();
                continue;
            }
            if policy::leases_fit(children.len(), u32::try_from(max_now.max(0)).unwrap_or(u32::MAX)) {
                if made.iter().flatten().any(|made| made.czxid == CZXID_UNKNOWN) {
                    let names: Vec<String> =
                        attempts.iter().map(|attempt| attempt.node.name().expect("all made").to_owned()).collect();
                    let stats = match stat_children(requests, &self.path, &names).await? {
                        Ok(stats) => stats,
                        Err(err) => return Err(Failed::Error(self.zk_error(err, "reading the lease nodes"))),
                    };
                    for ((made, attempt), stat) in made.iter_mut().zip(attempts.iter_mut()).zip(stats) {
                        match stat {
                            Some(stat) => made.as_mut().expect("all made").czxid = stat.czxid,
                            // Someone deleted it: make it again.
                            None => {
                                *made = None;
                                attempt.node.forget();
                            }
                        }
                    }
                    if made.iter().any(Option::is_none) {
                        continue;
                    }
                }
                let holds: Vec<Hold> = made
                    .iter()
                    .zip(attempts.iter())
                    .map(|(node, attempt)| {
                        let node = node.as_ref().expect("all made");
                        let path = attempt.node.node().expect("set with the node").to_owned();
                        Hold::new(session, &self.client.closed, path, node.sequence, node.czxid)
                    })
                    .collect();
                if let Some(stop) = holds.first().and_then(|hold| self.born_lost(hold)) {
                    return Err(stop.into());
                }
                for hold in &holds {
                    self.registry.node_watcher.add(hold, None);
                }
                return Ok(Some(holds));
            }
            if only_try {
                return Ok(None);
            }
            drop(children);
            let changed = async {
                match max_changed {
                    Some(max_changed) => {
                        tokio::select! {
                            event = children_changed.changed() => event,
                            event = max_changed.changed() => event,
                        }
                    }
                    None => children_changed.changed().await,
                }
            };
            let event = Box::pin(requests.bounded(changed)).await?;
            match (event.event_type, event.session_state) {
                (zk::EventType::Session, zk::SessionState::Expired) => return Err(Stop::SessionOver.into()),
                (zk::EventType::Session, zk::SessionState::Closed) => return Err(Stop::Closed.into()),
                (zk::EventType::Session, zk::SessionState::AuthFailed) => {
                    return Err(self.error(ErrorKind::AuthFailed, "authentication failed while waiting").into())
                }
                // The leases or the max changed, or the connection did: look again.
                _ => {}
            }
        }
    }
}

impl Recipe {
    /// The session a semaphore's internal mutex is held on, where its leases are made: a mutex
    /// whose session is over is no mutex (the acquisition starts again on a new session).
    pub(crate) fn session_of(&self, hold: &Hold) -> Result<Arc<Session>> {
        match hold.inner.session.upgrade() {
            Some(session) if !session.is_over() => Ok(session),
            gone => Err(match gone {
                Some(session) => self.session_over_error(&session),
                None => self
                    .error(ErrorKind::SessionExpired, "the session expired; a new attempt starts a new session")
                    .with_lost_reason(Some(crate::error::LostReason::SessionExpired)),
            }),
        }
    }

    /// The shared count's value now, this recipe being its node's (made with `seed` if missing).
    pub(crate) async fn shared_count(&self, seed: u32, deadline: Instant) -> Result<i32> {
        let session = self.session_by(deadline, "reading the shared count").await?;
        let requests =
            Requests::new(&self.client, &session, Some(deadline)).answering_within(super::listing_bound(&session));
        match self.read_count(&requests, seed, false).await {
            Ok((count, _)) => Ok(count),
            Err(Failed::Error(err)) => Err(err),
            Err(Failed::Stopped(stop)) => {
                Err(self.stopped(&session, stop, || unreachable(&self.path, "reading the shared count")))
            }
        }
    }

    /// Sets the shared count, this recipe being its node's, to `count` (a 4-byte big-endian
    /// setData, as Curator's `SharedCount.setCount`; the node made with it if missing).
    pub(crate) async fn set_shared_count(&self, count: i32) -> Result<()> {
        let deadline = Instant::now() + super::TRY_BOUND;
        let session = self.session_by(deadline, "setting the shared count").await?;
        let requests =
            Requests::new(&self.client, &session, Some(deadline)).answering_within(super::listing_bound(&session));
        let bytes = count.to_be_bytes();
        let set = async {
            let seed = u32::try_from(count).unwrap_or(1);
            self.read_count(&requests, seed, false).await?;
            match requests.retry(|| requests.zk().set_data(&self.path, &bytes, None)).await? {
                Ok(_) => Ok(()),
                Err(err) => Err(Failed::Error(self.zk_error(err, "setting the shared count"))),
            }
        };
        match set.await {
            Ok(()) => Ok(()),
            Err(Failed::Error(err)) => Err(err),
            Err(Failed::Stopped(stop)) => {
                Err(self.stopped(&session, stop, || unreachable(&self.path, "setting the shared count")))
            }
        }
    }
}
