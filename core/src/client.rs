//! One ZooKeeper session, shared by every lock made from it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::error::{Error, ErrorKind, Result};
use crate::lock::{Lock, LockOptions};
use crate::validate;

/// Options for [`Client::connect`]. Start from `ClientOptions::default()` and set fields.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The session timeout asked of the server (which may clamp it to its own bounds). A holder
    /// that stays disconnected this long loses its locks. Default 10 s.
    pub session_timeout: Duration,
    /// How long [`Client::connect`] tries to establish the session. Default 10 s.
    pub connect_timeout: Duration,
    /// Digest credentials as `"user:password"`, sent as the `digest` auth scheme.
    pub digest_auth: Option<String>,
    /// The language recorded in each lock node's identity; the bindings set their own.
    pub language: Cow<'static, str>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            digest_auth: None,
            language: Cow::Borrowed("rust"),
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
    /// The session expired: its lock nodes are gone. Terminal.
    Expired,
    /// The servers rejected the credentials. Terminal.
    AuthFailed,
    /// The client was closed. Terminal.
    Closed,
}

impl SessionState {
    /// Whether no further state can follow.
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
    }

    fn from_zk(state: zk::SessionState) -> SessionState {
        match state {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => SessionState::Connected,
            zk::SessionState::Disconnected => SessionState::Disconnected,
            zk::SessionState::Expired => SessionState::Expired,
            zk::SessionState::AuthFailed => SessionState::AuthFailed,
            zk::SessionState::Closed => SessionState::Closed,
        }
    }
}

/// A stream of session state changes, from [`Client::state_changes`].
pub struct StateChanges {
    receiver: broadcast::Receiver<SessionState>,
    ended: bool,
}

