//! Applying a peer's requests to this rank's windows: the checks, the
//! checked-mode access records, and what each request produced. The
//! store fast paths (`serve_put`, `serve_add`) do for a plain put or
//! atomic add what `apply_to_window` does, without its `Header`.

use super::RankState;
use super::replies::Replies;
use crate::error::AccessError;
use crate::window::{Rows, Window};
use pld_proto::checked::AccessKind;
use pld_proto::frame::{self, StoreFrame};
use pld_proto::v1::{CheckedStamp, Hello, PeerPut, header::Body};
use pld_proto::{CellOp, Dtype, MsgKind, NotifyOp, OpKind, ReplyShape};

/// What a request produced.
pub(super) enum Outcome {
    Ack,
    /// A get: the region's rows of window `window` (checked).
    Data {
        window: u32,
        rows: Rows,
    },
    /// A fetching atomic's previous value, and in checked mode the stamp
    /// its reply carries.
    Value(i64, Option<CheckedStamp>),
}

/// A plain put found whole in the buffer: what `serve_request` does with
/// it, without building its `Header`. Whether it was applied.
pub(super) fn serve_put(
    state: &RankState,
    peer: &Hello,
    p: &StoreFrame,
    payload: &[u8],
    out: &mut Replies,
) -> bool {
    // A put without a region is one range: `Window::write` checks and
    // copies it, as `put_rows` + `write_rows` would, without their `Rows`.
    let applied = (state.windows().get(p.window)).and_then(|w| w.write(p.offset, payload));
    let bytes = frame::PREFIX_LEN + payload.len();
    match applied {
        // Counted with the run it is answered in (`Replies::count_served`).
        Ok(()) => {
            out.served_put(bytes);
            out.ack(state, p.id);
            true
        }
        Err(e) => {
            state.activity().touch();
            state.stats().received(MsgKind::Put, bytes);
            state.stats().served(OpKind::Put, false);
            tracing::debug!(peer = peer.rank, op = "put", id = p.id, error = %e, "rejected a request");
            out.error(state, p.id, e.code(), e.to_string());
            false
        }
    }
}

/// A plain atomic add found whole in the buffer: what `serve_request`
/// does with it (the same checks in the same order, so the same error),
/// without building its `Header`. Whether it was applied.
pub(super) fn serve_add(
    state: &RankState,
    peer: &Hello,
    p: &StoreFrame,
    dtype: i32,
    payload: &[u8],
    out: &mut Replies,
) -> bool {
    state.activity().touch();
    state
        .stats()
        .received(MsgKind::AtomicAdd, frame::PREFIX_LEN + payload.len());
    let applied = state.windows().get(p.window).and_then(|w| {
        let d = Dtype::from_wire(dtype).ok_or(AccessError::UnknownDtype { value: dtype })?;
        w.check_contiguous(p.offset, payload.len() as u64)?;
        w.atomic_add(p.offset, d, payload)
    });
    state.stats().served(OpKind::AtomicAdd, applied.is_ok());
    match applied {
        Ok(()) => {
            out.ack(state, p.id);
            true
        }
        Err(e) => {
            tracing::debug!(peer = peer.rank, op = "atomic_add", id = p.id, error = %e, "rejected a request");
            out.error(state, p.id, e.code(), e.to_string());
            false
        }
    }
}

/// Where a put lands: its window and rows, checked against the payload's
/// length. Shared by the buffered path and the straight-into-the-window one.
pub(super) fn put_rows<'s>(
    state: &'s RankState,
    r: &PeerPut,
    len: usize,
) -> Result<(&'s Window, Rows), AccessError> {
    let w = state.windows().get(r.window)?;
    let rows = match &r.region {
        None => w.check_contiguous(r.offset, len as u64)?,
        Some(region) => w.check_region(r.offset, region)?,
    };
    if rows.len() != len {
        return Err(AccessError::PayloadLength {
            expected: rows.len() as u64,
            got: len as u64,
        });
    }
    Ok((w, rows))
}

