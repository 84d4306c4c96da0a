//! When the server last proved it had the session: the send time of the latest request it
//! answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The time on `CLOCK_BOOTTIME`: monotonic, and unlike `Instant` (`CLOCK_MONOTONIC`) it goes on
/// counting while the system is suspended, as the servers' clocks do. (On Apple systems,
/// `CLOCK_MONOTONIC`, which counts sleep there.)
pub fn boot_clock() -> Duration {
    Duration::from_nanos(boot_nanos())
}

/// [`boot_clock`] in nanoseconds: a vDSO call, cheap enough for a reentrant lock's fast path.
#[inline]
pub fn boot_nanos() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_BOOTTIME exists since Linux 2.6.39.
    if unsafe { libc::clock_gettime(CLOCK, &mut now) } != 0 {
        // Refused (a seccomp filter, say): the end of time, past every deadline, so that no
        // session is trusted on a clock that cannot be read.
        return u64::MAX;
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// How many times in this process a handshake negotiated a shorter session timeout than its
/// session had before: a deadline computed earlier may be too late since, so whoever keeps one
/// (zklock's lock-free re-entry) checks again when this moves.
static TIMEOUT_SHRINKS: AtomicU64 = AtomicU64::new(0);

/// See [`TIMEOUT_SHRINKS`].
#[inline]
pub fn timeout_shrinks() -> u64 {
    TIMEOUT_SHRINKS.load(Ordering::Acquire)
}

/// The [`boot_clock`] time at which the latest request, ping or session handshake that the
/// server answered was sent (at the latest; the stamp is taken before the write).
///
/// A server touches a session when it receives a request of it, and cannot expire it sooner
/// than the session timeout after that; the touch came after the send. So the server has kept
/// the session at least until this time plus the session timeout, whatever else the client
/// received since: a watch notification, which the server sends on its own, proves nothing,
/// and a reply that arrives proves the server heard the request, not anything later.
///
/// With it, the session timeout the latest handshake negotiated: a reconnect may negotiate
/// another (a server with other bounds), and the server touches the session with the timeout of
/// the connection it answers on.
#[derive(Clone, Debug, Default)]
pub struct AnsweredSends(Arc<Answered>);

#[derive(Debug, Default)]
struct Answered {
    sent_nanos: AtomicU64,
    timeout_millis: AtomicU64,
}

impl AnsweredSends {
    /// The latest answered send, or `None` before any answer.
    pub fn latest(&self) -> Option<Duration> {
        self.latest_with_timeout().map(|(sent, _)| sent)
    }

    /// The latest answered send and the session timeout negotiated for it, or `None` before any
    /// answer. The send is read first: a reconnect sets its timeout before its answer counts,
    /// so a send is never paired with a timeout older than its own.
    pub fn latest_with_timeout(&self) -> Option<(Duration, Duration)> {
        let sent = self.0.sent_nanos.load(Ordering::Acquire);
        let timeout = self.0.timeout_millis.load(Ordering::Acquire);
        (sent != 0).then(|| (Duration::from_nanos(sent), Duration::from_millis(timeout)))
    }

    pub(crate) fn record(&self, sent: Duration) {
        let nanos = u64::try_from(sent.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.0.sent_nanos.fetch_max(nanos, Ordering::AcqRel);
    }

    pub(crate) fn negotiated(&self, timeout: Duration) {
        let millis = timeout.as_millis() as u64;
        let before = self.0.timeout_millis.swap(millis, Ordering::AcqRel);
        if before != 0 && millis < before {
            // After the new timeout is in place: whoever sees the count move reads it.
            TIMEOUT_SHRINKS.fetch_add(1, Ordering::AcqRel);
        }
    }
}
