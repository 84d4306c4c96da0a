//! The client: one ZooKeeper session at a time, shared by its locks.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Function, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use napi_derive::napi;
use tokio_util::sync::CancellationToken;
use zklock::{
    Acl, ClientOptions, ConnectWarning, GssapiOptions, LockOptions, MaxLeases, Perms, SaslOptions, SemaphoreOptions,
    SessionState,
};

use crate::lock::NativeLock;

/// One entry of a custom ACL, as `{ perms, scheme, id }`.
#[napi(object)]
pub struct AclEntry {
    pub perms: u32,
    pub scheme: String,
    pub id: String,
}

/// The `sasl` option, as the JavaScript layer checked it (its shape; the core checks the values).
#[napi(object)]
pub struct SaslConfig {
    pub mechanism: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub principal: Option<String>,
    pub keytab: Option<String>,
    pub credential_cache: Option<String>,
    pub service_name: Option<String>,
    pub host: Option<String>,
}

/// The core's SASL options; what is refused here only comes from calling the addon directly.
fn sasl_options(config: SaslConfig) -> napi::Result<SaslOptions> {
    let invalid =
        |message: &str| napi::Error::new(napi::Status::InvalidArg, format!("ZKLOCK_INVALID_ARGUMENT: {message}"));
    match (config.mechanism.as_str(), config.username, config.password, config.principal) {
        ("DIGEST-MD5", Some(username), Some(password), None) => Ok(SaslOptions::digest_md5(username, password)),
        ("GSSAPI", None, None, Some(principal)) => {
            let mut kerberos = GssapiOptions::new(principal);
            kerberos.keytab = config.keytab.map(Into::into);
            kerberos.credential_cache = config.credential_cache;
            kerberos.host = config.host;
            if let Some(service_name) = config.service_name {
                kerberos.service_name = service_name;
            }
            Ok(SaslOptions::Gssapi(kerberos))
        }
        _ => Err(invalid(
            "sasl must be { mechanism: 'DIGEST-MD5', username, password } or { mechanism: 'GSSAPI', principal, ... }",
        )),
    }
}

/// The core's lock options. The JavaScript layer checked the preset's name and each entry's
/// perms; what is refused here only comes from calling the addon directly.
fn lock_options(
    identifier: Option<String>,
    acl: Option<String>,
    acl_entries: Option<Vec<AclEntry>>,
) -> napi::Result<LockOptions> {
    let invalid =
        |message: String| napi::Error::new(napi::Status::InvalidArg, format!("ZKLOCK_INVALID_ARGUMENT: {message}"));
    let acl = match (acl.as_deref(), acl_entries) {
        (None | Some("open"), None) => Acl::Open,
        (Some("creatorAllWorldRead"), None) => Acl::CreatorAllWorldRead,
        (Some("creatorAll"), None) => Acl::CreatorAll,
        (None, Some(entries)) => Acl::Custom(
            entries
                .into_iter()
                .enumerate()
                .map(|(i, entry)| match Perms::from_bits(entry.perms) {
                    Some(perms) => Ok(zklock::AclEntry::new(perms, entry.scheme, entry.id)),
                    None => Err(invalid(format!("acl[{i}].perms is {:#x}: only bits of zklock.perms", entry.perms))),
                })
                .collect::<napi::Result<_>>()?,
        ),
        (preset, _) => return Err(invalid(format!("acl {preset:?} is not a preset of zklock"))),
    };
    Ok(LockOptions { identifier, acl, ..LockOptions::default() })
}
use crate::runtime::{self, Shared};
use crate::rwlock::NativeReadWriteLock;
use crate::semaphore::NativeSemaphore;

/// The `tls` option as `tls.connect` names it, PEM contents as strings (the JavaScript layer
/// joined arrays and decoded Buffers, and checked the types).
#[napi(object)]
pub struct Tls {
    pub ca: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub passphrase: Option<String>,
    pub reject_unauthorized: bool,
    pub servername: Option<String>,
}

