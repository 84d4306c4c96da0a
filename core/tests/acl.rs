//! Access control on lock nodes, against a real ZooKeeper server: what a lock with an ACL lets
//! others do (list the queue) and what it does not (delete a holder's node, queue), tried both
//! through zklock and directly, as an attacker would, with a plain ZooKeeper client.

mod common;

use std::time::Duration;

use common::*;
use zklock::{
    Acl, AclEntry, Client, ClientOptions, ErrorKind, HoldState, LockOptions, MaxLeases, Owner, Perms, SemaphoreOptions,
};
use zookeeper_client as zk;

const ALICE: &str = "alice:alice-secret";
const BOB: &str = "bob:bob-secret";

async fn client_as(credentials: &str) -> Client {
    let options = ClientOptions { digest_auth: Some(credentials.to_owned()), ..ClientOptions::default() };
    Client::connect_with(&connect_string(), options).await.expect("connect with digest auth")
}

/// A plain ZooKeeper client with digest credentials.
async fn raw_as(credentials: &str) -> zk::Client {
    zk::Client::connector().with_auth("digest", credentials.as_bytes()).connect(&connect_string()).await.unwrap()
}

fn with_acl(acl: Acl) -> LockOptions {
    LockOptions { acl, ..LockOptions::default() }
}

/// The identity zklock computes for digest credentials; the tests compare it with what the
/// server stored for an `auth` entry, which shows the two agree.
fn server_digest_id(credentials: &str) -> String {
    AclEntry::digest(Perms::ALL, credentials).unwrap().id
}

fn entries(acl: &[zk::Acl]) -> Vec<(String, String, String)> {
    let mut entries: Vec<_> =
        acl.iter().map(|a| (a.permission().to_string(), a.scheme().to_owned(), a.id().to_owned())).collect();
    entries.sort();
    entries
}

/// A node that queues as zklock's contenders do (a uuid-marked EPHEMERAL_SEQUENTIAL child),
/// made directly by `zk` with an open ACL.
async fn raw_contender(zk: &zk::Client, path: &str, marker: &str) -> Result<(zk::Stat, zk::CreateSequence), zk::Error> {
    let prefix = format!("{path}/_c_{}-{marker}", uuid::Uuid::new_v4());
    zk.create(&prefix, b"{}", &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all())).await
}

fn assert_permission_denied(err: &zklock::Error, path: &str, says: &str) {
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(err.path(), Some(path), "{err}");
    assert!(err.to_string().contains(says), "the message says {says:?}: {err}");
}

