//! The options of a lock path's recipe, as the engine takes them ([`LockOptions`]).

use std::sync::Arc;

use crate::acl::Acl;

/// Options for [`crate::Client::lock_with`].
#[derive(Clone, Default)]
pub struct LockOptions {
    /// Recorded in each lock node's identity, like kazoo's `identifier`: at most
    /// [`crate::MAX_IDENTIFIER_BYTES`] (1,024) bytes.
    pub identifier: Option<String>,
    /// Who may queue for, delete in and read the lock: [`Acl::Open`] (to anyone) by default.
    /// The lock path and every lock node get it; see [`Acl`] for what is protected, and how.
    /// An ACL that names the authenticated creator needs [`crate::ClientOptions::digest_auth`]:
    /// without it the lock is refused with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) before any traffic.
    pub acl: Acl,
    /// A handle of its own: its holds are not shared with the client's other handles for the
    /// path (see [`crate::Client::lock`]), for a binding whose freed handle releases the holds
    /// taken through it (C's `zkl_lock_free`). Default false.
    pub separate: bool,
    /// Test seam: runs with the predecessor's path after the listing and before the watch is
    /// set, so tests can make the predecessor vanish in exactly that window.
    #[doc(hidden)]
    pub before_watch: Option<BeforeWatch>,
}

#[doc(hidden)]
pub type BeforeWatch = Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

impl std::fmt::Debug for LockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockOptions")
            .field("identifier", &self.identifier)
            .field("acl", &self.acl)
            .field("separate", &self.separate)
            .finish_non_exhaustive()
    }
}
