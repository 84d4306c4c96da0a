//! The counting semaphore: Curator's InterProcessSemaphoreV2, node for node. The recipe is the
//! engine's: a [`Lock`] for the internal mutex and the lease step in `engine::leases`; this is
//! its public face.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::acl::Acl;
use crate::engine::{
    again_on_new_session, LockOptions, MaxLeases, Participant, Recipe, SemaphoreMax, UserHandles, Wait,
};
use crate::error::LostReason;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::{HeldTogether, Hold, HoldState};
use crate::lock::Lock;
use crate::owners::Owner;
use crate::policy;
use crate::validate;

/// Options for [`crate::Client::semaphore_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreOptions {
    /// How many leases at once.
    pub max_leases: MaxLeases,
    /// Recorded in each node's identity, as [`LockOptions::identifier`].
    pub identifier: Option<String>,
    /// The owner label in each node's identity (as [`Owner::with_label`]'s); by default an
    /// acquisition's fresh owner id.
    pub label: Option<String>,
    /// Who may take leases, delete them, change the shared count and read them, as a lock's
    /// [`LockOptions::acl`]: [`Acl::Open`] by default, as Curator makes the nodes, so anyone may
    /// delete a lease or change the count. With another, every node the semaphore makes (its
    /// path, `<path>/locks`, `<path>/leases`, the leases, the mutex's nodes and the shared count)
    /// gets it, its path is made persistent, and an existing path, mutex or lease parent, or
    /// count whose ACL grants others more is refused with [`ErrorKind::PermissionDenied`]. The
    /// parents above the path and the count stay open containers: someone may delete the count
    /// and make it again, open, which is then refused, never followed.
    pub acl: Acl,
}

impl SemaphoreOptions {
    /// Options with this max, no identifier and an open ACL.
    pub fn new(max_leases: MaxLeases) -> SemaphoreOptions {
        SemaphoreOptions { max_leases, identifier: None, label: None, acl: Acl::Open }
    }

    /// With an ACL on every node it makes (see [`SemaphoreOptions::acl`]).
    pub fn acl(mut self, acl: Acl) -> SemaphoreOptions {
        self.acl = acl;
        self
    }

    /// With an identifier recorded in each node's identity.
    pub fn identifier(mut self, identifier: impl Into<String>) -> SemaphoreOptions {
        self.identifier = Some(identifier.into());
        self
    }

    /// With an owner label recorded in each node's identity (`zklock status` shows it).
    pub fn label(mut self, label: impl Into<String>) -> SemaphoreOptions {
        self.label = Some(label.into());
        self
    }
}

/// A counting semaphore on one ZooKeeper path: at most `max` leases held at once, across every
/// process and language that uses the path, Curator's `InterProcessSemaphoreV2` among them.
/// Cheap to clone.
///
/// # The recipe (Curator's, node for node)
/// * `<path>/locks` is an internal mutex (Curator's `InterProcessMutex` nodes,
///   `_c_<uuid>-lock-<sequence>`); acquirers take it one at a time, in order.
/// * `<path>/leases` holds the leases: one protected EPHEMERAL_SEQUENTIAL node each,
///   `_c_<uuid>-lease-<sequence>`.
/// * An acquirer takes the mutex, makes its lease nodes, and lists the leases: it holds them once
///   there are no more than `max` (every child counts); otherwise it waits for the leases (or,
///   with a shared count, the max) to change, still holding the mutex, so the acquirers behind
///   it keep their order. Then it releases the mutex. So acquirers are served first come, first
///   served, and zklock and Curator count the same leases.
///
/// # n leases: all or nothing, under one deadline
/// [`Semaphore::acquire`] with `n > 1` makes its `n` lease nodes together under the mutex and
/// holds them all, or, at its deadline, on a cancel or an error, removes every one of them and
/// the mutex node. Curator's `acquire(qty, ...)` takes the mutex once per lease and keeps the
/// leases it has while it queues for the next: two callers holding part of what they want can
/// each wait for the other forever (max 2, each wanting 2, each holding 1: the one at the mutex
/// waits for a lease that the other, queued behind it at the mutex, will never return). Here an
/// acquirer holds nothing while it queues: the only leases it waits for are complete sets held
/// by others, which they return. (Curator callers that hold part of a set can still make a
/// zklock acquirer wait on them: mix the two only with one lease per acquisition.)
///
/// # Not reentrant
/// As in Curator, a lease is a thing held, not an owner's count: acquiring again takes another
/// lease, and any thread or task may release a [`Lease`]. A semaphore with max 1 is Curator's
/// `InterProcessSemaphoreMutex`: a non-reentrant mutex, releasable from anywhere, on the same
/// nodes (so the two interoperate).
#[derive(Clone)]
pub struct Semaphore {
    inner: Arc<Inner>,
    /// The owner label of its acquisitions' nodes (see a binding's `labelled`).
    label: Option<Arc<str>>,
}

