//! # zklock
//!
//! A fair, reentrant ZooKeeper lock: Apache Curator's InterProcessMutex recipe, written once in
//! Rust and shared by the C, Python and Node bindings. Nodes are named exactly as Curator names
//! them (`_c_<uuid>-lock-<sequence>`), so zklock and Curator clients queue fairly together.
//!
//! ```no_run
//! # async fn demo() -> zklock::Result<()> {
//! let client = zklock::Client::connect("127.0.0.1:2181/app").await?;
//! let lock = client.lock("/locks/report")?;
//! let me = zklock::Owner::unique();
//! let guard = lock.acquire(&me).await?;
//! println!("holding with fencing token {}", guard.fencing_token());
//! guard.release().await?;
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! ## The recipe
//! * Each acquisition attempt creates one EPHEMERAL_SEQUENTIAL child of the lock path; the
//!   earliest holds the lock. Missing parents are created as CONTAINER nodes.
//! * Open to everyone by default; [`LockOptions::acl`] protects a lock's nodes with an [`Acl`].
//! * A waiter watches its immediate predecessor (and, behind another client's waiter, the node
//!   before that: see the handoff below), so a mutex's release wakes at most two waiters: no herd.
//! * A handoff between clients sends nothing: the waiter behind the next in line looks again while
//!   that one holds, and once next in line watches its own node, so the release alone lets it in.
//! * An uncontended acquire costs one round trip: the create and the listing are pipelined.
//! * Reentrant per [`Owner`]: a holder acquires again with no ZooKeeper traffic.
//! * Past ZooKeeper's 32-bit sequence limit the queue is ordered by creation zxid.
//!
//! ## The read/write lock
//! [`Client::read_write_lock`] gives Curator's InterProcessReadWriteLock recipe (`__READ__` and
//! `__WRIT__` nodes): a [`ReadWriteLock`] whose two sides are ordinary [`Lock`]s. See its docs
//! for the rules (writers not starved, downgrade, upgrade refused with [`ErrorKind::Deadlock`]).
//!
//! ## The semaphore
//! [`Client::semaphore`] gives Curator's InterProcessSemaphoreV2 recipe (an internal mutex at
//! `<path>/locks`, leases at `<path>/leases`): a [`Semaphore`] allowing at most `max` leases at
//! once, a fixed number or a shared count ([`MaxLeases`]); `n` leases are taken all or nothing.
//! Not reentrant; with max 1 it is Curator's InterProcessSemaphoreMutex. See its docs.
//!
//! ## The multi-lock
//! [`Client::multi_lock`] takes several members together (mutexes, sides of read/write locks,
//! semaphore leases): in one canonical order (by path, then [`MemberKind`]) so that two
//! multi-locks over the same paths cannot deadlock, under one deadline, and all or nothing. See
//! [`MultiLock`].
//!
//! ## Inside
//! One contend loop (`engine`) serves every recipe; what differs is a small per-[`Mode`] policy
//! that, given the queue and our place in it, answers "held" or "wait for that node".
//!
//! ## Secured ensembles
//! [`ClientOptions::tls`] ([`TlsOptions`]): TLS to the servers' `secureClientPort`, the server
//! certificates verified against a CA bundle (host names checked unless turned off), and a
//! client certificate for mutual TLS and ZooKeeper's x509 auth (ACL entries `x509:<subject>`);
//! [`ClientOptions::sasl`] ([`SaslOptions`]): SASL DIGEST-MD5 or Kerberos (GSSAPI), ACL entries
//! `sasl:<identity>`; [`ClientOptions::digest_auth`]: digest credentials.
//!
//! ## Errors
//! One [`Error`] type whose [`ErrorKind`] is stable; the bindings map each kind one to one.
//!
//! ## Feature flags
//! The crate always runs on tokio (the `zookeeper-client` crate's `tokio` feature).
//! * `ffi` (off by default): the C ABI, `zkl_*` functions declared in `include/zklock.h` and
//!   built into `libzklock.so`/`libzklock.a` by the root Makefile (`make install PREFIX=...`).

#![warn(missing_docs)]

mod acl;
mod client;
mod dispatch;
mod engine;
mod error;
#[cfg(feature = "ffi")]
pub mod ffi;
mod hold;
mod lock;
mod lost_callbacks;
mod memory;
mod multi_lock;
mod order;
mod owners;
mod policy;
mod retry;
mod rwlock;
mod sasl;
mod semaphore;
mod session;
mod tls;
mod validate;

// zklock needs its patched zookeeper-client (third_party/zookeeper-client/ZKLOCK.md: sockets and
// timers on tokio, Nagle off): against the published crate this fails to compile.
const _: () = zookeeper_client::ZKLOCK_TOKIO_IO_PATCH;

pub use crate::acl::{Acl, AclEntry, Perms};
pub use crate::client::{
    Client, ClientOptions, ConnectWarning, SessionState, StateChanges, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT,
};
pub use crate::dispatch::CallbackDispatcher;
pub use crate::engine::{LocksUnder, REMOVAL_GRACE, TRY_BOUND};
pub use crate::error::{printable, Error, ErrorKind, Result};
pub use crate::hold::{first_loss, Hold, HoldState, HoldStateChanges};
pub use crate::lock::{Acquire, Acquired, Identity, Lock, LockGuard, LockOptions, Participant};
pub use crate::lost_callbacks::LostSubscription;
#[doc(hidden)]
pub use crate::memory::times_given_back;
pub use crate::multi_lock::{Member, MemberKind, MemberLost, MultiGuard, MultiLock};
pub use crate::owners::Owner;
pub use crate::policy::{Mode, PathRecipe};
#[doc(hidden)]
pub use crate::rwlock::ReadWriteLock;
pub use crate::sasl::{GssapiOptions, SaslOptions};
pub use crate::semaphore::{Lease, Leases, MaxLeases, Semaphore, SemaphoreOptions, SemaphoreParticipants};
pub use crate::session::LostReason;
pub use crate::tls::TlsOptions;
pub use crate::validate::{check_lock_path, check_prefix, DEFAULT_JUTE_MAXBUFFER};
