//! Security, ACLs: a lock only clients with the same digest credentials may take.
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    // ANCHOR: main
    let options = zklock::ClientOptions { digest_auth: Some("app:secret".into()), ..Default::default() };
    let client = zklock::Client::connect_with(&hosts, options).await?;
    let acl = zklock::LockOptions { acl: zklock::Acl::CreatorAllWorldRead, ..Default::default() };
    let lock = client.lock_with("/locks/report-protected", acl.clone())?;
    let rw = client.read_write_lock_with("/locks/catalog-protected", acl)?;

    // Several users: name each one (contenders need READ, CREATE and DELETE).
    let custom = zklock::Acl::Custom(vec![
        zklock::AclEntry::digest(zklock::Perms::ALL, "app:secret")?,
        zklock::AclEntry::digest(zklock::Perms::READ | zklock::Perms::CREATE | zklock::Perms::DELETE, "batch:pw")?,
        zklock::AclEntry::anyone(zklock::Perms::READ),
    ]);
    let shared =
        client.lock_with("/locks/shared-protected", zklock::LockOptions { acl: custom, ..Default::default() })?;
    // ANCHOR_END: main
    let me = zklock::Owner::unique();
    for l in [&lock, rw.write(), &shared] {
        l.acquire(&me).await?.release().await?;
    }

    // Another client without the credentials may not queue there.
    let stranger = zklock::Client::connect(&hosts).await?;
    let refused = stranger.lock("/locks/report-protected")?.acquire(&me).await;
    assert_eq!(refused.err().map(|e| e.kind()), Some(zklock::ErrorKind::PermissionDenied));
    stranger.close().await;
    client.close().await;
    Ok(())
}
