//! [`PyRank`]: one rank's device, as the `pypto` shim calls it. Views of
//! window buffers cross the boundary as `(buffer index, dims, dtype)`;
//! data as bytes; tiles as [`NativeTile`], which own their share of
//! on-chip memory until Python drops them.

use crate::convert::{PyAlgo, PyCmp, PyCollective, PyDtype, PyNotifyOp, PyReduceOp};
use crate::dtype::{AnyTile, Tiled, by_dtype};
use crate::errors::device_err;
use crate::{Buffers, Dev, on_dev, py_err};
use pld_proto::collective::CallKind;
use pld_proto::dtype::from_bytes;
use pld_proto::{Element, Rma, Scalar};
use pld_sim::{Atomic, Device, DistributedTensor, PutOpts, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// A view: `(buffer index, dims, dtype)`.
type View = (usize, Vec<u64>, PyDtype);

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
        (shape, valid, self.tile.dtype(), PyBytes::new(py, &bytes))
    }
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

    fn dev(&self) -> PyResult<&Dev> {
        self.dev
            .as_ref()
            .ok_or_else(|| py_err("this rank has been shut down"))
    }

    /// Runs a device call with the GIL released, this thread driving the
    /// ranks' I/O meanwhile ([`crate::driver`]); a cancelled run fails it at
    /// once with the reason.
    fn run<T: Send>(
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
fn view<T: Scalar, R: Rma>(
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
fn signal<R: Rma>(
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

fn tile_of<T: Tiled>(t: &NativeTile) -> PyResult<&pld_sim::Tile<T>> {
    T::unwrap(&t.tile).ok_or_else(|| {
        py_err(format!(
            "a {} tile where a {} one is required; cast it first (pl.cast)",
            t.tile.dtype(),
            T::DTYPE
        ))
    })
}

fn atomic(add: bool) -> Atomic {
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

    /// Checks a view of a buffer (`pld.window`): the view must fit.
    fn check_view(&self, v: View) -> PyResult<[u64; 2]> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            on_dev!(dev, d => view::<T, _>(d, &self.bufs, &v)).map(|dt| dt.shape()).map_err(device_err)
        })
    }

    /// A tile of `shape` holding `data` (`valid` the part with data).
    fn tile_from(
        &self,
        data: &[u8],
        shape: [u64; 2],
        valid: [u64; 2],
        dtype: PyDtype,
    ) -> PyResult<NativeTile> {
        let dev = self.dev()?;
        by_dtype!(dtype.0, T => {
            let t = on_dev!(dev, d => d.tile_from::<T>(shape, valid, from_bytes(data))).map_err(device_err)?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pl.load` of an N-D region of this rank's window view (its dims
    /// are the view's): the device collapses it to one rectangle or says
    /// why it cannot.
    fn load_nd(
        &self,
        py: Python<'_>,
        v: View,
        offsets: Vec<u64>,
        shape: Vec<u64>,
    ) -> PyResult<NativeTile> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.load_nd(&dt, &v.1, &offsets, &shape).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pl.load` of this rank's window view.
    fn load(
        &self,
        py: Python<'_>,
        v: View,
        offsets: [u64; 2],
        shape: [u64; 2],
    ) -> PyResult<NativeTile> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.load(&dt, offsets, shape).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pl.store` of a tile into this rank's window view.
    fn store(&self, py: Python<'_>, tile: &NativeTile, offsets: [u64; 2], v: View) -> PyResult<()> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = tile_of::<T>(tile)?;
            on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.store(t, offsets, &dt).await
            }))
        })
    }

    /// `pld.tile.remote_load`: one get.
    #[pyo3(signature = (v, peer, offsets, shape, valid_shape=None))]
    fn remote_load(
        &self,
        py: Python<'_>,
        v: View,
        peer: i64,
        offsets: [u64; 2],
        shape: [u64; 2],
        valid_shape: Option<[u64; 2]>,
    ) -> PyResult<NativeTile> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("remote_load", peer)?;
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.remote_load(&dt, peer, offsets, shape, valid_shape).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pld.tile.remote_store`: exactly one put (or atomic-add) message.
    fn remote_store(
        &self,
        py: Python<'_>,
        tile: &NativeTile,
        v: View,
        peer: i64,
        offsets: [u64; 2],
        add: bool,
    ) -> PyResult<()> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = tile_of::<T>(tile)?;
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("remote_store", peer)?;
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.tile_remote_store(t, &dt, peer, offsets, atomic(add)).await
            }))
        })
    }

    /// `pld.tensor.remote_store` of a local tensor: exactly one message.
    #[allow(clippy::too_many_arguments)]
    fn tensor_remote_store(
        &self,
        py: Python<'_>,
        data: &[u8],
        shape: [u64; 2],
        v: View,
        peer: i64,
        offsets: [u64; 2],
        add: bool,
    ) -> PyResult<()> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let src = Tensor::<T>::new("src", shape, from_bytes(data)).map_err(device_err)?;
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("tensor.remote_store", peer)?;
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.tensor_remote_store(&src, &dt, peer, offsets, atomic(add)).await
            }))
        })
    }

    /// `pld.tensor.put` from a local tensor (`data` of `shape`) or, with
    /// `src_view`, from this rank's window view; `region` is
    /// `(dst_offsets, src_offsets, shape)`, each given or not (the device
    /// says when they do not go together).
    #[pyo3(signature = (v, peer, data, shape, src_view=None, region=(None, None, None), add=false, chunk_rows=0, chunk_cols=0, pipeline=false))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        v: View,
        peer: i64,
        data: &[u8],
        shape: [u64; 2],
        src_view: Option<View>,
        region: Region,
        add: bool,
        chunk_rows: u64,
        chunk_cols: u64,
        pipeline: bool,
    ) -> PyResult<()> {
        let dev = self.dev()?;
        let opts = put_opts(region, add, chunk_rows, chunk_cols, pipeline);
        by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("put", peer)?;
                let dst = view::<T, _>(d, &self.bufs, &v)?;
                match &src_view {
                    Some(s) => {
                        let src = view::<T, _>(d, &self.bufs, s)?;
                        d.put(&dst, peer, &src, opts).await
                    }
                    None => d.put_bytes(&dst, peer, "src", data, shape, opts).await,
                }
            }))
        })
    }

    /// `pld.tensor.get` into a local tensor (`data` of `shape`, returned
    /// updated) or, with `dst_view`, into this rank's window view.
    #[pyo3(signature = (v, peer, data, shape, dst_view=None, region=(None, None, None), chunk_rows=0, chunk_cols=0, pipeline=false))]
    #[allow(clippy::too_many_arguments)]
    fn get<'py>(
        &self,
        py: Python<'py>,
        v: View,
        peer: i64,
        data: &[u8],
        shape: [u64; 2],
        dst_view: Option<View>,
        region: Region,
        chunk_rows: u64,
        chunk_cols: u64,
        pipeline: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let dev = self.dev()?;
        let opts = put_opts(region, false, chunk_rows, chunk_cols, pipeline);
        let out: Vec<u8> = by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("get", peer)?;
                let src = view::<T, _>(d, &self.bufs, &v)?;
                match &dst_view {
                    Some(s) => {
                        let dst = view::<T, _>(d, &self.bufs, s)?;
                        d.get(&dst, peer, &src, opts).await?;
                        Ok(Vec::new())
                    }
                    None => {
                        let mut dst = data.to_vec();
                        d.get_bytes(&mut dst, "dst", shape, peer, &src, opts).await?;
                        Ok(dst)
                    }
                }
            }))
        })?;
        Ok(PyBytes::new(py, &out))
    }

    /// This rank's whole view, as bytes.
    fn read<'py>(&self, py: Python<'py>, v: View) -> PyResult<Bound<'py, PyBytes>> {
        let dev = self.dev()?;
        let out: Vec<u8> = by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                let [rows, cols] = dt.shape();
                let mut out = vec![0u8; (rows * cols) as usize * T::DTYPE.size()];
                let me = d.rank();
                d.get_bytes(&mut out, dt.name(), dt.shape(), me, &dt, PutOpts::default()).await?;
                Ok(out)
            }))
        })?;
        Ok(PyBytes::new(py, &out))
    }

    /// `pld.system.notify` (`op`: Set or AtomicAdd).
    fn notify(
        &self,
        py: Python<'_>,
        v: View,
        peer: i64,
        at: [u64; 2],
        value: i32,
        op: PyNotifyOp,
    ) -> PyResult<()> {
        let op = op.0;
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("notify", peer)?;
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.notify(&dt, peer, at, value, op).await
            }))
        })
    }

    /// `pld.system.wait`; returns the value seen.
    fn wait(
        &self,
        py: Python<'_>,
        v: View,
        at: [u64; 2],
        expected: i32,
        cmp: PyCmp,
    ) -> PyResult<i32> {
        let cmp = cmp.0;
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, &self.bufs, &v)?;
                d.wait(&dt, at, expected, cmp).await
            }))
        })
    }

    /// `pld.system.defer_wait`.
    fn defer_wait(&self, v: View, at: [u64; 2], expected: i32, cmp: PyCmp) -> PyResult<()> {
        let cmp = cmp.0;
        let dev = self.dev()?;
        on_dev!(dev, d => {
            let dt = signal(d, &self.bufs, "defer_wait", &v).map_err(device_err)?;
            d.defer_wait(&dt, at, expected, cmp).map_err(device_err)
        })
    }

    /// Waits for the conditions `defer_wait` registered.
    fn complete(&self, py: Python<'_>) -> PyResult<()> {
        on_dev!(self.dev()?, d => self.run(py, d.complete()))
    }

    /// `pld.tensor.barrier(signal)`.
    fn barrier(&self, py: Python<'_>, signal: View) -> PyResult<()> {
        on_dev!(self.dev()?, d => self.run(py, async {
            let s = self::signal(d, &self.bufs, "barrier", &signal)?;
            d.barrier(&s).await
        }))
    }

    /// A collective: `name` is allreduce, broadcast, reduce_scatter,
    /// allgather or all_to_all; `src` is a view or local data for the
    /// push-based ones.
    #[pyo3(signature = (name, target, signal, op=PyReduceOp(pld_proto::ReduceOp::Sum), mode=PyAlgo(pld_sim::Algo::Mesh), root=0, src_view=None, data=None, shape=None))]
    #[allow(clippy::too_many_arguments)]
    fn collective(
        &self,
        py: Python<'_>,
        name: PyCollective,
        target: View,
        signal: View,
        op: PyReduceOp,
        mode: PyAlgo,
        root: i64,
        src_view: Option<View>,
        data: Option<Vec<u8>>,
        shape: Option<[u64; 2]>,
    ) -> PyResult<()> {
        let (name, op, algo) = (name.0, op.0, mode.0);
        let dev = self.dev()?;
        by_dtype!(target.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let t = view::<T, _>(d, &self.bufs, &target)?;
                let s = self::signal(d, &self.bufs, "collective", &signal)?;
                let local = match (&src_view, &data) {
                    (Some(v), _) => Some(Err(view::<T, _>(d, &self.bufs, v)?)),
                    (None, Some(b)) => Some(Ok(Tensor::<T>::new("input", shape.unwrap_or([1, (b.len() / T::DTYPE.size()) as u64]), from_bytes(b))?)),
                    _ => None,
                };
                match (name, &local) {
                    (CallKind::AllReduce, _) => d.allreduce(&t, &s, op, algo).await,
                    (CallKind::Broadcast, _) => d.broadcast(&t, &s, d.peer("broadcast", root)?).await,
                    (CallKind::ReduceScatter, _) => d.reduce_scatter(&t, &s, op).await,
                    (CallKind::AllGather, Some(Ok(x))) => d.allgather(x, &t, &s).await,
                    (CallKind::AllGather, Some(Err(v))) => d.allgather(v, &t, &s).await,
                    (CallKind::AllToAll, Some(Ok(x))) => d.all_to_all(x, &t, &s).await,
                    (CallKind::AllToAll, Some(Err(v))) => d.all_to_all(v, &t, &s).await,
                    (k @ (CallKind::AllGather | CallKind::AllToAll), None) => Err(pld_sim::Error::Usage(format!(
                        "{}: its input is missing: pass src_view or data", k.name()
                    ))),
                }
            }))
        })
    }

    /// Waits for every op this rank issued.
    fn quiet(&self, py: Python<'_>) -> PyResult<()> {
        on_dev!(self.dev()?, d => self.run(py, d.quiet()))
    }
}

/// `(dst_offsets, src_offsets, shape)` of a put or get.
type Region = (Option<[u64; 2]>, Option<[u64; 2]>, Option<[u64; 2]>);

fn put_opts(
    region: Region,
    add: bool,
    chunk_rows: u64,
    chunk_cols: u64,
    pipeline: bool,
) -> PutOpts {
    PutOpts {
        dst_offsets: region.0,
        src_offsets: region.1,
        shape: region.2,
        atomic: atomic(add),
        chunk_rows: (chunk_rows > 0).then_some(chunk_rows),
        chunk_cols: (chunk_cols > 0).then_some(chunk_cols),
        pipeline,
    }
}