/// The whole story of the preset that keeps the queue visible: the holder's node is safe from
/// other clients, raw or zklock, unauthenticated or authenticated as someone else; they can
/// list the queue; same-credential contenders queue together; the owner releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creator_all_world_read_lets_others_list_but_not_delete_or_queue() {
    let path = unique_path("acl-world-read");
    let alice = client_as(ALICE).await;
    let lock = alice.lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    let holder_node = guard.hold().node_path().to_owned();

    // The server stores the creator as alice's digest identity: the ACL the lock asked for.
    // (Read by alice: to a client without ADMIN rights the server hides the digest hashes.)
    let alice_raw = raw_as(ALICE).await;
    let expected = |hash: &str| {
        vec![("ALL".to_owned(), "digest".to_owned(), hash.to_owned()), ("READ".into(), "world".into(), "anyone".into())]
    };
    let (path_acl, path_stat) = alice_raw.get_acl(&path).await.unwrap();
    assert_eq!(entries(&path_acl), expected(&server_digest_id(ALICE)), "the lock path's ACL");
    assert_eq!(path_stat.ephemeral_owner, 0, "the protected lock path is persistent, not a container");
    let (node_acl, _) = alice_raw.get_acl(&holder_node).await.unwrap();
    assert_eq!(entries(&node_acl), expected(&server_digest_id(ALICE)), "the lock node's ACL");
    let anonymous = observer().await;
    assert_eq!(entries(&anonymous.get_acl(&path).await.unwrap().0), expected("alice:x"), "hashes hidden from others");

    // An unauthenticated client, and bob, as attackers with a plain ZooKeeper client: they see
    // the queue but can neither delete the holder's node, nor queue, nor open the path up.
    let bob_raw = raw_as(BOB).await;
    for (who, attacker) in [("unauthenticated", &anonymous), ("bob", &bob_raw)] {
        let queue = attacker.list_children(&path).await.unwrap();
        assert_eq!(queue.len(), 1, "{who} lists the queue");
        attacker.get_data(&holder_node).await.unwrap_or_else(|err| panic!("{who} reads the holder's node: {err}"));
        assert_eq!(
            attacker.delete(&holder_node, None).await,
            Err(zk::Error::NoAuth),
            "{who} deletes the holder's node"
        );
        assert_eq!(raw_contender(attacker, &path, "lock-").await.unwrap_err(), zk::Error::NoAuth, "{who} queues");
        let open = attacker.set_acl(&path, &zk::Acls::anyone_all(), None).await;
        assert_eq!(open.unwrap_err(), zk::Error::NoAuth, "{who} opens the lock path's ACL");
    }
    assert_eq!(lock.state_of(&Owner::new(1)), Some(HoldState::Held), "the hold survived the attacks");

    // Through zklock: an unauthenticated client lists the queue and reads who holds, but its
    // acquire fails, naming the ACL problem, and leaves nothing behind.
    let outsider = client().await;
    let open_lock = outsider.lock(&path).unwrap();
    let queue = open_lock.contenders().await.unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].identity.as_ref().unwrap().owner, "1", "the holder's identity is readable");
    let err = open_lock.acquire_timeout(&Owner::new(2), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &path, "NoAuth");
    assert!(err.to_string().contains("ACL of the lock path"), "{err}");
    assert_eq!(err.zookeeper_code(), Some(-102), "ZooKeeper's NoAuth");
    // The same for bob, with a lock that asks for the same preset: the path is alice's.
    let bob = client_as(BOB).await;
    let bob_lock = bob.lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let err = bob_lock.acquire_timeout(&Owner::new(3), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &path, "does not grant this client (digest user bob) CREATE|DELETE");
    assert_eq!(children(&anonymous, &path).await, vec![holder_node.rsplit('/').next().unwrap().to_owned()]);

    // Alice's other process (same credentials, another session) queues behind the holder.
    let alice2 = client_as(ALICE).await;
    let lock2 = alice2.lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    assert!(lock2.try_acquire(&Owner::new(4)).await.unwrap().is_none(), "held by the first");
    let waiter = tokio::spawn({
        let lock2 = lock2.clone();
        async move { lock2.acquire(&Owner::new(4)).await.unwrap().release().await.unwrap() }
    });
    wait_children(&anonymous, &path, 2).await;

    // The owner releases: its node goes and the next in line holds.
    guard.release().await.unwrap();
    assert_eq!(anonymous.check_stat(&holder_node).await.unwrap(), None, "the holder's node is gone");
    tokio::time::timeout(Duration::from_secs(20), waiter).await.unwrap().unwrap();
    wait_children(&anonymous, &path, 0).await;
    assert!(anonymous.check_stat(&path).await.unwrap().is_some(), "the persistent lock path stays");
    // A refused attempt leaves nothing that keeps the session open: closing is prompt, not a
    // wait for the session timeout (10 s).
    for client in [outsider, bob, alice, alice2] {
        let started = std::time::Instant::now();
        client.close().await;
        assert!(started.elapsed() < Duration::from_secs(3), "close took {:?}", started.elapsed());
    }
}

/// CreatorAll hides even the queue from others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creator_all_hides_the_queue_from_others() {
    let path = unique_path("acl-private");
    let alice = client_as(ALICE).await;
    let lock = alice.lock_with(&path, with_acl(Acl::CreatorAll)).unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    let (acl, _) = raw_as(ALICE).await.get_acl(&path).await.unwrap();
    // Made by zklock's digest identity of alice's credentials: the server computed the same.
    assert_eq!(entries(&acl), vec![("ALL".to_owned(), "digest".to_owned(), server_digest_id(ALICE))]);

    let anonymous = observer().await;
    assert_eq!(anonymous.list_children(&path).await.unwrap_err(), zk::Error::NoAuth);
    assert_eq!(anonymous.delete(guard.hold().node_path(), None).await.unwrap_err(), zk::Error::NoAuth);
    let outsider = client().await;
    let err = outsider.lock(&path).unwrap().contenders().await.unwrap_err();
    assert_permission_denied(&err, &path, "listing the contenders");
    let err = outsider.lock(&path).unwrap().acquire(&Owner::new(2)).await.unwrap_err();
    assert_permission_denied(&err, &path, "NoAuth");

    guard.release().await.unwrap();
    assert!(lock.contenders().await.unwrap().is_empty(), "the owner lists its own queue");
    alice.close().await;
    outsider.close().await;
}

