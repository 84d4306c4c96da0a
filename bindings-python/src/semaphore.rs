//! `zklock._native.Semaphore` and `Leases`: core's counting semaphore (Curator's
//! InterProcessSemaphoreV2), with kazoo's names for the blocking API. Leases have no owner: any
//! thread or task may release them.

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};
use zklock::binding::{ClientBinding, Releasable, SemaphoreBinding};
use zklock::{Hold, MaxLeases, Participant as CoreParticipant, SemaphoreOptions};

use crate::callbacks::{self, Callback};
use crate::client::Client;
use crate::error::{invalid_argument, not_owner, warn_collected_unreleased, IntoPyResult, Text};
use crate::lock::{participants, rlock_wait, wait_for, Participant, Truthy};
use crate::pending::{self, AsyncOp};
use crate::runtime::{self, ForkSafe};

#[pyclass(subclass, frozen, module = "zklock._native")]
pub(crate) struct Semaphore {
    inner: ForkSafe<zklock::Semaphore>,
    /// Keeps the Python client alive (and so registered for closing at exit), as a `Lock` does.
    client: Py<Client>,
    path: String,
    max_leases: Option<u32>,
    shared_count_path: Option<String>,
    /// The `label=` given: then every acquisition's nodes carry it.
    label: Option<String>,
}

impl Semaphore {
    /// The core semaphore for one acquisition: its nodes labelled with `label=`, or else after
    /// the caller (`thread:<name>`, or the asyncio task's `task:<name>` in `caller`), as a lock's
    /// nodes are labelled after their owner (`zklock status` showed a bare id).
    fn labelled(&self, py: Python<'_>, caller: Option<String>) -> PyResult<zklock::Semaphore> {
        let semaphore = self.core(py)?;
        if self.label.is_some() {
            return Ok(semaphore.clone());
        }
        let caller = caller.unwrap_or_else(|| crate::lock::thread_label(py));
        semaphore.labelled(&caller).py(py)
    }

    pub(crate) fn core(&self, py: Python<'_>) -> PyResult<&zklock::Semaphore> {
        self.inner.get(py, &self.path)
    }

    pub(crate) fn core_client(&self, py: Python<'_>) -> PyResult<zklock::Client> {
        Ok(self.client.get().core(py)?.clone())
    }
}

/// A count from Python as core's `u32`; out of its range, `InvalidArgumentError` saying `what`.
pub(crate) fn count(py: Python<'_>, path: &str, value: i64, what: impl FnOnce() -> String) -> PyResult<u32> {
    u32::try_from(value).map_err(|_| invalid_argument(py, path, what()))
}

/// `n` leases asked for, as core takes it (core refuses 0 and more than a fixed max).
pub(crate) fn lease_count(py: Python<'_>, path: &str, n: i64) -> PyResult<u32> {
    count(py, path, n, || format!("at least 1 lease must be asked for (and at most {}), not {n}", u32::MAX))
}

/// Core's leases as the Python object `done` and `acquire` give.
fn leases_into_py(py: Python<'_>, client: zklock::Client, path: String, leases: zklock::Leases) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, Leases::new(client, path, leases))?.into_any())
}

