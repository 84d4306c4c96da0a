//! One ZooKeeper session, shared by every lock made from it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::dispatch::CallbackDispatcher;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::{Hold, NodeWatcher};
use crate::lock::{AttemptIds, Lock, LockOptions};
use crate::session::Session;
use crate::validate;
use crate::LostReason;

/// [`ClientOptions::session_timeout`]'s default, 10 s: the one place every binding and the
/// `zklock` command take it from.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// [`ClientOptions::connect_timeout`]'s default, 10 s: the one place every binding and the
/// `zklock` command take it from.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many of a client's creates may await their answers at once. Enough to keep a link's
/// pipeline full (the server answers one session's requests in turn anyway); bounded so that
/// 10,000 acquisitions started together do not each hold a create's request and reply handling.
pub(crate) const CREATE_WINDOW: usize = 1024;

/// Options for [`Client::connect`]. Start from `ClientOptions::default()` and set fields.
/// `Debug` shows no secret (no password, no private key).
#[derive(Clone)]
pub struct ClientOptions {
    /// The session timeout asked of the server (which may clamp it to its own bounds). A holder
    /// that stays disconnected this long loses its locks. Default [`DEFAULT_SESSION_TIMEOUT`].
    pub session_timeout: Duration,
    /// How long [`Client::connect`] tries to establish the session. Default
    /// [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// Digest credentials as `"user:password"`, sent as the `digest` auth scheme. They cross
    /// the connection as they are: without [`ClientOptions::tls`] anyone on the path reads the
    /// password (connecting then warns: [`ClientOptions::connect_warnings`]); SASL DIGEST-MD5
    /// never sends it. The server accepts any digest credentials, so a wrong password connects
    /// too: it only gets no rights under ACLs that name the user.
    pub digest_auth: Option<String>,
    /// The language recorded in each lock node's identity; the bindings set their own.
    pub language: Cow<'static, str>,
    /// The servers' packet limit (their `jute.maxbuffer`), default
    /// [`DEFAULT_JUTE_MAXBUFFER`](crate::DEFAULT_JUTE_MAXBUFFER). A server closes the connection
    /// of a client that sends a larger request, so a lock whose path, identifier or owner label
    /// would make one is refused up front with [`ErrorKind::InvalidArgument`]. Replies are taken
    /// up to this size or 4 MiB, whichever is larger: a larger reply (only a broken or hostile
    /// server sends one) drops the connection instead of being buffered.
    pub jute_maxbuffer: u32,
    /// TLS to every server of the connect string (their `secureClientPort`), with the server
    /// certificates verified against a CA bundle and, unless turned off, their host names
    /// checked; a client certificate for mutual TLS. `None` (the default): plaintext.
    pub tls: Option<crate::TlsOptions>,
    /// SASL authentication on every connection: DIGEST-MD5 (a user and password) or Kerberos
    /// (GSSAPI). The servers then know the client as `sasl:<identity>` too, which the ACL
    /// presets' creator means. `None` (the default): no SASL.
    pub sasl: Option<crate::SaslOptions>,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self.digest_auth.as_deref().map(|auth| auth.split(':').next().unwrap_or_default());
        f.debug_struct("ClientOptions")
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("digest_auth", &user.map(|user| format!("{user}:<redacted>")))
            .field("language", &self.language)
            .field("jute_maxbuffer", &self.jute_maxbuffer)
            .field("tls", &self.tls)
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// What connecting with some [`ClientOptions`] puts at risk, said once per client: the one rule
/// behind the `tracing` warning and the bindings' own (Python's `zklock.SecurityWarning`, Node's
/// `process.emitWarning`). See [`ClientOptions::connect_warnings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectWarning {
    /// Digest auth without TLS: the digest scheme's addauth carries `"user:password"` as is,
    /// readable by anyone on the path.
    CleartextPassword,
}

impl ConnectWarning {
    /// The warning's text, the same in every language (it never quotes a secret).
    pub const fn message(self) -> &'static str {
        match self {
            ConnectWarning::CleartextPassword => {
                "digest auth over a plaintext connection: the password crosses the network in clear \
                 (use TLS, or SASL instead of digest auth)"
            }
        }
    }
}

impl std::fmt::Display for ConnectWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl ClientOptions {
    /// The warnings connecting with these options deserves (empty for safe ones): digest auth
    /// without TLS ([`ConnectWarning::CleartextPassword`]). [`Client::connect_with`] emits each
    /// as a `tracing` warning (target `zklock`); the bindings, which users run without a
    /// `tracing` subscriber, emit them their language's way.
    pub fn connect_warnings(&self) -> Vec<ConnectWarning> {
        let mut warnings = Vec::new();
        if self.digest_auth.is_some() && self.tls.is_none() {
            warnings.push(ConnectWarning::CleartextPassword);
        }
        warnings
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            digest_auth: None,
            language: Cow::Borrowed("rust"),
            jute_maxbuffer: validate::DEFAULT_JUTE_MAXBUFFER,
            tls: None,
            sasl: None,
        }
    }
}

/// The state of a client's ZooKeeper session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionState {
    /// Connected to a server; the session is live.
    Connected,
    /// The connection is down; the session may still be live on the servers.
    Disconnected,
    /// The session expired (or the client gave it up after being disconnected for too long):
    /// its locks are lost. The next acquisition establishes a new session.
    Expired,
    /// The servers rejected the credentials.
    AuthFailed,
    /// The client was closed. Nothing follows.
    Closed,
}

