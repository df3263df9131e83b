//! Draining the client plane when the daemon shuts down (SIGTERM): health
//! reports NOT_SERVING, new calls are refused with UNAVAILABLE naming the
//! shutdown, calls in progress get [`GRACE`] to finish, and those still
//! running then fail with the same status — a `Wait` on a signal nobody
//! sends, a stalled `PutStream` — so that every client hears why rather
//! than a reset connection.

use super::Error;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// How long calls in progress may go on once the daemon starts to stop.
pub const GRACE: Duration = Duration::from_secs(1);

/// Whether the plane is stopping, and the calls in progress.
#[derive(Debug)]
pub(crate) struct Drain {
    rank: u32,
    stopping: watch::Sender<bool>,
    running: AtomicUsize,
    idle: Notify,
}

/// A call in progress; it ends when dropped.
#[derive(Debug)]
pub(crate) struct Running<'a> {
    drain: &'a Drain,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.drain.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.drain.idle.notify_waiters();
        }
    }
}

impl Drain {
    pub(crate) fn new(rank: u32) -> Arc<Drain> {
        Arc::new(Drain {
            rank,
            stopping: watch::channel(false).0,
            running: AtomicUsize::new(0),
            idle: Notify::new(),
        })
    }

    /// Calls in progress.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Why a call cannot run (or go on) now.
    pub(crate) fn refusal(&self) -> Error {
        Error::ShuttingDown { rank: self.rank }
    }

    /// Runs `call` unless the plane is stopping; once it is, the call has
    /// [`GRACE`] to finish, and then fails with [`Error::ShuttingDown`].
    pub(crate) async fn run<T>(
        &self,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let mut stopping = self.stopping.subscribe();
        if *stopping.borrow() {
            return Err(self.refusal());
        }
        self.running.fetch_add(1, Ordering::AcqRel);
        let _running = Running { drain: self };
        tokio::select! {
            r = call => r,
            () = async {
                let _ = stopping.wait_for(|s| *s).await;
                tokio::time::sleep(GRACE).await;
            } => Err(self.refusal()),
        }
    }

    /// A future that resolves [`GRACE`] after the plane starts to stop:
    /// for work that outlives its call (a GetStream's producer).
    pub(crate) fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopping = self.stopping.subscribe();
        async move {
            let _ = stopping.wait_for(|s| *s).await;
            tokio::time::sleep(GRACE).await;
        }
    }

    /// Starts stopping and waits until no call is in progress (at most
    /// [`GRACE`] and a second: a call that ignores its cancellation does
    /// not hold the daemon).
    pub(crate) async fn drain(&self) {
        self.stopping.send_replace(true);
        let _ = tokio::time::timeout(GRACE + Duration::from_secs(1), async {
            loop {
                let idle = self.idle.notified();
                if self.running.load(Ordering::Acquire) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_in_progress_has_the_grace_then_fails_and_new_ones_are_refused() {
        let d = Drain::new(3);
        let quick = d.run(async {
            tokio::time::sleep(GRACE / 2).await;
            Ok::<_, Error>(1)
        });
        let stuck = d.run(std::future::pending::<Result<u32, Error>>());
        let (q, s, ()) = tokio::join!(quick, stuck, d.drain());
        assert_eq!(q.unwrap(), 1, "a call that ends within the grace finishes");
        let e = s.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable);
        assert!(e.to_string().contains("rank 3 is shutting down"), "{e}");
        let late = d.run(async { Ok::<_, Error>(2) }).await;
        assert!(matches!(late, Err(Error::ShuttingDown { rank: 3 })));
    }
}
