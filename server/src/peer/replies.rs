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
use crate::stats::ServedTally;
use bytes::BytesMut;
use pld_proto::MsgKind;
use pld_proto::frame::{self, error_header};
use pld_proto::v1::{CheckedStamp, ErrorCode, Header, header::Body};

/// Replies not yet written.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    buf: BytesMut,
    /// The run of acknowledgements after `buf`'s frames, not yet encoded
    /// (it may still grow).
    run: Option<AckRun>,
    /// The plain puts these replies answer, counted when they are written.
    served: ServedTally,
}

#[derive(Debug, Clone, Copy)]
struct AckRun {
    first: u64,
    last: u64,
}

impl Replies {
    pub fn with_capacity(n: usize) -> Replies {
        Replies {
            buf: BytesMut::with_capacity(n),
            run: None,
            served: ServedTally::default(),
        }
    }

    /// Counts a plain put of `bytes` bytes (its frame) received and
    /// applied; see [`Replies::count_served`].
    pub fn served_put(&mut self, bytes: usize) {
        self.served.put(bytes);
    }

    /// Adds the puts counted since the last call to the rank's counters
    /// (call before writing the replies: an origin that sees its ack sees
    /// its put counted).
    pub fn count_served(&mut self, state: &RankState) {
        state.activity().touch_n(self.served.flush(state.stats()));
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.run.is_none()
    }

    /// About how many bytes are owed.
    pub fn len(&self) -> usize {
        self.buf.len() + if self.run.is_some() { 32 } else { 0 }
    }

    /// The encoded replies, for one write.
    pub fn bytes(&mut self) -> &[u8] {
        self.end_run();
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
        self.end_run();
        &mut self.buf
    }

    /// Encodes the current run of acknowledgements: one ack under its last
    /// id, cumulative from its first if it covers more than one.
    fn end_run(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        let first = if run.first == run.last { 0 } else { run.first };
        frame::encode_ack_head(run.last, first, &mut self.buf);
    }

    /// Acknowledges request `id`: extends the run if `id` follows it,
    /// otherwise starts a new one.
    pub fn ack(&mut self, state: &RankState, id: u64) {
        if let Some(r) = &mut self.run
            && r.last.checked_add(1) == Some(id)
        {
            r.last = id;
            return;
        }
        self.end_run();
        state.stats().msg_sent(MsgKind::Ack);
        self.run = Some(AckRun {
            first: id,
            last: id,
        });
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
        state.stats().msg_sent(MsgKind::of(&header));
        frame::encode_head(&header, payload_len, self.raw());
    }

    /// Refuses request `id`.
    pub fn error(&mut self, state: &RankState, id: u64, code: ErrorCode, message: String) {
        let header = error_header(id, code, message);
        state.stats().msg_sent(MsgKind::Error);
        frame::encode_head(&header, 0, self.raw());
    }
}