#[pymethods]
impl Semaphore {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)
    }

    /// A counting semaphore on `path`: at most `max_leases` at once, or as many as the shared
    /// count at `shared_count_path` says (made with `seed` if missing); `acl` on every node it
    /// makes, as a lock's; `label` the owner label of its nodes (by default the acquiring
    /// thread's or task's). Sends nothing.
    #[new]
    #[pyo3(signature = (client, path, max_leases = None, *, shared_count_path = None, seed = None, identifier = None, acl = None, label = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn new(
        py: Python<'_>,
        client: &Bound<'_, Client>,
        path: Text,
        max_leases: Option<i64>,
        shared_count_path: Option<Text>,
        seed: Option<i64>,
        identifier: Option<Text>,
        acl: Option<&Bound<'_, PyAny>>,
        label: Option<Text>,
    ) -> PyResult<Self> {
        let path = path.0.as_str();
        let (shared_count_path, identifier) = (shared_count_path.map(|text| text.0), identifier.map(|text| text.0));
        let label = label.map(|text| text.0);
        let max = match (max_leases, &shared_count_path, seed) {
            (Some(max), None, None) => {
                MaxLeases::Fixed(count(py, path, max, || format!("max_leases must be at least 1, not {max}"))?)
            }
            (None, Some(count_path), Some(seed)) => MaxLeases::SharedCount {
                path: count_path.clone(),
                seed: count(py, path, seed, || {
                    format!("a shared count's seed must be from 1 to {}, not {seed}", i32::MAX)
                })?,
            },
            (None, Some(_), None) => return Err(invalid_argument(
                py,
                path,
                "shared_count_path needs seed= (the count written if its node is missing, as Curator's SharedCount)",
            )),
            (Some(_), Some(_), _) => {
                return Err(invalid_argument(py, path, "give max_leases or shared_count_path, not both"))
            }
            (_, None, Some(_)) => return Err(invalid_argument(py, path, "seed is only for shared_count_path")),
            (None, None, None) => {
                return Err(invalid_argument(py, path, "a semaphore needs max_leases, or shared_count_path and seed"))
            }
        };
        let mut options = SemaphoreOptions::new(max).acl(crate::acl::from_py(py, path, acl)?);
        if let Some(identifier) = identifier {
            options = options.identifier(identifier);
        }
        if let Some(label) = &label {
            options = options.label(label.clone());
        }
        let semaphore = client.get().core(py)?.semaphore_with(path, options).py(py)?;
        Ok(Semaphore {
            inner: ForkSafe::new(semaphore),
            client: client.clone().unbind(),
            path: path.to_owned(),
            max_leases: max_leases.map(|max| max as u32),
            shared_count_path,
            label,
        })
    }

    /// The client this semaphore was made from.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<Client> {
        self.client.clone_ref(py)
    }

    /// The semaphore's path, relative to the client's chroot.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The fixed max, or None when it comes from a shared count.
    #[getter]
    fn max_leases(&self) -> Option<u32> {
        self.max_leases
    }

    /// The shared count's path, or None for a fixed max.
    #[getter]
    fn shared_count_path(&self) -> Option<&str> {
        self.shared_count_path.as_deref()
    }

    /// The max now: the fixed one, or the shared count's value (blocking).
    fn current_max_leases(&self, py: Python<'_>) -> PyResult<i64> {
        let semaphore = self.core(py)?;
        runtime::block_on(py, semaphore.current_max_leases())?.py(py)
    }

    /// Acquires `n` leases, all or nothing (blocking, GIL released; Ctrl-C raises
    /// KeyboardInterrupt and removes every node the attempt made).
    #[pyo3(signature = (n = 1, timeout = None, blocking = Truthy(true)), text_signature = "(self, /, n=1, timeout=None, blocking=True)")]
    fn acquire(&self, py: Python<'_>, n: i64, timeout: Option<f64>, blocking: Truthy) -> PyResult<Option<Leases>> {
        let n = lease_count(py, &self.path, n)?;
        let semaphore = &self.labelled(py, None)?;
        let client = self.core_client(py)?;
        let leases = if blocking.0 {
            match wait_for(py, &self.path, timeout)? {
                None => Some(runtime::block_on(py, semaphore.acquire(n))?.py(py)?),
                Some(timeout) => Some(runtime::block_on(py, semaphore.acquire_timeout(n, timeout))?.py(py)?),
            }
        } else {
            rlock_wait(py, &self.path, false, timeout)?;
            runtime::block_on(py, semaphore.try_acquire(n))?.py(py)?
        };
        Ok(leases.map(|leases| Leases::new(client, self.path.clone(), leases)))
    }

    /// Acquires `n` leases on the runtime: `done(True, Leases)` or `done(False, exception)` is
    /// called on a runtime thread with the GIL (`LockTimeout` once `timeout` passes; None waits
    /// forever, 0 only tries). The returned operation's `cancel()` drops the acquisition, which
    /// removes its nodes.
    #[pyo3(signature = (n, timeout, done, caller = None))]
    fn _acquire_async(
        &self,
        py: Python<'_>,
        n: i64,
        timeout: Option<f64>,
        done: Py<PyAny>,
        caller: Option<String>,
    ) -> PyResult<AsyncOp> {
        let n = lease_count(py, &self.path, n)?;
        let wait = wait_for(py, &self.path, timeout)?;
        let (semaphore, client, path) = (self.labelled(py, caller)?, self.core_client(py)?, self.path.clone());
        let acquire = async move {
            match wait {
                None => semaphore.acquire(n).await,
                Some(timeout) => semaphore.acquire_timeout(n, timeout).await,
            }
        };
        Ok(pending::spawn(acquire, done, move |py, leases| leases_into_py(py, client, path, leases)))
    }

    /// The leases held, the leases waiting and the queue at the internal mutex (blocking).
    fn participants(&self, py: Python<'_>) -> PyResult<SemaphoreParticipants> {
        let semaphore = self.core(py)?;
        let all = runtime::block_on(py, semaphore.participants())?.py(py)?;
        let holders = all.holders().len();
        Ok(SemaphoreParticipants {
            holders: all.leases[..holders].to_vec(),
            leases: all.leases,
            waiting_leases: all.waiting_leases,
            queue: all.queue,
            max_leases: all.max_leases,
        })
    }

    fn __repr__(&self) -> String {
        match (&self.max_leases, &self.shared_count_path) {
            (Some(max), _) => format!("<zklock.Semaphore path={:?} max_leases={max}>", self.path),
            (None, Some(count)) => format!("<zklock.Semaphore path={:?} shared_count_path={count:?}>", self.path),
            (None, None) => format!("<zklock.Semaphore path={:?}>", self.path),
        }
    }
}

