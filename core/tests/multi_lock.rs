//! The multi-lock against a real ZooKeeper server: one canonical order (no deadlock between two
//! multi-locks given their members in opposite orders), one deadline for all members, nothing
//! left behind, release in reverse order, loss of one member named, mixed kinds, bad input.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LostReason, Member, MemberKind, MultiGuard, Owner};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client as zk;

/// The holders' nodes of a multi-lock's members under `prefix`, as the server has them: lock
/// nodes of a lock path, lease nodes of a semaphore (`<path>/leases`); the internal mutex's
/// passing nodes are not held, and not counted.
async fn held_nodes(zk: &zk::Client, paths: &[&str]) -> Vec<String> {
    let mut nodes = Vec::new();
    for path in paths {
        nodes.extend(children(zk, path).await.into_iter().filter(|node| node != "locks" && node != "leases"));
        nodes.extend(children(zk, &format!("{path}/leases")).await);
    }
    nodes
}

/// Which of `paths` a created or deleted holder's node belongs to, if any: its parent is the
/// lock path, or the semaphore's lease parent (not the semaphore's two parents themselves).
fn member_of<'a>(node: &str, paths: &[&'a str]) -> Option<&'a str> {
    let (parent, name) = node.rsplit_once('/')?;
    if name == "locks" || name == "leases" {
        return None;
    }
    paths.iter().copied().find(|path| parent == *path || parent == format!("{path}/leases"))
}

/// Two clients (separate sessions) take a multi-lock over the same two mutexes, one given them as
/// [a, b], the other as [b, a], many times each: taken in list order (Curator's way), each would
/// soon hold one and wait for the other forever. Here both take a first, so every round ends, and
/// never are both holding at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_argument_orders_from_two_sessions_never_deadlock() {
    let base = unique_path("multi-orders");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for reversed in [false, true] {
        let inside = inside.clone();
        let (a, b) = (a.clone(), b.clone());
        tasks.push(tokio::spawn(async move {
            let client = client().await;
            let (first, second) = if reversed { (&b, &a) } else { (&a, &b) };
            let members = [client.lock(first).unwrap().into(), client.lock(second).unwrap().into()];
            let multi = client.multi_lock(members).unwrap();
            let order: Vec<&str> = multi.members().iter().map(Member::path).collect();
            assert_eq!(order, [a.as_str(), b.as_str()], "the canonical order, whatever the argument order");
            let owner = Owner::unique();
            for _ in 0..25 {
                let guard = multi.acquire(&owner).await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two multi-locks held both mutexes at once");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
            client.close().await;
        }));
    }
    let all = futures::future::try_join_all(tasks);
    tokio::time::timeout(Duration::from_secs(30), all).await.expect("no deadlock: both finished").unwrap();
    let observer = observer().await;
    assert!(held_nodes(&observer, &[&a, &b]).await.is_empty());
}

