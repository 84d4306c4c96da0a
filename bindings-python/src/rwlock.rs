//! `zklock._native.ReadWriteLock`: one read/write lock on a path. Its two sides are ordinary
//! `Lock`s (made by `Lock(client, path, _side=pair._side("read" | "write"))`), which share core's
//! owner table: that is what lets the write holder read, and refuses a reader's write.

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use zklock::LockOptions;

use crate::client::Client;
use crate::error::{invalid_argument, IntoPyResult};
use crate::lock::{participants, LockSide, Participant};
use crate::runtime::{self, ForkSafe};

#[pyclass(subclass, frozen, module = "zklock._native")]
pub(crate) struct ReadWriteLock {
    inner: ForkSafe<zklock::ReadWriteLock>,
    /// Keeps the Python client alive while the pair is, as a `Lock` does.
    client: Py<Client>,
    path: String,
}

impl ReadWriteLock {
    pub(crate) fn core(&self, py: Python<'_>) -> PyResult<&zklock::ReadWriteLock> {
        self.inner.get(py, &self.path)
    }
}

#[pymethods]
impl ReadWriteLock {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)
    }

    /// A read/write lock on `path` (nothing is sent until a side is first acquired).
    #[new]
    #[pyo3(signature = (client, path, *, identifier = None, acl = None))]
    fn new(
        py: Python<'_>,
        client: &Bound<'_, Client>,
        path: crate::error::Text,
        identifier: Option<crate::error::Text>,
        acl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (path, identifier) = (path.0.as_str(), identifier.map(|text| text.0));
        let options = LockOptions { identifier, acl: crate::acl::from_py(py, path, acl)?, ..LockOptions::default() };
        let pair = client.get().core(py)?.read_write_lock_with(path, options).py(py)?;
        Ok(ReadWriteLock { inner: ForkSafe::new(pair), client: client.clone().unbind(), path: path.to_owned() })
    }

    /// The client this lock was made from.
    #[getter(client)]
    fn py_client(&self, py: Python<'_>) -> Py<Client> {
        self.client.clone_ref(py)
    }

    /// The lock path, relative to the client's chroot.
    #[getter(path)]
    fn py_path(&self) -> &str {
        &self.path
    }

    /// The `"read"` or `"write"` side, for `Lock(client, path, _side=...)`, which only
    /// zklock.ReadWriteLock calls.
    fn _side(&self, py: Python<'_>, side: &str) -> PyResult<LockSide> {
        let pair = self.core(py)?;
        let lock = match side {
            "read" => pair.read(),
            "write" => pair.write(),
            _ => {
                return Err(invalid_argument(
                    py,
                    &self.path,
                    format!("the side of a read/write lock is \"read\" or \"write\", not {side:?}"),
                ))
            }
        };
        Ok(LockSide::new(lock.clone(), self.client.clone_ref(py), self.path.clone()))
    }

    /// Every participant, readers and writers, holders first, in queue order (blocking).
    fn contenders(&self, py: Python<'_>) -> PyResult<Vec<Participant>> {
        let pair = self.core(py)?;
        Ok(participants(runtime::block_on(py, pair.contenders())?.py(py)?))
    }

    /// Every participant holding now (blocking): the readers holding together, or the writer.
    fn holders(&self, py: Python<'_>) -> PyResult<Vec<Participant>> {
        let pair = self.core(py)?;
        Ok(participants(runtime::block_on(py, pair.holders())?.py(py)?))
    }

    fn __repr__(&self) -> String {
        format!("<zklock.ReadWriteLock path={:?}>", self.path)
    }
}
