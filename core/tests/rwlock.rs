//! The read/write lock against a real ZooKeeper server: sharing, exclusion, writer priority,
//! downgrade, the refused upgrade, no orphaned node, lost holds, and order past the sequence
//! limit.

mod common;

use std::time::Duration;

use common::*;
use zklock::binding::LockBinding;
use zklock::{Client, ClientOptions, ErrorKind, HoldState, LostReason, Mode, Owner, PathRecipe, ReadWriteLock};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client as zk;

fn modes(participants: &[zklock::Participant]) -> Vec<Option<Mode>> {
    participants.iter().map(|p| p.mode).collect()
}

fn spawn_acquire(lock: &zklock::Lock, owner: Owner) -> tokio::task::JoinHandle<zklock::LockGuard> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.acquire(&owner).await.unwrap() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_excludes_them_and_other_writers() {
    let path = unique_path("rw-share");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let (rw_a, rw_b) = (a.read_write_lock(&path).unwrap(), b.read_write_lock(&path).unwrap());

    // Two readers, in two sessions, hold together.
    let r1 = rw_a.read().acquire(&Owner::new(1)).await.unwrap();
    let r2 = rw_b.read().acquire(&Owner::new(2)).await.unwrap();
    let holders = rw_a.holders().await.unwrap();
    assert_eq!(modes(&holders), vec![Some(Mode::Read), Some(Mode::Read)]);
    assert!(holders[0].node.contains("-__READ__") && holders[1].node.contains("-__READ__"), "{holders:?}");
    // A writer waits for both.
    assert!(rw_b.write().try_acquire(&Owner::new(3)).await.unwrap().is_none(), "a try is refused while read");
    let writer = spawn_acquire(rw_b.write(), Owner::new(3));
    wait_children(&observer, &path, 3).await;
    r1.release().await.unwrap();
    assert!(!writer.is_finished());
    r2.release().await.unwrap();
    let w = writer.await.unwrap();
    assert!(w.hold().node_path().contains("-__WRIT__"));
    assert_eq!(modes(&rw_a.holders().await.unwrap()), vec![Some(Mode::Write)]);
    // The writer excludes readers and other writers.
    assert!(rw_a.read().try_acquire(&Owner::new(4)).await.unwrap().is_none());
    assert!(rw_a.write().try_acquire(&Owner::new(5)).await.unwrap().is_none());
    assert_eq!(children(&observer, &path).await.len(), 1, "tries left no node");
    let reader = spawn_acquire(rw_a.read(), Owner::new(4));
    wait_children(&observer, &path, 2).await;
    let fencing = w.fencing_token();
    w.release().await.unwrap();
    let r = reader.await.unwrap();
    assert!(r.fencing_token() > fencing, "tokens rise across holders");
    r.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    a.close().await;
    b.close().await;
}

/// A reader that comes after a waiting writer waits behind it; it watches the nearest write
/// node ahead, not every node (and, with no writer before that one, its own node: it is next).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reader_waits_behind_a_waiting_writer() {
    let path = unique_path("rw-late");
    let observer = observer().await;
    let (client, late_client) = (client().await, client().await);
    let rw = client.read_write_lock(&path).unwrap();
    let first = rw.read().acquire(&Owner::new(1)).await.unwrap();
    let writer = spawn_acquire(rw.write(), Owner::new(2));
    wait_children(&observer, &path, 2).await;
    let late = spawn_acquire(late_client.read_write_lock(&path).unwrap().read(), Owner::new(3));
    wait_children(&observer, &path, 3).await;
    let queue = rw.contenders().await.unwrap();
    assert_eq!(modes(&queue), vec![Some(Mode::Read), Some(Mode::Write), Some(Mode::Read)]);
    assert_eq!(rw.holders().await.unwrap().len(), 1, "only the first reader holds");
    // The late reader watches the writer's node and its own; not the first reader's.
    let late_session = format!("0x{:x}", late_client.session_id().unwrap());
    let watched_by_late = || {
        let mut nodes: Vec<String> = watches_under(&connect_string(), &path)
            .into_iter()
            .filter(|(_, sessions)| sessions.contains(&late_session))
            .map(|(node, _)| node.rsplit('/').next().unwrap().to_owned())
            .collect();
        nodes.sort();
        nodes
    };
    let mut expected = vec![queue[1].node.clone(), queue[2].node.clone()];
    expected.sort();
    wait_until("the late reader's watches are set", Duration::from_secs(10), || {
        let settled = watched_by_late() == expected;
        async move { settled }
    })
    .await;

    first.release().await.unwrap();
    let w = writer.await.unwrap();
    assert!(!late.is_finished(), "the late reader waits for the writer");
    w.release().await.unwrap();
    late.await.unwrap().release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
    late_client.close().await;
}

