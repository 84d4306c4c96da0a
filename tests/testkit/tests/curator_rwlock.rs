//! zklock's read/write lock and Apache Curator 5.4's InterProcessReadWriteLock on one path, against
//! a real server: readers of both hold together, a writer of either excludes everyone, the queue
//! order holds across both, and zklock sees Curator's nodes with their modes. (Curator's own
//! downgrade is not exercised: Curator 5.4 makes a fresh read node for it, CURATOR-621.)

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use zklock::{Client, LockGuard, Mode, Owner, Participant, ReadWriteLock};
use zklock_testkit::curator::epoch_micros;
use zklock_testkit::{shared_connect_string, CuratorContender, CuratorLock};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(30);
/// How long a contender that must stay queued is watched for a wrong grant.
const STAYS_OUT: Duration = Duration::from_millis(300);

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/curator-rw-test-{}-{tag}-{}/lock", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Spawns Curator contenders in parallel (each is a JVM start plus a session).
fn spawn_curators(connect: &str, path: &str, who: &[(&str, CuratorLock)]) -> Vec<CuratorContender> {
    thread::scope(|s| {
        let handles: Vec<_> = who
            .iter()
            .map(|&(name, kind)| s.spawn(move || CuratorContender::spawn_lock(connect, path, name, kind)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// One zklock participant: its own session (as another process would have) and read/write lock.
struct Zk {
    client: Client,
    lock: ReadWriteLock,
    owner: Owner,
}

impl Zk {
    fn new(rt: &Runtime, connect: &str, path: &str, label: &str) -> Zk {
        let client = rt.block_on(Client::connect(connect)).unwrap();
        let lock = client.read_write_lock(path).unwrap();
        Zk { client, lock, owner: Owner::unique_labelled(|_| label.to_string()) }
    }

    fn side(&self, mode: Mode) -> &zklock::Lock {
        match mode {
            Mode::Read => self.lock.read(),
            _ => self.lock.write(),
        }
    }

    /// Starts acquiring `mode`; the task returns the guard and the epoch-µs time it was granted.
    fn begin(&self, rt: &Runtime, mode: Mode) -> JoinHandle<(LockGuard, u128)> {
        let (side, owner) = (self.side(mode).clone(), self.owner.clone());
        rt.spawn(async move {
            let guard = side.acquire(&owner).await.unwrap();
            (guard, epoch_micros())
        })
    }

    fn close(self, rt: &Runtime) {
        rt.block_on(self.client.close());
    }
}

/// Waits for a zklock acquisition to be granted.
fn granted(rt: &Runtime, pending: JoinHandle<(LockGuard, u128)>) -> (LockGuard, u128) {
    rt.block_on(async { tokio::time::timeout(T, pending).await }).expect("not granted in time").unwrap()
}

/// True if a zklock acquisition is still waiting after [`STAYS_OUT`].
fn stays_out(rt: &Runtime, pending: &mut JoinHandle<(LockGuard, u128)>) -> bool {
    rt.block_on(async { tokio::time::timeout(STAYS_OUT, &mut *pending).await.is_err() })
}

/// Releases a zklock hold; returns the epoch-µs time taken just before (the end of the hold).
fn release(rt: &Runtime, guard: LockGuard) -> u128 {
    let leaving = epoch_micros();
    rt.block_on(guard.release()).unwrap();
    leaving
}

fn children(rt: &Runtime, observer: &zk::Client, path: &str) -> Vec<String> {
    rt.block_on(async {
        match observer.list_children(path).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => panic!("list_children {path}: {e}"),
        }
    })
}

/// Polls the server until `path` has `n` children (a contender's node arrived or left).
fn wait_children(rt: &Runtime, observer: &zk::Client, path: &str, n: usize) {
    let deadline = Instant::now() + T;
    while children(rt, observer, path).len() != n {
        assert!(Instant::now() < deadline, "{path} never had {n} children: {:?}", children(rt, observer, path));
        thread::sleep(Duration::from_millis(10));
    }
}

fn modes(participants: &[Participant]) -> Vec<Option<Mode>> {
    participants.iter().map(|p| p.mode).collect()
}

fn nodes(participants: &[Participant]) -> Vec<&str> {
    participants.iter().map(|p| p.node.as_str()).collect()
}

/// Curator's view of the queue (full paths) as bare node names.
fn curator_queue(c: &mut CuratorContender) -> Vec<String> {
    c.nodes().into_iter().map(|n| n.rsplit('/').next().unwrap().to_string()).collect()
}

#[test]
fn curator_and_zklock_readers_hold_together() {
    let connect = shared_connect_string();
    let path = unique("share");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut curator = spawn_curators(&connect, &path, &[("curator-reader", CuratorLock::Read)]).pop().unwrap();
    let (zk1, zk2) = (Zk::new(&rt, &connect, &path, "zk-reader-1"), Zk::new(&rt, &connect, &path, "zk-reader-2"));

    // A zklock reader holds; Curator's reader gets in beside it.
    let (first, first_at) = granted(&rt, zk1.begin(&rt, Mode::Read));
    let curator_at = curator.acquire(T);
    assert!(zk1.lock.read().is_held_by(&zk1.owner), "the zklock reader still holds");
    assert!(first_at <= curator_at);
    let holders = rt.block_on(zk1.lock.holders()).unwrap();
    assert_eq!(modes(&holders), vec![Some(Mode::Read), Some(Mode::Read)], "{holders:?}");
    let theirs = &holders[1];
    assert!(theirs.node.starts_with("_c_") && theirs.node.contains("-__READ__"), "{theirs:?}");
    assert_eq!(theirs.session_id, curator.session_id());
    assert!(theirs.identity.is_none(), "Curator writes no zklock identity: {theirs:?}");
    assert_eq!(holders[0].identity.as_ref().map(|i| i.owner.as_str()), Some("zk-reader-1"));
    // Curator sees the same two readers, in the same order.
    assert_eq!(curator_queue(&mut curator), nodes(&holders));

    // The zklock reader leaves; another zklock reader gets in beside Curator's.
    let first_left = release(&rt, first);
    let (second, second_at) = granted(&rt, zk2.begin(&rt, Mode::Read));
    let holders = rt.block_on(zk2.lock.holders()).unwrap();
    assert_eq!(modes(&holders), vec![Some(Mode::Read), Some(Mode::Read)], "{holders:?}");
    assert_eq!(holders[0].session_id, curator.session_id(), "Curator's reader holds on");
    let curator_left = curator.release();
    assert!(curator_at < first_left && second_at < curator_left, "each zklock reader held while Curator's did");
    release(&rt, second);

    assert!(curator.nodes().is_empty());
    wait_children(&rt, &observer, &path, 0);
    assert!(curator.quit().success());
    zk1.close(&rt);
    zk2.close(&rt);
}

#[test]
fn a_writer_of_either_excludes_readers_and_writers_of_both() {
    let connect = shared_connect_string();
    let path = unique("exclude");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        &[("curator-writer", CuratorLock::Write), ("curator-reader", CuratorLock::Read)],
    );
    let (mut c_reader, mut c_writer) = (v.pop().unwrap(), v.pop().unwrap());
    let (zr, zw) = (Zk::new(&rt, &connect, &path, "zk-reader"), Zk::new(&rt, &connect, &path, "zk-writer"));

    // Curator's writer holds: zklock's reader and writer are refused, then queue and stay out.
    let c_writer_at = c_writer.acquire(T);
    assert!(rt.block_on(zr.lock.read().try_acquire(&zr.owner)).unwrap().is_none());
    assert!(rt.block_on(zw.lock.write().try_acquire(&zw.owner)).unwrap().is_none());
    assert_eq!(children(&rt, &observer, &path).len(), 1, "the tries left no node");
    let mut reading = zr.begin(&rt, Mode::Read);
    wait_children(&rt, &observer, &path, 2);
    let mut writing = zw.begin(&rt, Mode::Write);
    wait_children(&rt, &observer, &path, 3);
    assert!(stays_out(&rt, &mut reading) && stays_out(&rt, &mut writing), "Curator's writer still holds");
    let holders = rt.block_on(zr.lock.holders()).unwrap();
    assert_eq!(modes(&holders), vec![Some(Mode::Write)], "{holders:?}");
    assert!(holders[0].node.contains("-__WRIT__") && holders[0].session_id == c_writer.session_id());
    let queue = rt.block_on(zr.lock.contenders()).unwrap();
    assert_eq!(modes(&queue), vec![Some(Mode::Write), Some(Mode::Read), Some(Mode::Write)]);
    assert_eq!(curator_queue(&mut c_writer), nodes(&queue), "Curator and zklock see one queue");

    // It leaves: zklock's reader gets in, zklock's writer waits for that reader.
    let c_writer_left = c_writer.release();
    let (read, read_at) = granted(&rt, reading);
    assert!(c_writer_at < c_writer_left && c_writer_left <= read_at, "no overlap with Curator's writer");
    assert!(stays_out(&rt, &mut writing), "zklock's writer waits for the reader");
    let read_left = release(&rt, read);
    let (write, write_at) = granted(&rt, writing);
    assert!(read_left <= write_at);

    // zklock's writer holds: Curator's reader and writer queue and stay out.
    c_reader.acquire_async();
    wait_children(&rt, &observer, &path, 2);
    c_writer.acquire_async();
    wait_children(&rt, &observer, &path, 3);
    assert_eq!(c_reader.poll_acquired(STAYS_OUT), None, "Curator's reader got in beside zklock's writer");
    assert_eq!(c_writer.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside zklock's writer");
    let holders = rt.block_on(zw.lock.holders()).unwrap();
    assert_eq!(holders.len(), 1, "one holder: {holders:?}");
    assert_eq!(holders[0].identity.as_ref().map(|i| i.owner.as_str()), Some("zk-writer"));
    // It leaves: Curator's reader gets in; Curator's writer waits for that reader, and zklock's
    // reader stays out while Curator's writer holds.
    let write_left = release(&rt, write);
    let c_read_at = c_reader.wait_acquired(T);
    assert!(write_at < write_left && write_left <= c_read_at);
    assert_eq!(c_writer.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside Curator's reader");
    let c_read_left = c_reader.release();
    let c_write_at = c_writer.wait_acquired(T);
    assert!(c_read_left <= c_write_at);
    assert!(rt.block_on(zr.lock.read().try_acquire(&zr.owner)).unwrap().is_none());
    c_writer.release();

    wait_children(&rt, &observer, &path, 0);
    assert!(c_reader.quit().success() && c_writer.quit().success());
    zr.close(&rt);
    zw.close(&rt);
}

/// Readers and writers of both libraries looping on one path, each holding a few ms at a time:
/// no hold of a writer overlaps any other hold.
#[test]
fn writers_hold_alone_under_a_mixed_load() {
    const ROUNDS: usize = 8;
    const HOLD: Duration = Duration::from_millis(5);
    let connect = shared_connect_string();
    let path = unique("mixed");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let curators = spawn_curators(
        &connect,
        &path,
        &[
            ("curator-writer-1", CuratorLock::Write),
            ("curator-writer-2", CuratorLock::Write),
            ("curator-reader", CuratorLock::Read),
        ],
    );
    let zks: Vec<(Zk, Mode)> =
        [("zk-writer-1", Mode::Write), ("zk-writer-2", Mode::Write), ("zk-reader-1", Mode::Read)]
            .into_iter()
            .chain([("zk-reader-2", Mode::Read)])
            .map(|(label, mode)| (Zk::new(&rt, &connect, &path, label), mode))
            .collect();
    // (who, is a writer, held from, held until), epoch µs on this machine's clock.
    let holds = Arc::new(Mutex::new(Vec::<(String, bool, u128, u128)>::new()));

    let zk_loops: Vec<_> = zks
        .iter()
        .map(|(z, mode)| {
            let (side, owner, mode, holds) = (z.side(*mode).clone(), z.owner.clone(), *mode, holds.clone());
            rt.spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = side.acquire(&owner).await.unwrap();
                    let from = epoch_micros();
                    tokio::time::sleep(HOLD).await;
                    let until = epoch_micros();
                    guard.release().await.unwrap();
                    holds.lock().unwrap().push((owner.label(), mode == Mode::Write, from, until));
                }
            })
        })
        .collect();
    thread::scope(|s| {
        for mut c in curators {
            let holds = holds.clone();
            s.spawn(move || {
                for _ in 0..ROUNDS {
                    let from = c.acquire(T);
                    thread::sleep(HOLD);
                    let until = c.release();
                    holds.lock().unwrap().push((c.name().to_string(), c.kind() == CuratorLock::Write, from, until));
                }
                assert!(c.quit().success());
            });
        }
    });
    for l in zk_loops {
        rt.block_on(l).unwrap();
    }

    let holds = holds.lock().unwrap().clone();
    assert_eq!(holds.len(), 7 * ROUNDS);
    for (i, a) in holds.iter().enumerate().filter(|(_, h)| h.1) {
        for (j, b) in holds.iter().enumerate() {
            assert!(i == j || a.3 <= b.2 || b.3 <= a.2, "a writer's hold overlaps another: {a:?} {b:?}");
        }
    }
    let shared = holds.iter().filter(|a| !a.1).any(|a| {
        holds.iter().any(|b| !b.1 && a.0.starts_with("zk") != b.0.starts_with("zk") && a.2 < b.3 && b.2 < a.3)
    });
    eprintln!("{} holds; a Curator reader and a zklock reader held together: {shared}", holds.len());
    wait_children(&rt, &observer, &path, 0);
    for (z, _) in zks {
        z.close(&rt);
    }
}

/// A zklock writer holds; then a Curator reader, a zklock writer, a Curator writer, a zklock
/// reader and a Curator reader queue. They get in in that order, the last two together, and a
/// reader behind a waiting writer waits for it whichever library made either.
#[test]
fn queue_order_is_kept_across_curator_and_zklock() {
    let connect = shared_connect_string();
    let path = unique("order");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        &[
            ("curator-reader-1", CuratorLock::Read),
            ("curator-writer", CuratorLock::Write),
            ("curator-reader-2", CuratorLock::Read),
        ],
    );
    let (mut c_reader2, mut c_writer, mut c_reader1) = (v.pop().unwrap(), v.pop().unwrap(), v.pop().unwrap());
    let zw1 = Zk::new(&rt, &connect, &path, "zk-writer-1");
    let zw2 = Zk::new(&rt, &connect, &path, "zk-writer-2");
    let zr = Zk::new(&rt, &connect, &path, "zk-reader");

    let (w1, w1_at) = granted(&rt, zw1.begin(&rt, Mode::Write));
    c_reader1.acquire_async();
    wait_children(&rt, &observer, &path, 2);
    let mut w2_pending = zw2.begin(&rt, Mode::Write);
    wait_children(&rt, &observer, &path, 3);
    c_writer.acquire_async();
    wait_children(&rt, &observer, &path, 4);
    let mut r_pending = zr.begin(&rt, Mode::Read);
    wait_children(&rt, &observer, &path, 5);
    c_reader2.acquire_async();
    wait_children(&rt, &observer, &path, 6);

    // One queue, as zklock and Curator each see it, with Curator's nodes in their modes.
    let queue = rt.block_on(zw1.lock.contenders()).unwrap();
    use Mode::{Read, Write};
    assert_eq!(modes(&queue), [Write, Read, Write, Write, Read, Read].map(Some).to_vec(), "{queue:?}");
    let curator_sessions = [c_reader1.session_id(), c_writer.session_id(), c_reader2.session_id()];
    let made_by_curator: Vec<bool> = queue.iter().map(|p| curator_sessions.contains(&p.session_id)).collect();
    assert_eq!(made_by_curator, [false, true, false, true, false, true]);
    for p in queue.iter().filter(|p| curator_sessions.contains(&p.session_id)) {
        assert!(p.identity.is_none() && p.node.starts_with("_c_"), "{p:?}");
        assert!(p.node.contains(if p.mode == Some(Read) { "-__READ__" } else { "-__WRIT__" }), "{p:?}");
    }
    assert_eq!(curator_queue(&mut c_writer), nodes(&queue));
    let stay_out = |rt: &Runtime, c: &mut CuratorContender, zks: &mut [&mut JoinHandle<(LockGuard, u128)>]| {
        assert_eq!(c.poll_acquired(STAYS_OUT), None, "{} jumped the queue", c.name());
        for z in zks.iter_mut() {
            assert!(stays_out(rt, z), "a zklock contender jumped the queue");
        }
    };

    // zklock's first writer leaves: Curator's first reader only (a writer is next).
    let w1_left = release(&rt, w1);
    let c_r1_at = c_reader1.wait_acquired(T);
    assert!(w1_at < w1_left && w1_left <= c_r1_at);
    stay_out(&rt, &mut c_writer, &mut [&mut w2_pending, &mut r_pending]);
    assert_eq!(c_reader2.poll_acquired(Duration::ZERO), None);

    // Curator's reader leaves: zklock's second writer.
    let c_r1_left = c_reader1.release();
    let (w2, w2_at) = granted(&rt, w2_pending);
    assert!(c_r1_left <= w2_at);
    stay_out(&rt, &mut c_writer, &mut [&mut r_pending]);

    // zklock's writer leaves: Curator's writer; the readers behind it wait.
    let w2_left = release(&rt, w2);
    let c_w_at = c_writer.wait_acquired(T);
    assert!(w2_left <= c_w_at);
    stay_out(&rt, &mut c_reader2, &mut [&mut r_pending]);

    // Curator's writer leaves: the zklock reader and Curator's second reader get in together.
    let c_w_left = c_writer.release();
    let (r, r_at) = granted(&rt, r_pending);
    let c_r2_at = c_reader2.wait_acquired(T);
    assert!(c_w_left <= r_at && c_w_left <= c_r2_at);
    let holders = rt.block_on(zr.lock.holders()).unwrap();
    assert_eq!(modes(&holders), vec![Some(Read), Some(Read)], "{holders:?}");
    assert_eq!(holders[1].session_id, c_reader2.session_id());
    let r_left = release(&rt, r);
    let c_r2_left = c_reader2.release();
    assert!(r_at < c_r2_left && c_r2_at < r_left, "the last two readers held together");

    wait_children(&rt, &observer, &path, 0);
    for c in [c_reader1, c_writer, c_reader2] {
        assert!(c.quit().success());
    }
    for z in [zw1, zw2, zr] {
        z.close(&rt);
    }
}
