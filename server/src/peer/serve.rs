//! The target side of the peer plane: accept peers and apply their requests.
//!
//! Each accepted connection is served by one task that applies requests in
//! arrival order — so ops from one origin to this rank take effect in issue
//! order, which is what makes `fence` free — and answers each with a reply
//! carrying its id. Connections from different origins are served in
//! parallel; the windows need no lock (see `window`). Replies to every
//! request already buffered go out in one write.

use super::apply::{Outcome, check_access, classify_and_apply, put_rows, serve_add, serve_put};
use super::handshake::{self, Established};
use super::replies::Replies;
use super::served::ServedWriter;
use super::{RankState, ReadError};
use crate::ratelog::RateLimitedBy;
use crate::transport::Endpoint;
use crate::window::Rows;
use pld_proto::checked::AccessKind;
use pld_proto::frame::{self, Store};
use pld_proto::v1::{ErrorCode, GetReply, Header, Hello, ValueReply, header::Body};
use pld_proto::{MsgKind, OpKind};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// Replies are written once this much has accumulated, even if more
/// requests are buffered.
const FLUSH_AT: usize = 256 * 1024;
/// Payloads at least this large go straight between socket and window
/// (puts always; get replies where the transport writes from raw memory).
const DIRECT_MIN: usize = 64 * 1024;

/// Accepts peers until the endpoint closes (or the task is aborted, which
/// aborts every connection it serves).
pub(crate) async fn accept_loop(state: Arc<RankState>, endpoint: Endpoint) {
    let mut conns = JoinSet::new();
    // A stranger can make a connection fail as often as it likes: at most
    // one line a second of each kind, with a count of the rest.
    let (tls_failed, refused) = (
        RateLimitedBy::every(Duration::from_secs(1)),
        RateLimitedBy::every(Duration::from_secs(1)),
    );
    while let Some(incoming) = endpoint.accept().await {
        while conns.try_join_next().is_some() {}
        let state = state.clone();
        let endpoint = endpoint.clone();
        let (tls_failed, refused) = (tls_failed.clone(), refused.clone());
        conns.spawn(async move {
            let remote = incoming.remote();
            let conn = match tokio::time::timeout(handshake::HELLO_TIMEOUT, incoming.establish())
                .await
            {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    if let Some(why) = crate::tls::auth_failure(&e) {
                        state.stats().auth_refused();
                        if let Some(more) = tls_failed.admit(&why) {
                            tracing::warn!(%remote, "peer connection failed mutual TLS: {why}{more}");
                        }
                        return;
                    }
                    return tracing::debug!(%remote, error = %e, "incoming connection failed");
                }
                Err(_) => return tracing::debug!(%remote, "incoming connection did not complete"),
            };
            match handshake::accept(&state, &endpoint, conn).await {
                Ok(est) => serve(state, est).await,
                Err(why) => {
                    if let Some(more) = refused.admit(why.kind()) {
                        tracing::warn!(%remote, "refused a peer connection: {why}{more}");
                    }
                }
            }
        });
    }
}

