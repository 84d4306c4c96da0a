//! A read/write lock: the core's pair of locks on one path, handed to JavaScript as two
//! [`NativeLock`]s that share the core's owner table (so a flow's owner id means the same owner
//! on both sides, which the downgrade and the upgrade check depend on).

use std::sync::Arc;

use napi_derive::napi;

use crate::lock::NativeLock;
use crate::runtime::Shared;

#[napi]
pub struct NativeReadWriteLock {
    lock: zklock::ReadWriteLock,
    shared: Arc<Shared>,
}

impl NativeReadWriteLock {
    pub(crate) fn new(lock: zklock::ReadWriteLock, shared: Arc<Shared>) -> NativeReadWriteLock {
        NativeReadWriteLock { lock, shared }
    }
}

#[napi]
impl NativeReadWriteLock {
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.lock.path().to_owned()
    }

    /// The read side (a clone of the core's lock: same recipe, same owner table).
    #[napi]
    pub fn read(&self) -> NativeLock {
        NativeLock::new(self.lock.read().clone(), self.shared.clone())
    }

    /// The write side.
    #[napi]
    pub fn write(&self) -> NativeLock {
        NativeLock::new(self.lock.write().clone(), self.shared.clone())
    }
}
