//! What one client's input may cost a shared server is bounded, before any traffic: a lock
//! path's depth and the parents an acquisition may create, identifiers, labels, ACLs, a
//! semaphore's `n` and a multi-lock's members. A 300,000-deep path once had the client create
//! every parent (a create per segment, each longer than the last) until the server ran out of
//! memory and died.

mod common;

use std::time::{Duration, Instant};

use common::*;
use zklock::{Acl, AclEntry, ErrorKind, LockOptions, Member, Owner, Perms, SemaphoreOptions};

fn assert_limit(err: &zklock::Error, names: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains(names), "{err} should name {names:?}");
    assert!(err.message().contains("over zklock's limit of"), "{err} should name the limit");
}

/// `base` made `extra` segments deeper.
fn deeper(base: &str, extra: usize) -> String {
    format!("{base}{}", "/a".repeat(extra))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_lock_paths_are_refused_before_any_traffic() {
    let connect = connect_string();
    let client = client().await;
    let observer = observer().await;
    let session = client.session_id().unwrap();
    let before = packets_received(&connect, session);
    let base = unique_path("deep");
    assert_eq!(base.matches('/').count(), 2);

    // The field report's path: 300,000 segments, 600 KB, under the packet limit.
    let started = Instant::now();
    let err = client.lock(&"/a".repeat(300_000)).unwrap_err();
    assert_limit(&err, "lock path is 300000 segments deep, over zklock's limit of 64 segments");
    assert!(started.elapsed() < Duration::from_millis(100), "refused at once, took {:?}", started.elapsed());
    // Just over the limit, as every kind of lock.
    let over = deeper(&base, zklock::MAX_PATH_DEPTH - 1);
    assert_eq!(over.matches('/').count(), 65);
    assert_limit(&client.lock(&over).unwrap_err(), "65 segments deep");
    assert_limit(&client.read_write_lock(&over).unwrap_err(), "65 segments deep");
    assert_limit(&client.semaphore(&over, 2).unwrap_err(), "65 segments deep");
    assert_limit(&zklock::check_lock_path(&over).unwrap_err(), "65 segments deep");
    let count = zklock::MaxLeases::SharedCount { path: over.clone(), seed: 1 };
    assert_limit(&client.semaphore_with(&base, SemaphoreOptions::new(count)).unwrap_err(), "65 segments deep");
    // Shallow, but with segments so long that its parents' paths add up to over 64 KiB.
    let wide = format!("{base}{}", format!("/{}", "w".repeat(10_000)).repeat(8));
    assert_limit(&client.lock(&wide).unwrap_err(), "bytes of path");
    assert_eq!(packets_received(&connect, session), before, "no request reached the server");
    assert!(observer.check_stat(&base).await.unwrap().is_none(), "no parent was made");

    // At the limit: taken, and every parent made.
    let at = deeper(&base, zklock::MAX_PATH_DEPTH - 2);
    let lock = client.lock(&at).unwrap();
    let guard = lock.acquire_timeout(&Owner::unique(), Duration::from_secs(30)).await.unwrap();
    assert_eq!(children(&observer, &at).await.len(), 1);
    guard.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identifiers_labels_acls_leases_and_members_are_bounded() {
    let connect = connect_string();
    let client = client().await;
    let session = client.session_id().unwrap();
    let before = packets_received(&connect, session);
    let path = unique_path("bounded");

    let identifier = |len: usize| LockOptions { identifier: Some("i".repeat(len)), ..Default::default() };
    assert_limit(&client.lock_with(&path, identifier(1025)).unwrap_err(), "identifier of 1025 bytes");
    let lock = client.lock_with(&path, identifier(1024)).unwrap();

    let label = |len: usize| Owner::with_label(1, "l".repeat(len));
    assert_limit(&lock.acquire(&label(1025)).await.unwrap_err(), "owner label of 1025 bytes");
    assert_limit(&lock.try_acquire(&label(1025)).await.unwrap_err(), "owner label of 1025 bytes");
    let semaphore = SemaphoreOptions::new(zklock::MaxLeases::Fixed(2)).label("l".repeat(1025));
    assert_limit(&client.semaphore_with(&path, semaphore).unwrap_err(), "owner label of 1025 bytes");

    let entries = |n: usize, id_len: usize| {
        let mut entries = vec![AclEntry::anyone(Perms::ALL)];
        entries.extend((1..n).map(|i| AclEntry::new(Perms::READ, "ip", format!("10.0.{i}.{}", "1".repeat(id_len)))));
        LockOptions { acl: Acl::Custom(entries), ..Default::default() }
    };
    assert_limit(&client.lock_with(&path, entries(33, 1)).unwrap_err(), "ACL has 33 entries");
    assert_limit(&client.lock_with(&path, entries(2, 1100)).unwrap_err(), "scheme or id of");
    client.lock_with(&path, entries(32, 1)).unwrap();

    let many = client.semaphore(&path, u32::MAX).unwrap();
    assert_limit(&many.acquire(1025).await.unwrap_err(), "1025 leases asked for at once");
    assert_limit(&many.try_acquire(u32::MAX).await.unwrap_err(), "leases asked for at once");
    let err = client.multi_lock([Member::leases(&many, 1025)]).unwrap_err();
    assert_limit(&err, "1025 leases");

    let members =
        |n: usize| (0..n).map(|i| client.lock(&format!("{path}/m{i}")).unwrap().into()).collect::<Vec<Member>>();
    assert_limit(&client.multi_lock(members(257)).unwrap_err(), "a multi-lock of 257 members");
    client.multi_lock(members(256)).unwrap();
    // Members each within the limits, whose parents together are not.
    let wide: Vec<Member> =
        (0..10).map(|i| client.lock(&format!("{path}/{i}{}/m", "w".repeat(8_000))).unwrap().into()).collect();
    assert_limit(&client.multi_lock(wide).unwrap_err(), "bytes of path");
    assert_eq!(packets_received(&connect, session), before, "no request reached the server");
    client.close().await;
}
