//! Rank arithmetic that cannot go wrong silently: the seed's Python
//! expressions `(r - 1) % n` and `(r + 1) % n` are modular there, but on
//! unsigned ranks `r - 1` panics in debug builds and wraps in release (so
//! at P = 3 rank 0 would target rank 4294967295, or itself after a `%`).
//! These helpers compute in signed arithmetic, and every call that names
//! a peer checks it before anything is sent.

use super::*;
use crate::error::{Error, Result};

impl<R: Rma> Device<R> {
    /// The rank `k` places after this one, modulo the world size (Python's
    /// `(my_rank + k) % nranks`, for any signed `k`).
    pub fn peer_next(&self, k: i64) -> u32 {
        let p = i64::from(self.world_size());
        (i64::from(self.rank()) + k).rem_euclid(p) as u32
    }

    /// The rank `k` places before this one, modulo the world size (Python's
    /// `(my_rank - k) % nranks`).
    pub fn peer_prev(&self, k: i64) -> u32 {
        self.peer_next(-k)
    }

    /// `peer` as a rank, or an error naming it if no rank has that id (a
    /// negative or wrapped value included).
    pub fn peer(&self, call: &'static str, peer: i64) -> Result<u32> {
        let p = self.world_size();
        if (0..i64::from(p)).contains(&peer) {
            Ok(peer as u32)
        } else {
            Err(Error::PeerOutOfRange {
                call,
                peer,
                last: p.saturating_sub(1),
            })
        }
    }

    /// Checks a peer an op names, before anything is sent.
    pub(crate) fn check_peer(&self, call: &'static str, peer: u32) -> Result<()> {
        self.peer(call, i64::from(peer)).map(|_| ())
    }
}
