//! TLS against real ZooKeeper 3.8 servers serving a `secureClientPort` (NettyServerCnxnFactory,
//! client certificates required, x509 auth), started by the test kit with certificates made by
//! `scripts/zk tls-certs`: a lock held and released over TLS, each refused handshake naming its
//! cause (untrusted, expired, another host's, no client certificate, and a refused server
//! certificate before a missing client certificate), an x509 ACL keeping another
//! identity out, a TLS session surviving a leader kill; an encrypted client key with its
//! password, verification off, a server-name override; and a lock over TLS 1.3 on ZooKeeper 3.9.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use zklock::{Acl, AclEntry, Client, ClientOptions, ErrorKind, HoldState, LockOptions, Owner, Perms, SessionState};
use zklock_testkit::{ClientAuth, Cluster, TlsCerts};
use zookeeper_client as zk;

/// One TLS server for this binary's tests but the ensemble's (they use distinct paths).
fn server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| Cluster::builder().tls(ClientAuth::Need).start())
}

fn certs() -> &'static TlsCerts {
    TlsCerts::get()
}

/// TLS options trusting the test CA, presenting `who`'s certificate (if any).
fn tls_as(who: Option<&str>) -> zklock::TlsOptions {
    let mut tls = zklock::TlsOptions::new(certs().ca_pem());
    if let Some(who) = who {
        let (cert, key) = certs().client(who);
        tls.client_cert_pem = Some(cert);
        tls.client_key_pem = Some(key);
    }
    tls
}

