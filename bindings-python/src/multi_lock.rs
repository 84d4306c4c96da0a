//! `zklock._native.MultiLock` and `MultiGuard`: core's multi-lock over locks, read/write sides
//! and semaphore leases. Locks are taken for an owner (the calling thread, or an asyncio task),
//! as `Lock.acquire` takes them; the guard may be released from anywhere.

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};
use zklock::binding::{ClientBinding, Releasable};
use zklock::{Hold, Member};

use crate::callbacks;
use crate::error::{invalid_argument, not_owner, warn_collected_unreleased, IntoPyResult};
use crate::lock::{rlock_wait, wait_for, with_thread_owner, Lock, Owner, Truthy};
use crate::pending::{self, AsyncOp};
use crate::runtime::{self, ForkSafe};
use crate::semaphore::{lease_count, Semaphore};

/// What `subject` names in errors about the multi-lock as a whole.
const SUBJECT: &str = "multi_lock";

/// The kind's name in Python: `"mutex"`, `"read"`, `"write"` or `"leases"`.
/// A member from Python: a `Lock` (a mutex or a side), a `Semaphore` (one lease) or a
/// `(Semaphore, n)` pair; and the core client it uses.
fn member(py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<(Member, zklock::Client)> {
    if let Ok(lock) = object.cast::<Lock>() {
        let lock = lock.get().core(py)?;
        return Ok((Member::Lock(lock.clone()), lock.client()));
    }
    let leases = |semaphore: &Bound<'_, Semaphore>, n: i64| -> PyResult<(Member, zklock::Client)> {
        let semaphore = semaphore.get();
        let n = lease_count(py, semaphore.core(py)?.path(), n)?;
        Ok((Member::leases(semaphore.core(py)?, n), semaphore.core_client(py)?))
    };
    if let Ok(semaphore) = object.cast::<Semaphore>() {
        return leases(semaphore, 1);
    }
    if let Ok(pair) = object.cast::<PyTuple>() {
        if let Ok((semaphore, n)) = pair.extract::<(Bound<'_, Semaphore>, i64)>() {
            return leases(&semaphore, n);
        }
    }
    Err(invalid_argument(
        py,
        SUBJECT,
        format!(
            "a member is a Lock (a mutex or a side of a read/write lock), a Semaphore or a (Semaphore, n) pair, not {}",
            object.repr()?
        ),
    ))
}

#[pyclass(subclass, frozen, module = "zklock._native")]
pub(crate) struct MultiLock {
    inner: ForkSafe<(zklock::MultiLock, zklock::Client)>,
    /// Keeps the members' Python objects (and so their clients) alive while the multi-lock is.
    _members: Vec<Py<PyAny>>,
}

impl MultiLock {
    fn core(&self, py: Python<'_>) -> PyResult<&(zklock::MultiLock, zklock::Client)> {
        self.inner.get(py, SUBJECT)
    }

    fn guard(&self, py: Python<'_>, guard: zklock::MultiGuard) -> PyResult<MultiGuard> {
        Ok(MultiGuard::new(self.core(py)?.1.clone(), guard))
    }
}

#[pymethods]
impl MultiLock {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self._members.iter().try_for_each(|member| visit.call(member))
    }

    /// Several locks taken together, in one canonical order (by path, then kind), all or none.
    /// Sends nothing.
    #[new]
    fn new(py: Python<'_>, members: Vec<Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut core_members = Vec::with_capacity(members.len());
        let mut client = None;
        for object in &members {
            let (member, its_client) = member(py, object)?;
            core_members.push(member);
            client.get_or_insert(its_client);
        }
        let multi = zklock::MultiLock::new(core_members).py(py)?;
        let client = client.expect("core refuses a multi-lock without members");
        Ok(MultiLock {
            inner: ForkSafe::new((multi, client)),
            _members: members.into_iter().map(Bound::unbind).collect(),
        })
    }

    /// The members in the order they are taken: `(path, kind)`, kind `"mutex"`, `"read"`,
    /// `"write"` or `"leases"`.
    #[getter]
    fn members(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str)>> {
        Ok(self.core(py)?.0.members().iter().map(|m| (m.path().to_owned(), m.kind().as_str())).collect())
    }

    /// Takes every member for the calling thread (blocking, GIL released; Ctrl-C raises
    /// KeyboardInterrupt and releases what was taken): the guard, `LockTimeout` naming the member
    /// waited for once `timeout` passes, or None if `blocking` is False and a member is taken.
    #[pyo3(signature = (timeout = None, blocking = Truthy(true)), text_signature = "(self, /, timeout=None, blocking=True)")]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>, blocking: Truthy) -> PyResult<Option<MultiGuard>> {
        let multi = &self.core(py)?.0;
        let guard = with_thread_owner(py, |owner| -> PyResult<_> {
            if !blocking.0 {
                rlock_wait(py, SUBJECT, false, timeout)?;
                let tried = multi.acquire_for(owner, Some(std::time::Duration::ZERO), None);
                return runtime::block_on(py, tried)?.py(py).map(Result::ok);
            }
            Ok(Some(match wait_for(py, SUBJECT, timeout)? {
                None => runtime::block_on(py, multi.acquire(owner))?.py(py)?,
                Some(timeout) => runtime::block_on(py, multi.acquire_timeout(owner, timeout))?.py(py)?,
            }))
        })?;
        guard.map(|guard| self.guard(py, guard)).transpose()
    }

    /// Takes every member for `owner` on the runtime: `done(True, MultiGuard)` or
    /// `done(False, exception)` on a runtime thread with the GIL (`LockTimeout` once `timeout`
    /// passes; None waits forever). The returned operation's `cancel()` drops the acquisition:
    /// what was taken is released in reverse order.
    fn _acquire_async(
        &self,
        py: Python<'_>,
        owner: &Owner,
        timeout: Option<f64>,
        done: Py<PyAny>,
    ) -> PyResult<AsyncOp> {
        let wait = wait_for(py, SUBJECT, timeout)?;
        let (multi, client) = self.core(py)?.clone();
        let owner = owner.core().clone();
        let acquire = async move {
            match wait {
                None => multi.acquire(&owner).await,
                Some(timeout) => multi.acquire_timeout(&owner, timeout).await,
            }
        };
        Ok(pending::spawn(acquire, done, move |py, guard| Ok(Py::new(py, MultiGuard::new(client, guard))?.into_any())))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.members(py) {
            Ok(members) => format!("<zklock.MultiLock members={members:?}>"),
            Err(_) => "<zklock.MultiLock (forked)>".to_owned(),
        }
    }
}