/// An ACL naming the creator needs credentials: refused when the lock is made, before any
/// traffic, with what to do. So are ACLs the server would refuse or that shut the client out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_that_cannot_work_is_refused_before_any_traffic() {
    let path = unique_path("acl-invalid");
    let anonymous = client().await;
    for acl in [Acl::CreatorAllWorldRead, Acl::CreatorAll] {
        let err = anonymous.lock_with(&path, with_acl(acl.clone())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.path(), Some(path.as_str()));
        assert!(err.message().contains(&format!("({acl})")) && err.message().contains("digest auth"), "{err}");
        let err = anonymous.read_write_lock_with(&path, with_acl(acl)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    let alice = client_as(ALICE).await;
    let read_only = Acl::Custom(vec![AclEntry::anyone(Perms::READ)]);
    let err = alice.lock_with(&path, with_acl(read_only)).unwrap_err();
    assert!(err.message().contains("READ, CREATE and DELETE"), "{err}");
    let err = alice.lock_with(&path, with_acl(Acl::Custom(Vec::new()))).unwrap_err();
    assert!(err.message().contains("empty"), "{err}");
    assert_eq!(observer().await.check_stat(&path).await.unwrap(), None, "nothing was made");
    anonymous.close().await;
    alice.close().await;
}

/// A lock path that exists with an ACL granting more than asked (made open by someone else,
/// or left by a lock without an ACL) is refused before anything is made under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_open_lock_path_is_refused() {
    let alice = client_as(ALICE).await;
    let observer = observer().await;

    // Made open in advance by an attacker.
    let squatted = unique_path("acl-squatted");
    observer.mkdir(&squatted, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    let lock = alice.lock_with(&squatted, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let err = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &squatted, "grants more than this lock's ACL (CreatorAllWorldRead) allows");
    assert!(err.message().contains("world:anyone ALL"), "names the entry: {err}");
    assert!(children(&observer, &squatted).await.is_empty(), "nothing was made under it");

    // The container of a lock without an ACL, while that lock is held.
    let legacy = unique_path("acl-legacy");
    let open = client().await;
    let held = open.lock(&legacy).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let protected = alice.read_write_lock_with(&legacy, with_acl(Acl::CreatorAll)).unwrap();
    let err = protected.write().acquire(&Owner::new(2)).await.unwrap_err();
    assert_permission_denied(&err, &legacy, "grants more than this lock's ACL (CreatorAll) allows");
    assert_eq!(children(&observer, &legacy).await.len(), 1, "only the open lock's node");
    held.release().await.unwrap();
    alice.close().await;
    open.close().await;
}

/// The protected lock path is persistent, but its parent stays open: an attacker can delete
/// the path while the queue is empty and make it again, open. A lock that checked the path
/// before sees that it is another one at its next listing, and refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_path_made_again_open_is_caught_by_a_lock_that_checked_it_before() {
    let path = unique_path("acl-remade");
    let alice = client_as(ALICE).await;
    let lock = alice.lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    lock.acquire(&Owner::new(1)).await.unwrap().release().await.unwrap();

    let attacker = observer().await;
    attacker.delete(&path, None).await.expect("the empty path can be deleted: its parent is open");
    attacker.create(&path, &[], &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();

    let err = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &path, "world:anyone ALL");
    wait_children(&attacker, &path, 0).await;
    assert!(!lock.is_held_by(&Owner::new(1)));

    // Once the path is right again (here: deleted, so the lock makes it anew), the lock works.
    attacker.delete(&path, None).await.unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    assert_eq!(attacker.delete(guard.hold().node_path(), None).await.unwrap_err(), zk::Error::NoAuth);
    guard.release().await.unwrap();
    alice.close().await;
}

