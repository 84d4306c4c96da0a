//! TLS to the servers' `secureClientPort`: the options, checked before any traffic, and their
//! translation for the ZooKeeper client (rustls with the ring provider, over the same tokio
//! sockets as plaintext: TCP_NODELAY, no SIGPIPE, no extra thread; see
//! third_party/zookeeper-client/ZKLOCK.md).

use std::fmt;

use pkcs8::der::zeroize::Zeroizing;

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// TLS options for [`crate::ClientOptions::tls`]: every server of the connect string is then
/// reached over TLS (its `secureClientPort`), its certificate verified against `ca_pem`.
///
/// ```no_run
/// # async fn demo() -> zklock::Result<()> {
/// let mut tls = zklock::TlsOptions::new(std::fs::read_to_string("ca.pem").unwrap());
/// // Mutual TLS: the server's x509 auth then knows this client by its certificate's subject,
/// // which ACLs name as `x509:CN=...`.
/// tls.client_cert_pem = Some(std::fs::read_to_string("client.pem").unwrap());
/// tls.client_key_pem = Some(std::fs::read_to_string("client.key").unwrap());
/// let options = zklock::ClientOptions { tls: Some(tls), ..Default::default() };
/// let client = zklock::Client::connect_with("zk1.example.com:2281", options).await?;
/// # let _ = client; Ok(()) }
/// ```
///
/// `Debug` shows neither the private key, nor its password, nor the certificates.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// The CA bundle (PEM, one or more certificates; CRLs too) that the servers' certificates
    /// must chain to. Required unless `verify_certificates` is off.
    pub ca_pem: String,
    /// The client's certificate chain (PEM), for servers that ask for one (mutual TLS, x509
    /// auth). Set together with `client_key_pem`.
    pub client_cert_pem: Option<String>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1; or encrypted PKCS#8, `ENCRYPTED PRIVATE
    /// KEY`, with `client_key_password`) of `client_cert_pem`.
    pub client_key_pem: Option<String>,
    /// The password of an encrypted `client_key_pem` (ignored for a key that is not encrypted).
    pub client_key_password: Option<String>,
    /// Whether a server's certificate must name the host it was reached by (as given in the
    /// connect string, or `server_name`): default `true`. Turning it off still checks that the
    /// certificate chains to `ca_pem`, but lets any server holding a certificate of that CA pose
    /// as any other, which is only for tests and for certificates issued without host names.
    pub verify_hostname: bool,
    /// Whether the servers' certificates are verified at all: default `true`. **For tests
    /// only**: off, any certificate is accepted (no CA is needed, none is checked, nor any host
    /// name), so anyone on the network path can pose as the ensemble; the connection is
    /// encrypted, not authenticated (Node's `rejectUnauthorized: false`, kazoo's
    /// `verify_certs=False`).
    pub verify_certificates: bool,
    /// The host name (or IP address) to send as SNI and to verify every server's certificate
    /// against, instead of each host of the connect string (Node's `servername`): for servers
    /// reached by an address or an alias that their certificates do not name.
    pub server_name: Option<String>,
    /// Where `client_key_pem` was read from, named in its errors ([`TlsOptions::from_pem_files`]).
    key_origin: Option<String>,
}

impl TlsOptions {
    /// Server verification against `ca_pem`, with host-name checking, and no client certificate.
    pub fn new(ca_pem: impl Into<String>) -> TlsOptions {
        TlsOptions {
            ca_pem: ca_pem.into(),
            client_cert_pem: None,
            client_key_pem: None,
            client_key_password: None,
            verify_hostname: true,
            verify_certificates: true,
            server_name: None,
            key_origin: None,
        }
    }

    /// **For tests only**: TLS that verifies no server certificate (see
    /// [`TlsOptions::verify_certificates`]); a client certificate may still be set.
    pub fn without_verification() -> TlsOptions {
        TlsOptions { verify_certificates: false, verify_hostname: false, ..TlsOptions::new("") }
    }

