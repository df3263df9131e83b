//! The geometry rules of a transfer, said once for every driver: how a
//! request's offset and region become a [`Transfer`], what a local buffer
//! must hold, how a region travels on the wire, and how a transfer is cut
//! into chunks and how many are in flight ([`plan`]). The embedded rank, the
//! gRPC service and the Rust client all use these; their errors are typed
//! ([`GeometryError`]) and each driver says which op they belong to.

use crate::Dtype;
use crate::region::{ChunkPlan, Chunking, Layout, RegionError, Shape, Transfer};
use crate::v1::Region;

/// Chunks in flight by default are enough to keep this many bytes moving.
pub const DEFAULT_INFLIGHT_BYTES: u64 = 16 << 20;
/// The most chunks in flight by default.
pub const MAX_DEFAULT_DEPTH: u64 = 256;

/// Why a transfer's geometry does not hold.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// The transfer has no element type.
    #[error("the transfer needs a dtype")]
    NoDtype,
    /// A byte offset that is not a whole number of elements.
    #[error("offset {offset} is not a multiple of the {dtype} element size ({elem} bytes)")]
    MisalignedOffset {
        offset: u64,
        dtype: Dtype,
        elem: u64,
    },
    /// A byte length that is not a whole number of elements.
    #[error("length {len} is not a multiple of the {dtype} element size ({elem} bytes)")]
    MisalignedLength { len: u64, dtype: Dtype, elem: u64 },
    /// The region's packed size does not fit in 64 bits.
    #[error("a region of {rows} x {cols} {dtype} is too large")]
    TooLarge { rows: u64, cols: u64, dtype: Dtype },
    /// An element offset whose byte offset does not fit in 64 bits.
    #[error("element offset {0} overflows")]
    OffsetOverflow(u64),
    /// The region's layout in a buffer does not hold.
    #[error("{what}: {error}")]
    Layout {
        what: &'static str,
        error: RegionError,
    },
    /// The region's extent in a buffer overflows.
    #[error("{what}: the region's extent overflows")]
    ExtentOverflow { what: &'static str },
    /// A buffer smaller than the region in it.
    #[error("{what} holds {len} bytes, the region in it needs {need}")]
    BufferTooSmall {
        what: &'static str,
        len: u64,
        need: u64,
    },
    /// Packed data of another size than the region.
    #[error("the data holds {got} bytes, the region of {rows} x {cols} {dtype} needs {need}")]
    DataLength {
        got: u64,
        rows: u64,
        cols: u64,
        dtype: Dtype,
        need: u64,
    },
    /// A chunk dimension of 0.
    #[error("chunk sizes must be at least 1, got {rows} x {cols}")]
    EmptyChunk { rows: u64, cols: u64 },
    /// A chunk larger than one frame may carry.
    #[error(
        "a chunk of {rows} x {cols} {dtype} is {bytes} bytes, more than the frame limit of {max} bytes; use smaller chunks"
    )]
    ChunkTooLarge {
        rows: u64,
        cols: u64,
        dtype: Dtype,
        bytes: u64,
        max: u64,
    },
    /// `pipeline` without both chunk sizes.
    #[error("pipeline needs both chunk_rows and chunk_cols")]
    PipelineWithoutChunks,
    /// One chunk size without the other.
    #[error("chunk_rows and chunk_cols go together: give both or neither")]
    HalfChunking,
    /// A pipeline shallower than double buffering.
    #[error("a pipeline keeps at least 2 chunks in flight, not {0}")]
    ShallowPipeline(usize),
}

/// The byte offset of an element offset.
pub fn byte_offset(at: Layout, elem: u64) -> Result<u64, GeometryError> {
    at.offset
        .checked_mul(elem)
        .ok_or(GeometryError::OffsetOverflow(at.offset))
}

/// The bytes a region of `shape` holds packed.
pub fn packed_len(shape: Shape, dtype: Dtype) -> Result<u64, GeometryError> {
    shape
        .elems()
        .and_then(|n| n.checked_mul(dtype.size() as u64))
        .ok_or(GeometryError::TooLarge {
            rows: shape.rows,
            cols: shape.cols,
            dtype,
        })
}

/// Checks that a buffer of `len` bytes holds a region of `shape` of
/// `elem`-byte elements in layout `at`; `what` names the buffer.
pub fn check_buffer(
    at: Layout,
    shape: Shape,
    elem: u64,
    len: usize,
    what: &'static str,
) -> Result<(), GeometryError> {
    let span = at
        .span(shape)
        .map_err(|error| GeometryError::Layout { what, error })?;
    let need = if span == 0 {
        0
    } else {
        at.offset
            .checked_add(span)
            .and_then(|e| e.checked_mul(elem))
            .ok_or(GeometryError::ExtentOverflow { what })?
    };
    if need > len as u64 {
        return Err(GeometryError::BufferTooSmall {
            what,
            len: len as u64,
            need,
        });
    }
    Ok(())
}

/// How a region in layout `at` travels: `None` when its rows are packed
/// (plain bytes say it), else the region with its stride.
pub fn wire_region(dtype: Dtype, at: Layout, shape: Shape) -> Option<Region> {
    (!at.dense(shape)).then_some(Region {
        rows: shape.rows,
        cols: shape.cols,
        row_stride: at.row_stride,
        dtype: dtype as i32,
    })
}