/// The read/write lock: readers and writers of the owner's credentials share it; others see
/// the queue (with each node's mode) but can neither queue a writer nor delete a reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_read_write_lock_is_protected_too() {
    let path = unique_path("acl-rwlock");
    let alice = client_as(ALICE).await;
    let rw = alice.read_write_lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let reader = rw.read().acquire(&Owner::new(1)).await.unwrap();
    let reader_node = reader.hold().node_path().to_owned();
    let second_reader = rw.read().acquire(&Owner::new(2)).await.unwrap();

    let anonymous = observer().await;
    let bob_raw = raw_as(BOB).await;
    for attacker in [&anonymous, &bob_raw] {
        assert_eq!(attacker.delete(&reader_node, None).await.unwrap_err(), zk::Error::NoAuth);
        assert_eq!(raw_contender(attacker, &path, "__WRIT__").await.unwrap_err(), zk::Error::NoAuth);
    }
    let bob = client_as(BOB).await;
    let bob_rw = bob.read_write_lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let queue = bob_rw.contenders().await.unwrap();
    assert_eq!(queue.iter().map(|p| p.mode).collect::<Vec<_>>(), vec![Some(zklock::Mode::Read); 2]);
    assert_eq!(bob_rw.holders().await.unwrap().len(), 2, "bob sees both readers hold");
    let err = bob_rw.write().acquire_timeout(&Owner::new(3), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &path, "digest user bob");
    let err = bob.read_write_lock(&path).unwrap().read().try_acquire(&Owner::new(3)).await.unwrap_err();
    assert_permission_denied(&err, &path, "NoAuth");
    assert_eq!(children(&anonymous, &path).await.len(), 2, "nothing of bob's was left");

    // Alice's writer waits for her readers and holds once they release.
    let writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().acquire(&Owner::new(4)).await.unwrap().release().await.unwrap() }
    });
    wait_children(&anonymous, &path, 3).await;
    reader.release().await.unwrap();
    second_reader.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), writer).await.unwrap().unwrap();
    wait_children(&anonymous, &path, 0).await;
    alice.close().await;
    bob.close().await;
}

/// A custom ACL naming two users lets both queue on one lock; a third user still cannot. Each
/// has ADMIN: the server shows digest hashes only to a client with ADMIN on the path, and one
/// that cannot see them cannot tell its own entry from an attacker's (see the next test).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_custom_acl_names_several_users() {
    let path = unique_path("acl-custom");
    let acl = Acl::Custom(vec![
        AclEntry::digest(Perms::ALL, ALICE).unwrap(),
        AclEntry::digest(Perms::ALL, BOB).unwrap(),
        AclEntry::anyone(Perms::READ),
    ]);
    let alice = client_as(ALICE).await;
    let bob = client_as(BOB).await;
    let alice_lock = alice.lock_with(&path, with_acl(acl.clone())).unwrap();
    let bob_lock = bob.lock_with(&path, with_acl(acl)).unwrap();
    let guard = alice_lock.acquire(&Owner::new(1)).await.unwrap();
    let waiter = tokio::spawn({
        let bob_lock = bob_lock.clone();
        async move { bob_lock.acquire(&Owner::new(2)).await.unwrap() }
    });
    let anonymous = observer().await;
    wait_children(&anonymous, &path, 2).await;
    let carol = raw_as("carol:carol-secret").await;
    assert_eq!(carol.delete(guard.hold().node_path(), None).await.unwrap_err(), zk::Error::NoAuth);
    assert_eq!(raw_contender(&carol, &path, "lock-").await.unwrap_err(), zk::Error::NoAuth);

    guard.release().await.unwrap();
    let bob_guard = tokio::time::timeout(Duration::from_secs(20), waiter).await.unwrap().unwrap();
    bob_guard.release().await.unwrap();
    wait_children(&anonymous, &path, 0).await;
    alice.close().await;
    bob.close().await;
}

