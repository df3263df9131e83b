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
    pub offset: u64,
    pub row_stride: u64,
}

/// The shape of a region, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    pub rows: u64,
    pub cols: u64,
}

impl Shape {
    /// Elements in the region.
    pub fn elems(self) -> Option<u64> {
        self.rows.checked_mul(self.cols)
    }
}

/// Why a region cannot be.
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
    pub row: u64,
    pub col: u64,
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
}
