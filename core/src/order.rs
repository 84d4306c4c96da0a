//! Queue order of a lock's children.
//!
//! Every child of the lock path is a contender. Normally the order is the numeric sequence after
//! the node's mode marker (`lock-`, `__READ__` or `__WRIT__`, as Curator orders them). ZooKeeper's sequence is a signed 32-bit counter:
//! at its limit Debian's 3.8.0 hands out negatives to creates in flight together and then repeats
//! 2147483647 forever, so past the limit the suffix no longer says who came first. The creation
//! zxid always does (unique, strictly increasing), so the order falls back to it whenever the
//! suffixes are not distinct, not all parsable, or any is negative or at the maximum. Both orders
//! are creation order wherever the suffixes are trustworthy, so contenders using either agree.

use crate::policy::Mode;

/// The sequence suffix of a child name, if it has one.
pub(crate) fn suffix(name: &str) -> Option<i32> {
    let (at, marker) = Mode::find_marker(name)?;
    let digits = &name[at + marker.len()..];
    // ZooKeeper writes "%010d"; anything else did not come from the server's counter.
    if digits.len() < 10 || digits.starts_with('+') {
        return None;
    }
    digits.parse().ok()
}

/// Sorts `names` by suffix if the suffixes can be trusted to give creation order; otherwise
/// returns `false` and leaves `names` alone, and the caller orders by creation zxid.
pub(crate) fn sort_by_suffix(names: &mut [String]) -> bool {
    let mut keyed = Vec::with_capacity(names.len());
    for name in names.iter() {
        match suffix(name) {
            Some(s) if (0..i32::MAX).contains(&s) => keyed.push(s),
            _ => return false,
        }
    }
    let mut sorted = keyed.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return false;
    }
    names.sort_unstable_by_key(|name| suffix(name).unwrap_or_default());
    true
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
        assert_eq!(suffix("stray"), None);
    }

    #[test]
    fn numeric_not_lexicographic() {
        // Lexicographic order would put 1000000000 before 999999999 if widths differed; with
        // ZooKeeper's padding they don't, but negatives would sort before positives as strings.
        let mut v = names(&["b-lock-0000000010", "a-lock-0000000009", "c-lock-0000000100"]);
        assert!(sort_by_suffix(&mut v));
        assert_eq!(v, names(&["a-lock-0000000009", "b-lock-0000000010", "c-lock-0000000100"]));
    }

    #[test]
    fn falls_back_past_the_limit() {
        for case in [
            &["a-lock-2147483646", "b-lock-2147483647"][..],
            &["a-lock-2147483646", "b-lock--2147483648"][..],
            &["a-lock-0000000005", "b-lock-0000000005"][..],
            &["a-lock-0000000005", "stray"][..],
        ] {
            let mut v = names(case);
            assert!(!sort_by_suffix(&mut v), "{case:?}");
        }
    }
}
