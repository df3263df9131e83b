//! What a client call can fail with.

use tonic::Code;

/// An error of a client call: the daemon's answer (with its gRPC code) or a
/// problem on this side.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The daemon could not be reached.
    #[error("cannot reach the pld daemon at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The daemon answered the call with an error.
    #[error("{message} [{}] (daemon {addr})", code_name(*.code))]
    Status {
        addr: String,
        code: Code,
        message: String,
    },
    /// A window name the cluster does not have.
    #[error("window '{name}' does not exist; the windows are {known}")]
    NoSuchWindow { name: String, known: String },
    /// A call that is wrong before anything is sent.
    #[error("{0}")]
    InvalidArgument(String),
    /// A transfer whose geometry does not hold (buffer, offset, region);
    /// nothing was sent.
    #[error("{0}")]
    Geometry(#[from] pld_proto::geometry::GeometryError),
    /// Reading or writing local data failed.
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
}

impl Error {
    /// The gRPC code of the error: the daemon's, or what this side's
    /// errors correspond to.
    pub fn code(&self) -> Code {
        match self {
            Error::Connect { .. } => Code::Unavailable,
            Error::Status { code, .. } => *code,
            Error::NoSuchWindow { .. } => Code::NotFound,
            Error::InvalidArgument(_) | Error::Geometry(_) => Code::InvalidArgument,
            Error::Io { .. } => Code::Internal,
        }
    }

    pub(crate) fn status(addr: &str, s: tonic::Status) -> Error {
        Error::Status {
            addr: addr.to_string(),
            code: s.code(),
            message: s.message().to_string(),
        }
    }
}

/// The gRPC name of a code, as in the status codes' documentation.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
