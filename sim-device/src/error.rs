//! The failure catalog of the simulated device (SPEC §5): every mistake a
//! kernel can make is caught before anything is sent, and says the fix.

use pld_proto::Dtype;

/// Why a kernel's call failed.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A local Tensor was passed where a DistributedTensor (a window view)
    /// is required.
    #[error(
        "{call} needs a DistributedTensor, but '{name}' is a local Tensor that no peer can reach; \
         allocate the shared buffer in a window (Device::alloc) and pass that view"
    )]
    NotDistributed { call: &'static str, name: String },
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
    /// A tile whose rows are not a multiple of 32 bytes.
    #[error(
        "a [{rows}, {cols}] {dtype} tile has rows of {row_bytes} bytes; tiles are 32-byte aligned, so pad the \
         columns to a multiple of {multiple} (and pass valid_shape for the part that holds data)"
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
    /// The program's arguments are wrong.
    #[error("{0}")]
    Usage(String),
    /// The rank (embedded or through its daemon) failed the op.
    #[error("rank {rank}: {message}")]
    Rma { rank: u32, message: String },
}

/// A device result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
