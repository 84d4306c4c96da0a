//! SASL authentication: DIGEST-MD5 (a user and password of the servers' JAAS
//! `DigestLoginModule`) and GSSAPI (Kerberos V5), checked before any traffic and translated for
//! the ZooKeeper client. DIGEST-MD5 is pure Rust; GSSAPI loads MIT Kerberos's GSS-API library
//! (`libgssapi_krb5.so.2`) at run time, so that a host without it runs everything else (see
//! third_party/zookeeper-client/ZKLOCK.md).

use std::fmt;
use std::path::PathBuf;

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// SASL authentication for [`crate::ClientOptions::sasl`], done on every connection before any
/// request. The servers then know the client by its SASL identity ([`SaslOptions::identity`]),
/// which ACL entries name as `sasl:<identity>` (and [`crate::Acl`]'s creator presets mean).
/// Credentials the servers refuse end the connect (or the session) with
/// [`crate::ErrorKind::AuthFailed`], at once: they are never tried again.
///
/// ```no_run
/// # async fn demo() -> zklock::Result<()> {
/// // DIGEST-MD5, as Kafka's ZooKeepers are often set up (a JAAS DigestLoginModule):
/// let sasl = zklock::SaslOptions::digest_md5("alice", std::env::var("ZK_PASSWORD").unwrap());
/// // Kerberos: a principal and its keytab (or a credential cache that kinit filled).
/// let mut kerberos = zklock::GssapiOptions::new("alice@EXAMPLE.COM");
/// kerberos.keytab = Some("/etc/zk/alice.keytab".into());
/// let sasl = zklock::SaslOptions::Gssapi(kerberos);
/// let options = zklock::ClientOptions { sasl: Some(sasl), ..Default::default() };
/// let client = zklock::Client::connect_with("zk1.example.com:2181", options).await?;
/// # let _ = client; Ok(()) }
/// ```
///
/// `Debug` shows no password.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslOptions {
    /// DIGEST-MD5 with a user and password the servers know (their JAAS `Server` section's
    /// `DigestLoginModule`, `user_<name>="<password>"`). Pure Rust: no system library.
    DigestMd5 {
        /// The user; the servers' SASL identity for this client.
        username: String,
        /// Its password: never shown by `Debug` or in errors.
        password: String,
    },
    /// GSSAPI: Kerberos V5, with MIT Kerberos's GSS-API library loaded at run time.
    Gssapi(GssapiOptions),
}

/// Kerberos (SASL GSSAPI) options: see [`SaslOptions::Gssapi`]. The Kerberos configuration (the
/// realm's KDCs) is the system's: `/etc/krb5.conf`, or the file `KRB5_CONFIG` names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GssapiOptions {
    /// The client's principal, `name@REALM` (or `name/instance@REALM`).
    pub principal: String,
    /// A keytab holding the principal's keys: tickets are obtained from the KDC with it, kept in
    /// this process's memory (unless `credential_cache` names a cache), and renewed from it.
    pub keytab: Option<PathBuf>,
    /// A credential cache to take the principal's tickets from (what `kinit` filled: a path,
    /// `FILE:...`, `KEYRING:...`); with a keytab, where its tickets go. `None`: the default cache
    /// (`KRB5CCNAME`) without a keytab, this process's memory with one.
    pub credential_cache: Option<String>,
    /// The servers' service name, the first part of their principals
    /// (`zookeeper/<host>@REALM`): default `zookeeper`, as the Java client's
    /// `zookeeper.sasl.client.username`.
    pub service_name: String,
    /// The host part of the servers' principals: by default each server's host as the connect
    /// string names it (so name servers by the host names their principals carry).
    pub host: Option<String>,
}

impl GssapiOptions {
    /// The principal's credentials from the default credential cache, for servers named
    /// `zookeeper/<host>`.
    pub fn new(principal: impl Into<String>) -> GssapiOptions {
        GssapiOptions {
            principal: principal.into(),
            keytab: None,
            credential_cache: None,
            service_name: "zookeeper".to_owned(),
            host: None,
        }
    }
}

impl SaslOptions {
    /// DIGEST-MD5 with `username` and `password`.
    pub fn digest_md5(username: impl Into<String>, password: impl Into<String>) -> SaslOptions {
        SaslOptions::DigestMd5 { username: username.into(), password: password.into() }
    }

