//! The public [`Client`]: the recipes' factory over one connection.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::connection::{ClientInner, ClientOptions};
use crate::engine::{LockOptions, LocksUnder, MaxLeases, Recipe, Registry, UserHandles};
use crate::error::{LostReason, Result};
use crate::hold::{first_loss, Hold};
use crate::lock::Lock;
use crate::multi_lock::{Member, MemberLost, MultiLock};
use crate::policy::PathRecipe;
use crate::rwlock::ReadWriteLock;
use crate::semaphore::{Semaphore, SemaphoreOptions};
use crate::session::SessionState;
use crate::validate;

// For the docs' links only.
#[cfg(doc)]
use crate::error::{Error, ErrorKind};

/// A stream of session state changes, from [`Client::state_changes`].
pub struct StateChanges {
    receiver: broadcast::Receiver<SessionState>,
    ended: bool,
}

impl StateChanges {
    /// The next state change, or `None` once [`SessionState::Closed`] was delivered. If this
    /// receiver fell behind, the oldest changes are skipped.
    pub async fn next(&mut self) -> Option<SessionState> {
        while !self.ended {
            match self.receiver.recv().await {
                Ok(state) => {
                    self.ended = state == SessionState::Closed;
                    return Some(state);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
        None
    }
}

/// A ZooKeeper client: one session at a time, shared by every lock made from it. Cheap to clone.
///
/// If the session expires (or the client gives it up after being disconnected too long), the
/// locks held in it are lost, and the next acquisition on this client transparently establishes
/// a new session.
///
/// # Dropping
/// A hold outlives the handles it was taken through for as long as the client lives: a handle
/// made later from the client for the path finds it (see [`Client::lock`]). The client lives as
/// long as any handle through which a hold could be reached: a clone of the `Client`, or
/// anything made from it ([`Lock`], [`ReadWriteLock`], [`Semaphore`], [`MultiLock`]) or given by
/// those ([`crate::LockGuard`], [`crate::Leases`], [`crate::Lease`], [`crate::MultiGuard`], an
/// acquisition in progress). When the last of them is dropped, the client is closed in the
/// background as [`Client::close`] closes it: the session ends, the server deletes its lock nodes
/// at once (so other contenders go ahead), and any hold still held (taken with
/// [`Lock::acquire_for`], or kept with [`crate::LockGuard::into_hold`]) is lost. A [`Hold`] kept
/// alone does not keep the client: nothing can release it through a `Hold`.
///
/// That background close runs on the client's runtime, so it dies with it: handles dropped as
/// `main` returns (the runtime dropped right after) leave the session to expire on the server,
/// and other contenders wait up to its timeout. Call [`Client::close`] before the runtime ends.
#[derive(Clone)]
pub struct Client {
    /// The user's reach into the client: its last clone's drop closes the client.
    pub(crate) handles: Arc<UserHandles>,
}

impl Client {
    /// The client's recipes.
    fn registry(&self) -> &Arc<Registry> {
        &self.handles.registry
    }

    /// The connection under this client's recipes.
    fn inner(&self) -> &Arc<ClientInner> {
        &self.registry().client
    }

    /// Connects with default options. See [`Client::connect_with`].
    pub async fn connect(connect_string: &str) -> Result<Client> {
        Client::connect_with(connect_string, ClientOptions::default()).await
    }

    /// Connects to the ensemble named by `connect_string` (`host:port[,host:port...][/chroot]`)
    /// and establishes a session. Must be called inside a tokio runtime, which then also runs the
    /// session and the background releases.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] for an empty or malformed connect string, a zero timeout,
    ///   a session timeout over 2^31-1 ms, or a `jute_maxbuffer` too small for any lock, before
    ///   any network traffic.
    /// * [`ErrorKind::InvalidArgument`] for [`ClientOptions::tls`] whose CA bundle, client
    ///   certificate or key is not usable PEM (the message never quotes them).
    /// * [`ErrorKind::Timeout`] if no session was established within `connect_timeout`; the
    ///   message names the last cause seen for each host (connection refused, cannot resolve the
    ///   host name, not a ZooKeeper server, a TLS handshake refused ...), and [`Error::path`] is
    ///   the connect string.
    /// * [`ErrorKind::AuthFailed`], at once, if every server refused the TLS handshake for the
    ///   same certificate reason (the server's certificate is not signed by a trusted CA: a wrong
    ///   CA bundle; has expired; does not name the host; the server requires a client
    ///   certificate, or did not accept it): trying again for the connect timeout would not
    ///   change it. The message names the cause for each host.
    /// * [`ErrorKind::ZooKeeper`] (code -101, NoNode) if the chroot does not exist.
    /// * [`ErrorKind::InvalidArgument`] for [`ClientOptions::sasl`] with an empty user or
    ///   principal, a keytab that cannot be read, or (Kerberos) on a host without MIT Kerberos's
    ///   GSS-API library (`libgssapi_krb5.so.2`): the message says what is missing.
    /// * [`ErrorKind::AuthFailed`] if the server rejected the credentials (a wrong SASL user,
    ///   password or principal, or a principal whose tickets could not be had), at once: the
    ///   message says why for each server tried.
    pub async fn connect_with(connect_string: &str, options: ClientOptions) -> Result<Client> {
        // Every error of connecting names the connect string as its path, whatever found it.
        Self::connect_as(connect_string, options).await.map_err(|err| err.with_path(connect_string))
    }

    async fn connect_as(connect_string: &str, options: ClientOptions) -> Result<Client> {
        let client = ClientInner::connect(connect_string, options).await?;
        Ok(Client { handles: UserHandles::new(Registry::new(client)) })
    }

    /// The current session state. After the session expired and before a new one is
    /// established, this is [`SessionState::Expired`].
    pub fn state(&self) -> SessionState {
        *self.inner().state.borrow()
    }

    /// Session state changes from now on, ending after [`SessionState::Closed`]. An expiry is
    /// followed by `Connected` when the next acquisition establishes a new session.
    pub fn state_changes(&self) -> StateChanges {
        let receiver = self.inner().changes.subscribe();
        StateChanges { receiver, ended: self.state() == SessionState::Closed }
    }

    /// The session timeout the server granted to the current session (or the one asked for, if
    /// there is no session right now).
    pub fn session_timeout(&self) -> Duration {
        self.inner().session_timeout_hint()
    }

    /// The current ZooKeeper session id, or `None` if there is none (closed, or expired and not
    /// yet renewed).
    pub fn session_id(&self) -> Option<i64> {
        self.inner().session.read().as_ref().filter(|s| !s.is_over()).map(|s| s.id)
    }

    /// How many of this client's creates await their answers (at most the window's 1,024):
    /// for tests.
    #[doc(hidden)]
    pub fn creates_in_flight(&self) -> usize {
        self.inner().creates_in_flight()
    }

    /// How many lock paths this client keeps a recipe (a lock's state in this process) for: those
    /// with a live handle or a hold. For tests.
    #[doc(hidden)]
    pub fn paths_kept(&self) -> usize {
        self.registry().paths_kept()
    }

    /// A fair, reentrant lock on `path` (relative to the chroot), sharing this client's session.
    /// Nothing is sent to ZooKeeper until the first acquisition. The `Lock`s of one client for
    /// one path (with the same identifier and ACL) are one lock: they share their holds, so an
    /// owner re-enters and releases through any of them, and a hold outlives every handle until
    /// it is released, lost, or the client closes (then `lock(path)` again finds it). Different
    /// owners are separate contenders, as are `Lock`s with another identifier; an owner that
    /// holds the path through one of those is refused with [`ErrorKind::Deadlock`] at once (it
    /// would wait for itself).
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if `path` is not a valid ZooKeeper path, is the root, or
    ///   lies under `/zookeeper`; with [`LockOptions::acl`], for an invalid ACL or one that names
    ///   the authenticated creator on a client without digest auth.
    /// * [`ErrorKind::InvalidArgument`], naming the limit, for input over the limits that keep
    ///   one client from harming a shared server: a path more than [`crate::MAX_PATH_DEPTH`] (64)
    ///   segments deep or whose parents have more than [`crate::MAX_NEW_PARENT_BYTES`] (64 KiB) of
    ///   path, an identifier over [`crate::MAX_IDENTIFIER_BYTES`] (1,024 bytes), an ACL of more
    ///   than [`crate::MAX_ACL_ENTRIES`] (32) entries or with a scheme or id over
    ///   [`crate::MAX_ACL_ID_BYTES`] (1,024 bytes). (An owner label over
    ///   [`crate::MAX_LABEL_BYTES`] is refused at acquire.)
    pub fn lock(&self, path: &str) -> Result<Lock> {
        self.lock_with(path, LockOptions::default())
    }

    /// As [`Client::lock`], with options.
    pub fn lock_with(&self, path: &str, options: LockOptions) -> Result<Lock> {
        validate::lock_path(path, &self.inner().chroot)?;
        Lock::new(&self.handles, path.to_owned(), options)
    }

    /// A fair read/write lock on `path` (Curator's InterProcessReadWriteLock recipe): many
    /// readers at once, or one writer. Validated as [`Client::lock`]; sends nothing.
    pub fn read_write_lock(&self, path: &str) -> Result<ReadWriteLock> {
        self.read_write_lock_with(path, LockOptions::default())
    }

    /// As [`Client::read_write_lock`], with options.
    pub fn read_write_lock_with(&self, path: &str, options: LockOptions) -> Result<ReadWriteLock> {
        validate::lock_path(path, &self.inner().chroot)?;
        Ok(ReadWriteLock::new(Lock::pair(&self.handles, path.to_owned(), options)?))
    }

    /// A counting semaphore on `path` allowing `max_leases` at once: Curator's
    /// InterProcessSemaphoreV2 recipe, node for node (see [`crate::Semaphore`]). Validated as
    /// [`Client::lock`]; sends nothing. With max 1 it is Curator's InterProcessSemaphoreMutex.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if `max_leases` is 0, or `path` is not a lock path (within
    ///   the limits [`Client::lock`] names; with its parts `<path>/locks` and `<path>/leases` and
    ///   a shared count, its parents within [`crate::MAX_NEW_PARENTS`] and
    ///   [`crate::MAX_NEW_PARENT_BYTES`]), or a label over [`crate::MAX_LABEL_BYTES`]. An
    ///   acquisition of more than [`crate::MAX_LEASES_PER_ACQUISITION`] (1,024) leases is refused.
    pub fn semaphore(&self, path: &str, max_leases: u32) -> Result<Semaphore> {
        self.semaphore_with(path, SemaphoreOptions::new(MaxLeases::Fixed(max_leases)))
    }

    /// As [`Client::semaphore`], with options: among them a max read from a shared count
    /// ([`crate::MaxLeases::SharedCount`]) and an ACL ([`crate::SemaphoreOptions::acl`], refused
    /// here as [`Client::lock_with`] refuses a lock's).
    pub fn semaphore_with(&self, path: &str, options: SemaphoreOptions) -> Result<Semaphore> {
        validate::lock_path(path, &self.inner().chroot)?;
        Semaphore::new(&self.handles, path.to_owned(), options)
    }

    /// A multi-lock over `members` (see [`crate::MultiLock`]): taken together in one canonical
    /// order (by path, then kind), under one deadline, all or nothing. Sends nothing.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] for no member, more than [`crate::MAX_MULTI_LOCK_MEMBERS`]
    ///   (256), two members on one path, 0 leases, more leases than a fixed max or than
    ///   [`crate::MAX_LEASES_PER_ACQUISITION`], or members whose parents together are over
    ///   [`crate::MAX_NEW_PARENTS`] (1,024) or [`crate::MAX_NEW_PARENT_BYTES`].
    pub fn multi_lock(&self, members: impl IntoIterator<Item = Member>) -> Result<MultiLock> {
        MultiLock::new(members)
    }

    /// Which recipe the nodes at `path` belong to now, and so which locks may use it (see
    /// [`crate::PathRecipe`]; `fits` and `exclusive_mode` answer for a lock about to be taken).
    /// One listing, no node read; for a tool that takes whichever lock a path is (`zklock
    /// exec`), not for a hot path: an acquisition checks the path itself.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if `path` is not a lock path (as [`Client::lock`]).
    pub async fn path_recipe(&self, path: &str) -> Result<PathRecipe> {
        validate::lock_path(path, &self.inner().chroot)?;
        Recipe::new(self.registry().clone(), path.to_owned(), false, LockOptions::default())?.path_recipe().await
    }

    /// The locks at and under `prefix` (the root included), in path order: every node there
    /// whose children include lock nodes of zklock, Curator or kazoo, and every semaphore's path
    /// (whose internal mutex and lease parent are not listed apart). Reads only, one listing
    /// per node visited; for tools (`zklock ls`), not for a hot path.
    pub async fn locks_under(&self, prefix: &str) -> Result<Vec<String>> {
        validate::check_prefix(prefix)?;
        Recipe::new(self.registry().clone(), prefix.to_owned(), false, LockOptions::default())?.locks_under().await
    }

    /// As [`Client::locks_under`], but a node under `prefix` whose children this client may not
    /// list (its ACL grants no READ; anyone may set the ACL of the open containers zklock makes)
    /// does not end the walk: it is reported in [`crate::LocksUnder::unreadable`], and the rest
    /// is listed. For tools that show what they can (`zklock ls`).
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`], before any traffic, for an invalid prefix; otherwise
    ///   as [`Client::locks_under`], but for the nodes it may not list.
    pub async fn readable_locks_under(&self, prefix: &str) -> Result<LocksUnder> {
        validate::check_prefix(prefix)?;
        Recipe::new(self.registry().clone(), prefix.to_owned(), false, LockOptions::default())?
            .readable_locks_under()
            .await
    }

    /// Ends the session at once: the server deletes every lock node it held, so waiters behind
    /// them proceed immediately rather than after the session timeout. Pending acquisitions fail
    /// with [`ErrorKind::Closed`]; held locks are lost. Idempotent.
    pub async fn close(&self) {
        self.registry().close();
        self.inner().end_session().await;
    }

    /// Whether [`Client::close`] was called (its CloseSession may not be sent yet: see
    /// [`Client::wait_closed`]).
    pub fn is_closed(&self) -> bool {
        self.inner().is_closed()
    }

    /// Blocks until a [`Client::close`] of this client is over (its CloseSession sent and
    /// answered, or given up: the server silent past the session timeout, or the close dropped),
    /// or until `deadline`; true if it was over in time. A client nobody closes is waited for
    /// until `deadline` (false). For exit hooks, whose process would otherwise end before a close
    /// already in flight has sent its CloseSession, leaving the session's lock nodes to the
    /// session timeout. Blocks the calling thread: never call it on the runtime's threads.
    pub fn wait_closed(&self, deadline: std::time::Instant) -> bool {
        self.inner().wait_closed(deadline)
    }
}

impl Lock {
    /// The client this lock was made from.
    pub fn client(&self) -> Client {
        Client { handles: self.handles.clone() }
    }
}

impl Semaphore {
    /// The client this semaphore was made from (for the C ABI).
    #[cfg(feature = "ffi")]
    pub(crate) fn client(&self) -> Client {
        self.mutex().client()
    }
}

/// What the bindings (the C ABI, Python, Node) need of a [`Client`] beyond its public API: the
/// callback thread every user callback runs on, and the lost-hold watches behind their lost
/// callbacks. Hidden from the docs; in scope with `use zklock::binding::*`.
#[doc(hidden)]
pub trait ClientBinding {
    /// Runs `callback` on this client's callback thread, after those dispatched before it: the
    /// bindings run every user callback (lost lock, state change) this way, never on the threads
    /// that keep sessions alive. See [`crate::dispatch::CallbackDispatcher`].
    fn dispatch_callback(&self, callback: impl FnOnce() + Send + 'static);

    /// Calls `callback` with the reason on this client's callback thread if `hold` is lost;
    /// never once it is released. One light task per hold: the bindings give each new hold
    /// (`Acquired::Held`, not a re-entry) one, for their lost-lock callbacks.
    fn on_hold_lost(&self, hold: Hold, callback: impl FnOnce(LostReason) + Send + 'static);

    /// Calls `callback` with the first member of a multi-lock's guard to be lost, once, on this
    /// client's callback thread; never if they are all released. `loss` is the guard's
    /// `MultiGuardBinding::first_member_loss`, taken while the caller still has the guard.
    fn on_member_lost(
        &self,
        loss: impl std::future::Future<Output = Option<MemberLost>> + Send + 'static,
        callback: impl FnOnce(MemberLost) + Send + 'static,
    );

    /// Calls `callback` with the index and reason of the first of `holds` to be lost (a set
    /// taken together: leases, a multi-lock's members), once, on this client's callback thread;
    /// never if they are all released.
    fn on_first_loss(&self, holds: Vec<Hold>, callback: impl FnOnce(usize, LostReason) + Send + 'static);
}

impl ClientBinding for Client {
    fn dispatch_callback(&self, callback: impl FnOnce() + Send + 'static) {
        self.inner().dispatch(callback);
    }

    fn on_hold_lost(&self, hold: Hold, callback: impl FnOnce(LostReason) + Send + 'static) {
        self.inner().when_lost(async move { hold.lost().await }, callback);
    }

    fn on_member_lost(
        &self,
        loss: impl std::future::Future<Output = Option<MemberLost>> + Send + 'static,
        callback: impl FnOnce(MemberLost) + Send + 'static,
    ) {
        self.inner().when_lost(loss, callback);
    }

    fn on_first_loss(&self, holds: Vec<Hold>, callback: impl FnOnce(usize, LostReason) + Send + 'static) {
        self.inner().when_lost(async move { first_loss(&holds).await }, |(index, reason)| callback(index, reason));
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Keeps `target: message` of each warning, where it is the default subscriber.
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<String>>>);

    impl tracing::Subscriber for Warnings {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            *metadata.level() == tracing::Level::WARN
        }

        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }

        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

        fn event(&self, event: &tracing::Event<'_>) {
            struct Message<'a>(&'a mut String);
            impl tracing::field::Visit for Message<'_> {
                fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                    let _ = write!(self.0, "{value:?}");
                }
            }
            let mut message = format!("{}: ", event.metadata().target());
            event.record(&mut Message(&mut message));
            self.0.lock().unwrap().push(message);
        }

        fn enter(&self, _: &tracing::span::Id) {}

        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// Digest auth's password crosses a plaintext connection in clear: connecting so warns,
    /// once, without the password; over TLS, or with SASL alone, it does not.
    #[test]
    fn digest_auth_without_tls_warns_once_at_connect() {
        let warned = |digest_auth: Option<&str>, tls: Option<crate::TlsOptions>| {
            let warnings = Warnings::default();
            let options = ClientOptions {
                digest_auth: digest_auth.map(Into::into),
                tls,
                sasl: digest_auth.is_none().then(|| crate::SaslOptions::digest_md5("alice", "alice-secret")),
                connect_timeout: Duration::from_millis(300),
                ..ClientOptions::default()
            };
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            tracing::subscriber::with_default(warnings.clone(), || {
                // Nothing listens there: the connect fails, after the warning.
                let _ = runtime.block_on(Client::connect_with("127.0.0.1:9", options));
            });
            let all = warnings.0.lock().unwrap().clone();
            all.into_iter().filter(|warning| warning.starts_with("zklock: ")).collect::<Vec<_>>()
        };
        let plaintext = warned(Some("alice:alice-secret"), None);
        assert_eq!(plaintext.len(), 1, "{plaintext:?}");
        assert!(plaintext[0].contains("in clear") && plaintext[0].contains("TLS"), "{plaintext:?}");
        assert!(!plaintext[0].contains("alice-secret"), "{plaintext:?}");
        assert_eq!(
            warned(Some("alice:alice-secret"), Some(crate::TlsOptions::without_verification())),
            Vec::<String>::new()
        );
        assert_eq!(warned(None, None), Vec::<String>::new(), "SASL sends no password");
    }
}
