//! The target side of the peer plane: accept peers and apply their requests.
//!
//! Each accepted connection is served by one task that applies requests in
//! arrival order — so ops from one origin to this rank take effect in issue
//! order, which is what makes `fence` free — and answers each with a reply
//! carrying its id. Connections from different origins are served in
//! parallel; the windows need no lock (see `window`). Replies to every
//! request already buffered go out in one write.

use super::handshake::{self, Established};
use super::{RankState, ReadError};
use crate::error::AccessError;
use crate::transport::{Endpoint, PeerWriter};
use crate::window::Rows;
use bytes::BytesMut;
use pld_proto::frame::{self, error_header};
use pld_proto::v1::{Ack, ErrorCode, GetReply, Header, Hello, ValueReply, header::Body};
use pld_proto::{Dtype, Frame, MsgKind, NotifyOp, OpKind};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

/// Replies are written once this much has accumulated, even if more
/// requests are buffered.
const FLUSH_AT: usize = 256 * 1024;

/// Accepts peers until the endpoint closes (or the task is aborted, which
/// aborts every connection it serves).
pub(crate) async fn accept_loop(state: Arc<RankState>, endpoint: Endpoint) {
    let mut conns = JoinSet::new();
    while let Some(incoming) = endpoint.accept().await {
        while conns.try_join_next().is_some() {}
        let state = state.clone();
        conns.spawn(async move {
            let remote = incoming.remote();
            let conn = match tokio::time::timeout(handshake::HELLO_TIMEOUT, incoming.establish())
                .await
            {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return tracing::debug!(%remote, error = %e, "incoming connection failed");
                }
                Err(_) => return tracing::debug!(%remote, "incoming connection did not complete"),
            };
            match handshake::accept(&state, conn).await {
                Ok(est) => serve(state, est).await,
                Err(why) => tracing::warn!(%remote, "refused a peer connection: {why}"),
            }
        });
    }
}

