//! `Batch`: many small ops from one client in one call. Every op is
//! issued non-blocking, in the request's order, before any is waited for —
//! so ops to one target leave together in one write of the peer plane and
//! come back under one cumulative acknowledgement — and the call answers
//! once all have completed, with each op's own result or error.

use super::request::{dtype, notify_op, window};
use super::{Error, Shared};
use crate::rank::{OpHandle, Rank};
use bytes::Bytes;
use pld_proto::v1::{BatchOp, BatchRequest, BatchResponse, BatchResult, batch_op::Op};
use tonic::Status;

/// The most ops one Batch may carry.
pub(crate) const MAX_OPS: usize = 65_536;

/// An issued op, or why it never was.
enum Issued {
    Done(OpHandle<()>),
    Data(OpHandle<Bytes>),
    Value(OpHandle<i64>),
    Refused(Status),
}

/// Runs a Batch on `rank`.
pub(crate) async fn run(shared: &Shared, req: BatchRequest) -> Result<BatchResponse, Error> {
    let rank = shared.rank()?;
    if req.ops.len() > MAX_OPS {
        return Err(Error::invalid(
            "Batch",
            format!("{} ops exceed the limit of {MAX_OPS}", req.ops.len()),
        ));
    }
    // Replies must fit one message as the request had to.
    let reply_bytes: u64 = req
        .ops
        .iter()
        .map(|o| match &o.op {
            Some(Op::Get(g)) => g.len,
            _ => 0,
        })
        .sum();
    if reply_bytes > shared.max_data as u64 {
        return Err(Error::TooLarge {
            call: "Batch",
            len: reply_bytes,
            max: shared.max_data as u64,
            instead: "GetStream",
        });
    }
    let mut issued = Vec::with_capacity(req.ops.len());
    for (i, op) in req.ops.into_iter().enumerate() {
        issued.push(match issue(rank, op).await {
            Ok(h) => h,
            Err(e) => Issued::Refused(status(i, e)),
        });
    }
    let mut results = Vec::with_capacity(issued.len());
    for (i, h) in issued.into_iter().enumerate() {
        let mut r = BatchResult::default();
        let outcome = match h {
            Issued::Done(h) => h.wait().await,
            Issued::Data(h) => h.wait().await.map(|b| r.data = b),
            Issued::Value(h) => h.wait().await.map(|v| r.previous = v),
            Issued::Refused(s) => {
                (r.code, r.message) = (s.code() as i32, s.message().to_string());
                Ok(())
            }
        };
        if let Err(e) = outcome {
            let s = status(i, Error::from(e));
            (r.code, r.message) = (s.code() as i32, s.message().to_string());
        }
        results.push(r);
    }
    Ok(BatchResponse { results })
}

/// The status op `i` would have failed with as a call of its own, its
/// message naming the op's place in the batch.
fn status(i: usize, e: Error) -> Status {
    let s: Status = e.into();
    Status::new(s.code(), format!("op {i}: {}", s.message()))
}

/// Issues one op without waiting for it.
async fn issue(rank: &Rank, op: BatchOp) -> Result<Issued, Error> {
    let contiguous = |call: &'static str, region: bool| match region {
        true => Err(Error::invalid(
            call,
            "a batch carries contiguous ops only; send a region with its own call",
        )),
        false => Ok(()),
    };
    Ok(match op.op {
        None => return Err(Error::invalid("Batch", "an op with no kind")),
        Some(Op::Put(r)) => {
            contiguous("Put", r.region.is_some())?;
            let win = window(rank, &r.window)?;
            Issued::Done(rank.put_nb(r.rank, win, r.offset, &r.data).await?)
        }
        Some(Op::Get(r)) => {
            contiguous("Get", r.region.is_some())?;
            let win = window(rank, &r.window)?;
            Issued::Data(rank.get_nb(r.rank, win, r.offset, r.len).await?)
        }
        Some(Op::AtomicAdd(r)) => {
            contiguous("AtomicAdd", r.region.is_some())?;
            let win = window(rank, &r.window)?;
            let dt = dtype("AtomicAdd", r.dtype)?;
            Issued::Done(
                rank.atomic_add_nb(r.rank, win, r.offset, dt, &r.data)
                    .await?,
            )
        }
        Some(Op::FetchAdd(r)) => {
            let win = window(rank, &r.window)?;
            let dt = dtype("FetchAdd", r.dtype)?;
            Issued::Value(
                rank.fetch_add_nb(r.rank, win, r.offset, dt, r.value)
                    .await?,
            )
        }
        Some(Op::CompareSwap(r)) => {
            let win = window(rank, &r.window)?;
            let dt = dtype("CompareSwap", r.dtype)?;
            let h = rank
                .compare_swap_nb(r.rank, win, r.offset, dt, r.expected, r.desired)
                .await?;
            Issued::Value(h)
        }
        Some(Op::Notify(r)) => {
            let win = window(rank, &r.window)?;
            let op = notify_op("Notify", r.op)?;
            Issued::Done(rank.notify_nb(r.rank, win, r.offset, r.value, op).await?)
        }
    })
}
