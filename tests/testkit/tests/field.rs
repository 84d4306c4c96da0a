//! The field versions of our peers, from Debian 13 (trixie) beside Debian 12's: ZooKeeper 3.9.3
//! servers ([`ZkServer::V3_9`]) and Curator 5.7.1 contenders ([`CuratorVersion::V5_7`]), their
//! jars fetched by `scripts/field` (nothing installed). Each test also checks which jars the JVM
//! really opened (`/proc/<pid>/fd`): all from the trixie root, none of Debian 12's.

use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use zklock_testkit::{Cluster, CuratorContender, CuratorVersion, ZkServer};
use zookeeper_client as zk;

const T: Duration = Duration::from_secs(30);

/// The jars a JVM holds open (the class loader keeps every jar it read from open), as the kernel
/// resolved them (symlinks followed: `zookeeper.jar` shows as `zookeeper-3.9.3.jar`).
fn open_jars(pid: u32) -> Vec<PathBuf> {
    let mut jars: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/fd: {e}"))
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.extension().is_some_and(|x| x == "jar"))
        .collect();
    jars.sort();
    jars.dedup();
    jars
}

fn file_names(jars: &[PathBuf]) -> Vec<String> {
    jars.iter().map(|j| j.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

/// Every jar from the field root (`scripts/field root`), one of them named `must`.
fn assert_field_jars(what: &str, jars: &[PathBuf], must: &[&str]) {
    let root = PathBuf::from(
        String::from_utf8(
            std::process::Command::new("bash")
                .arg(zklock_testkit::repo_root().join("scripts/field"))
                .arg("root")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    // the JDK's own (lib/modules is not a jar; jrt-fs.jar may be) and the contender program's
    // (compiled into the tools cache) are not libraries
    let ours: Vec<&PathBuf> =
        jars.iter().filter(|j| !j.starts_with("/usr/lib/jvm") && !j.ends_with("curator-contender.jar")).collect();
    assert!(!ours.is_empty(), "{what}: no jar open");
    for j in &ours {
        assert!(
            j.starts_with(&root),
            "{what} opened {} (not from the field root {}): {jars:?}",
            j.display(),
            root.display()
        );
    }
    let names = file_names(jars);
    for m in must {
        assert!(names.iter().any(|n| n == m), "{what}: {m} not among the open jars {names:?}");
    }
}

/// `Zookeeper version: 3.9.3-...` → `3.9.3`.
fn srvr_version(srvr: &str) -> String {
    let v = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version: "))
        .unwrap_or_else(|| panic!("no version in {srvr:?}"));
    v.split('-').next().unwrap().trim().to_string()
}

#[test]
fn zk_3_9_standalone_reports_3_9_3_and_runs_on_trixie_jars_only() {
    assert_eq!(ZkServer::V3_9.full_version(), "3.9.3");
    let c = Cluster::builder().server_version(ZkServer::V3_9).start();
    eprintln!("3.9 standalone started in {:?}", c.startup_time());
    assert_eq!(c.server_version(), ZkServer::V3_9);
    let srvr = c.four_letter(0, "srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(srvr_version(&srvr), "3.9.3", "{srvr}");
    assert_field_jars(
        "the 3.9 server",
        &open_jars(c.pid(0).unwrap()),
        &["zookeeper-3.9.3.jar", "zookeeper-jute-3.9.3.jar"],
    );

    // and the default is still Debian 12's, from /usr/share/java
    let old = Cluster::builder().server_version(ZkServer::V3_8).start();
    let srvr = old.four_letter(0, "srvr").unwrap();
    assert_eq!(srvr_version(&srvr), ZkServer::V3_8.full_version(), "{srvr}");
    assert!(srvr_version(&srvr).starts_with("3.8."), "{srvr}");
    let jars = open_jars(old.pid(0).unwrap());
    assert!(jars.iter().any(|j| j.starts_with("/usr/share/java")), "3.8 runs on Debian 12's jars: {jars:?}");
}

#[test]
fn zk_3_9_ensemble_elects_a_leader_and_fails_over() {
    let c = Cluster::builder().server_version(ZkServer::V3_9).servers(3).start();
    eprintln!("3.9 ensemble started in {:?}", c.startup_time());
    let modes: Vec<String> = (0..3).map(|i| c.mode(i).unwrap_or_default()).collect();
    assert_eq!(modes.iter().filter(|m| *m == "leader").count(), 1, "{modes:?}");
    assert_eq!(modes.iter().filter(|m| *m == "follower").count(), 2, "{modes:?}");
    for i in 0..3 {
        assert_eq!(srvr_version(&c.four_letter(i, "srvr").unwrap()), "3.9.3");
        assert_field_jars(&format!("3.9 server {i}"), &open_jars(c.pid(i).unwrap()), &["zookeeper-3.9.3.jar"]);
    }
    let leader = c.leader().unwrap();
    c.kill(leader);
    let next = c.wait_for_leader(T);
    assert_ne!(next, leader);
    c.restart(leader);
    assert_eq!(c.mode(leader).as_deref(), Some("follower"));
    assert_eq!(srvr_version(&c.four_letter(leader, "srvr").unwrap()), "3.9.3", "restarted as 3.9 too");
}

/// Two Curator 5.7.1 contenders hand a mutex over, on a 3.8 and on a 3.9 server.
#[test]
fn curator_5_7_takes_and_releases_a_mutex_on_3_8_and_3_9() {
    assert_eq!(CuratorVersion::V5_7.full_version(), "5.7.1");
    for server in [ZkServer::V3_8, ZkServer::V3_9] {
        let c = Cluster::builder().server_version(server).start();
        let connect = c.connect_string();
        let path = format!("/field-{server}/lock");
        let (mut a, mut b) = thread::scope(|s| {
            let a = s.spawn(|| CuratorContender::spawn_version(&connect, &path, "a", CuratorVersion::V5_7));
            let b = s.spawn(|| CuratorContender::builder(&connect, &path, "b").version(CuratorVersion::V5_7).spawn());
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(a.version(), CuratorVersion::V5_7);
        let t_a = a.acquire(T);
        b.acquire_async();
        // b queues: its node is there, behind a's
        let nodes = wait_nodes(&mut a, 2);
        assert_eq!(nodes.len(), 2, "on {server}: {nodes:?}");
        assert_eq!(b.poll_acquired(Duration::from_millis(200)), None, "on {server}: b got the lock a holds");
        let released = a.release();
        let t_b = b.wait_acquired(T);
        assert!(t_a < released && released <= t_b, "on {server}: {t_a} {released} {t_b}");
        assert_eq!(b.nodes().len(), 1, "on {server}");
        b.release();
        assert!(b.nodes().is_empty(), "on {server}");
        for (name, cont) in [("a", &a), ("b", &b)] {
            assert_field_jars(
                &format!("Curator contender {name} (on {server})"),
                &open_jars(cont.pid()),
                &["curator-recipes-5.7.1.jar", "curator-framework-5.7.1.jar", "zookeeper-3.9.3.jar"],
            );
        }
    }
}

/// Polls the contender's `nodes` until there are `n` (a queued acquire's node appears a moment
/// after the command is sent); at most 30 s.
fn wait_nodes(c: &mut CuratorContender, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + T;
    loop {
        let nodes = c.nodes();
        if nodes.len() >= n || std::time::Instant::now() >= deadline {
            return nodes;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// `scripts/zk seed-seq` on 3.9.3 (SeqSnap compiled against 3.9's jars), and what 3.9.3 does past
/// the 32-bit limit: like 3.8, neither wraps to 0 nor refuses. One create at a time gets
/// 2147483647 again and again; creates in flight together get 2147483647 or negatives
/// (-2147483648, -2147483647, ...), the in-flight counter overflowing.
#[test]
fn seed_seq_near_the_limit_on_3_9_repeats_the_maximum_and_hands_out_negatives() {
    const PARENT: &str = "/locks/overflow";
    let c = Cluster::builder()
        .server_version(ZkServer::V3_9)
        .seed_lock_parent_near_sequence_limit(PARENT, 2_147_483_640)
        .start();
    assert_eq!(srvr_version(&c.four_letter(0, "srvr").unwrap()), "3.9.3");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (serial, again, same_name, pipelined, children) = rt.block_on(async {
        let client = zk::Client::connect(&c.server_address(0)).await.unwrap();
        assert!(client.list_children(PARENT).await.unwrap().is_empty());
        let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let mut serial = Vec::new();
        for i in 0..8 {
            let (_, seq) = client.create(&format!("{PARENT}/s{i}-lock-"), b"", &mode).await.unwrap();
            serial.push(seq.into_i64());
        }
        let mut again = Vec::new();
        for i in 0..3 {
            let (_, seq) = client.create(&format!("{PARENT}/a{i}-lock-"), b"", &mode).await.unwrap();
            again.push(seq.into_i64());
        }
        // a name already handed out: the repeated suffix makes it exist
        let same_name = client.create(&format!("{PARENT}/a0-lock-"), b"", &mode).await.map(|(_, s)| s.into_i64());
        // in flight together: batches of 8 requests, each sent before the first reply is read,
        // until one got a negative suffix (the first batch does, as a rule; at most 10)
        let mut pipelined = Vec::new();
        for batch in 0..10 {
            let paths: Vec<String> = (0..8).map(|i| format!("{PARENT}/p{batch}-{i}-lock-")).collect();
            let futures: Vec<_> = paths.iter().map(|p| client.create(p, b"", &mode)).collect();
            for f in futures {
                pipelined.push(f.await.unwrap().1.into_i64());
            }
            if pipelined.iter().any(|&s| s < 0) {
                break;
            }
        }
        let children = client.list_children(PARENT).await.unwrap().len();
        (serial, again, same_name, pipelined, children)
    });
    eprintln!(
        "3.9.3 past the limit: serial {serial:?}, again {again:?}, pipelined {pipelined:?}, same name {same_name:?}"
    );
    assert_eq!(serial, (2_147_483_640i64..=2_147_483_647).collect::<Vec<_>>(), "the seeded counter");
    assert_eq!(again, [2_147_483_647; 3], "one at a time past the limit: the maximum again");
    assert!(matches!(same_name, Err(zk::Error::NodeExists)), "{same_name:?}");
    assert!(
        pipelined.iter().all(|&s| s == i32::MAX as i64 || (i32::MIN as i64..0).contains(&s)),
        "in flight together: the maximum or negatives, never a wrap to 0 or beyond 32 bits: {pipelined:?}"
    );
    assert!(pipelined.iter().any(|&s| s < 0), "no negative in {} creates in flight together", pipelined.len());
    assert_eq!(children, 8 + 3 + pipelined.len(), "no create refused");
}