struct Inner {
    path: String,
    max: MaxLeases,
    /// The max as the lease step reads it: the shared count's node with its ACL.
    max_node: SemaphoreMax,
    mutex: Lock,
    /// The recipe of the lease parent: its nodes' data, removal, release and listing.
    leases: Arc<Recipe>,
    /// Whether the path was seen to hold no lock nodes.
    checked: AtomicBool,
}

impl Semaphore {
    pub(crate) fn new(handles: &Arc<UserHandles>, path: String, options: SemaphoreOptions) -> Result<Semaphore> {
        let registry = &handles.registry;
        let client = &registry.client;
        let invalid = |message: String| Err(Error::invalid(message).with_path(&path));
        match &options.max_leases {
            MaxLeases::Fixed(0) => return invalid("a semaphore's max leases must be at least 1, not 0".to_owned()),
            MaxLeases::Fixed(_) => {}
            MaxLeases::SharedCount { path: count, seed } => {
                validate::lock_path(count, &client.chroot)
                    .map_err(|err| Error::invalid(format!("shared count path: {}", err.message())).with_path(count))?;
                if *seed < 1 || i32::try_from(*seed).is_err() {
                    return invalid(format!("a shared count's seed must be from 1 to {}, not {seed}", i32::MAX));
                }
            }
        }
        validate::label(options.label.as_deref()).map_err(|err| err.with_path(&path))?;
        validate::new_parents(Semaphore::queues(&path, &options.max_leases).iter().map(String::as_str))
            .map_err(|err| err.with_path(&path))?;
        // Checked here to name the semaphore's path: each part's recipe checks it again.
        options.acl.check(&client.identities).map_err(|err| err.with_path(&path))?;
        let lock_options = LockOptions { identifier: options.identifier, acl: options.acl, ..LockOptions::default() };
        let mutex = Lock::new(handles, format!("{path}/{}", policy::SEMAPHORE_MUTEX), lock_options.clone())?;
        let leases_path = format!("{path}/{}", policy::SEMAPHORE_LEASES);
        let leases = Arc::new(Recipe::new(registry.clone(), leases_path, false, lock_options.clone())?);
        if !lock_options.acl.is_open() {
            // Its parts make the path with their ACL when it is missing, and the lease step checks
            // an existing one's.
            let root = Arc::new(Recipe::new(registry.clone(), path.clone(), false, lock_options.clone())?);
            mutex.recipe.protect_parent(&root);
            leases.protect_parent(&root);
        }
        let max_node = match &options.max_leases {
            MaxLeases::Fixed(max) => SemaphoreMax::Fixed(*max),
            MaxLeases::SharedCount { path: count, seed } => {
                let protected = !lock_options.acl.is_open();
                let node = Arc::new(Recipe::new(registry.clone(), count.clone(), false, lock_options.clone())?);
                if protected {
                    // Whoever may delete and create children of the count's parent could make the
                    // count again with another max (its ACL a copy of ours): the parent is made
                    // with the ACL, and an existing one that grants others more is refused.
                    let parent = &count[..count.rfind('/').unwrap_or_default()];
                    if parent.is_empty() {
                        return Err(Error::invalid(format!(
                            "a protected semaphore's shared count needs a parent of its own, not /: anyone may \
                             delete and make nodes there, the count among them ({count})"
                        ))
                        .with_path(&path));
                    }
                    node.protect_parent(&Arc::new(Recipe::new(
                        registry.clone(),
                        parent.to_owned(),
                        false,
                        lock_options,
                    )?));
                }
                SemaphoreMax::Count { node, seed: *seed }
            }
        };
        Ok(Semaphore {
            inner: Arc::new(Inner {
                path,
                max: options.max_leases,
                max_node,
                mutex,
                leases,
                checked: AtomicBool::new(false),
            }),
            label: options.label.map(Arc::from),
        })
    }

