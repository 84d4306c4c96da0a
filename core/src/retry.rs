//! The one way a recipe step talks to ZooKeeper: bounded by the attempt's deadline, the client's
//! close and the session's end, and retried across connection loss.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zk;

use crate::connection::ClientInner;
use crate::session::{Lease, Session};

/// A request's answer.
pub(crate) type ZkResult<T> = Result<T, zk::Error>;

/// Whether a request's fate is unknown, or it was not carried out and may be sent again: its
/// error proves no answer of the server's to it (a request cut off by a broken, silent or
/// garbled connection, or by the session's end), so a step treats it as a lost connection:
/// waits for the session to be connected again (or stops, if it is over) and finds out, or
/// sends again. Only an answer the server gave to this very request settles it. Every variant
/// of the client's error is classified here, on purpose; a new one counts as lost (the safe
/// side: a release's delete then goes on in the background, an attempt looks for its node).
pub(crate) fn connection_lost(err: &zk::Error) -> bool {
    use zk::Error as E;
    match err {
        // The server's answer to this request, in its reply's error code: it got the request
        // and carried it out or refused it, as the code says (an unknown code included: it
        // answered, in words this client does not know).
        E::NoNode
        | E::NoAuth
        | E::BadVersion
        | E::NoChildrenForEphemerals
        | E::NodeExists
        | E::NotEmpty
        | E::InvalidAcl
        | E::NotReadOnly
        | E::NoWatcher
        | E::QuotaExceeded
        | E::MarshallingError
        | E::Unimplemented
        | E::ReconfigDisabled
        | E::UnexpectedErrorCode(_) => false,
        // Refused by the client before anything was sent (a malformed request): known not to
        // have happened, and sending it again would be refused again.
        E::BadArguments(_) => false,
        // An answer, but one saying the request was not carried out (a server shedding load;
        // another server has the session): nothing happened, and it may be sent again, as after
        // a lost connection.
        E::Throttled | E::SessionMoved => true,
        // The connection broke or went silent under the request (ConnectionLoss; a custom I/O or
        // read-timeout error), or was dropped on a protocol error: a reply with no request
        // waiting for it, a frame over the limit, a reply that does not parse (UnexpectedError,
        // UnmarshalError). Whatever was in flight may or may not have reached the server.
        E::ConnectionLoss | E::Custom(_) | E::UnexpectedError(_) | E::UnmarshalError { .. } => true,
        // The session or the client ended under the request (or no server could be reached):
        // no answer, and the step's wait for a reconnection ends it (`Requests::reconnected`).
        E::SessionExpired | E::AuthFailed | E::ClientClosed | E::NoHosts | E::Timeout => true,
        // Only the client's own lock recipe reports it, never a request zklock sends.
        E::RuntimeInconsistent => true,
        // A variant of a newer client: no proof of an answer either.
        _ => true,
    }
}

/// Pause before retrying after a connection loss, so a dead connection is not hammered before
/// the session notices it is down.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(20);

/// A server closes the connection of a client whose request it refuses (one over its packet
/// limit); the client reconnects and the request would be sent again, forever. So a step that
/// loses the connection this many times in a row, with no progress in between (see
/// [`Requests::progressed`]), ends with [`Stop::Refused`]. A network that drops a connection this often, each time a request
/// is in flight, leaves a step no better off waiting. (A time window since reconnecting would not
/// do: marshalling and writing a request of megabytes takes seconds.)
pub(crate) const REFUSAL_LIMIT: u32 = 8;

/// The message of [`Stop::Refused`], naming the packet limit option as `language` spells it.
pub(crate) fn refused(language: &str) -> String {
    format!(
        "ZooKeeper closed the connection each time this attempt sent its request (8 times in a row): it is most \
         likely over the server's packet limit (jute.maxbuffer); set the client option {} to the servers' value so \
         that such requests are refused up front",
        crate::validate::packet_limit_option(language)
    )
}

/// Why a bounded step stopped before its request was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The deadline passed.
    Deadline,
    Closed,
    /// The session is over (expired, or given up after too long a disconnection).
    SessionOver,
    /// The server keeps dropping the connection when this step's request is sent.
    Refused,
}

