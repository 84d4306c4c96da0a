//! Hostile node data made by another client: any client that may create children of a lock path
//! may give each of its nodes up to a megabyte of data. A waiter needs none of it (its queue
//! order needs creation zxids), and the participants' identities need only small data: what
//! zklock reads of such nodes is counted by a proxy in front of the reader, in bytes received.
//! Each test has its own server (the testkit's has a 256 MB heap: reading such nodes whole made
//! one die of OutOfMemoryError).

mod common;

use std::time::Duration;

use common::*;
use zklock::{Client, Owner};
use zklock_testkit::{Cluster, Proxy};
use zookeeper_client as zk;

/// Hostile nodes made under the lock path: 60 of 1 MB made a waiter's RSS grow by 123 MB.
const HOSTILE: usize = 60;
/// A node's data: with its request, under the server's default packet limit (1 MB less a byte).
const DATA: usize = 1_000_000;

/// Makes `HOSTILE` nodes of `DATA` bytes under `path` with a plain client: named `stray-<i>`,
/// or as Curator's contenders would be (waiters, then, behind whoever holds).
async fn make_hostile_children(hostile: &zk::Client, path: &str, lock_shaped: bool) {
    let data = vec![b'x'; DATA];
    let mode = if lock_shaped { zk::CreateMode::EphemeralSequential } else { zk::CreateMode::Ephemeral };
    let options = mode.with_acls(zk::Acls::anyone_all());
    let names: Vec<String> = (0..HOSTILE)
        .map(|i| match lock_shaped {
            true => format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4()),
            false => format!("{path}/stray-{i}"),
        })
        .collect();
    for chunk in names.chunks(10) {
        for made in futures::future::join_all(chunk.iter().map(|name| hostile.create(name, &data, &options))).await {
            made.expect("the hostile client makes its node");
        }
    }
}

/// A zklock client behind a proxy on `cluster`: the proxy counts what it receives.
async fn reader(cluster: &Cluster) -> (Proxy, Client) {
    let proxy = Proxy::start(&cluster.server_address(0));
    let client = client_at(&proxy.address()).await;
    (proxy, client)
}

/// Past the sequence limit a waiter orders the children its names cannot by creation zxid, and
/// it read each one's data for that: 60 MB at a look at the queue, in one multi-read, whose
/// answer the server died building (OutOfMemoryError). Only the children's stats are read now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_past_the_sequence_limit_reads_no_data_of_others_nodes() {
    const PATH: &str = "/locks/hostile";
    let cluster = Cluster::builder().seed_lock_parent_near_sequence_limit(PATH, i32::MAX - 1).start();
    let connect = cluster.connect_string();
    let hostile = observer_at(&connect).await;
    let holder_client = client_at(&connect).await;
    let quitter_client = client_at(&connect).await;
    let (proxy, waiter_client) = reader(&cluster).await;

    // The holder, a waiter of another client that will give up, and the waiter: it waits for the
    // quitter, and looks at the queue again once the quitter's node goes before the holder's.
    let holder = holder_client.lock(PATH).unwrap().acquire(&Owner::new(1)).await.unwrap();
    assert_eq!(holder.hold().sequence(), i64::from(i32::MAX - 1), "the last good sequence");
    let lock = quitter_client.lock(PATH).unwrap();
    let quitter = tokio::spawn(async move { lock.acquire(&Owner::new(2)).await });
    wait_children(&hostile, PATH, 2).await;
    let lock = waiter_client.lock(PATH).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(&Owner::new(3), Duration::from_secs(60)).await });
    wait_children(&hostile, PATH, 3).await;
    let ours = |session: i64| {
        let hostile = &hostile;
        async move {
            for name in children(hostile, PATH).await {
                let node = format!("{PATH}/{name}");
                if hostile.check_stat(&node).await.unwrap().is_some_and(|stat| stat.ephemeral_owner == session) {
                    return node;
                }
            }
            panic!("no node of session {session:#x}")
        }
    };
    let waiter_session = waiter_client.session_id().unwrap();
    let (quitter_node, waiter_node) = (ours(quitter_client.session_id().unwrap()).await, ours(waiter_session).await);
    wait_watched_by(&connect, &quitter_node, waiter_session).await;
    // Behind the waiter's node (made first), so that they do not hold it back.
    make_hostile_children(&hostile, PATH, false).await;

    let received_before = proxy.forwarded().1;
    quitter.abort();
    // Next in line after its look, the waiter watches its own node.
    wait_watched_by(&connect, &waiter_node, waiter_session).await;
    holder.release().await.unwrap();
    let guard = waiting.await.unwrap().expect("the waiter acquires");
    let received = proxy.forwarded().1 - received_before;
    let sequence = guard.hold().sequence();
    assert!(!(0..i64::from(i32::MAX)).contains(&sequence), "the waiter's node is past the limit: {sequence}");
    eprintln!(
        "the waiter received {received} bytes from the quitter's going to its hold ({HOSTILE} nodes of {DATA} bytes)"
    );
    assert!(received < DATA as u64, "the waiter received {received} bytes: another client's node data");
    guard.release().await.unwrap();
    for client in [waiter_client, quitter_client, holder_client] {
        client.close().await;
    }
}

