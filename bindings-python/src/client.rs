//! `zklock._native.Client`: one ZooKeeper session at a time, shared by every lock made from it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use zklock::{ClientOptions, GssapiOptions, SaslOptions};

use crate::callbacks::{self, Callback};
use crate::error::{self, invalid_argument, IntoPyResult};
use crate::runtime::{self, ForkSafe};

#[pyclass(subclass, frozen, module = "zklock._native")]
pub(crate) struct Client {
    pub(crate) inner: ForkSafe<zklock::Client>,
    pub(crate) hosts: String,
    /// The `on_state_change` registrations, by key: the callable (cleared when unregistered or
    /// collected) and the task that reports to it.
    states: Mutex<HashMap<u64, (Callback, tokio::task::AbortHandle)>>,
    next_key: AtomicU64,
}

/// Said of a client collected unclosed, as Python says of an unclosed file: its session (and the
/// locks it holds) would otherwise last as long as the process.
impl Drop for Client {
    fn drop(&mut self) {
        let Some(client) = self.inner.get_here() else { return };
        if client.is_closed() {
            return;
        }
        let client = client.clone();
        closing(runtime::handle().spawn(async move { client.close().await }));
        error::warn_collected_unreleased(c"zklock.Client collected unclosed: closed now");
    }
}

/// How long `close()` waits for the server by default: the session ends in the background after.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Closes begun by a collected client (or given up by `close()`), which the exit hook waits for.
static CLOSING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

fn closing(task: tokio::task::JoinHandle<()>) {
    let mut closing = CLOSING.lock();
    closing.retain(|task| !task.is_finished());
    closing.push(task);
}

/// The closes begun by collected clients and not yet finished, for the exit hook.
pub(crate) fn take_closing() -> Vec<tokio::task::JoinHandle<()>> {
    std::mem::take(&mut *CLOSING.lock())
}

impl Client {
    pub(crate) fn core(&self, py: Python<'_>) -> PyResult<&zklock::Client> {
        self.inner.get(py, &self.hosts)
    }
}

/// Seconds from Python as a positive duration, or `InvalidArgumentError` naming the argument.
pub(crate) fn positive_seconds(py: Python<'_>, subject: &str, name: &str, seconds: f64) -> PyResult<Duration> {
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(invalid_argument(py, subject, format!("{name} must be a positive number of seconds, not {seconds}"))),
    }
}

fn digest_auth(py: Python<'_>, hosts: &str, auth: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(auth) = auth else { return Ok(None) };
    if let Ok(text) = auth.cast::<PyString>() {
        return Ok(Some(text.extract::<String>()?));
    }
    if let Ok(pair) = auth.cast::<PyTuple>() {
        if let Ok((user, password)) = pair.extract::<(String, String)>() {
            if user.contains(':') {
                return Err(invalid_argument(py, hosts, "auth user names cannot contain ':'"));
            }
            return Ok(Some(format!("{user}:{password}")));
        }
    }
    Err(invalid_argument(py, hosts, "auth must be \"user:password\" or a (user, password) tuple of str"))
}

/// kazoo's `sasl_options` (its names: `mechanism`, `username`, `password`, `service`,
/// `principal`; and zklock's `keytab`, `credential_cache`, `host`) as the core's SASL options.
/// Errors name the keys, never the password.
fn sasl_options(py: Python<'_>, hosts: &str, options: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SaslOptions>> {
    let Some(options) = options else { return Ok(None) };
    let refused = |what: String| Err(invalid_argument(py, hosts, format!("sasl_options: {what}")));
    let Ok(dict) = options.cast::<PyDict>() else {
        return refused(
            "must be a dict such as {\"mechanism\": \"DIGEST-MD5\", \"username\": ..., \"password\": ...}".into(),
        );
    };
    let mut entries = std::collections::BTreeMap::new();
    for (key, value) in dict.iter() {
        let Ok(key) = key.extract::<String>() else { return refused(format!("the key {key} is not a str")) };
        let Ok(value) = value.extract::<String>() else { return refused(format!("{key:?} must be a str")) };
        entries.insert(key, value);
    }
    let mut take = |key: &str| entries.remove(key);
    let Some(mechanism) = take("mechanism") else { return refused("\"mechanism\" is missing".into()) };
    let sasl = match mechanism.to_ascii_uppercase().as_str() {
        "DIGEST-MD5" => {
            let (Some(username), Some(password)) = (take("username"), take("password")) else {
                return refused("DIGEST-MD5 needs \"username\" and \"password\"".into());
            };
            SaslOptions::digest_md5(username, password)
        }
        "GSSAPI" => {
            let Some(principal) = take("principal") else {
                return refused("GSSAPI needs \"principal\", the client's (such as \"alice@EXAMPLE.COM\")".into());
            };
            let mut kerberos = GssapiOptions::new(principal);
            kerberos.keytab = take("keytab").map(Into::into);
            kerberos.credential_cache = take("credential_cache");
            kerberos.host = take("host");
            if let Some(service) = take("service") {
                kerberos.service_name = service;
            }
            SaslOptions::Gssapi(kerberos)
        }
        _ => return refused(format!("the mechanism {mechanism:?} is not \"DIGEST-MD5\" or \"GSSAPI\"")),
    };
    if let Some(unknown) = entries.keys().next() {
        return refused(format!("{unknown:?} is not an option of {}", sasl.mechanism()));
    }
    Ok(Some(sasl))
}

