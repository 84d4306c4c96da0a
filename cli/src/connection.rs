//! How both commands reach ZooKeeper.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use zeroize::Zeroizing;

use crate::codes;

/// Connection options shared by every command.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    /// ZooKeeper servers: host:port[,host:port...][/chroot]
    #[arg(long = "zk", env = "ZK_CONNECT", value_name = "CONNECT")]
    pub connect: String,
    /// Session timeout in seconds: a holder cut off this long loses the lock
    #[arg(long, value_name = "SECS", default_value_t = zklock::DEFAULT_SESSION_TIMEOUT.as_secs_f64())]
    pub session_timeout: f64,
    /// How long to try for a session before giving up (exit 69), in seconds
    #[arg(long, value_name = "SECS", default_value_t = zklock::DEFAULT_CONNECT_TIMEOUT.as_secs_f64())]
    pub connect_timeout: f64,
    #[command(flatten)]
    pub sasl: Sasl,
    #[command(flatten)]
    pub tls: Tls,
    /// The options whose value came from the environment rather than a flag (clap ids): a flag
    /// overrides the environment and never conflicts with it, and a stray variable alone is no
    /// error.
    #[arg(skip)]
    pub from_env: Vec<&'static str>,
}

/// The ids of the options that an environment variable may give (see `Connection::from_env`).
pub const ENV_IDS: [&str; 13] = [
    "connect",
    "sasl_mechanism",
    "sasl_user",
    "sasl_principal",
    "sasl_keytab",
    "sasl_credential_cache",
    "sasl_service",
    "sasl_host",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_key_password_file",
    "tls_server_name",
];

/// SASL authentication. The password is never an argument (`ps` shows arguments to every user):
/// it comes from `--sasl-password-file` or the environment.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Sasl {
    /// SASL on every connection: DIGEST-MD5 (--sasl-user, and the password from
    /// --sasl-password-file or ZKLOCK_SASL_PASSWORD) or GSSAPI (Kerberos: --sasl-principal)
    #[arg(long, value_name = "MECHANISM", env = "ZKLOCK_SASL_MECHANISM")]
    pub sasl_mechanism: Option<String>,
    /// DIGEST-MD5: the user
    #[arg(long, value_name = "USER", env = "ZKLOCK_SASL_USER")]
    pub sasl_user: Option<String>,
    /// DIGEST-MD5: a file whose first line is the password, readable by its owner alone (else
    /// ZKLOCK_SASL_PASSWORD)
    #[arg(long, value_name = "FILE")]
    pub sasl_password_file: Option<std::path::PathBuf>,
    /// GSSAPI: the client's principal (alice@EXAMPLE.COM)
    #[arg(long, value_name = "PRINCIPAL", env = "ZKLOCK_SASL_PRINCIPAL")]
    pub sasl_principal: Option<String>,
    /// GSSAPI: a keytab with the principal's keys (default: tickets from the credential cache)
    #[arg(long, value_name = "FILE", env = "ZKLOCK_SASL_KEYTAB")]
    pub sasl_keytab: Option<std::path::PathBuf>,
    /// GSSAPI: the credential cache to use (default: KRB5CCNAME's)
    #[arg(long, value_name = "CACHE", env = "ZKLOCK_SASL_CREDENTIAL_CACHE")]
    pub sasl_credential_cache: Option<String>,
    /// GSSAPI: the servers' service name [default: zookeeper]
    #[arg(long, value_name = "NAME", env = "ZKLOCK_SASL_SERVICE")]
    pub sasl_service: Option<String>,
    /// GSSAPI: the host in the servers' principals (default: each server's host in --zk)
    #[arg(long, value_name = "HOST", env = "ZKLOCK_SASL_HOST")]
    pub sasl_host: Option<String>,
}

/// The environment variable that carries the DIGEST-MD5 password (never COMMAND's).
pub const SASL_PASSWORD_ENV: &str = "ZKLOCK_SASL_PASSWORD";

impl Sasl {
    /// The core's SASL options; an error names the flag, never the password.
    fn options(&self, from_env: &[&str]) -> Result<Option<zklock::SaslOptions>, String> {
        let flag = |id: &str, given: bool| given && !from_env.contains(&id);
        let Some(mechanism) = &self.sasl_mechanism else {
            // Variables with no mechanism are left alone; flags are an error.
            let given = flag("sasl_user", self.sasl_user.is_some())
                || self.sasl_password_file.is_some()
                || flag("sasl_principal", self.sasl_principal.is_some());
            return match given {
                true => Err("--sasl-user, --sasl-password-file and --sasl-principal need --sasl-mechanism".into()),
                false => Ok(None),
            };
        };
        match mechanism.to_ascii_uppercase().as_str() {
            "DIGEST-MD5" => {
                let user = self.sasl_user.clone().ok_or("--sasl-mechanism DIGEST-MD5 needs --sasl-user")?;
                let password = match &self.sasl_password_file {
                    Some(file) => read_password_file("--sasl-password-file", file)?,
                    None => std::env::var(SASL_PASSWORD_ENV).map_err(|_| {
                        format!("--sasl-mechanism DIGEST-MD5 needs a password: --sasl-password-file FILE or {SASL_PASSWORD_ENV}")
                    })?,
                };
                Ok(Some(zklock::SaslOptions::digest_md5(user, password)))
            }
            "GSSAPI" => {
                let principal = self.sasl_principal.clone().ok_or("--sasl-mechanism GSSAPI needs --sasl-principal")?;
                let mut kerberos = zklock::GssapiOptions::new(principal);
                kerberos.keytab = self.sasl_keytab.clone();
                kerberos.credential_cache = self.sasl_credential_cache.clone();
                kerberos.host = self.sasl_host.clone();
                if let Some(service) = &self.sasl_service {
                    kerberos.service_name = service.clone();
                }
                Ok(Some(zklock::SaslOptions::Gssapi(kerberos)))
            }
            other => Err(format!("--sasl-mechanism {other}: DIGEST-MD5 or GSSAPI")),
        }
    }
}

