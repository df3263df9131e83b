//! 2-D strided regions and how a transfer of one is cut into chunks.
//!
//! A region is `rows` rows of `cols` elements, row i starting `row_stride`
//! elements after row i−1. A transfer moves a region of one shape from a
//! source layout to a destination layout, chunk by chunk: chunks of
//! `chunk_rows × chunk_cols` elements in row-major order, each one frame.

/// Where a region lies: its first element and the distance between rows,
/// both in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Layout {
    /// The first element.
    pub offset: u64,
    /// Elements from one row's start to the next's (at least the region's columns).
    pub row_stride: u64,
}

/// The shape of a region, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    /// Rows.
    pub rows: u64,
    /// Elements per row.
    pub cols: u64,
}

impl Shape {
    /// Elements in the region.
    pub fn elems(self) -> Option<u64> {
        self.rows.checked_mul(self.cols)
    }
}

/// Why a region cannot be.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    /// Rows would overlap.
    #[error("row stride {row_stride} is smaller than the {cols} columns of a region")]
    StrideTooSmall { row_stride: u64, cols: u64 },
    /// The region's extent overflows 64 bits.
    #[error("a region of {rows} x {cols} with row stride {row_stride} is too large")]
    TooLarge {
        rows: u64,
        cols: u64,
        row_stride: u64,
    },
}

impl Layout {
    /// The number of elements from the first to one past the last element
    /// of a region of `shape` in this layout (0 for an empty region).
    pub fn span(self, shape: Shape) -> Result<u64, RegionError> {
        if shape.rows == 0 || shape.cols == 0 {
            return Ok(0);
        }
        let stride = if shape.rows == 1 {
            shape.cols
        } else {
            self.row_stride
        };
        if stride < shape.cols {
            return Err(RegionError::StrideTooSmall {
                row_stride: self.row_stride,
                cols: shape.cols,
            });
        }
        (shape.rows - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(shape.cols))
            .ok_or(RegionError::TooLarge {
                rows: shape.rows,
                cols: shape.cols,
                row_stride: self.row_stride,
            })
    }

    /// The layout of the sub-region that starts at (`row`, `col`).
    pub fn at(self, row: u64, col: u64) -> Layout {
        Layout {
            offset: self.offset + row * self.row_stride + col,
            row_stride: self.row_stride,
        }
    }

    /// Whether rows of `cols` elements follow each other without gaps, so
    /// that a region is one contiguous run.
    pub fn dense(self, shape: Shape) -> bool {
        shape.rows <= 1 || self.row_stride == shape.cols
    }
}

/// One chunk of a transfer: a sub-rectangle of the shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// The chunk's first row within the shape.
    pub row: u64,
    /// The chunk's first column within the shape.
    pub col: u64,
    /// The chunk's rows and columns.
    pub shape: Shape,
}

/// Cuts `shape` into chunks of at most `chunk` (rows × cols), row-major.
/// An empty shape has no chunks.
#[derive(Debug, Clone)]
pub struct ChunkPlan {
    shape: Shape,
    chunk: Shape,
    next: u64,
    count: u64,
}

impl ChunkPlan {
    /// Chunk sizes must be at least 1; they are clamped to the shape.
    pub fn new(shape: Shape, chunk: Shape) -> ChunkPlan {
        let chunk = Shape {
            rows: chunk.rows.clamp(1, shape.rows.max(1)),
            cols: chunk.cols.clamp(1, shape.cols.max(1)),
        };
        let count = if shape.rows == 0 || shape.cols == 0 {
            0
        } else {
            shape.rows.div_ceil(chunk.rows) * shape.cols.div_ceil(chunk.cols)
        };
        ChunkPlan {
            shape,
            chunk,
            next: 0,
            count,
        }
    }

    /// Chunks of whole rows, as many rows as fit in `max_elems` (at least
    /// one; a row longer than that is cut into pieces of `max_elems`).
    pub fn by_rows(shape: Shape, max_elems: u64) -> ChunkPlan {
        let max_elems = max_elems.max(1);
        let chunk = if shape.cols <= max_elems {
            Shape {
                rows: (max_elems / shape.cols.max(1)).max(1),
                cols: shape.cols,
            }
        } else {
            Shape {
                rows: 1,
                cols: max_elems,
            }
        };
        ChunkPlan::new(shape, chunk)
    }

    /// How many chunks the plan has in all.
    pub fn total(&self) -> u64 {
        self.count
    }

    /// The chunk size (clamped to the shape).
    pub fn chunk(&self) -> Shape {
        self.chunk
    }
}

