//! What each kind of lock node may do, given the queue: the only part of a recipe that differs
//! between the mutex, the read lock and the write lock; and the semaphore's rule
//! ([`leases_fit`]). The contend loop in `engine` asks [`Mode::decide`] and either holds or
//! watches the node it names; the semaphore's lease step asks [`leases_fit`].

use std::sync::LazyLock;

use memchr::memmem::FinderRev;

use crate::mode::Mode;

/// What a participant does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It holds the lock.
    Holds,
    /// It waits until the node at index `node` of the queue is gone, then does what `then` says.
    WaitFor { node: usize, then: AfterWait },
}

/// What a waiter does once the node it waited for is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterWait {
    /// It holds without listing again: that node was its only blocker (see `engine` for why
    /// that is safe).
    Holds,
    /// It holds without listing again if this client released that node after holding it
    /// (nothing was ahead of it then); otherwise it looks again.
    ///
    /// `informant`: the node ahead of that one whose going may leave it the last node keeping
    /// us out. The waiter watches it too and looks again when it goes, while the node it waits
    /// for most likely still holds, so that this node's going then needs no listing
    /// ([`AfterWait::Holds`]): the listing leaves the handoff's path. Two watches per waiter,
    /// never more: in a mutex one deletion wakes at most two waiters (readers waiting for one
    /// writer, or informed by one, wake together).
    HoldsIfReleasedHere { informant: usize },
    /// It looks again: its place may have been taken by a node made since (the read node of a
    /// downgrade, made before the write node goes).
    LooksAgain,
}

impl Mode {
    /// Whether a node named `name` may, once gone, have been replaced by a node of the same
    /// place in the queue: a write node of Curator's form, whose holder downgrades by making a
    /// read node with its sequence before it deletes its write node (Curator 5.5+, zklock).
    fn may_hand_its_place_on(name: &str) -> bool {
        Mode::holds_write_marker(name)
    }

    /// [`Mode::decide_with`], finding each writer by scanning the queue.
    #[cfg(test)]
    pub(crate) fn decide<S: AsRef<str>>(self, queue: &[S], position: usize, read_write: bool) -> Decision {
        let last_writer =
            |end: usize| queue[..end].iter().rposition(|name| Mode::keeps_readers_out(name.as_ref(), read_write));
        self.decide_with(queue, position, last_writer)
    }

    /// Given the queue in order, the mode of each node in it (`None` for nodes of no known lock)
    /// and the position of a participant of this mode: whether it holds, or which node it waits
    /// for.
    ///
    /// * Exclusive and write: the first holds; the others wait for their immediate predecessor
    ///   (whatever it is), so one release wakes one waiter.
    /// * Read: holds when no write node is ahead of it; otherwise waits for the nearest write
    ///   node ahead (Curator waits for the first one, and wakes more often). A reader behind a
    ///   waiting writer waits too, so writers are not starved. Nodes of no known lock do not
    ///   hold a reader back (as in Curator and kazoo).
    ///
    /// A writer that waits for a write node looks again once it is gone: the read node of a
    /// downgrade may have taken its place. A reader need not: that read node shares with it.
    ///
    /// A waiter with more than its blocker ahead is told its informant: for exclusive and write,
    /// its predecessor's predecessor; for read, the nearest write node ahead of the one it waits
    /// for (see [`AfterWait::HoldsIfReleasedHere`]).
    ///
    /// `last_writer_before(end)` is the position of the last write (or exclusive) node in
    /// `queue[..end]`: worked out once for a whole listing (see [`Mode::writer_positions`]),
    /// rather than by each of a long queue's readers.
    pub(crate) fn decide_with<S: AsRef<str>>(
        self,
        queue: &[S],
        position: usize,
        last_writer_before: impl Fn(usize) -> Option<usize>,
    ) -> Decision {
        match self {
            Mode::Exclusive | Mode::Write => match position {
                0 => Decision::Holds,
                _ => {
                    let ahead = queue[position - 1].as_ref();
                    let then = if Mode::may_hand_its_place_on(ahead) {
                        AfterWait::LooksAgain
                    } else if position == 1 {
                        AfterWait::Holds
                    } else {
                        AfterWait::HoldsIfReleasedHere { informant: position - 2 }
                    };
                    Decision::WaitFor { node: position - 1, then }
                }
            },
            Mode::Read => match last_writer_before(position) {
                None => Decision::Holds,
                Some(writer) => {
                    let then = match last_writer_before(writer) {
                        Some(informant) => AfterWait::HoldsIfReleasedHere { informant },
                        None => AfterWait::Holds,
                    };
                    Decision::WaitFor { node: writer, then }
                }
            },
        }
    }