impl StateChanges {
    /// The next state change, or `None` once the session reached a terminal state and that state
    /// was delivered. If this receiver fell behind, the oldest changes are skipped.
    pub async fn next(&mut self) -> Option<SessionState> {
        while !self.ended {
            match self.receiver.recv().await {
                Ok(state) => {
                    self.ended = state.is_terminal();
                    return Some(state);
                },
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
        None
    }
}

/// One ZooKeeper session. Cheap to clone; every clone and every [`Lock`] made from it share the
/// session. Dropping the last of them ends the session, as [`Client::close`] does.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    /// `None` once closed. Operations clone the ZooKeeper handle out of it; the session ends when
    /// the last clone is dropped, so everything that holds one also watches `closed`.
    zk: RwLock<Option<zk::Client>>,
    pub(crate) chroot: String,
    /// Wakes everything waiting when the client is closed.
    pub(crate) closed: CancellationToken,
    /// The same fact for the reentrant fast path: the token's own check takes a mutex.
    closed_flag: AtomicBool,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) identity: Arc<HostIdentity>,
    session_timeout: Duration,
    state: watch::Receiver<SessionState>,
    changes: broadcast::Sender<SessionState>,
}

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
    /// * [`ErrorKind::InvalidArgument`] for an empty or malformed connect string, or a zero
    ///   timeout, before any network traffic.
    /// * [`ErrorKind::Timeout`] if no session was established within `connect_timeout`.
    /// * [`ErrorKind::AuthFailed`] if the server rejected the credentials.
    pub async fn connect_with(connect_string: &str, options: ClientOptions) -> Result<Client> {
        let chroot = validate::connect_string(connect_string)?.to_owned();
        validate::positive_timeout(options.session_timeout, "session timeout")?;
        validate::positive_timeout(options.connect_timeout, "connect timeout")?;
        if let Some(auth) = &options.digest_auth {
            if !auth.contains(':') {
                return Err(Error::invalid("digest auth must be \"user:password\""));
            }
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("Client::connect must be called inside a tokio runtime"))?;

        let mut connector = zk::Client::connector()
            .with_session_timeout(options.session_timeout)
            .with_connection_timeout(options.connect_timeout);
        if let Some(auth) = &options.digest_auth {
            connector = connector.with_auth("digest", auth.as_bytes());
        }
        let connecting = connector.connect(connect_string);
        let zk = match tokio::time::timeout(options.connect_timeout, connecting).await {
            Err(_) | Ok(Err(zk::Error::Timeout)) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "no session with {connect_string} within the connect timeout of {:?}",
                        options.connect_timeout
                    ),
                ))
            },
            Ok(Err(err)) => return Err(Error::from_zk(err, chroot_or_root(&chroot), "connecting")),
            Ok(Ok(zk)) => zk,
        };

        let (state_sender, state) = watch::channel(SessionState::from_zk(zk.state()));
        let (changes, _) = broadcast::channel(64);
        let forwarded = changes.clone();
        let mut zk_states = zk.state_watcher();
        // Holds only receivers and senders, never the session, so it cannot keep it alive.
        runtime.spawn(async move {
            loop {
                let state = SessionState::from_zk(zk_states.changed().await);
                state_sender.send_replace(state);
                let _ = forwarded.send(state);
                if state.is_terminal() {
                    break;
                }
            }
        });

        let identity = Arc::new(HostIdentity {
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: std::process::id(),
            language: options.language.clone().into_owned(),
        });
        Ok(Client {
            inner: Arc::new(ClientInner {
                session_timeout: zk.session_timeout(),
                zk: RwLock::new(Some(zk)),
                chroot,
                closed: CancellationToken::new(),
                closed_flag: AtomicBool::new(false),
                runtime,
                identity,
                state,
                changes,
            }),
        })
    }

    /// The current session state.
    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// Session state changes from now on, ending after a terminal state.
    pub fn state_changes(&self) -> StateChanges {
        let receiver = self.inner.changes.subscribe();
        StateChanges { receiver, ended: self.state().is_terminal() }
    }

    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.inner.session_timeout
    }

    /// The ZooKeeper session id, or `None` once closed.
    pub fn session_id(&self) -> Option<i64> {
        self.inner.zk.read().as_ref().map(|zk| zk.session_id().0)
    }

    /// A fair, reentrant lock on `path` (relative to the chroot), sharing this client's session.
    /// Nothing is sent to ZooKeeper until the first acquisition.
    ///
    /// # Notable errors
    /// * [`ErrorKind::InvalidArgument`] if `path` is not a valid ZooKeeper path, is the root, or
    ///   lies under `/zookeeper`.
    pub fn lock(&self, path: &str) -> Result<Lock> {
        self.lock_with(path, LockOptions::default())
    }

    /// As [`Client::lock`], with options.
    pub fn lock_with(&self, path: &str, options: LockOptions) -> Result<Lock> {
        validate::lock_path(path, &self.inner.chroot)?;
        Ok(Lock::new(self.inner.clone(), path.to_owned(), options))
    }

    /// Ends the session at once: the server deletes every lock node it held, so waiters behind
    /// them proceed immediately rather than after the session timeout. Pending acquisitions fail
    /// with [`ErrorKind::Closed`]; held locks count as lost. Idempotent.
    pub async fn close(&self) {
        self.inner.closed_flag.store(true, Ordering::Release);
        self.inner.closed.cancel();
        let Some(zk) = self.inner.zk.write().take() else { return };
        let mut states = zk.state_watcher();
        drop(zk);
        // Everything else holding a session handle drops it on `closed`; the session then sends
        // CloseSession and reports Closed once the server acknowledged it.
        let closed = async {
            while !states.peek_state().is_terminated() {
                states.changed().await;
            }
        };
        let _ = tokio::time::timeout(self.inner.session_timeout, closed).await;
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

impl ClientInner {
    pub(crate) fn is_closed(&self) -> bool {
        self.closed_flag.load(Ordering::Acquire)
    }

    /// The negotiated session timeout: how long the servers keep the session without hearing
    /// from us, and so a sensible bound for one step that should not hang.
    pub(crate) fn session_timeout_hint(&self) -> Duration {
        self.session_timeout
    }

    /// A handle on the session, or [`ErrorKind::Closed`].
    pub(crate) fn zk(&self, path: &str) -> Result<zk::Client> {
        match &*self.zk.read() {
            Some(zk) => Ok(zk.clone()),
            None => Err(Error::new(ErrorKind::Closed, "the client was closed").with_path(path)),
        }
    }
}

fn chroot_or_root(chroot: &str) -> &str {
    if chroot.is_empty() {
        "/"
    } else {
        chroot
    }
}
