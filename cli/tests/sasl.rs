//! `zklock exec` and `zklock status` over SASL, against real ZooKeeper 3.8 servers that refuse
//! clients without SASL: DIGEST-MD5 (a JAAS DigestLoginModule) with the password from the
//! environment or from a file (never an argument: there is no such flag; a file others can read
//! is refused), a command run under the lock without the password in its environment, its
//! status, and a wrong password refused at once (exit 69) without showing it; and Kerberos with
//! a keytab, against a real MIT KDC, and a principal the keytab has no key for.

use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zklock_testkit::Cluster;

const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const PASSWORD: &str = "alice-cli-Secret";

fn server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| Cluster::builder().sasl_digest(&[("alice", PASSWORD)]).sasl_required().start())
}

fn unique(tag: &str) -> String {
    format!("/zklock-cli-sasl-{}-{tag}/lock", std::process::id())
}

/// `zklock ARGS...` against the SASL server, as alice (mechanism and user from the environment)
/// with `password` in ZKLOCK_SASL_PASSWORD unless None.
fn zklock(args: &[&str], password: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zklock"));
    command
        .args(&args[..1])
        .args(["--zk", &server().connect_string(), "--connect-timeout", "10"])
        .args(&args[1..])
        .env_remove("ZK_CONNECT")
        .env("ZKLOCK_SASL_MECHANISM", "DIGEST-MD5")
        .env("ZKLOCK_SASL_USER", "alice")
        .env_remove("ZKLOCK_SASL_PASSWORD")
        .stdin(Stdio::null());
    if let Some(password) = password {
        command.env("ZKLOCK_SASL_PASSWORD", password);
    }
    command.output().expect("run zklock")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn exec_and_status_run_over_sasl_with_the_password_from_the_environment_or_a_file() {
    let path = unique("exec");
    // exec runs the command under the lock; inside it, status (password from a file) sees the
    // holder. Neither output shows the password.
    let dir = std::env::temp_dir().join(format!("zklock-cli-sasl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    // Its owner's alone, or zklock refuses it.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The password in zklock's environment is not COMMAND's (exit 9 if it were).
    let status = format!(
        "printenv ZKLOCK_SASL_PASSWORD >&2 && exit 9; {} status --zk {} --sasl-password-file {} --json {path}",
        env!("CARGO_BIN_EXE_zklock"),
        server().connect_string(),
        file.display()
    );
    let out = zklock(&["exec", "--label", "sasl-job", &path, "--", "sh", "-c", &status], Some(PASSWORD));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(json["holders"][0]["identity"]["label"], "sasl-job", "{json}");
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    // Afterwards the lock is free (status exits 3).
    let out = zklock(&["status", &path], Some(PASSWORD));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_wrong_password_is_refused_at_once_without_showing_it() {
    let started = Instant::now();
    let out = zklock(&["status", &unique("wrong")], Some("not-alices-password"));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(8), "refused at once: {:?}", started.elapsed());
    assert!(stderr.contains("the server refused the SASL DIGEST-MD5 authentication"), "{stderr}");
    assert!(!stderr.contains("not-alices-password"), "{stderr}");
}

#[test]
fn the_password_is_never_an_argument_and_missing_options_are_usage_errors() {
    // No flag takes the password itself.
    let out = zklock(&["status", "--sasl-password", PASSWORD, &unique("argv")], None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{stderr}");
    assert!(stderr.contains("unexpected argument '--sasl-password'"), "{stderr}");
    // DIGEST-MD5 without a password says where to put it.
    let out = zklock(&["status", &unique("none")], None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(USAGE), "{stderr}");
    assert!(stderr.contains("--sasl-password-file FILE or ZKLOCK_SASL_PASSWORD"), "{stderr}");
    // A server requiring SASL refuses a client without it.
    let out = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["status", "--zk", &server().connect_string(), &unique("plain")])
        .env_remove("ZK_CONNECT")
        .env_remove("ZKLOCK_SASL_MECHANISM")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{stderr}");
    assert!(stderr.contains("requires SASL authentication"), "{stderr}");
}

/// A password file that others than its owner may read is refused (exit 64, naming the file
/// and the remedy, never the password), as ssh refuses such a private key: both password flags,
/// before any connection.
#[test]
fn a_password_file_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("zklock-cli-sasl-perms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_zklock"))
            .args(["status", "--zk", "127.0.0.1:9", "--connect-timeout", "1"])
            .args(flags)
            .arg(&file)
            .arg("/zklock-cli-sasl/never")
            .env_remove("ZK_CONNECT")
            .env_remove("ZKLOCK_TLS_KEY_PASSWORD_FILE")
            .env_remove("ZKLOCK_SASL_MECHANISM")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let sasl: &[&str] = &["--sasl-mechanism", "DIGEST-MD5", "--sasl-user", "alice", "--sasl-password-file"];
    let tls: &[&str] = &["--tls-insecure", "--tls-key-password-file"];
    for mode in [0o640, 0o604, 0o620, 0o660] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        for (flag, flags) in [("--sasl-password-file", sasl), ("--tls-key-password-file", tls)] {
            let (code, stderr) = run(flags);
            assert_eq!(code, Some(USAGE), "mode {mode:o}, {flag}: {stderr}");
            assert!(stderr.contains(flag) && stderr.contains(&format!("{mode:o}")), "{stderr}");
            assert!(stderr.contains("chmod 600"), "{stderr}");
            assert!(!stderr.contains(PASSWORD), "{stderr}");
        }
    }
    // Its owner's alone, it is read (and the connection then fails: nothing listens there).
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    for flags in [sasl, tls] {
        let (code, stderr) = run(flags);
        assert_eq!(code, Some(UNAVAILABLE), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn exec_and_status_run_over_kerberos_with_a_keytab() {
    let kdc = zklock_testkit::Kdc::start();
    let kerberos = Cluster::builder().kerberos(&kdc).sasl_required().start();
    // The servers are zookeeper/localhost: named so in --zk.
    let connect = format!("localhost:{}", kerberos.client_port(0));
    let path = unique("kerberos");
    let run = |args: &[&str], principal: &str| {
        Command::new(env!("CARGO_BIN_EXE_zklock"))
            .args(&args[..1])
            .args(["--zk", &connect, "--sasl-mechanism", "GSSAPI", "--sasl-principal", principal])
            .arg("--sasl-keytab")
            .arg(kdc.keytab("alice"))
            .args(&args[1..])
            .env_remove("ZK_CONNECT")
            .env("KRB5_CONFIG", kdc.krb5_conf())
            .stdin(Stdio::null())
            .output()
            .expect("run zklock")
    };
    let status = format!(
        "{} status --zk {connect} --sasl-mechanism GSSAPI --sasl-principal alice@ZKLOCK.TEST --sasl-keytab {} {path}",
        env!("CARGO_BIN_EXE_zklock"),
        kdc.keytab("alice").display()
    );
    let out = run(&["exec", "--label", "krb-job", &path, "--", "sh", "-c", &status], "alice@ZKLOCK.TEST");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("krb-job"), "status inside exec shows the holder: {stdout}");
    // A principal the keytab has no key for: refused at once.
    let out = run(&["status", &path], "mallory@ZKLOCK.TEST");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{stderr}");
    assert!(stderr.contains("could not get the credentials of mallory@ZKLOCK.TEST"), "{stderr}");
}
