//! [`PyRank`]: one rank's device, as the `pypto` shim calls it. Views of
//! window buffers cross the boundary as `(buffer index, dims, dtype)`;
//! data as bytes; tiles as [`NativeTile`], which own their share of
//! on-chip memory until Python drops them.

use crate::convert::PyDtype;
use crate::dtype::{AnyTile, Tiled, by_dtype};
use crate::errors::device_err;
use crate::{Buffers, Dev, on_dev, py_err};
use pld_proto::{Rma, Scalar};
use pld_sim::{Atomic, Device, DistributedTensor, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// A view: `(buffer index, dims, dtype)`.
pub(crate) type View = (usize, Vec<u64>, PyDtype);

/// A tile on a rank's simulated chip.
#[pyclass(module = "pld_pypto._native")]
#[derive(Debug)]
pub struct NativeTile {
    pub(crate) tile: AnyTile,
}

#[pymethods]
impl NativeTile {
    /// `(shape, valid_shape, dtype, bytes)` of the whole tile.
    fn parts<'py>(
        &self,
        py: Python<'py>,
    ) -> ([u64; 2], [u64; 2], &'static str, Bound<'py, PyBytes>) {
        let (shape, valid, bytes) = self.tile.parts();
        (
            shape,
            valid,
            self.tile.dtype().name(),
            PyBytes::new(py, &bytes),
        )
    }
}

/// An operand of any kind, as Python passes it: a tile, a window view
/// `(buffer index, dims, dtype)`, or local data with its 2-D shape.
#[derive(Debug, FromPyObject)]
pub(crate) enum Source<'py> {
    Tile(PyRef<'py, NativeTile>),
    View(usize, Vec<u64>, PyDtype),
    Data(Bound<'py, PyBytes>, [u64; 2]),
}

/// One rank's simulated device.
#[pyclass(module = "pld_pypto._native")]
#[derive(Debug)]
pub struct PyRank {
    dev: Option<Dev>,
    rt: Arc<crate::driver::Driver>,
    cancel: watch::Receiver<Option<String>>,
    bufs: Buffers,
}

impl PyRank {
    pub(crate) fn new(
        dev: Dev,
        rt: Arc<crate::driver::Driver>,
        cancel: watch::Receiver<Option<String>>,
    ) -> PyRank {
        PyRank {
            dev: Some(dev),
            rt,
            cancel,
            bufs: Buffers::default(),
        }
    }

    /// The rank's device, while it runs.
    pub(crate) fn device(&self) -> Option<&Dev> {
        self.dev.as_ref()
    }

    pub(crate) fn release(&mut self) {
        self.dev = None;
    }

    /// The window buffers this rank allocated, by index.
    pub(crate) fn bufs(&self) -> &Buffers {
        &self.bufs
    }

    pub(crate) fn dev(&self) -> PyResult<&Dev> {
        self.dev
            .as_ref()
            .ok_or_else(|| py_err("this rank has been shut down"))
    }

    /// Runs a device call with the GIL released, this thread driving the
    /// ranks' I/O meanwhile ([`crate::driver`]); a cancelled run fails it at
    /// once with the reason.
    pub(crate) fn run<T: Send>(
        &self,
        py: Python<'_>,
        fut: impl Future<Output = pld_sim::Result<T>> + Send,
    ) -> PyResult<T> {
        let mut cancel = self.cancel.clone();
        py.detach(|| {
            let op = async move {
                tokio::select! {
                    r = fut => r.map_err(Ok),
                    c = cancel.wait_for(|c| c.is_some()) => Err(Err(match c {
                        Ok(reason) => format!("cancelled: {}", reason.clone().unwrap_or_default()),
                        Err(_) => "cancelled: the run ended".to_string(),
                    })),
                }
            };
            self.rt.block_on(op)
        })
        // The device's error as its kind's exception; a cancelled call as
        // the base class (its cause is another rank's error).
        .map_err(|e| e.map_or_else(py_err, device_err))
    }
}

/// The typed view `v` of `d`'s buffers.
pub(crate) fn view<T: Scalar, R: Rma>(
    d: &Device<R>,
    bufs: &Buffers,
    v: &View,
) -> pld_sim::Result<DistributedTensor<T>> {
    let buf = bufs
        .lock()
        .map_err(|_| pld_sim::Error::Usage("the buffer list is poisoned".into()))?
        .get(v.0)
        .cloned()
        .ok_or_else(|| pld_sim::Error::Usage(format!("no window buffer #{} on this rank", v.0)))?;
    d.window::<T>(&buf, &v.1)
}

/// The int32 signal view `v`: another dtype is the device's dtype error.
pub(crate) fn signal<R: Rma>(
    d: &Device<R>,
    bufs: &Buffers,
    call: &'static str,
    v: &View,
) -> pld_sim::Result<DistributedTensor<i32>> {
    if v.2.0 != pld_sim::Dtype::Int32 {
        let found = v.2.0;
        let name = bufs
            .lock()
            .ok()
            .and_then(|b| b.get(v.0).map(|b| b.name().to_string()))
            .unwrap_or_default();
        return Err(pld_sim::Error::DtypeMismatch {
            call,
            name,
            expected: pld_sim::Dtype::Int32,
            found,
            fix: "signal cells are int32: pass a pld.window(..., dtype=pl.INT32) view",
        });
    }
    view::<i32, R>(d, bufs, v)
}

/// The tile `t` as a tile of `T`: another dtype is the device's dtype
/// error.
pub(crate) fn tile_of<'t, T: Tiled>(
    call: &'static str,
    t: &'t NativeTile,
) -> pld_sim::Result<&'t pld_sim::Tile<T>> {
    T::unwrap(&t.tile).ok_or_else(|| pld_sim::Error::DtypeMismatch {
        call,
        name: "the tile".into(),
        expected: T::DTYPE,
        found: t.tile.dtype(),
        fix: "cast it first (pl.cast)",
    })
}