async fn serve(state: Arc<RankState>, est: Established) {
    let Established {
        mut reader,
        writer,
        peer,
        remote,
        quic,
    } = est;
    // A lower-ranked peer hears this rank's barrier signals on this
    // connection (see `signal`); what the running barrier sent it over an
    // older one, which may be lost with it, goes again.
    let writer = ServedWriter::new(writer, peer.epoch);
    let signals_here = peer.rank < state.config().rank;
    if signals_here && state.barrier().register_served(peer.rank, &writer) {
        state.barrier().resend_to(peer.rank);
    }
    let span = tracing::info_span!("serve", rank = state.config().rank, peer = peer.rank);
    let _e = span.enter();
    tracing::debug!(%remote, "peer connected");
    drop(_e);
    // Grows as replies need: an idle link (a job holds one to every
    // peer) keeps a small buffer.
    let mut out = Replies::with_capacity(4 * 1024);
    let reason = loop {
        // A plain put or atomic add whole in the buffer (the common small
        // ops) is applied straight from its fields; everything else takes
        // the general path.
        if state.checked().is_none()
            && let Some(p) = reader.peek_store()
            && p.payload_len < DIRECT_MIN
        {
            let payload = reader.store_payload(&p);
            let traced = state.trace().map(|t| (t, std::time::Instant::now()));
            let (op, ok) = match p.store {
                Store::Put => (OpKind::Put, serve_put(&state, &peer, &p, payload, &mut out)),
                Store::AtomicAdd { dtype } => (
                    OpKind::AtomicAdd,
                    serve_add(&state, &peer, &p, dtype, payload, &mut out),
                ),
            };
            if let Some((t, start)) = traced {
                t.applied(peer.rank, op, p.id, start, ok);
            }
            reader.consume_store(p);
            if out.len() >= FLUSH_AT
                && let Err(e) = flush(&state, &writer, &mut out).await
            {
                break format!("write failed: {e}");
            }
            continue;
        }
        let (header, len) = match reader.try_head() {
            Ok(Some(head)) => head,
            Ok(None) => {
                // Nothing more buffered: send what is owed, then read.
                if !out.is_empty()
                    && let Err(e) = flush(&state, &writer, &mut out).await
                {
                    break format!("write failed: {e}");
                }
                match reader.fill().await {
                    Ok(()) => continue,
                    Err(ReadError::Closed) => break "closed by the peer".into(),
                    Err(e) => break e.to_string(),
                }
            }
            Err(e) => {
                // Not a frame: say why, then close; the stream cannot be resynchronised.
                state.stats().frame_error();
                tracing::warn!(peer = peer.rank, %remote, error = %e, "closing a peer connection");
                let reply = frame::encode(&e.to_reply(), &[]);
                out.raw().extend_from_slice(&reply);
                let _ = flush(&state, &writer, &mut out).await;
                writer.shutdown().await;
                reader.drain(Duration::from_secs(1)).await;
                break e.to_string();
            }
        };
        // Replies owed so far go out before anything waits on the socket.
        if (len >= DIRECT_MIN || !reader.payload_buffered())
            && !out.is_empty()
            && let Err(e) = flush(&state, &writer, &mut out).await
        {
            break format!("write failed: {e}");
        }
        // A large put goes from the socket straight into the window.
        if len >= DIRECT_MIN
            && let Some(Body::Put(p)) = &header.body
        {
            state.activity().touch();
            let traced = state.trace().map(|t| (t, std::time::Instant::now()));
            state
                .stats()
                .received(MsgKind::Put, frame::PREFIX_LEN + len);
            let checked = put_rows(&state, p, len).and_then(|(w, rows)| {
                let at = (header.id, header.checked.as_ref());
                check_access(&state, &peer, at, p.window, &rows, AccessKind::Put)?;
                Ok((w, rows))
            });
            let ok = match checked {
                Ok((w, rows)) => {
                    if let Err(e) = reader.payload_into_raw(w.raw_rows(rows)).await {
                        break e.to_string();
                    }
                    w.changed();
                    out.ack(&state, header.id);
                    true
                }
                Err(e) => {
                    if let Err(e) = reader.skip_payload().await {
                        break e.to_string();
                    }
                    out.error(&state, header.id, e.code(), e.to_string());
                    false
                }
            };
            state.stats().served(OpKind::Put, ok);
            if let Some((t, start)) = traced {
                t.applied(peer.rank, OpKind::Put, header.id, start, ok);
            }
            continue;
        }
        // A barrier signal wakes the barrier task: it runs before the next read.
        if matches!(header.body, Some(Body::Barrier(_))) {
            reader.woke_a_task();
        }
        let write_raw = writer.writes_raw();
        // A payload already buffered is served where it lies.
        let served = if reader.payload_buffered() {
            let large_get = serve_request(
                &state,
                &peer,
                header,
                reader.buffered_payload(),
                &mut out,
                write_raw,
            );
            reader.consume_payload();
            large_get
        } else {
            match reader.payload().await {
                Ok(p) => serve_request(&state, &peer, header, &p, &mut out, write_raw),
                Err(e) => break e.to_string(),
            }
        };
        if let Some((window, rows)) = served
            && let Ok(w) = state.windows().get(window)
        {
            // A large get reply: its header is in `out`; the rows follow
            // straight from the window.
            let written = match flush(&state, &writer, &mut out).await {
                Ok(()) => writer.write_raw_all(w.raw_rows(rows)).await,
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                break format!("write failed: {e}");
            }
            state.stats().bytes_out(rows.len());
        }
        if out.len() >= FLUSH_AT
            && let Err(e) = flush(&state, &writer, &mut out).await
        {
            break format!("write failed: {e}");
        }
    };
    out.count_served(&state);
    if signals_here {
        state.barrier().deregister_served(peer.rank, &writer);
    }
    tracing::debug!(peer = peer.rank, %remote, "peer connection ended: {reason}");
    // Let the last replies reach the peer before the connection goes.
    writer.finish().await;
    if let Some(q) = quic {
        q.close(0u32.into(), b"done");
    }
}

