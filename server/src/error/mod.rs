//! Errors of the rank engine. Each says who failed and where: the rank, the
//! peer's address, the window, the offset, the op and its id.

use pld_proto::handshake::Mismatch;
use pld_proto::{Cmp, Dtype, ErrorCode, OpKind};
use std::time::Duration;

mod detail;
mod setup;
pub use detail::Meta;
pub use setup::{ConfigError, TlsError};

/// Why an access to a window was refused. Produced by the same checks on the
/// origin (before anything is sent) and on the target (before any byte of the
/// window changes).
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// The range does not lie inside the window.
    #[error("{len} bytes at offset {offset} do not fit in window '{window}' of {size} bytes")]
    OutOfBounds {
        window: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    /// An offset that is not a multiple of the element size.
    #[error(
        "offset {offset} in window '{window}' is not a multiple of the {dtype} element size ({size} bytes)"
    )]
    MisalignedOffset {
        window: String,
        offset: u64,
        dtype: Dtype,
        size: usize,
    },
    /// A length that is not a multiple of the element size.
    #[error("length {len} is not a multiple of the {dtype} element size ({size} bytes)")]
    MisalignedLength { len: u64, dtype: Dtype, size: usize },
    /// A dtype value pld does not know.
    #[error("unknown dtype value {value}")]
    UnknownDtype { value: i32 },
    /// A dtype the operation does not take.
    #[error("{op} does not support dtype {dtype}; it takes {supported}")]
    UnsupportedDtype {
        op: OpKind,
        dtype: Dtype,
        supported: &'static str,
    },
    /// An operand that does not fit the cell's dtype.
    #[error("{op} operand {value} does not fit a {dtype} cell")]
    ValueOutOfRange {
        op: OpKind,
        dtype: Dtype,
        value: i64,
    },
    /// A window id that the target does not have.
    #[error("unknown window id {id}: this rank has {count} windows")]
    UnknownWindow { id: u32, count: usize },
    /// A 2-D region that cannot be (overlapping rows, an extent that overflows).
    #[error("bad region: {reason}")]
    BadRegion { reason: String },
    /// A payload whose length is not the region's packed size.
    #[error("the payload holds {got} bytes, the region {expected}")]
    PayloadLength { expected: u64, got: u64 },
    /// A get whose reply would not fit the origin's frame limit.
    #[error("a get of {len} bytes exceeds the origin's frame limit of {max} bytes")]
    ReplyTooLarge { len: u64, max: u64 },
    /// A message that is not a request where a request was expected.
    #[error("the message is not a request")]
    NotARequest,
    /// A wait or test without a comparison.
    #[error("the comparison value {value} is none of ==, !=, >, >=, <, <=")]
    InvalidCmp { value: i32 },
    /// An atomic_bitwise or fetch_bitwise without a valid bitwise op.
    #[error("bitwise op value {value} is none of and, or, xor")]
    InvalidBitOp { value: i32 },
    /// A notify without a valid op.
    #[error("notify op value {value} is neither set nor atomic_add")]
    InvalidNotifyOp { value: i32 },
    /// Checked mode, strict: the access races another that no ordering
    /// separates it from; it was not applied.
    #[error("{report}")]
    Race { report: String },
}

impl AccessError {
    /// The wire code for an error reply.
    pub fn code(&self) -> ErrorCode {
        match self {
            AccessError::OutOfBounds { .. } => ErrorCode::OutOfRange,
            AccessError::MisalignedOffset { .. } | AccessError::MisalignedLength { .. } => {
                ErrorCode::Misaligned
            }
            AccessError::UnknownDtype { .. } => ErrorCode::UnknownDtype,
            AccessError::UnsupportedDtype { .. } => ErrorCode::UnsupportedDtype,
            AccessError::UnknownWindow { .. } => ErrorCode::UnknownWindow,
            AccessError::InvalidNotifyOp { .. }
            | AccessError::InvalidBitOp { .. }
            | AccessError::InvalidCmp { .. }
            | AccessError::ValueOutOfRange { .. }
            | AccessError::ReplyTooLarge { .. }
            | AccessError::BadRegion { .. }
            | AccessError::PayloadLength { .. } => ErrorCode::InvalidArgument,
            AccessError::NotARequest => ErrorCode::UnexpectedMessage,
            AccessError::Race { .. } => ErrorCode::Race,
        }
    }
}

