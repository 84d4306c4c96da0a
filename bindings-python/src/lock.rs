//! `zklock._native.Lock`: the fair, reentrant lock, with `threading.RLock`'s blocking API for the
//! calling thread, and the primitives the Python layer builds the asyncio API on.

use std::cell::OnceCell;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use zklock::binding::LockBinding;
use zklock::{Hold, LockOptions, Participant as CoreParticipant};

use crate::callbacks::{self, Callback};
use crate::client::Client;
use crate::error::{invalid_argument, to_py, IntoPyResult, Text};
use crate::pending::{self, AsyncOp};
use crate::runtime::{self, ForkSafe};

thread_local! {
    /// The calling thread as an owner. Thread-local storage dies with its thread, so a new thread
    /// never inherits the id of a finished one (unlike `threading.get_ident()`).
    static THREAD_OWNER: OnceCell<(zklock::Owner, String)> = const { OnceCell::new() };
}

/// A fresh owner for a thread or a task. The ids come from core's allocator, which every binding
/// shares, so no two owners of the process ever have the same id.
fn new_owner(label: String) -> zklock::Owner {
    zklock::Owner::unique_labelled(|_| label)
}

/// The calling thread's owner label (`thread:<name>`).
pub(crate) fn thread_label(py: Python<'_>) -> String {
    THREAD_OWNER.with(|cell| init_thread_owner(py, cell).1.clone())
}

/// `f` of the calling thread's owner, borrowed: the reentrant path skips a clone's atomic count.
pub(crate) fn with_thread_owner<R>(py: Python<'_>, f: impl FnOnce(&zklock::Owner) -> R) -> R {
    THREAD_OWNER.with(|cell| f(&init_thread_owner(py, cell).0))
}

fn init_thread_owner<'a>(py: Python<'_>, cell: &'a OnceCell<(zklock::Owner, String)>) -> &'a (zklock::Owner, String) {
    cell.get_or_init(|| {
        let name = py
            .import("threading")
            .and_then(|threading| threading.call_method0("current_thread"))
            .and_then(|thread| thread.getattr("name"))
            .and_then(|name| name.extract::<String>())
            .unwrap_or_else(|_| "?".to_owned());
        let label = format!("thread:{name}");
        (new_owner(label.clone()), label)
    })
}

/// Who holds a lock, for reentrancy: a thread or an asyncio task. Its label is recorded in the
/// lock node's identity.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct Owner {
    inner: zklock::Owner,
    label: String,
}

impl Owner {
    pub(crate) fn core(&self) -> &zklock::Owner {
        &self.inner
    }
}

#[pymethods]
impl Owner {
    /// A new owner, distinct from every other owner of this process.
    #[new]
    fn new(label: Text) -> Self {
        let label = label.0;
        Owner { inner: new_owner(label.clone()), label }
    }

    /// The owner of the calling thread.
    #[staticmethod]
    fn current_thread(py: Python<'_>) -> Self {
        let (inner, label) = THREAD_OWNER.with(|cell| init_thread_owner(py, cell).clone());
        Owner { inner, label }
    }

    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    #[getter]
    fn label(&self) -> &str {
        &self.label
    }

    fn __repr__(&self) -> String {
        format!("<zklock.Owner {} {:?}>", self.inner.id(), self.label)
    }
}

/// Any object, taken for its truth, as `threading.RLock.acquire` takes `blocking`
/// (`acquire(0)`, `acquire(blocking=None)`).
pub(crate) struct Truthy(pub(crate) bool);

impl<'a, 'py> FromPyObject<'a, 'py> for Truthy {
    type Error = PyErr;

    fn extract(object: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        object.is_truthy().map(Truthy)
    }
}

/// How a blocking acquire may wait, from `threading.RLock.acquire`'s arguments (with asyncio's
/// None for "forever" beside RLock's -1).
pub(crate) fn rlock_wait(
    py: Python<'_>,
    path: &str,
    blocking: bool,
    timeout: Option<f64>,
) -> PyResult<Option<Duration>> {
    if !blocking {
        if !waits_forever(timeout) {
            return Err(invalid_argument(py, path, "can't specify a timeout for a non-blocking call"));
        }
        return Ok(Some(Duration::ZERO));
    }
    wait_for(py, path, timeout)
}

