//! Local loads and stores of tiles, and the tile tier: `remote_load` and
//! `remote_store` of one tile, one message each.

use super::*;
use crate::error::Result;
use crate::tensor::{DistributedTensor, Shape2, Tile, check_region};
use pld_proto::Rma;
use pld_proto::Scalar;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::region::{Chunking, Layout, Shape, Transfer};

impl<R: Rma> Device<R> {
    // ---- local ops ------------------------------------------------------

    /// A new tile of zeros on chip.
    pub fn tile<T: Scalar>(&self, shape: Shape2) -> Result<Tile<T>> {
        Tile::alloc(&self.chip, shape, shape)
    }

    /// A tile of `shape` holding `data` (row-major; `valid` the part that
    /// holds data), counted against on-chip memory like any tile: for
    /// bindings whose kernels compute tile values themselves.
    pub fn tile_from<T: Scalar>(
        &self,
        shape: Shape2,
        valid: Shape2,
        data: Vec<T>,
    ) -> Result<Tile<T>> {
        let mut tile = Tile::alloc(&self.chip, shape, valid)?;
        if data.len() != tile.data.len() {
            return Err(crate::error::Error::Usage(format!(
                "a [{}, {}] tile holds {} elements, got {}",
                shape[0],
                shape[1],
                tile.data.len(),
                data.len()
            )));
        }
        tile.data = data;
        Ok(tile)
    }

    /// Loads `shape` at `offsets` of a local tensor or of this rank's
    /// window view into a tile (`pl.load`).
    pub async fn load<'a, T: Scalar>(
        &self,
        src: impl Into<Src<'a, T>>,
        offsets: Shape2,
        shape: Shape2,
    ) -> Result<Tile<T>> {
        self.load_valid(src, offsets, shape, shape).await
    }

    /// `pl.load(src, offsets, shape, valid_shape=valid)`: a tile of
    /// `shape` whose top-left `valid` part is read from `src` at `offsets`
    /// (the region read must fit; the tile's padding is zero).
    pub async fn load_valid<'a, T: Scalar>(
        &self,
        src: impl Into<Src<'a, T>>,
        offsets: Shape2,
        shape: Shape2,
        valid: Shape2,
    ) -> Result<Tile<T>> {
        let mut tile = Tile::alloc(&self.chip, shape, valid)?;
        match src.into() {
            Src::Tensor(t) => {
                check_region("load", &t.name, t.shape, offsets, valid)?;
                let part = t.slice(offsets, valid)?.data;
                for r in 0..valid[0] as usize {
                    let (d, s, n) = (
                        r * shape[1] as usize,
                        r * valid[1] as usize,
                        valid[1] as usize,
                    );
                    tile.data[d..d + n].copy_from_slice(&part[s..s + n]);
                }
            }
            Src::Window(dt) => {
                let me = self.rank();
                self.read_region(dt, me, offsets, valid, &mut tile).await?;
            }
        }
        Ok(tile)
    }

    /// Stores a tile's valid part at `offsets` of a local tensor or of this
    /// rank's window view (`pl.store`).
    pub async fn store<'a, T: Scalar>(
        &self,
        tile: &Tile<T>,
        offsets: Shape2,
        dst: impl Into<Dst<'a, T>>,
    ) -> Result<()> {
        match dst.into() {
            Dst::Tensor(t) => {
                check_region("store", &t.name, t.shape, offsets, tile.valid)?;
                for r in 0..tile.valid[0] {
                    let d = ((offsets[0] + r) * t.shape[1] + offsets[1]) as usize;
                    let s = (r * tile.shape[1]) as usize;
                    let n = tile.valid[1] as usize;
                    t.data[d..d + n].copy_from_slice(&tile.data[s..s + n]);
                }
                Ok(())
            }
            Dst::Window(dt) => {
                let me = self.rank();
                self.write_region(
                    "store",
                    tile.data(),
                    tile.shape[1],
                    tile.valid,
                    dt,
                    me,
                    offsets,
                    Atomic::None,
                )
                .await
            }
        }
    }

    /// Reads `shape` at `offsets` of `peer`'s `dt` into the top-left of `tile`.
    pub(super) async fn read_region<T: Scalar>(
        &self,
        dt: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        shape: Shape2,
        tile: &mut Tile<T>,
    ) -> Result<()> {
        check_region("remote_load", &dt.name, dt.shape, offsets, shape)?;
        self.check_peer("remote_load", peer)?;
        let t = Transfer {
            dtype: T::DTYPE,
            shape: Shape {
                rows: shape[0],
                cols: shape[1],
            },
            src: Layout {
                offset: dt.elem_offset(offsets),
                row_stride: dt.shape[1],
            },
            dst: Layout {
                offset: 0,
                row_stride: tile.shape[1],
            },
        };
        let mut buf = vec![0u8; tile.data.len() * T::DTYPE.size()];
        let win = self.window_id(&dt.window)?;
        self.rma
            .get_region(peer, win, &t, &mut buf, Chunking::default())
            .await
            .map_err(self.rma_err())?;
        // Only the region's rows and columns were written; the rest is zero.
        tile.data = from_bytes(&buf);
        Ok(())
    }

    /// Writes the `valid` part of row-major `data` (rows `stride` apart) to
    /// `offsets` of `peer`'s `dt`: one put (or atomic add) message.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_region<T: Scalar>(
        &self,
        call: &'static str,
        data: &[T],
        stride: u64,
        valid: Shape2,
        dt: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        atomic: Atomic,
    ) -> Result<()> {
        check_region(call, &dt.name, dt.shape, offsets, valid)?;
        self.check_peer(call, peer)?;
        let t = Transfer {
            dtype: T::DTYPE,
            shape: Shape {
                rows: valid[0],
                cols: valid[1],
            },
            dst: Layout {
                offset: dt.elem_offset(offsets),
                row_stride: dt.shape[1],
            },
            src: Layout {
                offset: 0,
                row_stride: stride,
            },
        };
        let bytes = to_bytes(data);
        let win = self.window_id(&dt.window)?;
        let r = match atomic {
            Atomic::None => {
                self.rma
                    .put_region(peer, win, &t, &bytes, Chunking::default())
                    .await
            }
            Atomic::Add => {
                self.rma
                    .atomic_add_region(peer, win, &t, &bytes, Chunking::default())
                    .await
            }
        };
        r.map_err(self.rma_err())
    }

    /// Reads `shape` at `offsets` of `peer`'s `target` into a new tile
    /// (`pld.tile.remote_load`): one get. With `valid_shape`, only that
    /// top-left part is read and the rest of the tile is zero.
    pub async fn remote_load<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        shape: Shape2,
        valid_shape: Option<Shape2>,
    ) -> Result<Tile<T>> {
        let valid = valid_shape.unwrap_or(shape);
        let mut tile = Tile::alloc(&self.chip, shape, valid)?;
        self.read_region(target, peer, offsets, valid, &mut tile)
            .await?;
        Ok(tile)
    }

    /// Writes (or with [`Atomic::Add`] accumulates) a tile's valid part at
    /// `offsets` of `peer`'s `target` (`pld.tile.remote_store`): exactly
    /// one put message.
    pub async fn tile_remote_store<T: Scalar>(
        &self,
        tile: &Tile<T>,
        target: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        atomic: Atomic,
    ) -> Result<()> {
        self.write_region(
            "remote_store",
            &tile.data,
            tile.shape[1],
            tile.valid,
            target,
            peer,
            offsets,
            atomic,
        )
        .await
    }
}