async fn flush(state: &RankState, w: &ServedWriter, out: &mut Replies) -> std::io::Result<()> {
    out.count_served(state);
    w.write_all(out.bytes()).await?;
    state.stats().bytes_out(out.len());
    out.clear();
    Ok(())
}

/// Serves one request: applies it and appends its reply to `out`. A large get reply
/// whose rows the writer can send straight from the window gets only its
/// header appended; the rows are returned for the caller to write.
fn serve_request(
    state: &RankState,
    peer: &Hello,
    header: Header,
    payload: &[u8],
    out: &mut Replies,
    write_raw: bool,
) -> Option<(u32, Rows)> {
    state.activity().touch();
    let kind = MsgKind::of(&header);
    state
        .stats()
        .received(kind, frame::PREFIX_LEN + payload.len());
    let id = header.id;
    // A barrier message is one-way: it moves the barrier, nothing answers it.
    if let Some(Body::Barrier(b)) = &header.body {
        state.heard_signal(peer.rank, b, header.checked.as_ref());
        return None;
    }
    let Some(body) = header.body else {
        out.error(
            state,
            id,
            ErrorCode::UnexpectedMessage,
            "a frame without a message".into(),
        );
        return None;
    };
    let at = (id, header.checked.as_ref());
    let traced = state.trace().map(|t| (t, std::time::Instant::now()));
    let Some((op, outcome)) = classify_and_apply(state, peer, at, body, payload) else {
        let msg = format!("a {} is not a request", kind.name());
        out.error(state, id, ErrorCode::UnexpectedMessage, msg);
        return None;
    };
    state.stats().served(op, outcome.is_ok());
    if let Some((t, start)) = traced {
        t.applied(peer.rank, op, id, start, outcome.is_ok());
    }
    match outcome {
        Ok(Outcome::Ack) => out.ack(state, id),
        Ok(Outcome::Value(v, checked)) => {
            let body = Body::Value(ValueReply { previous: v });
            out.push(state, id, body, 0, checked);
        }
        Ok(Outcome::Data { window, rows }) => {
            out.push(state, id, Body::GetReply(GetReply {}), rows.len(), None);
            if write_raw && rows.len() >= DIRECT_MIN {
                return Some((window, rows));
            }
            // Checked in `run`: the window exists and the rows are in it.
            if let Ok(w) = state.windows().get(window) {
                w.append_rows(rows, out.raw());
            }
        }
        Err(e) => {
            tracing::debug!(peer = peer.rank, op = op.name(), id, error = %e, "rejected a request");
            out.error(state, id, e.code(), e.to_string());
        }
    }
    None
}
