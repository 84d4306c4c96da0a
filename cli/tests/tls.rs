//! `zklock exec`, `status`, `hold` and `ls` over TLS, against a real ZooKeeper serving TLS with
//! client certificates required (the test kit's, certificates by `scripts/zk tls-certs`): an exec
//! holds the lock over mutual TLS with an encrypted key whose password comes from a file or the
//! environment, never from argv, and never reaches COMMAND, messages or `status`; status, ls and
//! hold see and take the lock over TLS; bad TLS options exit 64 naming the option, a refused
//! handshake 69 naming its cause.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zklock_testkit::{ClientAuth, Cluster, TlsCerts};

fn server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| Cluster::builder().tls(ClientAuth::Need).start())
}

fn certs() -> &'static TlsCerts {
    TlsCerts::get()
}

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/zklock-cli-tls-{}-{tag}-{}/lock", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn path_arg(name: &str) -> String {
    certs().path(name).to_str().unwrap().to_owned()
}

/// alice's mutual TLS as flags, with the plain key.
fn alice_flags() -> Vec<String> {
    ["--tls-ca", &path_arg("ca.pem"), "--tls-cert", &path_arg("alice.pem"), "--tls-key", &path_arg("alice.key")]
        .map(str::to_owned)
        .to_vec()
}

fn password() -> String {
    certs().alice_encrypted_key().1
}

/// `zklock COMMAND --zk CONNECT ARGS...` with no TLS environment of the test runner's.
fn zklock(command: &str, connect: &str) -> Command {
    let mut zklock = Command::new(env!("CARGO_BIN_EXE_zklock"));
    zklock.arg(command).args(["--zk", connect]).env_remove("ZK_CONNECT").stdin(Stdio::null());
    for name in ["CA", "CERT", "KEY", "KEY_PASSWORD", "KEY_PASSWORD_FILE", "SERVER_NAME"] {
        zklock.env_remove(format!("ZKLOCK_TLS_{name}"));
    }
    zklock
}

