//! Handles of non-blocking ops.

use crate::error::{Error, Result};
use crate::peer::link::{Pending, Reply};
use bytes::{Bytes, BytesMut};
use pld_proto::OpKind;

/// Builds an op's result from its replies.
pub(crate) type Finish<T> = fn(Vec<Reply>, Check) -> Result<T>;

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

    /// Waits for the op to complete at the target.
    pub async fn wait(self) -> Result<T> {
        match self.state {
            State::Ready(r) => r,
            State::Remote(parts, check, finish) => {
                let mut replies = Vec::with_capacity(parts.len());
                for p in parts {
                    replies.push(p.wait().await?);
                }
                finish(replies, check)
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
pub(crate) fn acked(replies: Vec<Reply>, check: Check) -> Result<()> {
    match replies.iter().all(|r| matches!(r, Reply::Ack)) {
        true => Ok(()),
        false => Err(protocol(check, "got a reply that is not an ack".into())),
    }
}

/// Get: the parts' bytes, in order, exactly as long as asked.
pub(crate) fn data(replies: Vec<Reply>, check: Check) -> Result<Bytes> {
    let mut parts = Vec::with_capacity(replies.len());
    for r in replies {
        match r {
            Reply::Data(b) => parts.push(b),
            _ => return Err(protocol(check, "got a reply without data".into())),
        }
    }
    let data = match parts.len() {
        1 => parts.pop().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
            for p in &parts {
                all.extend_from_slice(p);
            }
            all.freeze()
        }
    };
    match check.len {
        Some(want) if want != data.len() as u64 => Err(protocol(
            check,
            format!("of {want} bytes got {} bytes back", data.len()),
        )),
        _ => Ok(data),
    }
}

/// fetch_add and compare_swap: one previous value.
pub(crate) fn value(mut replies: Vec<Reply>, check: Check) -> Result<i64> {
    match (replies.pop(), replies.is_empty()) {
        (Some(Reply::Value(v)), true) => Ok(v),
        _ => Err(protocol(check, "got no single value back".into())),
    }
}
