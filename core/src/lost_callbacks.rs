//! A lock's lost callbacks ([`crate::Lock::on_lost`]): the one rule, for Rust and every binding
//! (C's `zkl_lock_set_lost_callback`, Python's `Lock.on_lost`, Node's `lock.onLost`), of which
//! holds a callback covers, when it is called, and how often.
//!
//! A callback covers every hold of its lock in its mode (the holds of the lock's owner table:
//! every handle of one client for the path in Rust, Python and Node, the one handle in C), by any
//! owner, taken before it was registered or after; it is called once per hold, when that hold is
//! lost, on the client's callback thread. A hold already lost when it registers is not reported
//! (its state says so). Holds are watched only while some callback listens, one watcher a hold
//! whoever listens, so a lock nobody listens to costs its acquisitions nothing.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::connection::ClientInner;
use crate::error::LostReason;
use crate::hold::Hold;
use crate::mode::Mode;

type Callback = Arc<dyn Fn(u64, LostReason) + Send + Sync>;

/// The callbacks of one owner table, and the holds being watched for them.
#[derive(Default)]
pub(crate) struct LostCallbacks {
    registry: Mutex<Registry>,
    /// How many callbacks are registered: read without the mutex at every new hold.
    listening: AtomicUsize,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    callbacks: Vec<(u64, Mode, Callback)>,
    /// The holds with a watcher, by hold id and mode. A watcher keeps a clone of its hold, so
    /// no other hold can have that id while it is here.
    watched: HashSet<(u64, Mode)>,
}

impl LostCallbacks {
    /// Registers `callback` for the holds in `mode`; `holds` are those taken already (with
    /// their owners), which it covers unless they are lost already.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        client: &Arc<ClientInner>,
        mode: Mode,
        callback: Callback,
        holds: impl FnOnce() -> Vec<(u64, Hold)>,
    ) -> LostSubscription {
        let id = {
            let mut registry = self.registry.lock();
            let id = registry.next_id;
            registry.next_id += 1;
            registry.callbacks.push((id, mode, callback));
            self.listening.fetch_add(1, Ordering::AcqRel);
            id
        };
        // Listed after registering: a hold settled meanwhile is either listed here or finds the
        // callback registered (see `hold_taken`); the watched set keeps it to one watcher.
        for (owner, hold) in holds() {
            if hold.state() != crate::hold::HoldState::Lost {
                self.hold_taken(client, owner, mode, &hold);
            }
        }
        LostSubscription { callbacks: Arc::downgrade(self), id }
    }

    /// A new hold of `owner` in `mode` (not a re-entry): watched if a callback listens.
    pub(crate) fn hold_taken(self: &Arc<Self>, client: &Arc<ClientInner>, owner: u64, mode: Mode, hold: &Hold) {
        if self.listening.load(Ordering::Acquire) == 0 {
            return;
        }
        let key = (hold.id(), mode);
        {
            let mut registry = self.registry.lock();
            if !registry.callbacks.iter().any(|(_, m, _)| *m == mode) || !registry.watched.insert(key) {
                return;
            }
        }
        let callbacks = Arc::downgrade(self);
        let hold = hold.clone();
        let until_lost = {
            let callbacks = callbacks.clone();
            async move {
                let lost = hold.lost().await;
                if let Some(callbacks) = callbacks.upgrade() {
                    callbacks.registry.lock().watched.remove(&key);
                }
                lost
            }
        };
        client.when_lost(until_lost, move |reason| {
            if let Some(callbacks) = callbacks.upgrade() {
                callbacks.call(owner, mode, reason);
            }
        });
    }

    /// Calls the callbacks registered for `mode` now, in the order they were registered (outside
    /// the mutex: a callback may register or unregister callbacks).
    fn call(&self, owner: u64, mode: Mode, reason: LostReason) {
        let due: Vec<Callback> = {
            let registry = self.registry.lock();
            registry.callbacks.iter().filter(|(_, m, _)| *m == mode).map(|(_, _, callback)| callback.clone()).collect()
        };
        for callback in due {
            callback(owner, reason);
        }
    }
}

/// A callback registered with [`crate::Lock::on_lost`]. Dropping it (or
/// [`LostSubscription::cancel`]) unregisters the callback: it is not called for a loss found
/// after that, though a call already under way on the callback thread may still run.
#[must_use = "dropping the subscription unregisters the callback"]
pub struct LostSubscription {
    callbacks: Weak<LostCallbacks>,
    id: u64,
}

impl LostSubscription {
    /// Unregisters the callback (as dropping the subscription does).
    pub fn cancel(self) {}
}

impl Drop for LostSubscription {
    fn drop(&mut self) {
        let Some(callbacks) = self.callbacks.upgrade() else { return };
        let removed = {
            let mut registry = callbacks.registry.lock();
            let at = registry.callbacks.iter().position(|(id, _, _)| *id == self.id);
            at.map(|at| {
                callbacks.listening.fetch_sub(1, Ordering::AcqRel);
                registry.callbacks.remove(at)
            })
        };
        // Dropped outside the mutex: a binding's callback may take locks of its own to go.
        drop(removed);
    }
}

impl std::fmt::Debug for LostSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LostSubscription").field("id", &self.id).finish()
    }
}