    /// The mechanism, as SASL names it: `DIGEST-MD5` or `GSSAPI`.
    pub fn mechanism(&self) -> &'static str {
        match self {
            SaslOptions::DigestMd5 { .. } => "DIGEST-MD5",
            SaslOptions::Gssapi(_) => "GSSAPI",
        }
    }

    /// The identity the servers give this client, which ACL entries name as `sasl:<identity>`:
    /// the DIGEST-MD5 user, or the Kerberos principal (servers set up with
    /// `kerberos.removeHostFromPrincipal` or `kerberos.removeRealmFromPrincipal` shorten it, and
    /// zklock's ACL checks allow for that).
    pub fn identity(&self) -> &str {
        match self {
            SaslOptions::DigestMd5 { username, .. } => username,
            SaslOptions::Gssapi(options) => &options.principal,
        }
    }

    /// The ZooKeeper client's SASL options; an invalid argument for an empty or malformed name,
    /// a keytab that cannot be read, or (GSSAPI) a host without the GSS-API library. Never
    /// quotes the password.
    pub(crate) fn to_zk(&self) -> Result<zk::SaslOptions> {
        let refused = |what: String| Err(Error::invalid(format!("SASL {} options: {what}", self.mechanism())));
        let nul =
            |field: &str, value: &str| value.contains('\0').then(|| format!("the {field} contains a NUL character"));
        match self {
            SaslOptions::DigestMd5 { username, password } => {
                if username.is_empty() {
                    return refused("the username is empty".to_owned());
                }
                // The DIGEST-MD5 response quotes the user name as is.
                if username.contains(['"', '\\']) {
                    return refused(format!("the username {username:?} contains a quote or a backslash"));
                }
                if let Some(why) = nul("username", username).or_else(|| nul("password", password)) {
                    return refused(why);
                }
                Ok(zk::SaslOptions::digest_md5(username.clone(), password.clone()).into())
            }
            SaslOptions::Gssapi(options) => {
                let GssapiOptions { principal, keytab, credential_cache, service_name, host } = options;
                if principal.is_empty() {
                    return refused("the principal is empty".to_owned());
                }
                if service_name.is_empty() || service_name.contains(['@', '/']) {
                    return refused(format!(
                        "the service name {service_name:?} is not a principal's first part (such as zookeeper)"
                    ));
                }
                if host.as_deref() == Some("") {
                    return refused("the host is empty (leave it unset to use each server's)".to_owned());
                }
                if credential_cache.as_deref() == Some("") {
                    return refused("the credential cache is empty (leave it unset for the default)".to_owned());
                }
                let texts = [
                    ("principal", Some(principal)),
                    ("credential cache", credential_cache.as_ref()),
                    ("service name", Some(service_name)),
                    ("host", host.as_ref()),
                ];
                if let Some(why) = texts.into_iter().filter_map(|(field, value)| nul(field, value?)).next() {
                    return refused(why);
                }
                let mut zk_options =
                    zk::SaslOptions::gssapi().with_principal(principal.clone()).with_username(service_name.clone());
                if let Some(keytab) = keytab {
                    if let Err(err) = std::fs::File::open(keytab) {
                        return refused(format!("cannot read the keytab {}: {err}", keytab.display()));
                    }
                    let Some(keytab) = keytab.to_str().filter(|path| !path.contains('\0')) else {
                        return refused(format!("the keytab path {} is not UTF-8", keytab.display()));
                    };
                    zk_options = zk_options.with_keytab(keytab.to_owned());
                }
                if let Some(cache) = credential_cache {
                    zk_options = zk_options.with_credential_cache(cache.clone());
                }
                if let Some(host) = host {
                    zk_options = zk_options.with_hostname(host.clone());
                }
                if let Err(missing) = zk::GssapiSaslOptions::check_library() {
                    return Err(Error::invalid(missing));
                }
                Ok(zk_options.into())
            }
        }
    }
}

impl fmt::Debug for SaslOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaslOptions::DigestMd5 { username, .. } => f
                .debug_struct("DigestMd5")
                .field("username", username)
                .field("password", &format_args!("<redacted>"))
                .finish(),
            SaslOptions::Gssapi(options) => f.debug_tuple("Gssapi").field(options).finish(),
        }
    }
}

/// The forms of a SASL identity the servers may give: a Kerberos principal whole, or shortened
/// by `kerberos.removeRealmFromPrincipal` and `kerberos.removeHostFromPrincipal`.
pub(crate) fn identity_forms(identity: &str) -> Vec<String> {
    let (name, realm) = match identity.split_once('@') {
        Some((name, realm)) => (name, Some(realm)),
        None => (identity, None),
    };
    let primary = name.split('/').next().unwrap_or(name);
    let mut forms = vec![identity.to_owned(), name.to_owned()];
    if primary != name {
        forms.extend(realm.map(|realm| format!("{primary}@{realm}")));
        forms.push(primary.to_owned());
    }
    forms.dedup();
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_errors_show_no_password() {
        let sasl = SaslOptions::digest_md5("al\"ice", "SECRETPW");
        let shown = format!("{sasl:?}");
        assert!(!shown.contains("SECRETPW") && shown.contains("redacted"), "{shown}");
        let err = sasl.to_zk().unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(err.message().contains("quote") && !err.to_string().contains("SECRETPW"), "{err}");
        let err = SaslOptions::digest_md5("", "SECRETPW").to_zk().unwrap_err();
        assert!(err.message().contains("username is empty") && !err.to_string().contains("SECRETPW"), "{err}");
        assert!(SaslOptions::digest_md5("alice", "pw\0").to_zk().unwrap_err().message().contains("NUL"));
    }

    #[test]
    fn gssapi_options_are_checked_before_any_traffic() {
        let refused = |options: GssapiOptions| SaslOptions::Gssapi(options).to_zk().unwrap_err();
        assert!(refused(GssapiOptions::new("")).message().contains("principal is empty"));
        let mut options = GssapiOptions::new("alice@R");
        options.keytab = Some("/nonexistent/alice.keytab".into());
        let err = refused(options);
        assert!(err.message().contains("cannot read the keytab /nonexistent/alice.keytab"), "{err}");
        let mut options = GssapiOptions::new("alice@R");
        options.service_name = "zookeeper/host".into();
        assert!(refused(options).message().contains("service name"));
    }

    #[test]
    fn identity_forms_allow_for_shortened_principals() {
        assert_eq!(identity_forms("alice"), ["alice"]);
        assert_eq!(identity_forms("alice@R"), ["alice@R", "alice"]);
        assert_eq!(identity_forms("svc/host@R"), ["svc/host@R", "svc/host", "svc@R", "svc"]);
    }
}
