//! Queue order of a lock's children.
//!
//! Every child of the lock path is a contender. The order is the numeric sequence after the
//! node's marker (`lock-`, `__READ__`, `__WRIT__`, kazoo's `__lock__` and `__rlock__`), as Curator
//! and kazoo order them, with two exceptions:
//!
//! * **Downgrades.** A write holder of Curator 5.5+ (CURATOR-621) or zklock downgrades by making a
//!   plain ephemeral read node that carries its write node's sequence, then deleting the write
//!   node. That read node takes the write node's place: right behind it while both exist, and
//!   the same place once the write node is gone, so the writers that were waiting stay behind it.
//!   A repeated sequence is taken for a downgrade only in that form: one `__WRIT__` node and
//!   read nodes (or read nodes alone, their write node gone).
//! * **The sequence limit.** ZooKeeper's sequence is a signed 32-bit counter: at its limit
//!   Debian's 3.8 hands out negatives to creates in flight together and then repeats 2147483647
//!   forever, so past the limit the suffix no longer says who came first. The creation zxid
//!   always does (unique, strictly increasing). Nodes whose suffix is negative, at the maximum, or
//!   not a 10-digit number at all (children of no lock zklock knows) come after the others, in
//!   creation zxid order: every node with a good suffix was made before the counter reached its
//!   limit, so before every node past it. Peers sort unknown names last too.
//!
//! Where the two meet: a downgrade of a write node whose own sequence is past the limit cannot
//! carry a sequence that says where it belongs, so zklock does not make one there (its write
//! holder reads on its write node), and another client's such read node is ordered by creation
//! zxid, behind the writers that were waiting. A repeated good suffix in any other form than a
//! downgrade's cannot come from the counter, so then every child is ordered by creation zxid.

use std::cmp::Ordering;

use crate::mode::Mode;

/// The sequence suffix of a child name, if it has one.
pub(crate) fn suffix(name: &str) -> Option<i32> {
    let (at, marker, _) = Mode::find_marker(name)?;
    sequence_from(&name[at + marker.len()..])
}

/// The sequence in `digits`, the rest of a name after its marker.
fn sequence_from(digits: &str) -> Option<i32> {
    // ZooKeeper writes "%010d"; anything else did not come from the server's counter.
    if digits.len() < 10 || digits.starts_with('+') {
        return None;
    }
    digits.parse().ok()
}

