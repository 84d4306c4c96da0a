//! The C ABI: `zkl_*` functions over opaque handles (`zkl_client`, `zkl_lock`, `zkl_semaphore`,
//! `zkl_leases`, `zkl_multi_lock`, `zkl_multi_guard`), declared in
//! `include/zklock.h` (generated from this module by `scripts/gen-header`).
//!
//! Shaped like hyper's `src/ffi` and rustls-ffi: every entry point runs inside a panic boundary
//! (`ffi_result!`, `ffi_value!`), checks its pointers first (`non_null!`), and reports a
//! `#[repr(C)]` [`zkl_result`] with stable numbers plus a thread-local message.
//!
//! Handles are not pointers to memory: they are ids, never reused in a process, that every call
//! looks up in a registry (`handles`). So a closed client or a freed lock is *detected*
//! (`ZKL_INVALID_ARGUMENT`) instead of being a dangling pointer, as the C contract promises.
//!
//! All calls block the calling thread on one process-wide tokio runtime (`runtime`), which
//! owns the sessions and watches and runs the callbacks.

// C names (`zkl_client`, `ZKL_OK`) are the ABI.
#![allow(non_camel_case_types)]
// Entry points are safe `extern "C"` functions whose pointer contracts are documented for C in
// the header; Rust callers are not the audience.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[cfg(not(unix))]
compile_error!("the zklock C ABI (feature \"ffi\") supports Unix only: it relies on pthread_atfork");

#[macro_use]
mod macros;
mod callback;
mod client;
mod convert;
mod error;
mod handles;
mod lock;
mod multi_lock;
mod owner;
mod participants;
mod runtime;
mod semaphore;

pub use self::client::{
    zkl_client, zkl_options, zkl_session_callback, zkl_session_state, ZKL_TLS_NO_VERIFY, ZKL_TLS_OFF,
    ZKL_TLS_VERIFY_CA, ZKL_TLS_VERIFY_FULL,
};
pub use self::error::zkl_result;
pub use self::lock::{
    zkl_acl_entry, zkl_hold_state, zkl_lock, zkl_lock_options, zkl_lost_callback, zkl_lost_reason, ZKL_ACL_CREATOR_ALL,
    ZKL_ACL_CREATOR_ALL_WORLD_READ, ZKL_ACL_CUSTOM, ZKL_ACL_OPEN, ZKL_PERM_ADMIN, ZKL_PERM_ALL, ZKL_PERM_CREATE,
    ZKL_PERM_DELETE, ZKL_PERM_READ, ZKL_PERM_WRITE,
};
pub use self::multi_lock::{
    zkl_member_kind, zkl_multi_guard, zkl_multi_lock, zkl_multi_lost_callback, zkl_multi_member,
};
pub use self::participants::{zkl_participant, zkl_participants, zkl_semaphore_listing};
pub use self::semaphore::{zkl_lease_lost_callback, zkl_leases, zkl_semaphore, zkl_semaphore_options};