/// One deadline for every member: the first member is held elsewhere for most of the timeout,
/// the second for all of it. Giving each member the full timeout (Curator's way) would take the
/// time spent on the first plus a whole timeout; here the acquire ends at its one deadline, with
/// a timeout naming the member it waited for, and leaves no node of any member: the first
/// member, taken meanwhile, is released before it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_deadline_for_all_members_and_a_timeout_leaves_nothing() {
    let base = unique_path("multi-deadline");
    let (a, b, c) = (format!("{base}/a"), format!("{base}/b"), format!("{base}/c"));
    let observer = observer().await;
    let other = client().await;
    let held_a = other.lock(&a).unwrap().acquire(&Owner::unique()).await.unwrap();
    let held_b = other.read_write_lock(&b).unwrap().write().acquire(&Owner::unique()).await.unwrap();
    let client = client().await;
    let members = [
        Member::leases(&client.semaphore(&c, 2).unwrap(), 1),
        client.read_write_lock(&b).unwrap().write().clone().into(),
        client.lock(&a).unwrap().into(),
    ];
    let multi = client.multi_lock(members).unwrap();
    let timeout = Duration::from_secs(2);
    let started = tokio::time::Instant::now();
    let acquire = tokio::spawn({
        let multi = multi.clone();
        async move { multi.acquire_timeout(&Owner::unique(), timeout).await }
    });
    // Queued at a; let a go after 1.2 s of the 2 s (the scenario's timing, not a wait).
    wait_children(&observer, &a, 2).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    held_a.release().await.unwrap();
    let err = acquire.await.unwrap().expect_err("b is held elsewhere past the deadline");
    let elapsed = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert_eq!(err.path(), Some(b.as_str()), "names the member it waited for: {err}");
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(elapsed < timeout + Duration::from_millis(900), "one deadline, not one per member: {elapsed:?}");
    // Right after it returned: a's node (taken at 1.2 s) and b's attempt are gone, c never made.
    assert!(children(&observer, &a).await.is_empty(), "a released");
    assert_eq!(children(&observer, &b).await.len(), 1, "only the other holder's node at b");
    assert!(held_nodes(&observer, &[&c]).await.is_empty(), "no lease at c");
    assert!(children(&observer, &format!("{c}/locks")).await.is_empty(), "no node at c's mutex");
    held_b.release().await.unwrap();
    // With b free, the same multi-lock takes all three within one deadline.
    let guard = multi.acquire_timeout(&Owner::unique(), timeout).await.unwrap();
    assert_eq!(guard.state(), HoldState::Held);
    guard.release().await.unwrap();
    assert!(held_nodes(&observer, &[&a, &b, &c]).await.is_empty());
}

/// Dropping the acquire future while it waits for its second member releases the first in the
/// background and removes the attempt's node at the second: nothing is orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_leaves_nothing() {
    let base = unique_path("multi-cancel");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    let observer = observer().await;
    let other = client().await;
    let held_b = other.lock(&b).unwrap().acquire(&Owner::unique()).await.unwrap();
    let client = client().await;
    let multi = client.multi_lock([client.lock(&b).unwrap().into(), client.lock(&a).unwrap().into()]).unwrap();
    let acquire = tokio::spawn(async move { multi.acquire(&Owner::unique()).await });
    wait_children(&observer, &a, 1).await;
    wait_children(&observer, &b, 2).await;
    acquire.abort();
    assert!(acquire.await.unwrap_err().is_cancelled());
    wait_children(&observer, &a, 0).await;
    wait_children(&observer, &b, 1).await;
    held_b.release().await.unwrap();
}

/// Members are taken in canonical order and released in reverse, each delete confirmed before
/// the next: the server's own order of the holders' nodes' creations and deletions, as one
/// persistent recursive watch of an observer sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_in_canonical_order_and_released_in_reverse() {
    let base = unique_path("multi-reverse");
    let (a, b, c) = (format!("{base}/a"), format!("{base}/b"), format!("{base}/c"));
    let paths = [a.as_str(), b.as_str(), c.as_str()];
    let observer = observer().await;
    let mut watcher = observer.watch(&base, zk::AddWatchMode::PersistentRecursive).await.unwrap();
    let client = client().await;
    let members = [
        client.lock(&c).unwrap().into(),
        Member::leases(&client.semaphore(&b, 3).unwrap(), 2),
        client.read_write_lock(&a).unwrap().read().clone().into(),
    ];
    let multi = client.multi_lock(members).unwrap();
    let guard = multi.acquire(&Owner::unique()).await.unwrap();
    guard.release().await.unwrap();
    let mut created = Vec::new();
    let mut deleted = Vec::new();
    while deleted.len() < 4 {
        let event = tokio::time::timeout(Duration::from_secs(20), watcher.changed()).await.expect("watch events");
        let Some(member) = member_of(&event.path, &paths) else { continue };
        match event.event_type {
            zk::EventType::NodeCreated => created.push(member),
            zk::EventType::NodeDeleted => deleted.push(member),
            _ => {}
        }
    }
    assert_eq!(created, [a.as_str(), b.as_str(), b.as_str(), c.as_str()], "taken by path");
    assert_eq!(deleted, [c.as_str(), b.as_str(), b.as_str(), a.as_str()], "released in reverse");
}

