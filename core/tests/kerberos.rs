//! SASL GSSAPI (Kerberos) against a real MIT KDC on loopback (realm ZKLOCK.TEST, principals and
//! keytabs made by `scripts/zk kdc`) and real ZooKeeper 3.8 servers that accept Kerberos as
//! zookeeper/localhost: a lock held and released with a keytab and with a credential cache, a
//! wrong principal and a principal the KDC does not know refused at once with `AuthFailed`, a
//! wrong service name refused too, and a sasl-ACL'd lock that another principal cannot take.
//!
//! The client's GSS-API library (MIT's libgssapi_krb5.so.2, loaded at run time) finds the realm
//! through `KRB5_CONFIG`, which this binary sets once, before any Kerberos call.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use zklock::{Acl, Client, ClientOptions, ErrorKind, GssapiOptions, HoldState, LockOptions, Owner, SaslOptions};
use zklock_testkit::{Cluster, Kdc};

struct Realm {
    kdc: Kdc,
    server: Cluster,
}

/// The KDC and one Kerberos server for this binary's tests (they use distinct paths).
fn realm() -> &'static Realm {
    static REALM: OnceLock<Realm> = OnceLock::new();
    REALM.get_or_init(|| {
        let kdc = Kdc::start();
        // Set before any Kerberos call of this process: every one waits for this realm.
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        let server = Cluster::builder().kerberos(&kdc).start();
        Realm { kdc, server }
    })
}

/// The server as its principal names it: localhost, not 127.0.0.1.
fn connect_string() -> String {
    format!("localhost:{}", realm().server.client_port(0))
}

