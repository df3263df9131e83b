//! The failure catalog of the simulated device (SPEC §5): every mistake a
//! kernel can make is caught before anything is sent, and says the fix.

use pld_proto::Dtype;

/// Why a kernel's call failed.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--checked`: accesses no barrier, wait or atomic ordered.
    #[error("checked: {} race(s) — the result depends on timing:\n{}", .reports.len(), .reports.join("\n"))]
    Races { reports: Vec<String> },
    /// A local Tensor was passed where a DistributedTensor (a window view)
    /// is required.
    #[error(
        "{call} needs a DistributedTensor, but {what} that no peer can reach; allocate the shared \
         buffer with alloc_window_buffer and pass a window view of it"
    )]
    NotDistributed { call: String, what: String },
    /// A region outside the tensor it addresses.
    #[error(
        "{call}: the region at [{row}, {col}] of shape [{rows}, {cols}] does not fit in '{name}' of shape \
         [{shape_rows}, {shape_cols}]; shrink the shape or move the offsets"
    )]
    OutOfBounds {
        call: &'static str,
        name: String,
        row: u64,
        col: u64,
        rows: u64,
        cols: u64,
        shape_rows: u64,
        shape_cols: u64,
    },
    /// Two operands of different dtypes.
    #[error("{call}: '{name}' is {found}, but {expected} is required; {fix}")]
    DtypeMismatch {
        call: &'static str,
        name: String,
        expected: Dtype,
        found: Dtype,
        fix: &'static str,
    },
    /// Two operands of different shapes.
    #[error(
        "{call}: shapes [{a_rows}, {a_cols}] and [{b_rows}, {b_cols}] differ; give operands of one shape"
    )]
    ShapeMismatch {
        call: &'static str,
        a_rows: u64,
        a_cols: u64,
        b_rows: u64,
        b_cols: u64,
    },
    /// A tile that does not fit in what is left of on-chip memory.
    #[error(
        "a [{rows}, {cols}] {dtype} tile needs {bytes} bytes of on-chip memory, but {profile} has {free} of \
         {capacity} bytes free; use smaller tiles, drop tiles you no longer need, or move the region with \
         put/get, which stream through staging tiles"
    )]
    TileOverCapacity {
        rows: u64,
        cols: u64,
        dtype: Dtype,
        bytes: u64,
        free: u64,
        capacity: u64,
        profile: &'static str,
    },
    /// A tile whose rows (or, for a [N, 1] column, whose column) are not a
    /// multiple of 32 bytes.
    #[error(
        "a [{rows}, {cols}] {dtype} tile has rows of {row_bytes} bytes; tiles are 32-byte aligned, so pad the \
         columns to a multiple of {multiple}, or make it a [{multiple}k, 1] column (and pass valid_shape for the part \
         that holds data)"
    )]
    MisalignedTile {
        rows: u64,
        cols: u64,
        dtype: Dtype,
        row_bytes: u64,
        multiple: u64,
    },
    /// `pipeline` without both chunk sizes.
    #[error(
        "{call}: pipeline=true needs both chunk_rows and chunk_cols; give both, or drop pipeline"
    )]
    PipelineWithoutChunks { call: &'static str },
    /// One chunk size without the other.
    #[error("{call}: chunk_rows and chunk_cols go together; give both or neither")]
    ChunkSizeAlone { call: &'static str },
    /// Offsets given without a shape, or a shape without offsets.
    #[error(
        "{call}: dst_offsets, src_offsets and shape go together: give all three, or none to move the whole tensor"
    )]
    OffsetsWithoutShape { call: &'static str },
    /// A tensor too large for one remote_store message.
    #[error(
        "{call}: a tensor of {bytes} bytes is larger than on-chip memory ({capacity} bytes on {profile}); \
         remote_store sends what is on chip as one message — use put, which streams in chunks"
    )]
    TooLargeForRemoteStore {
        call: &'static str,
        bytes: u64,
        capacity: u64,
        profile: &'static str,
    },
    /// The symmetric window allocator ran out of window.
    #[error(
        "allocating {bytes} bytes in window '{window}' needs {needed} bytes, but the window has {size}; \
         give the window more (--window {window}=SIZE)"
    )]
    WindowFull {
        window: String,
        bytes: u64,
        needed: u64,
        size: u64,
    },
    /// A peer that is not a rank: out of range, or an unsigned `r - 1`
    /// that wrapped.
    #[error(
        "{call}: peer {peer} is not a rank: the ranks are 0 to {last}; compute neighbours with \
         Device::peer_prev / Device::peer_next (modular, they never wrap)"
    )]
    PeerOutOfRange {
        call: &'static str,
        peer: i64,
        last: u32,
    },
    /// A signal whose shape does not fit the call.
    #[error(
        "{call}: the signal '{name}' is [{rows}, {cols}], but {call} needs at least [{want_rows}, {want_cols}] \
         int32 cells ({why}); allocate it as alloc_window_buffer([{want_rows}, {want_cols}], int32)"
    )]
    SignalShape {
        call: &'static str,
        name: String,
        rows: u64,
        cols: u64,
        want_rows: u64,
        want_cols: u64,
        why: &'static str,
    },
    /// A signal a concurrent collective of this rank is using.
    #[error(
        "{call}: the signal '{name}' is in use by a concurrent {other} on this rank; give each concurrent \
         collective its own signal (alloc_window_buffer + window)"
    )]
    SignalInUse {
        call: &'static str,
        name: String,
        other: &'static str,
    },
    /// Ranks that allocated different window buffers at the same step.
    #[error(
        "window buffer #{index} is {ours} on rank {rank} but {theirs} on rank {other}: every rank must \
         allocate the same buffers in the same order, or the offsets differ; allocate outside any \
         `if rank == ...`"
    )]
    AsymmetricAlloc {
        index: usize,
        rank: u32,
        ours: String,
        other: u32,
        theirs: String,
    },
    /// A rank that allocated a window buffer another rank did not.
    #[error(
        "rank {rank} allocated window buffer '{buffer}' but rank {other} did not: every rank must allocate \
         the same buffers in the same order; allocate outside any `if rank == ...`"
    )]
    MissingAlloc {
        buffer: String,
        rank: u32,
        other: u32,
    },
    /// A window view larger than its buffer.
    #[error(
        "window: a view of {bytes} bytes does not fit in buffer '{buffer}' of {size} bytes; \
         allocate the buffer with the view's shape and dtype"
    )]
    ViewTooLarge {
        buffer: String,
        bytes: u64,
        size: u64,
    },
    /// An N-D region that is not one rectangle once the leading dims are
    /// collapsed into rows.
    #[error(
        "{call}: the region {shape:?} at {offsets:?} of '{name}' {dims:?} is not one 2-D rectangle once the \
         leading dimensions are collapsed into rows; split it into loads that are"
    )]
    NotRectangular {
        call: &'static str,
        name: String,
        dims: Vec<u64>,
        offsets: Vec<u64>,
        shape: Vec<u64>,
    },
    /// A tensor `remote_store` whose rows are not 32-byte aligned.
    #[error(
        "{call}: a [{rows}, {cols}] {dtype} tensor has rows of {row_bytes} bytes; remote_store sends from chip, \
         where rows are 32-byte aligned: pad the columns to a multiple of {multiple}, or move it with put"
    )]
    MisalignedRemoteStore {
        call: &'static str,
        rows: u64,
        cols: u64,
        dtype: Dtype,
        row_bytes: u64,
        multiple: u64,
    },
    /// A shape whose element count does not fit any window or chip.
    #[error(
        "{call}: '{name}' of shape {dims:?} has more than 2^48 elements, more than any window or chip holds; \
         check the shape"
    )]
    TooLarge {
        call: &'static str,
        name: String,
        dims: Vec<u64>,
    },
    /// The program's arguments are wrong.
    #[error("{0}")]
    Usage(String),
    /// The rank (embedded or through its daemon) failed the op; `reason`
    /// is the rank's (`WAIT_TIMEOUT`, `PEER_LOST`...).
    #[error("rank {rank}: {message}")]
    Rma {
        rank: u32,
        reason: String,
        message: String,
    },
}

