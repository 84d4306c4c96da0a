//! SASL GSSAPI (Kerberos V5, RFC 4752) over the system's GSS-API library, loaded at run time.
//!
//! Upstream links `libgssapi_krb5` through rsasl and libgssapi-sys (bindgen, and the library
//! needed at build and load time). Loaded with `dlopen` on first use instead, a program built
//! with this feature starts and does everything else on a host without Kerberos, and says what
//! is missing only when GSSAPI is asked for.

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use super::{Mechanism, Result, SaslFailure, SaslInitiator, SaslInnerOptions, SaslOptions, SaslSession};

impl From<GssapiSaslOptions> for SaslOptions {
    fn from(options: GssapiSaslOptions) -> Self {
        Self(SaslInnerOptions::Gssapi(options))
    }
}

/// GSSAPI SASL options.
///
/// Uses [SaslOptions::gssapi] to construct one.
#[derive(Clone, Debug)]
pub struct GssapiSaslOptions {
    username: Cow<'static, str>,
    hostname: Option<Cow<'static, str>>,
    principal: Option<Cow<'static, str>>,
    keytab: Option<Cow<'static, str>>,
    credential_cache: Option<Cow<'static, str>>,
}

impl GssapiSaslOptions {
    pub(crate) fn new() -> Self {
        Self { username: Cow::from("zookeeper"), hostname: None, principal: None, keytab: None, credential_cache: None }
    }

    /// Specifies the primary part of Kerberos principal.
    ///
    /// It is `zookeeper.sasl.client.username` in Java client, but the word "client" is misleading
    /// as it is the username of targeting server.
    ///
    /// Defaults to "zookeeper".
    pub fn with_username(self, username: impl Into<Cow<'static, str>>) -> Self {
        Self { username: username.into(), ..self }
    }

    /// Specifies the instance part of Kerberos principal.
    ///
    /// Defaults to hostname or ip of targeting server in connecting string.
    pub fn with_hostname(self, hostname: impl Into<Cow<'static, str>>) -> Self {
        Self { hostname: Some(hostname.into()), ..self }
    }

    /// The client's own principal (`alice@EXAMPLE.COM`). Defaults to the credential cache's.
    pub fn with_principal(self, principal: impl Into<Cow<'static, str>>) -> Self {
        Self { principal: Some(principal.into()), ..self }
    }

    /// A keytab holding the client principal's keys: tickets are then obtained from the KDC with
    /// it, into a credential cache of this process's memory (unless
    /// [Self::with_credential_cache] names one), never into the user's default cache.
    pub fn with_keytab(self, keytab: impl Into<Cow<'static, str>>) -> Self {
        Self { keytab: Some(keytab.into()), ..self }
    }

    /// The credential cache (`FILE:/tmp/krb5cc_1000`, `KEYRING:...`, a path) to take tickets from
    /// (and, with a keytab, to put them in). Defaults to the default cache (`KRB5CCNAME`).
    pub fn with_credential_cache(self, credential_cache: impl Into<Cow<'static, str>>) -> Self {
        Self { credential_cache: Some(credential_cache.into()), ..self }
    }

    /// Whether this host has the GSS-API library: an error naming what is missing, and how to
    /// get it, if not.
    pub fn check_library() -> std::result::Result<(), String> {
        Gss::get().map(|_| ())
    }

    fn hostname_or(&self, hostname: &str) -> Cow<'static, str> {
        match self.hostname.as_ref() {
            None => Cow::Owned(hostname.to_string()),
            Some(hostname) => hostname.clone(),
        }
    }

    /// The credential cache that a keytab's tickets go to when none is named: one in memory per
    /// options (their clones share it), so that reconnecting reuses the tickets.
    fn memory_cache(&self) -> &'static str {
        static CACHES: std::sync::Mutex<Vec<(String, &'static str)>> = std::sync::Mutex::new(Vec::new());
        let key = format!("{:?}\0{:?}", self.principal, self.keytab);
        let mut caches = CACHES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, name)) = caches.iter().find(|(k, _)| *k == key) {
            return name;
        }
        let name: &'static str = Box::leak(format!("MEMORY:zklock-{}", uuid::Uuid::new_v4()).into_boxed_str());
        caches.push((key, name));
        name
    }
}

