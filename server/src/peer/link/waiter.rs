//! Who waits for an op — without a channel per op.
//!
//! An op's handle ([`Pending`]) is its link and its id. Its waiter lives in
//! the link's op table ([`Table`]): while the handle lives, a completion
//! moves the reply into the table's `done` map and wakes the handle's task;
//! once the handle is dropped (most non-blocking ops of a program that
//! waits with `quiet`), a completion only counts the op. So an op costs no
//! allocation and no message of its own: a oneshot channel per op was a
//! third of an 8-byte put's cost at the origin (its allocation, freed in
//! bulk when a window of acks arrived, missed malloc's per-thread cache).

use super::implicit::ImplicitFailures;
use super::{Link, Reply};
use crate::error::Result;
use crate::transport::Raw;
use bytes::BytesMut;
use pld_proto::track::{Outstanding, PeerOps};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Who waits for an op, and — for a get — the buffer its reply's bytes go
/// into straight from the socket.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// A handle waits, or will: its task's waker once it has polled.
    Live {
        waker: Option<Waker>,
        sink: Option<BytesMut>,
    },
    /// The handle is gone: the reply is dropped (`quiet` still counts the op).
    Dropped,
    /// No handle, ever ([`Rank::put_nbi`](crate::Rank::put_nbi)): a success
    /// is dropped, a failure kept for the next `quiet`.
    Implicit,
    /// No handle, ever, and the reply's bytes land in this rank's own
    /// window memory ([`Rank::get_nbi`](crate::Rank::get_nbi)); otherwise
    /// as `Implicit`.
    Landing(Raw),
}

/// Where a get reply's bytes go straight from the socket.
#[derive(Debug)]
pub(crate) enum Sink {
    /// The op's own buffer, handed back filled ([`Reply::Filled`]).
    Buf(BytesMut),
    /// This rank's window memory (the op stays a [`Waiter::Landing`]).
    Window(Raw),
}

impl Waiter {
    /// A waiter for a new op.
    pub(crate) fn new(sink: Option<BytesMut>) -> Waiter {
        Waiter::Live { waker: None, sink }
    }
}

/// A link's outstanding ops, and the replies of completed ones that their
/// handles have yet to take.
#[derive(Debug)]
pub(crate) struct Table {
    ops: PeerOps<Waiter>,
    done: Done,
    /// The rank's record of failed implicit requests (shared by its links).
    implicit: Arc<ImplicitFailures>,
}

/// The replies that completed ops' handles have yet to take.
type Done = HashMap<u64, Result<Reply>, BuildHasherDefault<IdHasher>>;

