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
use pld_server::error::Meta;
use tonic_types::ErrorDetails;

/// The domain of every pld ErrorInfo.
pub const DOMAIN: &str = "pld.v1";

/// The status details of a client-plane error.
pub(crate) fn details(e: &Error) -> ErrorDetails {
    let m = Meta::default();
    let (reason, meta) = match e {
        Error::Rank(r) => r.detail(),
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