impl SaslInitiator for GssapiSaslOptions {
    fn new_session(&self, hostname: &str) -> Result<SaslSession> {
        let gss = Gss::get().map_err(SaslFailure::new)?;
        let target = format!("{}@{}", self.username, self.hostname_or(hostname));
        let target_name = GssName::import(gss, &target, &NT_HOSTBASED_SERVICE)
            .map_err(|e| e.failure(&format!("the server's service name {target}")))?;
        let credential = self.acquire(gss)?;
        let client =
            GssapiClient { gss, credential, target: target_name, context: std::ptr::null_mut(), state: State::Initial };
        SaslSession::new(Mechanism::Gssapi(client))
    }
}

impl GssapiSaslOptions {
    /// The client's credential: from the keytab or credential cache named, for the principal
    /// named; or the default (`None`: the library's default credential, found at the first step).
    fn acquire(&self, gss: &'static Gss) -> Result<Option<GssCred>> {
        if self.principal.is_none() && self.keytab.is_none() && self.credential_cache.is_none() {
            return Ok(None);
        }
        let principal = match &self.principal {
            None => None,
            Some(principal) => Some(
                GssName::import(gss, principal, &KRB5_NT_PRINCIPAL_NAME)
                    .map_err(|e| e.failure(&format!("the principal {principal}")))?,
            ),
        };
        let cstring = |what: &str, s: &str| {
            CString::new(s).map_err(|_| SaslFailure::new(format!("SASL GSSAPI: the {what} contains a NUL character")))
        };
        let mut store = Vec::new();
        if let Some(keytab) = &self.keytab {
            store.push((c"client_keytab", cstring("keytab", keytab)?));
        }
        match (&self.credential_cache, &self.keytab) {
            (Some(cache), _) => store.push((c"ccache", cstring("credential cache", cache)?)),
            (None, Some(_)) => store.push((c"ccache", cstring("credential cache", self.memory_cache())?)),
            (None, None) => {},
        }
        let mut elements: Vec<KeyValue> =
            store.iter().map(|(key, value)| KeyValue { key: key.as_ptr(), value: value.as_ptr() }).collect();
        let set = KeyValueSet { count: elements.len() as u32, elements: elements.as_mut_ptr() };
        let mut mech = KRB5_MECHANISM.desc();
        let mut mechs = OidSet { count: 1, elements: &mut mech };
        let mut credential = std::ptr::null_mut();
        let mut minor = 0;
        let major = unsafe {
            (gss.acquire_cred_from)(
                &mut minor,
                principal.as_ref().map_or(std::ptr::null_mut(), |name| name.name),
                0,
                &mut mechs,
                GSS_C_INITIATE,
                &set,
                &mut credential,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if gss_error(major) {
            let whose = match &self.principal {
                Some(principal) => format!("the credentials of {principal}"),
                None => "the client's credentials".to_owned(),
            };
            let from = match (&self.keytab, &self.credential_cache) {
                (Some(keytab), _) => format!(" from the keytab {keytab}"),
                (None, Some(cache)) => format!(" from the credential cache {cache}"),
                (None, None) => String::new(),
            };
            return Err(GssError { gss, major, minor }.failure(&format!("{whose}{from}")));
        }
        Ok(Some(GssCred { gss, cred: credential }))
    }
}

// ------------------------------------------------------------------------------------ the client

enum State {
    /// No token sent yet.
    Initial,
    /// Establishing the security context.
    Context,
    /// The context is established: the server's wrapped offer of security layers is next.
    Layers,
    Done,
}

/// The client side of one GSSAPI exchange (RFC 4752): the security context, then the choice of
/// no security layer (ZooKeeper's traffic is not wrapped; TLS is the way to protect it).
pub(crate) struct GssapiClient {
    gss: &'static Gss,
    credential: Option<GssCred>,
    target: GssName,
    context: GssCtx,
    state: State,
}

// Safety: the handles are used by one session at a time, which the GSS-API allows across threads.
unsafe impl Send for GssapiClient {}

impl Drop for GssapiClient {
    fn drop(&mut self) {
        if !self.context.is_null() {
            let mut minor = 0;
            unsafe { (self.gss.delete_sec_context)(&mut minor, &mut self.context, std::ptr::null_mut()) };
        }
    }
}

impl GssapiClient {
    /// Writes the response to `challenge` into `output`; `Some(sent)` once the exchange is over.
    pub(crate) fn step(&mut self, challenge: &[u8], output: &mut Vec<u8>) -> Result<Option<bool>> {
        match self.state {
            State::Initial => {
                self.state = State::Context;
                self.init(None, output)
            },
            State::Context => self.init(Some(challenge), output),
            State::Layers => {
                let offer = self.unwrap(challenge)?;
                if offer.len() != 4 {
                    return Err(SaslFailure::new("SASL GSSAPI: the server's offer of security layers is malformed"));
                }
                const NO_SECURITY_LAYER: u8 = 1;
                if offer[0] & NO_SECURITY_LAYER == 0 {
                    return Err(SaslFailure::new(
                        "SASL GSSAPI: the server requires a SASL security layer (integrity or privacy, its \
                         quality of protection), which this client does not provide: use TLS to protect the traffic",
                    ));
                }
                // No security layer, so no buffer size; no authorization id: the principal's own.
                output.extend_from_slice(&self.wrap(&[NO_SECURITY_LAYER, 0, 0, 0])?);
                self.state = State::Done;
                Ok(Some(true))
            },
            State::Done => Err(SaslFailure::new("SASL GSSAPI: the exchange is over")),
        }
    }

    fn init(&mut self, input: Option<&[u8]>, output: &mut Vec<u8>) -> Result<Option<bool>> {
        let mut input = input.map(|token| Buffer { length: token.len(), value: token.as_ptr() as *mut c_void });
        let mut token = Buffer::empty();
        let mut mech = KRB5_MECHANISM.desc();
        let mut minor = 0;
        let flags = GSS_C_MUTUAL_FLAG | GSS_C_REPLAY_FLAG | GSS_C_SEQUENCE_FLAG | GSS_C_CONF_FLAG | GSS_C_INTEG_FLAG;
        let major = unsafe {
            (self.gss.init_sec_context)(
                &mut minor,
                self.credential.as_ref().map_or(std::ptr::null_mut(), |c| c.cred),
                &mut self.context,
                self.target.name,
                &mut mech,
                flags,
                0,
                std::ptr::null_mut(),
                input.as_mut().map_or(std::ptr::null_mut(), |input| input as *mut Buffer),
                std::ptr::null_mut(),
                &mut token,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let token = OwnedBuffer { gss: self.gss, buffer: token };
        if gss_error(major) {
            let target = self.target.display();
            return Err(GssError { gss: self.gss, major, minor }.failure(&format!("a ticket for {target}")));
        }
        output.extend_from_slice(token.as_slice());
        if major & GSS_S_CONTINUE_NEEDED == 0 {
            self.state = State::Layers;
        }
        // The client answers even the context's last token (with an empty one when it has none):
        // the server sends its offer of layers in reply.
        Ok(None)
    }

    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>> {
        let mut input = Buffer { length: message.len(), value: message.as_ptr() as *mut c_void };
        let mut output = Buffer::empty();
        let mut minor = 0;
        let major =
            unsafe { (self.gss.wrap)(&mut minor, self.context, 0, 0, &mut input, std::ptr::null_mut(), &mut output) };
        let output = OwnedBuffer { gss: self.gss, buffer: output };
        if gss_error(major) {
            return Err(GssError { gss: self.gss, major, minor }.failure("the choice of security layer"));
        }
        Ok(output.as_slice().to_vec())
    }

    fn unwrap(&mut self, message: &[u8]) -> Result<Vec<u8>> {
        let mut input = Buffer { length: message.len(), value: message.as_ptr() as *mut c_void };
        let mut output = Buffer::empty();
        let mut minor = 0;
        let major = unsafe {
            (self.gss.unwrap)(
                &mut minor,
                self.context,
                &mut input,
                &mut output,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let output = OwnedBuffer { gss: self.gss, buffer: output };
        if gss_error(major) {
            return Err(GssError { gss: self.gss, major, minor }.failure("the server's offer of security layers"));
        }
        Ok(output.as_slice().to_vec())
    }
}

// ------------------------------------------------------------------------- the GSS-API, loaded

type OmUint32 = u32;
type GssNameT = *mut c_void;
type GssCredT = *mut c_void;
type GssCtx = *mut c_void;

#[repr(C)]
struct Oid {
    length: OmUint32,
    elements: *mut c_void,
}

#[repr(C)]
struct OidSet {
    count: usize,
    elements: *mut Oid,
}

#[repr(C)]
struct Buffer {
    length: usize,
    value: *mut c_void,
}

impl Buffer {
    fn empty() -> Self {
        Buffer { length: 0, value: std::ptr::null_mut() }
    }
}

#[repr(C)]
struct KeyValue {
    key: *const c_char,
    value: *const c_char,
}

#[repr(C)]
struct KeyValueSet {
    count: OmUint32,
    elements: *mut KeyValue,
}

/// An OID's DER bytes, as `gss_OID_desc` points to them.
struct StaticOid(&'static [u8]);

impl StaticOid {
    fn desc(&self) -> Oid {
        Oid { length: self.0.len() as OmUint32, elements: self.0.as_ptr() as *mut c_void }
    }
}

/// 1.2.840.113554.1.2.1.4, GSS_C_NT_HOSTBASED_SERVICE: `service@host`.
const NT_HOSTBASED_SERVICE: StaticOid = StaticOid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04");
/// 1.2.840.113554.1.2.2.1, GSS_KRB5_NT_PRINCIPAL_NAME: `primary/instance@REALM`.
const KRB5_NT_PRINCIPAL_NAME: StaticOid = StaticOid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01");
/// 1.2.840.113554.1.2.2, the Kerberos V5 mechanism.
const KRB5_MECHANISM: StaticOid = StaticOid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02");

const GSS_C_INITIATE: c_int = 1;
const GSS_C_MUTUAL_FLAG: OmUint32 = 2;
const GSS_C_REPLAY_FLAG: OmUint32 = 4;
const GSS_C_SEQUENCE_FLAG: OmUint32 = 8;
const GSS_C_CONF_FLAG: OmUint32 = 16;
const GSS_C_INTEG_FLAG: OmUint32 = 32;
const GSS_S_CONTINUE_NEEDED: OmUint32 = 1;
const GSS_C_GSS_CODE: c_int = 1;
const GSS_C_MECH_CODE: c_int = 2;
/// MIT's KRB5_KDC_UNREACH, "Cannot contact any KDC for requested realm": worth trying again.
const KRB5_KDC_UNREACH: OmUint32 = -1765328228i32 as OmUint32;

fn gss_error(major: OmUint32) -> bool {
    major & 0xffff_0000 != 0
}

type GssImportName = unsafe extern "C" fn(*mut OmUint32, *mut Buffer, *mut Oid, *mut GssNameT) -> OmUint32;
type GssDisplayName = unsafe extern "C" fn(*mut OmUint32, GssNameT, *mut Buffer, *mut *mut Oid) -> OmUint32;
type GssReleaseName = unsafe extern "C" fn(*mut OmUint32, *mut GssNameT) -> OmUint32;
type GssAcquireCredFrom = unsafe extern "C" fn(
    *mut OmUint32,
    GssNameT,
    OmUint32,
    *mut OidSet,
    c_int,
    *const KeyValueSet,
    *mut GssCredT,
    *mut *mut OidSet,
    *mut OmUint32,
) -> OmUint32;
type GssReleaseCred = unsafe extern "C" fn(*mut OmUint32, *mut GssCredT) -> OmUint32;
type GssInitSecContext = unsafe extern "C" fn(
    *mut OmUint32,
    GssCredT,
    *mut GssCtx,
    GssNameT,
    *mut Oid,
    OmUint32,
    OmUint32,
    *mut c_void,
    *mut Buffer,
    *mut *mut Oid,
    *mut Buffer,
    *mut OmUint32,
    *mut OmUint32,
) -> OmUint32;
type GssDeleteSecContext = unsafe extern "C" fn(*mut OmUint32, *mut GssCtx, *mut Buffer) -> OmUint32;
type GssWrap =
    unsafe extern "C" fn(*mut OmUint32, GssCtx, c_int, OmUint32, *mut Buffer, *mut c_int, *mut Buffer) -> OmUint32;
type GssUnwrap =
    unsafe extern "C" fn(*mut OmUint32, GssCtx, *mut Buffer, *mut Buffer, *mut c_int, *mut OmUint32) -> OmUint32;
type GssReleaseBuffer = unsafe extern "C" fn(*mut OmUint32, *mut Buffer) -> OmUint32;
type GssDisplayStatus =
    unsafe extern "C" fn(*mut OmUint32, OmUint32, c_int, *mut Oid, *mut OmUint32, *mut Buffer) -> OmUint32;

/// The functions of the GSS-API library this client calls.
struct Gss {
    import_name: GssImportName,
    display_name: GssDisplayName,
    release_name: GssReleaseName,
    acquire_cred_from: GssAcquireCredFrom,
    release_cred: GssReleaseCred,
    init_sec_context: GssInitSecContext,
    delete_sec_context: GssDeleteSecContext,
    wrap: GssWrap,
    unwrap: GssUnwrap,
    release_buffer: GssReleaseBuffer,
    display_status: GssDisplayStatus,
}

/// MIT Kerberos's GSS-API library (`gss_acquire_cred_from`, which takes a keytab and a cache
/// per call, is MIT's: 1.11 and later).
#[cfg(not(target_os = "macos"))]
const LIBRARIES: &[&CStr] = &[c"libgssapi_krb5.so.2", c"libgssapi_krb5.so"];
#[cfg(target_os = "macos")]
const LIBRARIES: &[&CStr] = &[c"libgssapi_krb5.2.2.dylib", c"libgssapi_krb5.dylib"];

impl Gss {
    /// The library, loaded once (and never unloaded); or why it cannot be.
    fn get() -> std::result::Result<&'static Gss, String> {
        static GSS: OnceLock<std::result::Result<Gss, String>> = OnceLock::new();
        GSS.get_or_init(Gss::load).as_ref().map_err(Clone::clone)
    }

    fn load() -> std::result::Result<Gss, String> {
        let mut errors = Vec::new();
        let handle = LIBRARIES.iter().find_map(|name| {
            let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if handle.is_null() {
                errors.push(dlerror());
            }
            (!handle.is_null()).then_some(handle)
        });
        let Some(handle) = handle else {
            return Err(format!(
                "SASL GSSAPI (Kerberos) needs MIT Kerberos's GSS-API library, {}, which this host does not have \
                 ({}): install it (Debian and Ubuntu: libgssapi-krb5-2; RHEL, Fedora and Amazon Linux: krb5-libs)",
                LIBRARIES[0].to_string_lossy(),
                errors.join("; ")
            ));
        };
        let symbol = |name: &CStr| {
            let symbol = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if symbol.is_null() {
                Err(format!(
                    "SASL GSSAPI (Kerberos) needs {} in the GSS-API library, which it lacks: MIT Kerberos 1.11 or \
                     later has it",
                    name.to_string_lossy()
                ))
            } else {
                Ok(symbol)
            }
        };
        // Safety: each symbol is the GSS-API function of that name, whose C signature (RFC 2744,
        // and MIT's gssapi_ext.h for gss_acquire_cred_from) the field's type spells.
        unsafe {
            Ok(Gss {
                import_name: std::mem::transmute::<*mut c_void, GssImportName>(symbol(c"gss_import_name")?),
                display_name: std::mem::transmute::<*mut c_void, GssDisplayName>(symbol(c"gss_display_name")?),
                release_name: std::mem::transmute::<*mut c_void, GssReleaseName>(symbol(c"gss_release_name")?),
                acquire_cred_from: std::mem::transmute::<*mut c_void, GssAcquireCredFrom>(symbol(
                    c"gss_acquire_cred_from",
                )?),
                release_cred: std::mem::transmute::<*mut c_void, GssReleaseCred>(symbol(c"gss_release_cred")?),
                init_sec_context: std::mem::transmute::<*mut c_void, GssInitSecContext>(symbol(
                    c"gss_init_sec_context",
                )?),
                delete_sec_context: std::mem::transmute::<*mut c_void, GssDeleteSecContext>(symbol(
                    c"gss_delete_sec_context",
                )?),
                wrap: std::mem::transmute::<*mut c_void, GssWrap>(symbol(c"gss_wrap")?),
                unwrap: std::mem::transmute::<*mut c_void, GssUnwrap>(symbol(c"gss_unwrap")?),
                release_buffer: std::mem::transmute::<*mut c_void, GssReleaseBuffer>(symbol(c"gss_release_buffer")?),
                display_status: std::mem::transmute::<*mut c_void, GssDisplayStatus>(symbol(c"gss_display_status")?),
            })
        }
    }

    /// The library's words for a status code (`code_type`: GSS_C_GSS_CODE or GSS_C_MECH_CODE).
    fn describe(&self, status: OmUint32, code_type: c_int) -> Vec<String> {
        let mut messages = Vec::new();
        let mut context = 0;
        let mut mech = KRB5_MECHANISM.desc();
        loop {
            let mut minor = 0;
            let mut text = Buffer::empty();
            let major =
                unsafe { (self.display_status)(&mut minor, status, code_type, &mut mech, &mut context, &mut text) };
            let text = OwnedBuffer { gss: self, buffer: text };
            if gss_error(major) {
                break;
            }
            let message = String::from_utf8_lossy(text.as_slice()).trim().to_owned();
            if !message.is_empty() {
                messages.push(message);
            }
            if context == 0 {
                break;
            }
        }
        messages
    }
}

fn dlerror() -> String {
    let error = unsafe { libc::dlerror() };
    if error.is_null() {
        return "not found".to_owned();
    }
    unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned()
}

struct GssError {
    gss: &'static Gss,
    major: OmUint32,
    minor: OmUint32,
}

impl GssError {
    /// The failure getting `what`, in the library's words (the Kerberos one first: it is the
    /// telling one, such as "Client 'x@R' not found in Kerberos database").
    fn failure(&self, what: &str) -> SaslFailure {
        let mut words = if self.minor != 0 { self.gss.describe(self.minor, GSS_C_MECH_CODE) } else { Vec::new() };
        words.extend(self.gss.describe(self.major & 0xffff_0000, GSS_C_GSS_CODE));
        words.dedup();
        SaslFailure {
            message: format!("SASL GSSAPI: could not get {what}: {}", words.join(": ")),
            transient: self.minor == KRB5_KDC_UNREACH,
        }
    }
}

struct OwnedBuffer<'a> {
    gss: &'a Gss,
    buffer: Buffer,
}

impl OwnedBuffer<'_> {
    fn as_slice(&self) -> &[u8] {
        if self.buffer.value.is_null() {
            return &[];
        }
        unsafe { std::slice::from_raw_parts(self.buffer.value as *const u8, self.buffer.length) }
    }
}

impl Drop for OwnedBuffer<'_> {
    fn drop(&mut self) {
        if !self.buffer.value.is_null() {
            let mut minor = 0;
            unsafe { (self.gss.release_buffer)(&mut minor, &mut self.buffer) };
        }
    }
}

struct GssName {
    gss: &'static Gss,
    name: GssNameT,
}

impl GssName {
    fn import(gss: &'static Gss, name: &str, kind: &StaticOid) -> std::result::Result<GssName, GssError> {
        let mut buffer = Buffer { length: name.len(), value: name.as_ptr() as *mut c_void };
        let mut oid = kind.desc();
        let mut imported = std::ptr::null_mut();
        let mut minor = 0;
        let major = unsafe { (gss.import_name)(&mut minor, &mut buffer, &mut oid, &mut imported) };
        if gss_error(major) {
            return Err(GssError { gss, major, minor });
        }
        Ok(GssName { gss, name: imported })
    }

    fn display(&self) -> String {
        let mut text = Buffer::empty();
        let mut minor = 0;
        let major = unsafe { (self.gss.display_name)(&mut minor, self.name, &mut text, std::ptr::null_mut()) };
        let text = OwnedBuffer { gss: self.gss, buffer: text };
        if gss_error(major) {
            return "the server".to_owned();
        }
        String::from_utf8_lossy(text.as_slice()).into_owned()
    }
}

impl Drop for GssName {
    fn drop(&mut self) {
        let mut minor = 0;
        unsafe { (self.gss.release_name)(&mut minor, &mut self.name) };
    }
}

struct GssCred {
    gss: &'static Gss,
    cred: GssCredT,
}

impl Drop for GssCred {
    fn drop(&mut self) {
        let mut minor = 0;
        unsafe { (self.gss.release_cred)(&mut minor, &mut self.cred) };
    }
}
