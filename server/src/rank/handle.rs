//! Handles of non-blocking ops.

use crate::error::{Error, Result};
use crate::peer::link::{Pending, Reply};
use bytes::{Bytes, BytesMut};
use pld_proto::OpKind;

/// Builds an op's result from its replies.
pub(crate) type Finish<T> = fn(OpReplies, Check) -> Result<T>;

/// An op's replies, in order: most ops have one, which needs no list (a
/// `Vec` per blocking op was an allocation on every round trip).
#[derive(Debug)]
pub(crate) enum OpReplies {
    One(Reply),
    Many(Vec<Reply>),
}

impl OpReplies {
    fn as_slice(&self) -> &[Reply] {
        match self {
            OpReplies::One(r) => std::slice::from_ref(r),
            OpReplies::Many(v) => v,
        }
    }
}

impl IntoIterator for OpReplies {
    type Item = Reply;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Reply>, std::vec::IntoIter<Reply>>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            OpReplies::One(r) => Some(r).into_iter().chain(Vec::new()),
            OpReplies::Many(v) => None.into_iter().chain(v),
        }
    }
}

/// A non-blocking op in flight. [`OpHandle::wait`] resolves when the op's
/// effect is applied at the target (or fails). Dropping the handle does not
/// cancel the op: `quiet` still waits for it.
#[derive(Debug)]
#[must_use = "an op handle does nothing unless waited on; `quiet` waits for all of them"]
pub struct OpHandle<T> {
    state: State<T>,
}

#[derive(Debug)]
enum State<T> {
    Ready(Result<T>),
    /// One request (the common small op: no list to allocate).
    One(Pending, Check, Finish<T>),
    Remote(Vec<Pending>, Check, Finish<T>),
}

/// What the replies must look like.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check {
    pub peer: u32,
    pub op: OpKind,
    /// For gets: the total length asked for.
    pub len: Option<u64>,
}

impl<T> OpHandle<T> {
    pub(crate) fn ready(r: Result<T>) -> Self {
        OpHandle {
            state: State::Ready(r),
        }
    }

    pub(crate) fn remote(parts: Vec<Pending>, check: Check, finish: Finish<T>) -> Self {
        OpHandle {
            state: State::Remote(parts, check, finish),
        }
    }

    /// An op of one request.
    pub(crate) fn one(part: Pending, check: Check, finish: Finish<T>) -> Self {
        OpHandle {
            state: State::One(part, check, finish),
        }
    }

    /// Gives the op up to `quiet` (see [`Rank::put_nbi`](crate::Rank::put_nbi)):
    /// a failure already in is returned; a later one goes to the next quiet.
    pub fn detach(self) -> Result<()> {
        match self.state {
            State::Ready(r) => r.map(drop),
            State::One(part, ..) => {
                part.detach();
                Ok(())
            }
            State::Remote(parts, ..) => {
                parts.into_iter().for_each(Pending::detach);
                Ok(())
            }
        }
    }

    /// Waits for the op to complete at the target.
    pub async fn wait(self) -> Result<T> {
        match self.state {
            State::Ready(r) => r,
            State::One(part, check, finish) => finish(OpReplies::One(part.wait().await?), check),
            State::Remote(parts, check, finish) => {
                let mut replies = Vec::with_capacity(parts.len());
                for p in parts {
                    replies.push(p.wait().await?);
                }
                finish(OpReplies::Many(replies), check)
            }
        }
    }
}

fn protocol(check: Check, what: String) -> Error {
    Error::Protocol {
        rank: check.peer,
        reason: format!("{} {what}", check.op),
    }
}

/// Put, atomic_add and notify: every part acknowledged.
pub(crate) fn acked(replies: OpReplies, check: Check) -> Result<()> {
    match replies.as_slice().iter().all(|r| matches!(r, Reply::Ack)) {
        true => Ok(()),
        false => Err(protocol(check, "got a reply that is not an ack".into())),
    }
}

/// An ack where the op's handle resolves to a value: a cell op answered
/// with an ack (`set`, `atomic_bitwise`) resolves to 0.
pub(crate) fn acked_zero(replies: OpReplies, check: Check) -> Result<i64> {
    acked(replies, check).map(|()| 0)
}

/// The parts of a get, in order, as one buffer exactly as long as asked:
/// parts read into slices of one buffer join up again without copying.
fn join(replies: OpReplies, check: Check) -> Result<BytesMut> {
    let mut all = BytesMut::new();
    for (i, r) in replies.into_iter().enumerate() {
        match r {
            Reply::Filled(b) if i == 0 => all = b,
            Reply::Filled(b) => all.unsplit(b),
            Reply::Data(b) => all.extend_from_slice(&b),
            _ => return Err(protocol(check, "got a reply without data".into())),
        }
    }
    match check.len {
        Some(want) if want != all.len() as u64 => Err(protocol(
            check,
            format!("of {want} bytes got {} bytes back", all.len()),
        )),
        _ => Ok(all),
    }
}

/// Get: the bytes.
pub(crate) fn data(replies: OpReplies, check: Check) -> Result<Bytes> {
    match replies.as_slice() {
        // One part not read into a buffer of ours: its frame's bytes as they are.
        [Reply::Data(b)] if check.len.is_none_or(|l| l == b.len() as u64) => Ok(b.clone()),
        _ => join(replies, check).map(BytesMut::freeze),
    }
}

/// Get into a caller's buffer: the buffer, filled.
pub(crate) fn filled(replies: OpReplies, check: Check) -> Result<BytesMut> {
    join(replies, check)
}

/// fetch_add and compare_swap: one previous value.
pub(crate) fn value(replies: OpReplies, check: Check) -> Result<i64> {
    match replies.as_slice() {
        [Reply::Value(v)] => Ok(*v),
        _ => Err(protocol(check, "got no single value back".into())),
    }
}
