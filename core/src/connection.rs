//! The connection to the ensemble a client keeps: its options, one session at a time (renewed
//! when one ends), the window of creates in flight, the attempt ids, the callback thread, and
//! the close. Below the recipes: it knows no lock.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};
use zookeeper_client as zk;

use crate::dispatch::CallbackDispatcher;
use crate::error::{Error, ErrorKind, Result};
use crate::memory;
use crate::session::{Closed, Session, SessionState};
use crate::validate;

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

// A burst that fills the window is what `memory` gives back after.
const _: () = assert!(memory::GIVE_BACK_AFTER == CREATE_WINDOW);

/// Options for [`Client::connect`](crate::Client::connect). Start from `ClientOptions::default()` and set fields.
/// `Debug` shows no secret (no password, no private key).
#[derive(Clone)]
pub struct ClientOptions {
    /// The session timeout asked of the server (which may clamp it to its own bounds). A holder
    /// that stays disconnected this long loses its locks. Default [`DEFAULT_SESSION_TIMEOUT`].
    pub session_timeout: Duration,
    /// How long [`Client::connect`](crate::Client::connect) tries to establish the session. Default
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
    pub tls: Option<crate::tls::TlsOptions>,
    /// SASL authentication on every connection: DIGEST-MD5 (a user and password) or Kerberos
    /// (GSSAPI). The servers then know the client as `sasl:<identity>` too, which the ACL
    /// presets' creator means. `None` (the default): no SASL.
    pub sasl: Option<crate::sasl::SaslOptions>,
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
    /// without TLS ([`ConnectWarning::CleartextPassword`]). [`Client::connect_with`](crate::Client::connect_with) emits each
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

pub(crate) struct ClientInner {
    /// The current session; `None` before the first one, after one ended, and once closed.
    pub(crate) session: RwLock<Option<Arc<Session>>>,
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
    pub(crate) attempt_ids: AttemptIds,
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
    pub(crate) callbacks: CallbackDispatcher,
    pub(crate) state: watch::Sender<SessionState>,
    pub(crate) changes: broadcast::Sender<SessionState>,
}

/// The per-process part of every lock node's identity.
#[derive(Debug)]
pub(crate) struct HostIdentity {
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) language: String,
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
        if let Some(crate::sasl::SaslOptions::DigestMd5 { password, .. }) = self.options.sasl.as_mut() {
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
            self.client.dispatch(memory::give_back);
        }
    }
}

impl ClientInner {
    /// Blocks until the close that ends the session is over, or until `deadline` (see
    /// `Client::wait_closed`).
    pub(crate) fn wait_closed(&self, deadline: std::time::Instant) -> bool {
        self.close_done.wait_until(deadline)
    }

    /// Ends the session of a client being closed (see `Client::close`): over when the server
    /// acknowledged its CloseSession, or the session timeout passed.
    pub(crate) async fn end_session(&self) {
        let session = {
            let mut session = self.session.write();
            let taken = session.take();
            if taken.is_some() {
                self.close_done.taken.store(true, Ordering::Release);
            }
            taken
        };
        let Some(session) = session else {
            if self.close_done.taken.load(Ordering::Acquire) {
                // Another close() is ending the session: this one returns when that one is over,
                // so that a close awaited after one that was not (or an exit hook) really waits.
                self.close_done.wait().await;
            } else {
                self.publish(SessionState::Closed);
                self.close_done.finish();
            }
            return;
        };
        // Over when this returns, or when it is given up (the future dropped).
        let _finish = FinishOnDrop(&self.close_done);
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
        self.publish(SessionState::Closed);
    }