/// Who holds a semaphore's leases and who waits, from `Semaphore.participants()`.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct SemaphoreParticipants {
    leases: Vec<CoreParticipant>,
    holders: Vec<CoreParticipant>,
    waiting_leases: usize,
    queue: Vec<CoreParticipant>,
    max_leases: i64,
}

#[pymethods]
impl SemaphoreParticipants {
    /// Every lease node in creation order: those held, then the `waiting_leases` of the
    /// acquirer at the head of `queue`, which waits for them to fit.
    #[getter]
    fn leases(&self) -> Vec<Participant> {
        participants(self.leases.clone())
    }

    /// The lease nodes held.
    #[getter]
    fn holders(&self) -> Vec<Participant> {
        participants(self.holders.clone())
    }

    /// How many of `leases`, at the end, are not held yet.
    #[getter]
    fn waiting_leases(&self) -> usize {
        self.waiting_leases
    }

    /// The acquirers at the internal mutex, in order: the first is making its lease nodes or
    /// waiting for them to fit, the others wait for their turn.
    #[getter]
    fn queue(&self) -> Vec<Participant> {
        participants(self.queue.clone())
    }

    /// The max when listed.
    #[getter]
    fn max_leases(&self) -> i64 {
        self.max_leases
    }

    fn __repr__(&self) -> String {
        format!(
            "<zklock.SemaphoreParticipants held={} waiting={} queued={} max_leases={}>",
            self.holders.len(),
            self.waiting_leases,
            self.queue.len(),
            self.max_leases
        )
    }
}

/// Calls `call(callback, reason, index)` once, on `client`'s callback thread, when the first of
/// `holds` is lost (never once they are released); `index` says which hold.
pub(crate) fn watch_first_loss<F>(client: &zklock::Client, holds: &[Hold], callback: Callback, call: F)
where
    F: for<'py> FnOnce(Python<'py>, &'static str, usize) -> PyResult<Bound<'py, PyTuple>> + Send + 'static,
{
    client.on_first_loss(holds.to_vec(), move |index, reason| {
        callbacks::run_now(callback, move |py| call(py, reason.as_str(), index));
    });
}