    /// Whether a node keeps a reader behind it out: a write node, or an exclusive one.
    fn keeps_readers_out(name: &str, read_write: bool) -> bool {
        matches!(Mode::of_node_in(name, read_write), Some(Mode::Write | Mode::Exclusive))
    }

    /// The positions of the nodes in `queue` that keep readers out, in order: for
    /// [`Mode::decide_with`], `last_writer_before(end)` is the last of them below `end`.
    pub(crate) fn writer_positions<S: AsRef<str>>(queue: &[S], read_write: bool) -> Vec<usize> {
        (0..queue.len()).filter(|&at| Mode::keeps_readers_out(queue[at].as_ref(), read_write)).collect()
    }
}

/// The positions in `queue` of the nodes that hold now, in one pass: the first node if it is an
/// exclusive or write node (with the read nodes of its downgrade right behind it, which carry its
/// sequence, a good one: past the limit sequences repeat), else the readers ahead of the first
/// such node. The same answer as asking
/// [`Mode::decide`] for every node, without its cost for a long queue of readers.
pub(crate) fn holders<T>(
    queue: &[T],
    mode_of: impl Fn(&T) -> Option<Mode>,
    sequence_of: impl Fn(&T) -> Option<i64>,
) -> Vec<usize> {
    let mut holders = Vec::new();
    for (i, node) in queue.iter().enumerate() {
        match mode_of(node) {
            Some(Mode::Exclusive | Mode::Write) => {
                if i == 0 {
                    holders.push(0);
                    let sequence = sequence_of(node).filter(|s| crate::order::good_sequence(*s));
                    let downgraded = |other: &T| {
                        mode_of(other) == Some(Mode::Read) && sequence.is_some() && sequence_of(other) == sequence
                    };
                    holders.extend((1..queue.len()).take_while(|&j| downgraded(&queue[j])));
                }
                break;
            }
            Some(Mode::Read) => holders.push(i),
            None => {}
        }
    }
    holders
}

/// The semaphore's layout (Curator's InterProcessSemaphoreV2): under its path, the internal
/// mutex (a mutex's `_c_<uuid>-lock-<sequence>` nodes) and the lease parent, whose children are
/// the leases, `_c_<uuid>-lease-<sequence>`.
pub(crate) const SEMAPHORE_MUTEX: &str = "locks";
pub(crate) const SEMAPHORE_LEASES: &str = "leases";
pub(crate) const LEASE_MARKER: &str = "lease-";

/// The semaphore's rule. Acquirers take the internal mutex one at a time, so there is no queue of
/// leases to decide in: the one acquirer that holds the mutex has made its lease nodes and holds
/// them all once the lease parent has no more than `max` children (every child counts, as in
/// Curator); until then it waits for the children, or `max`, to change, still holding the mutex,
/// so the acquirers behind it stay in their order.
pub(crate) fn leases_fit(leases: usize, max: u32) -> bool {
    leases <= max as usize
}

