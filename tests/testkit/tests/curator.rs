//! Tests of the Curator contender (Apache Curator's InterProcessMutex in a child JVM), and
//! Curator's mutex and zklock's on one path. Every test runs against Debian 12's Curator 5.4 and
//! the field version, Curator 5.7.1 (`curator_5_4::` and `curator_5_7::`).

#[macro_use]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::wait_until;
use zklock::{Client, Owner};
use zklock_testkit::curator::epoch_micros;
use zklock_testkit::{shared_connect_string, CuratorContender, CuratorVersion, Proxy};
use zookeeper_client as zk;

both_versions!(
    two_contenders_queue_fifo_with_mutual_exclusion_and_leave_no_nodes,
    release_without_holding_is_an_error_and_quit_removes_queued_nodes,
    killed_holder_loses_the_lock_when_its_session_expires,
    curator_recovers_its_node_after_a_cut_right_after_the_create,
    contender_dies_with_a_sigkilled_test_process,
    curator_and_zklock_mutexes_queue_fifo_together,
);

const T: Duration = Duration::from_secs(30);

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/curator-test-{}-{tag}-{}/lock", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Spawns contenders in parallel (each is a JVM start plus a session).
fn spawn_all(connect: &str, path: &str, names: &[&str], version: CuratorVersion) -> Vec<CuratorContender> {
    let t = Instant::now();
    let v: Vec<CuratorContender> = thread::scope(|s| {
        let hs: Vec<_> =
            names.iter().map(|n| s.spawn(move || CuratorContender::spawn_version(connect, path, n, version))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let each: Vec<_> = v.iter().map(|c| c.startup_time()).collect();
    eprintln!("{} Curator {version} contenders ready in {:?} (each: {each:?})", v.len(), t.elapsed());
    v
}

/// Children of `path` seen by an independent client (zookeeper-client crate); None if no node.
fn children(connect: &str, path: &str) -> Option<Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = zk::Client::connect(connect).await.unwrap();
        match client.list_children(path).await {
            Ok(c) => Some(c),
            Err(zk::Error::NoNode) => None,
            Err(e) => panic!("list_children {path}: {e}"),
        }
    })
}

fn two_contenders_queue_fifo_with_mutual_exclusion_and_leave_no_nodes(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("fifo");
    let mut v = spawn_all(&connect, &path, &["a", "b"], version);
    assert!(v.iter().all(|c| c.version() == version));
    let mut b = v.pop().unwrap();
    let mut a = v.pop().unwrap();
    assert_ne!(a.session_id(), b.session_id());

    // a holds (reentrantly: still one node), b queues behind it
    let mut held_until = a.acquire(T);
    a.acquire(T);
    assert_eq!(a.nodes().len(), 1);
    b.acquire_async();
    assert!(wait_until(T, || a.nodes().len() == 2), "b never queued");
    assert_eq!(b.poll_acquired(Duration::from_millis(300)), None, "b got the lock while a holds it");
    a.release(); // one reentrant level: a still holds
    assert_eq!(b.poll_acquired(Duration::from_millis(200)), None, "b got the lock while a holds it");

    // ping-pong: whoever releases re-queues at once and must wait for the other (FIFO)
    let (mut holder, mut waiter) = (a, b);
    for round in 0..4 {
        let queue = holder.nodes();
        assert_eq!(queue.len(), 2, "round {round}: {queue:?}");
        assert!(queue.iter().all(|n| n.starts_with(&format!("{path}/_c_")) && n.contains("-lock-")), "{queue:?}");
        let asked = zklock_testkit::curator::epoch_micros();
        let released = holder.release();
        assert!(released >= held_until && released >= asked, "the critical section ends when release() starts");
        let got = waiter.wait_acquired(T);
        assert!(
            released <= got,
            "round {round}: {} acquired at {got} before {} released at {released}",
            waiter.name(),
            holder.name()
        );
        holder.acquire_async();
        assert!(wait_until(T, || holder.nodes().len() == 2));
        let queue2 = holder.nodes();
        assert_eq!(queue2[0], queue[1], "round {round}: the waiter's node heads the queue");
        assert_eq!(holder.poll_acquired(Duration::from_millis(150)), None, "round {round}: queue jumped");
        held_until = got;
        std::mem::swap(&mut holder, &mut waiter);
        eprintln!("round {round}: {} -> {} handoff {}us after release", waiter.name(), holder.name(), got - released);
    }
    holder.release();
    waiter.wait_acquired(T);
    waiter.release();
    assert!(holder.nodes().is_empty());
    assert_eq!(children(&connect, &path).unwrap_or_default(), Vec::<String>::new(), "lock nodes left behind");
    assert!(holder.quit().success());
    assert!(waiter.quit().success());
}