struct LeasesInner {
    leases: Releasable<zklock::Leases>,
    holds: Vec<Hold>,
    client: zklock::Client,
}

/// Leases taken together by one `Semaphore.acquire`.
#[pyclass(frozen, module = "zklock._native")]
pub(crate) struct Leases {
    inner: ForkSafe<LeasesInner>,
    path: String,
    nodes: Vec<String>,
    /// The `on_lost` callables, for the garbage collector.
    watchers: Mutex<Vec<Callback>>,
}

impl Leases {
    fn new(client: zklock::Client, path: String, leases: zklock::Leases) -> Leases {
        let holds: Vec<Hold> = leases.holds();
        let nodes = leases.leases().iter().map(|lease| lease.node_name().to_owned()).collect();
        let inner = LeasesInner { leases: Releasable::new(leases), holds, client };
        Leases { inner: ForkSafe::new(inner), path, nodes, watchers: Mutex::default() }
    }

    fn core(&self, py: Python<'_>) -> PyResult<&LeasesInner> {
        self.inner.get(py, &self.path)
    }

    /// The leases, taken out to be released; `NotOwnerError` if they were released already.
    fn take(&self, py: Python<'_>) -> PyResult<zklock::Leases> {
        let taken = self.core(py)?.leases.take();
        taken.ok_or_else(|| not_owner(py, &self.path, "these leases were released already"))
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        if self.inner.get_here().is_some_and(|inner| inner.leases.is_held()) {
            warn_collected_unreleased(c"zklock.Leases collected unreleased: released now");
        }
    }
}

#[pymethods]
impl Leases {
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

    /// The semaphore's path.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Each lease node's name (`_c_<uuid>-lease-<sequence>`), in the order they were made.
    #[getter]
    fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }

    /// Each lease's fencing token (its node's creation zxid); `LockLostError` if one was lost.
    #[getter]
    fn fencing_tokens(&self, py: Python<'_>) -> PyResult<Vec<i64>> {
        self.core(py)?.holds.iter().map(|hold| hold.live_fencing_token().py(py)).collect()
    }

    /// `"held"`, `"suspended"` (the connection is down), `"lost"` if any lease is, or
    /// `"released"` once released (a lost lease too, once the release reported it).
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.core(py)?.leases.state().as_str())
    }

    /// Why the first lease found lost was lost, or None (and once released).
    #[getter]
    fn lost_reason(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        let inner = self.core(py)?;
        let lost = inner.leases.with(zklock::Leases::lost_lease).flatten();
        Ok(lost.map(|(_, reason)| reason.as_str()))
    }

    /// Releases every lease (blocking, not interruptible), returning once the server confirmed
    /// each delete; `LockLostError` if one was lost (the others are still released).
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let leases = self.take(py)?;
        runtime::block_on_uninterrupted(py, leases.release()).py(py)
    }

    /// Releases on the runtime: `done(True, None)` or `done(False, exception)`.
    fn _release_async(&self, py: Python<'_>, done: Py<PyAny>) -> PyResult<()> {
        let leases = self.take(py)?;
        pending::spawn_to_end(async move { leases.release().await }, done, |py, ()| Ok(py.None()));
        Ok(())
    }

    /// Calls `callback(reason)` once, when the first of these leases is lost.
    fn _watch(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let inner = self.core(py)?;
        let callback = callbacks::callback(callback);
        self.watchers.lock().push(callback.clone());
        watch_first_loss(&inner.client, &inner.holds, callback, |py, reason, _| PyTuple::new(py, [reason]));
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.nodes.len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = self.state(py).unwrap_or("forked");
        format!("<zklock.Leases path={:?} n={} state={state}>", self.path, self.nodes.len())
    }
}