/// Downgrade, in Curator 5.5+'s form: the write holder takes the read side with a read node of
/// its own that carries its write node's sequence, releases the write side and goes on reading;
/// a writer already waiting (here one that watched the write node itself, so that its release
/// would have handed it the lock) stays out until the read is released (CURATOR-621).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_keeps_waiting_writers_out_until_the_read_goes() {
    let path = unique_path("rw-downgrade");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let rw = a.read_write_lock(&path).unwrap();
    let other = b.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    let waiting_writer = spawn_acquire(other.write(), Owner::new(2));
    wait_children(&observer, &path, 2).await;

    let read = rw.read().acquire(&me).await.unwrap();
    let nodes = children(&observer, &path).await;
    assert_eq!(nodes.len(), 3, "the read has a node of its own: {nodes:?}");
    let read_node = read.hold().node_path().rsplit('/').next().unwrap().to_owned();
    assert!(
        read_node.ends_with(&format!("-__READ__{:010}", write.hold().sequence())),
        "a plain read node with the write node's sequence: {read_node}"
    );
    assert_eq!(read.hold().sequence(), write.hold().sequence());
    assert_eq!(read.fencing_token(), write.fencing_token(), "the read goes on from the write's place");
    let queue = rw.contenders().await.unwrap();
    assert_eq!(modes(&queue), [Some(Mode::Write), Some(Mode::Read), Some(Mode::Write)]);
    let holders: Vec<String> = rw.holders().await.unwrap().into_iter().map(|p| p.node).collect();
    assert_eq!(holders, [queue[0].node.clone(), read_node.clone()], "the write holder and its read");

    write.release().await.unwrap();
    assert!(rw.read().is_held_by(&me) && !rw.write().is_held_by(&me));
    assert_eq!(read.hold().state(), HoldState::Held);
    assert_eq!(children(&observer, &path).await.len(), 2, "the read node and the waiting writer's");
    // The writer that was waiting is still out, and a try gets nothing.
    assert!(other.write().try_acquire(&Owner::new(3)).await.unwrap().is_none());
    assert!(!waiting_writer.is_finished());
    let holders: Vec<String> = rw.holders().await.unwrap().into_iter().map(|p| p.node).collect();
    assert_eq!(holders, [read_node], "the downgraded reader holds, first in the queue");

    // Re-entry counts up on the read node; the last release deletes it.
    let again = rw.read().acquire(&me).await.unwrap();
    assert_eq!(again.hold(), read.hold());
    again.release().await.unwrap();
    let read_token = read.fencing_token();
    read.release().await.unwrap();
    let w = waiting_writer.await.unwrap();
    assert!(w.fencing_token() > read_token, "the next writer's token is above the downgraded read's");
    w.release().await.unwrap();
    wait_children(&observer, &path, 0).await;
    a.close().await;
    b.close().await;
}

/// After a downgrade, a reader that comes once the write side is released shares with the
/// downgraded reader (as in Curator 5.5+ and java.util.concurrent's ReentrantReadWriteLock),
/// while one that came before waits as behind any writer; a try of the read side by the write
/// holder downgrades too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_after_the_downgrade_shares_with_it() {
    let path = unique_path("rw-downgrade-share");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let rw = a.read_write_lock(&path).unwrap();
    let other = b.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    // A reader that came while the write was held waits for it.
    let early_reader = spawn_acquire(other.read(), Owner::new(2));
    wait_children(&observer, &path, 2).await;
    let read = rw.read().try_acquire(&me).await.unwrap().expect("the write holder reads at once");
    write.release().await.unwrap();
    // The early reader now shares with the downgraded reader...
    let early = tokio::time::timeout(Duration::from_secs(20), early_reader)
        .await
        .expect("the early reader shares with the downgraded reader")
        .unwrap();
    // ... and so does one that comes after.
    let late = other.read().acquire_timeout(&Owner::new(3), Duration::from_secs(20)).await.unwrap();
    assert_eq!(rw.holders().await.unwrap().len(), 3);
    // A writer now waits for all three.
    assert!(other.write().try_acquire(&Owner::new(4)).await.unwrap().is_none());
    for guard in [read, early, late] {
        guard.release().await.unwrap();
    }
    wait_children(&observer, &path, 0).await;
    a.close().await;
    b.close().await;
}