fn release_without_holding_is_an_error_and_quit_removes_queued_nodes(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("errors");
    let mut v = spawn_all(&connect, &path, &["x", "y"], version);
    let mut y = v.pop().unwrap();
    let mut x = v.pop().unwrap();
    let e = x.try_release().unwrap_err();
    assert!(e.contains("IllegalMonitorStateException"), "{e}");
    x.acquire(T);
    y.acquire_async();
    assert!(wait_until(T, || x.nodes().len() == 2));
    // y quits while queued: its session closes, its node vanishes at once
    let t = Instant::now();
    assert!(y.quit().success());
    eprintln!("quit took {:?}", t.elapsed());
    assert_eq!(x.nodes().len(), 1);
    x.release();
    drop(x); // closes stdin: the session ends
    assert_eq!(children(&connect, &path).unwrap_or_default(), Vec::<String>::new());
}

/// A SIGKILLed holder's node stays until the server expires its session, then the waiter gets
/// the lock. (3 s: at 1.5 s, once on a busy machine, the waiter held 35 ms after the kill, the
/// holder's session presumably already gone; that now fails before the kill, saying so.)
fn killed_holder_loses_the_lock_when_its_session_expires(version: CuratorVersion) {
    const SESSION: Duration = Duration::from_secs(3);
    let connect = shared_connect_string();
    let path = unique("killed");
    let mut a = CuratorContender::builder(&connect, &path, "a").version(version).session_timeout(SESSION).spawn();
    let mut b = CuratorContender::spawn_version(&connect, &path, "b", version);
    a.acquire(T);
    b.acquire_async();
    assert!(wait_until(T, || b.nodes().len() == 2));
    assert_eq!(b.poll_acquired(Duration::ZERO), None, "a's session ended before the kill");
    let t = Instant::now();
    a.kill();
    assert!(!a.is_running());
    b.wait_acquired(T);
    eprintln!("b acquired {:?} after a was SIGKILLed (a's session timeout {SESSION:?})", t.elapsed());
    assert!(t.elapsed() >= SESSION * 2 / 3, "{:?}", t.elapsed());
    b.release();
}

/// Curator through the proxy, cut right after its lock-node create reached the server: Curator's
/// protected mode finds its node after reconnecting, so it still acquires with a single node.
fn curator_recovers_its_node_after_a_cut_right_after_the_create(version: CuratorVersion) {
    let connect = shared_connect_string();
    let server = connect.split(',').next().unwrap().trim().to_string();
    let p = Proxy::start(&server);
    let path = unique("cutcreate");
    let mut c = CuratorContender::spawn_version(&p.address(), &path, "c", version);
    p.cut_on_next_request_containing(b"-lock-");
    let t = Instant::now();
    c.acquire(T);
    assert!(p.wait_request_cut(T));
    eprintln!("acquired through a cut create in {:?}", t.elapsed());
    assert_eq!(p.request_cuts(), 1);
    let nodes = c.nodes();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    c.release();
    assert!(c.nodes().is_empty());
}

/// Child half of `contender_dies_with_a_sigkilled_test_process` (the Curator version in
/// `ZKLOCK_TESTKIT_CURATOR_HELPER_VERSION`).
#[test]
fn helper_hold_contender_until_killed() {
    let Ok(connect) = std::env::var("ZKLOCK_TESTKIT_CURATOR_HELPER") else { return };
    let version = match std::env::var("ZKLOCK_TESTKIT_CURATOR_HELPER_VERSION").as_deref() {
        Ok("5.7") => CuratorVersion::V5_7,
        _ => CuratorVersion::V5_4,
    };
    let path = unique("orphan");
    let mut c = CuratorContender::spawn_version(&connect, &path, "orphan", version);
    c.acquire(T);
    println!("HOLDING {} {}", c.pid(), path);
    std::io::stdout().flush().unwrap();
    thread::sleep(Duration::from_secs(120));
}