/// ZooKeeper reserves no digest user name: anyone can authenticate as `alice` with another
/// password. An attacker makes the lock path ahead of its users with an entry for "alice" that
/// is really its own (`alice:evil`), beside the rights the users need. A user that sees the
/// hashes (it has ADMIN) finds the entry is not the lock's, and one that does not (no ADMIN:
/// the server shows it `alice:x`) cannot tell: both refuse the path, make no node, and so never
/// hold a lock whose node the attacker could delete at will.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_path_made_by_someone_posing_as_a_digest_user_is_refused() {
    const ALICE_POSING: &str = "alice:evil";
    let attacker = raw_as(ALICE_POSING).await;
    let rcd = zk::Permission::READ | zk::Permission::CREATE | zk::Permission::DELETE;
    for (bobs_perms, says) in [
        (zk::Permission::ALL, "grants more than this lock's ACL"),
        (rcd, "whose hashes the server hides from this client (digest:alice ALL"),
    ] {
        let path = unique_path("acl-posing");
        let bobs = if bobs_perms == rcd { Perms::READ | Perms::CREATE | Perms::DELETE } else { Perms::ALL };
        let squatted = vec![
            zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", &server_digest_id(ALICE_POSING))),
            zk::Acl::new(bobs_perms, zk::AuthId::new("digest", &server_digest_id(BOB))),
        ];
        attacker.mkdir(&path, &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&squatted))).await.unwrap();
        let acl = Acl::Custom(vec![AclEntry::digest(Perms::ALL, ALICE).unwrap(), AclEntry::digest(bobs, BOB).unwrap()]);
        let bob = client_as(BOB).await;
        let lock = bob.lock_with(&path, with_acl(acl)).unwrap();
        let err = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
        assert_permission_denied(&err, &path, says);
        assert!(children(&attacker, &path).await.is_empty(), "bob made no node under the attacker's path");
        bob.close().await;
    }
}

/// Makes `path` with `acl` as someone else would, its parents open.
async fn squat(zk: &zk::Client, path: &str, acl: Vec<zk::Acl>) {
    let parent = &path[..path.rfind('/').unwrap()];
    zk.mkdir(parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    zk.create(path, &[], &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acl))).await.unwrap();
}

/// A digest id is `user:base64(sha1("user:password"))`, unsalted: a permission denied message
/// that quoted it would hand a password to an offline guess. No message shows one, whether from
/// the lock's own ACL or the path's (the client has ADMIN on the path, so the server shows it
/// the hashes); an entry of a user the lock names, with another password, is told as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permission_denied_messages_show_no_digest_hash() {
    let observer = observer().await;
    let hash = |credentials: &str| server_digest_id(credentials).rsplit_once(':').unwrap().1.to_owned();
    let digest =
        |perms, credentials: &str| zk::Acl::new(perms, zk::AuthId::new("digest", &server_digest_id(credentials)));
    let alice = client_as(ALICE).await;
    let acl = Acl::Custom(vec![AclEntry::digest(Perms::ALL, ALICE).unwrap(), AclEntry::anyone(Perms::READ)]);
    // The path grants more: to bob, and to alice with another password.
    let more = unique_path("acl-no-hash-more");
    let (all, admin_read) = (zk::Permission::ALL, zk::Permission::ADMIN | zk::Permission::READ);
    squat(&observer, &more, vec![digest(all, ALICE), digest(all, BOB), digest(all, "alice:evil")]).await;
    let lock = alice.lock_with(&more, with_acl(acl.clone())).unwrap();
    let too_much = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
    // The path grants alice too little: its ACL is described.
    let less = unique_path("acl-no-hash-less");
    squat(&observer, &less, vec![digest(admin_read, ALICE), digest(all, BOB)]).await;
    let lock = alice.lock_with(&less, with_acl(acl)).unwrap();
    let too_little = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
    for err in [&too_much, &too_little] {
        for hash in [hash(ALICE), hash(BOB), hash("alice:evil")] {
            assert!(!format!("{err} {err:?}").contains(&hash), "a digest hash in the message: {err}");
        }
    }
    assert_permission_denied(
        &too_much,
        &more,
        "grants more than this lock's ACL ([digest:alice ALL, world:anyone READ])",
    );
    let message = too_much.message();
    assert!(message.contains("digest:bob ALL, digest:alice ALL (another password's)"), "{message}");
    assert_permission_denied(
        &too_little,
        &less,
        "(digest:alice READ|ADMIN, digest:bob ALL) does not grant this client",
    );
    alice.close().await;
}