/// A member whose node someone deletes (as an operator would) makes the multi-lock Lost, and the
/// signal names that member and why; releasing reports the loss and still deletes the other
/// members' nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_one_member_loses_the_multi_lock_naming_it() {
    let base = unique_path("multi-lost");
    let (a, s) = (format!("{base}/a"), format!("{base}/s"));
    let observer = observer().await;
    let client = client().await;
    let multi = client
        .multi_lock([Member::leases(&client.semaphore(&s, 2).unwrap(), 1), client.lock(&a).unwrap().into()])
        .unwrap();
    let guard = multi.acquire(&Owner::unique()).await.unwrap();
    assert_eq!(guard.state(), HoldState::Held);
    assert_eq!(guard.lost_member(), None);
    let lease = children(&observer, &format!("{s}/leases")).await.pop().expect("the lease node");
    observer.delete(&format!("{s}/leases/{lease}"), None).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(20), guard.lost()).await.expect("the lost signal");
    assert_eq!((lost.path.as_str(), lost.kind, lost.reason), (s.as_str(), MemberKind::Leases, LostReason::NodeDeleted));
    assert_eq!(lost.index, 1, "the leases come after the mutex in canonical order");
    assert_eq!(guard.state(), HoldState::Lost);
    assert_eq!(guard.lost_member(), Some(lost));
    let err = guard.release().await.expect_err("a lost member is reported");
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(children(&observer, &a).await.is_empty(), "the mutex's node is deleted all the same");
}

/// Mixed kinds: a mutex, the write side of a read/write lock and 2 leases of a semaphore of 3,
/// held together, each with its fencing token(s); others see each member taken as its own recipe
/// says (the mutex and the write side held, one lease left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_kinds_are_held_together_with_each_members_tokens() {
    let base = unique_path("multi-mixed");
    let (m, w, s) = (format!("{base}/m"), format!("{base}/w"), format!("{base}/s"));
    let observer = observer().await;
    let client = client().await;
    let members = [
        Member::leases(&client.semaphore(&s, 3).unwrap(), 2),
        client.lock(&m).unwrap().into(),
        client.read_write_lock(&w).unwrap().write().clone().into(),
    ];
    let multi = client.multi_lock(members).unwrap();
    let kinds: Vec<MemberKind> = multi.members().iter().map(Member::kind).collect();
    assert_eq!(kinds, [MemberKind::Mutex, MemberKind::Leases, MemberKind::Write]);
    let owner = Owner::unique();
    let guard: MultiGuard = multi.acquire(&owner).await.unwrap();
    let tokens = guard.fencing_tokens();
    let counts: Vec<(&str, usize)> = tokens.iter().map(|(member, tokens)| (member.path(), tokens.len())).collect();
    assert_eq!(counts, [(m.as_str(), 1), (s.as_str(), 2), (w.as_str(), 1)]);
    let flat: Vec<i64> = tokens.iter().flat_map(|(_, tokens)| tokens.iter().copied()).collect();
    assert!(flat.windows(2).all(|pair| pair[0] < pair[1]), "each its own node, made in order: {flat:?}");
    for (member, holds) in guard.holds() {
        for hold in holds {
            assert_eq!(hold.state(), HoldState::Held, "{}", member.path());
        }
    }
    let other = common::client().await;
    assert!(other.lock(&m).unwrap().try_acquire(&Owner::unique()).await.unwrap().is_none(), "mutex held");
    let write = other.read_write_lock(&w).unwrap();
    assert!(write.read().try_acquire(&Owner::unique()).await.unwrap().is_none(), "write side held");
    let semaphore = other.semaphore(&s, 3).unwrap();
    assert!(semaphore.try_acquire(2).await.unwrap().is_none(), "two of three leases held");
    let one = semaphore.try_acquire(1).await.unwrap().expect("the third lease is free");
    one.release().await.unwrap();
    guard.release().await.unwrap();
    assert!(held_nodes(&observer, &[&m, &w, &s]).await.is_empty());
}