impl Iterator for ChunkPlan {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        if self.next >= self.count {
            return None;
        }
        let per_row = self.shape.cols.div_ceil(self.chunk.cols);
        let (cr, cc) = (self.next / per_row, self.next % per_row);
        self.next += 1;
        let (row, col) = (cr * self.chunk.rows, cc * self.chunk.cols);
        Some(Chunk {
            row,
            col,
            shape: Shape {
                rows: self.chunk.rows.min(self.shape.rows - row),
                cols: self.chunk.cols.min(self.shape.cols - col),
            },
        })
    }
}

/// How a transfer streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chunking {
    /// Rows per chunk; with `chunk_cols`, cuts the region into chunks of
    /// `chunk_rows × chunk_cols`. Without them the region moves in chunks of
    /// whole rows that fill a frame.
    pub chunk_rows: Option<u64>,
    /// Columns per chunk (see `chunk_rows`).
    pub chunk_cols: Option<u64>,
    /// Keep several chunks in flight (needs both chunk sizes).
    pub pipeline: bool,
    /// How many chunks in flight with `pipeline` (at least 2); by default as
    /// many as keep 16 MiB moving.
    pub depth: Option<usize>,
}

impl Chunking {
    /// Chunks of `rows × cols`, one at a time.
    pub fn chunks(rows: u64, cols: u64) -> Chunking {
        Chunking {
            chunk_rows: Some(rows),
            chunk_cols: Some(cols),
            ..Chunking::default()
        }
    }

    /// Chunks of `rows × cols`, pipelined.
    pub fn pipelined(rows: u64, cols: u64) -> Chunking {
        Chunking {
            pipeline: true,
            ..Chunking::chunks(rows, cols)
        }
    }
}

/// A 2-D region transfer: `shape` elements of `dtype`, from `src` to `dst`
/// (layouts in elements). For a put, `src` lies in the caller's buffer and
/// `dst` in the peer's window; for a get the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// The element type.
    pub dtype: crate::Dtype,
    /// Rows and columns moved.
    pub shape: Shape,
    /// Where the region lies at the destination.
    pub dst: Layout,
    /// Where the region lies at the source.
    pub src: Layout,
}

/// Destination offsets, source offsets and shape were not given together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("destination offsets, source offsets and shape go together: give all three or none")]
pub struct PartsMissing;

impl Transfer {
    /// Builds a transfer from the tensor tier's optional parts: offsets and
    /// shape come all together or not at all.
    pub fn from_parts(
        dtype: crate::Dtype,
        dst: Option<Layout>,
        src: Option<Layout>,
        shape: Option<Shape>,
    ) -> Result<Option<Transfer>, PartsMissing> {
        match (dst, src, shape) {
            (Some(dst), Some(src), Some(shape)) => Ok(Some(Transfer {
                dtype,
                shape,
                dst,
                src,
            })),
            (None, None, None) => Ok(None),
            _ => Err(PartsMissing),
        }
    }
}

/// The byte ranges of the rows of the sub-region `chunk` of a region laid
/// out as `at`, for elements of `elem` bytes.
pub fn row_ranges(
    at: Layout,
    chunk: Chunk,
    elem: u64,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let base = at.at(chunk.row, chunk.col);
    let (n, cols) = (chunk.shape.rows, chunk.shape.cols);
    (0..n).map(move |r| {
        let start = ((base.offset + r * base.row_stride) * elem) as usize;
        start..start + (cols * elem) as usize
    })
}

/// The sub-regions that hold elements `from..to` of a region of `shape`
/// packed row after row: at most a tail of one row, a run of whole rows and
/// the head of another, in that order. A stream of packed bytes lands in a
/// region this way piece by piece.
pub fn packed_pieces(shape: Shape, from: u64, to: u64) -> Vec<Chunk> {
    let cols = shape.cols.max(1);
    let mut pieces = Vec::new();
    let mut at = from;
    while at < to {
        let (row, col) = (at / cols, at % cols);
        let piece = if col != 0 || to - at < cols {
            // Part of one row.
            let n = (cols - col).min(to - at);
            Shape { rows: 1, cols: n }
        } else {
            Shape {
                rows: (to - at) / cols,
                cols,
            }
        };
        pieces.push(Chunk {
            row,
            col,
            shape: piece,
        });
        at += piece.rows * piece.cols;
    }
    pieces
}

/// Copies the region `shape` laid out as `at` in `src` into a packed buffer.
pub fn pack(src: &[u8], at: Layout, shape: Shape, elem: u64) -> Vec<u8> {
    let whole = Chunk {
        row: 0,
        col: 0,
        shape,
    };
    let mut out = Vec::with_capacity((shape.rows * shape.cols * elem) as usize);
    for r in row_ranges(at, whole, elem) {
        out.extend_from_slice(&src[r]);
    }
    out
}

