//! The builtin barrier, `pld.tensor.barrier(signal)`: a dissemination
//! barrier through the caller's `[P, 1]` int32 signal.
//!
//! Round k (k = 0 .. ⌈log₂P⌉−1): rank r gives rank (r + 2ᵏ) mod P a credit
//! in cell `[k, 0]` of its signal, then waits for the credit rank
//! (r − 2ᵏ) mod P gives it in its own cell `[k, 0]`, and takes it back.
//! After the last round every rank has heard, directly or through others,
//! from every rank, so none leaves before all arrived. ⌈log₂P⌉ ≤ P rows,
//! so the seed's `[nranks, 1]` signal has room.
//!
//! **Ordering:** the barrier first waits for every op this rank issued
//! (quiet), so every put, atomic and notify issued before it is applied
//! before any rank leaves.
//!
//! **Messages:** each rank sends ⌈log₂P⌉ notifies: P·⌈log₂P⌉ in all (the
//! credits taken back are local).

use super::rounds;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DistributedTensor;
use pld_proto::Rma;

impl<R: Rma> Device<R> {
    /// All ranks arrive before any leaves; orders every remote access
    /// issued before it (`pld.tensor.barrier(signal)`). `signal` is the
    /// seed's `[nranks, 1]` int32 view; it may be reused by the next
    /// barrier.
    pub async fn barrier(&self, signal: &DistributedTensor<i32>) -> Result<()> {
        let p = u64::from(self.world_size());
        let _held = self.take_signal("barrier", signal, [p, 1], "one row per rank")?;
        let traced = self.trace().map(|t| (t, std::time::Instant::now()));
        self.quiet().await?;
        let done = self.disseminate("barrier", signal, 0).await;
        if let Some((t, start)) = traced {
            let name = format!(
                "barrier of {p} ranks ({} rounds)",
                rounds(self.world_size())
            );
            t.span("barrier", name, start, done.is_ok());
        }
        done
    }

    /// The dissemination rounds on column `col` of `signal` (which the
    /// caller has checked and holds).
    pub(crate) async fn disseminate(
        &self,
        call: &'static str,
        signal: &DistributedTensor<i32>,
        col: u64,
    ) -> Result<()> {
        let p = self.world_size();
        for k in 0..rounds(p) {
            let traced = self.trace().map(|t| (t, std::time::Instant::now()));
            let d = 1i64 << k;
            let to = self.peer_next(d);
            self.arrive(signal, to, [u64::from(k), col]).await?;
            let from = self.peer_prev(d);
            let heard = self
                .consume(
                    call,
                    &format!("round {k}"),
                    signal,
                    [u64::from(k), col],
                    from,
                )
                .await;
            // The round on the timeline: the notify's flow runs from here
            // to `to`, and `from`'s into this rank.
            if let Some((t, start)) = traced {
                let name = format!("{call} round {}: credit to {to}, from {from}", k + 1);
                t.span("barrier", name, start, heard.is_ok());
            }
            heard?;
        }
        Ok(())
    }
}