struct GuardInner {
    guard: Releasable<zklock::MultiGuard>,
    /// Each member's path, kind and holds, in canonical order: kept past the release.
    holds: Vec<(String, &'static str, Vec<Hold>)>,
    client: zklock::Client,
}

/// Every member of a multi-lock, held.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct MultiGuard {
    inner: ForkSafe<GuardInner>,
    /// The `on_lost` callables, for the garbage collector.
    watchers: Mutex<Vec<callbacks::Callback>>,
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        if self.inner.get_here().is_some_and(|inner| inner.guard.is_held()) {
            warn_collected_unreleased(c"zklock.MultiGuard collected unreleased: released now");
        }
    }
}

impl MultiGuard {
    fn new(client: zklock::Client, guard: zklock::MultiGuard) -> MultiGuard {
        let holds = guard
            .holds()
            .into_iter()
            .map(|(member, holds)| (member.path().to_owned(), member.kind().as_str(), holds))
            .collect();
        MultiGuard {
            inner: ForkSafe::new(GuardInner { guard: Releasable::new(guard), holds, client }),
            watchers: Mutex::default(),
        }
    }

    fn core(&self, py: Python<'_>) -> PyResult<&GuardInner> {
        self.inner.get(py, SUBJECT)
    }

    fn take(&self, py: Python<'_>) -> PyResult<zklock::MultiGuard> {
        let taken = self.core(py)?.guard.take();
        taken.ok_or_else(|| not_owner(py, SUBJECT, "this multi-lock's members were released already"))
    }
}

#[pymethods]
impl MultiGuard {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(watchers) = self.watchers.try_lock() {
            for callback in watchers.iter() {
                callback.traverse(&visit)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let watchers = std::mem::take(&mut *self.watchers.lock());
        Python::attach(|py| watchers.iter().for_each(|callback| callback.clear(py)));
    }

    /// The members in canonical order: `(path, kind)`.
    #[getter]
    fn members(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str)>> {
        Ok(self.core(py)?.holds.iter().map(|(path, kind, _)| (path.clone(), *kind)).collect())
    }

    /// Each member's fencing tokens (one for a lock, one per lease), in canonical order:
    /// `(path, kind, tokens)`; `LockLostError` if a member was lost.
    #[getter]
    fn fencing_tokens(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str, Vec<i64>)>> {
        let live = |holds: &[Hold]| -> PyResult<Vec<i64>> {
            holds.iter().map(|hold| hold.live_fencing_token().py(py)).collect()
        };
        self.core(py)?.holds.iter().map(|(path, kind, holds)| Ok((path.clone(), *kind, live(holds)?))).collect()
    }

    /// `"lost"` if any member is, else `"suspended"` if any is, else `"held"`; `"released"`
    /// once released (a lost member too, once the release reported it).
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.core(py)?.guard.state().as_str())
    }

    /// The first member (in canonical order) found lost, as `(path, kind, reason)`, or None.
    #[getter]
    fn lost_member(&self, py: Python<'_>) -> PyResult<Option<(String, &'static str, &'static str)>> {
        let inner = self.core(py)?;
        Ok(inner
            .guard
            .with(zklock::MultiGuard::lost_member)
            .flatten()
            .map(|lost| (lost.path, lost.kind.as_str(), lost.reason.as_str())))
    }

    /// Releases every member in reverse canonical order (blocking, not interruptible), each
    /// confirmed before the next; `LockLostError` if a member was lost (the others are still
    /// released).
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let guard = self.take(py)?;
        runtime::block_on_uninterrupted(py, guard.release()).py(py)
    }

    /// Releases on the runtime: `done(True, None)` or `done(False, exception)`.
    fn _release_async(&self, py: Python<'_>, done: Py<PyAny>) -> PyResult<()> {
        let guard = self.take(py)?;
        pending::spawn_to_end(async move { guard.release().await }, done, |py, ()| Ok(py.None()));
        Ok(())
    }

    /// Calls `callback(path, kind, reason)` once, when the first member is lost.
    fn _watch(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let inner = self.core(py)?;
        // Released: never lost any more.
        let Some(loss) = inner.guard.first_member_loss() else {
            return Ok(());
        };
        let callback = callbacks::callback(callback);
        self.watchers.lock().push(callback.clone());
        inner.client.on_member_lost(loss, move |lost| {
            callbacks::run_now(callback, move |py| {
                (lost.path.as_str(), lost.kind.as_str(), lost.reason.as_str()).into_pyobject(py)
            });
        });
        Ok(())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.core(py)?.holds.len())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = self.state(py).unwrap_or("forked");
        format!("<zklock.MultiGuard state={state}>")
    }
}