/// Copies packed rows into the region `shape` laid out as `at` in `dst`.
pub fn unpack(packed: &[u8], dst: &mut [u8], at: Layout, shape: Shape, elem: u64) {
    let whole = Chunk {
        row: 0,
        col: 0,
        shape,
    };
    let row = (shape.cols * elem) as usize;
    for (i, r) in row_ranges(at, whole, elem).enumerate() {
        dst[r].copy_from_slice(&packed[i * row..(i + 1) * row]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rows: u64, cols: u64) -> Shape {
        Shape { rows, cols }
    }

    #[test]
    fn span_counts_from_first_to_past_last_element() {
        let l = Layout {
            offset: 0,
            row_stride: 7,
        };
        assert_eq!(l.span(shape(3, 5)), Ok(19));
        assert_eq!(l.span(shape(1, 9)), Ok(9), "one row ignores the stride");
        assert_eq!(l.span(shape(0, 5)), Ok(0));
        assert!(matches!(
            l.span(shape(2, 8)),
            Err(RegionError::StrideTooSmall { .. })
        ));
        let huge = Layout {
            offset: 0,
            row_stride: u64::MAX,
        };
        assert!(matches!(
            huge.span(shape(3, 1)),
            Err(RegionError::TooLarge { .. })
        ));
    }

    #[test]
    fn chunks_tile_the_shape_exactly_once_in_row_major_order() {
        for (rows, cols, cr, cc) in [
            (3, 5, 2, 2),
            (1, 16, 1, 5),
            (4096, 4096, 512, 1024),
            (7, 7, 7, 7),
            (5, 3, 9, 9),
        ] {
            let plan = ChunkPlan::new(shape(rows, cols), shape(cr, cc));
            let n = plan.total() as usize;
            let mut covered = vec![0u8; (rows * cols) as usize];
            let mut seen = 0;
            let mut last = (0, 0);
            for c in plan {
                assert!((c.row, c.col) >= last || seen == 0);
                last = (c.row, c.col);
                seen += 1;
                for r in c.row..c.row + c.shape.rows {
                    for k in c.col..c.col + c.shape.cols {
                        covered[(r * cols + k) as usize] += 1;
                    }
                }
            }
            assert_eq!(seen, n);
            assert_eq!(
                n as u64,
                rows.div_ceil(cr.min(rows)) * cols.div_ceil(cc.min(cols))
            );
            assert!(
                covered.iter().all(|c| *c == 1),
                "{rows}x{cols} by {cr}x{cc}"
            );
        }
        assert_eq!(ChunkPlan::new(shape(0, 4), shape(1, 1)).total(), 0);
    }

    #[test]
    fn by_rows_packs_whole_rows_or_cuts_long_ones() {
        let p = ChunkPlan::by_rows(shape(10, 100), 250);
        assert_eq!(p.chunk(), shape(2, 100));
        assert_eq!(p.total(), 5);
        let p = ChunkPlan::by_rows(shape(2, 1000), 300);
        assert_eq!(p.chunk(), shape(1, 300));
        assert_eq!(p.total(), 8);
    }

    #[test]
    fn packed_pieces_cover_a_range_once_with_at_most_three_pieces() {
        let sh = shape(5, 7);
        for from in 0..35 {
            for to in from..=35 {
                let pieces = packed_pieces(sh, from, to);
                assert!(pieces.len() <= 3, "{from}..{to}: {pieces:?}");
                let mut at = from;
                for p in &pieces {
                    assert_eq!(p.row * 7 + p.col, at, "pieces are in order");
                    assert!(p.shape.rows == 1 || p.col == 0);
                    at += p.shape.rows * p.shape.cols;
                }
                assert_eq!(at, to);
            }
        }
    }

    #[test]
    fn pack_then_unpack_restores_the_region() {
        let at = Layout {
            offset: 3,
            row_stride: 10,
        };
        let src: Vec<u8> = (0..64).collect();
        let packed = pack(&src, at, shape(3, 4), 2);
        assert_eq!(&packed[..8], &src[6..14]);
        assert_eq!(&packed[8..16], &src[26..34]);
        let mut dst = vec![0u8; 64];
        unpack(&packed, &mut dst, at, shape(3, 4), 2);
        for r in row_ranges(
            at,
            Chunk {
                row: 0,
                col: 0,
                shape: shape(3, 4),
            },
            2,
        ) {
            assert_eq!(dst[r.clone()], src[r]);
        }
    }
}