/// The server takes any character in a digest user, ESC and BEL among them: a message naming
/// the entry shows them escaped, as `zklock status` shows labels, so that it cannot colour, ring
/// or rewrite the terminal it is read on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acl_ids_in_messages_are_escaped() {
    let observer = observer().await;
    let path = unique_path("acl-escaped");
    let odd = "\u{1b}[31mmallory\u{7}";
    let posing = zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", &server_digest_id(&format!("{odd}:pw"))));
    squat(&observer, &path, vec![posing, zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("world", "anyone"))]).await;
    let alice = client_as(ALICE).await;
    let lock = alice.lock_with(&path, with_acl(Acl::CreatorAllWorldRead)).unwrap();
    let err = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(10)).await.unwrap_err();
    assert_permission_denied(&err, &path, "grants more than this lock's ACL");
    let message = err.message();
    assert!(!message.contains(['\u{1b}', '\u{7}']), "{message:?}");
    assert!(message.contains("digest:\\u{1b}[31mmallory\\u{7} ALL"), "{message}");
    alice.close().await;
}

/// A semaphore takes a lock's ACL options: every node it makes (its path, its internal mutex's
/// and lease parents, the leases, the shared count) gets the ACL, so other clients can neither
/// delete a lease, take one, nor change the max; a count someone made again, open, is refused
/// rather than followed; an existing path or lease parent that grants others more is refused
/// before any node is made, as a protected lock's path is. Without an ACL the nodes stay open
/// (Curator's semaphore and SharedCount make them so).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_semaphore_with_an_acl_keeps_others_from_its_leases_and_its_count() {
    const T: Duration = Duration::from_secs(10);
    let base = unique_path("acl-semaphore");
    let (path, count) = (format!("{base}/pool"), format!("{base}/max/count"));
    let alice = client_as(ALICE).await;
    let protected = |max: MaxLeases| SemaphoreOptions::new(max).acl(Acl::CreatorAllWorldRead);
    let semaphore =
        alice.semaphore_with(&path, protected(MaxLeases::SharedCount { path: count.clone(), seed: 2 })).unwrap();
    let leases = semaphore.acquire(1).await.unwrap();
    let lease = leases.leases()[0].hold().node_path().to_owned();

    let alice_raw = raw_as(ALICE).await;
    let expected = vec![
        ("ALL".to_owned(), "digest".to_owned(), server_digest_id(ALICE)),
        ("READ".into(), "world".into(), "anyone".into()),
    ];
    for node in [&path, &format!("{path}/locks"), &format!("{path}/leases"), &lease, &count] {
        let (acl, stat) = alice_raw.get_acl(node).await.unwrap();
        assert_eq!(entries(&acl), expected, "{node}'s ACL");
        if *node != lease {
            assert_eq!(stat.ephemeral_owner, 0, "{node} is persistent, not a container anyone could make again");
        }
    }

    // Attackers with a plain ZooKeeper client, unauthenticated and as bob.
    let anonymous = observer().await;
    let bob_raw = raw_as(BOB).await;
    for (who, attacker) in [("unauthenticated", &anonymous), ("bob", &bob_raw)] {
        assert_eq!(attacker.delete(&lease, None).await, Err(zk::Error::NoAuth), "{who} deletes the lease");
        let set = attacker.set_data(&count, &100i32.to_be_bytes(), None).await;
        assert_eq!(set.unwrap_err(), zk::Error::NoAuth, "{who} changes the max");
        let taken = raw_contender(attacker, &format!("{path}/leases"), "lease-").await;
        assert_eq!(taken.unwrap_err(), zk::Error::NoAuth, "{who} takes a lease");
        for node in [&path, &count] {
            let opened = attacker.set_acl(node, &zk::Acls::anyone_all(), None).await;
            assert_eq!(opened.unwrap_err(), zk::Error::NoAuth, "{who} opens {node}'s ACL");
        }
    }
    assert_eq!(leases.state(), HoldState::Held, "the lease survived the attacks");
    assert_eq!(semaphore.current_max_leases().await.unwrap(), 2);
    semaphore.set_shared_count(3).await.unwrap();
    assert_eq!(semaphore.current_max_leases().await.unwrap(), 3, "the count's users change it");

    // The count's parent is made with the ACL too: nobody else can delete the count and make it
    // again with a max of their own (its ACL a copy of ours, say).
    assert_eq!(anonymous.delete(&count, None).await.unwrap_err(), zk::Error::NoAuth, "others delete the count");
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    assert_eq!(semaphore.current_max_leases().await.unwrap(), 3);
    leases.release().await.unwrap();

    // A semaphore path made open by someone else: refused before any node is made.
    let squatted = format!("{base}/squatted");
    anonymous.create(&squatted, b"", &open).await.unwrap();
    let err = alice.semaphore_with(&squatted, protected(MaxLeases::Fixed(2))).unwrap().acquire_timeout(1, T).await;
    assert_permission_denied(&err.unwrap_err(), &squatted, "grants more");
    assert!(children(&anonymous, &squatted).await.is_empty(), "no node made under it");
    // A lease parent made open (by one of alice's own processes without the ACL, say).
    let reopened = format!("{base}/reopened");
    let semaphore = alice.semaphore_with(&reopened, protected(MaxLeases::Fixed(2))).unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    alice_raw.delete(&format!("{reopened}/leases"), None).await.unwrap();
    alice_raw.create(&format!("{reopened}/leases"), b"", &open).await.unwrap();
    let err = alice.semaphore_with(&reopened, protected(MaxLeases::Fixed(2))).unwrap().acquire_timeout(1, T).await;
    assert_permission_denied(&err.unwrap_err(), &format!("{reopened}/leases"), "grants more");
    assert!(children(&anonymous, &format!("{reopened}/leases")).await.is_empty(), "no lease made under it");
    // The semaphore that made it first checks it by its listing: its lease is removed.
    assert_permission_denied(&semaphore.acquire_timeout(1, T).await.unwrap_err(), &format!("{reopened}/leases"), "");
    assert!(children(&anonymous, &format!("{reopened}/leases")).await.is_empty(), "its lease removed");

    // A bad ACL is refused before any traffic, naming the semaphore's path.
    let refused = client().await.semaphore_with(&squatted, protected(MaxLeases::Fixed(2))).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");
    assert!(refused.path() == Some(squatted.as_str()) && refused.message().contains("digest auth"), "{refused}");

    // The default: open, as Curator's.
    let (curators, curators_count) = (format!("{base}/curators"), format!("{base}/curators-max"));
    let max = MaxLeases::SharedCount { path: curators_count.clone(), seed: 2 };
    let leases = alice.semaphore_with(&curators, SemaphoreOptions::new(max)).unwrap().acquire(1).await.unwrap();
    let lease = leases.leases()[0].hold().node_path().to_owned();
    for node in [&format!("{curators}/leases"), &lease, &curators_count] {
        let anyone_all = vec![("ALL".to_owned(), "world".to_owned(), "anyone".to_owned())];
        assert_eq!(entries(&anonymous.get_acl(node).await.unwrap().0), anyone_all, "{node}'s ACL");
    }
    leases.release().await.unwrap();
    alice.close().await;
}

