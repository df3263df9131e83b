//! The ops of a [`Client`]: each is one unary call (or a stream, above the
//! message limit), issued by the daemon's rank.

use crate::client::{Client, WindowId};
use crate::error::{Error, Result};
use bytes::Bytes;
use pld_proto::geometry::{byte_offset, check_buffer, packed_len, wire_region};
use pld_proto::region::{Chunking, Transfer};
use pld_proto::v1 as pb;
use pld_proto::{Cmp, Dtype, NotifyOp};
use std::time::Duration;

impl Client {
    /// Writes `data` at `offset` of `peer`'s window.
    pub async fn put(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<()> {
        if data.len() > self.max_data() {
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, None, Chunking::default(), false)?,
                    data,
                )
                .await;
        }
        let req = pb::PutRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            data: Bytes::copy_from_slice(data),
            region: None,
        };
        self.call(req, |mut g, r| async move { g.put(r).await })
            .await?;
        Ok(())
    }

    /// Reads `len` bytes at `offset` of `peer`'s window.
    pub async fn get(&self, peer: u32, win: WindowId, offset: u64, len: u64) -> Result<Bytes> {
        if len > self.max_data() as u64 {
            let mut out = vec![0u8; usize::try_from(len).map_err(|_| too_large(len))?];
            self.get_stream_into(peer, win, offset, len, None, Chunking::default(), &mut out)
                .await?;
            return Ok(out.into());
        }
        let req = pb::GetRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            len,
            region: None,
        };
        let r = self
            .call(req, |mut g, r| async move { g.get(r).await })
            .await?;
        Ok(r.data)
    }

    /// Elementwise `window[offset..] += operands`, atomic per element.
    pub async fn atomic_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<()> {
        if operands.len() > self.max_data() {
            let n = (operands.len() / dtype.size().max(1)) as u64;
            let region = pb::Region {
                rows: 1,
                cols: n,
                row_stride: n,
                dtype: dtype as i32,
            };
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, Some(region), Chunking::default(), true)?,
                    operands,
                )
                .await;
        }
        let req = pb::AtomicAddRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(operands),
            region: None,
        };
        self.call(req, |mut g, r| async move { g.atomic_add(r).await })
            .await?;
        Ok(())
    }

    /// Atomically adds `value` to one int32/int64 cell; returns the previous value.
    pub async fn fetch_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64> {
        let req = pb::FetchAddRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            value,
        };
        let r = self
            .call(req, |mut g, r| async move { g.fetch_add(r).await })
            .await?;
        Ok(r.previous)
    }

    /// A single-cell atomic (swap, fetch, set, and / or / xor with or
    /// without fetch), atomic at the target; returns the previous value (0
    /// for set and the non-fetching bitwise ops).
    pub async fn cell_op(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        op: pld_proto::CellOp,
    ) -> Result<i64> {
        let (kind, bit_op, value) = op.to_request();
        let req = pb::CellOpRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            kind: kind as i32,
            value,
            bit_op: bit_op as i32,
        };
        let r = self
            .call(req, |mut g, r| async move { g.cell_op(r).await })
            .await?;
        Ok(r.previous)
    }

    /// Writes `data` at `at` of `peer`, then sets or adds `signal` to the
    /// 8-byte signal cell at `signal_at`: one message on the peer plane.
    /// `data` must fit one gRPC message.
    pub async fn put_signal(
        &self,
        peer: u32,
        at: (WindowId, u64),
        data: &[u8],
        signal_at: (WindowId, u64),
        signal: u64,
        signal_op: NotifyOp,
    ) -> Result<()> {
        let req = pb::PutSignalRequest {
            rank: peer,
            window: self.window_name(at.0)?,
            offset: at.1,
            data: Bytes::copy_from_slice(data),
            signal_window: self.window_name(signal_at.0)?,
            signal_offset: signal_at.1,
            signal,
            signal_op: signal_op as i32,
        };
        self.call(req, |mut g, r| async move { g.put_signal(r).await })
            .await?;
        Ok(())
    }

    /// Atomically swaps one int32/int64 cell holding `expected` for
    /// `desired`; returns the previous value.
    pub async fn compare_swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64> {
        let req = pb::CompareSwapRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            expected,
            desired,
        };
        let r = self
            .call(req, |mut g, r| async move { g.compare_swap(r).await })
            .await?;
        Ok(r.previous)
    }

    /// Sets or adds to an int32 signal cell of `peer`.
    pub async fn notify(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        let req = pb::NotifyRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            value,
            op: op as i32,
        };
        self.call(req, |mut g, r| async move { g.notify(r).await })
            .await?;
        Ok(())
    }

    /// Waits (up to the daemon's sync timeout) until this rank's int32 cell
    /// satisfies `cmp expected`; returns the value that did.
    pub async fn wait(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<i32> {
        self.wait_within(win, offset, cmp, expected, Duration::ZERO)
            .await
    }

    /// [`Client::wait`] with an explicit timeout (zero: the daemon's).
    pub async fn wait_within(
        &self,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
        expected: i32,
        timeout: Duration,
    ) -> Result<i32> {
        let req = pb::WaitRequest {
            window: self.window_name(win)?,
            offset,
            cmp: cmp as i32,
            value: expected,
            timeout_ms: timeout.as_millis() as u64,
        };
        let r = self
            .call(req, |mut g, r| async move { g.wait(r).await })
            .await?;
        Ok(r.value)
    }

    /// Whether this rank's int32 cell satisfies `cmp expected` now.
    pub async fn test(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<bool> {
        let req = pb::TestRequest {
            window: self.window_name(win)?,
            offset,
            cmp: cmp as i32,
            value: expected,
        };
        let r = self
            .call(req, |mut g, r| async move { g.test(r).await })
            .await?;
        Ok(r.satisfied)
    }

    /// This rank enters a barrier (up to the daemon's sync timeout).
    pub async fn barrier(&self) -> Result<()> {
        self.barrier_within(Duration::ZERO).await
    }

    /// [`Client::barrier`] with an explicit timeout (zero: the daemon's).
    pub async fn barrier_within(&self, timeout: Duration) -> Result<()> {
        let req = pb::BarrierRequest {
            timeout_ms: timeout.as_millis() as u64,
        };
        self.call(req, |mut g, r| async move { g.barrier(r).await })
            .await?;
        Ok(())
    }

    /// Waits until every op the daemon's rank issued has completed (for at
    /// most the daemon's op timeout).
    pub async fn quiet(&self) -> Result<()> {
        self.quiet_ms(0).await
    }

    /// [`Client::quiet`] for at most `timeout` (whole milliseconds, at
    /// least one): then it fails naming the ops still outstanding.
    pub async fn quiet_within(&self, timeout: std::time::Duration) -> Result<()> {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.quiet_ms(ms).await
    }

    async fn quiet_ms(&self, timeout_ms: u64) -> Result<()> {
        self.call(pb::QuietRequest { timeout_ms }, |mut g, r| async move {
            g.quiet(r).await
        })
        .await?;
        Ok(())
    }

    /// The daemon's counters.
    pub async fn stats(&self) -> Result<pb::StatsResponse> {
        let r = self
            .call(
                pb::StatsRequest {},
                |mut g, r| async move { g.stats(r).await },
            )
            .await?;
        Ok(r)
    }

    /// Checks `peer` against the cluster: the client's ops are blocking, so
    /// ops to one peer are applied in the order they returned.
    pub fn fence(&self, peer: u32) -> Result<()> {
        if peer >= self.nranks() {
            return Err(Error::InvalidArgument(format!(
                "rank {peer} does not exist: the cluster has ranks 0 to {}",
                self.nranks().saturating_sub(1)
            )));
        }
        Ok(())
    }

    /// Puts a 2-D region (see `pld_proto::Rma::put_region`).
    pub async fn put_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(peer, win, t, src, chunking, false).await
    }

    /// Atomically adds a 2-D region, atomic per element.
    pub async fn atomic_add_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(peer, win, t, src, chunking, true).await
    }

    async fn store_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
        atomic: bool,
    ) -> Result<()> {
        let elem = t.dtype.size() as u64;
        check_buffer(t.src, t.shape, elem, src.len(), "the source buffer")?;
        let packed = pld_proto::region::pack(src, t.src, t.shape, elem);
        // A streamed atomic add needs a region: its dtype says how to add.
        let region = wire_region(t.dtype, t.dst, t.shape).or_else(|| {
            atomic.then_some(pb::Region {
                rows: t.shape.rows,
                cols: t.shape.cols,
                row_stride: t.shape.cols,
                dtype: t.dtype as i32,
            })
        });
        let offset = byte_offset(t.dst, elem)?;
        if packed.len() > self.max_data() || chunking != Chunking::default() {
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, region, chunking, atomic)?,
                    &packed,
                )
                .await;
        }
        let window = self.window_name(win)?;
        let data = Bytes::from(packed);
        if atomic {
            let req = pb::AtomicAddRequest {
                rank: peer,
                window,
                offset,
                dtype: t.dtype as i32,
                data,
                region,
            };
            self.call(req, |mut g, r| async move { g.atomic_add(r).await })
                .await?;
        } else {
            let req = pb::PutRequest {
                rank: peer,
                window,
                offset,
                data,
                region,
            };
            self.call(req, |mut g, r| async move { g.put(r).await })
                .await?;
        }
        Ok(())
    }

    /// Gets a 2-D region of `peer`'s window (`t.src`) into `dst` (`t.dst`).
    pub async fn get_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        dst: &mut [u8],
        chunking: Chunking,
    ) -> Result<()> {
        let elem = t.dtype.size() as u64;
        check_buffer(t.dst, t.shape, elem, dst.len(), "the destination buffer")?;
        let region = wire_region(t.dtype, t.src, t.shape);
        let offset = byte_offset(t.src, elem)?;
        let len = packed_len(t.shape, t.dtype)?;
        let mut packed = vec![0u8; usize::try_from(len).map_err(|_| too_large(len))?];
        if len > self.max_data() as u64 || chunking != Chunking::default() {
            self.get_stream_into(peer, win, offset, len, region, chunking, &mut packed)
                .await?;
        } else {
            let r = self
                .call(
                    pb::GetRequest {
                        rank: peer,
                        window: self.window_name(win)?,
                        offset,
                        len,
                        region,
                    },
                    |mut g, r| async move { g.get(r).await },
                )
                .await?;
            let data = r.data;
            if data.len() != packed.len() {
                return Err(Error::InvalidArgument(format!(
                    "the daemon returned {} bytes for a region of {}",
                    data.len(),
                    packed.len()
                )));
            }
            packed.copy_from_slice(&data);
        }
        pld_proto::region::unpack(&packed, dst, t.dst, t.shape, elem);
        Ok(())
    }
}

fn too_large(len: u64) -> Error {
    Error::InvalidArgument(format!("{len} bytes do not fit in this process's memory"))
}
