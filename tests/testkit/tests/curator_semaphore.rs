//! Curator's InterProcessSemaphoreV2 and zklock's semaphore on one path: they count the same
//! leases (never more than max held at once), queue at the same internal mutex in arrival order,
//! and leave nothing behind. Every case runs against Debian 12's Curator 5.4 and the field
//! version, Curator 5.7.1 (`curator_5_4::` and `curator_5_7::`).

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::wait_until;
use zklock::Client;
use zklock_testkit::curator::epoch_micros;
use zklock_testkit::{shared_connect_string, CuratorContender, CuratorLock, CuratorVersion};
use zookeeper_client as zk;

both_versions!(curator_and_zklock_share_the_leases_in_arrival_order, each_counts_the_others_leases);

const T: Duration = Duration::from_secs(30);

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("/curator-sem-{}-{tag}-{}/semaphore", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn spawn_all(connect: &str, path: &str, names: &[&str], max: u32, version: CuratorVersion) -> Vec<CuratorContender> {
    thread::scope(|s| {
        let spawned: Vec<_> = names
            .iter()
            .map(|name| {
                s.spawn(move || {
                    CuratorContender::builder(connect, path, name)
                        .version(version)
                        .lock(CuratorLock::Semaphore(max))
                        .spawn()
                })
            })
            .collect();
        spawned.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Children of `path` (empty if it does not exist), seen by an independent client.
fn children(rt: &tokio::runtime::Runtime, zk: &zk::Client, path: &str) -> Vec<String> {
    rt.block_on(async {
        match zk.list_children(path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(err) => panic!("list_children {path}: {err}"),
        }
    })
}

/// The most intervals (acquired, released) that overlap at any instant.
fn most_at_once(holds: &[(String, u128, u128, u32)]) -> u32 {
    holds
        .iter()
        .map(|(_, start, _, _)| holds.iter().filter(|(_, s, e, _)| s <= start && start < e).map(|h| h.3).sum())
        .max()
        .unwrap_or(0)
}

/// Max 2, held whole by a zklock gate; then Curator and zklock acquirers arrive in turn (each
/// queued at the internal mutex before the next comes): Curator's take one lease each, zklock's
/// both, so each next one gets in only once the one before released. Once the gate goes they are
/// served in arrival order, never more than 2 leases held at once, and nothing is left.
fn curator_and_zklock_share_the_leases_in_arrival_order(version: CuratorVersion) {
    const MAX: u32 = 2;
    let connect = shared_connect_string();
    let path = unique("order");
    let (leases_path, mutex_path) = (format!("{path}/leases"), format!("{path}/locks"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut curators = spawn_all(&connect, &path, &["curator-0", "curator-2", "curator-4"], MAX, version);
    let clients: Vec<Client> = (0..3).map(|_| rt.block_on(Client::connect(&connect)).unwrap()).collect();
    let semaphores: Vec<zklock::Semaphore> = clients.iter().map(|c| c.semaphore(&path, MAX).unwrap()).collect();
    let gate = rt.block_on(semaphores[0].acquire(MAX)).unwrap();

    // (who, acquired, released, leases), epoch µs on this machine's clock.
    let holds = Arc::new(Mutex::new(Vec::<(String, u128, u128, u32)>::new()));
    let mut arrival = Vec::new();
    let mut curator_threads = Vec::new();
    let mut zk_tasks = Vec::new();
    for i in 0..5 {
        if i % 2 == 0 {
            let mut c = curators.remove(0);
            arrival.push(c.name().to_string());
            c.acquire_async();
            let holds = holds.clone();
            curator_threads.push(thread::spawn(move || {
                let acquired = c.wait_acquired(T);
                thread::sleep(Duration::from_millis(30));
                let released = c.release();
                holds.lock().unwrap().push((c.name().to_string(), acquired, released, 1));
                assert!(c.quit().success());
            }));
        } else {
            // Two of two: the next acquirer gets in only once this one released.
            let n = MAX;
            let (semaphore, name, holds) = (semaphores[1 + i / 3].clone(), format!("zk-{i}"), holds.clone());
            arrival.push(name.clone());
            zk_tasks.push(rt.spawn(async move {
                let leases = semaphore.acquire(n).await.unwrap();
                let acquired = epoch_micros();
                tokio::time::sleep(Duration::from_millis(30)).await;
                let released = epoch_micros();
                leases.release().await.unwrap();
                holds.lock().unwrap().push((name, acquired, released, n));
            }));
        }
        let queued = || children(&rt, &observer, &mutex_path).len() == i + 1;
        assert!(wait_until(T, queued), "{} never queued at the mutex", arrival[i]);
    }
    // One queue at the mutex, in arrival order: Curator's nodes carry its address, zklock's its
    // identity; the head has made its lease node, over max, and waits.
    let participants = rt.block_on(semaphores[0].participants()).unwrap();
    let zklock_nodes: Vec<bool> = participants.queue.iter().map(|p| p.identity.is_some()).collect();
    assert_eq!(zklock_nodes, [false, true, false, true, false], "{participants:?}");
    assert!(participants.queue.iter().all(|p| p.node.starts_with("_c_") && p.node.contains("-lock-")));
    assert_eq!((participants.leases.len(), participants.waiting_leases), (3, 1), "{participants:?}");
    let curator_lease = &participants.leases[2];
    assert!(curator_lease.node.starts_with("_c_") && curator_lease.node.contains("-lease-"), "{curator_lease:?}");
    let address = String::from_utf8_lossy(&curator_lease.data).parse::<std::net::IpAddr>();
    assert!(address.is_ok(), "Curator writes the client's address: {:?}", curator_lease.data);

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
    assert!(most_at_once(&holds) <= MAX, "never more than {MAX} leases at once: {holds:?}");
    let nothing_left =
        || children(&rt, &observer, &leases_path).is_empty() && children(&rt, &observer, &mutex_path).is_empty();
    assert!(wait_until(T, nothing_left), "nodes left behind");
    for c in clients {
        rt.block_on(c.close());
    }
}

/// Max 3: zklock holds 2 leases, so Curator gets one and its second waits; zklock's try fails
/// while Curator holds 2 of 3 and wants one; each side's release lets the other in.
fn each_counts_the_others_leases(version: CuratorVersion) {
    const MAX: u32 = 3;
    let connect = shared_connect_string();
    let path = unique("count");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let observer = rt.block_on(zk::Client::connect(&connect)).unwrap();
    let mut curator = spawn_all(&connect, &path, &["curator"], MAX, version).pop().unwrap();
    let client = rt.block_on(Client::connect(&connect)).unwrap();
    let semaphore = client.semaphore(&path, MAX).unwrap();

    let two = rt.block_on(semaphore.acquire(2)).unwrap();
    curator.acquire(T);
    let nodes = curator.nodes();
    assert_eq!(nodes.len(), 3, "Curator lists zklock's leases beside its own: {nodes:?}");
    curator.acquire_async();
    assert!(wait_until(T, || curator.nodes().len() == 4), "Curator's second lease node is made");
    assert_eq!(curator.poll_acquired(Duration::from_millis(300)), None, "4 leases > max 3: it waits");
    // zklock's release lets Curator's second lease in.
    rt.block_on(two.release()).unwrap();
    curator.wait_acquired(T);
    // Curator holds 2 of 3: zklock gets one, not two.
    assert!(rt.block_on(semaphore.try_acquire(2)).unwrap().is_none());
    let one = rt.block_on(semaphore.try_acquire(1)).unwrap().expect("one fits");
    let waiting = rt.spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire(1).await.unwrap() }
    });
    assert!(wait_until(T, || curator.nodes().len() == 4), "zklock's waiting lease node is made");
    curator.release();
    let next = rt.block_on(waiting).unwrap();
    curator.release();
    rt.block_on(one.release()).unwrap();
    rt.block_on(next.release()).unwrap();
    assert!(wait_until(T, || curator.nodes().is_empty()));
    assert!(children(&rt, &observer, &format!("{path}/locks")).is_empty());
    assert!(curator.quit().success());
    rt.block_on(client.close());
}
