//! When the server last proved it had the session: the send time of the latest request it
//! answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The time on `CLOCK_BOOTTIME`: monotonic, and unlike `Instant` (`CLOCK_MONOTONIC`) it goes on
/// counting while the system is suspended, as the servers' clocks do.
pub fn boot_clock() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_BOOTTIME exists since Linux 2.6.39.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_BOOTTIME) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The [`boot_clock`] time at which the latest request, ping or session handshake that the
/// server answered was sent (at the latest; the stamp is taken before the write).
///
/// A server touches a session when it receives a request of it, and cannot expire it sooner
/// than the session timeout after that; the touch came after the send. So the server has kept
/// the session at least until this time plus the session timeout, whatever else the client
/// received since: a watch notification, which the server sends on its own, proves nothing,
/// and a reply that arrives proves the server heard the request, not anything later.
#[derive(Clone, Debug, Default)]
pub struct AnsweredSends(Arc<AtomicU64>);

impl AnsweredSends {
    /// The latest answered send, or `None` before any answer.
    pub fn latest(&self) -> Option<Duration> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    pub(crate) fn record(&self, sent: Duration) {
        let nanos = u64::try_from(sent.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.0.fetch_max(nanos, Ordering::AcqRel);
    }
}