/// A downgrade's read is a hold like any other: lost with its session (and reported so on
/// release, deleting nothing), and refused under a write hold that is already lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgraded_read_is_lost_with_its_session() {
    let path = "/locks/rw-downgrade-lost";
    let (_cluster, proxy, observer, client) = behind_a_proxy(Duration::from_secs(2)).await;
    let rw = client.read_write_lock(path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    let read = rw.read().acquire(&me).await.unwrap();
    write.release().await.unwrap();
    let lost = read.hold().clone();
    proxy.stall();
    let reason = tokio::time::timeout(Duration::from_secs(20), lost.lost()).await.expect("lost is signalled");
    assert!(matches!(reason, Some(LostReason::SessionExpired | LostReason::DisconnectedTooLong)), "{reason:?}");
    proxy.pass();
    assert_eq!(read.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    wait_children(&observer, path, 0).await;
    // A new write hold, lost: no read under it.
    let write = rw.write().acquire(&me).await.unwrap();
    proxy.stall();
    tokio::time::timeout(Duration::from_secs(20), write.hold().lost()).await.expect("lost is signalled");
    proxy.pass();
    assert_eq!(rw.read().acquire(&me).await.err().map(|e| e.kind()), Some(ErrorKind::LockLost));
    assert_eq!(write.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    client.close().await;
}

/// A downgrade whose create is not answered in time gives up, and its read node (made once the
/// connection flows again) is removed: nothing is left behind; the write hold goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_that_times_out_leaves_no_node() {
    let path = "/locks/rw-downgrade-timeout";
    let (_cluster, proxy, observer, client) = behind_a_proxy(Duration::from_secs(6)).await;
    let rw = client.read_write_lock(path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    let (_, before) = observer.get_children(path).await.unwrap();
    proxy.stall();
    let timed_out = rw.read().acquire_timeout(&me, Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(timed_out.kind(), ErrorKind::Timeout, "{timed_out}");
    assert!(!rw.read().is_held_by(&me));
    proxy.pass();
    // The read node made once the create got through, then deleted: two changes of the children.
    wait_until("the late read node made and removed", Duration::from_secs(20), || async {
        observer.get_children(path).await.unwrap().1.cversion == before.cversion + 2
    })
    .await;
    assert_eq!(children(&observer, path).await, [write.hold().node_path().rsplit('/').next().unwrap()]);
    assert_eq!(write.hold().state(), HoldState::Held);
    // And it can downgrade after all.
    let read = rw.read().acquire(&me).await.unwrap();
    write.release().await.unwrap();
    read.release().await.unwrap();
    wait_children(&observer, path, 0).await;
    client.close().await;
}

/// A downgrade under a write node that someone else deleted, sent before the holder heard of the
/// delete (its connection stalled at the proxy from before the delete until the downgrade's
/// request is out), makes no read node: the read node's create checks the write node in the same
/// multi. Made alone, the read node took the deleted write node's place, ahead of the writer that
/// got in, and the two held together (issue 42).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_after_someone_deleted_the_write_node_makes_no_read_node() {
    use futures::FutureExt;
    let path = "/locks/rw-downgrade-deleted";
    let (cluster, proxy, observer, client) = behind_a_proxy(Duration::from_secs(10)).await;
    let other = client_at(&cluster.connect_string()).await;
    let rw = client.read_write_lock(path).unwrap();
    let others = other.read_write_lock(path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    let waiting_writer = spawn_acquire(others.write(), Owner::new(2));
    wait_children(&observer, path, 2).await;

    proxy.stall();
    observer.delete(write.hold().node_path(), None).await.unwrap();
    let x = tokio::time::timeout(Duration::from_secs(10), waiting_writer).await.expect("the writer gets in").unwrap();
    let x_node = x.hold().node_path().rsplit('/').next().unwrap().to_owned();
    assert_eq!(write.hold().state(), HoldState::Held, "the holder has not heard of the delete");
    let mut downgrade = Box::pin(rw.read().acquire(&me));
    assert!((&mut downgrade).now_or_never().is_none(), "the downgrade's request is out, unanswered");
    proxy.pass();
    let refused = tokio::time::timeout(Duration::from_secs(10), downgrade).await.expect("answered").unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::LockLost, "{refused}");
    assert_eq!(refused.lost_reason(), Some(LostReason::NodeDeleted), "{refused}");
    assert!(!rw.read().is_held_by(&me));
    assert_eq!(children(&observer, path).await, [x_node.as_str()], "no read node beside the writer that got in");
    let holders: Vec<String> = others.holders().await.unwrap().into_iter().map(|p| p.node).collect();
    assert_eq!(holders, [x_node], "the writer holds alone");
    assert_eq!(x.hold().state(), HoldState::Held);
    assert_eq!(write.hold().state(), HoldState::Lost, "the refusal says the write hold is lost");
    assert_eq!(write.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    x.release().await.unwrap();
    wait_children(&observer, path, 0).await;
    client.close().await;
    other.close().await;
}

/// Another client's node under `path` (made if missing), EPHEMERAL_SEQUENTIAL: its full path.
async fn foreign_node(observer: &zk::Client, path: &str, prefix: &str) -> String {
    let _ = observer.mkdir(path, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await;
    let ephemeral_sequential = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let (_, sequence) = observer.create(&format!("{path}/{prefix}"), b"", &ephemeral_sequential).await.unwrap();
    format!("{path}/{prefix}{sequence}")
}

/// The read node of another client's downgrade in Curator 5.5+'s form (here made by hand, as
/// Curator 5.7.1 makes it: a plain ephemeral `_c_<uuid>-__READ__<write sequence>`, then the write
/// node deleted) keeps the write node's place: the writer that was waiting stays out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_downgrade_keeps_the_write_nodes_place() {
    let path = unique_path("rw-foreign-downgrade");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let write_node = foreign_node(&observer, &path, "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__WRIT__").await;
    let waiting_writer = spawn_acquire(rw.write(), Owner::new(1));
    wait_children(&observer, &path, 2).await;
    let sequence = &write_node[write_node.len() - 10..];
    let read_node = format!("{path}/_c_1bad0917-53a6-4ed9-bfac-3327be0d1234-__READ__{sequence}");
    observer.create(&read_node, b"", &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())).await.unwrap();
    observer.delete(&write_node, None).await.unwrap();
    assert!(rw.write().try_acquire(&Owner::new(2)).await.unwrap().is_none());
    assert!(rw.read().try_acquire(&Owner::new(3)).await.unwrap().is_none(), "a reader behind the waiting writer waits");
    assert!(!waiting_writer.is_finished(), "the waiting writer stays out while the downgraded read holds");
    let holders: Vec<String> = rw.holders().await.unwrap().into_iter().map(|p| p.node).collect();
    assert_eq!(holders, [read_node.rsplit('/').next().unwrap()]);
    observer.delete(&read_node, None).await.unwrap();
    waiting_writer.await.unwrap().release().await.unwrap();
    wait_children(&observer, &path, 0).await;
    client.close().await;
}

/// kazoo's nodes are contenders of their own mode: `__lock__` (its Lock and WriteLock) a writer
/// and `__rlock__` a reader in the read/write lock, and `__lock__` exclusive in the mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoos_nodes_are_contenders_of_their_mode() {
    let path = unique_path("rw-kazoo");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let kazoo_writer = foreign_node(&observer, &path, "0abad91753a64ed9bfac3327be0d1234__lock__").await;
    assert!(rw.read().try_acquire(&Owner::new(1)).await.unwrap().is_none(), "no reader beside kazoo's writer");
    assert!(rw.write().try_acquire(&Owner::new(2)).await.unwrap().is_none());
    assert_eq!(modes(&rw.contenders().await.unwrap()), [Some(Mode::Write)]);
    observer.delete(&kazoo_writer, None).await.unwrap();
    // kazoo's reader shares with ours, and keeps writers out.
    let kazoo_reader = foreign_node(&observer, &path, "1abad91753a64ed9bfac3327be0d1234__rlock__").await;
    let reading = rw.read().try_acquire(&Owner::new(1)).await.unwrap().expect("readers share");
    assert!(rw.write().try_acquire(&Owner::new(2)).await.unwrap().is_none());
    assert_eq!(rw.holders().await.unwrap().len(), 2);
    reading.release().await.unwrap();
    // A mutex refuses the path of kazoo's read nodes, and queues behind kazoo's Lock.
    let mutex = client.lock(&path).unwrap();
    let refused = mutex.try_acquire(&Owner::new(3)).await.unwrap_err();
    assert!(refused.is_recipe_conflict(), "{refused}");
    let kazoo_nodes = mutex.contenders().await.unwrap();
    // kazoo's Lock/WriteLock node fits either recipe, its ReadLock's only the read/write lock.
    let fits = |p: &zklock::Participant| (p.fits_with(Mode::Exclusive), p.fits_with(Mode::Write));
    assert_eq!(kazoo_nodes.iter().map(fits).collect::<Vec<_>>(), [(false, true)]);
    observer.delete(&kazoo_reader, None).await.unwrap();
    let mutex = client.lock(&path).unwrap();
    let kazoo_lock = foreign_node(&observer, &path, "2abad91753a64ed9bfac3327be0d1234__lock__").await;
    assert!(mutex.try_acquire(&Owner::new(3)).await.unwrap().is_none());
    assert_eq!(modes(&mutex.contenders().await.unwrap()), [Some(Mode::Exclusive)]);
    observer.delete(&kazoo_lock, None).await.unwrap();
    mutex.try_acquire(&Owner::new(3)).await.unwrap().expect("free").release().await.unwrap();
    client.close().await;
}

/// Upgrade: a reader asking for the write side is refused at once with its own kind, rather
/// than waiting for itself forever (as Curator does); reentrancy is per mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_is_refused_at_once_and_reentrancy_is_per_mode() {
    let path = unique_path("rw-upgrade");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let read = rw.read().acquire(&me).await.unwrap();
    let again = rw.read().acquire(&me).await.unwrap();
    assert_eq!(rw.read().hold_of(&me).unwrap().1, 2);
    let started = std::time::Instant::now();
    let err = rw.write().acquire(&me).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock, "{err}");
    assert!(err.message().contains("holds the read lock"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(100), "refused at once");
    assert!(rw.write().try_reenter(&me).unwrap().is_err());
    assert_eq!(children(&observer, &path).await.len(), 1, "no write node was made");
    again.release().await.unwrap();
    read.release().await.unwrap();

    // The write holder re-enters its write side and may take the read side, each counted.
    let w1 = rw.write().acquire(&me).await.unwrap();
    let w2 = rw.write().acquire(&me).await.unwrap();
    let r1 = rw.read().acquire(&me).await.unwrap();
    assert_eq!(rw.write().hold_of(&me).unwrap().1, 2);
    assert_eq!(rw.read().hold_of(&me).unwrap().1, 1);
    r1.release().await.unwrap();
    w2.release().await.unwrap();
    assert!(rw.write().is_held_by(&me));
    w1.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
}

