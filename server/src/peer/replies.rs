//! The replies a served connection owes its peer, encoded back to back so
//! that everything answered from one read leaves in one write.
//!
//! Acknowledgements of consecutive requests merge into one cumulative
//! acknowledgement (`Ack { first }` under the last id): the stream is
//! ordered and the target answers in order, so "applied from `first`
//! through `id`" completes them all at the origin. Any other reply (data,
//! a value, an error) ends the run, so a refused op in a batch still fails
//! alone, naming itself, and the ops after it are acknowledged after it.

use super::RankState;
use bytes::BytesMut;
use pld_proto::MsgKind;
use pld_proto::frame::{self, error_header};
use pld_proto::v1::{Ack, CheckedStamp, ErrorCode, Header, header::Body};

/// Replies not yet written.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    buf: BytesMut,
    /// The run of acknowledgements the last frame in `buf` covers.
    run: Option<AckRun>,
}

#[derive(Debug, Clone, Copy)]
struct AckRun {
    /// Where its frame starts in `buf`.
    at: usize,
    first: u64,
    last: u64,
}

impl Replies {
    pub fn with_capacity(n: usize) -> Replies {
        Replies {
            buf: BytesMut::with_capacity(n),
            run: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// The encoded replies, for one write.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// After the write.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.run = None;
    }

    /// The buffer, to append a reply's payload (or a whole encoded frame)
    /// behind what is there; ends the current run of acknowledgements.
    pub fn raw(&mut self) -> &mut BytesMut {
        self.run = None;
        &mut self.buf
    }

    /// Acknowledges request `id`: extends the run if `id` follows it,
    /// otherwise starts a new one.
    pub fn ack(&mut self, state: &RankState, id: u64) {
        let run = match self.run {
            Some(r) if r.last.checked_add(1) == Some(id) => {
                self.buf.truncate(r.at);
                AckRun { last: id, ..r }
            }
            _ => {
                state.stats.msg_sent(MsgKind::Ack);
                AckRun {
                    at: self.buf.len(),
                    first: id,
                    last: id,
                }
            }
        };
        let first = if run.first == run.last { 0 } else { run.first };
        let header = Header {
            id,
            body: Some(Body::Ack(Ack { first })),
            checked: None,
        };
        frame::encode_head(&header, 0, &mut self.buf);
        self.run = Some(run);
    }

    /// A reply other than an ack, whose payload (`payload_len` bytes) the
    /// caller appends or writes next; in checked mode with its stamp.
    pub fn push(
        &mut self,
        state: &RankState,
        id: u64,
        body: Body,
        payload_len: usize,
        checked: Option<CheckedStamp>,
    ) {
        let header = Header {
            id,
            body: Some(body),
            checked,
        };
        state.stats.msg_sent(MsgKind::of(&header));
        frame::encode_head(&header, payload_len, self.raw());
    }

    /// Refuses request `id`.
    pub fn error(&mut self, state: &RankState, id: u64, code: ErrorCode, message: String) {
        let header = error_header(id, code, message);
        state.stats.msg_sent(MsgKind::Error);
        frame::encode_head(&header, 0, self.raw());
    }
}
