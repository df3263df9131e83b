//! The one way onto a link: an [`Issue`] — what the request asks, its
//! payload, who takes its reply — and [`Link::issue`].
//!
//! A small request is queued in the outbox (see `outbox`) and a flush
//! scheduled; a large one is written at once, behind what is queued.
//! [`Link::queue`] is the synchronous part of `issue` for small requests:
//! the rank's hottest paths call it directly, in place, so that a small
//! put costs no future of its own. A barrier signal is not a request (no
//! id, no reply): [`Link::signal`] writes its frame at once.
//!
//! What a request asks is a [`Request`]: a plain store ([`StoreRequest`],
//! whose frame head is written straight from its fields) or any other
//! [`Body`]. `Issue` is generic over it rather than an enum of both, so
//! that a put carries no `Body`-sized value through the path and each
//! kind's path is compiled on its own (the message-rate path counts
//! instructions: docs/PERFORMANCE.md).

use super::outbox::{COALESCE_MAX, Queuing};
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
pub(crate) trait Request: Sized {
    /// The op it is (`to`: the peer, for the error of a body that is no
    /// request, which no caller builds).
    fn op(&self, to: u32) -> Result<OpKind>;

    /// Its body, for the generic path.
    fn into_body(self) -> Body;

    /// Appends its frame — head, then `payload` — to the queue, its id
    /// taken from `link`'s op table for `reply`: the generic encoder's
    /// frame, which a plain store replaces with its own. Returns the
    /// frame's kind and id.
    #[inline(always)]
    fn encode<W: ReplyTo>(
        self,
        link: &Link,
        op: OpKind,
        reply: W,
        q: &mut Queuing<'_>,
        payload: &[u8],
    ) -> (MsgKind, u64) {
        link.encode_generic(self.into_body(), op, reply, q.now, payload, q.buf())
    }
}

/// A plain put or atomic add (no region): its frame head is written
/// straight from these fields (`pld_proto::frame::store`), except in
/// checked mode, where every request carries a stamp.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreRequest {
    pub(crate) store: Store,
    pub(crate) window: u32,
    pub(crate) offset: u64,
}

impl Request for StoreRequest {
    #[inline(always)]
    fn op(&self, _to: u32) -> Result<OpKind> {
        Ok(self.store.op())
    }

    fn into_body(self) -> Body {
        self.store.body(self.window, self.offset)
    }

    /// The common small ops, and the message-rate benchmark's: no
    /// `Header` or `Body` is built.
    #[inline(always)]
    fn encode<W: ReplyTo>(
        self,
        link: &Link,
        op: OpKind,
        reply: W,
        q: &mut Queuing<'_>,
        payload: &[u8],
    ) -> (MsgKind, u64) {
        let now = q.now;
        if link.state.checked().is_some() {
            return link.encode_generic(self.into_body(), op, reply, now, payload, q.buf());
        }
        // The waiter is made in place (one moved through calls costs).
        let id = link.take_id(|ops| ops.issue(op, now, reply.waiter()));
        let buf = q.buf();
        encode_store_head(id, self.store, self.window, self.offset, payload.len(), buf);
        buf.extend_from_slice(payload);
        (self.store.msg_kind(), id)
    }
}

/// Any other request: a get, a fetching atomic, a notify, a 2-D store.
impl Request for Body {
    fn op(&self, to: u32) -> Result<OpKind> {
        OpKind::of_request(self).ok_or_else(|| Error::Protocol {
            rank: to,
            reason: "a link issues requests only (a hello, a signal or a reply is none)".into(),
        })
    }

    fn into_body(self) -> Body {
        self
    }
}

/// Who takes a request's reply: [`Handle`], [`HandleInto`], [`Implicit`]
/// or [`Landing`]. Types rather than an enum's variants, so that the hot
/// paths (a put with a handle, a `put_nbi`) move nothing for it.
pub(crate) trait ReplyTo {
    /// Whether a handle ([`Pending`]) waits for the reply.
    const HANDLE: bool;
    /// The waiter of the op table that stands for it.
    fn waiter(self) -> Waiter;
}

/// A handle ([`Pending`]) waits for the reply.
#[derive(Debug)]
pub(crate) struct Handle;

/// A handle waits, and a get's bytes go into this buffer straight from
/// the socket.
#[derive(Debug)]
pub(crate) struct HandleInto(pub(crate) BytesMut);

/// No handle: a failure goes to the next `quiet` (`put_nbi`).
#[derive(Debug)]
pub(crate) struct Implicit;

/// No handle, and a get's bytes land in this rank's own window memory
/// straight from the socket (`get_nbi`); a failure goes to the next
/// `quiet`.
#[derive(Debug)]
pub(crate) struct Landing(pub(crate) Raw);

