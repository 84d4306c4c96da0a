//! Tests of the testkit itself, against real servers.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zklock_testkit::{external, shared_connect_string, Cluster};

/// A blocking ZooKeeper client over the `zookeeper-client` crate, enough to create and list znodes.
struct RawClient {
    runtime: tokio::runtime::Runtime,
    zk: zookeeper_client::Client,
}

impl RawClient {
    fn connect(addr: &str) -> RawClient {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let zk = runtime.block_on(zookeeper_client::Client::connect(addr)).unwrap();
        RawClient { runtime, zk }
    }

    /// The created path, or the ZooKeeper error code (-110 for an existing node).
    fn create_ephemeral_sequential(&mut self, prefix: &str) -> Result<String, i32> {
        let mode = zookeeper_client::CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
        match self.runtime.block_on(self.zk.create(prefix, b"", &mode)) {
            Ok((_, sequence)) => Ok(format!("{prefix}{sequence}")),
            Err(zookeeper_client::Error::NodeExists) => Err(ZNODEEXISTS),
            Err(err) => panic!("create {prefix}: {err}"),
        }
    }

    fn exists(&mut self, path: &str) -> bool {
        self.runtime.block_on(self.zk.check_stat(path)).unwrap().is_some()
    }

    fn children(&mut self, path: &str) -> Vec<String> {
        let mut children = self.runtime.block_on(self.zk.list_children(path)).unwrap();
        children.sort();
        children
    }
}

const ZNODEEXISTS: i32 = -110;