/// `contenders()` and `holders()` read a participant's data for its identity only if it is small:
/// a node of 1 MB is listed with its size and no data (they read 60 MB: over the client's 4 MiB
/// reply cap, the connection dropped at every try, and both failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_and_holders_read_no_large_data_of_others_nodes() {
    let cluster = Cluster::standalone();
    let connect = cluster.connect_string();
    let path = unique_path("hostile-participants");
    let hostile = observer_at(&connect).await;
    let holder_client = client_at(&connect).await;
    let (proxy, reader_client) = reader(&cluster).await;
    let holder = holder_client.lock(&path).unwrap().acquire(&Owner::with_label(1, "holder")).await.unwrap();
    make_hostile_children(&hostile, &path, true).await;
    let lock = reader_client.lock(&path).unwrap();

    let received_before = proxy.forwarded().1;
    let holders = lock.holders().await.expect("the holders");
    let contenders = lock.contenders().await.expect("the contenders");
    let received = proxy.forwarded().1 - received_before;
    eprintln!("holders() and contenders() received {received} bytes ({HOSTILE} nodes of {DATA} bytes)");
    assert!(received < DATA as u64, "received {received} bytes: another client's node data");

    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].identity.as_ref().expect("the holder's identity is read").owner, "holder");
    assert_eq!(contenders.len(), HOSTILE + 1);
    assert_eq!(contenders[0].node, holders[0].node);
    for waiter in &contenders[1..] {
        assert_eq!(waiter.mode, Some(zklock::Mode::Exclusive), "{}", waiter.node);
        assert!(waiter.data.is_empty() && waiter.identity.is_none(), "{} was not read", waiter.node);
        assert_eq!(waiter.data_length, DATA, "{}: its size is known", waiter.node);
    }
    holder.release().await.unwrap();
    reader_client.close().await;
    holder_client.close().await;
}

/// A node whose ACL keeps its data from this client is listed by its stat, its data unread: it
/// was left out as if gone, so that a lock held through such a node read as held by the node
/// behind it (and `zklock status` said so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_data_this_client_may_not_read_is_still_the_holder() {
    let path = unique_path("unreadable-holder");
    let other = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    // Made the way zklock makes its path, then a holder's node that no one may read, and a
    // waiter's (Curator writes its address).
    lock.try_acquire(&Owner::new(1)).await.unwrap().unwrap().release().await.unwrap();
    let all_but_read = zk::Permission::CREATE | zk::Permission::DELETE | zk::Permission::WRITE | zk::Permission::ADMIN;
    let no_read = [zk::Acl::new(all_but_read, zk::AuthId::anyone())];
    let mut nodes = Vec::new();
    for (acls, data) in [(zk::Acls::new(&no_read), &b"{}"[..]), (zk::Acls::anyone_all(), &b"::1"[..])] {
        let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
        let (_, sequence) =
            other.create(&prefix, data, &zk::CreateMode::EphemeralSequential.with_acls(acls)).await.unwrap();
        nodes.push(format!("{prefix}{sequence}"));
    }
    assert_eq!(other.get_data(&nodes[0]).await.unwrap_err(), zk::Error::NoAuth);

    let holders = lock.holders().await.unwrap();
    let full_path = |p: &zklock::Participant| format!("{path}/{}", p.node);
    assert_eq!(holders.iter().map(full_path).collect::<Vec<_>>(), nodes[..1]);
    assert!(!holders[0].data_was_read() && holders[0].data_length == 2, "{:?}", holders[0]);
    let contenders = lock.contenders().await.unwrap();
    assert_eq!(contenders.iter().map(full_path).collect::<Vec<_>>(), nodes);
    assert_eq!(contenders[1].data, b"::1");
    client.close().await;
}
