//! How a participant takes a lock, as its node's name says: the [`Mode`] and the markers that
//! name it (Curator's, which zklock writes, and kazoo's). A leaf: the queue's order (`order`) and
//! the policy that decides on it (`policy`) both read node names through it.

use std::sync::LazyLock;

use memchr::memmem::FinderRev;
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

/// The markers before the sequence in lock node names, and the mode of each in a mutex. Curator's
/// (which zklock writes): its read/write markers have the same length on purpose (its
/// LockInternals depends on it). kazoo's: `__lock__` is both its Lock and its WriteLock, so it
/// is exclusive beside a mutex and a writer in a read/write lock (see [`Mode::of_node_in`]).
const MARKERS: [(&str, Mode); 5] = [
    ("__READ__", Mode::Read),
    ("__WRIT__", Mode::Write),
    ("lock-", Mode::Exclusive),
    ("__rlock__", Mode::Read),
    (KAZOO_LOCK, Mode::Exclusive),
];

/// kazoo's Lock and WriteLock node marker.
const KAZOO_LOCK: &str = "__lock__";

/// Indexes in [`MARKERS`] (checked by a test).
const WRITE_MARKER: usize = 1;
const KAZOO_READ_MARKER: usize = 3;
const KAZOO_LOCK_MARKER: usize = 4;

/// A searcher for each of [`MARKERS`], built once: `str::contains` and `str::rfind` build theirs
/// on every call, and every acquisition reads its listing's names several times (that was a
/// tenth of an uncontended cycle's CPU in the client).
static MARKER_SEARCHERS: LazyLock<[FinderRev<'static>; MARKERS.len()]> =
    LazyLock::new(|| MARKERS.map(|(marker, _)| FinderRev::new(marker)));

/// Where the marker `MARKERS[index]` last occurs in `name`.
fn last_occurrence(index: usize, name: &str) -> Option<usize> {
    MARKER_SEARCHERS[index].rfind(name)
}

/// The first of [`MARKERS`] that `name` holds, with where it last occurs, and its index.
fn first_marker(name: &str) -> Option<(usize, usize)> {
    (0..MARKERS.len()).find_map(|index| last_occurrence(index, name).map(|at| (index, at)))
}

impl Mode {
    /// The marker this mode's node names carry before their sequence.
    /// (zklock writes Curator's names.)
    pub(crate) fn marker(self) -> &'static str {
        MARKERS.iter().find(|(_, mode)| *mode == self).map(|(marker, _)| *marker).expect("every mode has a marker")
    }

    /// The mode of a child of a lock path, by its name, as it counts in a mutex; `None` for a
    /// node of no lock zklock knows. Curator's and zklock's nodes, and kazoo's: `__rlock__` is a
    /// reader, `__lock__` (kazoo's Lock and WriteLock) exclusive, and a writer where the path holds
    /// read/write nodes (as [`crate::Lock::contenders`] reports it).
    pub fn of_node(name: &str) -> Option<Mode> {
        first_marker(name).map(|(index, _)| MARKERS[index].1)
    }

    /// The mode of a child as it counts in a read/write lock (`read_write`) or in a mutex.
    pub(crate) fn of_node_in(name: &str, read_write: bool) -> Option<Mode> {
        match Mode::of_node(name) {
            Some(Mode::Exclusive) if read_write && Mode::is_kazoos_lock(name) => Some(Mode::Write),
            mode => mode,
        }
    }

    /// The position of the marker in `name`, the marker itself and the mode it gives
    /// ([`Mode::of_node`]), if it has one.
    pub(crate) fn find_marker(name: &str) -> Option<(usize, &'static str, Mode)> {
        first_marker(name).map(|(index, at)| (at, MARKERS[index].0, MARKERS[index].1))
    }

    /// Whether a child named `name` is kazoo's (its Lock, WriteLock or ReadLock node).
    pub(crate) fn is_kazoos(name: &str) -> bool {
        Mode::is_kazoos_lock(name) || last_occurrence(KAZOO_READ_MARKER, name).is_some()
    }

    /// Whether a child named `name` is kazoo's Lock or WriteLock node.
    fn is_kazoos_lock(name: &str) -> bool {
        last_occurrence(KAZOO_LOCK_MARKER, name).is_some()
    }

    /// Whether `name` holds the write marker (Curator's `__WRIT__`) anywhere.
    pub(crate) fn holds_write_marker(name: &str) -> bool {
        last_occurrence(WRITE_MARKER, name).is_some()
    }

    /// Whether a child named `name` may be under the path of a lock of this mode. The mutex and
    /// the read/write lock are different recipes, each ignoring the other's rules; kazoo's
    /// `__lock__` node is both its mutex and its write lock, so it fits either.
    pub(crate) fn shares_path_with(self, name: &str) -> bool {
        match Mode::of_node(name) {
            None => true,
            Some(_) if Mode::is_kazoos_lock(name) => true,
            Some(other) => (self == Mode::Exclusive) == (other == Mode::Exclusive),
        }
    }

    /// The lowercase name used in messages and by the bindings: `exclusive`, `read`, `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
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

    const R: &str = "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__READ__";
    const W: &str = "_c_0abad917-53a6-4ed9-bfac-3327be0d1234-__WRIT__";

    #[test]
    fn the_marker_searchers_find_what_str_search_finds() {
        assert_eq!(MARKERS[WRITE_MARKER].0, Write.marker());
        assert_eq!(MARKERS[KAZOO_READ_MARKER].0, "__rlock__");
        assert_eq!(MARKERS[KAZOO_LOCK_MARKER].0, KAZOO_LOCK);
        let names = [
            format!("{R}0000000007"),
            format!("{W}-0000000008"),
            "_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-0000000001".to_owned(),
            "_c_x-lock-foo-lock-0000000012".to_owned(),
            "_c_x-__READ__y-lock-0000000003".to_owned(),
            "0abad91753a64ed9bfac3327be0d1234__lock__0000000042".to_owned(),
            "0abad91753a64ed9bfac3327be0d1234__rlock__0000000043".to_owned(),
            "__lock__lock-__WRIT____READ__".to_owned(),
            "lease-0000000001".to_owned(),
            "stray".to_owned(),
            String::new(),
        ];
        for name in &names {
            let by_str = MARKERS.iter().find_map(|(marker, mode)| name.rfind(marker).map(|at| (at, *marker, *mode)));
            assert_eq!(Mode::find_marker(name), by_str, "{name}");
            assert_eq!(
                Mode::of_node(name),
                MARKERS.iter().find(|(m, _)| name.contains(m)).map(|(_, mode)| *mode),
                "{name}"
            );
            assert_eq!(Mode::is_kazoos(name), name.contains(KAZOO_LOCK) || name.contains("__rlock__"), "{name}");
            assert_eq!(Mode::holds_write_marker(name), name.contains("__WRIT__"), "{name}");
        }
    }
}
