//! Errors of the client plane and the one place where every error becomes a
//! gRPC status.

use pld_proto::ErrorCode;
use pld_server::error::{AccessError, Error as RankError};
use tonic::codegen::http;
use tonic::{Code, Status};

/// Everything a gRPC call can fail with: the rank's own errors, and what is
/// wrong with the request itself.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The rank refused or failed the op.
    #[error(transparent)]
    Rank(#[from] RankError),
    /// The peer mesh is not up yet.
    #[error(
        "rank {rank} is not serving yet: it is still connecting to its peers (health reports NOT_SERVING until the mesh is up)"
    )]
    NotReady { rank: u32 },
    /// A field that the call needs is missing or out of its domain.
    #[error("{call}: {reason}")]
    InvalidArgument { call: &'static str, reason: String },
    /// A request whose geometry does not hold (offset, length, region, data).
    #[error("{call}: {error}")]
    Geometry {
        call: &'static str,
        error: pld_proto::geometry::GeometryError,
    },
    /// A unary call over the message limit.
    #[error(
        "{call} of {len} bytes exceeds the message limit of {max} bytes; use {instead} for larger transfers"
    )]
    TooLarge {
        call: &'static str,
        len: u64,
        max: u64,
        instead: &'static str,
    },
    /// A PutStream whose bytes do not add up to its region.
    #[error(
        "PutStream to rank {rank}: the stream carried {got} bytes, the transfer needs {expected}; {applied} bytes were written before it stopped"
    )]
    StreamLength {
        rank: u32,
        expected: u64,
        got: u64,
        applied: u64,
    },
    /// The daemon is shutting down: the call was refused, or cancelled
    /// after the drain's grace.
    #[error(
        "rank {rank} is shutting down: the daemon takes no more calls and ends those still running"
    )]
    ShuttingDown { rank: u32 },
    /// A PutStream whose client sent nothing for the stall timeout.
    #[error(
        "PutStream to rank {rank}: the client sent nothing for {stall:?} (--grpc-stall-timeout); the stream was cancelled after {got} of {expected} bytes, {applied} of them written"
    )]
    PutStalled {
        rank: u32,
        stall: std::time::Duration,
        expected: u64,
        got: u64,
        applied: u64,
    },
    /// The client's stream failed.
    #[error("{call}: the client's stream failed: {status}")]
    ClientStream { call: &'static str, status: Status },
    /// A task of the daemon failed; a bug, not the client's fault.
    #[error("internal error: {0}")]
    Internal(String),
    /// The daemons have no `collective` window for the collectives' scratch.
    #[error(
        "{call}: the daemons have no window 'collective' for the collectives' scratch; start every daemon with --window collective=SIZE (the default windows include 16 MiB)"
    )]
    NoCollectiveWindow { call: &'static str },
    /// The ranks called different collectives, or the same with other
    /// arguments.
    #[error("{call}: {report}; every rank must make the same collective call, in the same order")]
    CollectiveMismatch { call: &'static str, report: String },
    /// A collective needs more scratch than the `collective` window has.
    #[error(
        "{call} needs {needed} bytes of scratch, but the collective scratch has {have}; start the daemons with a larger --window collective=SIZE"
    )]
    ScratchTooSmall {
        call: &'static str,
        needed: u64,
        have: u64,
    },
    /// No or a wrong bearer token.
    #[error(
        "{0}; send the daemon's client token as `authorization: Bearer <token>` metadata (pld-daemon --client-token)"
    )]
    Unauthenticated(&'static str),
}

impl Error {
    pub(crate) fn invalid(call: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument {
            call,
            reason: reason.into(),
        }
    }
}

fn access_code(e: &AccessError) -> Code {
    match e {
        AccessError::OutOfBounds { .. } => Code::OutOfRange,
        AccessError::UnknownWindow { .. } => Code::NotFound,
        // Checked mode, strict: the program's ordering is the fix, as for
        // a peer's refusal (`wire_code`).
        AccessError::Race { .. } => Code::FailedPrecondition,
        _ => Code::InvalidArgument,
    }
}

fn wire_code(code: ErrorCode) -> Code {
    match code {
        ErrorCode::OutOfRange => Code::OutOfRange,
        ErrorCode::UnknownWindow => Code::NotFound,
        ErrorCode::Misaligned
        | ErrorCode::UnknownDtype
        | ErrorCode::UnsupportedDtype
        | ErrorCode::InvalidArgument => Code::InvalidArgument,
        // Checked mode, strict: the op races; ordering it is the fix.
        ErrorCode::Race => Code::FailedPrecondition,
        // Frame, preamble and handshake errors close the peer connection:
        // the op's target is as good as unreachable.
        ErrorCode::FrameTooLarge
        | ErrorCode::MalformedFrame
        | ErrorCode::BadPreamble
        | ErrorCode::HandshakeRefused
        | ErrorCode::UnexpectedMessage
        | ErrorCode::Unspecified => Code::Unavailable,
    }
}

