//! How long an acquisition may wait ([`Wait`]), and its attempts made again on a new session.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{ErrorKind, Result};
use crate::retry;
use crate::session::LostReason;

/// How long an acquisition may wait: fixed when the acquisition begins.
#[derive(Clone, Debug)]
pub(crate) struct Wait {
    /// `None`: as long as it takes.
    pub(crate) deadline: Option<Instant>,
    /// Only try: one create and one listing, then give up if the lock is not had.
    pub(crate) only_try: bool,
    /// Cancelled: the acquisition ends as at its deadline, its node removed before it returns.
    pub(crate) abort: Option<tokio_util::sync::CancellationToken>,
}

impl Wait {
    /// From the bindings' form: `None` waits forever, `Some(ZERO)` only tries.
    pub(crate) fn from_timeout(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait { deadline: None, only_try: false, abort: None },
            Some(timeout) if timeout.is_zero() => Wait { deadline: None, only_try: true, abort: None },
            // Past what an Instant holds is forever, for all practical purposes.
            Some(timeout) => Wait { deadline: Instant::now().checked_add(timeout), only_try: false, abort: None },
        }
    }

    /// `future`'s output, or `None` once the deadline passes or the acquisition is aborted.
    pub(crate) fn within<F: std::future::Future>(&self, future: F) -> retry::Within<'_, F> {
        retry::within(self.deadline, self.abort.as_ref(), future)
    }

    /// Whether this acquisition waits as long as it takes: no deadline, and not only trying (an
    /// abort may still end it). Such a wait outlasts any outage: it queues again on new
    /// sessions, and tries for one again after a connect timeout, for as long as it takes.
    pub(crate) fn forever(&self) -> bool {
        self.deadline.is_none() && !self.only_try
    }

    /// Whether the deadline passed, or the acquisition was aborted.
    pub(crate) fn is_over(&self) -> bool {
        self.deadline.is_some_and(|deadline| Instant::now() >= deadline)
            || self.abort.as_ref().is_some_and(|abort| abort.is_cancelled())
    }
}

/// Runs `attempt` until it holds, fails, or the deadline passes; an attempt that failed because
/// its session ended (expired, or disconnected past its timeout) is made again, on a new session,
/// within the deadline (see [`Recipe::contend`]).
pub(crate) async fn again_on_new_session<'w, T, F, Fut>(wait: &'w Wait, mut attempt: F) -> Result<Option<T>>
where
    F: FnMut(&'w Wait) -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let mut requeues = 0u32;
    loop {
        let result = attempt(wait).await;
        let requeue = match &result {
            Err(err) => {
                err.kind() == ErrorKind::SessionExpired
                    && matches!(err.lost_reason(), Some(LostReason::SessionExpired | LostReason::DisconnectedTooLong))
                    && !wait.only_try
            }
            Ok(_) => false,
        };
        if !requeue {
            return result;
        }
        requeues += 1;
        // Not in a tight loop, should new sessions keep ending at once.
        wait.within(tokio::time::sleep(Duration::from_millis(50 * u64::from(requeues.min(20))))).await;
        if wait.is_over() {
            return Ok(None);
        }
    }
}