/// Bad input is refused before any traffic with an invalid-argument error naming what was wrong:
/// no member, the same path twice (one lock twice, or both sides of a read/write lock), 0 leases,
/// more leases than the max.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_any_traffic() {
    let path = unique_path("multi-bad");
    let other = format!("{path}-other");
    let observer = observer().await;
    let client = client().await;
    let err = client.multi_lock(Vec::<Member>::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("at least one member"), "{err}");
    let rw = client.read_write_lock(&path).unwrap();
    let refused = [
        vec![
            client.lock(&path).unwrap().into(),
            client.lock(&other).unwrap().into(),
            client.lock(&path).unwrap().into(),
        ],
        vec![rw.read().clone().into(), rw.write().clone().into()],
        vec![client.lock(&path).unwrap().into(), Member::leases(&client.semaphore(&path, 2).unwrap(), 1)],
    ];
    for members in refused {
        let err = client.multi_lock(members).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(err.path(), Some(path.as_str()), "{err}");
        assert!(err.message().contains("each path once"), "{err}");
    }
    let err = client.multi_lock([Member::leases(&client.semaphore(&path, 2).unwrap(), 0)]).unwrap_err();
    assert!(err.kind() == ErrorKind::InvalidArgument && err.message().contains("not 0"), "{err}");
    let err = client.multi_lock([Member::leases(&client.semaphore(&path, 2).unwrap(), 3)]).unwrap_err();
    assert!(err.kind() == ErrorKind::InvalidArgument && err.message().contains("max of 2"), "{err}");
    assert!(observer.check_stat(&path).await.unwrap().is_none(), "nothing was sent: no lock path made");
}

/// Members may come from several clients. One whose session is lost (its connection stalled at
/// the fault proxy past the session timeout) makes the multi-lock Lost, named with the reason;
/// the member on the healthy session is still released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_session_is_lost_loses_the_multi_lock() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let (a, b) = ("/multi/lost-session/a", "/multi/lost-session/b");
    let options = ClientOptions { session_timeout: Duration::from_secs(2), ..Default::default() };
    let healthy = Client::connect_with(&cluster.connect_string(), options.clone()).await.unwrap();
    let stalled = Client::connect_with(&proxy.address(), options).await.unwrap();
    let members = [stalled.read_write_lock(b).unwrap().write().clone().into(), healthy.lock(a).unwrap().into()];
    let multi = healthy.multi_lock(members).unwrap();
    let guard = multi.acquire(&Owner::unique()).await.unwrap();
    proxy.stall();
    let lost = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await.expect("the loss is told");
    assert_eq!((lost.path.as_str(), lost.kind), (b, MemberKind::Write));
    assert!(matches!(lost.reason, LostReason::DisconnectedTooLong | LostReason::SessionExpired), "{lost:?}");
    assert_eq!(guard.state(), HoldState::Lost);
    proxy.pass();
    let err = guard.release().await.expect_err("the lost member is reported");
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(children(&observer, a).await.is_empty(), "the healthy member's node is deleted");
}