/// Timeouts, tries and cancels of both sides leave no node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_tries_and_cancels_leave_no_node() {
    let path = unique_path("rw-orphans");
    let observer = observer().await;
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let writer = rw.write().acquire(&Owner::new(1)).await.unwrap();
    for side in [rw.read(), rw.write()] {
        let err = side.acquire_timeout(&Owner::new(2), Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert!(side.try_acquire(&Owner::new(2)).await.unwrap().is_none());
        let pending = tokio::spawn({
            let side = side.clone();
            async move { side.acquire(&Owner::new(3)).await }
        });
        wait_children(&observer, &path, 2).await;
        pending.abort();
        wait_children(&observer, &path, 1).await;
    }
    writer.release().await.unwrap();
    assert!(children(&observer, &path).await.is_empty());
    client.close().await;
}

/// `Client::path_recipe`: which recipe the nodes at a path belong to, so which locks fit it (as
/// `zklock exec` asks before taking whichever exclusive lock a path is), by the rule every
/// acquisition refuses a recipe conflict by: an empty path, a mutex's, a read/write lock's, and
/// a semaphore's path and lease parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_recipe_says_which_locks_fit_the_nodes_at_a_path() {
    let base = unique_path("path-recipe");
    let (mutex_path, rw_path, semaphore_path) = (format!("{base}/m"), format!("{base}/rw"), format!("{base}/s"));
    let client = client().await;
    let (me, other) = (Owner::new(1), Owner::new(2));
    let fitting = |recipe: PathRecipe| [Mode::Exclusive, Mode::Read, Mode::Write].map(|mode| recipe.fits(mode));
    assert_eq!(client.path_recipe(&mutex_path).await.unwrap(), PathRecipe::Free, "no path yet");
    assert_eq!(PathRecipe::Free.exclusive_mode(), Mode::Exclusive);

    let mutex = client.lock(&mutex_path).unwrap().acquire(&me).await.unwrap();
    let recipe = client.path_recipe(&mutex_path).await.unwrap();
    assert_eq!(
        (recipe, fitting(recipe), recipe.exclusive_mode()),
        (PathRecipe::Mutex, [true, false, false], Mode::Exclusive)
    );
    let refused = client.read_write_lock(&mutex_path).unwrap().write().try_acquire(&other).await.unwrap_err();
    assert!(refused.is_recipe_conflict(), "as the acquisition has it: {refused}");
    mutex.release().await.unwrap();
    assert_eq!(client.path_recipe(&mutex_path).await.unwrap(), PathRecipe::Free, "empty again");

    let rw = client.read_write_lock(&rw_path).unwrap();
    let reading = rw.read().acquire(&me).await.unwrap();
    let recipe = client.path_recipe(&rw_path).await.unwrap();
    assert_eq!(
        (recipe, fitting(recipe), recipe.exclusive_mode()),
        (PathRecipe::ReadWrite, [false, true, true], Mode::Write)
    );
    assert_eq!(PathRecipe::of(&rw.contenders().await.unwrap()), recipe, "the same of a listing in hand");
    assert!(client.lock(&rw_path).unwrap().try_acquire(&other).await.unwrap_err().is_recipe_conflict());
    reading.release().await.unwrap();

    let leases = client.semaphore(&semaphore_path, 2).unwrap().acquire(1).await.unwrap();
    for path in [semaphore_path.clone(), format!("{semaphore_path}/leases")] {
        let recipe = client.path_recipe(&path).await.unwrap();
        assert_eq!((recipe, fitting(recipe)), (PathRecipe::Semaphore, [false, false, false]), "{path}");
        assert!(client.lock(&path).unwrap().try_acquire(&other).await.unwrap_err().is_recipe_conflict(), "{path}");
    }
    leases.release().await.unwrap();
    // Bad input is refused before any traffic, as a lock's path is.
    assert_eq!(client.path_recipe("relative/path").await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    client.close().await;
}