    /// The paths under which an acquisition makes nodes, whose missing parents it creates: the
    /// internal mutex, the lease parent and the shared count (if any).
    fn queues(path: &str, max: &MaxLeases) -> Vec<String> {
        let mut queues =
            vec![format!("{path}/{}", policy::SEMAPHORE_MUTEX), format!("{path}/{}", policy::SEMAPHORE_LEASES)];
        if let MaxLeases::SharedCount { path: count, .. } = max {
            queues.push(count.clone());
        }
        queues
    }

    /// The internal mutex.
    pub(crate) fn mutex(&self) -> &Lock {
        &self.inner.mutex
    }

    /// [`Semaphore::queues`] of this semaphore.
    pub(crate) fn queue_paths(&self) -> Vec<String> {
        Semaphore::queues(&self.inner.path, &self.inner.max)
    }

    /// The semaphore's path, relative to the client's chroot.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Where its max comes from.
    pub fn max_leases(&self) -> &MaxLeases {
        &self.inner.max
    }

    /// The max now: the fixed number, or the shared count's value (read from the server; its
    /// node made with the seed if missing).
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if the shared count's node is not a 4-byte count.
    /// * [`ErrorKind::PermissionDenied`] if its ACL denies this client, or (with
    ///   [`SemaphoreOptions::acl`]) grants others more than asked.
    pub async fn current_max_leases(&self) -> Result<i64> {
        self.max_leases_by(tokio::time::Instant::now() + crate::engine::TRY_BOUND).await
    }

    async fn max_leases_by(&self, deadline: tokio::time::Instant) -> Result<i64> {
        match &self.inner.max_node {
            SemaphoreMax::Fixed(max) => Ok(i64::from(*max)),
            SemaphoreMax::Count { node, seed } => Ok(i64::from(node.shared_count(*seed, deadline).await?)),
        }
    }

    /// Sets the shared count that is this semaphore's max to `max` (a 4-byte big-endian
    /// setData, as Curator's `SharedCount.setCount`; the node made if missing): waiting
    /// acquirers follow, here and in every process using it. For bindings and tools that have no
    /// ZooKeeper client of their own.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`], before any traffic, if the max is fixed, or `max` is 0
    ///   or above `i32::MAX`.
    pub async fn set_shared_count(&self, max: u32) -> Result<()> {
        let SemaphoreMax::Count { node, .. } = &self.inner.max_node else {
            return Err(self.error(ErrorKind::InvalidArgument, "the semaphore's max is fixed, not a shared count"));
        };
        let count = i32::try_from(max).ok().filter(|max| *max >= 1).ok_or_else(|| {
            Error::invalid(format!("a shared count's max must be from 1 to {}, not {max}", i32::MAX))
                .with_path(&node.path)
        })?;
        node.set_shared_count(count).await
    }

    /// Acquires `n` leases, all or nothing, waiting as long as it takes.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`], before any traffic, if `n` is 0, more than a fixed max or
    ///   more than [`crate::MAX_LEASES_PER_ACQUISITION`] (1,024); before any node is made, if `n` is more than the shared count, or its node is not a
    ///   4-byte count, or the path holds lock nodes (or a lock's queue is at `<path>/leases`):
    ///   then [`Error::is_recipe_conflict`] says so.
    /// * [`ErrorKind::Closed`] if the client is or gets closed.
    /// * [`ErrorKind::PermissionDenied`] if the ACL of the semaphore's nodes denies this client,
    ///   or (with [`SemaphoreOptions::acl`]) one of them grants others more than asked.
    ///
    /// A waiter whose session ends queues again on a new session, as a lock's waiter does.
    ///
    /// # Cancellation safety
    /// Dropping the future removes its lease nodes and releases the mutex in the background.
    pub async fn acquire(&self, n: u32) -> Result<Leases> {
        let leases = self.acquire_within(n, Wait::from_timeout(None)).await?;
        Ok(leases.expect("waiting forever never gives up"))
    }

    /// As [`Semaphore::acquire`], giving up with [`ErrorKind::Timeout`] after `timeout`: one
    /// deadline for the mutex and all `n` leases, retries included, kept within
    /// [`crate::REMOVAL_GRACE`]. Every node it made is removed, before this returns if the server
    /// confirms in time, else in the background. A zero timeout only tries, as
    /// [`Semaphore::try_acquire`].
    pub async fn acquire_timeout(&self, n: u32, timeout: Duration) -> Result<Leases> {
        match self.acquire_within(n, Wait::from_timeout(Some(timeout))).await? {
            Some(leases) => Ok(leases),
            None => Err(self.timeout_error(n, timeout)),
        }
    }

