//! Reconnecting to servers that require authentication (`enforce.auth.enabled`): SASL
//! DIGEST-MD5, SASL Kerberos (a KDC on loopback) and x509 client certificates. A holder and a
//! waiter, each in its own session through a fault proxy, have their connections cut once: both
//! sessions come back, the hold is kept, and the waiter gets the lock when the holder releases.
//!
//! Before the fix the watches went out on the new connection right behind the first SASL token,
//! before the server had authenticated it: the server answered AuthFailed (-124) and closed the
//! session, so the holder was told lost (auth_failed) and the waiter failed.
//!
//! The client's GSS-API library finds the realm through `KRB5_CONFIG`, which this binary sets
//! once, before any Kerberos call.

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, GssapiOptions, HoldState, Owner, SaslOptions, SessionState};
use zklock_testkit::{ClientAuth, Cluster, Kdc, Proxy, TlsCerts};

const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

fn options() -> ClientOptions {
    ClientOptions { session_timeout: SESSION_TIMEOUT, connect_timeout: Duration::from_secs(10), ..Default::default() }
}

/// The holder's client and the waiter's, both through `proxy`;
/// `four_letter` is a plaintext port of the server for the four-letter words.
async fn a_hold_and_a_waiter_survive_a_cut(proxy: &Proxy, four_letter: &str, holder: Client, waiter: Client) {
    let path = unique_path("reconnect-auth");
    let guard = holder.lock(&path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let node = guard.hold().node_path().to_owned();
    let lock = waiter.lock(&path).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(&Owner::new(2), SESSION_TIMEOUT * 4).await });
    // The holder watches its own node, the waiter the node ahead of its own: both watches are
    // sent again on the new connections.
    let sessions = [holder.session_id().unwrap(), waiter.session_id().unwrap()];
    for session in sessions {
        wait_watched_by(four_letter, &node, session).await;
    }
    let (mut holder_changes, mut waiter_changes) = (holder.state_changes(), waiter.state_changes());
    proxy.cut();
    for changes in [&mut holder_changes, &mut waiter_changes] {
        let next = tokio::time::timeout(Duration::from_secs(5), changes.next()).await;
        assert_eq!(next.expect("told of the cut"), Some(SessionState::Disconnected));
    }
    proxy.pass();
    for changes in [&mut holder_changes, &mut waiter_changes] {
        let next = tokio::time::timeout(SESSION_TIMEOUT, changes.next()).await;
        assert_eq!(next.expect("a state change in time"), Some(SessionState::Connected));
    }
    // Both sessions are back, authenticated, with their watches, and stay so.
    let what = "both sessions watch the holder's node again";
    wait_until(what, Duration::from_secs(10), || {
        let watched = watches_under(four_letter, &node).into_iter().flat_map(|(_, by)| by).collect::<Vec<_>>();
        let back = sessions.iter().all(|session| watched.contains(&format!("0x{session:x}")));
        let (hold, states) = (guard.hold().state(), [holder.state(), waiter.state()]);
        assert!(
            hold == HoldState::Held,
            "the hold is {hold:?} ({:?}); the clients {states:?}",
            guard.hold().lost_reason()
        );
        assert!(states.iter().all(|state| *state == SessionState::Connected), "the clients {states:?}");
        async move { back }
    })
    .await;
    for (client, session) in [(&holder, sessions[0]), (&waiter, sessions[1])] {
        assert_eq!(client.state(), SessionState::Connected);
        assert_eq!(client.session_id(), Some(session), "the same session");
    }
    assert_eq!(guard.hold().state(), HoldState::Held, "lost: {:?}", guard.hold().lost_reason());
    assert!(!waiting.is_finished(), "the waiter still waits");
    guard.release().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the waiter gets it in time");
    let second = second.unwrap().expect("the waiter gets the lock once released");
    assert_eq!(second.hold().state(), HoldState::Held);
    second.release().await.unwrap();
    holder.close().await;
    waiter.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_digest_md5_required_sessions_survive_a_reconnect() {
    let users = [("alice", "alice-Secret-1"), ("bob", "bob-Secret-2")];
    let cluster = tokio::task::spawn_blocking(move || Cluster::builder().sasl_digest(&users).sasl_required().start())
        .await
        .unwrap();
    let proxy = Proxy::start(&cluster.server_address(0));
    let connect = |(user, password): (&str, &str)| {
        let options = ClientOptions { sasl: Some(SaslOptions::digest_md5(user, password)), ..options() };
        let address = proxy.address();
        async move { Client::connect_with(&address, options).await.expect("connect with SASL") }
    };
    let (holder, waiter) = (connect(users[0]).await, connect(users[1]).await);
    a_hold_and_a_waiter_survive_a_cut(&proxy, &cluster.connect_string(), holder, waiter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_kerberos_required_sessions_survive_a_reconnect() {
    let (kdc, cluster) = tokio::task::spawn_blocking(|| {
        let kdc = Kdc::start();
        // Set before any Kerberos call of this process.
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        let cluster = Cluster::builder().kerberos(&kdc).sasl_required().start();
        (kdc, cluster)
    })
    .await
    .unwrap();
    let proxy = Proxy::start(&cluster.server_address(0));
    // The server as its principal names it: localhost.
    let address = format!("localhost:{}", proxy.port());
    let connect = |name: &str| {
        let mut kerberos = GssapiOptions::new(Kdc::principal(name));
        kerberos.keytab = Some(kdc.keytab(name));
        let options = ClientOptions { sasl: Some(SaslOptions::Gssapi(kerberos)), ..options() };
        let address = address.clone();
        async move { Client::connect_with(&address, options).await.expect("connect with Kerberos") }
    };
    let (holder, waiter) = (connect("alice").await, connect("bob").await);
    a_hold_and_a_waiter_survive_a_cut(&proxy, &cluster.connect_string(), holder, waiter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_required_sessions_survive_a_reconnect() {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::builder()
            .tls(ClientAuth::Want)
            .extra_config("enforce.auth.enabled=true")
            .extra_config("enforce.auth.schemes=x509")
            .start()
    })
    .await
    .unwrap();
    let proxy = Proxy::start(&format!("127.0.0.1:{}", cluster.secure_port(0)));
    let address = format!("localhost:{}", proxy.port());
    let connect = |who: &str| {
        let certs = TlsCerts::get();
        let mut tls = zklock::TlsOptions::new(certs.ca_pem());
        let (cert, key) = certs.client(who);
        tls.client_cert_pem = Some(cert);
        tls.client_key_pem = Some(key);
        let options = ClientOptions { tls: Some(tls), ..options() };
        let address = address.clone();
        async move { Client::connect_with(&address, options).await.expect("connect over TLS") }
    };
    // The server takes a connection without a certificate, and refuses its session.
    let without = ClientOptions { tls: Some(zklock::TlsOptions::new(TlsCerts::get().ca_pem())), ..options() };
    let err = Client::connect_with(&address, without).await.err().expect("refused without a certificate");
    assert_eq!(err.kind(), zklock::ErrorKind::AuthFailed, "{err}");
    let (holder, waiter) = (connect("alice").await, connect("bob").await);
    a_hold_and_a_waiter_survive_a_cut(&proxy, &cluster.connect_string(), holder, waiter).await;
}