/// Both spellings of "wait forever": asyncio's None, threading's -1.
pub(crate) fn waits_forever(timeout: Option<f64>) -> bool {
    timeout.is_none_or(|seconds| seconds == -1.0)
}

/// A timeout in seconds: None or -1 waits forever, 0 only tries.
pub(crate) fn wait_for(py: Python<'_>, path: &str, timeout: Option<f64>) -> PyResult<Option<Duration>> {
    if waits_forever(timeout) {
        return Ok(None);
    }
    let seconds = timeout.expect("None waits forever");
    if seconds.is_nan() || seconds < 0.0 {
        return Err(invalid_argument(
            py,
            path,
            format!("timeout must be a non-negative number of seconds, or None or -1 to wait forever; got {seconds}"),
        ));
    }
    // Past what a Duration holds is forever, for all practical purposes.
    Ok(Duration::try_from_secs_f64(seconds).ok())
}

/// Tells `done` how a background call ended: `done(True, value)` or `done(False, exception)`.
fn report(done: Callback, result: zklock::Result<bool>) {
    callbacks::call_soon(done, move |py| match result {
        Ok(value) => (true, value).into_pyobject(py),
        Err(err) => (false, to_py(py, &err).into_value(py)).into_pyobject(py),
    });
}

/// Releases the last level of `owner`'s hold: counted down before this returns (so no view says
/// held any more), the delete going on on the runtime; `done`, if given, hears how it ended.
fn release_begun(lock: zklock::Lock, owner: zklock::Owner, done: Option<Callback>) {
    runtime::spawn_begun(async move {
        let result = lock.release(&owner).await.map(|()| true);
        if let Some(done) = done {
            report(done, result);
        }
    });
}

/// How long `release()` waits for the server to confirm the delete before it raises
/// `ConnectionLossError` (the delete then goes on in the background).
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// What `_acquire_async` gives: the outcome when it was known at once (a re-entry), else the
/// operation running on the runtime.
#[derive(IntoPyObject)]
enum Started {
    Done(bool),
    Running(AsyncOp),
}

/// One side of a read/write lock, as `ReadWriteLock._side("read" | "write")` makes it for
/// `Lock(client, path, _side=...)`: the side's core lock, and the pair's client and path, which
/// the `Lock` must be made with. (The pair makes it, so that a lock need not know the pair.)
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct LockSide {
    lock: zklock::Lock,
    client: Py<Client>,
    path: String,
}

impl LockSide {
    pub(crate) fn new(lock: zklock::Lock, client: Py<Client>, path: String) -> LockSide {
        LockSide { lock, client, path }
    }
}

/// The `on_lost` registrations of a `Lock`, by key: the subscription and its callable.
type LostCallbacks = std::collections::HashMap<usize, (zklock::LostSubscription, Callback)>;

#[pyclass(subclass, frozen, module = "zklock._native")]
pub(crate) struct Lock {
    inner: ForkSafe<zklock::Lock>,
    /// Keeps the Python client alive (and so registered for closing at exit) while a lock is.
    client: Py<Client>,
    path: String,
    /// `"exclusive"`, `"read"` or `"write"` (core's `Mode::as_str`), kept here so that it can be
    /// read in a forked child too.
    mode: &'static str,
    /// The `on_lost` subscriptions and their callables, by the key `_on_lost` returned (removed
    /// when cancelled) and the next key.
    lost: Mutex<(LostCallbacks, usize)>,
}

impl Lock {
    pub(crate) fn core(&self, py: Python<'_>) -> PyResult<&zklock::Lock> {
        self.inner.get(py, &self.path)
    }

