//! The tensor tier of a rank's bindings: `put` and `get` of regions that
//! need not fit on chip, streamed in chunks by the device.

use crate::dtype::by_dtype;
use crate::on_dev;
use crate::rank::{PyRank, View, atomic, view};
use pld_sim::PutOpts;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pymethods]
impl PyRank {
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
                let dst = view::<T, _>(d, self.bufs(), &v)?;
                match &src_view {
                    Some(s) => {
                        let src = view::<T, _>(d, self.bufs(), s)?;
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
                let src = view::<T, _>(d, self.bufs(), &v)?;
                match &dst_view {
                    Some(s) => {
                        let dst = view::<T, _>(d, self.bufs(), s)?;
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