/// A request's outcome: answered (either way), or cut off by a connection loss after which the
/// session is connected again, so the caller may send it again (or first find out whether it
/// took effect, for a create).
pub(crate) enum Reply<T> {
    Answered(ZkResult<T>),
    Reconnected,
}

/// The requests of one recipe step (an attempt, a removal, a listing) on one session, under one
/// deadline (`None`: none) and one count of connections lost in a row.
pub(crate) struct Requests<'a> {
    pub(crate) client: &'a ClientInner,
    pub(crate) session: &'a Arc<Session>,
    pub(crate) deadline: Option<Instant>,
    /// Cancelled: as if the deadline passed (an abort, as the bindings offer it).
    abort: Option<tokio_util::sync::CancellationToken>,
    losses: AtomicU32,
    /// A bound on going unanswered rather than on the whole step, and when the latest answer
    /// came: the deadline moves on to `bound` after each (see [`Requests::answering_within`]).
    progress: Option<(Duration, parking_lot::Mutex<Instant>)>,
}

impl<'a> Requests<'a> {
    pub(crate) fn new(client: &'a ClientInner, session: &'a Arc<Session>, deadline: Option<Instant>) -> Self {
        Requests { client, session, deadline, abort: None, losses: AtomicU32::new(0), progress: None }
    }

    /// The deadline is one of going unanswered: after each answer it is `bound` from then, if
    /// that is later. For tries and listings, whose bound says the server could not be reached
    /// ("no answer within"): a long queue's listing that the server keeps answering (a
    /// thousand reads on a loaded machine) is not cut off.
    pub(crate) fn answering_within(mut self, bound: Duration) -> Self {
        self.progress = Some((bound, parking_lot::Mutex::new(Instant::now())));
        self
    }

    /// The deadline of the next wait: the step's, or (see [`Requests::answering_within`]) the
    /// latest answer's.
    fn current_deadline(&self) -> Option<Instant> {
        match &self.progress {
            Some((bound, latest)) => self.deadline.map(|deadline| deadline.max(*latest.lock() + *bound)),
            None => self.deadline,
        }
    }

    /// These requests stop as at their deadline once `abort` is cancelled.
    pub(crate) fn with_abort(mut self, abort: Option<tokio_util::sync::CancellationToken>) -> Self {
        self.abort = abort;
        self
    }

    pub(crate) fn zk(&self) -> &'a zk::Client {
        &self.session.zk
    }

    /// Awaits `future` unless the client is closed, the session is over, or the deadline passes.
    pub(crate) fn bounded<F: Future>(&self, future: F) -> Bounded<'_, F> {
        Bounded {
            client: self.client,
            ended: self.session.ended.cancelled(),
            within: within(self.current_deadline(), self.abort.as_ref(), future),
        }
    }

    /// Sends one request: its answer, or [`Reply::Reconnected`] once the session is connected
    /// again after the connection dropped under it.
    pub(crate) async fn send<T>(&self, request: impl Future<Output = ZkResult<T>>) -> Result<Reply<T>, Stop> {
        match self.bounded(request).await? {
            // The session is over: its monitor ends it (at once: the client's state is final),
            // and the step stops then, with the reason.
            Err(zk::Error::SessionExpired | zk::Error::AuthFailed | zk::Error::ClientClosed) => {
                Err(self.bounded(std::future::pending::<()>()).await.expect_err("pending"))
            }
            Err(err) if connection_lost(&err) => {
                self.reconnected().await?;
                Ok(Reply::Reconnected)
            }
            answer => {
                if let Some((_, latest)) = &self.progress {
                    *latest.lock() = Instant::now();
                }
                Ok(Reply::Answered(answer))
            }
        }
    }

    /// A request was answered that moved the step on (a create, a listing of the queue, a
    /// watch): the run of connections lost in a row starts again. Answers that only look around
    /// (finding our node after a loss) do not count, or a refused create would be sent forever.
    pub(crate) fn progressed(&self) {
        self.losses.store(0, Ordering::Relaxed);
    }

    /// Sends an idempotent request until it is answered (either way).
    pub(crate) async fn retry<T, F: Future<Output = ZkResult<T>>>(
        &self,
        request: impl Fn() -> F,
    ) -> Result<ZkResult<T>, Stop> {
        loop {
            if let Reply::Answered(answer) = self.send(request()).await? {
                return Ok(answer);
            }
        }
    }

    /// The one wait after a connection loss: counts the loss (a request the server keeps
    /// refusing ends here), backs off briefly, then waits until the session is connected again
    /// or has ended. A session over is a stop, never a reconnection: a request sent on its
    /// client would fail at once, as if answered, with the session's end in no error's words
    /// (a waiter then failed where it should queue again on a new session).
    async fn reconnected(&self) -> Result<(), Stop> {
        self.over()?;
        if self.losses.fetch_add(1, Ordering::Relaxed) + 1 >= REFUSAL_LIMIT {
            return Err(Stop::Refused);
        }
        self.bounded(tokio::time::sleep(RECONNECT_BACKOFF)).await?;
        let mut lease = self.session.lease.clone();
        self.bounded(lease.wait_for(|lease| *lease != Lease::Suspended)).await?.map_err(|_| self.end())?;
        self.over()
    }

    /// A stop if the session is over (or the client closed).
    fn over(&self) -> Result<(), Stop> {
        match self.session.ended.is_cancelled() || self.session.is_over() {
            true => Err(self.end()),
            false => Ok(()),
        }
    }

    /// The stop for a session that is over: the client's close, or the session's end.
    fn end(&self) -> Stop {
        if self.client.is_closed() {
            Stop::Closed
        } else {
            Stop::SessionOver
        }
    }
}