    /// The [`ErrorKind::Timeout`] for `n` leases not had within `timeout` (zero: only tried):
    /// what [`Semaphore::acquire_timeout`] reports, and every binding with it.
    pub fn timeout_error(&self, n: u32, timeout: Duration) -> Error {
        if timeout.is_zero() {
            self.error(ErrorKind::Timeout, format!("no room for {n} lease(s) (tried once: zero timeout)"))
        } else {
            self.error(ErrorKind::Timeout, format!("{n} lease(s) not acquired within {timeout:?}"))
        }
    }

    /// Acquires `n` leases only if they fit now and no other acquirer holds the mutex: one try;
    /// `Ok(None)` otherwise, with every node it made removed (in the background if the server
    /// does not confirm in time). Answers within [`crate::TRY_BOUND`]: past it,
    /// [`ErrorKind::ConnectionLoss`] (ZooKeeper could not be reached), never `Ok(None)`.
    pub async fn try_acquire(&self, n: u32) -> Result<Option<Leases>> {
        self.acquire_within(n, Wait::from_timeout(Some(Duration::ZERO))).await
    }

    /// The binding-level acquire: `timeout` of `None` waits forever, `Some(ZERO)` only tries;
    /// once `abort` is cancelled the acquisition ends as at its deadline, its nodes removed.
    /// `Ok(None)`: not acquired in time (or aborted).
    pub async fn acquire_for(
        &self,
        n: u32,
        timeout: Option<Duration>,
        abort: Option<tokio_util::sync::CancellationToken>,
    ) -> Result<Option<Leases>> {
        self.acquire_within(n, Wait { abort, ..Wait::from_timeout(timeout) }).await
    }

    /// Refuses, before any traffic, `n` of 0 or more than a fixed max.
    pub(crate) fn check_lease_count(&self, n: u32) -> Result<()> {
        if n == 0 {
            return Err(self.error(ErrorKind::InvalidArgument, "at least 1 lease must be asked for, not 0"));
        }
        validate::lease_count(n).map_err(|err| err.with_path(&self.inner.path))?;
        if let MaxLeases::Fixed(max) = self.inner.max {
            if n > max {
                return Err(self.error(
                    ErrorKind::InvalidArgument,
                    format!("{n} leases asked for, more than the semaphore's max of {max}: they would never fit"),
                ));
            }
        }
        Ok(())
    }

    pub(crate) async fn acquire_within(&self, n: u32, wait: Wait) -> Result<Option<Leases>> {
        self.check_lease_count(n)?;
        if self.inner.mutex.recipe.client.is_closed() {
            return Err(self.error(ErrorKind::Closed, "the client was closed"));
        }
        let leases = again_on_new_session(&wait, &self.inner.path, |wait| self.attempt(n, wait)).await?;
        Ok(leases.map(|leases| Leases { leases }))
    }

    /// One attempt: the mutex, then the leases on its session, then the mutex released; again
    /// from the mutex if someone deleted its node before the leases were made.
    async fn attempt(&self, n: u32, wait: &Wait) -> Result<Option<Vec<Lease>>> {
        let inner = &self.inner;
        let prepared = inner.leases.prepare_leases(&inner.path, &inner.max_node, n, wait, &inner.checked);
        if Box::pin(prepared).await?.is_none() {
            return Ok(None);
        }
        loop {
            match Box::pin(self.under_the_mutex(n, wait)).await {
                // No lease was made on the strength of a mutex node that was gone: queue again.
                Err(err) if err.kind() == ErrorKind::LockLost && !wait.only_try && !wait.is_over() => continue,
                Err(err) if err.kind() == ErrorKind::LockLost => return Ok(None),
                leases => return leases,
            }
        }
    }

