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
//! ## Timeouts and deadlines
//! Every acquisition (a lock, either side of a read/write lock, semaphore leases, a multi-lock)
//! takes one timeout, spelled in each language as follows:
//!
//! | waits | Rust | C (`timeout_ms`) | Python (`timeout`, seconds) | Node (`timeoutMs`) | `zklock` |
//! |---|---|---|---|---|---|
//! | as long as it takes | `acquire`; `None` | `-1` | `None`, `-1` (as `threading`'s) or `math.inf` | left out, `null` or `Infinity` | neither `-n` nor `-w` |
//! | not at all: only tries | `try_acquire`; `Some(ZERO)` | `0` | `0`, or `blocking=False` | `0` | `-n` |
//! | at most a while | `acquire_timeout(d)`; `Some(d)` | ms, up to 2^63-1 | seconds (a float) | ms, an integer up to 2^31-1 | `-w SECS` |
//!
//! Anything else (C: below -1; Python: another negative; Node: any negative, `-1` included, since
//! a remaining time computed in ms is `-1` when it is 1 ms late, and a non-integer) is refused
//! with [`ErrorKind::InvalidArgument`] before any traffic.
//!
//! What each promises, the server reachable or not:
//! * **As long as it takes**: it outlasts any outage (queueing again on new sessions), until it
//!   holds, the client is closed, or it is aborted.
//! * **A try** answers within [`TRY_BOUND`] (2 s): held, busy (`None`, `false`, `ZKL_TIMEOUT`,
//!   `null`: someone else holds), or, if ZooKeeper could not be reached in that time (a stalled or
//!   cut connection, no server up, a session that could not be re-established),
//!   [`ErrorKind::ConnectionLoss`]: never "busy", nor an expired session, for a server that did
//!   not answer. A listing ([`Lock::contenders`], [`Lock::holder`], [`Lock::holders`],
//!   [`Semaphore::participants`], [`Client::path_recipe`], the shared count; `zklock status`)
//!   answers or says the same once it went unanswered for [`TRY_BOUND`] or the connection's read
//!   timeout (2/5 of the session timeout), whichever is longer: a long queue's reads, which a
//!   loaded server answers batch after batch, are not cut off.
//! * **At most a while**: answers (not acquired) within [`REMOVAL_GRACE`] (100 ms) of its deadline
//!   (measured over 100 calls of every recipe during a stalled and a cut connection,
//!   `core/tests/deadline.rs`: p99 overshoot 102 ms when the calls wait out the grace for their
//!   nodes' removal, a few ms when they had no create in flight; before, 2 s).
//!
//! Whatever the caller gave up on, the nodes it made are removed: before it returns when the
//! server confirms in time, else in the background, retried until the node or its session is gone.
//! Nothing is orphaned.
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
#[doc(hidden)]
pub mod binding;
mod client;
mod connection;
mod dispatch;
mod engine;
mod error;
#[cfg(feature = "ffi")]
pub mod ffi;
mod hold;
mod lock;
mod lost_callbacks;
mod memory;
mod mode;
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
pub use crate::client::{Client, StateChanges};
pub use crate::connection::{ClientOptions, ConnectWarning, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};
pub use crate::dispatch::CallbackDispatcher;
pub use crate::engine::{Identity, LockOptions, LocksUnder, MaxLeases, Participant, REMOVAL_GRACE, TRY_BOUND};
pub use crate::error::{printable, Error, ErrorKind, LostReason, Result};
pub use crate::hold::{first_loss, Hold, HoldState, HoldStateChanges};
#[doc(hidden)]
pub use crate::lock::Acquire;
pub use crate::lock::{Acquired, Lock, LockGuard};
pub use crate::lost_callbacks::LostSubscription;
#[doc(hidden)]
pub use crate::memory::times_given_back;
pub use crate::mode::Mode;
pub use crate::multi_lock::{Member, MemberKind, MemberLost, MultiGuard, MultiLock};
pub use crate::owners::Owner;
pub use crate::policy::PathRecipe;
#[doc(hidden)]
pub use crate::rwlock::ReadWriteLock;
pub use crate::sasl::{GssapiOptions, SaslOptions};
pub use crate::semaphore::{Lease, Leases, Semaphore, SemaphoreOptions, SemaphoreParticipants};
pub use crate::session::SessionState;
pub use crate::tls::TlsOptions;
pub use crate::validate::{
    check_label, check_lock_path, check_prefix, DEFAULT_JUTE_MAXBUFFER, MAX_ACL_ENTRIES, MAX_ACL_ID_BYTES,
    MAX_IDENTIFIER_BYTES, MAX_LABEL_BYTES, MAX_LEASES_PER_ACQUISITION, MAX_MULTI_LOCK_MEMBERS, MAX_NEW_PARENTS,
    MAX_NEW_PARENT_BYTES, MAX_PATH_DEPTH,
};
