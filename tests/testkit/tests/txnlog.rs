//! `zklock_testkit::txnlog` reads a real server's transaction log: the chaos soak's judge takes
//! its facts (which lock node lived when, which session ended when) from it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zklock_testkit::txnlog::{self, Op};
use zklock_testkit::Cluster;
use zookeeper_client as zk;

#[test]
fn a_real_log_gives_each_lock_nodes_create_and_delete_and_the_sessions_close() {
    let cluster = Cluster::standalone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let (session, mutex_czxid, read_czxid) = rt.block_on(async {
        let client = zk::Client::connector().connect(&cluster.connect_string()).await.unwrap();
        let session = client.session_id().0;
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let sequential = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        client.create("/judge", b"", &persistent).await.unwrap();
        client.create("/judge/mutex", b"", &persistent).await.unwrap();
        client.create("/judge/rw", b"", &persistent).await.unwrap();
        let (stat, _) = client.create("/judge/mutex/_c_a-lock-", b"{}", &sequential).await.unwrap();
        let (write, _) = client.create("/judge/rw/_c_w-__WRIT__", b"", &sequential).await.unwrap();
        // a downgrade's read node: one multi, a check of the write node and the create
        let mut multi = client.new_multi_writer();
        multi.add_check_version("/judge/rw/_c_w-__WRIT__0000000000", 0).unwrap();
        multi.add_create("/judge/rw/_c_w-__READ__0000000000", b"", &ephemeral).unwrap();
        multi.commit().await.unwrap();
        let (_, read) = client.get_data("/judge/rw/_c_w-__READ__0000000000").await.unwrap();
        assert!(read.czxid > write.czxid);
        client.delete("/judge/rw/_c_w-__WRIT__0000000000", None).await.unwrap();
        (session, stat.czxid, read.czxid)
        // dropped: the client closes its session, and the read node and the mutex's node go
    });
    // The close is logged once the server has it: read until it is there.
    let deadline = Instant::now() + Duration::from_secs(20);
    let txns = loop {
        let txns = txnlog::read_data_dir(&cluster.server_dir(0).join("data")).unwrap();
        if txns.iter().any(|t| t.session == session && t.ops == [Op::CloseSession]) {
            break txns;
        }
        assert!(Instant::now() < deadline, "no close of session {session:#x} in the log: {txns:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let facts = txnlog::facts(&txnlog::committed(&[txns]).unwrap(), &["/judge/mutex", "/judge/rw"]);
    let lines: Vec<String> = facts
        .lines()
        .map(|l| {
            let f = txnlog::parse_fact(l).unwrap().unwrap();
            assert!(f.time_ms >= before - 1000 && f.time_ms < before + 60_000, "{l}");
            assert_eq!(f.session, session, "{l}");
            l.split_whitespace().skip(3).collect::<Vec<_>>().join(" ")
        })
        .collect();
    assert_eq!(
        lines,
        [
            "create /judge/mutex/_c_a-lock-0000000000 ephemeral",
            "create /judge/rw/_c_w-__WRIT__0000000000 ephemeral",
            "create /judge/rw/_c_w-__READ__0000000000 ephemeral",
            "delete /judge/rw/_c_w-__WRIT__0000000000",
            "close",
        ],
        "{facts}"
    );
    let zxid =
        |i: usize| i64::from_str_radix(facts.lines().nth(i).unwrap()[2..].split(' ').next().unwrap(), 16).unwrap();
    assert_eq!((zxid(0), zxid(2)), (mutex_czxid, read_czxid), "{facts}");
}