impl SessionState {
    /// The state's stable snake_case name: `connected`, `disconnected`, `expired`,
    /// `auth_failed`, `closed` (each binding shows these, in its own case style).
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionState::Connected => "connected",
            SessionState::Disconnected => "disconnected",
            SessionState::Expired => "expired",
            SessionState::AuthFailed => "auth_failed",
            SessionState::Closed => "closed",
        }
    }

    /// Whether the session in this state is over (a client may go on with a new one, unless
    /// closed).
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
    }
}

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
/// Dropping the last clone and the last [`Lock`] ends the session, as [`Client::close`] does.
///
/// If the session expires (or the client gives it up after being disconnected too long), the
/// locks held in it are lost, and the next acquisition on this client transparently establishes
/// a new session.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    /// The current session; `None` before the first one, after one ended, and once closed.
    session: RwLock<Option<Arc<Session>>>,
    /// Serializes establishing a new session.
    renewing: tokio::sync::Mutex<()>,
    connect_string: String,
    pub(crate) options: ClientOptions,
    /// `options.tls` as the ZooKeeper client takes it, checked at connect.
    tls: Option<zk::TlsOptions>,
    /// `options.sasl` as the ZooKeeper client takes it, checked at connect.
    sasl: Option<zk::SaslOptions>,
    /// Who the servers know this client as, as far as its options tell: for the checks before
    /// any traffic (a session learns it from the server: `Session::identities`).
    pub(crate) identities: crate::acl::Identities,
    pub(crate) chroot: String,
    /// Wakes everything waiting when the client is closed.
    pub(crate) closed: Closed,
    /// Whether the close that ends the session is over (see [`Client::wait_closed`]).
    close_done: CloseDone,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) identity: Arc<HostIdentity>,
    pub(crate) node_watcher: Arc<NodeWatcher>,
    pub(crate) attempt_ids: AttemptIds,
    /// The exclusive and write nodes this client's holders released, for the handoff without a
    /// listing (see `engine`).
    pub(crate) released: crate::engine::ReleasedNodes,
    /// Held from an acquisition's start until its create is sent, so that the creates of one
    /// client reach the server in the order the acquisitions were started: tokio's mutex queues
    /// its waiters first come, first served.
    pub(crate) send_order: tokio::sync::Mutex<()>,
    /// Creates sent and not yet answered, at most [`CREATE_WINDOW`]: taken under the send turn,
    /// so still in start order. A burst of acquisitions then queues small, and the few in
    /// flight reuse the memory of their replies' handling instead of all holding it at once.
    create_window: tokio::sync::Semaphore,
    /// Whether an acquisition found the window full since the window last emptied: a burst
    /// (see [`crate::memory`]).
    window_filled: AtomicBool,
    callbacks: CallbackDispatcher,
    /// The recipes of this client's lock handles, by path: handles for one path (of one kind,
    /// with the same options) share one recipe, and so their holds. Indexed by path, so that
    /// making a handle and checking an acquisition look at that path's few recipes, not at every
    /// path's (issue 52: 10,000 locks on one client); a recipe removes its path's entry as it is
    /// dropped ([`ClientInner::forget_recipe`]), so nothing is kept for a path once its handles
    /// and holds are gone. No recipe is ever dropped under this mutex (see `forget_recipe`).
    recipes: parking_lot::Mutex<RecipesByPath>,
    state: watch::Sender<SessionState>,
    changes: broadcast::Sender<SessionState>,
}

/// [`ClientInner::recipes`]: the live recipes of each path (and dead ones until their drop).
type RecipesByPath = std::collections::HashMap<String, Vec<std::sync::Weak<crate::engine::Recipe>>>;

/// The per-process part of every lock node's identity.
#[derive(Debug)]
pub(crate) struct HostIdentity {
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) language: String,
}

