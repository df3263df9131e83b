//! What a rank's error says in structured form: a stable reason
//! (UPPER_SNAKE, one per kind of error) and the values its message names
//! as metadata — rank, op, op id, window, offset, epoch, round, missing
//! ranks, signal cell. The gRPC plane sends them as a `google.rpc.ErrorInfo`
//! (docs/client.md lists them); an embedded program (the device, the C
//! library) branches on the same reasons.

use super::{AccessError, Error};
use std::collections::HashMap;

/// The most bytes of one metadata value (values may echo a client's
/// text; the client's metadata limit is 16 KiB for all of them).
const MAX_VALUE: usize = 256;

impl Error {
    /// The error's stable reason (`WAIT_TIMEOUT`, `PEER_LOST`, ...).
    pub fn reason(&self) -> &'static str {
        of_rank(self).0
    }

    /// The reason and the values the message names.
    pub fn detail(&self) -> (&'static str, Meta) {
        of_rank(self)
    }
}

impl pld_proto::rma::Reason for Error {
    fn reason(&self) -> &str {
        Error::reason(self)
    }
}

/// Metadata entries, built up by kind: the values an error's message
/// names, by key.
#[derive(Debug, Default)]
pub struct Meta(pub HashMap<String, String>);

impl Meta {
    /// Adds `key`, its value clipped to 256 bytes.
    pub fn with(mut self, key: &str, value: impl ToString) -> Meta {
        let value = value.to_string();
        let value = super::clip(&value, MAX_VALUE).into_owned();
        self.0.insert(key.into(), value);
        self
    }
    /// Adds `key`: a comma-separated list of ranks.
    pub fn ranks(self, key: &str, ranks: impl IntoIterator<Item = u32>) -> Meta {
        let list: Vec<String> = ranks.into_iter().map(|r| r.to_string()).collect();
        self.with(key, list.join(","))
    }
}

/// The reason and metadata of a rank's error.
fn of_rank(e: &Error) -> (&'static str, Meta) {
    let m = Meta::default();
    match e {
        Error::Config(_) => ("CONFIG", m),
        Error::NoSuchRank { rank, nranks } => {
            ("NO_SUCH_RANK", m.with("rank", rank).with("nranks", nranks))
        }
        Error::NoSuchWindow { name, .. } => ("NO_SUCH_WINDOW", m.with("window", name)),
        Error::Access { op, rank, error } => {
            let (reason, m) = of_access(error, m.with("op", op).with("rank", rank));
            (reason, m)
        }
        Error::CellAccess { op, rank, error } => {
            let (reason, m) = of_access(error, m.with("op", op).with("rank", rank));
            (reason, m)
        }
        Error::InvalidTransfer { op, .. } => ("INVALID_TRANSFER", m.with("op", op)),
        Error::Rejected {
            rank, op, id, code, ..
        } => (
            "REJECTED",
            m.with("rank", rank)
                .with("op", op)
                .with("id", id)
                .with("code", code.as_str_name()),
        ),
        Error::PeerLost { rank, .. } => ("PEER_LOST", m.with("rank", rank)),
        Error::OpTimeout {
            rank,
            op,
            id,
            timeout,
        } => (
            "OP_TIMEOUT",
            m.with("rank", rank)
                .with("op", op)
                .with("id", id)
                .with("timeout_ms", timeout.as_millis()),
        ),
        Error::QuietTimeout {
            timeout,
            unreachable,
            ..
        } => (
            "QUIET_TIMEOUT",
            m.with("timeout_ms", timeout.as_millis())
                .ranks("unreachable", unreachable.iter().map(|(r, _)| *r)),
        ),
        Error::BarrierTimeout {
            epoch,
            round,
            waiting_for,
            not_heard_from,
            unreachable,
            ..
        } => (
            "BARRIER_TIMEOUT",
            m.with("epoch", epoch)
                .with("round", round)
                .with("waiting_for", waiting_for)
                .ranks("missing", not_heard_from.iter().copied())
                .ranks("unreachable", unreachable.iter().map(|(r, _)| *r)),
        ),
        Error::WaitTimeout {
            window,
            offset,
            cmp,
            expected,
            last,
            unreachable,
            ..
        } => (
            "WAIT_TIMEOUT",
            m.with("window", window)
                .with("offset", offset)
                .with("cmp", cmp.as_str_name())
                .with("expected", expected)
                .with("last", last)
                .ranks("unreachable", unreachable.iter().map(|(r, _)| *r)),
        ),
        Error::ImplicitFailed { failed, first } => {
            let (reason, m) = of_rank(first);
            (
                "IMPLICIT_FAILED",
                m.with("failed", failed).with("first", reason),
            )
        }
        Error::Mismatch { peer, .. } => ("MISMATCH", m.with("rank", peer)),
        Error::Refused { peer, .. } => ("REFUSED", m.with("rank", peer)),
        Error::ConnectTimeout { peer, .. } => ("CONNECT_TIMEOUT", m.with("rank", peer)),
        Error::Protocol { rank, .. } => ("PROTOCOL", m.with("rank", rank)),
        Error::Io { .. } => ("IO", m),
        Error::Tls(_) => ("TLS", m),
        Error::Authentication { peer, .. } => ("AUTHENTICATION", m.with("rank", peer)),
    }
}

/// The reason and metadata of a refused access.
fn of_access(e: &AccessError, m: Meta) -> (&'static str, Meta) {
    match e {
        AccessError::OutOfBounds {
            window,
            offset,
            len,
            size,
        } => (
            "OUT_OF_BOUNDS",
            m.with("window", window)
                .with("offset", offset)
                .with("len", len)
                .with("size", size),
        ),
        AccessError::MisalignedOffset { .. } => ("MISALIGNED_OFFSET", m),
        AccessError::MisalignedLength { len, .. } => ("MISALIGNED_LENGTH", m.with("len", len)),
        AccessError::UnknownDtype { value } => ("UNKNOWN_DTYPE", m.with("dtype", value)),
        AccessError::UnsupportedDtype { dtype, .. } => {
            ("UNSUPPORTED_DTYPE", m.with("dtype", dtype))
        }
        AccessError::ValueOutOfRange { value, dtype, .. } => (
            "VALUE_OUT_OF_RANGE",
            m.with("value", value).with("dtype", dtype),
        ),
        AccessError::UnknownWindow { id, .. } => ("UNKNOWN_WINDOW", m.with("window_id", id)),
        AccessError::BadRegion { .. } => ("BAD_REGION", m),
        AccessError::PayloadLength { expected, got } => (
            "PAYLOAD_LENGTH",
            m.with("expected", expected).with("got", got),
        ),
        AccessError::ReplyTooLarge { len, max } => {
            ("REPLY_TOO_LARGE", m.with("len", len).with("max", max))
        }
        AccessError::NotARequest => ("NOT_A_REQUEST", m),
        AccessError::Race { .. } => ("RACE", m),
        AccessError::InvalidCmp { value } => ("INVALID_CMP", m.with("cmp", value)),
        AccessError::InvalidNotifyOp { value } => ("INVALID_NOTIFY_OP", m.with("notify_op", value)),
        AccessError::InvalidBitOp { value } => ("INVALID_BIT_OP", m.with("bit_op", value)),
    }
}
