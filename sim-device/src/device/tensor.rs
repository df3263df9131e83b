//! The tensor tier: `remote_store` of a tensor (one message), and the bulk
//! `put` / `get` that stream in chunks.

use super::*;
use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, Shape2, Tensor, check_region, same_shape};
use pld_proto::Rma;
use pld_proto::Scalar;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::region::{Layout, Shape, Transfer};

impl<R: Rma> Device<R> {
    /// The tensor form of `remote_store` (`pld.tensor.remote_store`): the
    /// value goes from chip to the peer as exactly one put message, with no
    /// round trip through global memory. For regions larger than on-chip
    /// memory use [`Device::put`].
    pub async fn tensor_remote_store<T: Scalar>(
        &self,
        src: &Tensor<T>,
        target: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        atomic: Atomic,
    ) -> Result<()> {
        let size = T::DTYPE.size() as u64;
        let row_bytes = src.shape[1] * size;
        if src.shape[0] == 0 || row_bytes == 0 || row_bytes % 32 != 0 {
            return Err(Error::MisalignedRemoteStore {
                call: "tensor.remote_store",
                rows: src.shape[0],
                cols: src.shape[1],
                dtype: T::DTYPE,
                row_bytes,
                multiple: 32 / size,
            });
        }
        let bytes = src.data.len() as u64 * size;
        let capacity = self.chip.profile.capacity();
        if bytes > capacity {
            return Err(Error::TooLargeForRemoteStore {
                call: "tensor.remote_store",
                bytes,
                capacity,
                profile: self.chip.profile.name(),
            });
        }
        self.write_region(
            "tensor.remote_store",
            &src.data,
            src.shape[1],
            src.shape,
            target,
            peer,
            offsets,
            atomic,
        )
        .await
    }

