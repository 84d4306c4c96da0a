//! zklock's read/write lock and Apache Curator's InterProcessReadWriteLock on one path, against a
//! real server: readers of both hold together, a writer of either excludes everyone, the queue
//! order holds across both, zklock sees Curator's nodes with their modes, and a downgrade of
//! either keeps the writers that were waiting out. Every case runs against Debian 12's Curator 5.4
//! and the field version, Curator 5.7.1 (`curator_5_4::`, `curator_5_7::`), except the one that
//! needs 5.5+'s downgrade (CURATOR-621), 5.7.1 only. Curator 5.4's own downgrade makes a fresh
//! read node, behind the writers already waiting, which then get in beside its read, Curator's
//! writers and zklock's alike: `curators_downgrade_with_writers_waiting` states both behaviours.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use zklock::{Client, LockGuard, Mode, Owner, Participant, ReadWriteLock};
use zklock_testkit::curator::epoch_micros;
use zklock_testkit::{shared_connect_string, CuratorContender, CuratorLock, CuratorVersion};
use zookeeper_client as zk;

/// One test per case and Curator version: `curator_5_4::CASE` and `curator_5_7::CASE` call
/// `CASE(version)`; the `only_5_7` cases are in `curator_5_7::` alone.
macro_rules! cases {
    (both: [$($both:ident),* $(,)?], only_5_7: [$($newer:ident),* $(,)?] $(,)?) => {
        mod curator_5_4 {
            $( #[test] fn $both() { super::$both(zklock_testkit::CuratorVersion::V5_4) } )*
        }
        mod curator_5_7 {
            $( #[test] fn $both() { super::$both(zklock_testkit::CuratorVersion::V5_7) } )*
            $( #[test] fn $newer() { super::$newer(zklock_testkit::CuratorVersion::V5_7) } )*
        }
    };
}

cases!(
    both: [
        curator_and_zklock_readers_hold_together,
        a_writer_of_either_excludes_readers_and_writers_of_both,
        writers_hold_alone_under_a_mixed_load,
        queue_order_is_kept_across_curator_and_zklock,
        zklocks_downgrade_keeps_a_waiting_curator_writer_out,
        a_curator_reader_after_zklocks_downgrade_shares_with_it,
        a_zklock_reader_after_curators_downgrade_shares_with_it,
        curators_downgrade_with_writers_waiting,
    ],
    only_5_7: [curators_downgrade_keeps_a_waiting_zklock_writer_out],
);

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

/// Spawns Curator contenders of `version` in parallel (each is a JVM start plus a session).
fn spawn_curators(
    connect: &str,
    path: &str,
    version: CuratorVersion,
    who: &[(&str, CuratorLock)],
) -> Vec<CuratorContender> {
    thread::scope(|s| {
        let handles: Vec<_> = who
            .iter()
            .map(|&(name, kind)| {
                s.spawn(move || CuratorContender::builder(connect, path, name).version(version).lock(kind).spawn())
            })
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

fn curator_and_zklock_readers_hold_together(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("share");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut curator = spawn_curators(&connect, &path, version, &[("curator-reader", CuratorLock::Read)]).pop().unwrap();
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

fn a_writer_of_either_excludes_readers_and_writers_of_both(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("exclude");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        version,
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
fn writers_hold_alone_under_a_mixed_load(version: CuratorVersion) {
    const ROUNDS: usize = 8;
    const HOLD: Duration = Duration::from_millis(5);
    let connect = shared_connect_string();
    let path = unique("mixed");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let curators = spawn_curators(
        &connect,
        &path,
        version,
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
fn queue_order_is_kept_across_curator_and_zklock(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("order");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        version,
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

/// The 10-digit sequence after a node name's `__READ__`/`__WRIT__` marker.
fn suffix(node: &str) -> &str {
    let at = node.rfind("__READ__").or_else(|| node.rfind("__WRIT__")).unwrap_or_else(|| panic!("no marker: {node}"));
    &node[at + "__READ__".len()..]
}

/// Curator 5.5+'s downgrade (5.7.1 here), step by step: the read side taken under the write hold
/// makes a plain read node carrying the write node's sequence, right behind the write node; once
/// the write side is released that read node has the write node's place, so the zklock writer
/// that was already waiting stays out (and a try gets nothing) until the read is released too.
fn curators_downgrade_keeps_a_waiting_zklock_writer_out(version: CuratorVersion) {
    assert_eq!(version, CuratorVersion::V5_7, "Curator 5.4 has no such downgrade (CURATOR-621)");
    let connect = shared_connect_string();
    let path = unique("c-downgrade");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut c = spawn_curators(&connect, &path, version, &[("curator-writer", CuratorLock::Write)]).pop().unwrap();
    let zw = Zk::new(&rt, &connect, &path, "zk-writer");

    let e = c.try_release_side(CuratorLock::Read).unwrap_err();
    assert!(e.contains("IllegalMonitorStateException"), "a side not held: {e}");
    let c_write_at = c.acquire(T);
    let write_node = curator_queue(&mut c).pop().unwrap();
    assert!(write_node.starts_with("_c_") && write_node.contains("-__WRIT__"), "{write_node}");
    let mut writing = zw.begin(&rt, Mode::Write);
    wait_children(&rt, &observer, &path, 2);

    // The read side under the write hold: granted at once, a node of its own in the write's place.
    let c_read_at = c.acquire_side(CuratorLock::Read, T);
    assert!(c_write_at <= c_read_at);
    let queue = rt.block_on(zw.lock.contenders()).unwrap();
    use Mode::{Read, Write};
    assert_eq!(modes(&queue), [Write, Read, Write].map(Some).to_vec(), "{queue:?}");
    assert_eq!(queue[0].node, write_node);
    let read_node = queue[1].node.clone();
    assert!(read_node.starts_with("_c_") && read_node.contains("-__READ__"), "{read_node}");
    assert_eq!(suffix(&read_node), suffix(&write_node), "Curator 5.5+'s downgrade: the write node's sequence");
    assert_eq!(queue[1].session_id, c.session_id());
    let holders = rt.block_on(zw.lock.holders()).unwrap();
    assert_eq!(nodes(&holders), [write_node.as_str(), read_node.as_str()], "the write holder and its read");
    assert!(stays_out(&rt, &mut writing), "zklock's writer got in beside Curator's write hold");

    // The write side released: Curator reads on, the zklock writer stays out.
    let c_write_left = c.release_side(CuratorLock::Write);
    assert_eq!(children(&rt, &observer, &path).len(), 2, "Curator's read node and zklock's writer");
    assert!(rt.block_on(zw.lock.write().try_acquire(&Owner::new(7))).unwrap().is_none(), "a try while Curator reads");
    assert!(stays_out(&rt, &mut writing), "zklock's writer got in beside Curator's downgraded read");
    assert!(!writing.is_finished());
    let holders = rt.block_on(zw.lock.holders()).unwrap();
    assert_eq!(nodes(&holders), [read_node.as_str()], "Curator's downgraded read holds, first: {holders:?}");
    assert_eq!(holders[0].mode, Some(Read));
    let queue = rt.block_on(zw.lock.contenders()).unwrap();
    assert_eq!(curator_queue(&mut c), nodes(&queue), "Curator and zklock see one queue");

    // The read released: now the writer.
    let c_read_left = c.release_side(CuratorLock::Read);
    let (w, w_at) = granted(&rt, writing);
    assert!(c_write_left <= c_read_left && c_read_left <= w_at, "the writer held only after Curator's read");
    release(&rt, w);

    wait_children(&rt, &observer, &path, 0);
    assert!(c.quit().success());
    zw.close(&rt);
}

/// After Curator's downgrade, with no writer waiting, a zklock reader gets in at once beside
/// Curator's read (5.7.1's read node in the write's place; 5.4's a fresh one, behind no writer
/// either), and a zklock writer then waits for both.
fn a_zklock_reader_after_curators_downgrade_shares_with_it(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("c-downgrade-share");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut c = spawn_curators(&connect, &path, version, &[("curator-writer", CuratorLock::Write)]).pop().unwrap();
    let (zr, zw) = (Zk::new(&rt, &connect, &path, "zk-reader"), Zk::new(&rt, &connect, &path, "zk-writer"));

    c.acquire(T);
    let write_node = curator_queue(&mut c).pop().unwrap();
    let c_downgraded = c.downgrade();
    let left = children(&rt, &observer, &path);
    assert_eq!(left.len(), 1, "Curator's read node alone: {left:?}");
    let read_node = &left[0];
    assert!(read_node.starts_with("_c_") && read_node.contains("-__READ__"), "{read_node}");
    eprintln!("Curator {version}: write node {write_node}, its downgrade's read node {read_node}");
    // The two forms of Curator's downgrade read node.
    match version {
        CuratorVersion::V5_4 => assert!(suffix(read_node) > suffix(&write_node), "5.4: a fresh sequence: {read_node}"),
        CuratorVersion::V5_7 => assert_eq!(suffix(read_node), suffix(&write_node), "5.7: the write's: {read_node}"),
    }

    let (r, r_at) = (
        rt.block_on(zr.lock.read().try_acquire(&zr.owner)).unwrap().expect("the reader shares with Curator's at once"),
        epoch_micros(),
    );
    assert!(c_downgraded <= r_at);
    let holders = rt.block_on(zr.lock.holders()).unwrap();
    assert_eq!(modes(&holders), [Some(Mode::Read), Some(Mode::Read)], "{holders:?}");
    assert_eq!((holders[0].node.as_str(), holders[0].session_id), (read_node.as_str(), c.session_id()));
    // A writer now waits for both readers.
    let mut writing = zw.begin(&rt, Mode::Write);
    wait_children(&rt, &observer, &path, 3);
    assert!(stays_out(&rt, &mut writing), "zklock's writer got in beside two readers");
    let r_left = release(&rt, r);
    assert!(stays_out(&rt, &mut writing), "zklock's writer got in beside Curator's downgraded read");
    let c_read_left = c.release_side(CuratorLock::Read);
    assert!(r_at < c_read_left, "the zklock reader held while Curator read");
    let (w, w_at) = granted(&rt, writing);
    assert!(r_left <= w_at && c_read_left <= w_at);
    release(&rt, w);

    wait_children(&rt, &observer, &path, 0);
    assert!(c.quit().success());
    zr.close(&rt);
    zw.close(&rt);
}

/// zklock's downgrade (its read node carries the write node's sequence) keeps a Curator writer
/// that was already waiting out until the read is released, for Curator 5.4 as for 5.7.1: both
/// order the nodes by their suffix.
fn zklocks_downgrade_keeps_a_waiting_curator_writer_out(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("z-downgrade");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut c = spawn_curators(&connect, &path, version, &[("curator-writer", CuratorLock::Write)]).pop().unwrap();
    let zw = Zk::new(&rt, &connect, &path, "zk-writer");

    let (write, write_at) = granted(&rt, zw.begin(&rt, Mode::Write));
    c.acquire_async();
    wait_children(&rt, &observer, &path, 2);
    let (read, read_at) = granted(&rt, zw.begin(&rt, Mode::Read));
    assert!(write_at <= read_at);
    let read_node = read.hold().node_path().rsplit('/').next().unwrap().to_string();
    assert!(read_node.ends_with(&format!("-__READ__{:010}", write.hold().sequence())), "{read_node}");
    assert_eq!(children(&rt, &observer, &path).len(), 3);
    assert_eq!(c.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside zklock's write hold");

    let write_left = release(&rt, write);
    assert!(zw.lock.read().is_held_by(&zw.owner) && !zw.lock.write().is_held_by(&zw.owner));
    assert_eq!(c.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside zklock's downgraded read");
    let queue = rt.block_on(zw.lock.contenders()).unwrap();
    assert_eq!(modes(&queue), [Some(Mode::Read), Some(Mode::Write)], "{queue:?}");
    assert_eq!((queue[0].node.as_str(), queue[1].session_id), (read_node.as_str(), c.session_id()));
    assert_eq!(curator_queue(&mut c), nodes(&queue), "Curator sees zklock's read node first");

    let read_left = release(&rt, read);
    let c_write_at = c.wait_acquired(T);
    assert!(write_left <= read_left && read_left <= c_write_at, "Curator's writer held only after zklock's read");
    c.release();

    wait_children(&rt, &observer, &path, 0);
    assert!(c.quit().success());
    zw.close(&rt);
}

/// After zklock's downgrade, with no writer waiting, a Curator reader (5.4 or 5.7.1) gets in
/// beside zklock's read, and a Curator writer then waits for both.
fn a_curator_reader_after_zklocks_downgrade_shares_with_it(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("z-downgrade-share");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        version,
        &[("curator-reader", CuratorLock::Read), ("curator-writer", CuratorLock::Write)],
    );
    let (mut c_writer, mut c_reader) = (v.pop().unwrap(), v.pop().unwrap());
    let zw = Zk::new(&rt, &connect, &path, "zk-writer");

    let (write, _) = granted(&rt, zw.begin(&rt, Mode::Write));
    let (read, read_at) = granted(&rt, zw.begin(&rt, Mode::Read));
    let write_left = release(&rt, write);
    let c_read_at = c_reader.acquire(T);
    assert!(write_left <= c_read_at);
    let holders = rt.block_on(zw.lock.holders()).unwrap();
    assert_eq!(modes(&holders), [Some(Mode::Read), Some(Mode::Read)], "{holders:?}");
    assert_eq!(holders[0].identity.as_ref().map(|i| i.owner.as_str()), Some("zk-writer"), "zklock's read first");
    assert_eq!(holders[1].session_id, c_reader.session_id());
    // A Curator writer now waits for both readers.
    c_writer.acquire_async();
    wait_children(&rt, &observer, &path, 3);
    assert_eq!(c_writer.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside two readers");
    let read_left = release(&rt, read);
    assert_eq!(c_writer.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside Curator's reader");
    let c_read_left = c_reader.release();
    assert!(read_at < c_read_left && c_read_at < read_left, "the two readers held together");
    let c_write_at = c_writer.wait_acquired(T);
    assert!(read_left <= c_write_at && c_read_left <= c_write_at);
    c_writer.release();

    wait_children(&rt, &observer, &path, 0);
    assert!(c_reader.quit().success() && c_writer.quit().success());
    zw.close(&rt);
}

/// A Curator write holder downgrades while a Curator writer and then a zklock writer wait.
///
/// Curator 5.7.1 (CURATOR-621 fixed): its read node takes the write node's place, both writers
/// stay out until the read is released, then hold in turn.
///
/// Curator 5.4: its read node is a fresh sequential one, behind both writers, indistinguishable
/// from a reader that came after them. So Curator's own writer gets in while the downgraded read
/// is still held (CURATOR-621, Curator 5.4's bug), and zklock's writer after it, also beside that
/// read, as Curator's rules say of a reader queued behind writers; zklock cannot tell it apart.
fn curators_downgrade_with_writers_waiting(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("c-downgrade-writers");
    let rt = runtime();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut v = spawn_curators(
        &connect,
        &path,
        version,
        &[("curator-downgrader", CuratorLock::Write), ("curator-writer", CuratorLock::Write)],
    );
    let (mut c_writer, mut c_down) = (v.pop().unwrap(), v.pop().unwrap());
    let zw = Zk::new(&rt, &connect, &path, "zk-writer");

    c_down.acquire(T);
    c_writer.acquire_async();
    wait_children(&rt, &observer, &path, 2);
    let mut z_writing = zw.begin(&rt, Mode::Write);
    wait_children(&rt, &observer, &path, 3);
    let downgraded = c_down.downgrade();
    let queue = rt.block_on(zw.lock.contenders()).unwrap();
    let read_node =
        queue.iter().find(|p| p.mode == Some(Mode::Read)).map(|p| p.node.clone()).expect("the downgrade's read node");
    let on_read_node = |rt: &Runtime| children(rt, &observer, &path).contains(&read_node);
    use Mode::{Read, Write};
    match version {
        CuratorVersion::V5_7 => {
            assert_eq!(modes(&queue), [Read, Write, Write].map(Some).to_vec(), "the read in the write's place");
            assert_eq!(c_writer.poll_acquired(STAYS_OUT), None, "Curator's writer got in beside the read");
            assert!(stays_out(&rt, &mut z_writing), "zklock's writer got in beside the read");
            assert!(rt.block_on(zw.lock.write().try_acquire(&Owner::new(7))).unwrap().is_none());
            let read_left = c_down.release_side(CuratorLock::Read);
            let c_write_at = c_writer.wait_acquired(T);
            assert!(read_left <= c_write_at);
            assert!(stays_out(&rt, &mut z_writing), "zklock's writer got in beside Curator's");
            let c_write_left = c_writer.release();
            let (w, w_at) = granted(&rt, z_writing);
            assert!(c_write_left <= w_at);
            release(&rt, w);
        }
        CuratorVersion::V5_4 => {
            assert_eq!(modes(&queue), [Write, Write, Read].map(Some).to_vec(), "5.4: a fresh read node, last");
            // Curator's own writer gets in while the downgraded read is held (CURATOR-621) ...
            let c_write_at = c_writer.wait_acquired(T);
            assert!(downgraded <= c_write_at && on_read_node(&rt), "Curator 5.4's writer beside its downgraded read");
            assert!(stays_out(&rt, &mut z_writing), "zklock's writer got in beside Curator's");
            let c_write_left = c_writer.release();
            // ... and zklock's writer after it, the same way.
            let (w, w_at) = granted(&rt, z_writing);
            assert!(c_write_left <= w_at && on_read_node(&rt), "zklock's writer beside Curator 5.4's downgraded read");
            let holders = rt.block_on(zw.lock.holders()).unwrap();
            assert_eq!(nodes(&holders), [w.hold().node_path().rsplit('/').next().unwrap()], "{holders:?}");
            let queue = rt.block_on(zw.lock.contenders()).unwrap();
            assert_eq!(nodes(&queue)[1], read_node, "zklock sees Curator's read as queued behind its writer");
            release(&rt, w);
            let read_left = c_down.release_side(CuratorLock::Read);
            assert!(c_write_at < read_left && w_at < read_left, "both writers held while Curator 5.4 read");
        }
    }

    wait_children(&rt, &observer, &path, 0);
    assert!(c_down.quit().success() && c_writer.quit().success());
    zw.close(&rt);
}
