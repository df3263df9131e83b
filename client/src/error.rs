//! What a client call can fail with.

use tonic::Code;

/// An error of a client call: the daemon's answer (with its gRPC code) or a
/// problem on this side.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The daemon could not be reached.
    #[error("cannot reach the pld daemon at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The daemon answered the call with an error. `detail` is what the
    /// daemon said in structured form (see [`Detail`]), when it said it.
    #[error("{message} [{}] (daemon {addr})", code_name(*.code))]
    Status {
        addr: String,
        code: Code,
        message: String,
        detail: Option<Detail>,
    },
    /// A window name the cluster does not have.
    #[error("window '{name}' does not exist; the windows are {known}")]
    NoSuchWindow { name: String, known: String },
    /// A call that is wrong before anything is sent.
    #[error("{0}")]
    InvalidArgument(String),
    /// A transfer whose geometry does not hold (buffer, offset, region);
    /// nothing was sent.
    #[error(transparent)]
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
        use tonic_types::StatusExt;
        let detail = s.get_details_error_info().map(|info| Detail {
            reason: info.reason,
            metadata: info.metadata.into_iter().collect(),
            field: s
                .get_details_bad_request()
                .and_then(|b| b.field_violations.into_iter().next())
                .map(|v| v.field),
        });
        Error::Status {
            addr: addr.to_string(),
            code: s.code(),
            message: s.message().to_string(),
            detail,
        }
    }

    /// The daemon's structured detail of this error, if it sent one.
    pub fn detail(&self) -> Option<&Detail> {
        match self {
            Error::Status { detail, .. } => detail.as_ref(),
            _ => None,
        }
    }

    /// The kind of error the daemon reported (`OUT_OF_BOUNDS`,
    /// `PEER_LOST`, `BARRIER_TIMEOUT`, ...; docs/client.md lists them).
    pub fn reason(&self) -> Option<&str> {
        self.detail().map(|d| d.reason.as_str())
    }
}

impl pld_proto::rma::Reason for Error {
    /// The daemon's reason; for an error of this side, what kind it is.
    fn reason(&self) -> &str {
        match self {
            Error::Status {
                detail: Some(d), ..
            } => &d.reason,
            Error::Status { code, .. } => code_name(*code),
            Error::Connect { .. } => "CONNECT",
            Error::NoSuchWindow { .. } => "NO_SUCH_WINDOW",
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::Geometry(_) => "INVALID_GEOMETRY",
            Error::Io { .. } => "IO",
        }
    }
}

/// What a daemon says about an error in structured form (a
/// `google.rpc.ErrorInfo` of domain `pld.v1` in the status details): a
/// stable reason, and the values its message names — `rank`, `op`, `id`,
/// `window`, `offset`, `epoch`, `round`, `missing`, `expected`, `last`...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// The kind of error, UPPER_SNAKE.
    pub reason: String,
    /// The values the message names, by key.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// For a request the daemon found malformed: the field at fault.
    pub field: Option<String>,
}

impl Detail {
    /// The value of `key`, if the daemon sent it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// `key` as a number.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.get(key)?.parse().ok()
    }

    /// `key` as a list of ranks (`missing`, `unreachable`).
    pub fn ranks(&self, key: &str) -> Vec<u32> {
        self.get(key)
            .map(|v| v.split(',').filter_map(|r| r.parse().ok()).collect())
            .unwrap_or_default()
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