fn output(command: &mut Command) -> (i32, String, String) {
    let output = command.output().expect("run zklock");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8 output");
    (output.status.code().expect("zklock exits"), text(output.stdout), text(output.stderr))
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn exec_and_status_over_mutual_tls_with_an_encrypted_key_whose_password_stays_secret() {
    let path = unique("exec");
    let dir = tempdir("exec");
    let password_file = dir.join("password");
    std::fs::write(&password_file, format!("{}\n", password())).unwrap();
    // Its owner's alone, or zklock refuses it.
    std::fs::set_permissions(&password_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The password from the environment: COMMAND must not inherit it.
    let script = r#"printenv ZKLOCK_TLS_KEY_PASSWORD > "$D/seen" || echo none > "$D/seen"; echo "$ZKLOCK_NODE" > "$D/node"
        while [ ! -e "$D/done" ]; do sleep 0.05; done"#;
    let mut exec = zklock("exec", &server().tls_connect_string());
    exec.args(["--label", "tls-job"])
        .env("ZKLOCK_TLS_CA", certs().path("ca.pem"))
        .env("ZKLOCK_TLS_CERT", certs().path("alice.pem"))
        .env("ZKLOCK_TLS_KEY", certs().path("alice-encrypted.key"))
        .env("ZKLOCK_TLS_KEY_PASSWORD", password())
        .args([&path, "--", "sh", "-c", script])
        .env("D", &dir)
        .stderr(Stdio::piped());
    let running = exec.spawn().unwrap();
    wait_until("COMMAND runs under the lock", || dir.join("node").exists());
    assert_eq!(std::fs::read_to_string(dir.join("seen")).unwrap().trim(), "none", "COMMAND got the key's password");

    // status over TLS, with flags and the password from a file, sees the holder; it shows no secret.
    let (code, out, err) = output(
        zklock("status", &server().tls_connect_string())
            .args(["--tls-ca", &path_arg("ca.pem"), "--tls-cert", &path_arg("alice.pem")])
            .args(["--tls-key", &path_arg("alice-encrypted.key"), "--tls-key-password-file"])
            .arg(&password_file)
            .args(["--json", &path]),
    );
    assert_eq!(code, 0, "held: {out}{err}");
    assert!(out.contains("\"label\": \"tls-job\""), "{out}");
    for shown in [&out, &err] {
        assert!(!shown.contains(&password()) && !shown.contains("PRIVATE"), "{shown}");
    }
    // ls over TLS (plain key) lists it as held.
    let (code, out, err) = output(zklock("ls", &server().tls_connect_string()).args(alice_flags()).arg(parent(&path)));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&path) && out.contains("held"), "{out}");
    // A second exec over TLS does not get it.
    let (code, _, err) =
        output(zklock("exec", &server().tls_connect_string()).args(alice_flags()).args(["-n", &path, "--", "true"]));
    assert_eq!(code, 1, "held by the first exec: {err}");

    std::fs::write(dir.join("done"), "").unwrap();
    let finished = running.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(&password()), "{stderr}");
    let (code, out, _) = output(zklock("status", &server().tls_connect_string()).args(alice_flags()).arg(&path));
    assert_eq!(code, 3, "free once COMMAND exited: {out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn hold_takes_the_lock_over_tls_until_stdin_closes() {
    let path = unique("hold");
    let mut hold = zklock("hold", &server().tls_connect_string())
        .args(alice_flags())
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(hold.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert!(line.contains("-lock-"), "NODE FENCING_TOKEN: {line}");
    let (code, _, _) = output(zklock("status", &server().tls_connect_string()).args(alice_flags()).arg(&path));
    assert_eq!(code, 0, "held");
    drop(hold.stdin.take());
    assert_eq!(hold.wait().unwrap().code(), Some(0));
}

/// carol's X.509 v1 client certificate (no extensions, as `openssl x509 -req` makes by default)
/// is presented as the Java client and kazoo present it, so the command takes the lock with it
/// (issue 45, item 3; the core's and each binding's tests check her x509 ACL).
#[test]
fn an_x509_v1_client_certificate_takes_the_lock() {
    let path = unique("x509-v1");
    let carol = || {
        ["--tls-ca", &path_arg("ca.pem"), "--tls-cert", &path_arg("carol.pem"), "--tls-key", &path_arg("carol.key")]
            .map(str::to_owned)
    };
    let (code, out, err) = output(zklock("exec", &server().tls_connect_string()).args(carol()).args([
        &path,
        "--",
        "sh",
        "-c",
        r#"test -n "$ZKLOCK_FENCING_TOKEN""#,
    ]));
    assert_eq!(code, 0, "exec with a v1 client certificate: {out}{err}");
    let (code, out, err) = output(zklock("status", &server().tls_connect_string()).args(carol()).arg(&path));
    assert_eq!(code, 3, "free once exec is done: {out}{err}");
}

#[test]
fn the_key_password_is_never_an_argument() {
    let (code, _, err) = output(zklock("status", &server().tls_connect_string()).args(alice_flags()).args([
        "--tls-key-password",
        "x",
        "/p",
    ]));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--tls-key-password"), "{err}");
}

#[test]
fn bad_tls_options_exit_64_naming_them_and_refused_handshakes_69_naming_the_cause() {
    let connect = server().tls_connect_string();
    let path = unique("bad");
    // A wrong password (from the environment), named by its key file, never shown.
    let (code, _, err) = output(
        zklock("status", &connect)
            .args(["--tls-ca", &path_arg("ca.pem"), "--tls-cert", &path_arg("alice.pem")])
            .args(["--tls-key", &path_arg("alice-encrypted.key"), &path])
            .env("ZKLOCK_TLS_KEY_PASSWORD", "not-the-password"),
    );
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("alice-encrypted.key could not be decrypted") && !err.contains("not-the-password"), "{err}");
    // TLS flags without TLS, a certificate without its key, a file that cannot be read.
    let (code, _, err) = output(zklock("status", &connect).args(["--tls-server-name", "localhost", &path]));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--tls-server-name needs TLS: give --tls-ca"), "{err}");
    let (code, _, err) = output(zklock("status", &connect).args(["--tls-ca", &path_arg("ca.pem")]).args([
        "--tls-cert",
        &path_arg("alice.pem"),
        &path,
    ]));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--tls-key"), "{err}");
    let (code, _, err) = output(zklock("status", &connect).args(["--tls-ca", "/no/such/ca.pem", &path]));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("cannot read the CA bundle /no/such/ca.pem"), "{err}");
    // Handshakes refused: an untrusted CA, no client certificate.
    let refused = |flags: &[String], cause: &str| {
        let (code, _, err) = output(zklock("status", &connect).args(["--connect-timeout", "2"]).args(flags).arg(&path));
        assert_eq!(code, 69, "{err}");
        assert!(err.contains(cause), "{err}");
    };
    let mut untrusted = alice_flags();
    untrusted[1] = path_arg("other-ca.pem");
    refused(&untrusted, "not signed by a trusted CA");
    refused(&["--tls-ca".into(), path_arg("ca.pem")], "requires a client certificate and none is configured");
    // --tls-insecure needs no CA, and --tls-server-name verifies another name.
    let by_address = format!("127.0.0.1:{}", server().secure_port(0));
    let (code, _, err) =
        output(zklock("status", &by_address).args(["--tls-insecure", "--tls-cert", &path_arg("alice.pem")]).args([
            "--tls-key",
            &path_arg("alice.key"),
            &path,
        ]));
    assert_eq!(code, 3, "connected, and the lock is free: {err}");
    let (code, _, err) =
        output(zklock("status", &by_address).args(alice_flags()).args(["--tls-server-name", "localhost", &path]));
    assert_eq!(code, 3, "{err}");
}

fn parent(path: &str) -> &str {
    &path[..path.rfind('/').unwrap()]
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zklock-cli-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