    /// The options from PEM files, as the C, Python and command-line interfaces take them: the
    /// CA bundle (`None` only if `verify_certificates` is then turned off), and the client's
    /// certificate chain and key. A file that cannot be read is an invalid argument naming it;
    /// the key's later errors name its file too.
    pub fn from_pem_files(
        ca: Option<&std::path::Path>,
        cert: Option<&std::path::Path>,
        key: Option<&std::path::Path>,
    ) -> Result<TlsOptions> {
        let read = |what: &str, path: Option<&std::path::Path>| -> Result<Option<String>> {
            let Some(path) = path else { return Ok(None) };
            std::fs::read_to_string(path)
                .map(Some)
                .map_err(|err| Error::invalid(format!("TLS options: cannot read the {what} {}: {err}", path.display())))
        };
        let mut options = TlsOptions::new(read("CA bundle", ca)?.unwrap_or_default());
        options.client_cert_pem = read("client certificate", cert)?;
        options.client_key_pem = read("client private key", key)?;
        options.key_origin = key.map(|path| path.display().to_string());
        Ok(options)
    }

    /// Checks the options as connecting would, before any network traffic: an
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) (that never quotes a key
    /// or a password) for a CA bundle or certificate that is no usable PEM, a key without its
    /// certificate, an encrypted key without its password or with a wrong one, and the like.
    pub fn check(&self) -> Result<()> {
        self.to_zk().map(drop)
    }

    /// The ZooKeeper client's TLS options; an invalid argument (that never quotes the PEM
    /// contents nor the password) for a bundle with no certificate, a certificate without its
    /// key, a key it cannot decrypt, and the like.
    pub(crate) fn to_zk(&self) -> Result<zk::TlsOptions> {
        let refused = |what: &str, err: zk::Error| Error::invalid(format!("TLS options: {what} ({err})"));
        let identity = match (&self.client_cert_pem, &self.client_key_pem) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(Error::invalid("TLS options: a client certificate needs its private key")),
            (None, Some(_)) => return Err(Error::invalid("TLS options: a client private key needs its certificate")),
        };
        let mut options = zk::TlsOptions::new();
        if self.verify_certificates {
            if self.ca_pem.trim().is_empty() {
                return Err(Error::invalid(
                    "TLS options: no CA bundle to verify the servers' certificates against \
                     (turning certificate verification off instead is for tests only)",
                ));
            }
            options = options
                .with_pem_ca(&self.ca_pem)
                .map_err(|err| refused("the CA bundle holds no usable PEM certificate", err))?;
        } else {
            // Safety (not memory safety): the documented off switch, for tests.
            options = unsafe { options.with_no_certificate_verification() };
        }
        if let Some((cert, key)) = identity {
            let decrypted = self.decrypted_key(key)?;
            options = options
                .with_pem_identity(cert, decrypted.as_deref().map_or(key, String::as_str))
                .map_err(|err| refused("the client certificate or its private key is not usable PEM", err))?;
        }
        if !self.verify_hostname {
            // Safety (not memory safety): the documented off switch; the chain is still verified.
            options = unsafe { options.with_no_hostname_verification() };
        }
        if let Some(name) = &self.server_name {
            options = options.with_server_name(name).map_err(|_| {
                Error::invalid(format!("TLS options: server name {name:?} is no valid host name or IP address"))
            })?;
        }
        Ok(options)
    }

    /// An encrypted PKCS#8 `key` decrypted, as plain PKCS#8 PEM (wiped when dropped); `None` for
    /// a key that is not encrypted.
    fn decrypted_key(&self, key: &str) -> Result<Option<Zeroizing<String>>> {
        const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
        const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
        let named = match &self.key_origin {
            Some(origin) => format!("the client private key {origin}"),
            None => "the client private key".to_owned(),
        };
        if key.contains("Proc-Type: 4,ENCRYPTED") {
            return Err(Error::invalid(format!(
                "TLS options: {named} is encrypted in OpenSSL's legacy PEM form (Proc-Type: 4,ENCRYPTED), \
                 which zklock does not read: convert it to encrypted PKCS#8 \
                 (openssl pkcs8 -topk8 -v2 aes-256-cbc -in OLD -out NEW)"
            )));
        }
        let Some(start) = key.find(BEGIN) else { return Ok(None) };
        let Some(length) = key[start..].find(END) else {
            return Err(Error::invalid(format!("TLS options: {named} has no end line ({END})")));
        };
        let Some(password) = &self.client_key_password else {
            return Err(Error::invalid(format!("TLS options: {named} is encrypted and no password is given for it")));
        };
        let pem = &key[start..start + length + END.len()];
        let not_readable = || Error::invalid(format!("TLS options: {named} is not a readable encrypted PKCS#8 key"));
        let (_, der) = pkcs8::Document::from_pem(pem).map_err(|_| not_readable())?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_bytes()).map_err(|_| not_readable())?;
        let decrypted = info.decrypt(password.as_bytes()).map_err(|err| {
            let why = match err {
                pkcs8::Error::EncryptedPrivateKey(pkcs8::pkcs5::Error::AlgorithmParametersInvalid { .. })
                | pkcs8::Error::EncryptedPrivateKey(pkcs8::pkcs5::Error::UnsupportedAlgorithm { .. }) => {
                    "is encrypted with an algorithm zklock does not support (PBES2 with AES or 3DES, and PBKDF2 or scrypt, are)"
                }
                _ => "could not be decrypted with the password given (wrong password?)",
            };
            Error::invalid(format!("TLS options: {named} {why}"))
        })?;
        decrypted.to_pem("PRIVATE KEY", pkcs8::LineEnding::LF).map(Some).map_err(|_| not_readable())
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_pem", &format_args!("<{} bytes>", self.ca_pem.len()))
            .field("client_cert_pem", &self.client_cert_pem.as_ref().map(|_| format_args!("<set>")))
            .field("client_key_pem", &self.client_key_pem.as_ref().map(|_| format_args!("<redacted>")))
            .field("client_key_password", &self.client_key_password.as_ref().map(|_| format_args!("<redacted>")))
            .field("verify_hostname", &self.verify_hostname)
            .field("verify_certificates", &self.verify_certificates)
            .field("server_name", &self.server_name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_key_and_bad_pem_is_an_invalid_argument() {
        let mut tls = TlsOptions::new("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
        tls.client_cert_pem = Some("CERT".into());
        tls.client_key_pem = Some("-----BEGIN PRIVATE KEY-----\nSECRETKEY\n-----END PRIVATE KEY-----\n".into());
        let shown = format!("{tls:?}");
        assert!(!shown.contains("SECRETKEY") && shown.contains("redacted"), "{shown}");
        let err = tls.to_zk().unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(!err.to_string().contains("SECRETKEY"), "{err}");
        let only_cert = TlsOptions { client_key_pem: None, ..tls };
        assert!(only_cert.to_zk().unwrap_err().message().contains("needs its private key"));
    }

    #[test]
    fn the_key_password_is_never_shown_and_legacy_encrypted_keys_are_refused_with_a_remedy() {
        let mut tls = TlsOptions::without_verification();
        tls.client_cert_pem = Some("CERT".into());
        tls.client_key_pem = Some(
            "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nSECRETKEY\n\
             -----END EC PRIVATE KEY-----\n"
                .into(),
        );
        tls.client_key_password = Some("hunter2-password".into());
        let shown = format!("{tls:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("SECRETKEY"), "{shown}");
        let err = tls.to_zk().unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(err.message().contains("legacy PEM form") && err.message().contains("openssl pkcs8 -topk8"), "{err}");
        assert!(!format!("{err}{err:?}").contains("hunter2"), "{err:?}");
        // An encrypted key whose PEM is cut short is refused as such.
        tls.client_key_pem = Some("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n".into());
        assert!(tls.to_zk().unwrap_err().message().contains("has no end line"));
    }
}
