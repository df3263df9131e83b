//! Errors clients can match on: every client-plane error carries a
//! `google.rpc.ErrorInfo` in its status details (the gRPC richer error
//! model), with a stable `reason` (UPPER_SNAKE, one per kind of error) and
//! the values the message names as metadata — rank, op, op id, window,
//! offset, epoch, round, missing ranks, signal cell — so that a program
//! branches on them instead of parsing text. A geometry error also carries
//! a `google.rpc.BadRequest` naming the field.
//!
//! The domain is `pld.v1`; docs/client.md lists the reasons and keys.

use super::Error;
use crate::error::{AccessError, Error as RankError};
use std::collections::HashMap;
use tonic_types::ErrorDetails;

/// The domain of every pld ErrorInfo.
pub const DOMAIN: &str = "pld.v1";

/// The most bytes of one metadata value (values may echo a client's
/// text; the client's metadata limit is 16 KiB for all of them).
const MAX_VALUE: usize = 256;

/// Metadata entries, built up by kind.
#[derive(Default)]
struct Meta(HashMap<String, String>);

impl Meta {
    fn with(mut self, key: &str, value: impl ToString) -> Meta {
        let value = value.to_string();
        let value = crate::error::clip(&value, MAX_VALUE).into_owned();
        self.0.insert(key.into(), value);
        self
    }
    fn ranks(self, key: &str, ranks: impl IntoIterator<Item = u32>) -> Meta {
        let list: Vec<String> = ranks.into_iter().map(|r| r.to_string()).collect();
        self.with(key, list.join(","))
    }
}

/// The reason and metadata of a rank's error.
fn of_rank(e: &RankError) -> (&'static str, Meta) {
    let m = Meta::default();
    match e {
        RankError::Config(_) => ("CONFIG", m),
        RankError::NoSuchRank { rank, nranks } => {
            ("NO_SUCH_RANK", m.with("rank", rank).with("nranks", nranks))
        }
        RankError::NoSuchWindow { name, .. } => ("NO_SUCH_WINDOW", m.with("window", name)),
        RankError::Access { op, rank, error } => {
            let (reason, m) = of_access(error, m.with("op", op).with("rank", rank));
            (reason, m)
        }
        RankError::CellAccess { op, rank, error } => {
            let (reason, m) = of_access(error, m.with("op", op).with("rank", rank));
            (reason, m)
        }
        RankError::InvalidTransfer { op, .. } => ("INVALID_TRANSFER", m.with("op", op)),
        RankError::Rejected {
            rank, op, id, code, ..
        } => (
            "REJECTED",
            m.with("rank", rank)
                .with("op", op)
                .with("id", id)
                .with("code", code.as_str_name()),
        ),
        RankError::PeerLost { rank, .. } => ("PEER_LOST", m.with("rank", rank)),
        RankError::OpTimeout {
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
        RankError::QuietTimeout {
            timeout,
            unreachable,
            ..
        } => (
            "QUIET_TIMEOUT",
            m.with("timeout_ms", timeout.as_millis())
                .ranks("unreachable", unreachable.iter().map(|(r, _)| *r)),
        ),
        RankError::BarrierTimeout {
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
        RankError::WaitTimeout {
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
        RankError::ImplicitFailed { failed, first } => {
            let (reason, m) = of_rank(first);
            (
                "IMPLICIT_FAILED",
                m.with("failed", failed).with("first", reason),
            )
        }
        RankError::Mismatch { peer, .. } => ("MISMATCH", m.with("rank", peer)),
        RankError::Refused { peer, .. } => ("REFUSED", m.with("rank", peer)),
        RankError::ConnectTimeout { peer, .. } => ("CONNECT_TIMEOUT", m.with("rank", peer)),
        RankError::Protocol { rank, .. } => ("PROTOCOL", m.with("rank", rank)),
        RankError::Io { .. } => ("IO", m),
        RankError::Tls(_) => ("TLS", m),
        RankError::Authentication { peer, .. } => ("AUTHENTICATION", m.with("rank", peer)),
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
    }
}

/// The status details of a client-plane error.
pub(crate) fn details(e: &Error) -> ErrorDetails {
    let m = Meta::default();
    let (reason, meta) = match e {
        Error::Rank(r) => of_rank(r),
        Error::NotReady { rank } => ("NOT_READY", m.with("rank", rank)),
        Error::ShuttingDown { rank } => ("SHUTTING_DOWN", m.with("rank", rank)),
        Error::InvalidArgument { call, .. } => ("INVALID_ARGUMENT", m.with("call", call)),
        Error::Geometry { call, error } => {
            let mut d =
                ErrorDetails::with_error_info("INVALID_GEOMETRY", DOMAIN, m.with("call", call).0);
            d.add_bad_request_violation(field_of(error), error.to_string());
            return d;
        }
        Error::TooLarge { call, len, max, .. } => (
            "TOO_LARGE",
            m.with("call", call).with("len", len).with("max", max),
        ),
        Error::StreamLength {
            rank,
            expected,
            got,
            applied,
        } => (
            "STREAM_LENGTH",
            m.with("rank", rank)
                .with("expected", expected)
                .with("got", got)
                .with("applied", applied),
        ),
        Error::ClientStream { call, .. } => ("CLIENT_STREAM", m.with("call", call)),
        Error::PutStalled {
            rank,
            stall,
            expected,
            got,
            applied,
        } => (
            "STALLED",
            m.with("rank", rank)
                .with("stall_ms", stall.as_millis())
                .with("expected", expected)
                .with("got", got)
                .with("applied", applied),
        ),
        Error::Unauthenticated(_) => ("UNAUTHENTICATED", m),
        Error::Internal(_) => ("INTERNAL", m),
        Error::NoCollectiveWindow { call } => ("NO_COLLECTIVE_WINDOW", m.with("call", call)),
        Error::CollectiveMismatch { call, .. } => ("COLLECTIVE_MISMATCH", m.with("call", call)),
        Error::ScratchTooSmall { call, needed, have } => (
            "SCRATCH_TOO_SMALL",
            m.with("call", call)
                .with("needed", needed)
                .with("have", have),
        ),
    };
    ErrorDetails::with_error_info(reason, DOMAIN, meta.0)
}

/// The request field a geometry error is about.
fn field_of(e: &pld_proto::geometry::GeometryError) -> &'static str {
    use pld_proto::geometry::GeometryError as G;
    match e {
        G::MisalignedOffset { .. } | G::OffsetOverflow(_) => "offset",
        G::MisalignedLength { .. } => "len",
        G::DataLength { .. } => "data",
        G::NoDtype => "dtype",
        G::EmptyChunk { .. }
        | G::ChunkTooLarge { .. }
        | G::PipelineWithoutChunks
        | G::HalfChunking
        | G::ShallowPipeline(_) => "chunking",
        G::TooLarge { .. }
        | G::Layout { .. }
        | G::ExtentOverflow { .. }
        | G::BufferTooSmall { .. } => "region",
    }
}
