//! The system tier of a rank's bindings: signals (`notify`, `wait`,
//! `defer_wait`), `barrier`, `quiet` and the collectives.

use crate::convert::{PyAlgo, PyCmp, PyCollective, PyNotifyOp, PyReduceOp};
use crate::dtype::by_dtype;
use crate::errors::device_err;
use crate::on_dev;
use crate::rank::{PyRank, View, signal, view};
use pld_proto::Element;
use pld_proto::collective::CallKind;
use pld_proto::dtype::from_bytes;
use pld_sim::Tensor;
use pyo3::prelude::*;

#[pymethods]
impl PyRank {
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
                let dt = view::<T, _>(d, self.bufs(), &v)?;
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
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                d.wait(&dt, at, expected, cmp).await
            }))
        })
    }

    /// `pld.system.defer_wait`.
    fn defer_wait(&self, v: View, at: [u64; 2], expected: i32, cmp: PyCmp) -> PyResult<()> {
        let cmp = cmp.0;
        let dev = self.dev()?;
        on_dev!(dev, d => {
            let dt = signal(d, self.bufs(), "defer_wait", &v).map_err(device_err)?;
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
            let s = self::signal(d, self.bufs(), "barrier", &signal)?;
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
                let t = view::<T, _>(d, self.bufs(), &target)?;
                let s = self::signal(d, self.bufs(), "collective", &signal)?;
                let local = match (&src_view, &data) {
                    (Some(v), _) => Some(Err(view::<T, _>(d, self.bufs(), v)?)),
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

    /// Waits for every op this rank issued (for at most `timeout_s`, or
    /// the rank's op timeout).
    #[pyo3(signature = (timeout_s=None))]
    fn quiet(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<()> {
        let timeout = timeout_s
            .map(std::time::Duration::try_from_secs_f64)
            .transpose()
            .map_err(|e| crate::py_err(format!("quiet: timeout_s: {e}")))?;
        on_dev!(self.dev()?, d => match timeout {
            Some(t) => self.run(py, d.quiet_within(t)),
            None => self.run(py, d.quiet()),
        })
    }
}
