//! Regions of a window: a 2-D region or a contiguous range checked once
//! ([`Rows`]), then written, read, added to or lent as raw memory row by row.

use super::Window;
use crate::error::AccessError;
use pld_proto::Dtype;
use std::ops::Range;

/// A region of a window that passed the checks: where its rows are, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    start: usize,
    rows: usize,
    row_bytes: usize,
    stride_bytes: usize,
}

impl Rows {
    /// Bytes the region holds (its packed size).
    pub fn len(&self) -> usize {
        self.rows * self.row_bytes
    }

    /// Whether the region holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The byte range of row `i` in the window.
    fn row(&self, i: usize) -> Range<usize> {
        let at = self.start + i * self.stride_bytes;
        at..at + self.row_bytes
    }

    /// The window bytes the region covers, rows that touch merged (checked
    /// mode records accesses by byte range).
    pub(crate) fn byte_ranges(&self) -> Vec<Range<u64>> {
        if self.stride_bytes == self.row_bytes || self.rows <= 1 {
            let len = (self.rows * self.row_bytes) as u64;
            let whole = self.start as u64..self.start as u64 + len;
            return std::iter::once(whole).collect();
        }
        (0..self.rows)
            .map(|i| {
                let r = self.row(i);
                r.start as u64..r.end as u64
            })
            .collect()
    }

    fn rows(self) -> impl Iterator<Item = Range<usize>> {
        (0..self.rows).map(move |i| self.row(i))
    }
}

impl Window {
    /// Checks a 2-D region of `region.dtype` elements that starts at byte
    /// `offset`: the dtype, the alignment, the row stride and every row's
    /// bounds.
    pub fn check_region(
        &self,
        offset: u64,
        region: &pld_proto::v1::Region,
    ) -> Result<Rows, AccessError> {
        use pld_proto::region::{Layout, Shape};
        let dtype = Dtype::from_wire(region.dtype).ok_or(AccessError::UnknownDtype {
            value: region.dtype,
        })?;
        let elem = dtype.size() as u64;
        if offset % elem != 0 {
            return Err(AccessError::MisalignedOffset {
                window: self.name.clone(),
                offset,
                dtype,
                size: elem as usize,
            });
        }
        let shape = Shape {
            rows: region.rows,
            cols: region.cols,
        };
        let layout = Layout {
            offset: 0,
            row_stride: region.row_stride,
        };
        let bad = |reason: String| AccessError::BadRegion { reason };
        let span = layout
            .span(shape)
            .map_err(|e| bad(e.to_string()))?
            .checked_mul(elem)
            .ok_or_else(|| bad("the region's extent overflows".into()))?;
        let r = self.check_range(offset, span)?;
        let row_bytes = region.cols.saturating_mul(elem);
        let stride_bytes = region.row_stride.saturating_mul(elem);
        Ok(Rows {
            start: r.start,
            rows: if span == 0 { 0 } else { region.rows as usize },
            row_bytes: row_bytes as usize,
            stride_bytes: if region.rows <= 1 {
                row_bytes as usize
            } else {
                stride_bytes as usize
            },
        })
    }

    /// `len` contiguous bytes at `offset`, as one row.
    pub fn check_contiguous(&self, offset: u64, len: u64) -> Result<Rows, AccessError> {
        let r = self.check_range(offset, len)?;
        Ok(Rows {
            start: r.start,
            rows: 1,
            row_bytes: r.len(),
            stride_bytes: r.len(),
        })
    }

    fn check_payload(rows: Rows, payload: &[u8]) -> Result<(), AccessError> {
        if payload.len() != rows.len() {
            return Err(AccessError::PayloadLength {
                expected: rows.len() as u64,
                got: payload.len() as u64,
            });
        }
        Ok(())
    }

    /// Scatters `payload` (the region's rows, packed) into the region.
    pub fn write_rows(&self, rows: Rows, payload: &[u8]) -> Result<(), AccessError> {
        Self::check_payload(rows, payload)?;
        for (r, src) in rows.rows().zip(payload.chunks_exact(rows.row_bytes.max(1))) {
            // SAFETY: `rows` was checked against this window's bounds.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(r.start), r.len())
            };
        }
        self.board.changed();
        Ok(())
    }

    /// Gathers the region's rows, packed, into `out`.
    pub fn read_rows_into(&self, rows: Rows, out: &mut [u8]) -> Result<(), AccessError> {
        Self::check_payload(rows, out)?;
        for (r, dst) in rows.rows().zip(out.chunks_exact_mut(rows.row_bytes.max(1))) {
            // SAFETY: as in `write_rows`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr().add(r.start),
                    dst.as_mut_ptr(),
                    r.len(),
                )
            };
        }
        Ok(())
    }

    /// The region's rows as raw memory, for reading payloads straight into
    /// the window or writing them straight from it.
    pub(crate) fn raw_rows(&self, rows: Rows) -> impl Iterator<Item = crate::transport::Raw> + '_ {
        rows.rows().map(move |r| crate::transport::Raw {
            ptr: self.ptr.as_ptr().wrapping_add(r.start),
            len: r.len(),
        })
    }

    /// Tells waiters that bytes changed (after a write through `raw_rows`).
    pub(crate) fn changed(&self) {
        self.board.changed();
    }

    /// Appends the region's rows, packed, to `out` (one copy, no zero fill).
    pub fn append_rows(&self, rows: Rows, out: &mut bytes::BytesMut) {
        out.reserve(rows.len());
        let start = out.len();
        let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        let mut written = 0;
        for r in rows.rows() {
            // SAFETY: `rows` was checked against this window's bounds, and
            // `reserve` made room for all of them after `out`'s bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr().add(r.start),
                    dst.add(written),
                    r.len(),
                )
            };
            written += r.len();
        }
        // SAFETY: the `written` bytes after `start` were just initialised.
        unsafe { out.set_len(start + written) };
    }

    /// Elementwise atomic add of `payload` (packed rows of `dtype`) into the region.
    pub fn atomic_add_rows(
        &self,
        rows: Rows,
        dtype: Dtype,
        payload: &[u8],
    ) -> Result<(), AccessError> {
        Self::check_payload(rows, payload)?;
        for (r, src) in rows.rows().zip(payload.chunks_exact(rows.row_bytes.max(1))) {
            // Rows start at multiples of the element size (offset and
            // stride are in elements) and were checked in bounds.
            self.add_range(r, dtype, src);
        }
        self.board.changed();
        Ok(())
    }

    /// Writes `data` at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), AccessError> {
        let r = self.check_range(offset, data.len() as u64)?;
        // SAFETY: `r` lies inside the allocation (checked above) and `data`
        // cannot overlap window memory handed out as a Rust slice (none is).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(r.start), r.len())
        };
        self.board.changed();
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let r = self.check_range(offset, out.len() as u64)?;
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(r.start), out.as_mut_ptr(), r.len())
        };
        Ok(())
    }

    /// Reads `len` bytes at `offset` into a new buffer.
    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, AccessError> {
        self.check_range(offset, len)?;
        let mut out = vec![0u8; len as usize];
        self.read_into(offset, &mut out)?;
        Ok(out)
    }
}
