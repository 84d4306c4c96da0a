//! `zkl_client`: one ZooKeeper session, shared by the locks made from it.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use super::callback::CallbackSlot;
use super::convert::{c_field, c_str, option_timeout};
use super::error::{zkl_result, Failure};
use super::{handles, runtime};
use crate::binding::ClientBinding;
use crate::{Client, ClientOptions, GssapiOptions, SaslOptions, SessionState};

/// A connection to a ZooKeeper ensemble (one session at a time), from zkl_client_connect and
/// ended by zkl_client_close. Opaque. Safe to use from any number of threads at once.
pub struct zkl_client {
    _private: [u8; 0],
}

impl handles::Handle for zkl_client {
    type Object = ClientHandle;
    const NAME: &'static str = "zkl_client";
    const MADE_BY: &'static str = "zkl_client_connect";
}

/// Options for zkl_client_connect. Fill it with zkl_options_init, then set fields. Zero means
/// the default for each field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zkl_options {
    /// The session timeout asked of the server, in ms (the server may clamp it). A holder that
    /// stays disconnected this long loses its locks. 0: 10000.
    pub session_timeout_ms: i64,
    /// How long zkl_client_connect tries to establish the session, in ms (an acquisition with a
    /// timeout that needs a new session tries as long too; one with -1 tries again after it, as
    /// long as it takes). 0: 10000.
    pub connect_timeout_ms: i64,
    /// Digest credentials "user:password", or NULL for none. Borrowed: only read during
    /// zkl_client_connect. Without TLS (tls ZKL_TLS_OFF) the password crosses the network in
    /// clear, readable by anyone on the path, and the C API warns of it nowhere: use TLS, or SASL
    /// DIGEST-MD5 (sasl_mechanism), which never sends it.
    pub digest_auth: *const c_char,
    /// The servers' packet limit (their jute.maxbuffer), in bytes: a lock whose path would make
    /// a larger request is refused with ZKL_INVALID_ARGUMENT, since the server would only drop
    /// the connection. 0: 1048575 (0xfffff, ZooKeeper's default).
    pub jute_maxbuffer: i64,
    /// SASL authentication on every connection: "DIGEST-MD5" (with sasl_username and
    /// sasl_password) or "GSSAPI" (Kerberos, with sasl_principal; needs MIT Kerberos's
    /// libgssapi_krb5.so.2 on the host, else ZKL_INVALID_ARGUMENT saying so), or NULL for none.
    /// The servers then know the client as sasl:USER (the username or principal), which the creator ACL
    /// presets mean. Refused credentials fail zkl_client_connect with ZKL_AUTH_FAILED at once.
    /// Every sasl_* string is borrowed: only read during zkl_client_connect.
    pub sasl_mechanism: *const c_char,
    /// DIGEST-MD5: the user of the servers' JAAS DigestLoginModule.
    pub sasl_username: *const c_char,
    /// DIGEST-MD5: its password (never shown in an error).
    pub sasl_password: *const c_char,
    /// GSSAPI: the client's principal, such as "alice@EXAMPLE.COM".
    pub sasl_principal: *const c_char,
    /// GSSAPI: a keytab (path) holding the principal's keys, or NULL.
    pub sasl_keytab: *const c_char,
    /// GSSAPI: a credential cache ("FILE:/tmp/krb5cc_1000"), or NULL for the default one (or,
    /// with a keytab, one in the process's memory).
    pub sasl_credential_cache: *const c_char,
    /// GSSAPI: the servers' service name, the first part of their principals. NULL: "zookeeper".
    pub sasl_service_name: *const c_char,
    /// GSSAPI: the host part of the servers' principals. NULL: each server's host as the connect
    /// string names it.
    pub sasl_host: *const c_char,
    /// TLS to the servers' secureClientPort: one of ZKL_TLS_*. 0: ZKL_TLS_OFF (plaintext; every
    /// other tls_ field must then be NULL).
    pub tls: i32,
    /// The CA bundle (PEM file path) that the servers' certificates must chain to; required
    /// with ZKL_TLS_VERIFY_FULL and ZKL_TLS_VERIFY_CA. Borrowed: the file is read during
    /// zkl_client_connect, as libzookeeper's zookeeper_init_ssl reads its files.
    pub tls_ca_file: *const c_char,
    /// The client's certificate chain (PEM file path), for mutual TLS and x509 auth; set with
    /// tls_key_file. Borrowed, read during zkl_client_connect.
    pub tls_cert_file: *const c_char,
    /// The client certificate's private key (PEM file path: PKCS#8, PKCS#1, SEC1, or encrypted
    /// PKCS#8 with tls_key_password). Borrowed, read during zkl_client_connect.
    pub tls_key_file: *const c_char,
    /// The password of an encrypted tls_key_file, or NULL. Borrowed: only read during
    /// zkl_client_connect, never kept in an error message; the caller may wipe it afterwards.
    pub tls_key_password: *const c_char,
    /// The host name to send as SNI and verify every server's certificate against, instead of
    /// each host of the connect string; NULL for those hosts. Borrowed for the call.
    pub tls_server_name: *const c_char,
}