/// Which recipe the children of a lock path belong to, and so which locks may use the path now:
/// the rule by which every acquisition refuses a path of another recipe (a recipe conflict:
/// [`crate::Error::is_recipe_conflict`]), told before any node is made. From
/// [`crate::Client::path_recipe`] (one listing), or [`PathRecipe::of`] for a listing in hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathRecipe {
    /// No child (or no path): any lock, or a semaphore, may use it.
    Free,
    /// Children that fit the mutex and the read/write lock alike: kazoo's `__lock__` nodes (its
    /// mutex and its write lock at once) and nodes of no lock zklock knows.
    Either,
    /// The mutex's nodes (Curator's and zklock's `-lock-`): the mutex fits, the read/write lock
    /// does not.
    Mutex,
    /// The read/write lock's nodes (`__READ__`, `__WRIT__`, kazoo's `__rlock__`): its sides fit,
    /// the mutex does not.
    ReadWrite,
    /// Nodes of both recipes at once (made by clients that do not check): no lock fits.
    Mixed,
    /// A semaphore's path or its lease parent: no lock fits (a semaphore takes its leases).
    Semaphore,
}

impl PathRecipe {
    /// What children named `names` admit.
    pub(crate) fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> PathRecipe {
        let (mut any, mut mutex, mut read_write) = (false, false, false);
        for name in names {
            if marks_a_semaphore(name) {
                return PathRecipe::Semaphore;
            }
            any = true;
            mutex |= !Mode::Read.shares_path_with(name);
            read_write |= !Mode::Exclusive.shares_path_with(name);
        }
        match (any, mutex, read_write) {
            (false, _, _) => PathRecipe::Free,
            (true, false, false) => PathRecipe::Either,
            (true, true, false) => PathRecipe::Mutex,
            (true, false, true) => PathRecipe::ReadWrite,
            (true, true, true) => PathRecipe::Mixed,
        }
    }

    /// Whether a lock of `mode` may use the path: its acquisition would not be refused as a
    /// recipe conflict.
    pub fn fits(self, mode: Mode) -> bool {
        match self {
            PathRecipe::Free | PathRecipe::Either => true,
            PathRecipe::Mutex => mode == Mode::Exclusive,
            PathRecipe::ReadWrite => mode != Mode::Exclusive,
            PathRecipe::Mixed | PathRecipe::Semaphore => false,
        }
    }

    /// The exclusive lock for a caller that takes whichever the path is (`zklock exec` without
    /// `--shared` or `--write`): the write side where the path holds read/write lock nodes, so
    /// that it excludes their readers rather than be refused; else the mutex. Where no lock
    /// fits, that acquisition is refused, saying why.
    pub fn exclusive_mode(self) -> Mode {
        match self {
            PathRecipe::ReadWrite | PathRecipe::Mixed => Mode::Write,
            PathRecipe::Free | PathRecipe::Either | PathRecipe::Mutex | PathRecipe::Semaphore => Mode::Exclusive,
        }
    }
}

/// Whether a child named `name` says its parent is a semaphore's path (its lease parent) or its
/// lease parent (a lease node): no lock may queue there.
pub(crate) fn marks_a_semaphore(name: &str) -> bool {
    name == SEMAPHORE_LEASES || is_lease_node(name)
}