    /// Runs `loss` on the runtime and, if it finds a loss, `callback` with it on the callback
    /// thread.
    pub(crate) fn when_lost<T: Send + 'static>(
        self: &Arc<Self>,
        loss: impl std::future::Future<Output = Option<T>> + Send + 'static,
        callback: impl FnOnce(T) + Send + 'static,
    ) {
        let client = self.clone();
        self.runtime.spawn(async move {
            if let Some(lost) = loss.await {
                client.dispatch(move || callback(lost));
            }
        });
    }

    /// Validates the options, then connects and establishes the first session (see
    /// `Client::connect_with`).
    pub(crate) async fn connect(connect_string: &str, options: ClientOptions) -> Result<Arc<ClientInner>> {
        let chroot = validate::connect_string(connect_string)?.to_owned();
        validate::session_timeout(options.session_timeout)?;
        validate::positive_timeout(options.connect_timeout, "connect timeout")?;
        if options.jute_maxbuffer < validate::MIN_JUTE_MAXBUFFER {
            return Err(Error::invalid(format!(
                "{} of {} bytes is too small: a lock request needs at least {} bytes",
                validate::packet_limit_option(&options.language),
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
        let tls = options.tls.as_ref().map(crate::tls::TlsOptions::to_zk).transpose()?;
        let sasl = options.sasl.as_ref().map(crate::sasl::SaslOptions::to_zk).transpose()?;
        let identities = crate::acl::Identities::configured(
            options.digest_auth.as_deref(),
            options.sasl.as_ref().map(crate::sasl::SaslOptions::identity),
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
            attempt_ids: AttemptIds::new(),
            send_order: tokio::sync::Mutex::new(()),
            create_window: tokio::sync::Semaphore::new(CREATE_WINDOW),
            window_filled: AtomicBool::new(false),
            callbacks: CallbackDispatcher::new("zklock-callback"),
            state: watch::Sender::new(SessionState::Disconnected),
            changes: broadcast::channel(64).0,
        });
        inner.session("/").await?;
        Ok(inner)
    }

    /// Creates sent and not yet answered: the window's places taken.
    pub(crate) fn creates_in_flight(&self) -> usize {
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

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_closed()
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
        let client = Arc::downgrade(self);
        let on_change = Box::new(move |id, state, over| {
            if let Some(client) = client.upgrade() {
                client.session_changed(id, state, over);
            }
        });
        Ok(Session::start(zk, on_change, &self.closed.token, &self.runtime))
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

/// The uuids in attempts' node names, without a `getrandom` call per attempt: a random v4 uuid
/// per client whose last 48 bits (the uuid's node field, free of version and variant bits) are
/// XORed with a counter, so every attempt of a client has its own uuid for 2^48 attempts.
pub(crate) struct AttemptIds {
    base: uuid::Uuid,
    next: std::sync::atomic::AtomicU64,
}

impl AttemptIds {
    pub(crate) fn new() -> AttemptIds {
        AttemptIds { base: uuid::Uuid::new_v4(), next: std::sync::atomic::AtomicU64::new(0) }
    }

    pub(crate) fn next(&self) -> uuid::Uuid {
        let count = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & ((1 << 48) - 1);
        uuid::Uuid::from_u128(self.base.as_u128() ^ u128::from(count))
    }

    /// Whether the lock node `name` was made by an attempt of this client (its uuid shares the
    /// client's first 80 bits). Another client's node matches by chance one time in 2^80.
    pub(crate) fn made(&self, name: &str) -> bool {
        let uuid =
            name.strip_prefix("_c_").and_then(|rest| rest.get(..36)).and_then(|id| uuid::Uuid::parse_str(id).ok());
        uuid.is_some_and(|uuid| (uuid.as_u128() ^ self.base.as_u128()) >> 48 == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn attempt_ids_tell_their_clients_nodes() {
        let (ours, theirs) = (AttemptIds::new(), AttemptIds::new());
        let node = |ids: &AttemptIds| format!("_c_{}-lock-0000000001", ids.next());
        assert!(ours.made(&node(&ours)));
        for _ in 0..1000 {
            ours.next();
        }
        assert!(ours.made(&node(&ours)));
        assert!(!ours.made(&node(&theirs)));
        assert!(!ours.made("0abad91753a64ed9bfac3327be0d1234__lock__0000000001"), "kazoo's");
        assert!(!ours.made("_c_not-a-uuid-lock-0000000001"));
    }
}
