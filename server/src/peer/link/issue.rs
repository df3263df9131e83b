//! The one way onto a link: an [`Issue`] — what the request asks, its
//! payload, who takes its reply — and [`Link::issue`].
//!
//! A small request is queued in the outbox (see `outbox`) and a flush
//! scheduled; a large one is written at once, behind what is queued.
//! [`Link::queue`] is the synchronous part of `issue` for small requests:
//! the rank's hottest paths call it directly, in place, so that a small
//! put costs no future of its own. A barrier signal is not a request (no
//! id, no reply): [`Link::signal`] writes its frame at once.

use super::outbox::{COALESCE_MAX, Queued};
use super::{Link, Pending, Waiter};
use crate::error::{Error, Result};
use crate::transport::Raw;
use bytes::BytesMut;
use pld_proto::frame::{Store, encode_head, encode_store_head};
use pld_proto::track::PeerOps;
use pld_proto::v1::{Header, header::Body};
use pld_proto::{MsgKind, OpKind};
use std::sync::Arc;
use std::time::Instant;

/// What a request asks of its target, built once by its caller.
#[derive(Debug)]
pub(crate) enum Request {
    /// A plain put or atomic add (no region): its frame head is written
    /// straight from these fields (`pld_proto::frame::store`), except in
    /// checked mode, where every request carries a stamp.
    Store {
        store: Store,
        window: u32,
        offset: u64,
    },
    /// Any other request: a get, a fetching atomic, a notify, a 2-D store.
    Body(Body),
}

/// Who takes a request's reply.
#[derive(Debug)]
pub(crate) enum ReplyTo {
    /// A handle ([`Pending`]); a get's bytes go into the buffer if there
    /// is one, straight from the socket.
    Handle(Option<BytesMut>),
    /// No handle: a failure goes to the next `quiet` (`put_nbi`).
    Implicit,
    /// No handle, and a get's bytes land in this rank's own window memory
    /// straight from the socket (`get_nbi`); a failure goes to the next
    /// `quiet`.
    Landing(Raw),
}

/// One request to issue on a link.
#[derive(Debug)]
pub(crate) struct Issue<'a> {
    pub(crate) request: Request,
    pub(crate) payload: &'a [u8],
    pub(crate) reply: ReplyTo,
}

impl<'a> Issue<'a> {
    /// A plain put or atomic add of `payload` at `offset` of `window`.
    #[inline(always)]
    pub(crate) fn store(
        store: Store,
        window: u32,
        offset: u64,
        payload: &'a [u8],
        reply: ReplyTo,
    ) -> Self {
        Issue {
            request: Request::Store {
                store,
                window,
                offset,
            },
            payload,
            reply,
        }
    }

    /// Any other request, with `payload` (most have none).
    pub(crate) fn body(body: Body, payload: &'a [u8], reply: ReplyTo) -> Self {
        Issue {
            request: Request::Body(body),
            payload,
            reply,
        }
    }

    /// The op the request is (`to`: the peer, for the error of a body
    /// that is no request, which no caller builds).
    #[inline(always)]
    fn op(&self, to: u32) -> Result<OpKind> {
        match &self.request {
            Request::Store { store, .. } => Ok(store.op()),
            Request::Body(body) => OpKind::of_request(body).ok_or_else(|| Error::Protocol {
                rank: to,
                reason: "a link issues requests only (a hello, a signal or a reply is none)".into(),
            }),
        }
    }
}

impl Link {
    /// Issues one request; its id (for a [`ReplyTo::Handle`], its handle
    /// is `Pending::new(link, id)`). A small request is queued and a flush
    /// scheduled (written now if the outbox is full); a large one is
    /// written at once.
    pub async fn issue(&self, issue: Issue<'_>) -> Result<u64> {
        if issue.payload.len() > COALESCE_MAX {
            return self.write_large(issue).await;
        }
        let (id, full) = self.queue(issue)?;
        if full {
            self.flush().await;
        }
        Ok(id)
    }

    /// Issues a request a handle waits for: [`Link::issue`] with
    /// [`ReplyTo::Handle`], the handle made of the link and the id.
    pub async fn request(self: &Arc<Self>, issue: Issue<'_>) -> Result<Pending> {
        debug_assert!(matches!(issue.reply, ReplyTo::Handle(_)));
        let id = self.issue(issue).await?;
        Ok(Pending::new(self.clone(), id))
    }