/// Whether `rest`, the rest of a name after its marker, has the shape of the server's sequence:
/// ten digits or more (past the sequence limit, with a sign).
pub(crate) fn is_sequence_shaped(rest: &str) -> bool {
    rest.len() >= 10 && rest.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

/// Whether a node's sequence says where it belongs in the queue: below the counter's limit.
pub(crate) fn good_sequence(sequence: i64) -> bool {
    (0..i64::from(i32::MAX)).contains(&sequence)
}

/// What [`sort_by_name`] orders a child by: its good suffix, then whether it is a read node (a
/// write node goes before the read nodes of its downgrade).
pub(crate) type NameKey = (i32, bool);

/// A child's [`NameKey`], if its name tells (its name read once: the marker gives both).
pub(crate) fn name_key(name: &str) -> Option<NameKey> {
    let (at, marker, mode) = Mode::find_marker(name)?;
    let sequence = sequence_from(&name[at + marker.len()..]).filter(|s| good_sequence(i64::from(*s)))?;
    Some((sequence, mode == Mode::Read))
}

/// What [`sort_by_name`] found.
pub(crate) struct ByName {
    /// How many names at the front are in queue order. The rest (from that index on) are to be
    /// ordered by creation zxid, among themselves, behind those.
    pub(crate) ordered: usize,
    /// The keys of the names that have one, which are sorted at the front by them.
    pub(crate) keys: Vec<NameKey>,
}

/// Sorts `names` into queue order as far as their names tell (see [`ByName`]). Each name is read
/// once, not in the sort's comparisons (two names each, some 2 log N reads of every name).
pub(crate) fn sort_by_name(names: &mut [String]) -> ByName {
    let mut keyed: Vec<(Option<NameKey>, String)> =
        names.iter_mut().map(|name| (name_key(name), std::mem::take(name))).collect();
    // Nodes with good suffixes first, by suffix; a write node before the read nodes of its
    // downgrade.
    keyed.sort_unstable_by(|(a, _), (b, _)| match (a, b) {
        (Some(a), Some(b)) => a.cmp(b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    });
    let mut keys = Vec::with_capacity(keyed.len());
    for (slot, (key, name)) in names.iter_mut().zip(keyed) {
        *slot = name;
        keys.extend(key);
    }
    let mut start = 0;
    let repeated_only_by_downgrades = keys.chunk_by(|a, b| a.0 == b.0).all(|same| {
        let first = &names[start];
        start += same.len();
        let writes = same.iter().filter(|(_, read)| !read).count();
        same.len() == 1
            || writes == 0
            || (writes == 1 && Mode::of_node(first) == Some(Mode::Write) && Mode::holds_write_marker(first))
    });
    ByName { ordered: if repeated_only_by_downgrades { keys.len() } else { 0 }, keys }
}

/// Orders `rest` (the children [`sort_by_name`] left out of order) by creation zxid.
pub(crate) fn sort_by_zxid<T>(rest: &mut [T], czxid: impl Fn(&T) -> i64) {
    rest.sort_by_key(czxid);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn suffixes() {
        assert_eq!(suffix("_c_0abad917-53a6-4ed9-bfac-3327be0d-lock-0000000001"), Some(1));
        assert_eq!(suffix("_c_x-lock-foo-lock-0000000012"), Some(12));
        assert_eq!(suffix("_c_x-lock-2147483647"), Some(i32::MAX));
        assert_eq!(suffix("_c_x-lock--2147483648"), Some(i32::MIN));
        assert_eq!(suffix("_c_x-lock-12"), None);
        assert_eq!(suffix("_c_x-__READ__0000000007"), Some(7));
        assert_eq!(suffix("_c_x-__WRIT__-0000000007"), Some(-7));
        assert_eq!(suffix("0abad91753a64ed9bfac3327be0d1234__lock__0000000042"), Some(42));
        assert_eq!(suffix("0abad91753a64ed9bfac3327be0d1234__rlock__0000000043"), Some(43));
        assert_eq!(suffix("stray"), None);
        assert_eq!(name_key("_c_x-lock-2147483647"), None);
        assert_eq!(name_key("_c_x-lock-2147483646"), Some((i32::MAX - 1, false)));
        assert_eq!(name_key("_c_x-__READ__0000000007"), Some((7, true)));
        assert_eq!(name_key("_c_x-__WRIT__-0000000007"), None);
    }

    #[test]
    fn numeric_not_lexicographic_and_across_clients() {
        let mut v = names(&["b-lock-0000000010", "a-lock-0000000009", "c-lock-0000000100", "k__lock__0000000011"]);
        assert_eq!(sort_by_name(&mut v).ordered, 4);
        assert_eq!(v, names(&["a-lock-0000000009", "b-lock-0000000010", "k__lock__0000000011", "c-lock-0000000100"]));
    }

    #[test]
    fn a_downgrade_takes_its_write_nodes_place() {
        // Both there: the write node, then its downgrade's read node, then the rest.
        let mut v =
            names(&["c-__WRIT__0000000006", "b-__READ__0000000005", "a-__WRIT__0000000005", "d-__READ__0000000007"]);
        assert_eq!(sort_by_name(&mut v).ordered, 4);
        assert_eq!(
            v,
            names(&["a-__WRIT__0000000005", "b-__READ__0000000005", "c-__WRIT__0000000006", "d-__READ__0000000007"])
        );
        // The write node gone: the read node keeps its place.
        let mut v = names(&["c-__WRIT__0000000006", "b-__READ__0000000005"]);
        assert_eq!(sort_by_name(&mut v).ordered, 2);
        assert_eq!(v, names(&["b-__READ__0000000005", "c-__WRIT__0000000006"]));
        // Two read nodes of one write node (the first one's delete still on its way).
        let mut v = names(&["c-__WRIT__0000000006", "b-__READ__0000000005", "a-__READ__0000000005"]);
        assert_eq!(sort_by_name(&mut v).ordered, 3);
        assert_eq!(v[2], "c-__WRIT__0000000006");
    }

    #[test]
    fn past_the_limit_and_unknown_names_come_last_by_zxid() {
        let mut v =
            names(&["z-lock-2147483647", "stray", "b-lock-2147483646", "y-lock--2147483648", "a-lock-0000000005"]);
        assert_eq!(sort_by_name(&mut v).ordered, 2);
        assert_eq!(v[..2], names(&["a-lock-0000000005", "b-lock-2147483646"]));
        // A downgrade of a write node past the limit: no good suffix, so by zxid.
        let mut v = names(&["r-__READ__2147483647", "w-__WRIT__2147483647", "a-__WRIT__0000000009"]);
        assert_eq!(sort_by_name(&mut v).ordered, 1);
        let czxid = |name: &String| if name.starts_with('w') { 10 } else { 20 };
        sort_by_zxid(&mut v[1..], czxid);
        assert_eq!(v, names(&["a-__WRIT__0000000009", "w-__WRIT__2147483647", "r-__READ__2147483647"]));
    }

    #[test]
    fn a_repeated_suffix_that_is_no_downgrade_orders_everything_by_zxid() {
        for case in [
            &["a-lock-0000000005", "b-lock-0000000005"][..],
            &["a-__WRIT__0000000005", "b-__WRIT__0000000005", "c-__READ__0000000005"][..],
            &["a-k__lock__0000000005", "b-__READ__0000000005"][..],
            &["a-__READ__0000000004", "b-lock-0000000005", "c-__READ__0000000005"][..],
        ] {
            let mut v = names(case);
            assert_eq!(sort_by_name(&mut v).ordered, 0, "{case:?}");
        }
    }
}