/// The op a request body asks for and its outcome; `None` if the body is
/// not a request at all.
pub(super) fn classify_and_apply(
    state: &RankState,
    peer: &Hello,
    at: At<'_>,
    body: Body,
    payload: &[u8],
) -> Option<(OpKind, Result<Outcome, AccessError>)> {
    let op = OpKind::of_request(&body)?;
    Some((op, apply_to_window(state, peer, at, body, payload)))
}

/// A request's id and, in checked mode, its stamp.
pub(super) type At<'a> = (u64, Option<&'a CheckedStamp>);

/// Checked mode: records a peer's access to `rows` of `window`; in strict
/// mode a racing access is refused (and not applied).
pub(super) fn check_access(
    state: &RankState,
    peer: &Hello,
    (id, stamp): At<'_>,
    window: u32,
    rows: &Rows,
    kind: AccessKind,
) -> Result<(), AccessError> {
    let Some(c) = state.checked() else {
        return Ok(());
    };
    let zero = CheckedStamp::default();
    let from = (peer.rank, id, stamp.unwrap_or(&zero));
    let result = c.access(window, &rows.byte_ranges(), kind, Some(from));
    state.stats().set_checked(c.counters());
    result.map_err(|report| AccessError::Race { report })
}

/// Applies one request to this rank's windows.
fn apply_to_window(
    state: &RankState,
    peer: &Hello,
    at: At<'_>,
    body: Body,
    payload: &[u8],
) -> Result<Outcome, AccessError> {
    let dtype = |v: i32| Dtype::from_wire(v).ok_or(AccessError::UnknownDtype { value: v });
    let check = |window: u32, rows: &Rows, kind| check_access(state, peer, at, window, rows, kind);
    match body {
        Body::Put(r) => {
            let (w, rows) = put_rows(state, &r, payload.len())?;
            check(r.window, &rows, AccessKind::Put)?;
            w.write_rows(rows, payload)?;
            Ok(Outcome::Ack)
        }
        Body::Get(r) => {
            let w = state.windows().get(r.window)?;
            let rows = match &r.region {
                None => w.check_contiguous(r.offset, r.len)?,
                Some(region) => w.check_region(r.offset, region)?,
            };
            // The reply must fit the origin's frame limit; origins split
            // bigger gets, so only a broken peer asks for more.
            if rows.len() as u64 > peer.max_payload {
                return Err(AccessError::ReplyTooLarge {
                    len: rows.len() as u64,
                    max: peer.max_payload,
                });
            }
            check(r.window, &rows, AccessKind::Get)?;
            Ok(Outcome::Data {
                window: r.window,
                rows,
            })
        }
        Body::AtomicAdd(r) => {
            let w = state.windows().get(r.window)?;
            let d = dtype(r.dtype)?;
            match &r.region {
                None => {
                    let rows = w.check_contiguous(r.offset, payload.len() as u64)?;
                    check(r.window, &rows, AccessKind::AtomicAdd)?;
                    w.atomic_add(r.offset, d, payload)?
                }
                Some(region) => {
                    if region.dtype != r.dtype {
                        return Err(AccessError::BadRegion {
                            reason: format!(
                                "the region's dtype {} differs from the add's {d}",
                                dtype(region.dtype)?
                            ),
                        });
                    }
                    let rows = w.check_region(r.offset, region)?;
                    check(r.window, &rows, AccessKind::AtomicAdd)?;
                    w.atomic_add_rows(rows, d, payload)?
                }
            }
            Ok(Outcome::Ack)
        }
        Body::FetchAdd(r) => {
            let w = state.windows().get(r.window)?;
            let d = dtype(r.dtype)?;
            atomic(
                state,
                at,
                r.window,
                r.offset,
                d,
                AccessKind::FetchAdd,
                &check,
                || w.fetch_add(r.offset, d, r.value),
            )
        }
        Body::CompareSwap(r) => {
            let w = state.windows().get(r.window)?;
            let d = dtype(r.dtype)?;
            atomic(
                state,
                at,
                r.window,
                r.offset,
                d,
                AccessKind::CompareSwap,
                &check,
                || w.compare_swap(r.offset, d, r.expected, r.desired),
            )
        }
        Body::Notify(r) => {
            let w = state.windows().get(r.window)?;
            let op = match NotifyOp::try_from(r.op) {
                Ok(op @ (NotifyOp::Set | NotifyOp::AtomicAdd)) => op,
                _ => return Err(AccessError::InvalidNotifyOp { value: r.op }),
            };
            match state.checked() {
                Some(c) => {
                    // The cell's bytes, as the atomic the notify is: a
                    // reader of the cell that no wait orders after it
                    // races with it.
                    let rows = w.check_contiguous(r.offset, 4)?;
                    if let Some(kind) = AccessKind::of_notify(op) {
                        check(r.window, &rows, kind)?;
                    }
                    c.notify(r.window, r.offset, at.1, op, r.value, || {
                        w.notify(r.offset, op, r.value)
                    })?
                }
                None => w.notify(r.offset, op, r.value)?,
            };
            Ok(Outcome::Ack)
        }
        Body::Swap(_)
        | Body::Fetch(_)
        | Body::Set(_)
        | Body::AtomicBitwise(_)
        | Body::FetchBitwise(_) => {
            let (r, op) = match CellOp::of_body(&body) {
                Some(Ok(parsed)) => parsed,
                Some(Err(e)) => return Err(AccessError::InvalidBitOp { value: e.value }),
                None => return Err(AccessError::NotARequest),
            };
            let w = state.windows().get(r.window)?;
            let d = dtype(r.dtype)?;
            let kind = op.kind().access().unwrap_or(AccessKind::Atomic);
            let outcome = atomic(state, at, r.window, r.offset, d, kind, &check, || {
                w.cell_op(r.offset, d, op)
            })?;
            Ok(match op.kind().reply() {
                ReplyShape::Value => outcome,
                ReplyShape::Ack | ReplyShape::Data => Outcome::Ack,
            })
        }
        Body::PutSignal(r) => {
            let w = state.windows().get(r.window)?;
            let rows = w.check_contiguous(r.offset, payload.len() as u64)?;
            let sw = state.windows().get(r.signal_window)?;
            sw.check_elems(r.signal_offset, 8, Dtype::Int64)?;
            let op = match NotifyOp::try_from(r.signal_op) {
                Ok(op @ (NotifyOp::Set | NotifyOp::AtomicAdd)) => op,
                _ => return Err(AccessError::InvalidNotifyOp { value: r.signal_op }),
            };
            check(r.window, &rows, AccessKind::Put)?;
            w.write_rows(rows, payload)?;
            // The signal after the data, with release ordering: whoever
            // sees it sees the bytes.
            let signal = || sw.signal64(r.signal_offset, op, r.signal);
            match state.checked() {
                Some(c) => {
                    let rows = sw.check_contiguous(r.signal_offset, 8)?;
                    if let Some(kind) = AccessKind::of_notify(op) {
                        check(r.signal_window, &rows, kind)?;
                    }
                    c.atomic(r.signal_window, r.signal_offset, at.1, signal)?.0
                }
                None => signal()?,
            };
            Ok(Outcome::Ack)
        }
        // Not requests: `execute` returned before calling.
        Body::Hello(_)
        | Body::Barrier(_)
        | Body::Ack(_)
        | Body::GetReply(_)
        | Body::Value(_)
        | Body::Error(_) => Err(AccessError::NotARequest),
    }
}

/// A fetching atomic: checked mode records it as an access to its cell and
/// applies it under the detector's lock, so that its reply's stamp holds
/// the atomics applied before it on the cell, in order.
#[allow(clippy::too_many_arguments)]
fn atomic(
    state: &RankState,
    at: At<'_>,
    window: u32,
    offset: u64,
    dtype: Dtype,
    kind: AccessKind,
    check: &dyn Fn(u32, &Rows, AccessKind) -> Result<(), AccessError>,
    apply: impl FnOnce() -> Result<i64, AccessError>,
) -> Result<Outcome, AccessError> {
    let Some(c) = state.checked() else {
        return Ok(Outcome::Value(apply()?, None));
    };
    let w = state.windows().get(window)?;
    let rows = w.check_contiguous(offset, dtype.size() as u64)?;
    check(window, &rows, kind)?;
    let (v, stamp) = c.atomic(window, offset, at.1, apply)?;
    Ok(Outcome::Value(v, Some(stamp)))
}