    /// `pld.remote_store`: dispatches on the operand, a Tile or a Tensor.
    pub async fn remote_store<'a, T: Scalar>(
        &self,
        src: impl Into<Operand<'a, T>>,
        target: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        atomic: Atomic,
    ) -> Result<()> {
        match src.into() {
            Operand::Tile(t) => {
                self.tile_remote_store(t, target, peer, offsets, atomic)
                    .await
            }
            Operand::Tensor(t) => {
                self.tensor_remote_store(t, target, peer, offsets, atomic)
                    .await
            }
            Operand::Distributed(d) => Err(Error::Usage(format!(
                "remote_store: the source '{}' is a window view; load it into a tile first, or move it with put",
                d.name
            ))),
        }
    }

    /// Bulk put of a region of `src` — a local tensor or this rank's view
    /// of a window — into `peer`'s `dst` (`pld.tensor.put`): streams in
    /// `chunk_rows × chunk_cols` chunks, pipelined on request, so it is not
    /// bounded by on-chip memory.
    pub async fn put<'a, T: Scalar>(
        &self,
        dst: &DistributedTensor<T>,
        peer: u32,
        src: impl Into<Src<'a, T>>,
        opts: PutOpts,
    ) -> Result<()> {
        match src.into() {
            Src::Tensor(t) => self.put_tensor(dst, peer, t, opts).await,
            Src::Window(w) => {
                // The source region, read from this rank's window (no
                // message) into bytes, then put from them.
                let (_, s, shape, _) = opts.resolve("put", w.shape)?;
                check_region("put", &w.name, w.shape, s, shape)?;
                self.check_peer("put", peer)?;
                let mut region = vec![0u8; (shape[0] * shape[1]) as usize * T::DTYPE.size()];
                let me = self.rank();
                let here = PutOpts::region([0, 0], s, shape);
                self.get_bytes(&mut region, &w.name, shape, me, w, here)
                    .await?;
                let whole = PutOpts {
                    src_offsets: opts.src_offsets.map(|_| [0, 0]),
                    ..opts
                };
                self.put_bytes(dst, peer, &w.name, &region, shape, whole)
                    .await
            }
        }
    }

    async fn put_tensor<T: Scalar>(
        &self,
        dst: &DistributedTensor<T>,
        peer: u32,
        src: &Tensor<T>,
        opts: PutOpts,
    ) -> Result<()> {
        self.put_bytes(dst, peer, &src.name, &to_bytes(&src.data), src.shape, opts)
            .await
    }

    /// `put` of a local source given as the row-major bytes of a `shape`
    /// tensor named `name` — for bindings whose data already is bytes, so
    /// that nothing converts element by element on the way.
    pub async fn put_bytes<T: Scalar>(
        &self,
        dst: &DistributedTensor<T>,
        peer: u32,
        name: &str,
        bytes: &[u8],
        src_shape: Shape2,
        opts: PutOpts,
    ) -> Result<()> {
        let (d, s, shape, chunking) = opts.resolve("put", src_shape)?;
        let want = crate::tensor::elems("put", name, &src_shape)? * T::DTYPE.size() as u64;
        if bytes.len() as u64 != want {
            return Err(Error::Usage(format!(
                "put: '{name}' of shape {src_shape:?} needs {want} bytes of {}, got {}",
                T::DTYPE,
                bytes.len()
            )));
        }
        check_region("put", name, src_shape, s, shape)?;
        check_region("put", &dst.name, dst.shape, d, shape)?;
        self.check_peer("put", peer)?;
        let t = Transfer {
            dtype: T::DTYPE,
            shape: Shape {
                rows: shape[0],
                cols: shape[1],
            },
            dst: Layout {
                offset: dst.elem_offset(d),
                row_stride: dst.shape[1],
            },
            src: Layout {
                offset: s[0] * src_shape[1] + s[1],
                row_stride: src_shape[1],
            },
        };
        let win = self.window_id(&dst.window)?;
        let r = match opts.atomic {
            Atomic::None => self.rma.put_region(peer, win, &t, bytes, chunking).await,
            Atomic::Add => {
                self.rma
                    .atomic_add_region(peer, win, &t, bytes, chunking)
                    .await
            }
        };
        r.map_err(self.rma_err())
    }

    /// Bulk get of a region of `peer`'s `src` into `dst` — a local tensor
    /// or this rank's view of a window (`pld.tensor.get`); `opts.dst_offsets`
    /// are in `dst`, `src_offsets` in `src`. `atomic` must be None.
    pub async fn get<'a, T: Scalar>(
        &self,
        dst: impl Into<Dst<'a, T>>,
        peer: u32,
        src: &DistributedTensor<T>,
        opts: PutOpts,
    ) -> Result<()> {
        match dst.into() {
            Dst::Tensor(t) => self.get_tensor(t, peer, src, opts).await,
            Dst::Window(w) => {
                // Into a tensor of the region's shape, then written to this
                // rank's window (no message): only the region changes.
                let (d, s, shape, _) = opts.resolve("get", src.shape)?;
                check_region("get", &w.name, w.shape, d, shape)?;
                let mut t = Tensor::zeros(&w.name, shape);
                let here = PutOpts {
                    chunk_rows: opts.chunk_rows,
                    chunk_cols: opts.chunk_cols,
                    pipeline: opts.pipeline,
                    ..PutOpts::region([0, 0], s, shape)
                };
                self.get_tensor(&mut t, peer, src, here).await?;
                let me = self.rank();
                self.write_region("get", &t.data, shape[1], shape, w, me, d, Atomic::None)
                    .await
            }
        }
    }

    async fn get_tensor<T: Scalar>(
        &self,
        dst: &mut Tensor<T>,
        peer: u32,
        src: &DistributedTensor<T>,
        opts: PutOpts,
    ) -> Result<()> {
        let mut bytes = to_bytes(&dst.data);
        self.get_bytes(&mut bytes, &dst.name, dst.shape, peer, src, opts)
            .await?;
        dst.data = from_bytes(&bytes);
        Ok(())
    }

    /// `get` into a local destination given as the row-major bytes of a
    /// `dst_shape` tensor named `name` (the region lands in place, the rest
    /// is kept) — for bindings whose data already is bytes, so that nothing
    /// converts element by element on the way.
    pub async fn get_bytes<T: Scalar>(
        &self,
        dst: &mut [u8],
        name: &str,
        dst_shape: Shape2,
        peer: u32,
        src: &DistributedTensor<T>,
        opts: PutOpts,
    ) -> Result<()> {
        if opts.atomic != Atomic::None {
            return Err(Error::Usage(
                "get: atomic applies to stores; get reads plainly".into(),
            ));
        }
        let (d, s, shape, chunking) = opts.resolve("get", src.shape)?;
        let want = crate::tensor::elems("get", name, &dst_shape)? * T::DTYPE.size() as u64;
        if dst.len() as u64 != want {
            return Err(Error::Usage(format!(
                "get: '{name}' of shape {dst_shape:?} needs {want} bytes of {}, got {}",
                T::DTYPE,
                dst.len()
            )));
        }
        check_region("get", &src.name, src.shape, s, shape)?;
        check_region("get", name, dst_shape, d, shape)?;
        self.check_peer("get", peer)?;
        let t = Transfer {
            dtype: T::DTYPE,
            shape: Shape {
                rows: shape[0],
                cols: shape[1],
            },
            src: Layout {
                offset: src.elem_offset(s),
                row_stride: src.shape[1],
            },
            dst: Layout {
                offset: d[0] * dst_shape[1] + d[1],
                row_stride: dst_shape[1],
            },
        };
        let win = self.window_id(&src.window)?;
        self.rma
            .get_region(peer, win, &t, dst, chunking)
            .await
            .map_err(self.rma_err())
    }

    /// Reads this rank's whole view into a local tensor.
    pub async fn read_own<T: Scalar>(&self, dt: &DistributedTensor<T>) -> Result<Tensor<T>> {
        let mut t = Tensor::zeros(&dt.name, dt.shape);
        let me = self.rank();
        self.get_tensor(&mut t, me, dt, PutOpts::default()).await?;
        Ok(t)
    }

    /// Checks that two tensors have one shape (for kernels' own checks).
    pub fn same_shape(&self, call: &'static str, a: Shape2, b: Shape2) -> Result<()> {
        same_shape(call, a, b)
    }
}
