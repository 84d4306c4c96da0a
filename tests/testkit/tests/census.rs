//! The soak's census fails closed: a listing it may not make is an error (never "no nodes, no
//! orphans"), and a node whose client it cannot tell is counted as zklock's, not a peer's.

use std::time::{Duration, Instant};

use zklock_testkit::chaos::census::{node_lang, Census, UNKNOWN_LANG};
use zklock_testkit::chaos::MUTEX_PATH;
use zklock_testkit::Cluster;
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

#[test]
fn a_node_of_unknown_origin_is_not_a_peers() {
    assert_eq!(node_lang(br#"{"lang":"curator"}"#), "curator");
    assert_eq!(node_lang(b"10.0.0.7"), UNKNOWN_LANG, "Curator's default data (an address) is no label");
    assert_eq!(node_lang(b""), UNKNOWN_LANG);
    assert_eq!(node_lang(br#"{"name":"x"}"#), UNKNOWN_LANG);
}

#[test]
fn a_census_that_cannot_list_fails_and_unlabelled_nodes_are_counted() {
    let cluster = Cluster::standalone();
    let census = Census::connect(&cluster.connect_string()).unwrap();
    census.block_on(async {
        let zk = census.zk();
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        zk.create("/chaos", b"", &persistent).await.unwrap();
        zk.create(MUTEX_PATH, b"", &persistent).await.unwrap();
        let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        zk.create(&format!("{MUTEX_PATH}/_c_x-lock-"), b"not json", &ephemeral).await.unwrap();
    });
    let nodes = census.nodes().unwrap();
    assert_eq!(nodes.len(), 1);
    assert!(nodes.values().all(|n| n.lang == UNKNOWN_LANG), "{nodes:?}");
    let orphans = census.orphans(Duration::from_millis(100)).unwrap();
    assert_eq!(orphans.len(), 1, "the unlabelled node is an orphan, of unknown origin");

    // Now the census may not list the mutex path (world may only create): every look is an
    // error, not an empty census.
    census.block_on(async {
        let create_only = [Acl::new(Permission::CREATE, AuthId::anyone())];
        census.zk().set_acl(MUTEX_PATH, &create_only, None).await.unwrap();
    });
    let err = census.nodes().unwrap_err();
    assert!(err.contains(MUTEX_PATH), "{err}");
    assert!(census.orphans(Duration::from_millis(10)).is_err());
    assert!(census.left(Instant::now()).is_err());
}