    /// The mutex, then the leases on its session, then the mutex released.
    async fn under_the_mutex(&self, n: u32, wait: &Wait) -> Result<Option<Vec<Lease>>> {
        let inner = &self.inner;
        // A fresh owner each time: the mutex is not reentrant here; its nodes' identity carries
        // the label if one was given.
        let owner = match &self.label {
            Some(label) => Owner::with_label(Owner::unique().id(), label.clone()),
            None => Owner::unique(),
        };
        let Some(mutex) = Box::pin(inner.mutex.guard_within(&owner, wait.clone())).await? else { return Ok(None) };
        let holds = match inner.leases.session_of(mutex.hold()) {
            Ok(session) => {
                Box::pin(inner.leases.take_leases(&session, mutex.hold(), n, &inner.max_node, &owner, wait)).await
            }
            Err(err) => Err(err),
        };
        // Armed leases at once: an acquisition cancelled while the mutex is released below
        // releases them as it goes (a bare hold dropped would leave its node to the session's
        // end, taking room from everyone).
        let recipe = &inner.leases;
        let leases = holds.map(|holds| {
            holds.map(|holds| {
                holds
                    .into_iter()
                    .map(|hold| Lease {
                        recipe: recipe.clone(),
                        hold,
                        armed: true,
                        _handles: inner.mutex.handles.clone(),
                    })
                    .collect()
            })
        });
        // Held, or the lease nodes are gone already: now the mutex, before this returns (as
        // Curator's does), so that nothing of this acquisition is left in the queue. Its delete
        // goes on in the background past the call's deadline (and its grace): the future dropped.
        let _ = tokio::time::timeout_at(wait.give_back_by(), mutex.release()).await;
        leases
    }

    /// Who holds leases and who waits: the lease nodes (each with the identity in its node:
    /// zklock's JSON, or for Curator the raw data, the client's address by default) and the
    /// acquirers queued at the internal mutex. Answered within [`crate::TRY_BOUND`] (all three
    /// listings), or [`ErrorKind::ConnectionLoss`]: ZooKeeper could not be reached.
    pub async fn participants(&self) -> Result<SemaphoreParticipants> {
        // One bound for the three listings (see [`crate::TRY_BOUND`]).
        let deadline = tokio::time::Instant::now() + crate::engine::TRY_BOUND;
        let max = self.max_leases_by(deadline).await?;
        let mut leases = self.inner.leases.participants(false, deadline).await?;
        let queue = self.inner.mutex.contenders_by(deadline).await?;
        for lease in &mut leases {
            lease.sequence = lease.node.rsplit(policy::LEASE_MARKER).next().and_then(|digits| digits.parse().ok());
        }
        // While there are more leases than max, the acquirer at the head of the mutex queue waits
        // with its nodes made: those of its session made since it queued there.
        let waiting = |lease: &Participant| {
            leases.len() as i64 > max
                && queue
                    .first()
                    .is_some_and(|head| lease.session_id == head.session_id && lease.fencing_token > head.fencing_token)
        };
        let (waiting, mut leases): (Vec<Participant>, Vec<Participant>) = leases.iter().cloned().partition(waiting);
        let waiting_leases = waiting.len();
        leases.extend(waiting);
        Ok(SemaphoreParticipants { leases, waiting_leases, queue, max_leases: max })
    }

    fn error(&self, kind: ErrorKind, message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
        Error::new(kind, message).with_path(&self.inner.path)
    }
}

/// What the bindings need of a [`Semaphore`] beyond its public API. Hidden from the docs; in
/// scope with `use zklock::binding::*`.
#[doc(hidden)]
pub trait SemaphoreBinding: Sized {
    /// This semaphore, its acquisitions' nodes labelled `label` (as [`SemaphoreOptions::label`]):
    /// the same semaphore (its path, max and state), for a binding that labels each acquisition
    /// after its caller (a thread, a task), as a lock's nodes are labelled after their owner.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] for a label over [`crate::MAX_LABEL_BYTES`].
    fn labelled(&self, label: &str) -> Result<Semaphore>;
}

impl SemaphoreBinding for Semaphore {
    fn labelled(&self, label: &str) -> Result<Semaphore> {
        validate::label(Some(label)).map_err(|err| err.with_path(&self.inner.path))?;
        Ok(Semaphore { inner: self.inner.clone(), label: Some(Arc::from(label)) })
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore").field("path", &self.inner.path).field("max", &self.inner.max).finish()
    }
}