impl From<Tls> for zklock::TlsOptions {
    fn from(tls: Tls) -> zklock::TlsOptions {
        let mut options = zklock::TlsOptions::new(tls.ca.unwrap_or_default());
        options.client_cert_pem = tls.cert;
        options.client_key_pem = tls.key;
        options.client_key_password = tls.passphrase;
        options.verify_certificates = tls.reject_unauthorized;
        options.verify_hostname = tls.reject_unauthorized;
        options.server_name = tls.servername;
        options
    }
}

/// A core connect warning, as the JavaScript layer passes it to `process.emitWarning`.
#[napi(object)]
pub struct Warning {
    pub code: String,
    pub message: String,
}

impl From<ConnectWarning> for Warning {
    fn from(warning: ConnectWarning) -> Self {
        let code = match warning {
            ConnectWarning::CleartextPassword => "ZKLOCK_CLEARTEXT_PASSWORD",
            // Warnings added to core later still get a code.
            _ => "ZKLOCK_WARNING",
        };
        Warning { code: code.into(), message: warning.message().into() }
    }
}

/// Connects and establishes a session. The JavaScript layer has validated the arguments; the
/// core validates the connect string, the auth and the TLS options.
#[napi]
#[allow(clippy::too_many_arguments)] // the JavaScript layer's positional arguments
pub fn connect<'env>(
    env: &'env Env,
    hosts: String,
    session_timeout_ms: Option<u32>,
    connect_timeout_ms: Option<u32>,
    auth: Option<String>,
    jute_maxbuffer: Option<u32>,
    sasl: Option<SaslConfig>,
    tls: Option<Tls>,
) -> napi::Result<PromiseRaw<'env, NativeClient>> {
    // What JavaScript left out is the core's default.
    let mut options = ClientOptions {
        digest_auth: auth,
        sasl: sasl.map(sasl_options).transpose()?,
        language: "node".into(),
        tls: tls.map(Into::into),
        ..ClientOptions::default()
    };
    if let Some(ms) = session_timeout_ms {
        options.session_timeout = Duration::from_millis(ms.into());
    }
    if let Some(ms) = connect_timeout_ms {
        options.connect_timeout = Duration::from_millis(ms.into());
    }
    if let Some(limit) = jute_maxbuffer {
        options.jute_maxbuffer = limit;
    }
    let warnings = options.connect_warnings();
    runtime::promise(env, async move { zklock::Client::connect_with(&hosts, options).await }, |env, client| {
        let shared = Arc::new(Shared { client, kept: Default::default() });
        // Only fails if Node refuses the cleanup hook; the session then ends by TCP reset.
        let _ = runtime::register(env, &shared);
        NativeClient { shared, warnings }
    })
}

#[napi]
pub struct NativeClient {
    shared: Arc<Shared>,
    warnings: Vec<ConnectWarning>,
}

#[napi]
impl NativeClient {
    /// What connecting with these options put at risk (the core's rule), for the JavaScript
    /// layer to emit once, as Node's warnings.
    #[napi(getter)]
    pub fn connect_warnings(&self) -> Vec<Warning> {
        self.warnings.iter().copied().map(Warning::from).collect()
    }

    /// `connected`, `disconnected`, `expired`, `authFailed` or `closed`.
    #[napi(getter)]
    pub fn state(&self) -> String {
        state_name(self.shared.client.state())
    }