/// The gRPC code of a rank error.
fn rank_code(e: &RankError) -> Code {
    match e {
        RankError::NoSuchRank { .. } | RankError::NoSuchWindow { .. } => Code::NotFound,
        RankError::Access { error, .. } | RankError::CellAccess { error, .. } => access_code(error),
        RankError::InvalidTransfer { .. } => Code::InvalidArgument,
        RankError::Rejected { code, .. } => wire_code(*code),
        RankError::PeerLost { .. }
        | RankError::Mismatch { .. }
        | RankError::Refused { .. }
        | RankError::ConnectTimeout { .. }
        | RankError::Authentication { .. }
        | RankError::Protocol { .. } => Code::Unavailable,
        RankError::OpTimeout { .. }
        | RankError::QuietTimeout { .. }
        | RankError::BarrierTimeout { .. }
        | RankError::WaitTimeout { .. } => Code::DeadlineExceeded,
        RankError::ImplicitFailed { first, .. } => rank_code(first),
        RankError::Config(_) => Code::FailedPrecondition,
        RankError::Io { .. } | RankError::Tls(_) => Code::Internal,
    }
}

impl Error {
    /// The gRPC code this error maps to.
    pub fn code(&self) -> Code {
        match self {
            Error::Rank(e) => rank_code(e),
            Error::NotReady { .. } | Error::ShuttingDown { .. } => Code::Unavailable,
            Error::InvalidArgument { .. } | Error::Geometry { .. } | Error::StreamLength { .. } => {
                Code::InvalidArgument
            }
            // One code for "too large" everywhere: tonic's own limit says it too.
            Error::TooLarge { .. } => Code::ResourceExhausted,
            Error::ClientStream { status, .. } => status.code(),
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::PutStalled { .. } => Code::DeadlineExceeded,
            Error::Internal(_) => Code::Internal,
            Error::NoCollectiveWindow { .. } | Error::CollectiveMismatch { .. } => {
                Code::FailedPrecondition
            }
            Error::ScratchTooSmall { .. } => Code::ResourceExhausted,
        }
    }
}

impl From<pld_proto::collective::Error<RankError>> for Error {
    fn from(e: pld_proto::collective::Error<RankError>) -> Error {
        use pld_proto::collective::Error as C;
        match e {
            C::Rma(e) => Error::Rank(e),
            C::Invalid { call, reason } => Error::InvalidArgument { call, reason },
            C::ScratchTooSmall { call, needed, have } => {
                Error::ScratchTooSmall { call, needed, have }
            }
        }
    }
}

/// The most bytes of a status message. Messages may echo what a client
/// sent; the message travels twice (grpc-message, percent-encoded, and in
/// the details), and a client's metadata limit is 16 KiB in all.
pub(crate) const MAX_MESSAGE: usize = 1024;

impl From<Error> for Status {
    /// The code, the message, and the structured details (an ErrorInfo
    /// whose reason and metadata clients match on: `grpc/details.rs`).
    fn from(e: Error) -> Status {
        use tonic_types::StatusExt;
        let message = e.to_string();
        let message = pld_server::error::clip(&message, MAX_MESSAGE);
        Status::with_error_details(e.code(), message, super::details::details(&e))
    }
}

/// Whether `status` is tonic's refusal of a message over the decoding
/// limit. tonic says OUT_OF_RANGE; gRPC's convention, and pld's, is
/// RESOURCE_EXHAUSTED, and pld keeps OUT_OF_RANGE for window bounds.
fn is_too_large(status: &Status) -> bool {
    status.code() == Code::OutOfRange && status.message().contains("message length too large")
}

/// Whether `status` is the codec's refusal of bytes that do not decode as
/// the request message (garbage, a string that is not UTF-8). tonic says
/// INTERNAL; the fault is the client's request: INVALID_ARGUMENT.
fn is_undecodable(status: &Status) -> bool {
    status.code() == Code::Internal
        && status
            .message()
            .starts_with("failed to decode Protobuf message")
}

/// The status a client should see for the codec's own refusal of its
/// request, if it is one (see [`is_too_large`], [`is_undecodable`]).
/// The code a client sees for `status` once [`remap_codec_errors`] ran.
pub(crate) fn client_code(status: &Status) -> Code {
    remapped(status).map_or(status.code(), |s| s.code())
}