/// Everything a [`crate::Rank`] operation or its startup can fail with.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot form a rank.
    // Not the error's source: its text is in the message already (a
    // source would print it twice in an error chain).
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
    /// A rank id outside the cluster.
    #[error("rank {rank} does not exist: the cluster has ranks 0 to {last}", last = .nranks.saturating_sub(1))]
    NoSuchRank { rank: u32, nranks: u32 },
    /// A window name that is not configured.
    #[error("window '{name}' does not exist; the windows are {known}")]
    NoSuchWindow { name: String, known: String },
    /// The access was refused by the checks, before anything was sent.
    #[error("{op} to rank {rank}: {error}")]
    Access {
        op: OpKind,
        rank: u32,
        error: AccessError,
    },
    /// A wait or test on this rank's own signal cell was refused by the
    /// checks (`op` is `wait` or `test`).
    #[error("{op} on rank {rank}'s signal cell: {error}")]
    CellAccess {
        op: &'static str,
        rank: u32,
        error: AccessError,
    },
    /// A transfer's chunking, shape or buffers do not fit together; nothing
    /// was sent.
    #[error("{op}: {error}")]
    InvalidTransfer {
        op: OpKind,
        error: pld_proto::geometry::GeometryError,
    },
    /// The target refused the request; no byte of its window changed.
    #[error("rank {rank} rejected {op} #{id}: {message}")]
    Rejected {
        rank: u32,
        op: OpKind,
        id: u64,
        code: ErrorCode,
        message: String,
    },
    /// The connection to a peer is gone; ops to it fail until it is back.
    #[error("rank {rank} is unreachable: {reason}")]
    PeerLost { rank: u32, reason: String },
    /// No reply within the op timeout; the op may or may not have been applied.
    #[error("{op} #{id} to rank {rank} got no reply within {timeout:?}")]
    OpTimeout {
        rank: u32,
        op: OpKind,
        id: u64,
        timeout: Duration,
    },
    /// `quiet` could not see every outstanding op complete in time.
    #[error(
        "quiet timed out after {timeout:?}; still outstanding: {outstanding}{}",
        unreachable_note(unreachable)
    )]
    QuietTimeout {
        timeout: Duration,
        outstanding: String,
        unreachable: Vec<(u32, String)>,
    },
    /// Requests issued without a handle (`Rank::put_nbi`) failed since the
    /// last `quiet`; `first` is the first of them to fail, naming its rank,
    /// op and id.
    #[error(
        "{failed} request(s) issued without a handle failed since the last quiet; the first: {first}"
    )]
    ImplicitFailed { failed: u64, first: Box<Error> },
    /// A barrier did not complete by its deadline. It stays pending: the
    /// next barrier call on this rank resumes it.
    #[error("{report}")]
    BarrierTimeout {
        epoch: u64,
        /// The round whose message had not arrived (1-based, as reported).
        round: u32,
        /// The rank whose message this rank waited for.
        waiting_for: u32,
        /// Ranks whose arrival this rank had not heard of, even indirectly.
        not_heard_from: Vec<u32>,
        /// Ranks that are dead or cut off, with why.
        unreachable: Vec<(u32, String)>,
        report: String,
    },
    /// A wait on a signal cell did not see its condition by the deadline.
    #[error("{report}")]
    WaitTimeout {
        window: String,
        offset: u64,
        cmp: Cmp,
        expected: i32,
        /// The cell's value at the deadline.
        last: i32,
        unreachable: Vec<(u32, String)>,
        report: String,
    },
    /// A peer disagrees on the cluster's identity.
    #[error("rank {peer} at {addr}: {mismatch}")]
    Mismatch {
        peer: u32,
        addr: String,
        mismatch: Mismatch,
    },
    /// A peer refused this rank's handshake.
    #[error("rank {peer} at {addr} refused the handshake: {message}")]
    Refused {
        peer: u32,
        addr: String,
        message: String,
    },
    /// A peer could not be reached within the connect timeout.
    #[error("could not connect to rank {peer} at {addr} within {timeout:?}: {last_error}")]
    ConnectTimeout {
        peer: u32,
        addr: String,
        timeout: Duration,
        last_error: String,
    },
    /// A peer sent something the protocol does not allow.
    #[error("rank {rank} broke the protocol: {reason}")]
    Protocol { rank: u32, reason: String },
    /// Local I/O failed (binding a port, resolving a name, ...).
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    /// Certificates or TLS configuration could not be built.
    // As `Config`: in the message, not the source.
    #[error("tls setup failed: {0}")]
    Tls(TlsError),
    /// A peer's TLS handshake failed on a certificate: its certificate is
    /// not of this cluster's CA or does not name the rank, or it rejected
    /// this rank's.
    #[error("rank {peer} at {addr} failed mutual TLS authentication: {reason}")]
    Authentication {
        peer: u32,
        addr: String,
        reason: String,
    },
}

/// `; rank 3 is unreachable (connection lost)` for every unreachable rank.
pub(crate) fn unreachable_note(unreachable: &[(u32, String)]) -> String {
    unreachable
        .iter()
        .map(|(r, why)| format!("; rank {r} is unreachable ({why})"))
        .collect()
}

impl Error {
    /// An I/O failure, saying what was being done (`context`).
    pub fn io(context: impl Into<String>, error: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            error,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
}

impl From<TlsError> for Error {
    fn from(e: TlsError) -> Error {
        Error::Tls(e)
    }
}

/// `text` cut to at most `max` bytes (at a character boundary), saying how
/// long it was: errors that echo what a user sent (a window name, a
/// message built from one) stay bounded however much was sent.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..end], text.len()).into()
}

#[cfg(test)]
mod clip_tests {
    use super::clip;

    #[test]
    fn long_text_is_cut_at_a_character_boundary_and_says_its_length() {
        assert_eq!(clip("data", 8), "data");
        let long = "é".repeat(100);
        let c = clip(&long, 9);
        assert_eq!(c, format!("{}... (200 bytes in all)", "é".repeat(4)));
    }
}
