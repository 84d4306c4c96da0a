//! TLS to the servers' `secureClientPort`: the options, checked before any traffic, and their
//! translation for the ZooKeeper client (rustls with the ring provider, over the same tokio
//! sockets as plaintext: TCP_NODELAY, no SIGPIPE, no extra thread; see
//! third_party/zookeeper-client/ZKLOCK.md).

use std::fmt;

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
/// `Debug` shows neither the private key nor the certificates.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// The CA bundle (PEM, one or more certificates; CRLs too) that the servers' certificates
    /// must chain to. Verification cannot be turned off.
    pub ca_pem: String,
    /// The client's certificate chain (PEM), for servers that ask for one (mutual TLS, x509
    /// auth). Set together with `client_key_pem`.
    pub client_cert_pem: Option<String>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1, unencrypted) of `client_cert_pem`.
    pub client_key_pem: Option<String>,
    /// Whether a server's certificate must name the host it was reached by (as given in the
    /// connect string): default `true`. Turning it off still checks that the certificate chains
    /// to `ca_pem`, but lets any server holding a certificate of that CA pose as any other,
    /// which is only for tests and for certificates issued without host names.
    pub verify_hostname: bool,
}

impl TlsOptions {
    /// Server verification against `ca_pem`, with host-name checking, and no client certificate.
    pub fn new(ca_pem: impl Into<String>) -> TlsOptions {
        TlsOptions { ca_pem: ca_pem.into(), client_cert_pem: None, client_key_pem: None, verify_hostname: true }
    }

    /// The ZooKeeper client's TLS options; an invalid argument (that never quotes the PEM
    /// contents) for a bundle with no certificate, a certificate without its key, and the like.
    pub(crate) fn to_zk(&self) -> Result<zk::TlsOptions> {
        let refused = |what: &str, err: zk::Error| Error::invalid(format!("TLS options: {what} ({err})"));
        let identity = match (&self.client_cert_pem, &self.client_key_pem) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(Error::invalid("TLS options: a client certificate needs its private key")),
            (None, Some(_)) => return Err(Error::invalid("TLS options: a client private key needs its certificate")),
        };
        let mut options = zk::TlsOptions::new()
            .with_pem_ca(&self.ca_pem)
            .map_err(|err| refused("the CA bundle holds no usable PEM certificate", err))?;
        if let Some((cert, key)) = identity {
            options = options
                .with_pem_identity(cert, key)
                .map_err(|err| refused("the client certificate or its private key is not usable PEM", err))?;
        }
        if !self.verify_hostname {
            // Safety (not memory safety): the documented off switch; the chain is still verified.
            options = unsafe { options.with_no_hostname_verification() };
        }
        Ok(options)
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_pem", &format_args!("<{} bytes>", self.ca_pem.len()))
            .field("client_cert_pem", &self.client_cert_pem.as_ref().map(|_| format_args!("<set>")))
            .field("client_key_pem", &self.client_key_pem.as_ref().map(|_| format_args!("<redacted>")))
            .field("verify_hostname", &self.verify_hostname)
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
}