impl Error {
    /// The client's stream failed with `status`: a message that does not
    /// decode or is too large is the client's fault, said as such.
    pub(crate) fn client_stream(call: &'static str, status: Status) -> Error {
        let status = remapped(&status).unwrap_or(status);
        Error::ClientStream { call, status }
    }
}

fn remapped(status: &Status) -> Option<Status> {
    if is_too_large(status) {
        return Some(Status::resource_exhausted(format!(
            "{}; send larger transfers with PutStream / GetStream",
            status.message()
        )));
    }
    is_undecodable(status).then(|| {
        Status::invalid_argument(format!(
            "the request does not decode as its message: {}",
            status.message()
        ))
    })
}

/// Rewrites tonic's trailers-only refusals of a request message it could
/// not take — OUT_OF_RANGE for an oversized one, INTERNAL for one that
/// does not decode — into RESOURCE_EXHAUSTED (saying what to do instead)
/// and INVALID_ARGUMENT. A layer of the gRPC server: such a request never
/// reaches [`Error`].
pub(crate) fn remap_codec_errors(
    mut res: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let Some(status) = Status::from_header_map(res.headers()) else {
        return res;
    };
    if let Some(remapped) = remapped(&status) {
        // Header values from a Status always encode.
        let _ = remapped.add_header(res.headers_mut());
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use pld_proto::{Dtype, OpKind};
    use std::time::Duration;

    #[test]
    fn every_error_class_maps_to_the_documented_code() {
        let oob = RankError::Access {
            op: OpKind::Put,
            rank: 1,
            error: AccessError::OutOfBounds {
                window: "data".into(),
                offset: 10,
                len: 8,
                size: 12,
            },
        };
        let misaligned = RankError::Access {
            op: OpKind::AtomicAdd,
            rank: 1,
            error: AccessError::MisalignedOffset {
                window: "data".into(),
                offset: 2,
                dtype: Dtype::Fp32,
                size: 4,
            },
        };
        let mut cases: Vec<(Error, Code)> = vec![
            (oob.into(), Code::OutOfRange),
            (misaligned.into(), Code::InvalidArgument),
            (
                RankError::NoSuchRank { rank: 9, nranks: 2 }.into(),
                Code::NotFound,
            ),
            (
                RankError::NoSuchWindow {
                    name: "x".into(),
                    known: "data".into(),
                }
                .into(),
                Code::NotFound,
            ),
            (
                RankError::PeerLost {
                    rank: 1,
                    reason: "gone".into(),
                }
                .into(),
                Code::Unavailable,
            ),
            (
                RankError::QuietTimeout {
                    timeout: Duration::from_secs(1),
                    outstanding: "put #3 to rank 1".into(),
                    unreachable: vec![],
                }
                .into(),
                Code::DeadlineExceeded,
            ),
            (
                RankError::Rejected {
                    rank: 1,
                    op: OpKind::Get,
                    id: 4,
                    code: ErrorCode::OutOfRange,
                    message: "no".into(),
                }
                .into(),
                Code::OutOfRange,
            ),
            (
                RankError::ImplicitFailed {
                    failed: 3,
                    first: Box::new(RankError::PeerLost {
                        rank: 1,
                        reason: "gone".into(),
                    }),
                }
                .into(),
                Code::Unavailable,
            ),
            (Error::NotReady { rank: 0 }, Code::Unavailable),
            (Error::Unauthenticated("no token"), Code::Unauthenticated),
            (Error::invalid("Put", "no dtype"), Code::InvalidArgument),
        ];
        let too_large = Status::out_of_range(
            "Error, decoded message length too large: found 5 bytes, the limit is: 4 bytes",
        );
        cases.push((
            Error::client_stream("PutStream", too_large.clone()),
            Code::ResourceExhausted,
        ));
        for (e, code) in cases {
            let msg = e.to_string();
            let status = Status::from(e);
            assert_eq!(status.code(), code, "{msg}");
            assert_eq!(status.message(), msg);
        }

        // An oversized unary request: the trailers-only response is rewritten.
        let res = remap_codec_errors(too_large.into_http());
        let status = Status::from_header_map(res.headers()).expect("a status");
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(
            status.message().contains("PutStream"),
            "{}",
            status.message()
        );
        let res = remap_codec_errors(Status::out_of_range("offset 9 past the window").into_http());
        let status = Status::from_header_map(res.headers()).expect("a status");
        assert_eq!(status.code(), Code::OutOfRange);
    }
}
