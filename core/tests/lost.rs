//! The lost-lock signal and fencing tokens, without network faults (see faults.rs for those).

mod common;

use std::time::Duration;

use common::*;
use zklock::binding::LockBinding;
use zklock::{ErrorKind, HoldState, LostReason, Owner};

/// Someone else deletes the holder's node: the holder sees Lost, and releasing reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsider_deleting_the_node_makes_the_holder_lost() {
    let path = unique_path("outsider");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let me = Owner::new(1);
    let guard = lock.acquire(&me).await.unwrap();
    let hold = guard.hold().clone();
    assert_eq!(hold.state(), HoldState::Held);
    let mut changes = hold.state_changes();

    observer.delete(hold.node_path(), None).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(10), hold.lost()).await.expect("Lost is signalled");
    assert_eq!(reason, Some(LostReason::NodeDeleted));
    assert_eq!(changes.next().await, Some(HoldState::Lost));
    assert_eq!(changes.next().await, None);
    assert_eq!(lock.state_of(&me), Some(HoldState::Lost));
    // A lost hold has no fencing token (the bindings' tokens come through these).
    assert_eq!(hold.live_fencing_token().unwrap_err().kind(), ErrorKind::LockLost);
    assert_eq!(lock.live_hold_of(&me).unwrap_err().kind(), ErrorKind::LockLost);
    assert!(lock.live_hold_of(&Owner::new(2)).unwrap().is_none());

    // Re-entering a lost lock fails; releasing reports the loss and frees the owner.
    assert_eq!(lock.acquire(&me).await.unwrap_err().kind(), ErrorKind::LockLost);
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost);
    assert!(err.to_string().contains("deleted the lock node"), "{err}");
    assert!(!lock.is_held_by(&me));
    let again = lock.acquire(&me).await.unwrap();
    assert!(again.fencing_token() > hold.fencing_token());
    again.release().await.unwrap();
}

/// A lost hold of several levels is released level by level, as in every binding: each release
/// reports the loss and counts one level down (`release` and `release_nested` alike); the last
/// one drops the hold and deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_nested_hold_is_released_level_by_level() {
    let path = unique_path("lost-nested");
    let observer = observer().await;
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let me = Owner::new(1);
    let hold = lock.acquire_for(&me, None).await.unwrap().new_hold().cloned().unwrap();
    for _ in 0..2 {
        assert!(matches!(lock.acquire_for(&me, None).await.unwrap(), zklock::Acquired::Reentered));
    }
    observer.delete(hold.node_path(), None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), hold.lost()).await.expect("Lost is signalled");
    assert_eq!(lock.release(&me).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert_eq!(lock.hold_of(&me).map(|(_, count)| count), Some(2));
    assert_eq!(lock.release_nested(&me).unwrap().unwrap_err().kind(), ErrorKind::LockLost);
    assert_eq!(lock.hold_of(&me).map(|(_, count)| count), Some(1));
    assert!(lock.release_nested(&me).is_none(), "the last level is release's");
    assert_eq!(lock.release(&me).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert!(lock.hold_of(&me).is_none());
    assert_eq!(lock.release(&me).await.unwrap_err().kind(), ErrorKind::NotOwner);
    client.close().await;
}

/// Closing the client loses its holds at once, and a release afterwards deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_loses_its_holds() {
    let path = unique_path("closed");
    let client = client().await;
    let lock = client.lock(&path).unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    client.close().await;
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), hold.lost()).await.unwrap(), Some(LostReason::Closed));
    assert_eq!(hold.state(), HoldState::Lost);
    assert_eq!(guard.release().await.unwrap_err().kind(), ErrorKind::LockLost);
}

/// A release ends the hold's state as Released, not Lost, even though the node goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_not_a_loss() {
    let client = client().await;
    let lock = client.lock(&unique_path("released")).unwrap();
    let guard = lock.acquire(&Owner::new(1)).await.unwrap();
    let hold = guard.hold().clone();
    guard.release().await.unwrap();
    assert_eq!(hold.lost().await, None);
    assert_eq!(hold.state(), HoldState::Released);
}