    /// The core lock for the views (is_held, state, fencing_token): None in a child forked
    /// after it was made, where nothing is held (the parent's holds are the parent's session's),
    /// so the views answer False/None there rather than raise.
    fn core_for_views(&self) -> Option<&zklock::Lock> {
        self.inner.get_here()
    }

    #[inline]
    fn acquire_as(&self, py: Python<'_>, owner: &zklock::Owner, wait: Option<Duration>) -> PyResult<bool> {
        let lock = self.core(py)?;
        // Begun here, with the GIL held: a re-entry is counted at once, with no thread switch
        // and no runtime; otherwise the attempt's create is sent, and this waits for it.
        let mut begun = lock.begin_acquire(owner, wait);
        let acquired = match begun.take_now() {
            Some(result) => result,
            None => runtime::block_on(py, begun)?,
        };
        Ok(acquired.py(py)?.is_acquired())
    }

    #[inline]
    fn release_as(&self, py: Python<'_>, owner: &zklock::Owner) -> PyResult<()> {
        let lock = self.core(py)?;
        // Inner levels are counted down here; the last one deletes the node on the runtime.
        if let Some(nested) = lock.release_nested(owner) {
            return nested.py(py);
        }
        // Bounded and interruptible: the level is counted down at the first step, and a release
        // given up after it (the bound passed, Ctrl-C) deletes the node in the background (core's
        // rule), as after a connection loss.
        // (The timer is made in the runtime's context, at the first poll.)
        match runtime::block_on(py, async { tokio::time::timeout(RELEASE_WAIT, lock.release(owner)).await })? {
            Ok(released) => released.py(py),
            Err(_elapsed) => Err(crate::error::connection_loss(
                py,
                &self.path,
                format!(
                    "the server did not confirm the release within {} s; the lock node is deleted in the \
                     background (once reconnected), or goes with the session",
                    RELEASE_WAIT.as_secs()
                ),
            )),
        }
    }

    /// `owner`'s hold, if it has one; `LockLostError` if that hold was lost (a lost hold is not
    /// held, so its numbers must not pass for a holder's).
    fn live_hold_of(&self, py: Python<'_>, owner: &Owner) -> PyResult<Option<Hold>> {
        let Some(lock) = self.core_for_views() else { return Ok(None) };
        lock.live_hold_of(&owner.inner).py(py)
    }
}