/// A mutex and a read/write lock on one path would ignore each other: refused, naming the
/// conflict, before any node is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_and_a_read_write_lock_refuse_to_share_a_path() {
    let (mutex_path, rw_path) = (unique_path("rw-conflict-m"), unique_path("rw-conflict-rw"));
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let holder = a.lock(&mutex_path).unwrap().acquire(&Owner::new(1)).await.unwrap();
    let err = b.read_write_lock(&mutex_path).unwrap().read().acquire(&Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.is_recipe_conflict(), "told apart from other invalid arguments: {err}");
    assert!(
        err.message().contains("a read/write lock cannot use this path") && err.message().contains("-lock-"),
        "{err}"
    );
    let nodes = b.lock(&mutex_path).unwrap().contenders().await.unwrap();
    assert!(nodes[0].fits_with(Mode::Exclusive) && !nodes[0].fits_with(Mode::Read) && !nodes[0].fits_with(Mode::Write));
    let other_invalid = b.lock(&mutex_path).unwrap().acquire(&Owner::with_label(3, "x".repeat(2 << 20))).await;
    assert!(!other_invalid.unwrap_err().is_recipe_conflict());
    assert_eq!(children(&observer, &mutex_path).await.len(), 1);
    holder.release().await.unwrap();

    let reader = a.read_write_lock(&rw_path).unwrap().read().acquire(&Owner::new(1)).await.unwrap();
    let err = b.lock(&rw_path).unwrap().acquire(&Owner::new(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("a mutex cannot use this path") && err.message().contains("__READ__"), "{err}");
    assert_eq!(children(&observer, &rw_path).await.len(), 1);
    reader.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// A reader whose session expires loses its hold: signalled, not held, and a writer gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_session_expires_loses_its_hold() {
    let cluster = Cluster::standalone();
    let proxy = Proxy::start(&cluster.server_address(0));
    let session = Duration::from_secs(2);
    let options = ClientOptions { session_timeout: session, ..Default::default() };
    let stalled = Client::connect_with(&proxy.address(), options.clone()).await.unwrap();
    let other = Client::connect_with(&cluster.connect_string(), options).await.unwrap();
    let path = "/locks/rw-expiry";
    let me = Owner::new(1);
    let rw: ReadWriteLock = stalled.read_write_lock(path).unwrap();
    let read = rw.read().acquire(&me).await.unwrap();
    let writer = spawn_acquire(other.read_write_lock(path).unwrap().write(), Owner::new(2));

    proxy.stall();
    let reason = tokio::time::timeout(session * 3, read.hold().lost()).await.expect("lost is signalled");
    assert!(matches!(reason, Some(LostReason::SessionExpired | LostReason::DisconnectedTooLong)), "{reason:?}");
    assert!(!rw.read().is_held_by(&me), "a lost hold is not held");
    assert_eq!(rw.read().state_of(&me), Some(HoldState::Lost));
    let w = tokio::time::timeout(session * 3, writer).await.expect("the writer gets in").unwrap();
    assert_eq!(read.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    w.release().await.unwrap();
    proxy.pass();
    stalled.close().await;
    other.close().await;
}

/// Once `close` has begun, the write holder's hold is lost even while the session ends: reading
/// under it (a downgrade) and re-entering are refused as lost, not counted on a dead hold (found
/// by scripts/fuzz: the read side answered OK right after zkl_client_close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_hold_is_lost_for_a_downgrade_as_soon_as_close_begins() {
    let path = unique_path("rw-closing");
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let me = Owner::new(1);
    let write = rw.write().acquire(&me).await.unwrap();
    // Only close's first step: it marks the client closed, then would wait for the server.
    let _ = tokio::time::timeout(Duration::ZERO, client.close()).await;
    assert_eq!(write.hold().state(), HoldState::Lost);
    // Re-entry without the runtime (try_reenter, the bindings' fast path) and acquire are one
    // path: both say the hold is lost.
    let read = rw.read().try_reenter(&me).map(|r| r.map(|_| ()).map_err(|e| e.kind()));
    assert_eq!(read, Some(Err(ErrorKind::LockLost)), "no read under a lost write hold");
    let again = rw.write().try_reenter(&me).map(|r| r.map(|_| ()).map_err(|e| e.kind()));
    assert_eq!(again, Some(Err(ErrorKind::LockLost)), "no re-entry of a lost hold");
    assert_eq!(rw.read().acquire(&me).await.err().map(|e| e.kind()), Some(ErrorKind::LockLost));
    assert_eq!(rw.write().acquire(&me).await.err().map(|e| e.kind()), Some(ErrorKind::LockLost));
    // An owner that holds nothing here is told the client is closed, either way.
    let stranger = Owner::new(2);
    assert_eq!(rw.read().try_reenter(&stranger).map(|r| r.err().map(|e| e.kind())), Some(Some(ErrorKind::Closed)));
    assert_eq!(rw.read().acquire(&stranger).await.err().map(|e| e.kind()), Some(ErrorKind::Closed));
    assert_eq!(write.release().await.unwrap_err().kind(), ErrorKind::LockLost);
    client.close().await;
}

