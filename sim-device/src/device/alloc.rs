//! Window buffers of a [`Device`]: symmetric allocation, checked the same
//! on every rank.
//!
//! The seed allocates a window buffer once on the host
//! (`pld.alloc_window_buffer`) and gives every dispatched rank a view of
//! it (`pld.window(buf, shape, dtype)`). Here each rank's kernel makes the
//! same calls; a buffer lies at the same offset on every rank because
//! every rank allocates the same buffers in the same order — and the
//! launcher's shared [`Symmetry`] log checks that they do, so a rank that
//! allocates differently (an `if rank == 0 { alloc }`) is an error naming
//! the buffer and both ranks instead of silently different offsets.

use super::*;
use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, Shape2, elems};
use pld_proto::lock::Locked;
use pld_proto::{Dtype, Rma, Scalar};

/// One allocation, as the symmetry log compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Alloc {
    name: String,
    window: String,
    bytes: u64,
}

impl std::fmt::Display for Alloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' ({} bytes of window '{}')",
            self.name, self.bytes, self.window
        )
    }
}

/// The allocations of every rank of one launch, in order: the k-th
/// allocation must be the same on every rank.
#[derive(Debug, Default)]
pub struct Symmetry {
    log: Mutex<Vec<Vec<Alloc>>>,
    /// The views made of the buffers, to name a race's bytes.
    pub sites: super::Sites,
}

impl Symmetry {
    /// A log for one launch, shared by its devices.
    pub fn shared() -> Arc<Symmetry> {
        Arc::new(Symmetry::default())
    }

    fn record(&self, rank: u32, a: Alloc) -> Result<()> {
        let mut log = self.log.locked();
        if log.len() <= rank as usize {
            log.resize(rank as usize + 1, Vec::new());
        }
        let index = log[rank as usize].len();
        for (other, theirs) in log.iter().enumerate() {
            match theirs.get(index) {
                Some(b) if other != rank as usize && *b != a => {
                    return Err(Error::AsymmetricAlloc {
                        index,
                        rank,
                        ours: a.to_string(),
                        other: other as u32,
                        theirs: b.to_string(),
                    });
                }
                _ => {}
            }
        }
        log[rank as usize].push(a);
        Ok(())
    }

    /// After every kernel finished: a buffer that one rank allocated and
    /// another did not is an error naming both.
    pub fn check_complete(&self, nranks: u32) -> Result<()> {
        let log = self.log.locked();
        let count = |r: usize| log.get(r).map_or(0, Vec::len);
        let Some(most) = (0..nranks as usize).max_by_key(|r| count(*r)) else {
            return Ok(());
        };
        match (0..nranks as usize).find(|r| count(*r) < count(most)) {
            None => Ok(()),
            Some(short) => Err(Error::MissingAlloc {
                buffer: log[most][count(short)].name.clone(),
                rank: most as u32,
                other: short as u32,
            }),
        }
    }
}

/// A window buffer (`pld.alloc_window_buffer`): bytes at the same offset
/// of the same window on every rank, to be viewed with [`Device::window`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowBuffer {
    name: String,
    window: String,
    base: u64,
    bytes: u64,
}

impl WindowBuffer {
    /// The buffer's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// `[rows, cols]` of N-D `dims`: the leading dimensions collapse into rows
/// (`[4, 1, 64]` is `[4, 64]`; `[64]` is `[1, 64]`). Saturating: a shape too
/// large for anything is refused where it is used (`elems`), not here.
pub fn collapse(dims: &[u64]) -> Shape2 {
    match dims.split_last() {
        None => [1, 1],
        Some((last, lead)) => [lead.iter().fold(1u64, |a, d| a.saturating_mul(*d)), *last],
    }
}

impl<R: Rma> Device<R> {
    /// `pld.alloc_window_buffer(size)`: `bytes` of window `data`, at the
    /// same offset on every rank (64-byte aligned).
    pub fn alloc_window_buffer(&self, name: &str, bytes: u64) -> Result<WindowBuffer> {
        self.alloc_window_buffer_in(name, "data", bytes)
    }

