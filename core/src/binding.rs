//! What the bindings (the C ABI, Python, Node) build on beyond the public API, in one place:
//! their reentrant fast paths, nested releases, condition-variable levels, the rules of handles
//! and flows that answer for several owners, and the lost-hold watches behind their callbacks.
//! Hidden from the crate's docs: a Rust user has the guards, timeouts and callbacks of the
//! public API instead. A binding brings it all in scope with `use zklock::binding::*;`.

pub use crate::client::ClientBinding;
pub use crate::hold::{HeldTogether, Releasable};
pub use crate::lock::{Acquire, LockBinding};
pub use crate::multi_lock::{MultiGuardBinding, MultiLockBinding};
pub use crate::owners::OwnerBinding;
pub use crate::semaphore::SemaphoreBinding;