/// Past the sequence limit no sequence says where a downgrade's read node belongs, so there the
/// write holder reads on its write node: the writer that was waiting stays out until the read is
/// released too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_past_the_sequence_limit_reads_on_the_write_node() {
    const PATH: &str = "/locks/rw-downgrade-overflow";
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, 2_147_483_646).start();
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let (a, b) = (client_at(&connect).await, client_at(&connect).await);
    let rw = a.read_write_lock(PATH).unwrap();
    let other = b.read_write_lock(PATH).unwrap();
    let me = Owner::new(1);
    let gate = rw.write().acquire(&Owner::new(9)).await.unwrap();
    // Queued behind the gate, so that it gets the limit's sequence.
    let mine = spawn_acquire(rw.write(), me.clone());
    wait_children(&observer, PATH, 2).await;
    gate.release().await.unwrap();
    let write = mine.await.unwrap();
    assert_eq!(write.hold().sequence(), i64::from(i32::MAX));
    let waiting_writer = spawn_acquire(other.write(), Owner::new(2));
    wait_children(&observer, PATH, 2).await;
    let read = rw.read().acquire(&me).await.unwrap();
    assert_eq!(read.hold(), write.hold(), "the read is on the write node");
    assert_eq!(children(&observer, PATH).await.len(), 2, "no read node of its own");
    write.release().await.unwrap();
    assert_eq!(children(&observer, PATH).await.len(), 2, "the write node stays while the read holds");
    assert!(other.write().try_acquire(&Owner::new(3)).await.unwrap().is_none());
    assert!(!waiting_writer.is_finished());
    read.release().await.unwrap();
    waiting_writer.await.unwrap().release().await.unwrap();
    wait_children(&observer, PATH, 0).await;
    a.close().await;
    b.close().await;
}