impl Client {
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
        let chroot = validate::connect_string(connect_string)?.to_owned();
        validate::session_timeout(options.session_timeout)?;
        validate::positive_timeout(options.connect_timeout, "connect timeout")?;
        if options.jute_maxbuffer < validate::MIN_JUTE_MAXBUFFER {
            return Err(Error::invalid(format!(
                "jute_maxbuffer of {} bytes is too small: a lock request needs at least {} bytes",
                options.jute_maxbuffer,
                validate::MIN_JUTE_MAXBUFFER
            )));
        }
        if let Some(auth) = &options.digest_auth {
            if !auth.contains(':') {
                return Err(Error::invalid("digest auth must be \"user:password\""));
            }
        }
        // The library prints nothing: a tracing event, as the ZooKeeper client's own warnings
        // are, once per client (reconnections do not repeat it).
        for warning in options.connect_warnings() {
            tracing::warn!(target: "zklock", "{warning}");
        }
        let tls = options.tls.as_ref().map(crate::TlsOptions::to_zk).transpose()?;
        let sasl = options.sasl.as_ref().map(crate::SaslOptions::to_zk).transpose()?;
        let identities = crate::acl::Identities::configured(
            options.digest_auth.as_deref(),
            options.sasl.as_ref().map(crate::SaslOptions::identity),
            options.tls.as_ref().is_some_and(|tls| tls.client_cert_pem.is_some()),
        );
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("Client::connect must be called inside a tokio runtime"))?;
        let identity = Arc::new(HostIdentity {
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: std::process::id(),
            language: options.language.clone().into_owned(),
        });
        let closed = Closed::default();
        let node_watcher = NodeWatcher::start(&runtime, closed.token.clone());
        let inner = Arc::new(ClientInner {
            session: RwLock::new(None),
            renewing: tokio::sync::Mutex::new(()),
            connect_string: connect_string.to_owned(),
            options,
            tls,
            sasl,
            identities,
            chroot,
            closed,
            close_done: CloseDone::default(),
            runtime,
            identity,
            node_watcher,
            attempt_ids: AttemptIds::new(),
            released: crate::engine::ReleasedNodes::default(),
            send_order: tokio::sync::Mutex::new(()),
            create_window: tokio::sync::Semaphore::new(CREATE_WINDOW),
            window_filled: AtomicBool::new(false),
            callbacks: CallbackDispatcher::new("zklock-callback"),
            recipes: parking_lot::Mutex::default(),
            state: watch::Sender::new(SessionState::Disconnected),
            changes: broadcast::channel(64).0,
        });
        inner.session("/").await?;
        Ok(Client { inner })
    }

    /// The current session state. After the session expired and before a new one is
    /// established, this is [`SessionState::Expired`].
    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// Session state changes from now on, ending after [`SessionState::Closed`]. An expiry is
    /// followed by `Connected` when the next acquisition establishes a new session.
    pub fn state_changes(&self) -> StateChanges {
        let receiver = self.inner.changes.subscribe();
        StateChanges { receiver, ended: self.state() == SessionState::Closed }
    }

    /// The session timeout the server granted to the current session (or the one asked for, if
    /// there is no session right now).
    pub fn session_timeout(&self) -> Duration {
        self.inner.session_timeout_hint()
    }

    /// The current ZooKeeper session id, or `None` if there is none (closed, or expired and not
    /// yet renewed).
    pub fn session_id(&self) -> Option<i64> {
        self.inner.session.read().as_ref().filter(|s| !s.is_over()).map(|s| s.id)
    }

    /// How many of this client's creates await their answers (at most the window's 1,024):
    /// for tests.
    #[doc(hidden)]
    pub fn creates_in_flight(&self) -> usize {
        self.inner.creates_in_flight()
    }

    /// How many lock paths this client keeps a recipe (a lock's state in this process) for: those
    /// with a live handle or a hold. For tests.
    #[doc(hidden)]
    pub fn paths_kept(&self) -> usize {
        self.inner.recipes.lock().len()
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
        validate::lock_path(path, &self.inner.chroot)?;
        Lock::new(&self.inner, path.to_owned(), options)
    }

    /// A fair read/write lock on `path` (Curator's InterProcessReadWriteLock recipe): many
    /// readers at once, or one writer. Validated as [`Client::lock`]; sends nothing.
    pub fn read_write_lock(&self, path: &str) -> Result<crate::ReadWriteLock> {
        self.read_write_lock_with(path, LockOptions::default())
    }

    /// As [`Client::read_write_lock`], with options.
    pub fn read_write_lock_with(&self, path: &str, options: LockOptions) -> Result<crate::ReadWriteLock> {
        validate::lock_path(path, &self.inner.chroot)?;
        Ok(crate::ReadWriteLock::new(Lock::pair(&self.inner, path.to_owned(), options)?))
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
    pub fn semaphore(&self, path: &str, max_leases: u32) -> Result<crate::Semaphore> {
        self.semaphore_with(path, crate::SemaphoreOptions::new(crate::MaxLeases::Fixed(max_leases)))
    }

    /// As [`Client::semaphore`], with options: among them a max read from a shared count
    /// ([`crate::MaxLeases::SharedCount`]) and an ACL ([`crate::SemaphoreOptions::acl`], refused
    /// here as [`Client::lock_with`] refuses a lock's).
    pub fn semaphore_with(&self, path: &str, options: crate::SemaphoreOptions) -> Result<crate::Semaphore> {
        validate::lock_path(path, &self.inner.chroot)?;
        crate::Semaphore::new(&self.inner, path.to_owned(), options)
    }

    /// A multi-lock over `members` (see [`crate::MultiLock`]): taken together in one canonical
    /// order (by path, then kind), under one deadline, all or nothing. Sends nothing.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] for no member, more than [`crate::MAX_MULTI_LOCK_MEMBERS`]
    ///   (256), two members on one path, 0 leases, more leases than a fixed max or than
    ///   [`crate::MAX_LEASES_PER_ACQUISITION`], or members whose parents together are over
    ///   [`crate::MAX_NEW_PARENTS`] (1,024) or [`crate::MAX_NEW_PARENT_BYTES`].
    pub fn multi_lock(&self, members: impl IntoIterator<Item = crate::Member>) -> Result<crate::MultiLock> {
        crate::MultiLock::new(members)
    }

    /// Which recipe the nodes at `path` belong to now, and so which locks may use it (see
    /// [`crate::PathRecipe`]; `fits` and `exclusive_mode` answer for a lock about to be taken).
    /// One listing, no node read; for a tool that takes whichever lock a path is (`zklock
    /// exec`), not for a hot path: an acquisition checks the path itself.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if `path` is not a lock path (as [`Client::lock`]).
    pub async fn path_recipe(&self, path: &str) -> Result<crate::PathRecipe> {
        validate::lock_path(path, &self.inner.chroot)?;
        crate::engine::Recipe::new(self.inner.clone(), path.to_owned(), false, LockOptions::default())?
            .path_recipe()
            .await
    }

    /// The locks at and under `prefix` (the root included), in path order: every node there
    /// whose children include lock nodes of zklock, Curator or kazoo, and every semaphore's path
    /// (whose internal mutex and lease parent are not listed apart). Reads only, one listing
    /// per node visited; for tools (`zklock ls`), not for a hot path.
    pub async fn locks_under(&self, prefix: &str) -> Result<Vec<String>> {
        validate::check_prefix(prefix)?;
        crate::engine::Recipe::new(self.inner.clone(), prefix.to_owned(), false, LockOptions::default())?
            .locks_under()
            .await
    }

    /// As [`Client::locks_under`], but a node under `prefix` whose children this client may not
    /// list (its ACL grants no READ; anyone may set the ACL of the open containers zklock makes)
    /// does not end the walk: it is reported in [`crate::LocksUnder::unreadable`], and the rest
    /// is listed. For tools that show what they can (`zklock ls`).
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`], before any traffic, for an invalid prefix; otherwise
    ///   as [`Client::locks_under`], but for the nodes it may not list.
    pub async fn readable_locks_under(&self, prefix: &str) -> Result<crate::LocksUnder> {
        validate::check_prefix(prefix)?;
        crate::engine::Recipe::new(self.inner.clone(), prefix.to_owned(), false, LockOptions::default())?
            .readable_locks_under()
            .await
    }

    /// Ends the session at once: the server deletes every lock node it held, so waiters behind
    /// them proceed immediately rather than after the session timeout. Pending acquisitions fail
    /// with [`ErrorKind::Closed`]; held locks are lost. Idempotent.
    pub async fn close(&self) {
        self.inner.closed.close();
        // Every hold is lost now: the recipes need not outlive their handles any more. Taken out
        // first: unpinning may drop a recipe, whose drop takes the mutex.
        let recipes = std::mem::take(&mut *self.inner.recipes.lock());
        for recipe in recipes.into_values().flatten().filter_map(|recipe| recipe.upgrade()) {
            recipe.unpin();
        }
        let session = {
            let mut session = self.inner.session.write();
            let taken = session.take();
            if taken.is_some() {
                self.inner.close_done.taken.store(true, Ordering::Release);
            }
            taken
        };
        let Some(session) = session else {
            if self.inner.close_done.taken.load(Ordering::Acquire) {
                // Another close() is ending the session: this one returns when that one is over,
                // so that a close awaited after one that was not (or an exit hook) really waits.
                self.inner.close_done.wait().await;
            } else {
                self.inner.publish(SessionState::Closed);
                self.inner.close_done.finish();
            }
            return;
        };
        // Over when this returns, or when it is given up (the future dropped).
        let _finish = FinishOnDrop(&self.inner.close_done);
        let mut states = session.zk.state_watcher();
        let timeout = session.timeout;
        drop(session);
        // Everything else holding the session handle lets go of it on `closed`; the session then
        // sends CloseSession and reports Closed once the server acknowledged it.
        let closed = async {
            while !states.peek_state().is_terminated() {
                states.changed().await;
            }
        };
        let _ = tokio::time::timeout(timeout, closed).await;
        self.inner.publish(SessionState::Closed);
    }

    /// Whether [`Client::close`] was called (its CloseSession may not be sent yet: see
    /// [`Client::wait_closed`]).
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Blocks until a [`Client::close`] of this client is over (its CloseSession sent and
    /// answered, or given up: the server silent past the session timeout, or the close dropped),
    /// or until `deadline`; true if it was over in time. A client nobody closes is waited for
    /// until `deadline` (false). For exit hooks, whose process would otherwise end before a close
    /// already in flight has sent its CloseSession, leaving the session's lock nodes to the
    /// session timeout. Blocks the calling thread: never call it on the runtime's threads.
    pub fn wait_closed(&self, deadline: std::time::Instant) -> bool {
        self.inner.close_done.wait_until(deadline)
    }

    /// Runs `callback` on this client's callback thread, after those dispatched before it: the
    /// bindings run every user callback (lost lock, state change) this way, never on the threads
    /// that keep sessions alive. See [`CallbackDispatcher`].
    pub fn dispatch_callback(&self, callback: impl FnOnce() + Send + 'static) {
        self.inner.dispatch(callback);
    }

    /// Calls `callback` with the reason on this client's callback thread if `hold` is lost;
    /// never once it is released. One light task per hold: the bindings give each new hold
    /// ([`crate::Acquired::Held`], not a re-entry) one, for their lost-lock callbacks.
    pub fn on_hold_lost(&self, hold: Hold, callback: impl FnOnce(LostReason) + Send + 'static) {
        self.when_lost(async move { hold.lost().await }, callback);
    }

    /// Calls `callback` with the first member of a multi-lock's guard to be lost, once, on this
    /// client's callback thread; never if they are all released. `loss` is the guard's
    /// [`crate::MultiGuard::first_member_loss`], taken while the caller still has the guard.
    pub fn on_member_lost(
        &self,
        loss: impl std::future::Future<Output = Option<crate::MemberLost>> + Send + 'static,
        callback: impl FnOnce(crate::MemberLost) + Send + 'static,
    ) {
        self.when_lost(loss, callback);
    }

    /// Calls `callback` with the index and reason of the first of `holds` to be lost (a set
    /// taken together: leases, a multi-lock's members), once, on this client's callback thread;
    /// never if they are all released.
    pub fn on_first_loss(&self, holds: Vec<Hold>, callback: impl FnOnce(usize, LostReason) + Send + 'static) {
        self.when_lost(async move { crate::hold::first_loss(&holds).await }, |(index, reason)| callback(index, reason));
    }

    /// Runs `loss` on the runtime and, if it finds a loss, `callback` with it on the callback
    /// thread.
    pub(crate) fn when_lost<T: Send + 'static>(
        &self,
        loss: impl std::future::Future<Output = Option<T>> + Send + 'static,
        callback: impl FnOnce(T) + Send + 'static,
    ) {
        let client = self.clone();
        self.inner.runtime.spawn(async move {
            if let Some(lost) = loss.await {
                client.dispatch_callback(move || callback(lost));
            }
        });
    }
}

/// Whether the client was closed (or dropped): the token wakes those waiting, and the flag
/// answers the reentrant fast path, as the token's own check takes a mutex.
#[derive(Clone, Default)]
pub(crate) struct Closed {
    token: CancellationToken,
    flag: Arc<AtomicBool>,
}

impl Closed {
    fn close(&self) {
        self.flag.store(true, Ordering::Release);
        crate::hold::note_loss();
        self.token.cancel();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }
}

/// Whether the close that ends a client's session is over: for [`Client::wait_closed`], which
/// blocks, and for a second [`Client::close`], which awaits.
#[derive(Default)]
struct CloseDone {
    /// A close() took the session: it finishes.
    taken: AtomicBool,
    done: parking_lot::Mutex<bool>,
    condvar: parking_lot::Condvar,
    notify: tokio::sync::Notify,
}

impl CloseDone {
    fn finish(&self) {
        *self.done.lock() = true;
        self.condvar.notify_all();
        self.notify.notify_waiters();
    }

    fn wait_until(&self, deadline: std::time::Instant) -> bool {
        let mut done = self.done.lock();
        while !*done {
            if self.condvar.wait_until(&mut done, deadline).timed_out() {
                return *done;
            }
        }
        true
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if *self.done.lock() {
                return;
            }
            notified.await;
        }
    }
}

/// Finishes a [`CloseDone`] when dropped: at the end of the close that took the session, or when
/// that close is given up.
struct FinishOnDrop<'a>(&'a CloseDone);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// The last handle is gone: everything still waiting on this client stops, and the session ends;
/// the passwords it kept go with it, overwritten (the caller's own copies are the caller's).
impl Drop for ClientInner {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.closed.close();
        self.options.digest_auth.zeroize();
        if let Some(tls) = self.options.tls.as_mut() {
            tls.client_key_password.zeroize();
        }
        if let Some(crate::SaslOptions::DigestMd5 { password, .. }) = self.options.sasl.as_mut() {
            password.zeroize();
        }
    }
}

/// A place in a client's window of creates in flight (see `ClientInner::create_window`), given
/// back when dropped. The last place given back after a burst filled the window gives the
/// memory of the burst's creates back to the system (see [`crate::memory`]).
pub(crate) struct CreateSlot<'a> {
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
    client: &'a ClientInner,
}

impl Drop for CreateSlot<'_> {
    fn drop(&mut self) {
        drop(self.permit.take());
        if self.client.creates_in_flight() == 0 && self.client.window_filled.swap(false, Ordering::Relaxed) {
            self.client.dispatch(crate::memory::give_back);
        }
    }
}

impl ClientInner {
    /// Creates sent and not yet answered: the window's places taken.
    fn creates_in_flight(&self) -> usize {
        CREATE_WINDOW - self.create_window.available_permits()
    }

    /// A place in the window of creates in flight, if one is free now.
    pub(crate) fn try_create_slot(&self) -> Option<CreateSlot<'_>> {
        let permit = self.create_window.try_acquire().ok()?;
        Some(CreateSlot { permit: Some(permit), client: self })
    }

    /// A place in the window of creates in flight, once one is free.
    pub(crate) async fn create_slot(&self) -> CreateSlot<'_> {
        if self.create_window.available_permits() == 0 {
            self.window_filled.store(true, Ordering::Relaxed);
        }
        let permit = self.create_window.acquire().await.expect("the create window is never closed");
        CreateSlot { permit: Some(permit), client: self }
    }

    /// Runs `job` on the callback thread, after the callbacks dispatched before it.
    pub(crate) fn dispatch(&self, job: impl FnOnce() + Send + 'static) {
        self.callbacks.dispatch(job);
    }

    /// The recipe for a handle on `path`: the one this client's other handles for it use, if
    /// any is alive (held locks keep theirs alive), else a new one.
    pub(crate) fn recipe(
        self: &Arc<Self>,
        path: String,
        read_write: bool,
        options: crate::LockOptions,
    ) -> Result<Arc<crate::engine::Recipe>> {
        // Declared before the guards, so dropped after them: a recipe upgraded here and not
        // shared may be the last of its handles, and its drop takes the mutex.
        let mut looked_at = Vec::new();
        let shared = |recipes: &RecipesByPath, looked_at: &mut Vec<_>| {
            for recipe in recipes.get(&path).into_iter().flatten().filter_map(std::sync::Weak::upgrade) {
                if recipe.serves(&path, read_write, &options) {
                    return Some(recipe);
                }
                looked_at.push(recipe);
            }
            None
        };
        if let Some(shared) = shared(&self.recipes.lock(), &mut looked_at) {
            return Ok(shared);
        }
        // Made outside the mutex: one refused (too long to fit in a request) is dropped at once.
        let recipe = Arc::new(crate::engine::Recipe::new(self.clone(), path.clone(), read_write, options.clone())?);
        let mut recipes = self.recipes.lock();
        // Another handle's, made for the path meanwhile.
        if let Some(shared) = shared(&recipes, &mut looked_at) {
            drop(recipes);
            return Ok(shared); // ours is dropped after the guard
        }
        let of_path = recipes.entry(path.clone()).or_default();
        of_path.retain(|recipe| recipe.strong_count() > 0);
        of_path.push(Arc::downgrade(&recipe));
        Ok(recipe)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_closed()
    }

    /// Forgets the dropped recipes of `path` (called as a recipe is dropped), and the path once it
    /// has none. Never called under [`ClientInner::recipes`]' mutex: nothing drops a recipe there.
    pub(crate) fn forget_recipe(&self, path: &str) {
        let mut recipes = self.recipes.lock();
        if let Some(of_path) = recipes.get_mut(path) {
            of_path.retain(|recipe| recipe.strong_count() > 0);
            if of_path.is_empty() {
                recipes.remove(path);
            }
        }
    }

    /// Whether `owner` holds `recipe`'s path through another of this client's recipes of its kind
    /// (another identifier or ACL, or a separate handle: handles that agree share one recipe), in
    /// a way an acquisition in `mode` through `recipe` would queue behind. (A recipe of the other
    /// kind on the path is refused when its nodes are found.)
    pub(crate) fn holds_path_elsewhere(
        &self,
        recipe: &crate::engine::Recipe,
        owner: &crate::Owner,
        mode: crate::policy::Mode,
    ) -> bool {
        // Upgraded under the mutex, looked at and dropped after it (a drop takes the mutex).
        let same_path: Vec<_> = self
            .recipes
            .lock()
            .get(&recipe.path)
            .map(|of_path| of_path.iter().filter_map(std::sync::Weak::upgrade).collect())
            .unwrap_or_default();
        same_path.iter().any(|other| {
            other.serial != recipe.serial
                && other.read_write == recipe.read_write
                && other.owners.holds_against(owner, mode)
        })
    }

    /// The session timeout of the current session, or the one asked for.
    pub(crate) fn session_timeout_hint(&self) -> Duration {
        match &*self.session.read() {
            Some(session) => session.timeout,
            None => self.options.session_timeout,
        }
    }

    fn closed_error(path: &str) -> Error {
        Error::new(ErrorKind::Closed, "the client was closed").with_path(path)
    }

    /// The live session, establishing a new one if the last one is over.
    pub(crate) async fn session(self: &Arc<Self>, path: &str) -> Result<Arc<Session>> {
        if let Some(session) = self.live_session(path)? {
            return Ok(session);
        }
        let _renewing = self.renewing.lock().await;
        if let Some(session) = self.live_session(path)? {
            return Ok(session);
        }
        let session = self.connect_session(path).await?;
        if self.is_closed() {
            return Err(Self::closed_error(path));
        }
        *self.session.write() = Some(session.clone());
        self.publish(SessionState::Connected);
        Ok(session)
    }

    /// As [`ClientInner::session`], for an acquisition that waits as long as it takes
    /// (`forever`): no server reachable within the connect timeout (an outage) is no reason to
    /// give up, so it tries again, and again, until a session is established or the client is
    /// closed (the caller's abort bounds it too). Refused credentials, a missing chroot and the
    /// like are errors at once, as for any acquisition; so is every failure without `forever`.
    pub(crate) async fn session_waiting(self: &Arc<Self>, path: &str, forever: bool) -> Result<Arc<Session>> {
        let mut rounds = 0u32;
        loop {
            let err = match self.session(path).await {
                Err(err) if forever && matches!(err.kind(), ErrorKind::Timeout | ErrorKind::ConnectionLoss) => err,
                established => return established,
            };
            rounds += 1;
            tracing::info!(target: "zklock", "still no session for an acquisition that waits forever ({err}); trying again");
            // The connect timeout paced the round already; a failure that came at once is not
            // tried again in a tight loop.
            let pause = Duration::from_millis(100 * u64::from(rounds.min(10)));
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = self.closed.cancelled() => return Err(Self::closed_error(path)),
            }
        }
    }

    /// The session, if one is established and not over (a closed client is an error).
    pub(crate) fn live_session(&self, path: &str) -> Result<Option<Arc<Session>>> {
        if self.is_closed() {
            return Err(Self::closed_error(path));
        }
        Ok(self.session.read().as_ref().filter(|s| !s.is_over()).cloned())
    }

    async fn connect_session(self: &Arc<Self>, path: &str) -> Result<Arc<Session>> {
        let options = &self.options;
        // The last cause seen for each host, in the order the hosts were first tried.
        let failures: Arc<parking_lot::Mutex<Vec<(String, String)>>> = Default::default();
        let observed = failures.clone();
        // Told of each cause seen, to notice servers that all refused the TLS handshake alike.
        let seen = Arc::new(tokio::sync::Notify::new());
        let tell = seen.clone();
        // The connection timeout is left to the ZooKeeper client's default (2/5 of the session
        // timeout), and with it its ping cadence (after 1/20 of the timeout without a send),
        // which keeps a live session's trust deadline (`session::Trust`) well ahead.
        // Replies are taken up to the packet limit, and never less than the client's default: a
        // long queue's listing is a large reply from a server that limits only requests.
        let mut connector = zk::Client::connector()
            .with_session_timeout(options.session_timeout)
            .with_reply_limit((options.jute_maxbuffer as usize).max(zk::DEFAULT_REPLY_LIMIT))
            .with_connect_observer(move |host: &str, cause: &str| {
                let mut failures = observed.lock();
                match failures.iter_mut().find(|(seen, _)| seen == host) {
                    Some((_, last)) => *last = cause.to_owned(),
                    None => failures.push((host.to_owned(), cause.to_owned())),
                }
                tell.notify_one();
            });
        if let Some(timeout) = self.handshake_timeout() {
            connector = connector.with_handshake_timeout(timeout);
        }
        if let Some(auth) = &options.digest_auth {
            connector = connector.with_auth("digest", auth.as_bytes());
        }
        if let Some(tls) = &self.tls {
            connector = connector.with_tls(tls.clone());
        }
        if let Some(sasl) = &self.sasl {
            connector = connector.with_sasl(sasl.clone());
        }
        // Tried again until the connect timeout: the ZooKeeper client gives up a round by its own
        // reckoning (about the session timeout), which may come well before ours.
        let deadline = tokio::time::Instant::now() + options.connect_timeout;
        let zk = loop {
            let connecting = match self.tls {
                // Every server of the connect string over TLS.
                Some(_) => connector.clone().secure_connect(&self.connect_string).boxed(),
                None => connector.clone().connect(&self.connect_string).boxed(),
            };
            let outcome = tokio::select! {
                result = tokio::time::timeout_at(deadline, connecting) => result,
                _ = self.closed.cancelled() => return Err(Self::closed_error(path)),
                causes = self.certificates_refused(&failures, &seen) => {
                    return Err(Error::from_zk(zk::Error::AuthFailed, path, "connecting").with_message(format!(
                        "connecting: every server refused the TLS handshake for the same reason, which trying again \
                         cannot change ({causes})"
                    )));
                }
            };
            match outcome {
                Ok(Ok(zk)) => break zk,
                Ok(Err(zk::Error::Timeout)) if tokio::time::Instant::now() < deadline => continue,
                Err(_) | Ok(Err(zk::Error::Timeout)) => {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "no session within the connect timeout of {:?} ({})",
                            options.connect_timeout,
                            self.connect_causes(&failures.lock())
                        ),
                    )
                    .with_path(&self.connect_string));
                }
                Ok(Err(zk::Error::AuthFailed)) => {
                    // The observer heard why: the server's refusal, or the SASL exchange failing here.
                    let causes: Vec<String> =
                        failures.lock().iter().map(|(host, cause)| format!("{host}: {cause}")).collect();
                    let causes = if causes.is_empty() {
                        "the server refused the credentials".to_owned()
                    } else {
                        causes.join("; ")
                    };
                    return Err(Error::from_zk(zk::Error::AuthFailed, path, "connecting")
                        .with_message(format!("connecting: the credentials were refused ({causes})")));
                }
                Ok(Err(err)) => return Err(Error::from_zk(err, path, "connecting")),
            }
        };
        if !self.chroot.is_empty() {
            self.check_chroot(&zk).await?;
        }
        Ok(Session::start(zk, Arc::downgrade(self), &self.closed.token, &self.runtime))
    }

    /// Resolves once every host of the connect string has refused the TLS handshake for the same
    /// certificate reason (the server's certificate not signed by a trusted CA, expired, not valid
    /// yet, revoked, or not naming the host; the client's certificate missing or refused): the
    /// causes, as [`ClientInner::connect_causes`] says them. A wrong CA bundle then fails at once,
    /// as refused credentials do, instead of being tried for the whole connect timeout. Pending
    /// otherwise (without TLS, always): a host that failed otherwise, or not yet, may connect.
    async fn certificates_refused(
        &self,
        failures: &parking_lot::Mutex<Vec<(String, String)>>,
        seen: &tokio::sync::Notify,
    ) -> String {
        const REASONS: [&str; 7] = [
            "not signed by a trusted CA",
            "certificate has expired",
            "certificate is not valid yet",
            "certificate is revoked",
            "certificate does not name",
            "requires a client certificate",
            "did not accept the client certificate",
        ];
        if self.tls.is_none() {
            return std::future::pending().await;
        }
        loop {
            seen.notified().await;
            let failures = failures.lock();
            let reason = |cause: &str| REASONS.iter().position(|reason| cause.contains(reason));
            let first = failures.first().and_then(|(_, cause)| reason(cause));
            let every_host = self.hosts().all(|host| failures.iter().any(|(seen, _)| seen == host));
            if first.is_some() && every_host && failures.iter().all(|(_, cause)| reason(cause) == first) {
                return self.connect_causes(&failures);
            }
        }
    }

    /// The hosts of the connect string (`host:port`), in its order.
    fn hosts(&self) -> impl Iterator<Item = &str> {
        self.connect_string.split('/').next().unwrap_or_default().split(',')
    }

    /// How long one attempt to establish (or re-establish) the session with one server may take
    /// in the first round through the servers, if less than the ZooKeeper client's own bound
    /// (its connection timeout, 2/5 of the session timeout); each later round doubles it (see
    /// the client's `with_handshake_timeout`). The lesser of two shares:
    ///
    /// * the connect timeout divided among the hosts, at least 2 s: without it a silent server
    ///   ahead of a healthy one took the whole of a shorter connect timeout;
    /// * the session timeout divided among the hosts (the Java client's connect timeout), at
    ///   least 1 s (or the client's own bound, if less). Once the client notices a dead
    ///   connection (no answer for 2/5 of the session timeout), a hold is trusted for about
    ///   9/20 of it more (`session::Trust`, 17/20 after the last answered send): the other servers
    ///   are tried first (the failed one last), and each silent one among them may take only its
    ///   share. With 3 hosts and a 5 s session: 1.67 s a host, 2.25 s left to reconnect.
    ///
    /// The floors keep a healthy server that answers slowly (a loaded server, a TLS or Kerberos
    /// handshake of a few round trips over a slow link: hundreds of milliseconds) from being
    /// skipped.
    fn handshake_timeout(&self) -> Option<Duration> {
        let hosts = self.hosts().count().max(1) as u32;
        let own = self.options.session_timeout * 2 / 5;
        let connect_share = (self.options.connect_timeout / hosts).max(Duration::from_secs(2));
        let session_share = (self.options.session_timeout / hosts).max(Duration::from_secs(1).min(own));
        let share = connect_share.min(session_share);
        (share < own).then_some(share)
    }

    /// Why each host of the connect string gave no session, in its order: the last cause seen
    /// for it, or that it never answered.
    fn connect_causes(&self, failures: &[(String, String)]) -> String {
        let mut causes: Vec<String> = self
            .hosts()
            .map(|host| {
                let cause = failures.iter().find(|(seen, _)| seen == host).map_or("no answer", |(_, cause)| cause);
                format!("{host}: {cause}")
            })
            .collect();
        // Hosts the client named otherwise (resolved addresses) keep their own entries.
        for (seen, cause) in failures {
            if !self.hosts().any(|host| host == seen) {
                causes.push(format!("{seen}: {cause}"));
            }
        }
        causes.join("; ")
    }

    /// A chroot that does not exist would make every lock fail later with a puzzling NoNode on
    /// its parents: say so at connect. (The server does not create a chroot; nor do we.)
    async fn check_chroot(&self, zk: &zk::Client) -> Result<()> {
        let checked = tokio::select! {
            checked = zk.check_stat("/") => checked,
            _ = self.closed.cancelled() => return Err(Self::closed_error(&self.chroot)),
        };
        match checked {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Error::zookeeper(
                zk::Error::NoNode,
                format!("the chroot {} does not exist on the server: create it, or connect without it", self.chroot),
            )
            .with_path(&self.connect_string)),
            Err(err) => Err(Error::from_zk(err, &self.connect_string, "checking the chroot")),
        }
    }

    /// Called by a session's monitor on each change of its state.
    pub(crate) fn session_changed(&self, id: i64, state: SessionState, over: bool) {
        {
            let mut current = self.session.write();
            if current.as_ref().map(|s| s.id) != Some(id) {
                return; // an old session: not what the client reports any more
            }
            if over {
                // Let go of it so that it really ends; the next acquisition starts a new one.
                current.take();
            }
        }
        if !self.is_closed() || state == SessionState::Closed {
            self.publish(state);
        }
    }

    fn publish(&self, state: SessionState) {
        let previous = self.state.send_replace(state);
        if previous != state {
            let _ = self.changes.send(state);
        }
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

    /// The bindings' warnings come from this one rule: digest auth without TLS only.
    #[test]
    fn connect_warnings_name_digest_auth_without_tls_only() {
        let with = |digest_auth: Option<&str>, tls: Option<crate::TlsOptions>| {
            ClientOptions { digest_auth: digest_auth.map(Into::into), tls, ..ClientOptions::default() }
                .connect_warnings()
        };
        assert_eq!(with(Some("alice:alice-secret"), None), [ConnectWarning::CleartextPassword]);
        assert_eq!(with(Some("alice:alice-secret"), Some(crate::TlsOptions::without_verification())), []);
        assert_eq!(with(None, None), []);
        let message = ConnectWarning::CleartextPassword.message();
        assert!(message.contains("in clear") && message.contains("TLS"), "{message}");
    }
}
