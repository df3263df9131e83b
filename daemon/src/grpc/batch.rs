//! `Batch`: many small ops from one client in one call. Every op is
//! issued non-blocking, in the request's order, before any is waited for —
//! so ops to one target leave together in one write of the peer plane and
//! come back under one cumulative acknowledgement — and the call answers
//! once all have completed, with each op's own result or error.

use super::request::{dtype, notify_op, window};
use super::{Error, Shared};
use bytes::Bytes;
use pld_proto::v1::{BatchOp, BatchRequest, BatchResponse, BatchResult, batch_op::Op};
use pld_server::{OpHandle, Rank};
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
    // Replies must fit one message as the request had to. The lengths are
    // the client's: summed without wrapping (a sum that overflows is over
    // any limit).
    let reply_bytes = req
        .ops
        .iter()
        .try_fold(0u64, |sum, o| match &o.op {
            Some(Op::Get(g)) => sum.checked_add(g.len),
            _ => Some(sum),
        })
        .unwrap_or(u64::MAX);
    if reply_bytes > shared.max_data as u64 {
        return Err(Error::TooLarge {
            call: "Batch",
            len: reply_bytes,
            max: shared.max_data as u64,
            instead: "GetStream",
        });
    }
    // And with every result's framing: refused before any op is applied,
    // so that the reply (messages shortened to fit, see `fit`) always fits.
    let limit = shared.message_limit() as u64;
    let framed = reply_bytes + req.ops.len() as u64 * RESULT_FRAMING;
    if framed > limit {
        return Err(Error::TooLarge {
            call: "Batch",
            len: framed,
            max: limit,
            instead: "several smaller Batches",
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
    let mut reply = BatchResponse { results };
    fit(&mut reply, limit as usize);
    Ok(reply)
}

/// What one result's encoding takes at most besides its data and message
/// bytes: its own tag and length, the code, the message's tag and length,
/// the data's tag and length, and `previous` (a negative int64 is 10
/// bytes). Checked by a unit test.
const RESULT_FRAMING: u64 = 32;

/// Shortens the results' messages, evenly, until `reply` encodes within
/// `limit` bytes. The codes and data always fit: [`run`] refused a batch
/// whose data and framing would not.
fn fit(reply: &mut BatchResponse, limit: usize) {
    use prost::Message;
    let over = reply.encoded_len().saturating_sub(limit);
    if over == 0 {
        return;
    }
    let messages: usize = reply.results.iter().map(|r| r.message.len()).sum();
    let failed = reply
        .results
        .iter()
        .filter(|r| !r.message.is_empty())
        .count();
    // Room for messages: what they take now less what is over.
    let each = messages.saturating_sub(over) / failed.max(1);
    for r in reply.results.iter_mut() {
        if r.message.len() > each {
            let mut end = each;
            while !r.message.is_char_boundary(end) {
                end -= 1;
            }
            r.message.truncate(end);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The largest result with no data and no message bytes.
    fn widest() -> BatchResult {
        BatchResult {
            code: tonic::Code::Unauthenticated as i32,
            message: String::new(),
            data: Bytes::new(),
            previous: i64::MIN,
        }
    }

    #[test]
    fn a_result_s_framing_is_within_its_bound() {
        // The largest lengths a result can carry: data of the largest
        // message limit, a message of the status cap.
        let mut r = widest();
        r.data = Bytes::from(vec![0u8; (256 << 20) + (64 << 10)]);
        r.message = "m".repeat(super::super::error::MAX_MESSAGE + 64);
        let reply = BatchResponse {
            results: vec![r.clone()],
        };
        let framing = reply.encoded_len() - r.data.len() - r.message.len();
        assert!(framing as u64 <= RESULT_FRAMING, "{framing} bytes");
    }

    #[test]
    fn messages_are_shortened_until_the_reply_fits() {
        let mut r = widest();
        r.message = "x".repeat(1000);
        let mut reply = BatchResponse {
            results: vec![r; 1000],
        };
        let limit = 1000 * RESULT_FRAMING as usize + 100_000;
        assert!(reply.encoded_len() > limit);
        fit(&mut reply, limit);
        assert!(reply.encoded_len() <= limit, "{}", reply.encoded_len());
        assert!(reply.results.iter().all(|r| r.message.len() >= 90));
    }
}