fn contender_dies_with_a_sigkilled_test_process(version: CuratorVersion) {
    let connect = shared_connect_string();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_hold_contender_until_killed", "--nocapture", "--test-threads=1"])
        .env("ZKLOCK_TESTKIT_CURATOR_HELPER", &connect)
        .env("ZKLOCK_TESTKIT_CURATOR_HELPER_VERSION", version.as_str())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("HOLDING ") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "helper exited early");
    }
    let mut it = line[line.find("HOLDING ").unwrap()..].split_whitespace().skip(1);
    let pid: u32 = it.next().unwrap().parse().unwrap();
    let path = it.next().unwrap().to_string();
    assert_eq!(children(&connect, &path).unwrap().len(), 1);
    let t = Instant::now();
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(false)
    };
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)), "the contender JVM outlived its test process");
    let gone = t.elapsed();
    // it closed its session on the way out: no waiting for an expiry
    assert!(wait_until(Duration::from_secs(2), || children(&connect, &path).unwrap_or_default().is_empty()));
    eprintln!("contender JVM gone {gone:?} after SIGKILL of its test process; lock node gone {:?}", t.elapsed());
}

/// Curator's InterProcessMutex and zklock's mutex on one path: a zklock holder, then Curator,
/// zklock, Curator, zklock queued in turn. They hold one at a time in that order (FIFO across
/// both), zklock sees one queue of Curator-named nodes, and nothing is left behind.
fn curator_and_zklock_mutexes_queue_fifo_together(version: CuratorVersion) {
    let connect = shared_connect_string();
    let path = unique("mixed");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut curators = spawn_all(&connect, &path, &["curator-0", "curator-2"], version);
    let zk_clients: Vec<Client> = (0..3).map(|_| rt.block_on(Client::connect(&connect)).unwrap()).collect();
    let locks: Vec<zklock::Lock> = zk_clients.iter().map(|c| c.lock(&path).unwrap()).collect();

    let gate = rt.block_on(locks[0].acquire(&Owner::with_label(1, "zk-gate"))).unwrap();
    // (who, acquired, released), epoch µs on this machine's clock.
    let holds = Arc::new(Mutex::new(Vec::<(String, u128, u128)>::new()));
    let mut arrival = Vec::new();
    let mut curator_threads = Vec::new();
    let mut zk_tasks = Vec::new();
    for i in 0..4 {
        if i % 2 == 0 {
            let mut c = curators.remove(0);
            arrival.push(c.name().to_string());
            c.acquire_async();
            let holds = holds.clone();
            curator_threads.push(thread::spawn(move || {
                let acquired = c.wait_acquired(T);
                thread::sleep(Duration::from_millis(20));
                let released = c.release();
                holds.lock().unwrap().push((c.name().to_string(), acquired, released));
                assert!(c.quit().success());
            }));
        } else {
            let (lock, label, holds) = (locks[1 + i / 2].clone(), format!("zk-{i}"), holds.clone());
            arrival.push(label.clone());
            zk_tasks.push(rt.spawn(async move {
                let guard = lock.acquire(&Owner::with_label(10 + i as u64, label.clone())).await.unwrap();
                let acquired = epoch_micros();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let released = epoch_micros();
                guard.release().await.unwrap();
                holds.lock().unwrap().push((label, acquired, released));
            }));
        }
        assert!(wait_until(T, || children(&connect, &path).unwrap_or_default().len() == i + 2), "{i} never queued");
    }
    // One queue, in arrival order: zklock's nodes take Curator's names.
    let queue = rt.block_on(locks[0].contenders()).unwrap();
    assert!(queue.iter().all(|p| p.node.starts_with("_c_") && p.node.contains("-lock-")), "{queue:?}");
    let labels: Vec<Option<&str>> = queue.iter().map(|p| p.identity.as_ref().map(|i| i.owner.as_str())).collect();
    assert_eq!(labels, [Some("zk-gate"), None, Some("zk-1"), None, Some("zk-3")], "{queue:?}");
    assert!(rt.block_on(locks[2].try_acquire(&Owner::new(99))).unwrap().is_none(), "a try while zklock holds");

    let gate_left = epoch_micros();
    rt.block_on(gate.release()).unwrap();
    for t in curator_threads {
        t.join().unwrap();
    }
    for t in zk_tasks {
        rt.block_on(t).unwrap();
    }
    let mut holds = holds.lock().unwrap().clone();
    holds.sort_by_key(|h| h.1);
    let order: Vec<&str> = holds.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(order, arrival, "FIFO across Curator {version} and zklock");
    assert!(gate_left <= holds[0].1, "the first waiter held after the gate left");
    for pair in holds.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "mutual exclusion: {pair:?}");
    }
    assert!(wait_until(T, || children(&connect, &path).unwrap_or_default().is_empty()), "lock nodes left behind");
    for c in zk_clients {
        rt.block_on(c.close());
    }
}
