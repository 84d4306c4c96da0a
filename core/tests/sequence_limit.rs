//! ZooKeeper's 32-bit sequence limit, on a real server started from a snapshot whose lock parent
//! sits just below it. Past the limit Debian's 3.8.0 repeats 2147483647 (and hands out negatives
//! to creates in flight together), so the suffix stops telling who came first; zklock then
//! orders by creation zxid, and FIFO order and mutual exclusion still hold.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use parking_lot::Mutex;
use zklock::{Client, Owner};
use zklock_testkit::Cluster;

const PATH: &str = "/locks/overflow";
const START: i32 = 2_147_483_640;

struct Run {
    order: Arc<Mutex<Vec<usize>>>,
    inside: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Run {
    fn new() -> Run {
        Run { order: Arc::default(), inside: Arc::default(), tasks: Vec::new() }
    }

    fn contend(&mut self, client: &Client, i: usize) {
        let lock = client.lock(PATH).unwrap();
        let (order, inside) = (self.order.clone(), self.inside.clone());
        self.tasks.push(tokio::spawn(async move {
            let guard = lock.acquire(&Owner::with_label(i as u64, format!("c{i}"))).await.unwrap();
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
            order.lock().push(i);
            tokio::task::yield_now().await;
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
    }

    async fn finish(self) -> Vec<usize> {
        for task in self.tasks {
            task.await.unwrap();
        }
        let order = self.order.lock().clone();
        order
    }
}

fn labels(contenders: &[zklock::Participant]) -> Vec<String> {
    contenders.iter().map(|p| p.identity.as_ref().unwrap().owner.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_and_mutual_exclusion_across_the_sequence_limit() {
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, START).start();
    let connect = cluster.connect_string();
    let observer = observer_at(&connect).await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client_at(&connect).await);
    }

    // Phase 1: twenty contenders queue one after another across the limit.
    let gate = clients[0].lock(PATH).unwrap().acquire(&Owner::with_label(999, "gate")).await.unwrap();
    assert_eq!(gate.hold().sequence(), START as i64, "the snapshot put the counter just below the limit");
    let mut run = Run::new();
    for i in 0..20 {
        run.contend(&clients[i % 4], i);
        wait_children(&observer, PATH, i + 2).await;
    }
    let queue = clients[1].lock(PATH).unwrap().contenders().await.unwrap();
    let sequences: Vec<i64> = queue.iter().map(|p| p.sequence.unwrap()).collect();
    let at_max = sequences.iter().filter(|&&s| s == i32::MAX as i64).count();
    assert!(
        at_max > 1 || sequences.iter().any(|&s| s < 0),
        "the run must cross the limit (repeated maximum or negatives): {sequences:?}"
    );
    let expected: Vec<String> = std::iter::once("gate".to_owned()).chain((0..20).map(|i| format!("c{i}"))).collect();
    assert_eq!(labels(&queue), expected, "queue order is arrival order, by creation zxid");
    gate.release().await.unwrap();
    assert_eq!(run.finish().await, (0..20).collect::<Vec<_>>(), "held in arrival order");
    wait_children(&observer, PATH, 0).await;

    // Phase 2: a burst of creates in flight together, past the limit: each holds once, alone,
    // in the creation order the server recorded.
    let gate = clients[0].lock(PATH).unwrap().acquire(&Owner::with_label(999, "gate")).await.unwrap();
    let mut run = Run::new();
    for i in 0..12 {
        run.contend(&clients[i % 4], i);
    }
    wait_children(&observer, PATH, 13).await;
    let queue = clients[1].lock(PATH).unwrap().contenders().await.unwrap();
    let creation_order: Vec<usize> = labels(&queue)[1..].iter().map(|l| l[1..].parse().unwrap()).collect();
    gate.release().await.unwrap();
    assert_eq!(run.finish().await, creation_order, "held in creation order");
    wait_children(&observer, PATH, 0).await;

    for client in clients {
        client.close().await;
    }
}
