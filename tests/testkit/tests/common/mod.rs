//! What the Curator interop tests share: one test per case and Curator version, and waiting on a
//! condition instead of sleeping.
#![allow(dead_code)]

use std::thread;
use std::time::{Duration, Instant};

/// One test per case and Curator version: `curator_5_4::CASE` and `curator_5_7::CASE` call
/// `CASE(version)`.
macro_rules! both_versions {
    ($($case:ident),* $(,)?) => {
        mod curator_5_4 {
            $( #[test] fn $case() { super::$case(zklock_testkit::CuratorVersion::V5_4) } )*
        }
        mod curator_5_7 {
            $( #[test] fn $case() { super::$case(zklock_testkit::CuratorVersion::V5_7) } )*
        }
    };
}

/// Polls `f` until it holds or `timeout` passes; whether it held.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    f()
}
