//! Times and text as people read them, for `zklock status` and the status line of `zklock exec`.

use std::time::{SystemTime, UNIX_EPOCH};

/// A duration for people: `850ms`, `42s`, `3m07s`, `2h05m`, `3d04h`.
pub(crate) fn duration(ms: i64) -> String {
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms}ms"),
        1..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// Now, in milliseconds since the Unix epoch (ZooKeeper's clock for when nodes were made).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

/// Text from a lock node (a label, a host, an identifier, a node's name) safe to print on a
/// terminal, as [`zklock::printable`] escapes it: a label with `\n` or `\x1b[31m` cannot split a
/// row or colour the operator's terminal. (JSON output keeps the text exact: JSON escapes these
/// itself.)
pub(crate) fn printable(text: &str) -> String {
    zklock::printable(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(42_300), "42s");
        assert_eq!(duration(187_000), "3m07s");
        assert_eq!(duration(7_500_000), "2h05m");
        assert_eq!(duration(273_600_000), "3d04h");
    }
}