/// The first line of a password file (`flag`'s), refused while others than its owner may read or
/// change it, as ssh refuses such a private key. The rest of the file is wiped from memory once
/// read; errors never quote it.
fn read_password_file(flag: &str, file: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let failed = |err: std::io::Error| format!("{flag} {}: {err}", file.display());
    let mut opened = std::fs::File::open(file).map_err(failed)?;
    // The open file's mode: the file checked is the file read.
    let metadata = opened.metadata().map_err(failed)?;
    let mode = metadata.mode() & 0o777;
    // SAFETY: geteuid takes nothing and cannot fail.
    let mine = metadata.uid() == unsafe { libc::geteuid() };
    // A file of another user's (root's, shared with a group) is that user's choice, but for others.
    let (loose, remedy) = if mine { (mode & 0o077, "chmod 600") } else { (mode & 0o007, "chmod o-rwx") };
    if loose != 0 {
        return Err(format!(
            "{flag} {}: others than its owner may read or change it (mode {mode:03o}); zklock refuses it, as ssh \
             refuses such a key: {remedy} it",
            file.display()
        ));
    }
    // Room for it all at once: a buffer that grew would leave copies behind, unwiped.
    let mut text = Zeroizing::new(String::with_capacity(metadata.len() as usize + 1));
    opened.read_to_string(&mut text).map_err(failed)?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

/// TLS to the servers' secureClientPort. The key's password is never an argument (`ps` shows
/// arguments to every user): it comes from a file or from the environment.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "TLS (to the servers' secureClientPort)")]
pub struct Tls {
    /// TLS, verifying the servers' certificates against this CA bundle (PEM)
    #[arg(long, env = "ZKLOCK_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The client's certificate chain (PEM), for mutual TLS and x509 auth
    #[arg(long, env = "ZKLOCK_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM; encrypted PKCS#8 needs its password, from
    /// --tls-key-password-file or the environment variable ZKLOCK_TLS_KEY_PASSWORD)
    #[arg(long, env = "ZKLOCK_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// A file whose first line is the password of an encrypted --tls-key, readable by its owner
    /// alone
    #[arg(long, env = "ZKLOCK_TLS_KEY_PASSWORD_FILE", value_name = "FILE")]
    pub tls_key_password_file: Option<PathBuf>,
    /// Verify the servers' certificates as NAME (and send it as SNI), not as the hosts of --zk
    #[arg(long, env = "ZKLOCK_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Do not check that the servers' certificates name their hosts (the chain still is)
    #[arg(long)]
    pub tls_no_verify_hostname: bool,
    /// TLS without verifying the servers' certificates at all: for tests only
    #[arg(long)]
    pub tls_insecure: bool,
}

/// The environment variable that may hold the key's password (never an argument).
pub const KEY_PASSWORD_ENV: &str = "ZKLOCK_TLS_KEY_PASSWORD";

impl Tls {
    /// The core's TLS options (files read, checked), `None` for plaintext; an error names the
    /// flag and never quotes a key or a password.
    fn options(&self, from_env: &[&str]) -> Result<Option<zklock::TlsOptions>, String> {
        let flag = |id: &str, given: bool| given && !from_env.contains(&id);
        let mut tls = self.clone();
        if tls.tls_insecure {
            // --tls-insecure overrides the environment's CA and server name; flags conflict.
            for (id, name, given) in [
                ("tls_ca", "--tls-ca", tls.tls_ca.is_some()),
                ("tls_server_name", "--tls-server-name", tls.tls_server_name.is_some()),
                ("tls_no_verify_hostname", "--tls-no-verify-hostname", tls.tls_no_verify_hostname),
            ] {
                if flag(id, given) {
                    return Err(format!("--tls-insecure conflicts with {name}"));
                }
            }
            tls.tls_ca = None;
            tls.tls_server_name = None;
        }
        // A certificate needs its key, and a key its certificate: from flags, an error; from
        // the environment alone, left alone.
        for (id, name, other) in [("tls_cert", "--tls-cert", "--tls-key"), ("tls_key", "--tls-key", "--tls-cert")] {
            let (given, partner) = match id {
                "tls_cert" => (tls.tls_cert.is_some(), tls.tls_key.is_some()),
                _ => (tls.tls_key.is_some(), tls.tls_cert.is_some()),
            };
            if given && !partner {
                if flag(id, true) {
                    return Err(format!("{name} needs {other}"));
                }
                tls.tls_cert = None;
                tls.tls_key = None;
            }
        }
        tls.checked_options(from_env)
    }

    fn checked_options(&self, from_env: &[&str]) -> Result<Option<zklock::TlsOptions>, String> {
        let flag = |id: &str, given: bool| given && !from_env.contains(&id);
        let tls_given = self.tls_ca.is_some() || self.tls_insecure;
        if !tls_given {
            let given = [
                ("--tls-cert", flag("tls_cert", self.tls_cert.is_some())),
                ("--tls-key", flag("tls_key", self.tls_key.is_some())),
                ("--tls-key-password-file", flag("tls_key_password_file", self.tls_key_password_file.is_some())),
                ("--tls-server-name", flag("tls_server_name", self.tls_server_name.is_some())),
                ("--tls-no-verify-hostname", self.tls_no_verify_hostname),
            ];
            return match given.iter().find(|(_, given)| *given) {
                Some((flag, _)) => Err(format!("{flag} needs TLS: give --tls-ca (or, for tests only, --tls-insecure)")),
                None => Ok(None),
            };
        }
        let password = match &self.tls_key_password_file {
            Some(file) => Some(read_password_file("--tls-key-password-file", file)?),
            None => std::env::var(KEY_PASSWORD_ENV).ok(),
        };
        let mut tls = zklock::TlsOptions::from_pem_files(
            self.tls_ca.as_deref(),
            self.tls_cert.as_deref(),
            self.tls_key.as_deref(),
        )
        .map_err(|err| format!("--tls: {}", err.message()))?;
        tls.client_key_password = password;
        tls.verify_certificates = !self.tls_insecure;
        tls.verify_hostname = !self.tls_insecure && !self.tls_no_verify_hostname;
        tls.server_name = self.tls_server_name.clone();
        tls.check().map_err(|err| format!("--tls: {}", err.message()))?;
        Ok(Some(tls))
    }
}

impl Connection {
    /// Client options from the command line; an error names the bad value.
    pub fn options(&self) -> Result<zklock::ClientOptions, String> {
        // ZooKeeper takes the session timeout as a signed 32-bit count of milliseconds.
        let most_session = Duration::from_millis(i32::MAX as u64);
        let session_timeout = Duration::try_from_secs_f64(self.session_timeout)
            .ok()
            .filter(|timeout| !timeout.is_zero() && *timeout <= most_session)
            .ok_or_else(|| {
                format!(
                    "--session-timeout {}: a positive number of seconds, at most {} (ZooKeeper's limit)",
                    self.session_timeout,
                    most_session.as_secs_f64()
                )
            })?;
        let connect_timeout = Duration::try_from_secs_f64(self.connect_timeout)
            .ok()
            .filter(|timeout| !timeout.is_zero() && timeout.as_secs_f64() <= crate::exec::MAX_SECONDS)
            .ok_or_else(|| {
                format!(
                    "--connect-timeout {}: a positive number of seconds, at most {:e}",
                    self.connect_timeout,
                    crate::exec::MAX_SECONDS
                )
            })?;
        let sasl = self.sasl.options(&self.from_env)?;
        let tls = self.tls.options(&self.from_env)?;
        Ok(zklock::ClientOptions { session_timeout, connect_timeout, sasl, tls, ..Default::default() })
    }

    /// Connects (as the `cli` language, on a runtime of this thread), runs `work` with the
    /// client and closes it: `work`'s outcome, or the exit code and message of what failed first
    /// (a bad option, no session).
    pub fn with_client<T, Work>(&self, work: impl FnOnce(zklock::Client) -> Work) -> Result<T, (i32, String)>
    where
        Work: Future<Output = Result<T, (i32, String)>>,
    {
        let mut options = self.options().map_err(|message| (codes::USAGE, message))?;
        options.language = "cli".into();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| (codes::SOFTWARE, format!("cannot start the async runtime: {err}")))?;
        runtime.block_on(async {
            let client = zklock::Client::connect_with(&self.connect, options)
                .await
                .map_err(|err| codes::connect_failure(&err))?;
            let outcome = work(client.clone()).await;
            client.close().await;
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        connection: super::Connection,
    }

    /// The timeouts left out are the core's defaults, as in every binding.
    #[test]
    fn left_out_timeouts_are_the_cores_defaults() {
        let options =
            Command::try_parse_from(["zklock", "--zk", "127.0.0.1:2181"]).unwrap().connection.options().unwrap();
        let defaults = zklock::ClientOptions::default();
        assert_eq!(options.session_timeout, defaults.session_timeout);
        assert_eq!(options.connect_timeout, defaults.connect_timeout);
    }
}