/// kazoo's TLS arguments (paths, not contents) as the core's options; `None` without `use_ssl`.
struct Tls<'a> {
    use_ssl: bool,
    ca: Option<PathBuf>,
    certfile: Option<PathBuf>,
    keyfile: Option<PathBuf>,
    keyfile_password: Option<String>,
    verify_certs: bool,
    check_hostname: Option<bool>,
    server_hostname: Option<&'a str>,
}

impl Tls<'_> {
    fn options(self, py: Python<'_>, hosts: &str) -> PyResult<Option<zklock::TlsOptions>> {
        if !self.use_ssl {
            let given = [
                ("ca", self.ca.is_some()),
                ("certfile", self.certfile.is_some()),
                ("keyfile", self.keyfile.is_some()),
                ("keyfile_password", self.keyfile_password.is_some()),
                ("verify_certs", !self.verify_certs),
                ("check_hostname", self.check_hostname.is_some()),
                ("server_hostname", self.server_hostname.is_some()),
            ];
            return match given.iter().find(|(_, given)| *given) {
                Some((name, _)) => Err(invalid_argument(py, hosts, format!("{name} is given but use_ssl is False"))),
                None => Ok(None),
            };
        }
        if self.check_hostname == Some(true) && !self.verify_certs {
            return Err(invalid_argument(py, hosts, "check_hostname=True needs verify_certs=True"));
        }
        // No `ca` with verify_certs: the core refuses it when connecting, before any traffic, in
        // its own words (the same in every language).
        let mut tls =
            zklock::TlsOptions::from_pem_files(self.ca.as_deref(), self.certfile.as_deref(), self.keyfile.as_deref())
                .py(py)?;
        tls.client_key_password = self.keyfile_password;
        tls.verify_certificates = self.verify_certs;
        tls.verify_hostname = self.verify_certs && self.check_hostname.unwrap_or(true);
        tls.server_name = self.server_hostname.map(str::to_owned);
        Ok(Some(tls))
    }
}