    /// The session timeout the server granted (or the one asked for, between sessions), in ms.
    #[napi(getter)]
    pub fn session_timeout_ms(&self) -> f64 {
        self.shared.client.session_timeout().as_secs_f64() * 1000.0
    }

    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let client = self.shared.client.clone();
        runtime::promise(
            env,
            async move {
                client.close().await;
                Ok(())
            },
            |_, ()| (),
        )
    }

    /// A lock on `path`; `acl` is a preset's name, or `acl_entries` the entries of a custom ACL
    /// (the JavaScript layer has checked their shapes; the core checks what they mean).
    #[napi]
    pub fn lock(
        &self,
        env: &Env,
        path: String,
        identifier: Option<String>,
        acl: Option<String>,
        acl_entries: Option<Vec<AclEntry>>,
    ) -> napi::Result<NativeLock> {
        let options = lock_options(identifier, acl, acl_entries)?;
        match self.shared.client.lock_with(&path, options) {
            Ok(lock) => Ok(NativeLock::new(lock, self.shared.clone())),
            Err(err) => Err(crate::error::to_js(env, &err)),
        }
    }

    /// A read/write lock on `path`; nothing is sent to ZooKeeper until the first acquisition.
    #[napi]
    pub fn read_write_lock(
        &self,
        env: &Env,
        path: String,
        identifier: Option<String>,
        acl: Option<String>,
        acl_entries: Option<Vec<AclEntry>>,
    ) -> napi::Result<NativeReadWriteLock> {
        let options = lock_options(identifier, acl, acl_entries)?;
        match self.shared.client.read_write_lock_with(&path, options) {
            Ok(lock) => Ok(NativeReadWriteLock::new(lock, self.shared.clone())),
            Err(err) => Err(crate::error::to_js(env, &err)),
        }
    }

    /// A semaphore on `path` with a fixed max (`max_leases`) or the max read from a shared count
    /// (`count_path`, made with `count_seed` if missing); the JavaScript layer passes exactly one.
    /// `acl` and `acl_entries` as for `lock`, given to every node the semaphore makes.
    #[napi]
    #[allow(clippy::too_many_arguments)] // JavaScript's options, passed apart
    pub fn semaphore(
        &self,
        env: &Env,
        path: String,
        max_leases: Option<u32>,
        count_path: Option<String>,
        count_seed: Option<u32>,
        identifier: Option<String>,
        acl: Option<String>,
        acl_entries: Option<Vec<AclEntry>>,
    ) -> napi::Result<NativeSemaphore> {
        let max = match (max_leases, count_path) {
            (Some(max), None) => MaxLeases::Fixed(max),
            (None, Some(path)) => MaxLeases::SharedCount { path, seed: count_seed.unwrap_or(1) },
            _ => {
                return Err(napi::Error::new(
                    napi::Status::InvalidArg,
                    "ZKLOCK_INVALID_ARGUMENT: a semaphore takes maxLeases or a shared count, exactly one",
                ))
            }
        };
        let mut options = SemaphoreOptions::new(max).acl(lock_options(None, acl, acl_entries)?.acl);
        options.identifier = identifier;
        match self.shared.client.semaphore_with(&path, options) {
            Ok(semaphore) => Ok(NativeSemaphore::new(semaphore, self.shared.clone())),
            Err(err) => Err(crate::error::to_js(env, &err)),
        }
    }

    /// Calls `callback` with each state change until `stop()`. The callback never keeps the
    /// process alive.
    #[napi]
    pub fn watch_state(&self, callback: Function<String, ()>) -> napi::Result<NativeStateWatch> {
        let notify = callback.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
        // Subscribed now, so nothing between this call and the task's start is missed.
        let mut changes = self.shared.client.state_changes();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        napi::bindgen_prelude::spawn(async move {
            loop {
                tokio::select! {
                    change = changes.next() => match change {
                        Some(state) => {
                            notify.call(state_name(state), ThreadsafeFunctionCallMode::NonBlocking);
                        }
                        None => return,
                    },
                    _ = stopped.cancelled() => return,
                }
            }
        });
        Ok(NativeStateWatch { stop })
    }
}

#[napi]
pub struct NativeStateWatch {
    stop: CancellationToken,
}

#[napi]
impl NativeStateWatch {
    #[napi]
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

fn state_name(state: SessionState) -> String {
    crate::names::camel_case(state.as_str())
}