/// What ends a wait at a `deadline` or once `abort` is cancelled: a future ready then, if there is
/// either. Boxed, and only if there is one: every waiter in a queue carries one, and most wait
/// with neither a deadline nor an abort (a timer and a cancellation future are ~200 bytes).
type Expiry<'a> = Option<Pin<Box<dyn Future<Output = ()> + Send + 'a>>>;

/// `future`'s output, or `None` once `deadline` passes or `abort` is cancelled.
pub(crate) fn within<'a, F: Future>(
    deadline: Option<Instant>,
    abort: Option<&'a tokio_util::sync::CancellationToken>,
    future: F,
) -> Within<'a, F> {
    Within { future, expiry: expiry(deadline, abort) }
}

fn expiry(deadline: Option<Instant>, abort: Option<&tokio_util::sync::CancellationToken>) -> Expiry<'_> {
    match (deadline, abort) {
        (None, None) => None,
        (Some(deadline), None) => Some(Box::pin(tokio::time::sleep_until(deadline))),
        (None, Some(abort)) => Some(Box::pin(abort.cancelled())),
        (Some(deadline), Some(abort)) => Some(Box::pin(async move {
            tokio::select! { _ = tokio::time::sleep_until(deadline) => {}, _ = abort.cancelled() => {} }
        })),
    }
}

pin_project_lite::pin_project! {
    /// [`within`]'s future. Written out rather than an async fn around a `select!`, which took 600
    /// bytes around a send turn's wait: in a burst, every acquisition waiting for its turn holds
    /// one.
    pub(crate) struct Within<'a, F> {
        #[pin]
        future: F,
        expiry: Expiry<'a>,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    /// The future first: an output that came by the deadline counts.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Some(output));
        }
        match this.expiry.as_mut().map(|expiry| expiry.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

pin_project_lite::pin_project! {
    /// A future bounded by the client's close, its session's end and a deadline or abort (see
    /// [`Requests::bounded`]). Written out rather than an async fn around a `select!`: every
    /// waiter in a queue carries one, and the async fn kept both its argument and the select's
    /// copy of it (704 bytes around a 168-byte watch, against 264).
    pub(crate) struct Bounded<'a, F> {
        client: &'a ClientInner,
        // A child of the client's closed token: cancelled when the session ends or the client
        // closes (which sets its flag first).
        #[pin]
        ended: tokio_util::sync::WaitForCancellationFuture<'a>,
        #[pin]
        within: Within<'a, F>,
    }
}

impl<F: Future> Future for Bounded<'_, F> {
    type Output = Result<F::Output, Stop>;

    /// The session's end first, then the future, then the deadline: an answer that came with the
    /// session's end does not count, and one that came by the deadline does.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if this.ended.poll(cx).is_ready() {
            return Poll::Ready(Err(if this.client.is_closed() { Stop::Closed } else { Stop::SessionOver }));
        }
        this.within.poll(cx).map(|output| output.ok_or(Stop::Deadline))
    }
}