fn proc_alive(pid: u32) -> bool {
    // a zombie still has a /proc entry; look at its state
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn standalone_starts_answers_srvr_and_drop_cleans_up() {
    let c = Cluster::standalone();
    eprintln!("standalone started in {:?} at {}", c.startup_time(), c.connect_string());
    assert_eq!(c.len(), 1);
    let srvr = c.four_letter(0, "srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(c.leader(), Some(0));
    assert_eq!(c.connect_string(), c.server_address(0));
    let mut raw = RawClient::connect(&c.server_address(0));
    assert!(raw.exists("/zookeeper"));

    let pid = c.pid(0).unwrap();
    let dir = c.server_dir(0);
    assert!(dir.join("zoo.cfg").exists());
    drop(c);
    assert!(!proc_alive(pid), "server {pid} outlived its Cluster");
    assert!(!dir.exists(), "{} not removed", dir.display());
}

#[test]
fn pause_and_resume() {
    let c = Cluster::standalone();
    c.pause(0);
    assert!(c.is_paused(0));
    let t = Instant::now();
    let r = zklock_testkit::four_letter_port(c.client_port(0), "srvr", Duration::from_secs(1));
    assert!(r.as_ref().map(|s| !s.contains("Mode:")).unwrap_or(true), "paused server answered: {r:?}");
    assert!(t.elapsed() >= Duration::from_millis(900));
    assert_eq!(c.leader(), None, "paused servers are not asked");
    c.resume(0);
    assert!(c.four_letter(0, "srvr").unwrap().contains("Mode: standalone"));
    c.stop(0);
    assert!(!c.is_running(0));
    c.restart(0);
    assert!(c.four_letter(0, "srvr").unwrap().contains("Mode: standalone"));
}

#[test]
fn shared_server_is_shared() {
    let a = shared_connect_string();
    let b = shared_connect_string();
    assert_eq!(a, b);
    let first = a.split(',').next().unwrap().to_string();
    let mut raw = RawClient::connect(&first);
    assert!(raw.exists("/zookeeper"));
}

#[test]
fn ensemble_elects_fails_over_rejoins_and_pauses() {
    let c = Cluster::ensemble(3);
    eprintln!("ensemble started in {:?} at {}", c.startup_time(), c.connect_string());
    assert_eq!(c.connect_string().split(',').count(), 3);
    let leader = c.leader().expect("a leader");
    let modes: Vec<_> = (0..3).map(|i| c.mode(i)).collect();
    assert_eq!(modes.iter().filter(|m| m.as_deref() == Some("follower")).count(), 2, "{modes:?}");

    // kill the leader: another server takes over
    let t = Instant::now();
    c.kill(leader);
    assert!(!c.is_running(leader));
    let new_leader = c.wait_for_leader(Duration::from_secs(30));
    eprintln!("new leader {new_leader} (was {leader}) after {:?}", t.elapsed());
    assert_ne!(new_leader, leader);

    // restart: it rejoins as a follower
    let t = Instant::now();
    c.restart(leader);
    eprintln!("old leader rejoined after {:?}", t.elapsed());
    assert_eq!(c.mode(leader).as_deref(), Some("follower"));
    c.wait_serving(Duration::from_secs(30));

    // pause a follower: it stops answering; resume: it answers again
    let follower = (0..3).find(|&i| i != new_leader).unwrap();
    c.pause(follower);
    let r = zklock_testkit::four_letter_port(c.client_port(follower), "srvr", Duration::from_millis(300));
    assert!(r.as_ref().map(|s| !s.contains("Mode:")).unwrap_or(true), "paused server answered: {r:?}");
    c.resume(follower);
    assert!(wait_until(Duration::from_secs(20), || c.mode(follower).is_some()));
    c.wait_serving(Duration::from_secs(30));
    assert!(c.four_letter(new_leader, "mntr").unwrap().contains("zk_server_state"));

    // lose the quorum entirely, then bring everything back
    c.kill_all();
    assert_eq!(c.leader(), None);
    let t = Instant::now();
    for i in 0..3 {
        c.restart_without_waiting(i);
    }
    c.wait_serving(Duration::from_secs(30));
    eprintln!("ensemble revived after {:?}", t.elapsed());
    assert!(c.leader().is_some());
}

/// Sequential creates in one session: 2147483640 ..= 2147483647, then the counter is stuck.
#[test]
fn seeded_lock_parent_hands_out_sequence_numbers_near_the_limit() {
    let c = Cluster::builder().seed_lock_parent_near_sequence_limit("/locks/overflow", 2_147_483_640).start();
    let mut raw = RawClient::connect(&c.server_address(0));
    assert!(raw.exists("/locks"));
    assert!(raw.exists("/locks/overflow"));
    assert!(raw.children("/locks/overflow").is_empty());
    let mut got = Vec::new();
    for _ in 0..8 {
        got.push(raw.create_ephemeral_sequential("/locks/overflow/lock-").unwrap());
    }
    let want: Vec<String> = (2_147_483_640i64..=2_147_483_647).map(|n| format!("/locks/overflow/lock-{n}")).collect();
    assert_eq!(got, want);
    // Past the limit, one request at a time: the server computes 2147483647 again (the
    // overflowed counter is never persisted because it is not greater than the old one).
    let next = raw.create_ephemeral_sequential("/locks/overflow/lock-");
    eprintln!("create past the limit: {next:?}");
    assert_eq!(next, Err(ZNODEEXISTS));
    assert_eq!(raw.children("/locks/overflow").len(), 8);
}

#[test]
fn seeded_ensemble_agrees_on_the_sequence() {
    let c = Cluster::builder().servers(3).seed_lock_parent_near_sequence_limit("/a/b/c", 2_147_483_645).start();
    let mut names = Vec::new();
    for i in 0..3 {
        let mut raw = RawClient::connect(&c.server_address(i));
        names.push(raw.create_ephemeral_sequential("/a/b/c/n-").unwrap());
    }
    assert_eq!(names, ["/a/b/c/n-2147483645", "/a/b/c/n-2147483646", "/a/b/c/n-2147483647"]);
}

/// Child half of `servers_die_with_a_sigkilled_test_process`.
#[test]
fn helper_hold_server_until_killed() {
    if std::env::var_os("ZKLOCK_TESTKIT_HELPER").is_none() {
        return;
    }
    let c = Cluster::standalone();
    let shared = shared_connect_string();
    let mut line = format!("HOLDING {shared}");
    for i in 0..c.len() {
        line += &format!(" {}={}", c.pid(i).unwrap(), c.server_dir(i).display());
    }
    println!("{line}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn servers_die_with_a_sigkilled_test_process() {
    if external() {
        zklock_testkit::skip("ZK_CONNECT names an external ensemble, whose servers the test may not kill (servers_die_with_a_sigkilled_test_process)");
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_hold_server_until_killed", "--nocapture", "--test-threads=1"])
        .env("ZKLOCK_TESTKIT_HELPER", "1")
        .env_remove("ZK_CONNECT")
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
    let line = line[line.find("HOLDING ").unwrap()..].to_string();
    let mut held: Vec<(u32, String)> = line
        .split_whitespace()
        .skip(2)
        .map(|kv| {
            let (p, d) = kv.split_once('=').unwrap();
            (p.parse().unwrap(), d.to_string())
        })
        .collect();
    // the shared server too: find its JVM by its client port
    let shared_port: u16 = line.split_whitespace().nth(1).unwrap().rsplit(':').next().unwrap().parse().unwrap();
    let shared_pid = jvm_listening_on(shared_port).expect("shared server pid");
    held.push((shared_pid, String::new()));
    for (pid, _) in &held {
        assert!(proc_alive(*pid));
    }
    let t = Instant::now();
    child.kill().unwrap(); // SIGKILL: no destructor, no atexit
    child.wait().unwrap();
    for (pid, dir) in &held {
        assert!(
            wait_until(Duration::from_secs(10), || !proc_alive(*pid)),
            "JVM {pid} outlived the killed test process"
        );
        if !dir.is_empty() {
            assert!(wait_until(Duration::from_secs(10), || !Path::new(dir).exists()), "{dir} not removed");
        }
    }
    eprintln!("both servers gone {:?} after SIGKILL of the test process", t.elapsed());
}

/// pid of the process listening on 127.0.0.1:port (via /proc/net/tcp and /proc/*/fd).
fn jvm_listening_on(port: u16) -> Option<u32> {
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = tcp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
        (local_port == port && f.get(3) == Some(&"0A")).then(|| f[9].to_string())
    })?;
    let target = format!("socket:[{inode}]");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).map(|l| l.to_string_lossy() == target).unwrap_or(false) {
                return Some(pid);
            }
        }
    }
    None
}
