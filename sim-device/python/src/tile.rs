//! The tile tier of a rank's bindings: tiles from data, local loads and
//! stores of window views, `remote_load`, and `remote_store` of any
//! operand — the device dispatches on it (a Tile, a Tensor, or a window
//! view, which is its error).

use crate::convert::PyDtype;
use crate::dtype::{Tiled, by_dtype};
use crate::errors::device_err;
use crate::on_dev;
use crate::rank::{NativeTile, PyRank, Source, View, atomic, tile_of, view};
use pld_proto::Element;
use pld_proto::dtype::from_bytes;
use pld_sim::{PutOpts, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pymethods]
impl PyRank {
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
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                d.load_nd(&dt, &v.1, &offsets, &shape).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pl.load` of this rank's window view: a tile of `shape`, its
    /// `valid` part (all of it by default) read at `offsets`.
    #[pyo3(signature = (v, offsets, shape, valid=None))]
    fn load(
        &self,
        py: Python<'_>,
        v: View,
        offsets: [u64; 2],
        shape: [u64; 2],
        valid: Option<[u64; 2]>,
    ) -> PyResult<NativeTile> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                d.load_valid(&dt, offsets, shape, valid.unwrap_or(shape)).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pl.store` of a tile into this rank's window view.
    fn store(&self, py: Python<'_>, tile: &NativeTile, offsets: [u64; 2], v: View) -> PyResult<()> {
        let dev = self.dev()?;
        by_dtype!(v.2.0, T => {
            let t = tile_of::<T>("store", tile).map_err(device_err)?;
            on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, self.bufs(), &v)?;
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
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                d.remote_load(&dt, peer, offsets, shape, valid_shape).await
            }))?;
            Ok(NativeTile { tile: T::wrap(t) })
        })
    }

    /// `pld.remote_store` (and its tile and tensor forms): exactly one
    /// put (or atomic-add) message; the device dispatches on `src`.
    fn remote_store(
        &self,
        py: Python<'_>,
        src: Source<'_>,
        v: View,
        peer: i64,
        offsets: [u64; 2],
        add: bool,
    ) -> PyResult<()> {
        let dev = self.dev()?;
        // Plain Rust values from here on: the call runs without the GIL.
        let (tile, src_view, bytes) = match &src {
            Source::Tile(t) => (Some(&**t), None, None),
            Source::View(i, dims, dtype) => (None, Some((*i, dims.clone(), *dtype)), None),
            Source::Data(b, shape) => (None, None, Some((b.as_bytes(), *shape))),
        };
        by_dtype!(v.2.0, T => {
            let data = match bytes {
                Some((b, shape)) => Some(Tensor::<T>::new("src", shape, from_bytes(b)).map_err(device_err)?),
                None => None,
            };
            on_dev!(dev, d => self.run(py, async {
                let peer = d.peer("remote_store", peer)?;
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                let at = atomic(add);
                match (tile, &src_view, &data) {
                    (Some(t), _, _) => {
                        d.remote_store(tile_of::<T>("remote_store", t)?, &dt, peer, offsets, at).await
                    }
                    (None, Some(s), _) => {
                        let s = view::<T, _>(d, self.bufs(), s)?;
                        d.remote_store(&s, &dt, peer, offsets, at).await
                    }
                    (None, None, Some(x)) => d.remote_store(x, &dt, peer, offsets, at).await,
                    (None, None, None) => Err(pld_sim::Error::Usage("remote_store: no source".into())),
                }
            }))
        })
    }

    /// This rank's whole view, as bytes.
    fn read<'py>(&self, py: Python<'py>, v: View) -> PyResult<Bound<'py, PyBytes>> {
        let dev = self.dev()?;
        let out: Vec<u8> = by_dtype!(v.2.0, T => {
            on_dev!(dev, d => self.run(py, async {
                let dt = view::<T, _>(d, self.bufs(), &v)?;
                let [rows, cols] = dt.shape();
                let mut out = vec![0u8; (rows * cols) as usize * T::DTYPE.size()];
                let me = d.rank();
                d.get_bytes(&mut out, dt.name(), dt.shape(), me, &dt, PutOpts::default()).await?;
                Ok(out)
            }))
        })?;
        Ok(PyBytes::new(py, &out))
    }
}