#[pymethods]
impl Client {
    /// Connects (blocking, with the GIL released; Ctrl-C interrupts it) and establishes a session.
    #[new]
    #[pyo3(signature = (
        hosts, *, session_timeout = None, connect_timeout = None, auth = None, jute_maxbuffer = None,
        sasl_options = None, use_ssl = false, ca = None, certfile = None, keyfile = None, keyfile_password = None,
        verify_certs = true, check_hostname = None, server_hostname = None,
    ))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, kazoo's names
    fn new(
        py: Python<'_>,
        hosts: &str,
        session_timeout: Option<f64>,
        connect_timeout: Option<f64>,
        auth: Option<&Bound<'_, PyAny>>,
        jute_maxbuffer: Option<&Bound<'_, PyAny>>,
        sasl_options: Option<&Bound<'_, PyAny>>,
        use_ssl: bool,
        ca: Option<PathBuf>,
        certfile: Option<PathBuf>,
        keyfile: Option<PathBuf>,
        keyfile_password: Option<String>,
        verify_certs: bool,
        check_hostname: Option<bool>,
        server_hostname: Option<&str>,
    ) -> PyResult<Self> {
        let tls =
            Tls { use_ssl, ca, certfile, keyfile, keyfile_password, verify_certs, check_hostname, server_hostname };
        // What is not given is the core's default.
        let mut options = ClientOptions {
            digest_auth: digest_auth(py, hosts, auth)?,
            sasl: self::sasl_options(py, hosts, sasl_options)?,
            language: "python".into(),
            tls: tls.options(py, hosts)?,
            ..ClientOptions::default()
        };
        if let Some(seconds) = session_timeout {
            options.session_timeout = positive_seconds(py, hosts, "session_timeout", seconds)?;
        }
        if let Some(seconds) = connect_timeout {
            options.connect_timeout = positive_seconds(py, hosts, "connect_timeout", seconds)?;
        }
        if let Some(limit) = jute_maxbuffer {
            options.jute_maxbuffer = limit.extract::<u32>().map_err(|_| {
                invalid_argument(
                    py,
                    hosts,
                    format!("jute_maxbuffer must be a number of bytes below 2**32, not {limit}"),
                )
            })?;
        }
        let warnings = options.connect_warnings();
        let client = runtime::block_on(py, zklock::Client::connect_with(hosts, options))?.py(py)?;
        // Once per client, when connected (only then was the password sent). A filter that
        // makes it an error leaves no session behind.
        for warning in warnings {
            if let Err(err) = error::warn(py, warning) {
                runtime::block_on_uninterrupted(py, client.close());
                return Err(err);
            }
        }
        Ok(Client {
            inner: ForkSafe::new(client),
            hosts: hosts.to_owned(),
            states: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(0),
        })
    }

    /// The connect string this client was made with.
    #[getter]
    fn hosts(&self) -> &str {
        &self.hosts
    }

    /// `"connected"`, `"disconnected"`, `"expired"`, `"auth_failed"` or `"closed"` (also in a
    /// child process forked after this client was made, where it is unusable).
    #[getter]
    fn state(&self, py: Python<'_>) -> &'static str {
        self.core(py).map_or("closed", |client| client.state().as_str())
    }

    /// The current session id, or None (closed, or expired and not yet renewed).
    #[getter]
    fn session_id(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        Ok(self.core(py)?.session_id())
    }

    /// The session timeout granted by the server, in seconds.
    #[getter]
    fn session_timeout(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.core(py)?.session_timeout().as_secs_f64())
    }

    /// Whether the client was closed; True in a child process forked after it was made.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.core(py).map_or(true, |client| client.is_closed())
    }

    /// Ends the session: the server deletes its lock nodes at once. Waits at most `timeout`
    /// seconds (default 2; None: until the close is over, at most the session timeout) for the
    /// server to acknowledge, and Ctrl-C interrupts the wait; the close goes on in the
    /// background either way (and the exit hook waits for it, a second at most). Idempotent;
    /// does nothing in a child process forked after the client was made (the session is the
    /// parent's).
    #[pyo3(signature = (timeout = Some(CLOSE_WAIT.as_secs_f64())), text_signature = "(self, /, timeout=2.0)")]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let bound = match timeout {
            None => None,
            Some(seconds) if seconds >= 0.0 => Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)),
            Some(seconds) => {
                return Err(invalid_argument(
                    py,
                    &self.hosts,
                    format!("timeout must be a non-negative number of seconds, or None; got {seconds}"),
                ))
            }
        };
        let Ok(client) = self.core(py) else { return Ok(()) };
        let client = client.clone();
        let mut task = runtime::handle().spawn(async move { client.close().await });
        // (The timer is made in the runtime's context, at the first poll.)
        let waited = runtime::block_on(py, async {
            match bound {
                Some(bound) => tokio::time::timeout(bound, &mut task).await.is_ok(),
                None => {
                    let _ = (&mut task).await;
                    true
                }
            }
        });
        if !task.is_finished() {
            closing(task);
        }
        waited.map(drop)
    }

    /// Calls `callback(state)` on each session state change, on the client's callback thread
    /// (in order, after the client's earlier callbacks) holding the GIL. Returns a key for
    /// `_cancel_state_change`.
    fn on_state_change(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<u64> {
        if !callback.bind(py).is_callable() {
            return Err(invalid_argument(py, &self.hosts, "on_state_change needs a callable"));
        }
        let client = self.core(py)?.clone();
        let mut changes = client.state_changes();
        let callback: Callback = callbacks::callback(callback);
        let reported = callback.clone();
        let task = runtime::handle().spawn(async move {
            while let Some(state) = changes.next().await {
                let name = state.as_str();
                callbacks::dispatch(&client, reported.clone(), move |py| PyTuple::new(py, [name]));
            }
        });
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        self.states.lock().insert(key, (callback, task.abort_handle()));
        Ok(key)
    }

    /// Unregisters the `on_state_change` callback of `key`: it is not called again (but for a
    /// call already running), and nothing of it is kept. Idempotent.
    fn _cancel_state_change(&self, py: Python<'_>, key: u64) {
        let registration = self.states.lock().remove(&key);
        if let Some((callback, task)) = registration {
            task.abort();
            callback.clear(py);
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(states) = self.states.try_lock() {
            for (callback, _) in states.values() {
                callback.traverse(&visit)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let states = std::mem::take(&mut *self.states.lock());
        Python::attach(|py| {
            for (callback, task) in states.into_values() {
                task.abort();
                callback.clear(py);
            }
        });
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.close(py, Some(CLOSE_WAIT.as_secs_f64()))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = self.core(py).map(|c| c.state().as_str()).unwrap_or("forked");
        format!("<zklock.Client hosts={:?} state={state}>", self.hosts)
    }
}