/// A member taken earlier and lost while a later one is waited for is no member held: here M
/// holds a and waits for b when its connection stalls at the proxy past the session timeout, the
/// server expires its session, and W takes a. The acquire does not return once b is free (it
/// returned, with a lost, and a body under it ran beside W: issue 42): it takes every member again
/// on a new session, queued at a behind W, and returns once W lets go, all of them held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_never_returns_with_a_member_lost_meanwhile() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let observer = observer_at(&cluster.connect_string()).await;
    let (a, b) = ("/multi/lost-meanwhile/a", "/multi/lost-meanwhile/b");
    let options = ClientOptions { session_timeout: Duration::from_secs(2), ..Default::default() };
    let m = Client::connect_with(&proxy.address(), options).await.unwrap();
    let others = Client::connect_with(&cluster.connect_string(), ClientOptions::default()).await.unwrap();
    let b_holder = others.lock(b).unwrap().acquire(&Owner::unique()).await.unwrap();
    let multi = m.multi_lock([m.lock(a).unwrap().into(), m.lock(b).unwrap().into()]).unwrap();
    let mut acquiring = tokio::spawn(async move { multi.acquire(&Owner::unique()).await });
    wait_children(&observer, a, 1).await;
    wait_children(&observer, b, 2).await;
    let first_session = m.session_id().unwrap();

    proxy.stall();
    // The server expires M's session, and its nodes with it.
    wait_children(&observer, a, 0).await;
    wait_children(&observer, b, 1).await;
    let w = others.lock(a).unwrap().acquire(&Owner::unique()).await.unwrap();
    proxy.pass();
    b_holder.release().await.unwrap();
    tokio::select! {
        returned = &mut acquiring => {
            let guard = returned.unwrap().unwrap();
            panic!("returned while W holds a: {:?}, lost member {:?}", guard.state(), guard.lost_member());
        }
        _ = wait_children(&observer, a, 2) => {}
    }
    assert_ne!(m.session_id(), Some(first_session), "queued at a again on a new session");
    assert!(!acquiring.is_finished(), "behind W");
    w.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(20), acquiring).await.expect("M takes both").unwrap().unwrap();
    assert_eq!((guard.state(), guard.lost_member()), (HoldState::Held, None));
    for (member, holds) in guard.holds() {
        for hold in holds {
            assert_eq!(hold.state(), HoldState::Held, "{}", member.path());
        }
    }
    assert_eq!((children(&observer, a).await.len(), children(&observer, b).await.len()), (1, 1));
    guard.release().await.unwrap();
    assert!(held_nodes(&observer, &[a, b]).await.is_empty());
    m.close().await;
    others.close().await;
}

/// An error taking a later member (here a semaphore on a path that holds a mutex's nodes: a
/// recipe conflict) releases the members already taken before it is returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_on_a_later_member_releases_those_taken() {
    let base = unique_path("multi-error");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    let observer = observer().await;
    let other = client().await;
    let mutex_at_b = other.lock(&b).unwrap().acquire(&Owner::unique()).await.unwrap();
    let client = client().await;
    let members = [Member::leases(&client.semaphore(&b, 2).unwrap(), 1), client.lock(&a).unwrap().into()];
    let err = client.multi_lock(members).unwrap().acquire(&Owner::unique()).await.unwrap_err();
    assert!(err.is_recipe_conflict(), "{err}");
    assert_eq!(err.path(), Some(b.as_str()), "{err}");
    assert!(children(&observer, &a).await.is_empty(), "a, taken first, is released");
    assert_eq!(children(&observer, &b).await.len(), 1, "only the mutex's own node at b");
    mutex_at_b.release().await.unwrap();
}

/// Two members of clients with different chroots can share a path and a kind: the lost member is
/// named by its index, so the right one is (C's `zkl_multi_guard_lost_member` matched by path).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_member_is_named_by_its_index_when_two_share_a_path() {
    let base = unique_path("multi-chroots");
    let observer = observer().await;
    let all = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for root in ["one", "two"] {
        observer.mkdir(&format!("{base}/{root}"), &all).await.unwrap();
    }
    let one = client_at(&format!("{}{base}/one", connect_string())).await;
    let two = client_at(&format!("{}{base}/two", connect_string())).await;
    let multi = one.multi_lock([one.lock("/x").unwrap().into(), two.lock("/x").unwrap().into()]).unwrap();
    let guard = multi.acquire(&Owner::unique()).await.unwrap();
    let members: Vec<_> = guard.members().map(|member| member.path().to_owned()).collect();
    assert_eq!(members, ["/x", "/x"]);
    // Which member's client is "two" (the order of equal members is the canonical sort's).
    let second_is_two = match guard.members().nth(1).unwrap() {
        Member::Lock(lock) => lock.client().session_id() == two.session_id(),
        Member::Leases(..) => unreachable!("two locks"),
    };
    let deleted_root = if second_is_two { "two" } else { "one" };
    let node = children(&observer, &format!("{base}/{deleted_root}/x")).await.pop().expect("its node");
    observer.delete(&format!("{base}/{deleted_root}/x/{node}"), None).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(20), guard.lost()).await.expect("the lost signal");
    assert_eq!(lost.index, 1, "the member whose node went, not the first with its path");
    assert_eq!(guard.lost_member().map(|lost| lost.index), Some(1));
    let _ = guard.release().await;
}