/// A lease node's name: the marker, then the server's sequence (ten digits or more; past the
/// sequence limit a sign).
pub(crate) fn is_lease_node(name: &str) -> bool {
    static LEASE_SEARCHER: LazyLock<FinderRev<'static>> = LazyLock::new(|| FinderRev::new(LEASE_MARKER));
    LEASE_SEARCHER.rfind(name).is_some_and(|at| crate::order::is_sequence_shaped(&name[at + LEASE_MARKER.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::*;

    const R: &str = "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__READ__";
    const W: &str = "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__WRIT__";

    fn node(marker: &str, sequence: i32) -> String {
        format!("{marker}{sequence:010}")
    }

    fn decide(mode: Mode, queue: &[String], position: usize) -> Decision {
        mode.decide(queue, position, true)
    }

    #[test]
    fn a_path_recipe_is_what_its_children_admit() {
        let of = |names: &[&str]| PathRecipe::of_names(names.iter().copied());
        let (r, w, m) = (node(R, 1), node(W, 2), node("_c_x-lock-", 3));
        assert_eq!(of(&[]), PathRecipe::Free);
        assert_eq!(of(&["stray", &node("k__lock__", 1)]), PathRecipe::Either);
        assert_eq!(of(&[&m, &node("k__lock__", 2)]), PathRecipe::Mutex);
        assert_eq!(of(&[&r, &w, &node("k__lock__", 3)]), PathRecipe::ReadWrite);
        assert_eq!(of(&[&node("k__rlock__", 1)]), PathRecipe::ReadWrite);
        assert_eq!(of(&[&m, &r]), PathRecipe::Mixed);
        assert_eq!(of(&["locks", "leases"]), PathRecipe::Semaphore);
        assert_eq!(of(&[&m, "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-lease-0000000001"]), PathRecipe::Semaphore);
        for (recipe, fitting) in [
            (PathRecipe::Free, [true, true, true]),
            (PathRecipe::Either, [true, true, true]),
            (PathRecipe::Mutex, [true, false, false]),
            (PathRecipe::ReadWrite, [false, true, true]),
            (PathRecipe::Mixed, [false, false, false]),
            (PathRecipe::Semaphore, [false, false, false]),
        ] {
            assert_eq!([Exclusive, Read, Write].map(|mode| recipe.fits(mode)), fitting, "{recipe:?}");
            // The exclusive lock a path takes fits it wherever an exclusive lock of either does.
            if recipe.fits(Exclusive) || recipe.fits(Write) {
                assert!(recipe.fits(recipe.exclusive_mode()), "{recipe:?}");
            }
        }
        assert_eq!(PathRecipe::Either.exclusive_mode(), Exclusive, "the mutex, where both fit");
        assert_eq!(PathRecipe::Mixed.exclusive_mode(), Write);
        assert_eq!(PathRecipe::Semaphore.exclusive_mode(), Exclusive);
    }

    #[test]
    fn modes_of_node_names() {
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-lock-0000000001"), Some(Exclusive));
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__READ__0000000001"), Some(Read));
        assert_eq!(Mode::of_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__WRIT__0000000001"), Some(Write));
        // kazoo's: ReadLock, and Lock/WriteLock (one form for both).
        assert_eq!(Mode::of_node("0abad91753a64ed9bfac3327be0d1234__rlock__0000000001"), Some(Read));
        assert_eq!(Mode::of_node("0abad91753a64ed9bfac3327be0d1234__lock__0000000001"), Some(Exclusive));
        assert_eq!(Mode::of_node_in("0abad91753a64ed9bfac3327be0d1234__lock__0000000001", true), Some(Write));
        assert_eq!(Mode::of_node_in("_c_x-lock-0000000001", true), Some(Exclusive));
        assert_eq!(Mode::of_node("lease-0000000001"), None);
    }

    #[test]
    fn exclusive_and_write_wait_for_their_predecessor() {
        let queue = [node(R, 1), node("kazoo__lock__", 2), node(R, 3), "stray".to_owned()];
        assert_eq!(decide(Write, &queue, 0), Decision::Holds);
        assert_eq!(decide(Write, &queue, 1), Decision::WaitFor { node: 0, then: AfterWait::Holds });
        assert_eq!(
            decide(Write, &queue, 3),
            Decision::WaitFor { node: 2, then: AfterWait::HoldsIfReleasedHere { informant: 1 } }
        );
        let mutex = [node("_c_x-lock-", 1), "stray".to_owned(), node("_c_y-lock-", 3)];
        assert_eq!(
            Exclusive.decide(&mutex, 2, false),
            Decision::WaitFor { node: 1, then: AfterWait::HoldsIfReleasedHere { informant: 0 } }
        );
    }

    #[test]
    fn a_writer_behind_a_write_node_looks_again_when_it_goes() {
        // The write node's holder may be downgrading: its read node, with the same sequence,
        // takes its place before the write node goes.
        let queue = [node(W, 1), node(W, 2)];
        assert_eq!(decide(Write, &queue, 1), Decision::WaitFor { node: 0, then: AfterWait::LooksAgain });
        // A reader shares with that read node: it need not look again.
        let queue = [node(W, 1), node(R, 2)];
        assert_eq!(decide(Read, &queue, 1), Decision::WaitFor { node: 0, then: AfterWait::Holds });
        // kazoo's write lock does not downgrade.
        let queue = [node("kazoo__lock__", 1), node(W, 2)];
        assert_eq!(decide(Write, &queue, 1), Decision::WaitFor { node: 0, then: AfterWait::Holds });
    }

    #[test]
    fn readers_share_until_a_writer_and_then_wait_for_the_nearest() {
        let queue = [node(R, 1), node(R, 2), node(W, 3), node(R, 4), node("kazoo__lock__", 5), node(R, 6)];
        assert_eq!(decide(Read, &queue, 0), Decision::Holds);
        assert_eq!(decide(Read, &queue, 1), Decision::Holds);
        assert_eq!(decide(Read, &queue, 3), Decision::WaitFor { node: 2, then: AfterWait::Holds });
        // kazoo's write lock is a writer too.
        assert_eq!(
            decide(Read, &queue, 5),
            Decision::WaitFor { node: 4, then: AfterWait::HoldsIfReleasedHere { informant: 2 } }
        );
        // Nodes of no known lock do not hold readers back.
        assert_eq!(decide(Read, &["stray".to_owned(), node(R, 2)], 1), Decision::Holds);
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
        let marker = |mode: &Option<Mode>| mode.map_or("stray-", Mode::marker);
        for queue in queues {
            // Distinct sequences: no downgrade here.
            let names: Vec<String> = queue.iter().enumerate().map(|(i, m)| node(marker(m), i as i32)).collect();
            let deciding: Vec<usize> = (0..queue.len())
                .filter(|&i| queue[i].is_some_and(|mode| decide(mode, &names, i) == Decision::Holds))
                .collect();
            let sequence = |i: &usize| Some(*i as i64);
            let indexes: Vec<usize> = (0..queue.len()).collect();
            assert_eq!(holders(&indexes, |i| queue[*i], sequence), deciding, "{queue:?}");
        }
    }

    #[test]
    fn a_downgraded_reader_holds_beside_its_write_node() {
        let queue = [(Some(Write), 5), (Some(Read), 5), (Some(Write), 6), (Some(Read), 7)];
        assert_eq!(holders(&queue, |n| n.0, |n| Some(n.1)), vec![0, 1]);
        let queue = [(Some(Read), 5), (Some(Write), 6), (Some(Read), 7)];
        assert_eq!(holders(&queue, |n| n.0, |n| Some(n.1)), vec![0]);
        // Past the limit sequences repeat: a reader behind the writer is no downgrade.
        let queue = [(Some(Write), i64::from(i32::MAX)), (Some(Read), i64::from(i32::MAX))];
        assert_eq!(holders(&queue, |n| n.0, |n| Some(n.1)), vec![0]);
    }

    #[test]
    fn leases_fit_up_to_max_and_mark_a_semaphore() {
        assert!(leases_fit(3, 3));
        assert!(!leases_fit(4, 3));
        assert!(leases_fit(0, 1));
        assert!(is_lease_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-lease-0000000007"));
        assert!(!is_lease_node("_c_0abad917-53a6-4ed9-bfac-3327be0d1234-lock-0000000007"));
        assert!(!is_lease_node("lease-7"));
        assert!(marks_a_semaphore("leases"));
        assert!(!marks_a_semaphore("locks"), "a lock path may have a child named locks");
    }

    #[test]
    fn the_mutex_and_the_read_write_lock_do_not_share_a_path() {
        assert!(Read.shares_path_with(&node(W, 1)));
        assert!(Exclusive.shares_path_with(&node("_c_x-lock-", 1)));
        assert!(!Exclusive.shares_path_with(&node(R, 1)));
        assert!(!Write.shares_path_with(&node("_c_x-lock-", 1)));
        // kazoo's Lock/WriteLock node fits either; its ReadLock's only the read/write lock.
        assert!(Exclusive.shares_path_with(&node("k__lock__", 1)));
        assert!(Read.shares_path_with(&node("k__lock__", 1)));
        assert!(!Exclusive.shares_path_with(&node("k__rlock__", 1)));
        assert!(Exclusive.shares_path_with("stray"));
    }
}
