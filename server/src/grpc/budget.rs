//! One daemon-wide budget for the bytes the client plane buffers
//! (`--grpc-buffer-budget`): what a GetStream has read from a window and
//! not yet handed to gRPC, and what a PutStream has received and not yet
//! put. Streams draw leases from it and wait when it is spent, so that no
//! number of slow or stalled clients can take the daemon past it.
//!
//! A lease rides with its bytes ([`Lease::attach`]): it returns to the
//! budget when the last `Bytes` that points into the buffer is dropped.

use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is kept in units of this many bytes (a semaphore counts in
/// u32 per acquisition).
const UNIT: usize = 1024;

/// The client plane's buffer budget.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    sem: Arc<Semaphore>,
    units: usize,
}

/// Bytes drawn from the budget; they return when it drops.
#[derive(Debug)]
pub(crate) struct Lease(#[allow(dead_code)] OwnedSemaphorePermit);

fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX)
}

impl Budget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> Budget {
        let units = (bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            sem: Arc::new(Semaphore::new(units)),
            units,
        }
    }

    /// Waits until `bytes` are free, and takes them. Asking for more than
    /// the whole budget takes the whole budget.
    pub async fn take(&self, bytes: usize) -> Lease {
        let n = units(bytes).min(self.units as u32);
        match self.sem.clone().acquire_many_owned(n).await {
            Ok(p) => Lease(p),
            // The semaphore is never closed.
            Err(_) => unreachable!("the budget's semaphore is never closed"),
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
        let lease = b.take(40 << 10).await;
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
        let first = b.take(48 << 10).await;
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.take(32 << 10).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "only 16 KiB are free");
        drop(first);
        let second = waiting.await.unwrap();
        assert_eq!(b.in_use(), 32 << 10);
        drop(second);
        // More than the whole budget takes the whole budget, and waits for nothing else.
        let all = b.take(1 << 30).await;
        assert_eq!(b.in_use(), 64 << 10);
        drop(all);
    }
}