/// Past ZooKeeper's 32-bit sequence limit the queue is ordered by creation zxid: readers and
/// writers still get in in arrival order, and a writer is never in with anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn order_past_the_sequence_limit() {
    const PATH: &str = "/locks/rw-overflow";
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, 2_147_483_644).start();
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let client = client_at(&connect).await;
    let rw = client.read_write_lock(PATH).unwrap();
    let gate = rw.write().acquire(&Owner::with_label(100, "gate")).await.unwrap();
    assert_eq!(gate.hold().sequence(), 2_147_483_644);
    // W R R W R W R, queued one after another across the limit.
    let plan = [Mode::Write, Mode::Read, Mode::Read, Mode::Write, Mode::Read, Mode::Write, Mode::Read];
    let (events, mut log) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (i, mode) in plan.into_iter().enumerate() {
        let side = if mode == Mode::Read { rw.read().clone() } else { rw.write().clone() };
        let events = events.clone();
        let owner = Owner::with_label(i as u64, format!("c{i}"));
        tasks.push(tokio::spawn(async move {
            let guard = side.acquire(&owner).await.unwrap();
            events.send((i, mode, true)).unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            events.send((i, mode, false)).unwrap();
            guard.release().await.unwrap();
        }));
        wait_children(&observer, PATH, i + 2).await;
    }
    let sequences: Vec<i64> = rw.contenders().await.unwrap().iter().map(|p| p.sequence.unwrap()).collect();
    assert!(sequences.iter().filter(|&&s| s == i32::MAX as i64).count() > 1, "crossed the limit: {sequences:?}");
    let labels: Vec<String> =
        rw.contenders().await.unwrap().iter().map(|p| p.identity.as_ref().unwrap().owner.clone()).collect();
    let expected: Vec<String> = std::iter::once("gate".to_owned()).chain((0..7).map(|i| format!("c{i}"))).collect();
    assert_eq!(labels, expected, "queue order is arrival order");
    drop(events);
    gate.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // Replay the log: writers alone, readers together only between writers, and each group
    // (a writer, or readers between writers) in arrival order.
    let group = [0, 1, 1, 2, 3, 4, 5];
    let (mut inside, mut entered) = (Vec::new(), Vec::new());
    while let Some((i, mode, enters)) = log.recv().await {
        if enters {
            assert!(
                inside.iter().all(|(_, m)| *m == Mode::Read) && (mode == Mode::Read || inside.is_empty()),
                "{i} entered with {inside:?}"
            );
            inside.push((i, mode));
            entered.push(group[i]);
        } else {
            inside.retain(|(j, _)| *j != i);
        }
    }
    assert_eq!(entered, [0, 1, 1, 2, 3, 4, 5], "entered in arrival order");
    wait_children(&observer, PATH, 0).await;
    client.close().await;
}

