//! Timers. With the `tokio` feature they run on tokio's timer, like the sockets on tokio's I/O
//! driver, so that the client starts no async-io reactor thread (a zklock patch); otherwise they
//! are async-io's.

#[cfg(not(feature = "tokio"))]
pub use async_io::Timer;

#[cfg(feature = "tokio")]
pub use self::tokio_timer::Timer;

#[cfg(feature = "tokio")]
mod tokio_timer {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    /// async-io's `Timer` API on tokio's timer: a one-shot fires once and then stays pending; an
    /// interval fires every period after its schedule. The tokio sleep is made on first poll, so
    /// a timer can be created outside a runtime.
    pub struct Timer {
        when: Option<Instant>,
        period: Option<Duration>,
        sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    }

    impl Timer {
        pub fn never() -> Self {
            Self { when: None, period: None, sleep: None }
        }

        pub fn at(when: Instant) -> Self {
            Self { when: Some(when), period: None, sleep: None }
        }

        pub fn after(duration: Duration) -> Self {
            Self::at(Instant::now() + duration)
        }

        pub fn interval(period: Duration) -> Self {
            Self { when: Some(Instant::now() + period), period: Some(period), sleep: None }
        }
    }

    impl Future for Timer {
        type Output = Instant;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
            let this = self.get_mut();
            let Some(when) = this.when else { return Poll::Pending };
            let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(when.into())));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            match this.period {
                Some(period) => {
                    let next = when + period;
                    this.when = Some(next);
                    sleep.as_mut().reset(next.into());
                },
                None => {
                    this.when = None;
                    this.sleep = None;
                },
            }
            // As async-io: the time the timer was due, not the time it was polled.
            Poll::Ready(when)
        }
    }
}
