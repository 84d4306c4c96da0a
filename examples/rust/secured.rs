//! Security, TLS and SASL: compiled by the suite, not run (it names a secured ensemble's hosts
//! and files). The test suites run the same options against real TLS, DIGEST-MD5 and Kerberos
//! servers (core/tests/tls.rs, sasl.rs, kerberos.rs).
use std::error::Error;

#[allow(dead_code)]
async fn tls() -> Result<(), Box<dyn Error>> {
    // ANCHOR: tls
    let mut tls = zklock::TlsOptions::new(std::fs::read_to_string("/etc/zk/ca.pem")?);
    tls.client_cert_pem = Some(std::fs::read_to_string("/etc/zk/client.pem")?); // mutual TLS
    tls.client_key_pem = Some(std::fs::read_to_string("/etc/zk/client.key")?);
    tls.client_key_password = Some(std::env::var("ZK_KEY_PASSWORD")?); // if it is encrypted
    let options = zklock::ClientOptions { tls: Some(tls), ..Default::default() };
    let client = zklock::Client::connect_with("zk1.example.com:2281,zk2.example.com:2281", options).await?;
    let acl = zklock::Acl::Custom(vec![zklock::AclEntry::new(zklock::Perms::ALL, "x509", "CN=app,O=example")]);
    let lock = client.lock_with("/locks/report", zklock::LockOptions { acl, ..Default::default() })?;
    // ANCHOR_END: tls
    drop(lock);
    Ok(())
}

#[allow(dead_code)]
async fn sasl() -> Result<(), Box<dyn Error>> {
    // ANCHOR: sasl
    // DIGEST-MD5
    let sasl = zklock::SaslOptions::digest_md5("alice", std::env::var("ZK_PASSWORD")?);
    // or Kerberos, with a keytab (or a credential cache that kinit filled)
    let mut kerberos = zklock::GssapiOptions::new("alice@EXAMPLE.COM");
    kerberos.keytab = Some("/etc/zk/alice.keytab".into());
    let _kerberos = zklock::SaslOptions::Gssapi(kerberos);

    let options = zklock::ClientOptions { sasl: Some(sasl), ..Default::default() };
    let client = zklock::Client::connect_with("zk1.example.com:2181,zk2.example.com:2181", options).await?;
    // Only alice may queue, release or read: the creator presets mean her SASL identity.
    let acl = zklock::LockOptions { acl: zklock::Acl::CreatorAll, ..Default::default() };
    let lock = client.lock_with("/locks/report", acl)?;
    // ANCHOR_END: sasl
    drop(lock);
    Ok(())
}

fn main() {}