/// A refusal that names another recipe's node shows its name escaped: ZooKeeper allows a node
/// name with U+202E (right-to-left override) or U+2028 (line separator), which would reorder or
/// split the message on a terminal or in a log. (It refuses ESC and other C0 controls itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_names_a_node_escaped() {
    let base = unique_path("conflict-escaped");
    let observer = observer().await;
    let client = client().await;
    let escaped = |err: &zklock::Error, shown: &str| {
        let text = err.to_string();
        assert!(err.is_recipe_conflict(), "{text}");
        assert!(text.contains(shown), "{shown} in {text:?}");
        assert!(!text.contains(['\u{202e}', '\u{2028}']), "raw in {text:?}");
    };

    // A mutex on a read/write lock's path.
    let rw_path = format!("{base}/rw");
    foreign_node(&observer, &rw_path, "_c_\u{202e}gnp.exe\u{2028}-__READ__").await;
    let plain = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let esc = observer.create(&format!("{rw_path}/\u{1b}[31m"), b"", &plain).await;
    assert!(matches!(esc, Err(zk::Error::BadArguments(_))), "ESC in a name is refused: {esc:?}");
    let err = client.lock(&rw_path).unwrap().try_acquire(&Owner::new(1)).await.unwrap_err();
    escaped(&err, "_c_\\u{202e}gnp.exe\\u{2028}-__READ__");

    // A semaphore on a mutex's path.
    let mutex_path = format!("{base}/mutex");
    foreign_node(&observer, &mutex_path, "_c_\u{202e}x-lock-").await;
    let err = client.semaphore(&mutex_path, 2).unwrap().try_acquire(1).await.unwrap_err();
    escaped(&err, "_c_\\u{202e}x-lock-");

    // A semaphore whose lease parent holds a lock node.
    let semaphore_path = format!("{base}/semaphore");
    foreign_node(&observer, &format!("{semaphore_path}/leases"), "_c_\u{202e}y-lock-").await;
    let err = client.semaphore(&semaphore_path, 2).unwrap().try_acquire(1).await.unwrap_err();
    escaped(&err, "_c_\\u{202e}y-lock-");
    client.close().await;
}

/// A binding whose owners are flows known by serial asks core who acquires: the flow's own owner
/// if it holds this side or the other one (the write holder's read is a downgrade), else a fresh
/// owner, a new contender (also once the flow released, and for a flow with no owner yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_to_acquire_is_the_flows_if_it_holds_either_side_else_a_fresh_one() {
    use zklock::binding::OwnerBinding;
    let path = unique_path("owner-choice");
    let client = client().await;
    let rw = client.read_write_lock(&path).unwrap();
    let (read, write) = (rw.read(), rw.write());
    let other = client.lock(&unique_path("owner-choice-other")).unwrap();

    let fresh = write.serial_to_acquire(None);
    assert_ne!(write.serial_to_acquire(None), fresh, "each fresh owner is new");
    assert_ne!(write.serial_to_acquire(Some(fresh)), fresh, "a flow holding nothing contends anew");
    let flow = Owner::from_serial(fresh, "async-flow:1");
    let guard = write.acquire(&flow).await.unwrap();
    assert_eq!(write.serial_to_acquire(Some(fresh)), fresh, "a re-entry");
    assert_eq!(read.serial_to_acquire(Some(fresh)), fresh, "a downgrade follows from the write hold");
    assert_eq!(read.holding_serial(Some(fresh)), Some(fresh));
    assert_ne!(other.serial_to_acquire(Some(fresh)), fresh, "another lock: a new contender");
    assert_eq!(other.holding_serial(Some(fresh)), None);
    let downgraded =
        read.acquire(&Owner::from_serial(read.serial_to_acquire(Some(fresh)), "async-flow:1")).await.unwrap();
    guard.release().await.unwrap();
    assert_eq!(write.serial_to_acquire(Some(fresh)), fresh, "the read held: an upgrade, which core refuses");
    let err = write.acquire(&flow).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock, "{err}");
    downgraded.release().await.unwrap();
    assert_eq!(read.holding_serial(Some(fresh)), None);
    assert_ne!(read.serial_to_acquire(Some(fresh)), fresh, "released: a new contender");
}
