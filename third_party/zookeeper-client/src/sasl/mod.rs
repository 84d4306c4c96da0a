#[allow(unused_imports)]
use std::borrow::Cow;

#[cfg(feature = "sasl-gssapi")]
mod gssapi;
#[cfg(feature = "sasl-gssapi")]
pub use gssapi::*;

#[cfg(feature = "sasl-digest-md5")]
mod digest_md5;
#[cfg(feature = "sasl-digest-md5")]
pub use digest_md5::*;

#[cfg(feature = "sasl-digest-md5")]
mod mechanisms {
    mod digest_md5;
}

#[cfg(feature = "sasl-digest-md5")]
use rsasl::prelude::*;

/// Why a SASL exchange failed, in words for the connect observer, and whether trying again
/// may help (a KDC that did not answer) or not (credentials refused, a broken exchange).
#[derive(Debug)]
pub(crate) struct SaslFailure {
    pub message: String,
    pub transient: bool,
}

impl SaslFailure {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), transient: false }
    }
}

pub(crate) type Result<T, E = SaslFailure> = std::result::Result<T, E>;

pub(crate) trait SaslInitiator {
    fn new_session(&self, hostname: &str) -> Result<SaslSession>;
}

/// Client side SASL options.
#[derive(Clone, Debug)]
pub struct SaslOptions(SaslInnerOptions);

#[derive(Clone, Debug)]
enum SaslInnerOptions {
    #[cfg(feature = "sasl-gssapi")]
    Gssapi(GssapiSaslOptions),
    #[cfg(feature = "sasl-digest-md5")]
    DigestMd5(DigestMd5SaslOptions),
}

impl SaslOptions {
    /// Constructs a default [GssapiSaslOptions] for further customization.
    ///
    /// The GSS-API library (MIT Kerberos's `libgssapi_krb5.so.2`) is loaded at run time, on
    /// first use: [GssapiSaslOptions::check_library] says whether this host has it.
    #[cfg(feature = "sasl-gssapi")]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "sasl", feature = "sasl-gssapi"))))]
    pub fn gssapi() -> GssapiSaslOptions {
        GssapiSaslOptions::new()
    }

    /// Construct a [DigestMd5SaslOptions] for further customization.
    #[cfg(feature = "sasl-digest-md5")]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "sasl", feature = "sasl-digest-md5"))))]
    pub fn digest_md5(
        username: impl Into<Cow<'static, str>>,
        password: impl Into<Cow<'static, str>>,
    ) -> DigestMd5SaslOptions {
        DigestMd5SaslOptions::new(username, password)
    }

    /// The mechanism's name, as SASL names it (`GSSAPI`, `DIGEST-MD5`).
    pub fn mechanism(&self) -> &'static str {
        match &self.0 {
            #[cfg(feature = "sasl-digest-md5")]
            SaslInnerOptions::DigestMd5(_) => "DIGEST-MD5",
            #[cfg(feature = "sasl-gssapi")]
            SaslInnerOptions::Gssapi(_) => "GSSAPI",
        }
    }
}

impl SaslInitiator for SaslOptions {
    fn new_session(&self, hostname: &str) -> Result<SaslSession> {
        match &self.0 {
            #[cfg(feature = "sasl-digest-md5")]
            SaslInnerOptions::DigestMd5(options) => options.new_session(hostname),
            #[cfg(feature = "sasl-gssapi")]
            SaslInnerOptions::Gssapi(options) => options.new_session(hostname),
        }
    }
}

/// One mechanism's client side of an exchange: rsasl's for DIGEST-MD5; our own over the
/// run-time loaded GSS-API library for GSSAPI.
enum Mechanism {
    #[cfg(feature = "sasl-digest-md5")]
    Rsasl(Session),
    #[cfg(feature = "sasl-gssapi")]
    Gssapi(GssapiClient),
}

pub struct SaslSession {
    output: Vec<u8>,
    mechanism: Mechanism,
    finished: bool,
}

impl SaslSession {
    fn new(mechanism: Mechanism) -> Result<Self> {
        let mut session = Self { mechanism, output: Default::default(), finished: false };
        let first = match &session.mechanism {
            #[cfg(feature = "sasl-digest-md5")]
            Mechanism::Rsasl(session) => session.are_we_first(),
            #[cfg(feature = "sasl-gssapi")]
            Mechanism::Gssapi(_) => true,
        };
        if first {
            session.step(Default::default())?;
        }
        Ok(session)
    }

    pub fn name(&self) -> &str {
        match &self.mechanism {
            #[cfg(feature = "sasl-digest-md5")]
            Mechanism::Rsasl(session) => session.get_mechname().as_str(),
            #[cfg(feature = "sasl-gssapi")]
            Mechanism::Gssapi(_) => "GSSAPI",
        }
    }

    pub fn initial(&self) -> &[u8] {
        &self.output
    }

    /// The response to the server's `challenge`, or `None` once the exchange is complete.
    pub fn step(&mut self, challenge: &[u8]) -> Result<Option<&[u8]>> {
        if self.finished {
            // A server may answer the last response with an empty token instead of none.
            if challenge.is_empty() {
                return Ok(None);
            }
            return Err(SaslFailure::new(format!(
                "SASL {}: the server sent more after the exchange ended",
                self.name()
            )));
        }
        self.output.clear();
        let finished = match &mut self.mechanism {
            #[cfg(feature = "sasl-digest-md5")]
            Mechanism::Rsasl(session) => {
                let name = session.get_mechname().as_str().to_owned();
                match session
                    .step(Some(challenge), &mut self.output)
                    .map_err(|err| SaslFailure::new(format!("SASL {name}: {err}")))?
                {
                    State::Running => None,
                    State::Finished(MessageSent::Yes) => Some(true),
                    State::Finished(MessageSent::No) => Some(false),
                }
            },
            #[cfg(feature = "sasl-gssapi")]
            Mechanism::Gssapi(client) => client.step(challenge, &mut self.output)?,
        };
        match finished {
            None => Ok(Some(&self.output)),
            Some(sent) => {
                self.finished = true;
                Ok(sent.then_some(self.output.as_slice()))
            },
        }
    }
}
