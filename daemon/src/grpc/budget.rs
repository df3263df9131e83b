//! One daemon-wide budget for the bytes the client plane buffers
//! (`--grpc-buffer-budget`): what a GetStream has read from a window and
//! not yet handed to gRPC, and what a PutStream has received and not yet
//! put. Streams draw leases from it and wait when it is spent, so that no
//! number of slow or stalled clients can take the daemon past it.
//!
//! A quarter of it is kept for streams that move: a lease is [`Share::Start`]
//! (what a stream takes before its client has sent or taken anything
//! since: a GetStream's first read-ahead, a PutStream's first block) or
//! [`Share::Moving`] (what it takes because its client made progress).
//! Starting leases may hold at most three quarters of the budget, so
//! streams that stall where they start — however many — cannot take the
//! budget from streams that are moving.
//!
//! A lease rides with its bytes ([`Lease::attach`]): it returns to the
//! budget when the last `Bytes` that points into the buffer is dropped.

use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is kept in units of this many bytes (a semaphore counts in
/// u32 per acquisition).
const UNIT: usize = 1024;

/// Which part of the budget a lease may draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    /// Taken before the stream's client has shown progress: at most three
    /// quarters of the budget, with every other starting lease.
    Start,
    /// Taken because the client sent or took bytes: any of the budget.
    Moving,
}

/// The client plane's buffer budget.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    sem: Arc<Semaphore>,
    units: usize,
    /// What starting leases may hold in all.
    start: Arc<Semaphore>,
    start_units: usize,
}

/// Bytes drawn from the budget; they return when it drops.
#[derive(Debug)]
pub(crate) struct Lease {
    _all: OwnedSemaphorePermit,
    _start: Option<OwnedSemaphorePermit>,
}

fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX)
}

impl Budget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> Budget {
        let units = (bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        let start_units = (units - units / 4).max(1);
        Budget {
            sem: Arc::new(Semaphore::new(units)),
            units,
            start: Arc::new(Semaphore::new(start_units)),
            start_units,
        }
    }

    /// Waits until `bytes` are free in `share`, and takes them. Asking for
    /// more than the share takes the whole share.
    pub async fn take(&self, bytes: usize, share: Share) -> Lease {
        // The semaphores are never closed.
        let closed = |_| unreachable!("the budget's semaphores are never closed");
        let most = match share {
            Share::Start => self.start_units,
            Share::Moving => self.units,
        };
        let n = units(bytes).min(most as u32);
        let start = match share {
            Share::Start => Some(
                self.start
                    .clone()
                    .acquire_many_owned(n)
                    .await
                    .unwrap_or_else(closed),
            ),
            Share::Moving => None,
        };
        let all = self
            .sem
            .clone()
            .acquire_many_owned(n)
            .await
            .unwrap_or_else(closed);
        Lease {
            _all: all,
            _start: start,
        }
    }

    /// Bytes of the budget in use now.
    pub fn in_use(&self) -> usize {
        (self.units - self.sem.available_permits()) * UNIT
    }
}

impl Lease {
    /// `buf` as `Bytes` that carry this lease: it returns to the budget
    /// once every slice of `buf` is dropped.
    pub fn attach(self, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Leased { buf, _lease: self })
    }
}

struct Leased {
    buf: Vec<u8>,
    _lease: Lease,
}

impl AsRef<[u8]> for Leased {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn leases_return_when_their_last_slice_drops() {
        let b = Budget::new(64 << 10);
        let lease = b.take(40 << 10, Share::Moving).await;
        assert_eq!(b.in_use(), 40 << 10);
        let mut bytes = lease.attach(vec![7; 40 << 10]);
        let head = bytes.split_to(1024);
        drop(bytes);
        assert_eq!(b.in_use(), 40 << 10, "a slice still points into the buffer");
        drop(head);
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn a_spent_budget_makes_the_next_taker_wait() {
        let b = Budget::new(64 << 10);
        let first = b.take(48 << 10, Share::Moving).await;
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.take(32 << 10, Share::Moving).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "only 16 KiB are free");
        drop(first);
        let second = waiting.await.unwrap();
        assert_eq!(b.in_use(), 32 << 10);
        drop(second);
        // More than the whole budget takes the whole budget, and waits for nothing else.
        let all = b.take(1 << 30, Share::Moving).await;
        assert_eq!(b.in_use(), 64 << 10);
        drop(all);
    }

    #[tokio::test]
    async fn streams_that_start_leave_a_quarter_to_streams_that_move() {
        let b = Budget::new(64 << 10);
        let starting = b.take(1 << 30, Share::Start).await;
        assert_eq!(
            b.in_use(),
            48 << 10,
            "starting leases stop at three quarters"
        );
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.take(1024, Share::Start).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the starting share is spent");
        let moving = b.take(16 << 10, Share::Moving).await;
        assert_eq!(b.in_use(), 64 << 10, "a moving stream takes the rest");
        drop(starting);
        let started = waiting.await.unwrap();
        drop((moving, started));
        assert_eq!(b.in_use(), 0);
    }
}
