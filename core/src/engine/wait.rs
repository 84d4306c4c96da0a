//! How long an acquisition may wait ([`Wait`]), and its attempts made again on a new session.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::LostReason;
use crate::error::{Error, ErrorKind, Result};
use crate::retry;

/// How long a call that does not wait gets for ZooKeeper's answers: a try (a zero timeout) of
/// any recipe, and a listing (contenders, holders, a semaphore's participants, a path's recipe,
/// the locks under a path, a shared count). By then it has answered (held or busy; the listing),
/// the removal of a try's node included (it waits for the server for [`REMOVAL_GRACE`] of it),
/// or it fails with [`ErrorKind::ConnectionLoss`], saying the server could not be reached: a
/// stalled or cut connection, no server up, a session that cannot be re-established. One round
/// trip takes milliseconds; the bound leaves room for a reconnection to another server.
pub const TRY_BOUND: Duration = Duration::from_secs(2);

/// How long past its deadline (or [`TRY_BOUND`]) a call may wait for the server to confirm the
/// removal of the nodes it made and gives up: a round trip on a healthy connection. After that it
/// returns, and the removal goes on in the background, retried until the node or its session is
/// gone (nothing is orphaned).
pub const REMOVAL_GRACE: Duration = Duration::from_millis(100);

/// How long a call that ends before its deadline (an error; a forever acquisition's) waits at most
/// for the removal of its nodes before leaving it to the background: a round trip, and a brief
/// reconnection.
const FOREGROUND_REMOVAL: Duration = Duration::from_secs(2);

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
    /// From the bindings' form: `None` waits forever, `Some(ZERO)` only tries, for at most
    /// [`TRY_BOUND`].
    pub(crate) fn from_timeout(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait { deadline: None, only_try: false, abort: None },
            Some(timeout) if timeout.is_zero() => {
                // Its removals' grace within the bound (see `give_back_by`).
                Wait { deadline: Instant::now().checked_add(TRY_BOUND - REMOVAL_GRACE), only_try: true, abort: None }
            }
            // Past what an Instant holds is forever, for all practical purposes.
            Some(timeout) => Wait { deadline: Instant::now().checked_add(timeout), only_try: false, abort: None },
        }
    }

    /// `future`'s output, or `None` once the deadline passes or the acquisition is aborted.
    pub(crate) fn within<F: std::future::Future>(&self, future: F) -> retry::Within<'_, F> {
        retry::within(self.deadline, self.abort.as_ref(), future)
    }

    /// What an acquisition that ran out of time gives: not acquired (`Ok(None)`) past a deadline
    /// the caller set, or aborted; a [`ErrorKind::ConnectionLoss`] for a try that got no answer
    /// within [`TRY_BOUND`] (not acquired would say that someone else holds).
    pub(crate) fn out_of_time<T>(&self, path: &str) -> Result<Option<T>> {
        let aborted = self.abort.as_ref().is_some_and(|abort| abort.is_cancelled());
        match self.only_try && !aborted {
            true => Err(unreachable(path, "trying")),
            false => Ok(None),
        }
    }

    /// A failure to establish a session, as this acquisition reports it: a try's
    /// [`ErrorKind::Timeout`] (a connect timeout shorter than [`TRY_BOUND`]) is a server that
    /// could not be reached, not a lock held by others.
    pub(crate) fn session_error(&self, err: Error, path: &str) -> Error {
        match self.only_try && err.kind() == ErrorKind::Timeout {
            true => unreachable_because(path, "trying", err.message()),
            false => err,
        }
    }

    /// When a call giving up must return by, the removal of its nodes included (see
    /// [`REMOVAL_GRACE`]): a removal not confirmed by then goes on in the background.
    pub(crate) fn give_back_by(&self) -> Instant {
        let now = Instant::now();
        let aborted = self.abort.as_ref().is_some_and(|abort| abort.is_cancelled());
        match self.deadline {
            _ if aborted => now + REMOVAL_GRACE,
            // Fixed by the deadline, however many removals in turn (a semaphore's leases, then
            // its mutex; a multi-lock's members): past it, none waits.
            Some(deadline) => (now + FOREGROUND_REMOVAL).min(deadline + REMOVAL_GRACE),
            None => now + FOREGROUND_REMOVAL,
        }
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

/// The [`ErrorKind::ConnectionLoss`] of a call `doing` something (`"trying"`, `"listing the
/// contenders"`) that got no answer within [`TRY_BOUND`].
pub(crate) fn unreachable(path: &str, doing: &str) -> Error {
    Error::new(
        ErrorKind::ConnectionLoss,
        format!(
            "{doing}: ZooKeeper could not be reached: no answer within {:?} (the connection is down or stalled, or no \
             session could be established)",
            TRY_BOUND
        ),
    )
    .with_path(path)
}

/// As [`unreachable`], with the cause seen (why no session could be established).
pub(crate) fn unreachable_because(path: &str, doing: &str, cause: &str) -> Error {
    let err = unreachable(path, doing);
    let message = format!("{} ({cause})", err.message());
    err.with_message(message)
}

/// Runs `attempt` until it holds, fails, or the deadline passes; an attempt that failed because
/// its session ended (expired, or disconnected past its timeout) is made again, on a new session,
/// within the deadline (see [`Recipe::contend`]). A try too, within [`TRY_BOUND`]: its session's
/// end says nothing of the lock (nor of a session of the caller's: the next one is new), and a
/// try that found no session in time could not reach the server.
pub(crate) async fn again_on_new_session<'w, T, F, Fut>(wait: &'w Wait, path: &str, mut attempt: F) -> Result<Option<T>>
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
            return wait.out_of_time(path);
        }
    }
}
