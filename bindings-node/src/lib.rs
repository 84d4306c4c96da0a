//! Node binding of zklock: a napi-rs addon. This native part only translates types, errors and
//! promises, and runs the core on napi's tokio runtime. The JavaScript layer (`index.js`, `lib/`)
//! names the owners (an async flow is one) and passes their ids down; the core's owner table
//! decides what each holds.
//!
//! Nothing here keeps the process alive: promises keep the event loop alive only while they
//! are pending (napi's own behaviour), and the callbacks for state changes and lost holds are
//! weak threadsafe functions. A process that exits without closing its clients still ends their
//! sessions: on its 'exit' event (`closeSessionsAtExit`, called by the JavaScript layer) and from
//! an environment cleanup hook (see [`runtime`]).

mod client;
mod error;
mod hold;
mod lock;
mod multi_lock;
mod names;
mod runtime;
mod rwlock;
mod semaphore;

pub use client::{connect, NativeClient, NativeStateWatch};
pub use error::set_error_class;
pub use hold::NativeHold;
pub use lock::{fast_path, new_owner, set_thread_id, Identity, NativeLock, Participant};
pub use multi_lock::{NativeMultiGuard, NativeMultiLock, NativeMultiLockBuilder};
pub use runtime::close_all_at_exit;
pub use rwlock::NativeReadWriteLock;
pub use semaphore::{NativeLeases, NativeSemaphore};

/// The version of zklock, the same for the crate, the wheel and the npm package.
#[napi_derive::napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
