//! SASL DIGEST-MD5 against real ZooKeeper 3.8 servers with a JAAS `DigestLoginModule` (users
//! alice and bob) and the sasl auth provider, started by the test kit: a lock held and released
//! over SASL, a wrong password or user refused at once with `AuthFailed` (never its password in
//! the error), a sasl-ACL'd lock that another identity cannot take, a server that requires SASL
//! refusing a client without it, and a SASL session that re-authenticates after its server
//! restarted.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use zklock::{Acl, Client, ClientOptions, ErrorKind, HoldState, LockOptions, Owner, SaslOptions, SessionState};
use zklock_testkit::Cluster;
use zookeeper_client as zk;

const ALICE_PASSWORD: &str = "alice-Secret-1";
const BOB_PASSWORD: &str = "bob-Secret-2";

/// One DIGEST-MD5 server for this binary's tests (they use distinct paths).
fn server() -> &'static Cluster {
    static SERVER: OnceLock<Cluster> = OnceLock::new();
    SERVER.get_or_init(|| Cluster::builder().sasl_digest(&[("alice", ALICE_PASSWORD), ("bob", BOB_PASSWORD)]).start())
}

fn options(username: &str, password: &str) -> ClientOptions {
    ClientOptions {
        sasl: Some(SaslOptions::digest_md5(username, password)),
        session_timeout: Duration::from_secs(6),
        connect_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

async fn connect_as(username: &str, password: &str) -> Client {
    Client::connect_with(&server().connect_string(), options(username, password)).await.expect("connect with SASL")
}

/// A plain ZooKeeper client authenticated as alice, to see what the server stored.
async fn observer_as_alice(connect: &str) -> zk::Client {
    zk::Client::connector()
        .with_sasl(zk::SaslOptions::digest_md5("alice", ALICE_PASSWORD))
        .connect(connect)
        .await
        .expect("observer connects with SASL")
}

/// Connecting with `options` is refused with AuthFailed, long before the connect timeout, with
/// a message naming `cause` and never the password.
async fn refused(connect: &str, options: ClientOptions, password: &str, cause: &str) {
    let started = Instant::now();
    let err = Client::connect_with(connect, options).await.err().expect("the credentials must be refused");
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::AuthFailed, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once, not retried: {:?}", started.elapsed());
    assert!(err.message().contains(cause), "the error should say {cause:?}: {err}");
    assert!(!err.to_string().contains(password) && !format!("{err:?}").contains(password), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_held_and_released_over_sasl_digest_md5() {
    let path = unique_path("sasl-lock");
    let alice = connect_as("alice", ALICE_PASSWORD).await;
    let bob = connect_as("bob", BOB_PASSWORD).await;
    assert_eq!(alice.state(), SessionState::Connected);
    // The server knows the session by its SASL identity.
    let zk = observer_as_alice(&server().connect_string()).await;
    let users = zk.list_auth_users().await.unwrap();
    assert!(users.iter().any(|user| user.scheme() == "sasl" && user.user() == "alice"), "{users:?}");
    hand_over(alice, bob, &zk, &path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_or_user_is_refused_at_once() {
    let connect = server().connect_string();
    let cause = "the server refused the SASL DIGEST-MD5 authentication";
    refused(&connect, options("alice", "not-alices-password"), "not-alices-password", cause).await;
    // (Not with alice's password: ZooKeeper 3.8's DigestLoginModule handler keeps the last user
    // name it knew across connections, and checks an unknown user against that user's password.)
    refused(&connect, options("mallory", "mallory-pw"), "mallory-pw", cause).await;
    // Bad input is refused before any traffic, quoting no password.
    let err = Client::connect_with(&connect, options("", "secret-pw")).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("username is empty") && !err.to_string().contains("secret-pw"), "{err}");
    // Debug shows the user, never the password.
    let shown = format!("{:?}", options("alice", ALICE_PASSWORD));
    assert!(shown.contains("alice") && !shown.contains(ALICE_PASSWORD), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_acl_keeps_another_identity_out() {
    let path = unique_path("sasl-acl");
    let alice = connect_as("alice", ALICE_PASSWORD).await;
    let bob = connect_as("bob", BOB_PASSWORD).await;
    let lock_options = || LockOptions { acl: Acl::CreatorAll, ..LockOptions::default() };
    let me = Owner::unique();
    let guard = alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap();
    // The creator preset became alice's SASL identity on the lock path and its node.
    let zk = observer_as_alice(&server().connect_string()).await;
    for node in [path.clone(), format!("{path}/{}", children(&zk, &path).await[0])] {
        let (stored, _) = zk.get_acl(&node).await.unwrap();
        let stored: Vec<(&str, &str)> = stored.iter().map(|acl| (acl.scheme(), acl.id())).collect();
        assert_eq!(stored, [("sasl", "alice")], "{node}");
    }
    // Bob, authenticated as himself, can neither queue nor take the lock.
    let other = Owner::unique();
    let err = bob.lock_with(&path, lock_options()).unwrap().try_acquire(&other).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.message().contains("digest auth or SASL"), "{err}");
    let err = bob.lock(&path).unwrap().acquire_timeout(&other, Duration::from_secs(5)).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    // Nor can a client without credentials.
    let nobody = client_at(&server().connect_string()).await;
    let err = nobody.lock(&path).unwrap().try_acquire(&other).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(guard.hold().state(), HoldState::Held);
    guard.release().await.unwrap();
    // Alice, on another session, takes it again (her own ACL on the path passes the check).
    let again = connect_as("alice", ALICE_PASSWORD).await;
    again.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
    for client in [alice, bob, nobody, again] {
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_sasl_refuses_a_client_without_it() {
    let strict = tokio::task::spawn_blocking(|| {
        Cluster::builder().sasl_digest(&[("alice", ALICE_PASSWORD)]).sasl_required().start()
    })
    .await
    .unwrap();
    let plain = ClientOptions { connect_timeout: Duration::from_secs(10), ..ClientOptions::default() };
    refused(&strict.connect_string(), plain, ALICE_PASSWORD, "requires SASL authentication").await;
    let path = unique_path("sasl-required");
    let alice = Client::connect_with(&strict.connect_string(), options("alice", ALICE_PASSWORD)).await.unwrap();
    alice.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_session_authenticates_again_after_its_server_restarted() {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::builder().sasl_digest(&[("alice", ALICE_PASSWORD), ("bob", BOB_PASSWORD)]).start()
    })
    .await
    .unwrap();
    let cluster = std::sync::Arc::new(cluster);
    let path = unique_path("sasl-restart");
    let options = ClientOptions { session_timeout: Duration::from_secs(20), ..options("alice", ALICE_PASSWORD) };
    let alice = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let lock_options = || LockOptions { acl: Acl::CreatorAll, ..LockOptions::default() };
    let me = Owner::unique();
    let guard = alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap();
    let mut changes = alice.state_changes();
    let restarting = cluster.clone();
    tokio::task::spawn_blocking(move || restarting.restart(0)).await.unwrap();
    for expected in [SessionState::Disconnected, SessionState::Connected] {
        let next = tokio::time::timeout(Duration::from_secs(20), changes.next()).await;
        assert_eq!(next.expect("a state change in time"), Some(expected));
    }
    // The session is back with its lock, and only an authenticated alice could go on under the
    // creator-only ACL: a second acquisition (another owner) queues, which needs CREATE.
    assert_eq!(guard.hold().state(), HoldState::Held);
    let second = alice.lock_with(&path, lock_options()).unwrap().try_acquire(&Owner::unique()).await;
    assert!(second.expect("alice may queue under her ACL").is_none(), "held by the first owner");
    guard.release().await.unwrap();
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_credentials_are_refused_on_reconnecting_ends_at_once() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::builder().sasl_digest(&[("alice", ALICE_PASSWORD)]).start())
        .await
        .unwrap();
    let cluster = std::sync::Arc::new(cluster);
    let path = unique_path("sasl-refused-later");
    let options = ClientOptions { session_timeout: Duration::from_secs(20), ..options("alice", ALICE_PASSWORD) };
    let alice = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let guard = alice.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap();
    // The server comes back with alice's password changed: her next connection is refused.
    let jaas = cluster.server_dir(0).join("jaas.conf");
    let changed = std::fs::read_to_string(&jaas).unwrap().replace(ALICE_PASSWORD, "alice-new-password");
    std::fs::write(&jaas, changed).unwrap();
    let restarting = cluster.clone();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || restarting.restart(0)).await.unwrap();
    // Lost as soon as the server refused her, well within the 20 s session timeout: not retried.
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.hold().lost()).await.expect("lost in time");
    assert_eq!(reason, Some(zklock::LostReason::AuthFailed));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    wait_until("the client reports the refusal", Duration::from_secs(5), || async {
        alice.state() == SessionState::AuthFailed
    })
    .await;
    let err = guard.release().await.expect_err("the hold is lost");
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_over_mutual_tls_with_a_creator_acl() {
    use zklock_testkit::{ClientAuth, TlsCerts};
    let secured = tokio::task::spawn_blocking(|| {
        Cluster::builder().tls(ClientAuth::Need).sasl_digest(&[("alice", ALICE_PASSWORD)]).start()
    })
    .await
    .unwrap();
    let certs = TlsCerts::get();
    let mut tls = zklock::TlsOptions::new(certs.ca_pem());
    let (cert, key) = certs.client("alice");
    tls.client_cert_pem = Some(cert);
    tls.client_key_pem = Some(key);
    let options = ClientOptions { tls: Some(tls), ..options("alice", ALICE_PASSWORD) };
    let alice = Client::connect_with(&secured.tls_connect_string(), options.clone()).await.expect("SASL over TLS");
    // The creator is both identities the server knows: the certificate's and the SASL user's.
    let path = unique_path("sasl-tls");
    let lock_options = || LockOptions { acl: Acl::CreatorAll, ..LockOptions::default() };
    let me = Owner::unique();
    alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
    // Again on a new session, which checks the existing path's ACL against its own.
    let again = Client::connect_with(&secured.tls_connect_string(), options.clone()).await.unwrap();
    again.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
    // The stored ACL names both (read by a plain client with alice's certificate).
    let (cert, key) = certs.client("alice");
    let zk_tls = zk::TlsOptions::new().with_pem_ca(&certs.ca_pem()).unwrap().with_pem_identity(&cert, &key).unwrap();
    let zk = zk::Client::connector().with_tls(zk_tls).secure_connect(&secured.tls_connect_string()).await.unwrap();
    let (stored, _) = zk.get_acl(&path).await.unwrap();
    let mut stored: Vec<(&str, &str)> = stored.iter().map(|acl| (acl.scheme(), acl.id())).collect();
    stored.sort();
    assert_eq!(stored, [("sasl", "alice"), ("x509", "CN=alice,O=zklock")]);
    alice.close().await;
    again.close().await;
    // With the certificate alone (no SASL, no digest), the creator presets work too: the
    // certificate's subject is the creator.
    let mut certificate_only = options.clone();
    certificate_only.sasl = None;
    let path = unique_path("x509-creator");
    for _ in 0..2 {
        let client = Client::connect_with(&secured.tls_connect_string(), certificate_only.clone()).await.unwrap();
        client.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
        client.close().await;
    }
}