/// The chunks of transfer `t` that a frame of `max_payload` bytes carries,
/// and how many may be in flight. Explicit chunks are `chunk_rows x
/// chunk_cols` and must fit a frame; without them whole rows fill frames.
/// `pipeline` keeps `depth` chunks in flight (at least 2; by default enough
/// for 16 MiB, at most 256); explicit chunks without it go one at a time;
/// no chunking at all streams at the default depth.
pub fn plan(
    t: &Transfer,
    c: &Chunking,
    max_payload: usize,
) -> Result<(ChunkPlan, usize), GeometryError> {
    let elem = t.dtype.size() as u64;
    if elem == 0 {
        return Err(GeometryError::NoDtype);
    }
    let plan = match (c.chunk_rows, c.chunk_cols) {
        (Some(r), Some(k)) => {
            if r == 0 || k == 0 {
                return Err(GeometryError::EmptyChunk { rows: r, cols: k });
            }
            let plan = ChunkPlan::new(t.shape, Shape { rows: r, cols: k });
            let ch = plan.chunk();
            let bytes = ch.rows.saturating_mul(ch.cols).saturating_mul(elem);
            if bytes > max_payload as u64 {
                return Err(GeometryError::ChunkTooLarge {
                    rows: ch.rows,
                    cols: ch.cols,
                    dtype: t.dtype,
                    bytes,
                    max: max_payload as u64,
                });
            }
            plan
        }
        (None, None) if c.pipeline => return Err(GeometryError::PipelineWithoutChunks),
        (None, None) => ChunkPlan::by_rows(t.shape, (max_payload as u64 / elem).max(1)),
        _ => return Err(GeometryError::HalfChunking),
    };
    let ch = plan.chunk();
    let chunk_bytes = (ch.rows * ch.cols * elem).max(1);
    let default = (DEFAULT_INFLIGHT_BYTES / chunk_bytes).clamp(2, MAX_DEFAULT_DEPTH) as usize;
    let depth = match (c.pipeline, c.depth, c.chunk_rows.is_some()) {
        (true, Some(d), _) if d < 2 => return Err(GeometryError::ShallowPipeline(d)),
        (true, Some(d), _) => d,
        (true, None, _) => default,
        // Explicit chunks without a pipeline: one at a time.
        (false, _, true) => 1,
        // No chunking asked for: the region just streams.
        (false, _, false) => default,
    };
    Ok((plan, depth))
}

/// Where a request's transfer lies: in the window (offset and stride) and
/// in the packed bytes of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// The element type.
    pub dtype: Dtype,
    /// Rows and columns moved.
    pub shape: Shape,
    /// The region in the window, in elements.
    pub window: Layout,
    /// Bytes the region holds, packed.
    pub packed_len: u64,
}

impl Geometry {
    /// A request's geometry: `offset` bytes into the window, and either a
    /// wire region (`row_stride` 0 meaning packed rows) or `len` bytes.
    pub fn from_request(
        dtype: Dtype,
        offset: u64,
        region: Option<&Region>,
        len: u64,
    ) -> Result<Geometry, GeometryError> {
        let elem = dtype.size() as u64;
        if elem == 0 {
            return Err(GeometryError::NoDtype);
        }
        if offset % elem != 0 {
            return Err(GeometryError::MisalignedOffset {
                offset,
                dtype,
                elem,
            });
        }
        let (shape, stride) = match region {
            Some(r) => {
                let stride = if r.row_stride == 0 {
                    r.cols
                } else {
                    r.row_stride
                };
                (
                    Shape {
                        rows: r.rows,
                        cols: r.cols,
                    },
                    stride,
                )
            }
            None => {
                if len % elem != 0 {
                    return Err(GeometryError::MisalignedLength { len, dtype, elem });
                }
                let n = len / elem;
                (Shape { rows: 1, cols: n }, n)
            }
        };
        Ok(Geometry {
            dtype,
            shape,
            window: Layout {
                offset: offset / elem,
                row_stride: stride,
            },
            packed_len: packed_len(shape, dtype)?,
        })
    }

    fn packed(&self) -> Layout {
        Layout {
            offset: 0,
            row_stride: self.shape.cols,
        }
    }

    /// From the packed bytes into the window.
    pub fn store(&self) -> Transfer {
        Transfer {
            dtype: self.dtype,
            shape: self.shape,
            dst: self.window,
            src: self.packed(),
        }
    }

    /// From the window into packed bytes.
    pub fn load(&self) -> Transfer {
        Transfer {
            dtype: self.dtype,
            shape: self.shape,
            dst: self.packed(),
            src: self.window,
        }
    }

    /// Checks that `got` bytes of packed data are this region's.
    pub fn check_data(&self, got: usize) -> Result<(), GeometryError> {
        if self.packed_len != got as u64 {
            return Err(GeometryError::DataLength {
                got: got as u64,
                rows: self.shape.rows,
                cols: self.shape.cols,
                dtype: self.dtype,
                need: self.packed_len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