/// Tokens rise across successive holders of one path, also when the path is deleted and
/// created again in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_rise_across_holders_and_path_recreation() {
    let path = unique_path("tokens");
    let observer = observer().await;
    let (a, b) = (client().await, client().await);
    let mut tokens = Vec::new();
    for round in 0..3 {
        for (client, id) in [(&a, 1), (&b, 2)] {
            let guard = client.lock(&path).unwrap().acquire(&Owner::new(id)).await.unwrap();
            tokens.push((guard.fencing_token(), guard.hold().sequence()));
            let hold = guard.hold().clone();
            assert_eq!(hold.live_fencing_token().unwrap(), guard.fencing_token());
            guard.release().await.unwrap();
            // A released hold's token must not pass for a holder's, in any language.
            assert_eq!(hold.live_fencing_token().unwrap_err().kind(), ErrorKind::NotOwner);
        }
        if round == 1 {
            // Sequences restart with a new parent; tokens must not.
            observer.delete(&path, None).await.unwrap();
        }
    }
    assert!(tokens.windows(2).all(|w| w[1].0 > w[0].0), "tokens rise: {tokens:?}");
    assert!(tokens.windows(2).any(|w| w[1].1 < w[0].1), "the sequence restarted with the new parent: {tokens:?}");
}

/// `Lock::on_lost`, every binding's lock-level lost callback: it covers holds other owners took
/// before it was registered, through any handle of the client for the path, and later ones;
/// each lost hold is reported once, with its owner and the reason; a dropped subscription is
/// called no more, and a callback on one side of a read/write lock hears nothing of the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_covers_every_hold_of_the_lock_once() {
    let path = unique_path("on-lost");
    let observer = observer().await;
    let client = client().await;
    let (first, second) = (Owner::new(1), Owner::new(2));
    let holding = client.lock(&path).unwrap();
    let held_before = holding.acquire_for(&first, None).await.unwrap().new_hold().cloned().unwrap();
    // Registered after the hold was taken, on another handle for the path.
    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let report = move |tag: &'static str| {
        let sender = sender.clone();
        move |owner: u64, reason: LostReason| sender.send((tag, owner, reason)).unwrap()
    };
    let listening = client.lock(&path).unwrap();
    let kept = listening.on_lost(report("kept"));
    let dropped = listening.on_lost(report("dropped"));

    observer.delete(held_before.node_path(), None).await.unwrap();
    assert_eq!(next(&mut reports).await, ("kept", 1, LostReason::NodeDeleted));
    assert_eq!(next(&mut reports).await, ("dropped", 1, LostReason::NodeDeleted));
    assert_eq!(holding.release(&first).await.unwrap_err().kind(), ErrorKind::LockLost);

    // A hold taken after registering, of two levels; then a dropped subscription.
    drop(dropped);
    let held_after = holding.acquire_for(&second, None).await.unwrap().new_hold().cloned().unwrap();
    assert!(matches!(holding.acquire_for(&second, None).await.unwrap(), zklock::Acquired::Reentered));
    observer.delete(held_after.node_path(), None).await.unwrap();
    // Callbacks run one at a time in the order they became due: a second report of the first
    // hold, or the dropped callback's, would have come before this one.
    assert_eq!(next(&mut reports).await, ("kept", 2, LostReason::NodeDeleted));
    assert_eq!(holding.release(&second).await.unwrap_err().kind(), ErrorKind::LockLost);
    assert_eq!(holding.release(&second).await.unwrap_err().kind(), ErrorKind::LockLost);

    // A hold taken through a multi-lock the lock is a member of is a hold of the lock too.
    let multi = client.multi_lock([holding.clone().into()]).unwrap();
    let guard = multi.acquire(&Owner::new(3)).await.unwrap();
    observer.delete(holding.hold_of(&Owner::new(3)).unwrap().0.node_path(), None).await.unwrap();
    assert_eq!(next(&mut reports).await, ("kept", 3, LostReason::NodeDeleted));
    assert_eq!(guard.release().await.unwrap_err().kind(), ErrorKind::LockLost);

    // The read side's callback hears nothing of the write side's holds.
    let rw = client.read_write_lock(&format!("{path}-rw")).unwrap();
    let read_side = rw.read().on_lost(report("read"));
    let writing = rw.write().acquire_for(&first, None).await.unwrap().new_hold().cloned().unwrap();
    let reading = rw.read().acquire_for(&first, None).await.unwrap().new_hold().cloned().unwrap();
    observer.delete(writing.node_path(), None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), writing.lost()).await.expect("the write hold is lost");
    observer.delete(reading.node_path(), None).await.unwrap();
    assert_eq!(next(&mut reports).await, ("read", 1, LostReason::NodeDeleted));
    assert!(reports.try_recv().is_err(), "nothing else was reported");
    drop((kept, read_side));
    client.close().await;
}

async fn next<T>(reports: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> T {
    let next = tokio::time::timeout(Duration::from_secs(10), reports.recv()).await;
    next.expect("a lost callback within 10 s").unwrap()
}
