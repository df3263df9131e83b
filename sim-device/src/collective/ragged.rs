//! The ragged all-to-all (`all_to_all_v`): [`pld_proto::collective`] on a
//! symmetric scratch view of window `data` that grows on demand, sized for
//! what the busiest rank receives. Every rank must call it in the same
//! order as the other collectives.

use crate::device::Device;
use crate::error::{Error, Result};
use pld_proto::collective::{self as coll, Scratch};
use pld_proto::{Rma, Scalar};

impl<R: Rma> Device<R> {
    fn scratch_of<T: Scalar>(&self, elems: u64) -> Result<Scratch<R::Window>> {
        let dt = self.scratch::<T>(elems)?;
        let window = self.rma().window(dt.window()).map_err(|e| Error::Rma {
            rank: self.rank(),
            reason: pld_proto::rma::Reason::reason(&e).into(),
            message: e.to_string(),
        })?;
        Ok(Scratch {
            window,
            base: dt.base(),
            bytes: elems * T::DTYPE.size() as u64,
        })
    }

    fn coll_err(&self) -> impl Fn(coll::Error<R::Error>) -> Error + '_ {
        move |e| match e {
            coll::Error::Invalid { .. } => Error::Usage(e.to_string()),
            e => Error::Rma {
                rank: self.rank(),
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: e.to_string(),
            },
        }
    }

    /// `send[j]` (any length) goes to rank j; returns what each rank sent
    /// this one, by sender.
    pub async fn all_to_all_v<T: Scalar>(&self, send: &[Vec<T>]) -> Result<Vec<Vec<T>>> {
        // Learn every length first, so that every rank sizes the scratch
        // alike (it must be symmetric) for what the busiest rank receives.
        let p = self.world_size() as usize;
        let s0 = self.scratch_of::<i64>((p * p) as u64)?;
        let m = coll::all_to_all_v_counts(self.rma(), &s0, send)
            .await
            .map_err(self.coll_err())?;
        let most = coll::all_to_all_v_largest(&m, p) as u64;
        let s = self.scratch_of::<T>(most.max(1))?;
        coll::all_to_all_v_with(self.rma(), &s, send, &m)
            .await
            .map_err(self.coll_err())
    }
}