async fn serve(state: Arc<RankState>, est: Established) {
    let Established {
        mut reader,
        mut writer,
        peer,
        remote,
        quic,
    } = est;
    let span = tracing::info_span!("serve", rank = state.config.rank, peer = peer.rank);
    let _e = span.enter();
    tracing::debug!(%remote, "peer connected");
    drop(_e);
    let mut out = BytesMut::with_capacity(64 * 1024);
    let reason = loop {
        match reader.decode_buffered() {
            Ok(Some(f)) => {
                apply(&state, &peer, f, &mut out);
                if out.len() >= FLUSH_AT
                    && let Err(e) = flush(&state, &mut writer, &mut out).await
                {
                    break format!("write failed: {e}");
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                // Not a frame: say why, then close; the stream cannot be resynchronised.
                state.stats.frame_error();
                tracing::warn!(peer = peer.rank, %remote, error = %e, "closing a peer connection");
                let reply = frame::encode(&e.to_reply(), &[]);
                out.extend_from_slice(&reply);
                let _ = flush(&state, &mut writer, &mut out).await;
                let _ = writer.shutdown().await;
                reader.drain(Duration::from_secs(1)).await;
                break e.to_string();
            }
        }
        if !out.is_empty()
            && let Err(e) = flush(&state, &mut writer, &mut out).await
        {
            break format!("write failed: {e}");
        }
        match reader.fill().await {
            Ok(()) => {}
            Err(ReadError::Closed) => break "closed by the peer".into(),
            Err(e) => break e.to_string(),
        }
    };
    tracing::debug!(peer = peer.rank, %remote, "peer connection ended: {reason}");
    // Let the last replies reach the peer before the connection goes.
    super::link::finish(&mut writer).await;
    if let Some(q) = quic {
        q.close(0u32.into(), b"done");
    }
}

async fn flush(state: &RankState, w: &mut PeerWriter, out: &mut BytesMut) -> std::io::Result<()> {
    w.write_all(out).await?;
    state.stats.bytes_out(out.len());
    out.clear();
    Ok(())
}

/// What a request produced.
enum Outcome {
    Ack,
    /// A get: the region's rows of window `window` (checked).
    Data {
        window: u32,
        rows: Rows,
    },
    Value(i64),
}

/// Applies one request and appends its reply to `out`.
fn apply(state: &RankState, peer: &Hello, f: Frame, out: &mut BytesMut) {
    state.activity.touch();
    let kind = MsgKind::of(&f.header);
    state
        .stats
        .received(kind, frame::PREFIX_LEN + f.payload.len());
    let id = f.header.id;
    // A barrier message is one-way: it moves the barrier, nothing answers it.
    if let Some(Body::Barrier(b)) = &f.header.body {
        let accepted = state
            .barrier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_message(peer.rank, b.epoch, b.round);
        match accepted {
            Ok(()) => state.barrier_wake.notify_waiters(),
            Err(e) => {
                state.stats.frame_error();
                tracing::warn!(peer = peer.rank, "ignored a barrier message: {e}");
            }
        }
        return;
    }
    let Some(body) = f.header.body else {
        return reply_error(
            state,
            out,
            id,
            ErrorCode::UnexpectedMessage,
            "a frame without a message".into(),
        );
    };
    let Some((op, outcome)) = execute(state, peer, body, &f.payload) else {
        let msg = format!("a {} is not a request", kind.name());
        return reply_error(state, out, id, ErrorCode::UnexpectedMessage, msg);
    };
    state.stats.served(op, outcome.is_ok());
    match outcome {
        Ok(Outcome::Ack) => push(state, out, id, Body::Ack(Ack {}), 0),
        Ok(Outcome::Value(v)) => push(state, out, id, Body::Value(ValueReply { previous: v }), 0),
        Ok(Outcome::Data { window, rows }) => {
            push(state, out, id, Body::GetReply(GetReply {}), rows.len());
            let start = out.len();
            out.resize(start + rows.len(), 0);
            // Checked in `run`; cannot fail here.
            if let Ok(w) = state.windows.get(window) {
                let _ = w.read_rows_into(rows, &mut out[start..]);
            }
        }
        Err(e) => {
            tracing::debug!(peer = peer.rank, op = op.name(), id, error = %e, "rejected a request");
            reply_error(state, out, id, e.code(), e.to_string());
        }
    }
}

/// Runs a request; `None` if the body is not a request at all.
fn execute(
    state: &RankState,
    peer: &Hello,
    body: Body,
    payload: &[u8],
) -> Option<(OpKind, Result<Outcome, AccessError>)> {
    let op = match &body {
        Body::Put(_) => OpKind::Put,
        Body::Get(_) => OpKind::Get,
        Body::AtomicAdd(_) => OpKind::AtomicAdd,
        Body::FetchAdd(_) => OpKind::FetchAdd,
        Body::CompareSwap(_) => OpKind::CompareSwap,
        Body::Notify(_) => OpKind::Notify,
        _ => return None,
    };
    Some((op, run(state, peer, body, payload)))
}

fn run(
    state: &RankState,
    peer: &Hello,
    body: Body,
    payload: &[u8],
) -> Result<Outcome, AccessError> {
    let dtype = |v: i32| Dtype::from_wire(v).ok_or(AccessError::UnknownDtype { value: v });
    match body {
        Body::Put(r) => {
            let w = state.windows.get(r.window)?;
            match &r.region {
                None => w.write(r.offset, payload)?,
                Some(region) => w.write_rows(w.check_region(r.offset, region)?, payload)?,
            }
            Ok(Outcome::Ack)
        }
        Body::Get(r) => {
            let w = state.windows.get(r.window)?;
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
            Ok(Outcome::Data {
                window: r.window,
                rows,
            })
        }
        Body::AtomicAdd(r) => {
            let w = state.windows.get(r.window)?;
            let d = dtype(r.dtype)?;
            match &r.region {
                None => w.atomic_add(r.offset, d, payload)?,
                Some(region) => {
                    if region.dtype != r.dtype {
                        return Err(AccessError::BadRegion {
                            reason: format!(
                                "the region's dtype {} differs from the add's {d}",
                                dtype(region.dtype)?
                            ),
                        });
                    }
                    w.atomic_add_rows(w.check_region(r.offset, region)?, d, payload)?
                }
            }
            Ok(Outcome::Ack)
        }
        Body::FetchAdd(r) => {
            let w = state.windows.get(r.window)?;
            Ok(Outcome::Value(w.fetch_add(
                r.offset,
                dtype(r.dtype)?,
                r.value,
            )?))
        }
        Body::CompareSwap(r) => {
            let w = state.windows.get(r.window)?;
            let d = dtype(r.dtype)?;
            Ok(Outcome::Value(
                w.compare_swap(r.offset, d, r.expected, r.desired)?,
            ))
        }
        Body::Notify(r) => {
            let w = state.windows.get(r.window)?;
            let op = match NotifyOp::try_from(r.op) {
                Ok(op @ (NotifyOp::Set | NotifyOp::AtomicAdd)) => op,
                _ => return Err(AccessError::InvalidNotifyOp { value: r.op }),
            };
            w.notify(r.offset, op, r.value)?;
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

fn push(state: &RankState, out: &mut BytesMut, id: u64, body: Body, payload_len: usize) {
    let header = Header {
        id,
        body: Some(body),
    };
    state.stats.msg_sent(MsgKind::of(&header));
    frame::encode_head(&header, payload_len, out);
}

fn reply_error(state: &RankState, out: &mut BytesMut, id: u64, code: ErrorCode, message: String) {
    let header = error_header(id, code, message);
    state.stats.msg_sent(MsgKind::Error);
    frame::encode_head(&header, 0, out);
}