    /// Queues a small request (its payload at most `COALESCE_MAX` bytes)
    /// and schedules a flush: nothing is written here, so no await.
    /// Returns its id (a handle is `Pending::new(link, id)`) and whether
    /// the outbox is full enough that the caller should [`Link::flush`]
    /// now. The op counts as issued, and its frame as sent, when the
    /// flush takes it.
    #[inline(always)]
    pub fn queue(&self, issue: Issue<'_>) -> Result<(u64, bool)> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        debug_assert!(issue.payload.len() <= COALESCE_MAX);
        let op = issue.op(self.peer)?;
        let Issue {
            request,
            payload,
            reply,
        } = issue;
        let checked = self.state.checked().is_some();
        Ok(self.outbox.queue(|buf, now| match request {
            // The common small ops, and the message-rate benchmark's: no
            // `Header` or `Body` is built.
            Request::Store {
                store,
                window,
                offset,
            } if !checked => {
                let id = self.take_id(|ops| ops.issue(op, now, reply.waiter()));
                encode_store_head(id, store, window, offset, payload.len(), buf);
                buf.extend_from_slice(payload);
                Queued {
                    op,
                    kind: store.msg_kind(),
                    id,
                }
            }
            request => {
                let header = self.header(request, |ops| ops.issue(op, now, reply.waiter()));
                encode_head(&header, payload.len(), buf);
                buf.extend_from_slice(payload);
                Queued {
                    op,
                    kind: MsgKind::of(&header),
                    id: header.id,
                }
            }
        }))
    }

    /// Writes a request too large for the outbox at once, behind what is
    /// queued; its id.
    async fn write_large(&self, issue: Issue<'_>) -> Result<u64> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        let op = issue.op(self.peer)?;
        let Issue {
            request,
            payload,
            reply,
        } = issue;
        let head = |buf: &mut BytesMut| {
            let header = self.header(request, |ops| ops.issue(op, Instant::now(), reply.waiter()));
            encode_head(&header, payload.len(), buf);
            (MsgKind::of(&header), header.id)
        };
        let id = self.outbox.write_now(self, head, payload).await?;
        self.state.stats().issued(op);
        Ok(id)
    }

    /// Writes a barrier signal's frame (`peer::barrier::signal_header`:
    /// id 0, no reply) at once, behind what is queued.
    pub async fn signal(&self, header: &Header) -> Result<()> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        let head = |buf: &mut BytesMut| {
            encode_head(header, 0, buf);
            (MsgKind::Barrier, 0)
        };
        self.outbox.write_now(self, head, &[]).await.map(drop)
    }

    /// Writes what the outbox holds now (see `outbox`).
    pub async fn flush(&self) {
        self.outbox.flush(self).await;
    }

    /// The header of a request about to be queued or written: its id
    /// (taken now), and in checked mode this rank's clock.
    fn header(&self, request: Request, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> Header {
        let body = match request {
            Request::Store {
                store,
                window,
                offset,
            } => store.body(window, offset),
            Request::Body(body) => body,
        };
        let id = self.take_id(id);
        let checked = self.state.checked().map(|c| c.stamp_for(&body));
        Header {
            id,
            body: Some(body),
            checked,
        }
    }

    /// A request's id, taken from the op table (which then spins for its
    /// reply).
    #[inline(always)]
    fn take_id(&self, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> u64 {
        let id = {
            let mut ops = self.ops();
            let id = id(&mut ops);
            self.spin_for_replies(&ops);
            id
        };
        // After the table's lock: the order `peer::touched` relies on.
        self.state.touched().mark(self.peer);
        id
    }
}

impl ReplyTo {
    /// The waiter of the op table that stands for it.
    #[inline(always)]
    fn waiter(self) -> Waiter {
        match self {
            ReplyTo::Handle(sink) => Waiter::new(sink),
            ReplyTo::Implicit => Waiter::Implicit,
            ReplyTo::Landing(raw) => Waiter::Landing(raw),
        }
    }
}
