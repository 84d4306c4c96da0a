//! Runs user callbacks away from the threads that keep sessions alive.
//!
//! A callback that blocks (a lost-lock handler that sleeps, logs to a stuck disk, or takes a
//! lock of the host's) must not stall the runtime: on a runtime worker it would delay every
//! session's pings and replies, until other clients' sessions expire. So the bindings hand each
//! callback to their client's dispatcher, one thread per client that runs them one at a time in
//! the order they were dispatched: a slow callback delays only the callbacks after it.

use std::sync::mpsc;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// One thread that runs callbacks in order, started at the first [`CallbackDispatcher::dispatch`]
/// and ending once the dispatcher is dropped and its queue has run.
pub struct CallbackDispatcher {
    name: String,
    queue: Mutex<Option<mpsc::Sender<Job>>>,
}

impl CallbackDispatcher {
    /// A dispatcher whose thread will be named `name` (as the OS allows: 15 bytes on Linux).
    pub fn new(name: impl Into<String>) -> CallbackDispatcher {
        CallbackDispatcher { name: name.into(), queue: Mutex::new(None) }
    }

    /// Queues `callback` behind those dispatched before it. Never blocks and never runs it on
    /// the calling thread. If the thread cannot be started, the callback is dropped.
    pub fn dispatch(&self, callback: impl FnOnce() + Send + 'static) {
        let mut queue = self.queue.lock();
        if queue.is_none() {
            let (sender, receiver) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new().name(self.name.clone()).spawn(move || {
                for job in receiver {
                    job();
                }
            });
            if started.is_err() {
                return;
            }
            *queue = Some(sender);
        }
        if let Some(sender) = queue.as_ref() {
            let _ = sender.send(Box::new(callback));
        }
    }
}

impl std::fmt::Debug for CallbackDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackDispatcher").field("name", &self.name).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use super::*;

    #[test]
    fn runs_in_order_off_the_calling_thread() {
        let dispatcher = CallbackDispatcher::new("zkl-test-cb");
        let (sender, receiver) = mpsc::channel();
        let caller = std::thread::current().id();
        for i in 0..100 {
            let sender = sender.clone();
            dispatcher.dispatch(move || {
                assert_ne!(std::thread::current().id(), caller);
                sender.send(i).unwrap();
            });
        }
        let seen: Vec<i32> = receiver.iter().take(100).collect();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_blocked_callback_does_not_block_dispatch() {
        let dispatcher = CallbackDispatcher::new("zkl-test-cb");
        let gate = Arc::new(Barrier::new(2));
        let held = gate.clone();
        dispatcher.dispatch(move || {
            held.wait();
        });
        let (sender, receiver) = mpsc::channel();
        dispatcher.dispatch(move || sender.send(()).unwrap());
        // The second waits behind the first...
        assert!(receiver.recv_timeout(Duration::from_millis(50)).is_err());
        gate.wait();
        // ...and runs once the first returns.
        receiver.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