/// A protected semaphore's shared count cannot be made again by someone else. Its parent was an
/// open container, so anyone could delete the count and make it again, its ACL one that passed
/// the count's check (`world:anyone READ` and an `ip` entry, which this client cannot match), its
/// max 100: the semaphore followed it and a max-1 semaphore let a second lease in (found by
/// review). The parent is now made with the semaphore's ACL, and one made open in advance by
/// someone else is refused before the count is trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_protected_semaphores_count_cannot_be_made_again_by_others() {
    const T: Duration = Duration::from_secs(10);
    let base = unique_path("acl-semaphore-forged-count");
    let (path, count) = (format!("{base}/pool"), format!("{base}/max/count"));
    let alice = client_as(ALICE).await;
    let options = |count: &str| {
        SemaphoreOptions::new(MaxLeases::SharedCount { path: count.to_owned(), seed: 1 }).acl(Acl::CreatorAllWorldRead)
    };
    let semaphore = alice.semaphore_with(&path, options(&count)).unwrap();
    let first = semaphore.acquire(1).await.unwrap();
    assert_eq!(semaphore.current_max_leases().await.unwrap(), 1);

    let anonymous = observer().await;
    assert_eq!(anonymous.delete(&count, None).await.unwrap_err(), zk::Error::NoAuth, "others delete the count");
    let forged = vec![
        zk::Acl::new(zk::Permission::READ, zk::AuthId::new("world", "anyone")),
        zk::Acl::new(zk::Permission::READ, zk::AuthId::new("ip", "10.255.255.1")),
    ];
    let forged = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&forged));
    let made = anonymous.create(&format!("{base}/max/other"), &100i32.to_be_bytes(), &forged).await;
    assert_eq!(made.unwrap_err(), zk::Error::NoAuth, "others make nodes beside the count");
    let other = alice.semaphore_with(&path, options(&count)).unwrap();
    let second = other.acquire_timeout(1, Duration::from_millis(300)).await;
    assert_eq!(second.unwrap_err().kind(), ErrorKind::Timeout, "max 1: no second lease");
    first.release().await.unwrap();

    // A count whose parent someone made open in advance, with their count in it: refused.
    let squatted = format!("{base}/squatted/count");
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    anonymous.mkdir(&format!("{base}/squatted"), &open).await.unwrap();
    anonymous.create(&squatted, &100i32.to_be_bytes(), &forged).await.unwrap();
    let refused = alice.semaphore_with(&format!("{base}/pool2"), options(&squatted)).unwrap();
    let err = refused.acquire_timeout(1, T).await.unwrap_err();
    assert_permission_denied(&err, &format!("{base}/squatted"), "grants more");
    alice.close().await;
}