#[pymethods]
impl Lock {
    /// The mutex on `path`; or, with `_side=read_write_lock._side("read" | "write")`, that side
    /// of a read/write lock made from the same client and path (its identifier and ACL are the
    /// pair's).
    #[new]
    // The signature users see leaves out `_side`, which only ReadWriteLock passes.
    #[pyo3(
        signature = (client, path, *, identifier = None, acl = None, _side = None),
        text_signature = "(client, path, *, identifier=None, acl=None)"
    )]
    fn new(
        py: Python<'_>,
        client: &Bound<'_, Client>,
        path: Text,
        identifier: Option<Text>,
        acl: Option<&Bound<'_, PyAny>>,
        _side: Option<Bound<'_, LockSide>>,
    ) -> PyResult<Self> {
        let (path, identifier) = (path.0.as_str(), identifier.map(|text| text.0));
        let lock = match _side {
            None => {
                let options =
                    LockOptions { identifier, acl: crate::acl::from_py(py, path, acl)?, ..LockOptions::default() };
                client.get().core(py)?.lock_with(path, options).py(py)?
            }
            Some(side) => {
                let side = side.get();
                if !side.client.is(client) || side.path != path || identifier.is_some() || acl.is_some() {
                    return Err(invalid_argument(
                        py,
                        path,
                        "a side of a read/write lock takes the pair's own client and path, and no identifier or acl",
                    ));
                }
                side.lock.clone()
            }
        };
        Ok(Lock {
            mode: lock.mode().as_str(),
            inner: ForkSafe::new(lock),
            client: client.clone().unbind(),
            path: path.to_owned(),
            lost: Mutex::default(),
        })
    }

    /// The client this lock was made from.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<Client> {
        self.client.clone_ref(py)
    }

    /// The lock path, relative to the client's chroot.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The `LockTimeout` for this lock not had within `timeout` seconds, in core's words (as
    /// every language reports it), for `hold()`, whose `acquire` only says False.
    fn _timeout_error(&self, py: Python<'_>, timeout: f64) -> PyResult<Py<PyAny>> {
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        Ok(to_py(py, &self.core(py)?.timeout_error(timeout)).into_value(py).into_any())
    }

    /// `"exclusive"` for the mutex, `"read"` or `"write"` for the sides of a read/write lock.
    #[getter]
    fn mode(&self) -> &'static str {
        self.mode
    }

    /// As `threading.RLock.acquire`, for the calling thread. Blocks with the GIL released;
    /// Ctrl-C raises KeyboardInterrupt and removes the attempt's node. No timeout (-1 or None)
    /// waits as long as it takes, through ZooKeeper outages and new sessions.
    #[pyo3(signature = (blocking = Truthy(true), timeout = Some(-1.0)), text_signature = "(self, /, blocking=True, timeout=-1)")]
    fn acquire(&self, py: Python<'_>, blocking: Truthy, timeout: Option<f64>) -> PyResult<bool> {
        let wait = rlock_wait(py, &self.path, blocking.0, timeout)?;
        with_thread_owner(py, |owner| self.acquire_as(py, owner, wait))
    }

    /// Releases one level of the calling thread's hold; `NotOwnerError` if it holds none.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        with_thread_owner(py, |owner| self.release_as(py, owner))
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        with_thread_owner(py, |owner| self.acquire_as(py, owner, None))
    }

    /// Releases; if the block raised, its exception propagates, and a failed release rides
    /// along on it (`zklock._errors.attach_release_error`) instead of replacing it.
    #[pyo3(signature = (_exc_type, exc, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        match with_thread_owner(py, |owner| self.release_as(py, owner)) {
            Err(failed) if !exc.is_none() => {
                let attach = py.import("zklock._errors")?.getattr("attach_release_error")?;
                attach.call1((exc, failed.into_value(py))).map(drop)
            }
            released => released,
        }
    }

    /// Releases every level of `owner`'s hold at once (blocking, not interruptible) and returns
    /// how many there were: `threading.Condition`'s `_release_save`.
    fn _release_every_level(&self, py: Python<'_>, owner: &Owner) -> PyResult<u64> {
        let lock = self.core(py)?;
        runtime::block_on_uninterrupted(py, lock.release_every_level(&owner.inner)).py(py)
    }

    /// Acquires for `owner` (blocking) and restores `levels` levels in all: `threading.Condition`'s
    /// `_acquire_restore`.
    fn _acquire_levels(&self, py: Python<'_>, owner: &Owner, levels: u64) -> PyResult<()> {
        let lock = self.core(py)?;
        self.acquire_as(py, &owner.inner, None)?;
        lock.restore_levels(&owner.inner, levels).py(py)
    }

    /// `(state, fencing_token, sequence, count)` of `owner`'s hold, or None: core's state.
    fn _hold_of(&self, owner: &Owner) -> PyResult<Option<(&'static str, i64, i64, u64)>> {
        let Some(lock) = self.core_for_views() else { return Ok(None) };
        let Some((hold, count)) = lock.hold_of(&owner.inner) else { return Ok(None) };
        let state = hold.state().as_str();
        Ok(Some((state, hold.fencing_token(), hold.sequence(), count)))
    }

    /// Whether any owner (thread or task) holds the lock through this `Lock` and may act on it
    /// (not suspended, not lost): no traffic, as `threading.Lock.locked()`. Whether anyone anywhere holds it is `holders()`.
    fn locked(&self) -> bool {
        self.core_for_views().is_some_and(zklock::Lock::is_held_by_any)
    }

    /// The fencing token of `owner`'s hold, or None if it holds nothing; `LockLostError` if its
    /// hold was lost.
    fn _fencing_token_of(&self, py: Python<'_>, owner: &Owner) -> PyResult<Option<i64>> {
        Ok(self.live_hold_of(py, owner)?.map(|hold| hold.fencing_token()))
    }

    /// The sequence of `owner`'s lock node, as `_fencing_token_of`.
    fn _sequence_of(&self, py: Python<'_>, owner: &Owner) -> PyResult<Option<i64>> {
        Ok(self.live_hold_of(py, owner)?.map(|hold| hold.sequence()))
    }

    /// Acquires for `owner` without blocking, begun here and now: a re-entry, or an error known
    /// at once, gives its outcome directly, with no thread switch; otherwise the attempt's create
    /// is sent before this returns, so one client's acquisitions queue in the order they were
    /// made. It goes on on the runtime, and `done(ok, value)` is called on a runtime thread with
    /// the GIL: `(True, acquired: bool)` or `(False, exception)`; the returned operation's
    /// `cancel()` drops the acquisition, which removes its node.
    fn _acquire_async(
        &self,
        py: Python<'_>,
        owner: &Owner,
        timeout: Option<f64>,
        done: Py<PyAny>,
    ) -> PyResult<Started> {
        let wait = wait_for(py, &self.path, timeout)?;
        let mut begun = self.core(py)?.begin_acquire(&owner.inner, wait);
        if let Some(result) = begun.take_now() {
            return Ok(Started::Done(result.map(|acquired| acquired.is_acquired()).py(py)?));
        }
        let acquire = async move { begun.await.map(|acquired| acquired.is_acquired()) };
        // `cancel()` drops it there and then: the owner may acquire again at once
        // (asyncio.timeout cancels the very task that acquires next). A grant the task never
        // claimed is given back by `cancel()` before it returns.
        let (lock, owner) = (self.core(py)?.clone(), owner.inner.clone());
        Ok(Started::Running(pending::spawn_lock(acquire, done, move || release_begun(lock, owner, None))))
    }

    /// Releases one level for `owner` without blocking. An inner level is counted down here, by
    /// core's `release_nested` (raising `LockLostError` here if the hold was lost), and this
    /// returns True. Otherwise the release goes on on the runtime and this returns False;
    /// `done(ok, value)`, if given, is called as for `_acquire_async` (with `NotOwnerError` too).
    /// Without `done` the outcome is ignored: for an acquisition that succeeded after its caller
    /// was cancelled. A release is never cancelled: no node is left behind.
    #[pyo3(signature = (owner, done = None))]
    fn _release_async(&self, py: Python<'_>, owner: &Owner, done: Option<Py<PyAny>>) -> PyResult<bool> {
        let (lock, owner) = (self.core(py)?.clone(), owner.inner.clone());
        if let Some(nested) = lock.release_nested(&owner) {
            return match done {
                Some(_) => nested.py(py).map(|()| true),
                None => Ok(true),
            };
        }
        release_begun(lock, owner, done.map(callbacks::callback));
        Ok(false)
    }

    /// `Lock.on_lost`: calls `callback(reason)` once for each hold of this lock that is lost, by
    /// core's rule (`zklock::Lock::on_lost`: every hold, by any thread or task, taken before
    /// registering, unless lost already, or after, through any `Lock` of the client for the
    /// path), on the client's callback thread, in order, holding the GIL. The reason is
    /// `"session_expired"`, `"disconnected_too_long"`, `"closed"`, `"node_deleted"` or
    /// `"auth_failed"`. Returns a key for `_cancel_on_lost`; the callback is registered until
    /// then, or until this `Lock` is collected.
    fn _on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<usize> {
        if !callback.bind(py).is_callable() {
            return Err(invalid_argument(py, &self.path, "on_lost needs a callable"));
        }
        let callback = callbacks::callback(callback);
        let called = callback.clone();
        let subscription = self.core(py)?.on_lost(move |_owner, reason| {
            callbacks::run_now(called.clone(), move |py| PyTuple::new(py, [reason.as_str()]));
        });
        let mut lost = self.lost.lock();
        let key = lost.1;
        lost.1 += 1;
        lost.0.insert(key, (subscription, callback));
        Ok(key)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)?;
        if let Some(lost) = self.lost.try_lock() {
            for (_, callback) in lost.0.values() {
                callback.traverse(&visit)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let lost = std::mem::take(&mut self.lost.lock().0);
        Python::attach(|py| {
            for (subscription, callback) in lost.into_values() {
                drop(subscription);
                callback.clear(py);
            }
        });
    }

    /// Unregisters the `on_lost` callback of `key`; idempotent.
    fn _cancel_on_lost(&self, py: Python<'_>, key: usize) {
        let registration = self.lost.lock().0.remove(&key);
        if let Some((subscription, callback)) = registration {
            drop(subscription);
            callback.clear(py);
        }
    }

    /// Every contender, holders first, in queue order (blocking): of a read/write lock, readers
    /// and writers both.
    fn contenders(&self, py: Python<'_>) -> PyResult<Vec<Participant>> {
        let lock = self.core(py)?;
        Ok(participants(runtime::block_on(py, lock.contenders())?.py(py)?))
    }

    /// The first holder, or None (blocking).
    fn holder(&self, py: Python<'_>) -> PyResult<Option<Participant>> {
        let lock = self.core(py)?;
        Ok(runtime::block_on(py, lock.holder())?.py(py)?.map(Participant::from))
    }

    /// Every participant holding now, in queue order (blocking): the one holder of a mutex or of
    /// the write side, or the readers holding together.
    fn holders(&self, py: Python<'_>) -> PyResult<Vec<Participant>> {
        let lock = self.core(py)?;
        Ok(participants(runtime::block_on(py, lock.holders())?.py(py)?))
    }

    fn __repr__(&self) -> String {
        match self.mode {
            "exclusive" => format!("<zklock.Lock path={:?}>", self.path),
            mode => format!("<zklock.Lock path={:?} mode={mode}>", self.path),
        }
    }
}