/// The bindings' handle on a multi-lock's guard (`binding::Releasable`) says what the guard says
/// (`Lost` once a member is), and `Released` once taken out to be released, the lost member too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bindings_guard_says_released_once_taken_even_if_lost() {
    use zklock::binding::Releasable;
    let base = unique_path("multi-releasable");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    let observer = observer().await;
    let client = client().await;
    let multi = client.multi_lock([client.lock(&a).unwrap().into(), client.lock(&b).unwrap().into()]).unwrap();
    let held = Releasable::new(multi.acquire(&Owner::unique()).await.unwrap());
    assert_eq!(held.state(), HoldState::Held);
    let node = children(&observer, &b).await.pop().expect("b's node");
    observer.delete(&format!("{b}/{node}"), None).await.unwrap();
    let loss = held.first_member_loss().unwrap();
    tokio::time::timeout(Duration::from_secs(20), loss).await.expect("the loss is told");
    assert_eq!(held.state(), HoldState::Lost);
    let err = held.take().unwrap().release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(held.state(), HoldState::Released);
    assert!(held.take().is_none());
    assert!(children(&observer, &a).await.is_empty());
}

/// A binding whose owners are flows known by serial asks core who takes a multi-lock's members:
/// the flow's owner that holds a member lock (re-entered, not waited for), else a fresh owner;
/// a flow holding members as two owners (separate acquisitions) is refused with Deadlock before
/// any traffic, naming the first member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_to_take_a_multi_lock_is_the_flows_holder_and_two_holders_deadlock() {
    use zklock::binding::{MultiLockBinding, OwnerBinding};
    let base = unique_path("multi-owner");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    let observer = observer().await;
    let client = client().await;
    let (lock_a, lock_b) = (client.lock(&a).unwrap(), client.lock(&b).unwrap());
    let multi = client.multi_lock([lock_a.clone().into(), lock_b.clone().into()]).unwrap();
    let (first, second, idle) = (Owner::unique_serial(), Owner::unique_serial(), Owner::unique_serial());
    let owner = |serial| Owner::from_serial(serial, "async-flow");

    let fresh = multi.serial_to_acquire(&[]).unwrap();
    assert!(![first, second, idle].contains(&fresh));
    assert_ne!(multi.serial_to_acquire(&[idle]).unwrap(), idle, "holding nothing: a new owner");
    let held_a = lock_a.acquire(&owner(first)).await.unwrap();
    assert_eq!(multi.serial_to_acquire(&[idle, first, first]).unwrap(), first);
    let held_b = lock_b.acquire(&owner(second)).await.unwrap();
    let err = multi.serial_to_acquire(&[first, second]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock, "{err}");
    assert_eq!(err.path(), Some(a.as_str()), "{err}");
    held_b.release().await.unwrap();

    let taker = multi.serial_to_acquire(&[first, second]).unwrap();
    assert_eq!(taker, first);
    let guard = multi.acquire(&owner(taker)).await.unwrap();
    assert_eq!(lock_a.hold_of(&owner(first)).unwrap().1, 2, "the member held is re-entered");
    guard.release().await.unwrap();
    assert!(children(&observer, &b).await.is_empty());
    held_a.release().await.unwrap();
    assert!(children(&observer, &a).await.is_empty());
}