/// A waiter behind a node it may not read (anyone who may create under an open lock path may
/// make one whose ACL keeps its data from others) waits for it. Past the sequence limit such a
/// node was dropped from the queue as if gone (a second holder) until the queue was ordered by
/// stats; then, as everywhere, the waiter watched it with getData, which needs READ, and failed
/// at once (PermissionDenied, "watching the node ahead"). It watches with exists then, which
/// needs none (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_an_unreadable_node_past_the_sequence_limit_waits_for_it() {
    const PATH: &str = "/locks/unreadable-past-limit";
    let cluster = zklock_testkit::Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, i32::MAX - 1).start();
    let connect = cluster.connect_string();
    let other = observer_at(&connect).await;
    // Use up the last good sequence (a create and its delete each move the counter).
    let open = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let (_, used) = other.create(&format!("{PATH}/_c_{}-lock-", uuid::Uuid::new_v4()), b"", &open).await.unwrap();
    assert_eq!(used.into_i64(), i64::from(i32::MAX - 1));
    let all_but_read = zk::Permission::CREATE | zk::Permission::DELETE | zk::Permission::WRITE | zk::Permission::ADMIN;
    let no_read = [zk::Acl::new(all_but_read, zk::AuthId::anyone())];
    let prefix = format!("{PATH}/_c_{}-lock-", uuid::Uuid::new_v4());
    let (_, holder_seq) = other
        .create(&prefix, b"{}", &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::new(&no_read)))
        .await
        .unwrap();
    let holder_node = format!("{prefix}{holder_seq}");
    assert_eq!(other.get_data(&holder_node).await.unwrap_err(), zk::Error::NoAuth);
    // The good-sequence node goes: only nodes past the limit remain, the unreadable one first.
    let first = children(&other, PATH).await.into_iter().find(|n| !holder_node.ends_with(n.as_str())).unwrap();
    other.delete(&format!("{PATH}/{first}"), None).await.unwrap();

    let client = client_at(&connect).await;
    let lock = client.lock(PATH).unwrap();
    let acquired = lock.acquire_timeout(&Owner::new(1), Duration::from_secs(3)).await;
    let err = acquired.expect_err("held beside the unreadable holder");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    let holders = lock.holders().await.unwrap();
    assert_eq!(holders.len(), 1);
    assert!(holder_node.ends_with(&holders[0].node), "{holders:?}");
    client.close().await;
}

/// As above, on a lock path far from the sequence limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_behind_an_unreadable_node_waits_for_it() {
    let path = unique_path("unreadable-ahead");
    let other = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    lock.try_acquire(&Owner::new(1)).await.unwrap().unwrap().release().await.unwrap();
    let all_but_read = zk::Permission::CREATE | zk::Permission::DELETE | zk::Permission::WRITE | zk::Permission::ADMIN;
    let no_read = [zk::Acl::new(all_but_read, zk::AuthId::anyone())];
    let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
    other
        .create(&prefix, b"{}", &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::new(&no_read)))
        .await
        .unwrap();
    let err = lock.acquire_timeout(&Owner::new(2), Duration::from_secs(3)).await.expect_err("held beside it");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(children(&other, &path).await.len(), 1, "the waiter's node was removed either way");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    client.close().await;
}