fn options(kerberos: GssapiOptions) -> ClientOptions {
    ClientOptions {
        sasl: Some(SaslOptions::Gssapi(kerberos)),
        session_timeout: Duration::from_secs(6),
        connect_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

/// `name`'s principal with its keytab.
fn with_keytab(name: &str) -> GssapiOptions {
    let mut kerberos = GssapiOptions::new(Kdc::principal(name));
    kerberos.keytab = Some(realm().kdc.keytab(name));
    kerberos
}

async fn connect_as(name: &str) -> Client {
    tokio::task::spawn_blocking(realm).await.unwrap();
    Client::connect_with(&connect_string(), options(with_keytab(name))).await.expect("connect with Kerberos")
}

/// Connecting with `kerberos` is refused with AuthFailed, long before the connect timeout, with
/// a message naming `cause`.
async fn refused(kerberos: GssapiOptions, cause: &str) {
    tokio::task::spawn_blocking(realm).await.unwrap();
    let started = Instant::now();
    let err = Client::connect_with(&connect_string(), options(kerberos)).await.err().expect("must be refused");
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::AuthFailed, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once, not retried: {:?}", started.elapsed());
    assert!(err.message().contains(cause), "the error should say {cause:?}: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_held_and_released_over_kerberos() {
    let path = unique_path("krb-lock");
    let alice = connect_as("alice").await;
    let bob = connect_as("bob").await;
    let zk = observer_at(&realm().server.connect_string()).await;
    hand_over(alice, bob, &zk, &path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_cache_that_kinit_filled_serves_too() {
    let realm = tokio::task::spawn_blocking(realm).await.unwrap();
    let cache = realm.kdc.dir.join(format!("alice-{}.ccache", uuid::Uuid::new_v4().simple()));
    let kinit = std::process::Command::new("kinit")
        .arg("-k")
        .arg("-t")
        .arg(realm.kdc.keytab("alice"))
        .arg("-c")
        .arg(format!("FILE:{}", cache.display()))
        .arg(Kdc::principal("alice"))
        .env("KRB5_CONFIG", realm.kdc.krb5_conf())
        .status()
        .expect("run kinit");
    assert!(kinit.success());
    let mut kerberos = GssapiOptions::new(Kdc::principal("alice"));
    kerberos.credential_cache = Some(format!("FILE:{}", cache.display()));
    let alice = Client::connect_with(&connect_string(), options(kerberos.clone())).await.expect("connects");
    let path = unique_path("krb-ccache");
    alice.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    alice.close().await;
    // The cache holds alice's tickets, not bob's.
    kerberos.principal = Kdc::principal("bob");
    refused(kerberos, "could not get the credentials of bob@ZKLOCK.TEST from the credential cache").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_principal_is_refused_at_once() {
    // A principal the keytab has no key for.
    let mut kerberos = with_keytab("alice");
    kerberos.principal = Kdc::principal("mallory");
    refused(kerberos, "could not get the credentials of mallory@ZKLOCK.TEST from the keytab").await;
    // A principal the KDC does not know (any more), with its keytab.
    refused(with_keytab("gone"), "not found in Kerberos database").await;
    // A keytab that is not there is bad input, before any traffic.
    let mut kerberos = with_keytab("alice");
    kerberos.keytab = Some(PathBuf::from("/nonexistent/alice.keytab"));
    let err = Client::connect_with(&connect_string(), options(kerberos)).await.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("cannot read the keytab /nonexistent/alice.keytab"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_service_name_is_refused_at_once() {
    let mut kerberos = with_keytab("alice");
    kerberos.service_name = "kafka".to_owned();
    refused(kerberos, "kafka/localhost@ZKLOCK.TEST").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kerberos_acl_keeps_another_principal_out() {
    let path = unique_path("krb-acl");
    let alice = connect_as("alice").await;
    let bob = connect_as("bob").await;
    let lock_options = || LockOptions { acl: Acl::CreatorAllWorldRead, ..LockOptions::default() };
    let me = Owner::unique();
    let guard = alice.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap();
    // The creator preset became alice's principal (world may read).
    let zk = observer_at(&realm().server.connect_string()).await;
    let (stored, _) = zk.get_acl(&path).await.unwrap();
    let stored: Vec<(&str, &str)> = stored.iter().map(|acl| (acl.scheme(), acl.id())).collect();
    assert_eq!(stored, [("sasl", "alice@ZKLOCK.TEST"), ("world", "anyone")]);
    // Bob, authenticated as himself, can neither queue nor take the lock.
    let other = Owner::unique();
    let err = bob.lock_with(&path, lock_options()).unwrap().try_acquire(&other).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.message().contains("SASL identity bob@ZKLOCK.TEST"), "{err}");
    let err = bob.lock(&path).unwrap().acquire_timeout(&other, Duration::from_secs(5)).await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(guard.hold().state(), HoldState::Held);
    guard.release().await.unwrap();
    // Alice, on another session, takes it again: her own ACL on the path passes the check.
    let again = connect_as("alice").await;
    again.lock_with(&path, lock_options()).unwrap().acquire(&me).await.unwrap().release().await.unwrap();
    for client in [alice, bob, again] {
        client.close().await;
    }
}

/// The GSS-API library's real file, which the test below hides.
const GSSAPI_LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/libgssapi_krb5.so.2";

#[test]
fn a_host_without_the_gssapi_library_says_what_is_missing_and_runs_everything_else() {
    // This test binary again, in a mount namespace of its own where the library is hidden (an
    // empty file bound over it: dlopen fails), running the test below. Needs root, as the
    // suite's package tests do (sudo when not root).
    let this = std::env::current_exe().unwrap();
    let script = format!(
        "mount --bind /dev/null \"$(readlink -f {GSSAPI_LIBRARY})\" && exec \"$0\" --exact --ignored --nocapture \
         without_the_gssapi_library"
    );
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = std::process::Command::new(if root { "unshare" } else { "sudo" });
    if !root {
        command.args(["-n", "--preserve-env", "unshare"]);
    }
    let output = command
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .arg(this)
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the test without the library failed");
    assert!(stdout.contains("1 passed"), "the test without the library ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_host_without_the_gssapi_library_says_what_is_missing_and_runs_everything_else"]
async fn without_the_gssapi_library() {
    assert_eq!(std::fs::metadata(GSSAPI_LIBRARY).unwrap().len(), 0, "the library is hidden");
    // Kerberos is refused before any traffic, saying what is missing and how to get it.
    let mut kerberos = GssapiOptions::new("alice@ZKLOCK.TEST");
    kerberos.host = Some("localhost".into());
    let err = Client::connect_with("localhost:1", options(kerberos)).await.err().unwrap();
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    for words in ["libgssapi_krb5.so.2", "which this host does not have", "libgssapi-krb5-2", "krb5-libs"] {
        assert!(err.message().contains(words), "the error should say {words:?}: {err}");
    }
    // Everything else works: a lock over a plain session, and one over SASL DIGEST-MD5.
    let path = unique_path("no-gssapi");
    let plain = client().await;
    plain.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    plain.close().await;
    let digest =
        tokio::task::spawn_blocking(|| Cluster::builder().sasl_digest(&[("alice", "alice-pw")]).start()).await.unwrap();
    let options =
        ClientOptions { sasl: Some(SaslOptions::digest_md5("alice", "alice-pw")), ..ClientOptions::default() };
    let alice = Client::connect_with(&digest.connect_string(), options).await.expect("DIGEST-MD5 needs no library");
    alice.lock(&path).unwrap().acquire(&Owner::unique()).await.unwrap().release().await.unwrap();
    alice.close().await;
}