/// Who holds a [`Semaphore`]'s leases and who waits, from one listing of each of its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreParticipants {
    /// The lease nodes in creation order, those held first, then the last `waiting_leases`: made
    /// by the acquirer at the head of `queue`, which waits until they fit. (Their `mode` is
    /// `None`: a lease is no lock node.)
    pub leases: Vec<Participant>,
    /// How many of `leases`, at the end, are not held yet.
    pub waiting_leases: usize,
    /// The acquirers at the internal mutex, in order: the first is making its lease nodes or
    /// waiting for them to fit, the others wait for their turn.
    pub queue: Vec<Participant>,
    /// The max when listed.
    pub max_leases: i64,
}

impl SemaphoreParticipants {
    /// The lease nodes held.
    pub fn holders(&self) -> &[Participant] {
        &self.leases[..self.leases.len() - self.waiting_leases]
    }
}

/// Leases taken together by one [`Semaphore::acquire`]. Dropping them releases each in the
/// background; [`Leases::release`] releases them and waits for the server.
#[must_use = "dropping the leases releases them"]
#[derive(Debug)]
pub struct Leases {
    leases: Vec<Lease>,
}

impl Leases {
    /// Each lease, in the order its node was made.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Never: an acquisition takes at least one lease.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// `Lost` if any lease is, else `Suspended` if any is, else `Held` (see
    /// [`HoldState::combined`]).
    pub fn state(&self) -> HoldState {
        HoldState::combined(self.leases.iter().map(|lease| lease.hold.state()))
    }

    /// The first lease found lost, if any: its index and why.
    pub fn lost_lease(&self) -> Option<(usize, LostReason)> {
        self.leases.iter().enumerate().find_map(|(index, lease)| Some((index, lease.hold.lost_reason()?)))
    }

    /// Resolves when a lease is lost, with its index and why; pending for as long as all are held.
    pub async fn lost(&self) -> (usize, LostReason) {
        match crate::hold::first_loss(&self.holds()).await {
            Some(lost) => lost,
            // Only a release ends a hold without a loss, and these are released only with them.
            None => std::future::pending().await,
        }
    }

    /// Each lease's hold, in the order the nodes were made.
    pub fn holds(&self) -> Vec<Hold> {
        self.leases.iter().map(|lease| lease.hold.clone()).collect()
    }

    /// The leases, to release one by one.
    pub fn into_leases(self) -> Vec<Lease> {
        self.leases
    }

    /// Releases every lease, and returns once the server confirmed each delete; the first
    /// error, if any (see [`Lease::release`]), after trying them all.
    pub async fn release(self) -> Result<()> {
        let results = futures::future::join_all(self.leases.into_iter().map(Lease::release)).await;
        results.into_iter().collect()
    }
}

/// One lease of a [`Semaphore`]: its node, fencing token and [`crate::HoldState`] (held,
/// suspended, lost). Dropping it releases it in the background.
#[must_use = "dropping a lease releases it"]
pub struct Lease {
    recipe: Arc<Recipe>,
    hold: Hold,
    armed: bool,
    /// The user's reach into the client, which a lease keeps (see [`crate::Client`]'s
    /// "Dropping").
    _handles: Arc<UserHandles>,
}

impl Lease {
    /// The hold: lease node, sequence, fencing token, state and lost signal.
    pub fn hold(&self) -> &Hold {
        &self.hold
    }

    /// The lease node's creation zxid: it rises across the leases of a path.
    pub fn fencing_token(&self) -> i64 {
        self.hold.fencing_token()
    }

    /// The lease node's name (`_c_<uuid>-lease-<sequence>`), as Curator's `Lease.getNodeName`.
    pub fn node_name(&self) -> &str {
        self.hold.node_path().rsplit('/').next().unwrap_or_default()
    }

    /// Deletes the lease node, returning once the server confirmed it.
    ///
    /// # Notable errors
    /// * [`ErrorKind::LockLost`] if the lease was lost (session expired, client closed, node
    ///   deleted by someone else): nothing is deleted.
    /// * [`ErrorKind::ConnectionLoss`] if the connection dropped first: the delete goes on in
    ///   the background until the node is gone or the session is over.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.recipe.delete_held(&self.hold).await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (recipe, hold) = (self.recipe.clone(), self.hold.clone());
        self.recipe.client.runtime.spawn(async move {
            let _ = recipe.delete_held(&hold).await;
        });
    }
}

impl HeldTogether for Leases {
    fn state(&self) -> HoldState {
        Leases::state(self)
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("hold", &self.hold).finish()
    }
}
