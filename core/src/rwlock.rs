//! The read/write lock: Curator's InterProcessReadWriteLock, node for node. Two [`Lock`]s on one
//! path and one owner table: many readers at once, or one writer.

use crate::engine::Participant;
use crate::error::Result;
use crate::lock::Lock;

/// A fair read/write lock on one ZooKeeper path, from [`crate::Client::read_write_lock`]: its
/// [`read`](ReadWriteLock::read) side lets many owners hold at once, its
/// [`write`](ReadWriteLock::write) side one owner, and no reader while a writer holds. Each side
/// is an ordinary [`Lock`] (reentrant per owner, fencing tokens, hold state, timeouts).
///
/// * A reader holds when no write node is ahead of it in the queue, so a reader that comes after
///   a waiting writer waits behind it: writers are not starved.
/// * Downgrade: the write holder may take the read side (it reads on its write node), then
///   release the write side and go on reading; writers already waiting stay out until the read
///   is released too.
/// * Upgrade is refused at once with [`crate::ErrorKind::Deadlock`]: an owner holding the read
///   side that asks for the write side would wait for itself forever.
///
/// Nodes are `_c_<uuid>-__READ__<sequence>` and `_c_<uuid>-__WRIT__<sequence>`, as Curator's, so
/// zklock in any language and Curator 5.4's InterProcessReadWriteLock share one path.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new((read, write): (Lock, Lock)) -> ReadWriteLock {
        ReadWriteLock { read, write }
    }

    /// The read side: shared with other readers.
    pub fn read(&self) -> &Lock {
        &self.read
    }

    /// The write side: exclusive.
    pub fn write(&self) -> &Lock {
        &self.write
    }

    /// The lock path, relative to the client's chroot.
    pub fn path(&self) -> &str {
        self.read.path()
    }

    /// Every participant, readers and writers, in queue order (see [`Lock::contenders`]).
    pub async fn contenders(&self) -> Result<Vec<Participant>> {
        self.read.contenders().await
    }

    /// Every participant holding now: the readers that hold together, or the one writer.
    pub async fn holders(&self) -> Result<Vec<Participant>> {
        self.read.holders().await
    }
}