    /// `pld.alloc_window_buffer(shape, dtype)`: room for `dims` of `dtype`.
    pub fn alloc_window_buffer_of(
        &self,
        name: &str,
        dims: &[u64],
        dtype: Dtype,
    ) -> Result<WindowBuffer> {
        let n = elems("alloc_window_buffer", name, dims)?;
        self.alloc_window_buffer(name, n * dtype.size() as u64)
    }

    /// A window buffer in another of the program's windows.
    pub fn alloc_window_buffer_in(
        &self,
        name: &str,
        window: &str,
        bytes: u64,
    ) -> Result<WindowBuffer> {
        let base = self.reserve(name, window, bytes)?;
        Ok(WindowBuffer {
            name: name.into(),
            window: window.into(),
            base,
            bytes,
        })
    }

    /// `pld.window(buf, shape, dtype)`: a typed view of `buf` (leading
    /// dimensions of an N-D `dims` collapse into rows). Several views of
    /// one buffer may coexist; each must fit in it.
    pub fn window<T: Scalar>(
        &self,
        buf: &WindowBuffer,
        dims: &[u64],
    ) -> Result<DistributedTensor<T>> {
        let bytes = elems("window", &buf.name, dims)? * T::DTYPE.size() as u64;
        let shape = collapse(dims);
        if bytes > buf.bytes {
            return Err(Error::ViewTooLarge {
                buffer: buf.name.clone(),
                bytes,
                size: buf.bytes,
            });
        }
        let elem = T::DTYPE.size() as u64;
        (self.symmetry.sites).record(&buf.name, &buf.window, buf.base, shape, elem);
        Ok(DistributedTensor {
            name: buf.name.clone(),
            window: buf.window.clone(),
            base: buf.base,
            shape,
            _t: std::marker::PhantomData,
        })
    }

    /// Allocates a `shape` view of `T` in `window` in one step (a buffer
    /// and its one view).
    pub fn alloc<T: Scalar>(
        &self,
        name: &str,
        window: &str,
        shape: Shape2,
    ) -> Result<DistributedTensor<T>> {
        let bytes = elems("alloc", name, &shape)? * T::DTYPE.size() as u64;
        let buf = self.alloc_window_buffer_in(name, window, bytes)?;
        self.window(&buf, &shape)
    }

    /// Allocates `bytes` of `window` as a `[1, bytes]` int8 view.
    pub fn alloc_bytes(
        &self,
        name: &str,
        window: &str,
        bytes: u64,
    ) -> Result<DistributedTensor<i8>> {
        self.alloc(name, window, [1, bytes])
    }

    pub(super) fn reserve(&self, name: &str, window: &str, bytes: u64) -> Result<u64> {
        let size = *self.windows.get(window).ok_or_else(|| {
            Error::Usage(format!(
                "window '{window}' does not exist; the windows are {:?}",
                self.windows.keys().collect::<Vec<_>>()
            ))
        })?;
        self.symmetry.record(
            self.rank(),
            Alloc {
                name: name.into(),
                window: window.into(),
                bytes,
            },
        )?;
        let mut next = self.next.locked();
        let at = next.entry(window.to_string()).or_insert(0);
        let base = at.div_ceil(64) * 64;
        let end = base.saturating_add(bytes);
        if end > size {
            return Err(Error::WindowFull {
                window: window.into(),
                bytes,
                needed: end,
                size,
            });
        }
        *at = end;
        Ok(base)
    }

    /// A scratch view of at least `elems` elements for the collectives,
    /// in window `data`; symmetric because every rank calls the
    /// collectives in the same order.
    pub(crate) fn scratch<T: Scalar>(&self, elems: u64) -> Result<DistributedTensor<T>> {
        let bytes = elems * T::DTYPE.size() as u64;
        let mut s = self.scratch.locked();
        let base = match *s {
            Some((base, have)) if have >= bytes => base,
            _ => {
                let base = self.reserve("collective scratch", "data", bytes)?;
                *s = Some((base, bytes));
                base
            }
        };
        Ok(DistributedTensor {
            name: "collective scratch".into(),
            window: "data".into(),
            base,
            shape: [1, elems],
            _t: std::marker::PhantomData,
        })
    }
}
