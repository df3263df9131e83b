//! Window buffers of a [`Device`]: symmetric allocation, checked the same
//! on every rank.

use super::*;
use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, Shape2};
use pld_proto::Rma;
use pld_proto::Scalar;
use pld_proto::lock::Locked;

impl<R: Rma> Device<R> {
    /// Allocates a `shape` view of `T` in `window`. Every rank runs the
    /// same allocations in the same order, so the view has the same offset
    /// everywhere (symmetric); views are 64-byte aligned.
    pub fn alloc<T: Scalar>(
        &self,
        name: &str,
        window: &str,
        shape: Shape2,
    ) -> Result<DistributedTensor<T>> {
        let bytes = shape[0] * shape[1] * T::DTYPE.size() as u64;
        let base = self.reserve(window, bytes)?;
        Ok(DistributedTensor {
            name: name.into(),
            window: window.into(),
            base,
            shape,
            _t: std::marker::PhantomData,
        })
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

    pub(super) fn reserve(&self, window: &str, bytes: u64) -> Result<u64> {
        let size = *self.windows.get(window).ok_or_else(|| {
            Error::Usage(format!(
                "window '{window}' does not exist; the windows are {:?}",
                self.windows.keys().collect::<Vec<_>>()
            ))
        })?;
        let mut next = self.next.locked();
        let at = next.entry(window.to_string()).or_insert(0);
        let base = at.div_ceil(64) * 64;
        let end = base + bytes;
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
                let base = self.reserve("data", bytes)?;
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
