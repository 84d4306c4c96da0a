//! What each kind of lock node may do, given the queue: the only part of a recipe that differs
//! between the mutex, the read lock and the write lock (and, later, a semaphore). The contend
//! loop in `engine` asks [`Mode::decide`] and either holds or watches the node it names.

use serde::{Deserialize, Serialize};

/// How a participant takes a lock, as its node's name says (the names are Curator's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// The mutex (Curator's InterProcessMutex): `_c_<uuid>-lock-<sequence>`.
    Exclusive,
    /// The read side of a read/write lock: `_c_<uuid>-__READ__<sequence>`.
    Read,
    /// The write side of a read/write lock: `_c_<uuid>-__WRIT__<sequence>`.
    Write,
}

/// The marker before the sequence in each mode's node names. Curator's read/write markers have
/// the same length on purpose (its LockInternals depends on it).
const MARKERS: [(Mode, &str); 3] = [(Mode::Read, "__READ__"), (Mode::Write, "__WRIT__"), (Mode::Exclusive, "lock-")];

/// What a participant does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It holds the lock.
    Holds,
    /// It waits until the node at index `node` of the queue is gone. If that node is its only
    /// `blocker`, it then holds without listing again (see `engine` for why that is safe);
    /// otherwise it looks again.
    WaitFor { node: usize, only_blocker: bool },
}

impl Mode {
    /// The marker this mode's node names carry before their sequence.
    pub(crate) fn marker(self) -> &'static str {
        MARKERS.iter().find(|(mode, _)| *mode == self).map(|(_, marker)| *marker).expect("every mode has a marker")
    }

    /// The mode of a child of a lock path, by its name; `None` for a node of no lock we know.
    pub fn of_node(name: &str) -> Option<Mode> {
        MARKERS.iter().find(|(_, marker)| name.contains(marker)).map(|(mode, _)| *mode)
    }

    /// The position of the marker in `name` and the marker itself, if it has one.
    pub(crate) fn find_marker(name: &str) -> Option<(usize, &'static str)> {
        MARKERS.iter().find_map(|(_, marker)| name.rfind(marker).map(|at| (at, *marker)))
    }

    /// Whether nodes of this mode and of `other` may share a lock path. The mutex and the
    /// read/write lock are different recipes: each would ignore the other's rules.
    pub(crate) fn shares_path_with(self, other: Mode) -> bool {
        (self == Mode::Exclusive) == (other == Mode::Exclusive)
    }

    /// The lowercase name used in messages and by the bindings: `exclusive`, `read`, `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }

    /// Given the queue in order, the mode of each node in it (`None` for nodes of no known lock)
    /// and the position of a participant of this mode: whether it holds, or which node it waits
    /// for.
    ///
    /// * Exclusive and write: the first holds; the others wait for their immediate predecessor
    ///   (whatever it is), so one release wakes one waiter.
    /// * Read: holds when no write node is ahead of it; otherwise waits for the nearest write
    ///   node ahead (Curator waits for the first one, and wakes more often). A reader behind a
    ///   waiting writer waits too, so writers are not starved.
    pub(crate) fn decide<T>(self, queue: &[T], position: usize, mode_of: impl Fn(&T) -> Option<Mode>) -> Decision {
        match self {
            Mode::Exclusive | Mode::Write => match position {
                0 => Decision::Holds,
                _ => Decision::WaitFor { node: position - 1, only_blocker: position == 1 },
            },
            Mode::Read => {
                let is_writer = |node: &T| mode_of(node) == Some(Mode::Write);
                match queue[..position].iter().rposition(is_writer) {
                    None => Decision::Holds,
                    Some(writer) => {
                        Decision::WaitFor { node: writer, only_blocker: !queue[..writer].iter().any(is_writer) }
                    }
                }
            }
        }
    }
}

/// The positions in `queue` of the nodes that hold now, in one pass: the first node if it is an
/// exclusive or write node, else the readers ahead of the first such node. The same answer as
/// asking [`Mode::decide`] for every node, without its cost for a long queue of readers.
pub(crate) fn holders<T>(queue: &[T], mode_of: impl Fn(&T) -> Option<Mode>) -> Vec<usize> {
    let mut holders = Vec::new();
    for (i, node) in queue.iter().enumerate() {
        match mode_of(node) {
            Some(Mode::Exclusive | Mode::Write) => {
                if i == 0 {
                    holders.push(0);
                }
                break;
            }
            Some(Mode::Read) => holders.push(i),
            None => {}
        }
    }
    holders
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::*;

    #[test]
    fn modes_of_node_names() {
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-lock-0000000001"), Some(Exclusive));
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__READ__0000000001"), Some(Read));
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__WRIT__0000000001"), Some(Write));
        assert_eq!(Mode::of_node("0abad91753a64ed9__rlock__0000000001"), None);
    }

    #[test]
    fn exclusive_and_write_wait_for_their_predecessor() {
        let queue = [Some(Read), Some(Write), Some(Read), None];
        assert_eq!(Write.decide(&queue, 0, |m| *m), Decision::Holds);
        assert_eq!(Write.decide(&queue, 1, |m| *m), Decision::WaitFor { node: 0, only_blocker: true });
        assert_eq!(Write.decide(&queue, 3, |m| *m), Decision::WaitFor { node: 2, only_blocker: false });
        let mutex = [Some(Exclusive), None, Some(Exclusive)];
        assert_eq!(Exclusive.decide(&mutex, 2, |m| *m), Decision::WaitFor { node: 1, only_blocker: false });
    }

    #[test]
    fn readers_share_until_a_writer_and_then_wait_for_the_nearest() {
        let queue = [Some(Read), Some(Read), Some(Write), Some(Read), Some(Write), Some(Read)];
        assert_eq!(Read.decide(&queue, 0, |m| *m), Decision::Holds);
        assert_eq!(Read.decide(&queue, 1, |m| *m), Decision::Holds);
        assert_eq!(Read.decide(&queue, 3, |m| *m), Decision::WaitFor { node: 2, only_blocker: true });
        assert_eq!(Read.decide(&queue, 5, |m| *m), Decision::WaitFor { node: 4, only_blocker: false });
        // Nodes of no known lock do not hold readers back.
        assert_eq!(Read.decide(&[None, Some(Read)], 1, |m| *m), Decision::Holds);
    }

    #[test]
    fn holders_are_those_that_decide_they_hold() {
        let queues: [&[Option<Mode>]; 6] = [
            &[],
            &[Some(Exclusive), Some(Exclusive), None],
            &[Some(Read), None, Some(Read), Some(Write), Some(Read)],
            &[Some(Write), Some(Read), Some(Read)],
            &[None, Some(Write), Some(Read)],
            &[Some(Read), Some(Read), Some(Read)],
        ];
        for queue in queues {
            let deciding: Vec<usize> = (0..queue.len())
                .filter(|&i| queue[i].is_some_and(|mode| mode.decide(queue, i, |m| *m) == Decision::Holds))
                .collect();
            assert_eq!(holders(queue, |m| *m), deciding, "{queue:?}");
        }
    }

    #[test]
    fn the_mutex_and_the_read_write_lock_do_not_share_a_path() {
        assert!(Read.shares_path_with(Write));
        assert!(Exclusive.shares_path_with(Exclusive));
        assert!(!Exclusive.shares_path_with(Read));
        assert!(!Write.shares_path_with(Exclusive));
    }
}
