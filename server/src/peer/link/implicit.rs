//! The failures of requests no handle waits for ([`Rank::put_nbi`]'s),
//! kept for the next `quiet`.
//!
//! A request issued without a handle has nobody to hand its error to when
//! it fails — refused at the target, on a lost link, at the op timeout.
//! MPI reports such errors at the next synchronisation, and so does pld:
//! the rank keeps the first failure and a count, and its next `quiet` fails
//! with them (then starts afresh). A rank with nothing failed pays one
//! atomic load per `quiet`.
//!
//! [`Rank::put_nbi`]: crate::Rank::put_nbi

use crate::error::Error;
use pld_proto::lock::Locked;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One rank's failed implicit requests since its last `quiet` took them.
#[derive(Debug, Default)]
pub(crate) struct ImplicitFailures {
    /// How many failed; written under `first`'s lock, read without it by
    /// [`ImplicitFailures::take`]'s look for none.
    count: AtomicU64,
    first: Mutex<Option<Error>>,
}

impl ImplicitFailures {
    /// Keeps `error`, a failed implicit request's: the first is kept whole
    /// (and logged), the later ones only counted.
    pub(crate) fn record(&self, error: Error) {
        let mut first = self.first.locked();
        if first.is_none() {
            tracing::warn!("a request without a handle failed; the next quiet reports it: {error}");
            *first = Some(error);
        }
        self.count.fetch_add(1, Ordering::Release);
    }

    /// The failures since the last take, as the error `quiet` returns.
    pub(crate) fn take(&self) -> Option<Error> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut first = self.first.locked();
        let failed = self.count.swap(0, Ordering::AcqRel);
        first.take().map(|first| Error::ImplicitFailed {
            failed,
            first: Box::new(first),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(rank: u32) -> Error {
        Error::PeerLost {
            rank,
            reason: "gone".into(),
        }
    }

    #[test]
    fn quiet_reports_the_first_failure_and_how_many_failed_then_starts_afresh() {
        let f = ImplicitFailures::default();
        assert!(f.take().is_none(), "nothing failed yet");
        f.record(lost(1));
        f.record(lost(2));
        f.record(lost(3));
        match f.take() {
            Some(Error::ImplicitFailed { failed, first }) => {
                assert_eq!(failed, 3);
                assert!(matches!(*first, Error::PeerLost { rank: 1, .. }), "{first}");
            }
            other => panic!("expected the failures, got {other:?}"),
        }
        assert!(f.take().is_none(), "a take empties the record");
        f.record(lost(4));
        let e = f.take().expect("a later failure is kept afresh");
        assert_eq!(
            e.to_string(),
            "1 request(s) issued without a handle failed since the last quiet; \
             the first: rank 4 is unreachable: gone"
        );
    }
}