/// Declares [`ErrorKind`]: one kind per device error, and one per RMA
/// failure a program may want to handle (the others are `Rma`).
macro_rules! kinds {
    ($($(#[$doc:meta])* $kind:ident),* $(,)?) => {
        /// What kind of error a device error is: each is one exception
        /// class in Python (`pld_pypto.errors`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorKind {
            $($(#[$doc])* $kind,)*
        }

        impl ErrorKind {
            /// Every kind.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind),*];

            /// The kind's name: its exception's.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => stringify!($kind),)*
                }
            }
        }
    };
}

kinds! {
    /// [`Error::Races`].
    Races,
    /// [`Error::NotDistributed`].
    NotDistributed,
    /// [`Error::OutOfBounds`].
    OutOfBounds,
    /// [`Error::DtypeMismatch`].
    DtypeMismatch,
    /// [`Error::ShapeMismatch`].
    ShapeMismatch,
    /// [`Error::TileOverCapacity`].
    TileOverCapacity,
    /// [`Error::MisalignedTile`].
    MisalignedTile,
    /// [`Error::PipelineWithoutChunks`].
    PipelineWithoutChunks,
    /// [`Error::ChunkSizeAlone`].
    ChunkSizeAlone,
    /// [`Error::OffsetsWithoutShape`].
    OffsetsWithoutShape,
    /// [`Error::TooLargeForRemoteStore`].
    TooLargeForRemoteStore,
    /// [`Error::WindowFull`].
    WindowFull,
    /// [`Error::PeerOutOfRange`].
    PeerOutOfRange,
    /// [`Error::SignalShape`].
    SignalShape,
    /// [`Error::SignalInUse`].
    SignalInUse,
    /// [`Error::AsymmetricAlloc`].
    AsymmetricAlloc,
    /// [`Error::MissingAlloc`].
    MissingAlloc,
    /// [`Error::ViewTooLarge`].
    ViewTooLarge,
    /// [`Error::NotRectangular`].
    NotRectangular,
    /// [`Error::MisalignedRemoteStore`].
    MisalignedRemoteStore,
    /// [`Error::TooLarge`].
    TooLarge,
    /// [`Error::Usage`].
    Usage,
    /// A `wait` whose condition did not hold by its deadline.
    WaitTimeout,
    /// A barrier that some rank did not reach by its deadline.
    BarrierTimeout,
    /// A `quiet` whose ops did not all complete by its deadline.
    QuietTimeout,
    /// An op whose target did not answer by its deadline.
    OpTimeout,
    /// A peer whose connection broke.
    PeerLost,
    /// Strict checked mode refused a racing access.
    Race,
    /// Any other failure of the rank.
    Rma,
}

impl Error {
    /// The error's kind. Exhaustive: a new error is a compile error here.
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self {
            Error::Races { .. } => K::Races,
            Error::NotDistributed { .. } => K::NotDistributed,
            Error::OutOfBounds { .. } => K::OutOfBounds,
            Error::DtypeMismatch { .. } => K::DtypeMismatch,
            Error::ShapeMismatch { .. } => K::ShapeMismatch,
            Error::TileOverCapacity { .. } => K::TileOverCapacity,
            Error::MisalignedTile { .. } => K::MisalignedTile,
            Error::PipelineWithoutChunks { .. } => K::PipelineWithoutChunks,
            Error::ChunkSizeAlone { .. } => K::ChunkSizeAlone,
            Error::OffsetsWithoutShape { .. } => K::OffsetsWithoutShape,
            Error::TooLargeForRemoteStore { .. } => K::TooLargeForRemoteStore,
            Error::WindowFull { .. } => K::WindowFull,
            Error::PeerOutOfRange { .. } => K::PeerOutOfRange,
            Error::SignalShape { .. } => K::SignalShape,
            Error::SignalInUse { .. } => K::SignalInUse,
            Error::AsymmetricAlloc { .. } => K::AsymmetricAlloc,
            Error::MissingAlloc { .. } => K::MissingAlloc,
            Error::ViewTooLarge { .. } => K::ViewTooLarge,
            Error::NotRectangular { .. } => K::NotRectangular,
            Error::MisalignedRemoteStore { .. } => K::MisalignedRemoteStore,
            Error::TooLarge { .. } => K::TooLarge,
            Error::Usage(_) => K::Usage,
            Error::Rma { reason, .. } => match reason.as_str() {
                "WAIT_TIMEOUT" => K::WaitTimeout,
                "BARRIER_TIMEOUT" => K::BarrierTimeout,
                "QUIET_TIMEOUT" => K::QuietTimeout,
                "OP_TIMEOUT" => K::OpTimeout,
                "PEER_LOST" => K::PeerLost,
                "RACE" => K::Race,
                _ => K::Rma,
            },
        }
    }
}

/// A device result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