impl ReplyTo for Handle {
    const HANDLE: bool = true;
    #[inline(always)]
    fn waiter(self) -> Waiter {
        Waiter::new(None)
    }
}

impl ReplyTo for HandleInto {
    const HANDLE: bool = true;
    #[inline(always)]
    fn waiter(self) -> Waiter {
        Waiter::new(Some(self.0))
    }
}

impl ReplyTo for Implicit {
    const HANDLE: bool = false;
    #[inline(always)]
    fn waiter(self) -> Waiter {
        Waiter::Implicit
    }
}

impl ReplyTo for Landing {
    const HANDLE: bool = false;
    #[inline(always)]
    fn waiter(self) -> Waiter {
        Waiter::Landing(self.0)
    }
}

/// One request to issue on a link.
#[derive(Debug)]
pub(crate) struct Issue<'a, R, W> {
    pub(crate) request: R,
    pub(crate) payload: &'a [u8],
    pub(crate) reply: W,
}

impl<'a, W: ReplyTo> Issue<'a, StoreRequest, W> {
    /// A plain put or atomic add of `payload` at `offset` of `window`.
    #[inline(always)]
    pub(crate) fn store(
        store: Store,
        window: u32,
        offset: u64,
        payload: &'a [u8],
        reply: W,
    ) -> Self {
        Issue {
            request: StoreRequest {
                store,
                window,
                offset,
            },
            payload,
            reply,
        }
    }
}

impl<'a, W: ReplyTo> Issue<'a, Body, W> {
    /// Any other request, with `payload` (most have none).
    pub(crate) fn body(body: Body, payload: &'a [u8], reply: W) -> Self {
        Issue {
            request: body,
            payload,
            reply,
        }
    }
}

impl Link {
    /// Issues one request; its id (for a [`Handle`], its handle
    /// is `Pending::new(link, id)`). A small request is queued and a flush
    /// scheduled (written now if the outbox is full); a large one is
    /// written at once.
    pub async fn issue<R: Request, W: ReplyTo>(&self, issue: Issue<'_, R, W>) -> Result<u64> {
        if issue.payload.len() > COALESCE_MAX {
            return self.write_large(issue).await;
        }
        let (id, full) = self.queue(issue)?;
        if full {
            self.flush().await;
        }
        Ok(id)
    }

    /// Issues a request a handle waits for ([`Handle`], [`HandleInto`]):
    /// [`Link::issue`], the handle made of the link and the id.
    pub async fn request<R: Request, W: ReplyTo>(
        self: &Arc<Self>,
        issue: Issue<'_, R, W>,
    ) -> Result<Pending> {
        const { assert!(W::HANDLE, "a request without a handle has none to return") };
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
    pub fn queue<R: Request, W: ReplyTo>(&self, issue: Issue<'_, R, W>) -> Result<(u64, bool)> {
        self.check_up()?;
        debug_assert!(issue.payload.len() <= COALESCE_MAX);
        let op = issue.request.op(self.peer)?;
        let Issue {
            request,
            payload,
            reply,
        } = issue;
        let mut q = self.outbox.begin();
        let (kind, id) = request.encode(self, op, reply, &mut q, payload);
        Ok((id, q.finish(op, kind)))
    }

    /// `Ok` while the link is up; its loss otherwise.
    #[inline(always)]
    fn check_up(&self) -> Result<()> {
        match self.lost_reason() {
            None => Ok(()),
            Some(_) => Err(self.lost_or_reset()),
        }
    }

    /// The generic encoder's frame of a request (a `Header`, stamped in
    /// checked mode), its id taken for `reply`, then `payload`.
    fn encode_generic<W: ReplyTo>(
        &self,
        body: Body,
        op: OpKind,
        reply: W,
        now: Instant,
        payload: &[u8],
        buf: &mut BytesMut,
    ) -> (MsgKind, u64) {
        let header = self.header(body, |ops| ops.issue(op, now, reply.waiter()));
        encode_head(&header, payload.len(), buf);
        buf.extend_from_slice(payload);
        (MsgKind::of(&header), header.id)
    }

    /// Writes a request too large for the outbox at once, behind what is
    /// queued; its id.
    async fn write_large<R: Request, W: ReplyTo>(&self, issue: Issue<'_, R, W>) -> Result<u64> {
        self.check_up()?;
        let op = issue.request.op(self.peer)?;
        let Issue {
            request,
            payload,
            reply,
        } = issue;
        let head = |buf: &mut BytesMut| {
            let waiter = |ops: &mut PeerOps<Waiter>| ops.issue(op, Instant::now(), reply.waiter());
            let header = self.header(request.into_body(), waiter);
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
        self.check_up()?;
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
    fn header(&self, body: Body, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> Header {
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