pub(crate) fn atomic(add: bool) -> Atomic {
    if add { Atomic::Add } else { Atomic::None }
}

#[pymethods]
impl PyRank {
    /// This rank's id.
    fn rank(&self) -> PyResult<u32> {
        Ok(on_dev!(self.dev()?, d => d.rank()))
    }
    /// The number of ranks.
    fn nranks(&self) -> PyResult<u32> {
        Ok(on_dev!(self.dev()?, d => d.world_size()))
    }

    /// `pld.alloc_window_buffer`: `nbytes` at the same offset on every
    /// rank (checked); returns its index.
    fn alloc_window_buffer(&self, name: &str, nbytes: u64) -> PyResult<usize> {
        let buf =
            on_dev!(self.dev()?, d => d.alloc_window_buffer(name, nbytes)).map_err(device_err)?;
        let mut bufs = self.bufs.lock().map_err(|_| py_err("poisoned"))?;
        bufs.push(buf);
        Ok(bufs.len() - 1)
    }

    /// The device's rule that `call`'s operand be a window view: a tile, or
    /// local data (`name`, as the program calls it), is its
    /// `NotDistributed` error, naming the fix.
    fn need_distributed(&self, call: &str, src: Source<'_>, name: &str) -> PyResult<()> {
        let dev = self.dev()?;
        match &src {
            Source::View(..) => Ok(()),
            Source::Data(..) => {
                let local = Tensor::<i8>::zeros(name, [0, 0]);
                on_dev!(dev, d => d.distributed(call, &local).map(drop)).map_err(device_err)
            }
            Source::Tile(t) => by_dtype!(t.tile.dtype(), T => match T::unwrap(&t.tile) {
                Some(x) => on_dev!(dev, d => d.distributed(call, x).map(drop)).map_err(device_err),
                None => Ok(()),
            }),
        }
    }

    /// Checks a view of a buffer (`pld.window`): the view must fit.
    fn check_view(&self, v: View) -> PyResult<[u64; 2]> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            on_dev!(dev, d => view::<T, _>(d, &self.bufs, &v)).map(|dt| dt.shape()).map_err(device_err)
        })
    }
}