pub(crate) fn participants(all: Vec<CoreParticipant>) -> Vec<Participant> {
    all.into_iter().map(Participant::from).collect()
}

/// One contender in a lock's queue, as `Lock.contenders()`, `holder()` and `holders()` report it.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct Participant {
    inner: CoreParticipant,
}

impl From<CoreParticipant> for Participant {
    fn from(inner: CoreParticipant) -> Self {
        Participant { inner }
    }
}

#[pymethods]
impl Participant {
    /// The child node's name.
    #[getter]
    fn node(&self) -> &str {
        &self.inner.node
    }

    #[getter]
    fn sequence(&self) -> Option<i64> {
        self.inner.sequence
    }

    /// How it takes the lock, by its node's name: `"exclusive"` (a mutex), `"read"` or
    /// `"write"`; None for a node of no lock zklock knows.
    #[getter]
    fn mode(&self) -> Option<&'static str> {
        self.inner.mode.map(zklock::Mode::as_str)
    }

    #[getter]
    fn fencing_token(&self) -> i64 {
        self.inner.fencing_token
    }

    #[getter]
    fn session_id(&self) -> i64 {
        self.inner.session_id
    }

    /// The identity recorded by zklock (any language) as a dict with `host`, `pid`, `owner`,
    /// `lang` and `identifier`; None for nodes of other clients (Curator, kazoo).
    #[getter]
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(identity) = &self.inner.identity else { return Ok(None) };
        let dict = PyDict::new(py);
        dict.set_item("host", &identity.host)?;
        dict.set_item("pid", identity.pid)?;
        dict.set_item("owner", &identity.owner)?;
        dict.set_item("lang", &identity.lang)?;
        dict.set_item("identifier", &identity.identifier)?;
        Ok(Some(dict))
    }

    /// The raw node data.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.data)
    }

    fn __repr__(&self) -> String {
        let owner = self.inner.identity.as_ref().map_or("?", |identity| identity.owner.as_str());
        let mode = self.inner.mode.map_or("?", zklock::Mode::as_str);
        format!("<zklock.Participant node={:?} mode={mode} owner={owner:?}>", self.inner.node)
    }
}