/// zkl_options.tls: plaintext (the default).
pub const ZKL_TLS_OFF: i32 = 0;
/// zkl_options.tls: TLS; each server's certificate must chain to tls_ca_file and name the host
/// (from the connect string, or tls_server_name).
pub const ZKL_TLS_VERIFY_FULL: i32 = 1;
/// zkl_options.tls: TLS; each server's certificate must chain to tls_ca_file, whatever host it
/// names. Any server with a certificate of that CA can pose as any other: for tests and for
/// certificates issued without host names.
pub const ZKL_TLS_VERIFY_CA: i32 = 2;
/// zkl_options.tls: TLS without verifying the servers' certificates at all (no CA needed):
/// encrypted, but anyone on the network path can pose as the ensemble. For tests only.
pub const ZKL_TLS_NO_VERIFY: i32 = 3;

/// The state of a client's session, as zkl_client_state and the session callback report it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zkl_session_state {
    /// Connected; the session is live.
    ZKL_SESSION_STATE_CONNECTED = 1,
    /// The connection is down; the session may still be live on the servers. Holds are
    /// suspended.
    ZKL_SESSION_STATE_DISCONNECTED = 2,
    /// The session expired (or the client gave it up after being disconnected too long): its
    /// locks are lost. The next acquisition establishes a new session.
    ZKL_SESSION_STATE_EXPIRED = 3,
    /// The servers rejected the credentials.
    ZKL_SESSION_STATE_AUTH_FAILED = 4,
    /// The client was closed. Nothing follows.
    ZKL_SESSION_STATE_CLOSED = 5,
}

impl From<SessionState> for zkl_session_state {
    fn from(state: SessionState) -> Self {
        // Exhaustive inside the crate: a new state fails to compile here until it has a value.
        match state {
            SessionState::Connected => zkl_session_state::ZKL_SESSION_STATE_CONNECTED,
            SessionState::Disconnected => zkl_session_state::ZKL_SESSION_STATE_DISCONNECTED,
            SessionState::Expired => zkl_session_state::ZKL_SESSION_STATE_EXPIRED,
            SessionState::AuthFailed => zkl_session_state::ZKL_SESSION_STATE_AUTH_FAILED,
            SessionState::Closed => zkl_session_state::ZKL_SESSION_STATE_CLOSED,
        }
    }
}

/// Called on each change of a client's session state, on a zklock background thread (see
/// zkl_client_set_state_callback).
pub type zkl_session_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, client: *mut zkl_client, state: zkl_session_state)>;

type SessionCallback = unsafe extern "C" fn(*mut c_void, *mut zkl_client, zkl_session_state);