/// Hashes an op id with one multiplication. The ids in `done` are this
/// link's own (a reply's id enters only once it completed an outstanding
/// op), so nobody can choose them to collide; SipHash, std's default, was
/// a visible part of a blocking op's cost for its insert and remove.
#[derive(Debug, Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: the high bits (hashbrown's tag) and the low
        // bits (its bucket) both vary with consecutive ids.
        self.0 = (self.0 ^ id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Deref for Table {
    type Target = PeerOps<Waiter>;
    fn deref(&self) -> &PeerOps<Waiter> {
        &self.ops
    }
}

impl DerefMut for Table {
    fn deref_mut(&mut self) -> &mut PeerOps<Waiter> {
        &mut self.ops
    }
}

impl Table {
    pub(crate) fn new(implicit: Arc<ImplicitFailures>) -> Table {
        Table {
            ops: PeerOps::default(),
            done: Done::default(),
            implicit,
        }
    }

    /// Hands a completed op's reply to its handle, if it still has one.
    pub(crate) fn hand(&mut self, id: u64, waiter: Waiter, reply: Result<Reply>) {
        hand(&mut self.done, &self.implicit, id, waiter, reply);
    }

    /// Completes the outstanding ops `first..=last` (a cumulative
    /// acknowledgement) and hands each the reply `reply` makes for it;
    /// returns how many completed. `reply` is told whether a handle still
    /// waits: for one that is gone (most ops of a window ended by `quiet`)
    /// it only counts the op and makes no reply.
    pub(crate) fn complete_acked(
        &mut self,
        first: u64,
        last: u64,
        mut reply: impl FnMut(&Outstanding<Waiter>, bool) -> Option<Result<Reply>>,
    ) -> usize {
        let (done, implicit) = (&mut self.done, &self.implicit);
        self.ops.complete_range(first, last, |op| {
            let live = matches!(op.waiter, Waiter::Live { .. });
            if let Some(r) = reply(&op, live) {
                hand(done, implicit, op.id, op.waiter, r);
            }
        })
    }

    /// The sink of op `id` if it is a get waiting with a buffer, or landing
    /// in window memory, of exactly `len` bytes; the op stays outstanding
    /// until its reply is in.
    pub(crate) fn take_sink(&mut self, id: u64, len: usize) -> Option<Sink> {
        match self.ops.get_mut(id)? {
            Waiter::Live { sink, .. } if sink.as_ref().is_some_and(|s| s.len() == len) => {
                sink.take().map(Sink::Buf)
            }
            Waiter::Landing(raw) if raw.len == len => Some(Sink::Window(*raw)),
            _ => None,
        }
    }
}

fn hand(
    done: &mut Done,
    implicit: &ImplicitFailures,
    id: u64,
    waiter: Waiter,
    reply: Result<Reply>,
) {
    match (waiter, reply) {
        (Waiter::Live { waker, .. }, reply) => {
            done.insert(id, reply);
            if let Some(w) = waker {
                w.wake();
            }
        }
        (Waiter::Implicit | Waiter::Landing(_), Err(e)) => implicit.record(e),
        (Waiter::Implicit | Waiter::Landing(_) | Waiter::Dropped, _) => {}
    }
}

/// One request in flight: resolves with its reply.
#[derive(Debug)]
pub(crate) struct Pending {
    link: Arc<Link>,
    id: u64,
    /// The reply was taken, or the op detached: nothing is left to clean up.
    taken: bool,
}

impl Pending {
    pub(crate) fn new(link: Arc<Link>, id: u64) -> Pending {
        Pending {
            link,
            id,
            taken: false,
        }
    }

    /// Gives the op up to `quiet` ([`Rank::put_nbi`](crate::Rank::put_nbi)):
    /// no handle waits for it any more, and a failure — already in, or
    /// still to come — goes to the rank's next `quiet`.
    pub(crate) fn detach(mut self) {
        self.taken = true;
        let mut t = self.link.ops();
        match t.ops.get_mut(self.id) {
            Some(w) => *w = Waiter::Implicit,
            None => {
                if let Some(Err(e)) = t.done.remove(&self.id) {
                    t.implicit.record(e);
                }
            }
        }
    }

    /// The reply, or the error: rejected, peer lost, or no reply within the
    /// op timeout (the link's sweeper then fails the op, and a late reply is
    /// ignored).
    pub async fn wait(mut self) -> Result<Reply> {
        self.link.flush().await;
        std::future::poll_fn(|cx| self.poll_reply(cx)).await
    }

    fn poll_reply(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reply>> {
        let mut t = self.link.ops();
        if let Some(r) = t.done.remove(&self.id) {
            self.taken = true;
            return Poll::Ready(r);
        }
        match t.ops.get_mut(self.id) {
            Some(Waiter::Live { waker, .. }) => {
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            // Completed without a reply kept for it: the table was reset.
            _ => {
                self.taken = true;
                drop(t);
                Poll::Ready(Err(self.link.lost_or_reset()))
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let mut t = self.link.ops();
        match t.ops.get_mut(self.id) {
            Some(w) => *w = Waiter::Dropped,
            None => {
                t.done.remove(&self.id);
            }
        }
    }
}
