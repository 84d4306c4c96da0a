//! Tests of the Curator contender (Apache Curator 5.4's InterProcessMutex in a child JVM).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use zklock_testkit::{shared_connect_string, CuratorContender, Proxy};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(30);

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/curator-test-{}-{tag}-{}/lock", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Spawns contenders in parallel (each is a JVM start plus a session).
fn spawn_all(connect: &str, path: &str, names: &[&str]) -> Vec<CuratorContender> {
    let t = Instant::now();
    let v: Vec<CuratorContender> = thread::scope(|s| {
        let hs: Vec<_> = names.iter().map(|n| s.spawn(move || CuratorContender::spawn(connect, path, n))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let each: Vec<_> = v.iter().map(|c| c.startup_time()).collect();
    eprintln!("{} contenders ready in {:?} (each: {each:?})", v.len(), t.elapsed());
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

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    f()
}

#[test]
fn two_contenders_queue_fifo_with_mutual_exclusion_and_leave_no_nodes() {
    let connect = shared_connect_string();
    let path = unique("fifo");
    let mut v = spawn_all(&connect, &path, &["a", "b"]);
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

#[test]
fn release_without_holding_is_an_error_and_quit_removes_queued_nodes() {
    let connect = shared_connect_string();
    let path = unique("errors");
    let mut v = spawn_all(&connect, &path, &["x", "y"]);
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

#[test]
fn killed_holder_loses_the_lock_when_its_session_expires() {
    let connect = shared_connect_string();
    let path = unique("killed");
    let mut a = CuratorContender::spawn_with_session_timeout(&connect, &path, "a", Duration::from_millis(1500));
    let mut b = CuratorContender::spawn(&connect, &path, "b");
    a.acquire(T);
    b.acquire_async();
    assert!(wait_until(T, || b.nodes().len() == 2));
    let t = Instant::now();
    a.kill();
    assert!(!a.is_running());
    b.wait_acquired(T);
    eprintln!("b acquired {:?} after a was SIGKILLed (a's session timeout 1.5s)", t.elapsed());
    assert!(t.elapsed() >= Duration::from_millis(1000), "{:?}", t.elapsed());
    b.release();
}

/// Curator through the proxy, cut right after its lock-node create reached the server: Curator's
/// protected mode finds its node after reconnecting, so it still acquires with a single node.
#[test]
fn curator_recovers_its_node_after_a_cut_right_after_the_create() {
    let connect = shared_connect_string();
    let server = connect.split(',').next().unwrap().trim().to_string();
    let p = Proxy::start(&server);
    let path = unique("cutcreate");
    let mut c = CuratorContender::spawn(&p.address(), &path, "c");
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

/// Child half of `contender_dies_with_a_sigkilled_test_process`.
#[test]
fn helper_hold_contender_until_killed() {
    let Ok(connect) = std::env::var("ZKLOCK_TESTKIT_CURATOR_HELPER") else { return };
    let path = unique("orphan");
    let mut c = CuratorContender::spawn(&connect, &path, "orphan");
    c.acquire(T);
    println!("HOLDING {} {}", c.pid(), path);
    std::io::stdout().flush().unwrap();
    thread::sleep(Duration::from_secs(120));
}

#[test]
fn contender_dies_with_a_sigkilled_test_process() {
    let connect = shared_connect_string();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_hold_contender_until_killed", "--nocapture", "--test-threads=1"])
        .env("ZKLOCK_TESTKIT_CURATOR_HELPER", &connect)
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