pub(crate) struct ClientHandle {
    pub(crate) client: Client,
    state_callback: Arc<CallbackSlot<SessionCallback>>,
    /// The task that delivers state changes to the callback; it ends after Closed.
    state_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// What zkl_options_init writes: zero (NULL) in every field, each meaning "the default".
const UNSET_OPTIONS: zkl_options = zkl_options {
    session_timeout_ms: 0,
    connect_timeout_ms: 0,
    digest_auth: std::ptr::null(),
    jute_maxbuffer: 0,
    sasl_mechanism: std::ptr::null(),
    sasl_username: std::ptr::null(),
    sasl_password: std::ptr::null(),
    sasl_principal: std::ptr::null(),
    sasl_keytab: std::ptr::null(),
    sasl_credential_cache: std::ptr::null(),
    sasl_service_name: std::ptr::null(),
    sasl_host: std::ptr::null(),
    tls: ZKL_TLS_OFF,
    tls_ca_file: std::ptr::null(),
    tls_cert_file: std::ptr::null(),
    tls_key_file: std::ptr::null(),
    tls_key_password: std::ptr::null(),
    tls_server_name: std::ptr::null(),
};

/// The sasl_* fields as the core's SASL options; errors name the fields, never the password.
fn sasl_options(options: &zkl_options) -> Result<Option<SaslOptions>, Failure> {
    let field = |ptr: *const c_char, name: &str| c_field(ptr, &format!("opts->{name}"));
    let Some(mechanism) = field(options.sasl_mechanism, "sasl_mechanism")? else {
        return Ok(None);
    };
    let (username, password) = (field(options.sasl_username, "sasl_username")?, options.sasl_password);
    let gssapi = [
        field(options.sasl_principal, "sasl_principal")?,
        field(options.sasl_keytab, "sasl_keytab")?,
        field(options.sasl_credential_cache, "sasl_credential_cache")?,
        field(options.sasl_service_name, "sasl_service_name")?,
        field(options.sasl_host, "sasl_host")?,
    ];
    match mechanism.as_str() {
        "DIGEST-MD5" => {
            if gssapi.iter().any(Option::is_some) {
                return Err(Failure::invalid("DIGEST-MD5 takes opts->sasl_username and sasl_password only"));
            }
            let (Some(username), false) = (username, password.is_null()) else {
                return Err(Failure::invalid("DIGEST-MD5 needs opts->sasl_username and opts->sasl_password"));
            };
            // SAFETY: a non-NULL password is a NUL-terminated string; not quoted if it is not UTF-8.
            let password = unsafe { CStr::from_ptr(password) }
                .to_str()
                .map_err(|_| Failure::invalid("opts->sasl_password is not valid UTF-8"))?;
            Ok(Some(SaslOptions::digest_md5(username, password)))
        }
        "GSSAPI" => {
            if username.is_some() || !password.is_null() {
                return Err(Failure::invalid("GSSAPI takes no opts->sasl_username or sasl_password"));
            }
            let [principal, keytab, credential_cache, service_name, host] = gssapi;
            let Some(principal) = principal else {
                return Err(Failure::invalid("GSSAPI needs opts->sasl_principal (such as \"alice@EXAMPLE.COM\")"));
            };
            let mut kerberos = GssapiOptions::new(principal);
            kerberos.keytab = keytab.map(Into::into);
            kerberos.credential_cache = credential_cache;
            kerberos.host = host;
            if let Some(service_name) = service_name {
                kerberos.service_name = service_name;
            }
            Ok(Some(SaslOptions::Gssapi(kerberos)))
        }
        other => Err(Failure::invalid(format!("opts->sasl_mechanism is {other:?}: \"DIGEST-MD5\" or \"GSSAPI\""))),
    }
}

fn client_options(options: *const zkl_options) -> Result<ClientOptions, Failure> {
    // SAFETY: a non-NULL options pointer points to an initialized zkl_options.
    let options = if options.is_null() { &UNSET_OPTIONS } else { unsafe { &*options } };
    // The core's defaults, so the two cannot drift apart; only the fields set here differ.
    let mut result = ClientOptions { language: "c".into(), ..Default::default() };
    if !options.digest_auth.is_null() {
        result.digest_auth = Some(c_str(options.digest_auth, "opts->digest_auth")?.to_owned());
    }
    result.sasl = sasl_options(options)?;
    if let Some(session_timeout) = option_timeout(options.session_timeout_ms, "opts->session_timeout_ms")? {
        result.session_timeout = session_timeout;
    }
    if let Some(connect_timeout) = option_timeout(options.connect_timeout_ms, "opts->connect_timeout_ms")? {
        result.connect_timeout = connect_timeout;
    }
    match options.jute_maxbuffer {
        0 => {}
        limit => {
            result.jute_maxbuffer = u32::try_from(limit).map_err(|_| {
                Failure::invalid(format!(
                    "opts->jute_maxbuffer is {limit}: it must be 1024 to 4294967295, or 0 for the default"
                ))
            })?
        }
    }
    result.tls = tls_options(options)?;
    Ok(result)
}

/// The TLS options of `options` (files read here), or `None` for ZKL_TLS_OFF.
fn tls_options(options: &zkl_options) -> Result<Option<crate::TlsOptions>, Failure> {
    let text = |ptr: *const c_char, what: &str| (!ptr.is_null()).then(|| c_str(ptr, what)).transpose();
    let ca = text(options.tls_ca_file, "opts->tls_ca_file")?;
    let cert = text(options.tls_cert_file, "opts->tls_cert_file")?;
    let key = text(options.tls_key_file, "opts->tls_key_file")?;
    let password = text(options.tls_key_password, "opts->tls_key_password")?;
    let server_name = text(options.tls_server_name, "opts->tls_server_name")?;
    let (verify_certificates, verify_hostname) = match options.tls {
        ZKL_TLS_OFF => {
            if [ca, cert, key, password, server_name].iter().any(Option::is_some) {
                return Err(Failure::invalid(
                    "opts->tls is ZKL_TLS_OFF but a tls_ field is set: set opts->tls to one of ZKL_TLS_VERIFY_FULL, \
                     ZKL_TLS_VERIFY_CA or ZKL_TLS_NO_VERIFY",
                ));
            }
            return Ok(None);
        }
        ZKL_TLS_VERIFY_FULL => (true, true),
        ZKL_TLS_VERIFY_CA => (true, false),
        ZKL_TLS_NO_VERIFY => (false, false),
        other => return Err(Failure::invalid(format!("opts->tls is {other}: it must be one of ZKL_TLS_*"))),
    };
    if verify_certificates && ca.is_none() {
        return Err(Failure::invalid(
            "opts->tls_ca_file is NULL: verifying the servers' certificates needs a CA bundle",
        ));
    }
    fn path(file: Option<&str>) -> Option<&std::path::Path> {
        file.map(std::path::Path::new)
    }
    let mut tls = crate::TlsOptions::from_pem_files(path(ca), path(cert), path(key))?;
    tls.client_key_password = password.map(str::to_owned);
    tls.verify_certificates = verify_certificates;
    tls.verify_hostname = verify_hostname;
    tls.server_name = server_name.map(str::to_owned);
    Ok(Some(tls))
}

/// Fills *opts with the defaults: both timeouts 0 (10 s each), no digest auth, no SASL, no TLS.
///
/// Ownership: opts is the caller's. Concurrency: any thread.
/// Errors: ZKL_INVALID_ARGUMENT if opts is NULL.
#[no_mangle]
pub extern "C" fn zkl_options_init(opts: *mut zkl_options) -> zkl_result {
    ffi_result!("zkl_options_init", {
        non_null!(opts, "opts");
        write_out!(opts, UNSET_OPTIONS);
        Ok(())
    })
}

/// Connects to the ensemble named by hosts ("host:port[,host:port...][/chroot]") and
/// establishes a session; blocks until it is established or the connect timeout passes.
/// opts may be NULL for the defaults.
///
/// Ownership: hosts and opts (and its strings: digest_auth, the sasl_ strings, the tls_ files'
/// paths, the key's password) are borrowed for the call only; the TLS files are read during it.
/// On ZKL_OK, *out receives a new client that the caller owns and must end with
/// zkl_client_close; on failure *out is left unchanged.
/// Concurrency: any thread; not from inside a zklock callback.
/// Errors: ZKL_INVALID_ARGUMENT for NULL hosts or out, a malformed connect string, negative
/// timeouts, SASL options that are incomplete or unusable (an unreadable keytab; GSSAPI without
/// libgssapi_krb5.so.2), or TLS options that are unusable: an unknown opts->tls, a tls_ file that
/// cannot be read or holds no usable PEM, a certificate without its key, an encrypted key without
/// its password or with a wrong one (the message names the file, never the password) (all before
/// any network traffic); ZKL_TIMEOUT if no session was established in time (the message names
/// each host's cause); ZKL_AUTH_FAILED if the servers rejected the credentials (a wrong SASL
/// password or principal, at once; the message says why, never the password), or, at once, if
/// every server refused the TLS handshake for the same certificate reason (unknown CA: a wrong
/// CA bundle; expired certificate; name mismatch; client certificate required or refused).
#[no_mangle]
pub extern "C" fn zkl_client_connect(
    hosts: *const c_char,
    opts: *const zkl_options,
    out: *mut *mut zkl_client,
) -> zkl_result {
    ffi_result!("zkl_client_connect", {
        non_null!(hosts, "hosts");
        non_null!(out, "out");
        let hosts = c_str(hosts, "hosts")?;
        let options = client_options(opts)?;
        let client = runtime::block_on(Client::connect_with(hosts, options))??;
        let state_callback = Arc::new(CallbackSlot::new());
        let mut changes = client.state_changes();
        let handle = handles::new::<zkl_client>(ClientHandle {
            client,
            state_callback: state_callback.clone(),
            state_task: Mutex::new(None),
        });
        let id = handle as usize;
        let dispatcher = handles::get(handle, "out")?.client.clone();
        let task = runtime::runtime()?.spawn(async move {
            while let Some(state) = changes.next().await {
                let (state_callback, done) = (state_callback.clone(), tokio::sync::oneshot::channel());
                // On the client's callback thread: a callback that blocks stalls no session.
                dispatcher.dispatch_callback(move || {
                    runtime::in_callback(|| {
                        // SAFETY: a C function pointer registered by the caller, with its userdata.
                        state_callback.call(|callback, userdata| unsafe {
                            callback(userdata, id as *mut zkl_client, state.into())
                        })
                    });
                    let _ = done.0.send(());
                });
                // Delivered before the next, and Closed before zkl_client_close returns.
                let _ = done.1.await;
            }
        });
        *handles::get(handle, "out")?.state_task.lock() = Some(task);
        write_out!(out, handle);
        Ok(())
    })
}

/// Ends the session at once (the server deletes its lock nodes, so waiters elsewhere proceed
/// immediately) and releases the handle: blocks until the server acknowledged (or the session
/// timeout passed) and the client's callbacks due until then, Closed last, have run. Acquisitions in progress on its locks fail with ZKL_CLOSED, and holds are
/// lost (their lost callbacks run, with ZKL_LOST_CLOSED). A registered session callback gets
/// ZKL_SESSION_STATE_CLOSED before this returns, and is never called after.
///
/// The handle is invalid afterwards: any use of it, including a second close, returns
/// ZKL_INVALID_ARGUMENT (it is never dereferenced, so this is safe). Locks made from it stay
/// valid handles until zkl_lock_free; their calls then return ZKL_CLOSED.
///
/// Ownership: takes the client. Closing NULL is a no-op returning ZKL_OK.
/// Concurrency: any thread, while other threads use the client or its locks; not from inside a
/// zklock callback (ZKL_INVALID_ARGUMENT, and the client stays open).
#[no_mangle]
pub extern "C" fn zkl_client_close(client: *mut zkl_client) -> zkl_result {
    ffi_result!("zkl_client_close", {
        if client.is_null() {
            return Ok(());
        }
        // Checked before the handle is removed, so a refused close leaves the client usable.
        runtime::check_may_block()?;
        let handle = handles::remove(client, "client")?;
        let task = handle.state_task.lock().take();
        runtime::block_on(async {
            handle.client.close().await;
            // The task ends once it delivered Closed; nothing is delivered after this returns.
            if let Some(task) = task {
                let _ = task.await;
            }
        })?;
        handle.state_callback.set(None, std::ptr::null_mut());
        Ok(())
    })
}

/// The client's current session state, in *out.
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a closed client.
#[no_mangle]
pub extern "C" fn zkl_client_state(client: *const zkl_client, out: *mut zkl_session_state) -> zkl_result {
    ffi_result!("zkl_client_state", {
        non_null!(client, "client");
        non_null!(out, "out");
        let handle = handles::get(client, "client")?;
        write_out!(out, handle.client.state().into());
        Ok(())
    })
}

/// The current ZooKeeper session id in *out, or 0 if there is none right now (expired and not
/// yet renewed).
///
/// Ownership: out is the caller's. Concurrency: any thread, including inside callbacks.
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a closed client.
#[no_mangle]
pub extern "C" fn zkl_client_session_id(client: *const zkl_client, out: *mut i64) -> zkl_result {
    ffi_result!("zkl_client_session_id", {
        non_null!(client, "client");
        non_null!(out, "out");
        let handle = handles::get(client, "client")?;
        write_out!(out, handle.client.session_id().unwrap_or(0));
        Ok(())
    })
}

/// Registers callback to be called with each later change of the session state (replacing any
/// previous one); NULL removes it. It runs on the client's callback thread (`zklock-callback`),
/// one callback at a time in order, with userdata as given; never on the threads that keep
/// sessions alive, so a callback that blocks delays only the client's later callbacks. No
/// blocking zkl_ call from inside it (those return ZKL_INVALID_ARGUMENT there). Once this function (or zkl_client_close) returns, the
/// previous callback is not running and is never called again, so its userdata may be freed.
///
/// Ownership: userdata stays the caller's; zklock only passes it back.
/// Concurrency: any thread; from inside a callback, only for the same client.
/// Errors: ZKL_INVALID_ARGUMENT for a NULL or closed client.
#[no_mangle]
pub extern "C" fn zkl_client_set_state_callback(
    client: *mut zkl_client,
    callback: zkl_session_callback,
    userdata: *mut c_void,
) -> zkl_result {
    ffi_result!("zkl_client_set_state_callback", {
        non_null!(client, "client");
        let handle = handles::get(client, "client")?;
        handle.state_callback.set(callback, userdata);
        Ok(())
    })
}