fn options(tls: zklock::TlsOptions) -> ClientOptions {
    ClientOptions {
        tls: Some(tls),
        session_timeout: Duration::from_secs(6),
        connect_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

async fn connect_as(who: &str) -> Client {
    Client::connect_with(&server().tls_connect_string(), options(tls_as(Some(who)))).await.expect("connect over TLS")
}

/// Connecting with `tls` to `connect` fails with AuthFailed that names `cause`, at once: every
/// server refused the handshake for that certificate reason, which trying again for the whole
/// connect timeout (10 s here) cannot change (before: a timeout after it). Never quoting the
/// client's private key.
async fn refused(connect: &str, tls: zklock::TlsOptions, cause: &str) {
    let key = tls.client_key_pem.clone();
    let options = ClientOptions { connect_timeout: Duration::from_secs(10), ..options(tls) };
    let started = std::time::Instant::now();
    let err = Client::connect_with(connect, options).await.err().expect("the handshake must fail");
    let took = started.elapsed();
    eprintln!("{err} (after {took:?})");
    assert_eq!(err.kind(), ErrorKind::AuthFailed, "{err}");
    assert!(err.message().contains("every server refused the TLS handshake"), "{err}");
    assert!(took < Duration::from_secs(5), "refused at once, not after the connect timeout: {took:?}");
    assert!(err.message().contains(cause), "the error should say {cause:?}: {err}");
    if let Some(key) = key {
        let body = key.lines().nth(1).unwrap();
        assert!(!err.to_string().contains(body) && !format!("{err:?}").contains(body));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_held_and_released_over_tls() {
    let path = unique_path("tls-lock");
    let alice = connect_as("alice").await;
    let bob = connect_as("bob").await;
    assert_eq!(alice.state(), SessionState::Connected);
    let (me, other) = (Owner::unique(), Owner::unique());
    let guard = alice.lock(&path).unwrap().acquire(&me).await.unwrap();
    // The plaintext port of the same server sees the node; bob, over TLS too, waits.
    let zk = observer_at(&server().connect_string()).await;
    assert_eq!(children(&zk, &path).await.len(), 1);
    let bobs = bob.lock(&path).unwrap();
    assert!(bobs.try_acquire(&other).await.unwrap().is_none(), "held by alice");
    let waiting = tokio::spawn(async move { bobs.acquire_timeout(&other, Duration::from_secs(10)).await });
    wait_children(&zk, &path, 2).await;
    guard.release().await.unwrap();
    let bobs_guard = waiting.await.unwrap().expect("bob gets the lock once alice released it");
    assert_eq!(bobs_guard.hold().state(), HoldState::Held);
    bobs_guard.release().await.unwrap();
    wait_children(&zk, &path, 0).await;
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_certificate_is_refused_as_such() {
    let mut tls = tls_as(Some("alice"));
    tls.ca_pem = certs().other_ca_pem();
    refused(&server().tls_connect_string(), tls, "not signed by a trusted CA").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_server_certificate_is_refused_as_such() {
    let expired = tokio::task::spawn_blocking(|| {
        Cluster::builder().tls(ClientAuth::Need).tls_keystore("server-expired.pem").start()
    })
    .await
    .unwrap();
    refused(&expired.tls_connect_string(), tls_as(Some("alice")), "the server's certificate has expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_host_name_is_refused_unless_host_name_checking_is_off() {
    // The server's certificate names localhost, not 127.0.0.1.
    let by_address = format!("127.0.0.1:{}", server().secure_port(0));
    refused(&by_address, tls_as(Some("alice")), "does not name the host 127.0.0.1 (name mismatch").await;
    // The documented off switch: the chain is still verified, the name is not.
    let mut tls = tls_as(Some("alice"));
    tls.verify_hostname = false;
    let client = Client::connect_with(&by_address, options(tls.clone())).await.expect("connects without the check");
    client.close().await;
    tls.ca_pem = certs().other_ca_pem();
    refused(&by_address, tls, "not signed by a trusted CA").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_client_certificate_is_refused_as_such() {
    refused(&server().tls_connect_string(), tls_as(None), "requires a client certificate and none is configured").await;
}

/// The server asks for a client certificate and this client has none, but the handshake fails
/// on the client's own check of the server's certificate (another host's, an unknown CA's): that
/// is the cause named, as a man in the middle would show it, not the missing certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_server_certificate_is_named_before_a_missing_client_certificate() {
    let by_address = format!("127.0.0.1:{}", server().secure_port(0));
    refused(&by_address, tls_as(None), "does not name the host 127.0.0.1 (name mismatch").await;
    let mut tls = tls_as(None);
    tls.ca_pem = certs().other_ca_pem();
    refused(&server().tls_connect_string(), tls, "not signed by a trusted CA").await;
}

/// carol's certificate is X.509 v1 (no extensions: what `openssl x509 -req` makes by default),
/// which the Java client and kazoo present: zklock presents it too, the server knows carol by
/// it, and her x509 ACL keeps alice (a v3 certificate) out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_x509_v1_client_certificate_is_presented_and_known_by_its_subject() {
    let path = unique_path("tls-x509-v1");
    let carol = connect_as("carol").await;
    let alice = connect_as("alice").await;
    let acl = Acl::Custom(vec![AclEntry::new(Perms::ALL, "x509", certs().x509_id("carol"))]);
    let lock_options = || LockOptions { acl: acl.clone(), ..LockOptions::default() };
    let me = Owner::unique();
    let guard = carol.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap();
    assert_eq!(guard.hold().state(), HoldState::Held);
    let err = alice.lock_with(&path, lock_options()).unwrap().try_acquire(&Owner::unique()).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    guard.release().await.unwrap();
    carol.close().await;
    alice.close().await;
}

/// A client certificate with another's private key is refused before any connection, saying
/// so (not a timeout, and not "private key" alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_with_another_key_is_refused_as_a_mismatch() {
    let mut tls = tls_as(Some("alice"));
    tls.client_key_pem = Some(certs().client("bob").1);
    let options = ClientOptions { connect_timeout: Duration::from_secs(2), ..options(tls) };
    let err = Client::connect_with(&server().tls_connect_string(), options).await.err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("client certificate does not match"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_tls_options_are_invalid_arguments_that_quote_no_key() {
    let mut tls = tls_as(Some("alice"));
    let secret = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSECRETSECRET";
    tls.client_key_pem = Some(format!("-----BEGIN PRIVATE KEY-----\n{secret}\n-----END PRIVATE KEY-----\n"));
    let err = Client::connect_with(&server().tls_connect_string(), options(tls.clone())).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("private key"), "{err}");
    assert!(!err.to_string().contains(secret) && !format!("{err:?}").contains(secret), "{err:?}");
    let shown = format!("{:?}", options(tls));
    assert!(!shown.contains(secret) && !shown.contains("BEGIN"), "{shown}");
    let tls = zklock::TlsOptions::new("no certificate here");
    let err = Client::connect_with(&server().tls_connect_string(), options(tls)).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_x509_acl_keeps_another_identity_out() {
    let path = unique_path("tls-x509-acl");
    let alice = connect_as("alice").await;
    let bob = connect_as("bob").await;
    let acl = Acl::Custom(vec![AclEntry::new(Perms::ALL, "x509", certs().x509_id("alice"))]);
    let lock_options = || LockOptions { acl: acl.clone(), ..LockOptions::default() };
    let me = Owner::unique();
    let guard = alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap();
    // The server stored alice's certificate subject as the ACL's identity (which only alice may
    // read: a plain ZooKeeper client over TLS with her certificate).
    let (cert, key) = certs().client("alice");
    let zk_tls = zk::TlsOptions::new().with_pem_ca(&certs().ca_pem()).unwrap().with_pem_identity(&cert, &key).unwrap();
    let zk = zk::Client::connector().with_tls(zk_tls).secure_connect(&server().tls_connect_string()).await.unwrap();
    let (stored, _) = zk.get_acl(&path).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!((stored[0].scheme(), stored[0].id()), ("x509", certs().x509_id("alice").as_str()));
    // Bob, another certificate of the same CA, can neither queue nor take the lock.
    let other = Owner::unique();
    let err = bob.lock_with(&path, lock_options()).unwrap().try_acquire(&other).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let err = bob.lock(&path).unwrap().acquire_timeout(&other, Duration::from_secs(5)).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(guard.hold().state(), HoldState::Held);
    guard.release().await.unwrap();
    // Alice, again, takes it.
    alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_session_survives_a_leader_kill() {
    let cluster =
        tokio::task::spawn_blocking(|| Cluster::builder().servers(3).tls(ClientAuth::Need).start()).await.unwrap();
    let client = Client::connect_with(&cluster.tls_connect_string(), options(tls_as(Some("alice")))).await.unwrap();
    let session = client.session_id().unwrap();
    let me = Owner::unique();
    let guard = client.lock("/locks/tls-failover").unwrap().acquire(&me).await.unwrap();
    let mut states = guard.hold().state_changes();
    let leader = cluster.wait_for_leader(Duration::from_secs(30));
    tokio::task::block_in_place(|| cluster.kill(leader));
    // Every server drops its clients when the leader goes: the hold is suspended, then held again
    // once the client is back, over TLS, on a server of the new quorum, in the same session.
    let mut seen = Vec::new();
    let back = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(state) = states.next().await {
            seen.push(state);
            if state == HoldState::Held && seen.contains(&HoldState::Suspended) {
                return true;
            }
            if state == HoldState::Lost {
                return false;
            }
        }
        false
    })
    .await;
    assert_eq!(back, Ok(true), "the hold should come back after a suspension, saw {seen:?}");
    assert_eq!(client.session_id(), Some(session), "the same session");
    // (The client publishes its own state on its session's news, maybe a moment after the hold.)
    wait_until("the client is connected", Duration::from_secs(10), || async {
        client.state() == SessionState::Connected
    })
    .await;
    guard.release().await.unwrap();
    let again = client.lock("/locks/tls-failover").unwrap().acquire_timeout(&me, Duration::from_secs(10)).await;
    again.unwrap().release().await.unwrap();
    client.close().await;
}

/// The TLS connection keeps the plaintext socket's promises (see
/// third_party/zookeeper-client/ZKLOCK.md): Nagle off, and no thread of async-io's (or any
/// other) beside tokio's, so a process can fork and connect again in the child.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_have_nagle_off_and_start_no_io_thread() {
    let alice = connect_as("alice").await;
    alice.lock(&unique_path("tls-nodelay")).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    let port = server().secure_port(0);
    let mut checked = 0;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        // SAFETY: zeroed sockaddr_in is valid; getpeername writes at most `len` bytes into it.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = unsafe { libc::getpeername(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) };
        if rc != 0 || libc::c_int::from(addr.sin_family) != libc::AF_INET || u16::from_be(addr.sin_port) != port {
            continue;
        }
        let (mut on, mut len) = (0 as libc::c_int, std::mem::size_of::<libc::c_int>() as libc::socklen_t);
        // SAFETY: getsockopt writes at most `len` bytes into `on`.
        let rc = unsafe {
            libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&mut on as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!(rc, 0);
        assert_ne!(on, 0, "TCP_NODELAY is set on the TLS connection (fd {fd})");
        checked += 1;
    }
    assert!(checked > 0, "the client has a connection to the TLS port {port}");
    let threads: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect();
    assert!(!threads.iter().any(|name| name.contains("async-io")), "threads: {threads:?}");
    alice.close().await;
}

/// No write over TLS raises SIGPIPE: rustls's records go out through the same
/// `sendmsg(MSG_NOSIGNAL)` as plaintext writes. This test runs itself again in a child process
/// whose SIGPIPE is at its default action (death; Rust programs ignore it), where a 6 MB lock
/// path, over the server's packet limit, makes the server close the connection while the client
/// is still writing, each of the 8 times it is sent: every write after that must come back as
/// EPIPE, and the acquisition end in an error, with the child alive. (With rustls writing through
/// plain `writev`, this died of SIGPIPE in 1 of 2 runs: the signal needs a second write after the
/// server's reset, which a run does not always make.)
#[cfg(target_os = "linux")]
#[test]
fn no_write_over_tls_raises_sigpipe() {
    const CHILD: &str = "ZKLOCK_TLS_SIGPIPE_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "no_write_over_tls_raises_sigpipe", "--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .status()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_ne!(status.signal(), Some(libc::SIGPIPE), "the child died of SIGPIPE");
        assert!(status.success(), "the child failed: {status:?}");
        return;
    }
    // SAFETY: setting a signal's disposition to its default.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let options = ClientOptions { jute_maxbuffer: 16 << 20, ..options(tls_as(Some("alice"))) };
        let client = Client::connect_with(&server().tls_connect_string(), options).await.unwrap();
        let path = format!("{}/{}", unique_path("tls-sigpipe"), "p".repeat(6 << 20));
        let err = client.lock(&path).unwrap().acquire_timeout(&Owner::unique(), Duration::from_secs(60)).await;
        let err = err.expect_err("the server refuses the request");
        eprintln!("{err}");
        assert_eq!(err.kind(), ErrorKind::ConnectionLoss, "{err}");
        let other = client.lock(&unique_path("tls-sigpipe-other")).unwrap();
        other.acquire_timeout(&Owner::unique(), Duration::from_secs(10)).await.unwrap().release().await.unwrap();
        client.close().await;
    });
}

/// A client whose options are refused must fail at once, before any traffic: nothing listens on
/// this port, so reaching the network would end in a timeout instead.
const NOWHERE: &str = "localhost:1";

async fn refused_at_once(tls: zklock::TlsOptions) -> zklock::Error {
    let started = std::time::Instant::now();
    let err = Client::connect_with(NOWHERE, options(tls)).await.err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused before any traffic, not after {:?}",
        started.elapsed()
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_client_key_is_used_with_its_password_which_is_never_shown() {
    let (key, password) = certs().alice_encrypted_key();
    assert!(key.contains("BEGIN ENCRYPTED PRIVATE KEY"));
    let mut tls = tls_as(Some("alice"));
    tls.client_key_pem = Some(key.clone());
    tls.client_key_password = Some(password.clone());
    let shown = format!("{:?}", options(tls.clone()));
    assert!(!shown.contains(&password) && !shown.contains("BEGIN"), "{shown}");
    // The server knows the client by alice's certificate: an x509 ACL naming her admits it.
    let path = unique_path("tls-encrypted-key");
    let client = Client::connect_with(&server().tls_connect_string(), options(tls.clone())).await.unwrap();
    let acl = Acl::Custom(vec![AclEntry::new(Perms::ALL, "x509", certs().x509_id("alice"))]);
    let lock = client.lock_with(&path, LockOptions { acl, ..LockOptions::default() }).unwrap();
    let guard = lock.acquire(&Owner::unique()).await.unwrap();
    // What the lock node tells others carries no secret.
    for holder in lock.contenders().await.unwrap() {
        let identity = format!("{holder:?}");
        assert!(!identity.contains(&password) && !identity.contains("PRIVATE"), "{identity}");
    }
    guard.release().await.unwrap();
    client.close().await;

    // A wrong password, and none, are invalid arguments naming the key, never the password.
    tls.client_key_password = Some("not the password".into());
    let err = refused_at_once(tls.clone()).await;
    assert!(err.message().contains("client private key could not be decrypted with the password"), "{err}");
    assert!(!format!("{err}{err:?}").contains("not the password"), "{err:?}");
    tls.client_key_password = None;
    let err = refused_at_once(tls).await;
    assert!(err.message().contains("client private key is encrypted and no password is given"), "{err}");
    // Read from files, the key's errors name its file.
    let mut tls = zklock::TlsOptions::from_pem_files(
        Some(&certs().path("ca.pem")),
        Some(&certs().path("alice.pem")),
        Some(&certs().path("alice-encrypted.key")),
    )
    .unwrap();
    tls.client_key_password = Some("wrong".into());
    let err = refused_at_once(tls.clone()).await;
    let named = certs().path("alice-encrypted.key").display().to_string();
    assert!(err.message().contains(&format!("client private key {named} could not be decrypted")), "{err}");
    tls.client_key_password = Some(password);
    Client::connect_with(&server().tls_connect_string(), options(tls)).await.unwrap().close().await;
    let missing = certs().path("no-such.pem");
    let err = zklock::TlsOptions::from_pem_files(Some(&missing), None, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains(&format!("cannot read the CA bundle {}", missing.display())), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_verification_any_server_certificate_is_accepted() {
    // No CA at all (and the server's certificate names localhost, not the address used): the
    // connection is encrypted, the server unauthenticated. Mutual TLS still works.
    let by_address = format!("127.0.0.1:{}", server().secure_port(0));
    let mut tls = zklock::TlsOptions::without_verification();
    let (cert, key) = certs().client("alice");
    tls.client_cert_pem = Some(cert);
    tls.client_key_pem = Some(key);
    let client = Client::connect_with(&by_address, options(tls.clone())).await.expect("connects unverified");
    let path = unique_path("tls-unverified");
    client.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    client.close().await;
    // Verification on, with no CA bundle: refused at once, saying so.
    tls.verify_certificates = true;
    let err = refused_at_once(tls).await;
    assert!(err.message().contains("no CA bundle"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_name_replaces_the_connect_strings_host_in_verification() {
    // The certificate names localhost; reached by address, the server name makes it verify.
    let by_address = format!("127.0.0.1:{}", server().secure_port(0));
    let mut tls = tls_as(Some("alice"));
    tls.server_name = Some("localhost".into());
    let client = Client::connect_with(&by_address, options(tls.clone())).await.expect("verified as localhost");
    client.close().await;
    // Another name is checked, and refused, as that name.
    tls.server_name = Some("zk.example.com".into());
    refused(&by_address, tls.clone(), "does not name the host zk.example.com (name mismatch: it names localhost)")
        .await;
    tls.server_name = Some("not a host name".into());
    let err = refused_at_once(tls).await;
    assert!(err.message().contains("server name \"not a host name\" is no valid host name"), "{err}");
}

/// The field version of the server, 3.9.3, serving TLS 1.3 only: a lock over it, and a missing
/// client certificate named as such. The server refusing TLS 1.2 (checked with openssl) makes
/// the handshakes TLS 1.3 ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_over_tls_1_3_on_zookeeper_3_9() {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::builder()
            .server_version(zklock_testkit::ZkServer::V3_9)
            .tls(ClientAuth::Need)
            .extra_config("ssl.protocol=TLSv1.3")
            .extra_config("ssl.enabledProtocols=TLSv1.3")
            .start()
    })
    .await
    .unwrap();
    let port = cluster.secure_port(0);
    let handshake = move |version: &'static str| {
        let output = std::process::Command::new("openssl")
            .args(["s_client", "-connect", &format!("localhost:{port}"), version, "-brief"])
            .args(["-CAfile", certs().path("ca.pem").to_str().unwrap()])
            .args(["-cert", certs().path("alice.pem").to_str().unwrap()])
            .args(["-key", certs().path("alice.key").to_str().unwrap()])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let tls12 = tokio::task::spawn_blocking(move || handshake("-tls1_2")).await.unwrap();
    assert!(!tls12.contains("Protocol version: TLSv1.2"), "the server speaks TLS 1.2 too: {tls12}");
    let tls13 = tokio::task::spawn_blocking(move || handshake("-tls1_3")).await.unwrap();
    assert!(tls13.contains("Protocol version: TLSv1.3"), "the server speaks TLS 1.3: {tls13}");

    // Over TLS 1.3 the client's handshake is over before the server refuses its (missing)
    // certificate: the refusal, read with the session handshake, still names its cause.
    refused(&cluster.tls_connect_string(), tls_as(None), "requires a client certificate and none is configured").await;
    // And a server certificate this client refuses is named first, over TLS 1.3 too.
    let by_address = format!("127.0.0.1:{}", cluster.secure_port(0));
    refused(&by_address, tls_as(None), "does not name the host 127.0.0.1 (name mismatch").await;

    let path = unique_path("tls13");
    let client = Client::connect_with(&cluster.tls_connect_string(), options(tls_as(Some("alice")))).await.unwrap();
    let guard = client.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap();
    let zk = observer_at(&cluster.connect_string()).await;
    assert_eq!(children(&zk, &path).await.len(), 1);
    guard.release().await.unwrap();
    wait_children(&zk, &path, 0).await;
    client.close().await;
}
