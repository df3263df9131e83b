//! [`Device`]: one rank's simulated device. Kernels call its methods, which
//! mirror PyPTO's `pl` / `pld` surface (SPEC §3), and it turns their
//! communication into pld operations on the rank it runs on — embedded
//! ([`pld_server::Rank`]) or a daemon's client ([`pld_client::Client`]),
//! through the [`Rma`] trait both implement.
//!
//! Completion and ordering: every call here is blocking — a store or put
//! returns once its effect is applied at the target, a load or get once
//! the data is here. `barrier` orders remote accesses across ranks: every
//! put, atomic and notify issued before it is applied before any rank
//! leaves it.

use crate::error::{Error, Result};
use crate::tensor::{
    DistributedTensor, OnChip, Profile, Shape2, Tensor, Tile, check_region, same_shape,
};
use pld_proto::Scalar;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::region::{Chunking, Layout, Shape, Transfer};
use pld_proto::{Cmp, Dtype, NotifyOp, Rma};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Whether a store overwrites or accumulates (`pld.AtomicType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atomic {
    /// Overwrite.
    #[default]
    None,
    /// `peer_region += src`, atomic per element.
    Add,
}

/// The communication context of a window (`pld.get_comm_ctx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommCtx {
    pub rank: u32,
    pub nranks: u32,
}

/// This rank's id in `ctx` (`pld.rank(ctx)`).
pub fn rank(ctx: CommCtx) -> u32 {
    ctx.rank
}

/// The number of ranks in `ctx` (`pld.nranks(ctx)`).
pub fn nranks(ctx: CommCtx) -> u32 {
    ctx.nranks
}

/// Any operand, for the calls that dispatch on what they are given (the
/// short `remote_store`, and `get_comm_ctx` as a dynamic language sees it).
#[derive(Debug)]
pub enum Operand<'a, T> {
    Tensor(&'a Tensor<T>),
    Distributed(&'a DistributedTensor<T>),
    Tile(&'a Tile<T>),
}

impl<'a, T> From<&'a Tensor<T>> for Operand<'a, T> {
    fn from(t: &'a Tensor<T>) -> Self {
        Operand::Tensor(t)
    }
}
impl<'a, T> From<&'a DistributedTensor<T>> for Operand<'a, T> {
    fn from(t: &'a DistributedTensor<T>) -> Self {
        Operand::Distributed(t)
    }
}
impl<'a, T> From<&'a Tile<T>> for Operand<'a, T> {
    fn from(t: &'a Tile<T>) -> Self {
        Operand::Tile(t)
    }
}

/// Where `load` reads from: a local tensor or this rank's window view.
#[derive(Debug)]
pub enum Src<'a, T> {
    Tensor(&'a Tensor<T>),
    Window(&'a DistributedTensor<T>),
}
impl<'a, T> From<&'a Tensor<T>> for Src<'a, T> {
    fn from(t: &'a Tensor<T>) -> Self {
        Src::Tensor(t)
    }
}
impl<'a, T> From<&'a DistributedTensor<T>> for Src<'a, T> {
    fn from(t: &'a DistributedTensor<T>) -> Self {
        Src::Window(t)
    }
}

/// Where `store` writes to: a local tensor or this rank's window view.
#[derive(Debug)]
pub enum Dst<'a, T> {
    Tensor(&'a mut Tensor<T>),
    Window(&'a DistributedTensor<T>),
}
impl<'a, T> From<&'a mut Tensor<T>> for Dst<'a, T> {
    fn from(t: &'a mut Tensor<T>) -> Self {
        Dst::Tensor(t)
    }
}
impl<'a, T> From<&'a DistributedTensor<T>> for Dst<'a, T> {
    fn from(t: &'a DistributedTensor<T>) -> Self {
        Dst::Window(t)
    }
}

/// The optional arguments of tensor-level `put` and `get`. Offsets and
/// shape go together (all three or none: none moves the whole source);
/// `pipeline` needs both chunk sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutOpts {
    pub dst_offsets: Option<Shape2>,
    pub src_offsets: Option<Shape2>,
    pub shape: Option<Shape2>,
    pub atomic: Atomic,
    pub chunk_rows: Option<u64>,
    pub chunk_cols: Option<u64>,
    pub pipeline: bool,
}

impl PutOpts {
    /// The region `shape` from `src_offsets` of the source to `dst_offsets`.
    pub fn region(dst_offsets: Shape2, src_offsets: Shape2, shape: Shape2) -> PutOpts {
        PutOpts {
            dst_offsets: Some(dst_offsets),
            src_offsets: Some(src_offsets),
            shape: Some(shape),
            ..PutOpts::default()
        }
    }
    /// Streams in `rows × cols` chunks.
    pub fn chunks(mut self, rows: u64, cols: u64) -> PutOpts {
        self.chunk_rows = Some(rows);
        self.chunk_cols = Some(cols);
        self
    }
    /// Keeps several chunks in flight.
    pub fn pipelined(mut self) -> PutOpts {
        self.pipeline = true;
        self
    }
    /// Accumulates instead of overwriting.
    pub fn atomic_add(mut self) -> PutOpts {
        self.atomic = Atomic::Add;
        self
    }

    /// Checks the combination and resolves it against the shapes of the
    /// source and destination: `(dst_offsets, src_offsets, shape, chunking)`.
    fn resolve(
        &self,
        call: &'static str,
        src_shape: Shape2,
    ) -> Result<(Shape2, Shape2, Shape2, Chunking)> {
        let chunking = match (self.chunk_rows, self.chunk_cols, self.pipeline) {
            (Some(r), Some(c), p) => Chunking {
                pipeline: p,
                ..Chunking::chunks(r, c)
            },
            (None, None, false) => Chunking::default(),
            (_, _, true) => return Err(Error::PipelineWithoutChunks { call }),
            _ => return Err(Error::ChunkSizeAlone { call }),
        };
        match (self.dst_offsets, self.src_offsets, self.shape) {
            (Some(d), Some(s), Some(shape)) => Ok((d, s, shape, chunking)),
            (None, None, None) => Ok(([0, 0], [0, 0], src_shape, chunking)),
            _ => Err(Error::OffsetsWithoutShape { call }),
        }
    }
}

/// One rank's simulated device.
#[derive(Debug)]
pub struct Device<R: Rma> {
    rma: Arc<R>,
    chip: Arc<OnChip>,
    /// Window sizes, by name.
    windows: HashMap<String, u64>,
    /// The next free byte of each window (the symmetric allocator).
    next: Mutex<HashMap<String, u64>>,
    /// The collectives' scratch area, grown on demand: `(base, bytes)`.
    scratch: Mutex<Option<(u64, u64)>>,
}

impl<R: Rma> Device<R> {
    /// The device of `rma`'s rank, with `windows` (name, bytes) as they are
    /// configured on every rank.
    pub fn new(rma: Arc<R>, profile: Profile, windows: Vec<(String, u64)>) -> Device<R> {
        Device {
            rma,
            chip: Arc::new(OnChip {
                profile,
                used: AtomicU64::new(0),
            }),
            windows: windows.into_iter().collect(),
            next: Mutex::new(HashMap::new()),
            scratch: Mutex::new(None),
        }
    }

    /// The rank this device runs on.
    pub fn rma(&self) -> &R {
        &self.rma
    }
    pub fn profile(&self) -> Profile {
        self.chip.profile
    }
    /// This rank's id.
    pub fn rank(&self) -> u32 {
        self.rma.rank()
    }
    /// The number of ranks (`pld.world_size()`).
    pub fn world_size(&self) -> u32 {
        self.rma.nranks()
    }
    /// On-chip bytes held by live tiles.
    pub fn onchip_used(&self) -> u64 {
        self.chip.used.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn rma_err(&self) -> impl Fn(R::Error) -> Error + '_ {
        move |e| Error::Rma {
            rank: self.rma.rank(),
            message: e.to_string(),
        }
    }

    fn win(&self, dt_window: &str) -> Result<R::Window> {
        self.rma.window(dt_window).map_err(self.rma_err())
    }

    // ---- windows --------------------------------------------------------

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

    fn reserve(&self, window: &str, bytes: u64) -> Result<u64> {
        let size = *self.windows.get(window).ok_or_else(|| {
            Error::Usage(format!(
                "window '{window}' does not exist; the windows are {:?}",
                self.windows.keys().collect::<Vec<_>>()
            ))
        })?;
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut s = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
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

    // ---- system tier ----------------------------------------------------

    /// The communication context of a window view (`pld.get_comm_ctx`).
    ///
    /// ```no_run
    /// # async fn f(dev: &pld_sim::Device<pld_server::Rank>) {
    /// let data = dev.alloc::<f32>("data", "data", [1, 8]).unwrap();
    /// let ctx = dev.get_comm_ctx(&data);
    /// assert!(pld_sim::rank(ctx) < pld_sim::nranks(ctx));
    /// # }
    /// ```
    ///
    /// Taking a `&DistributedTensor` makes a local Tensor a type error:
    ///
    /// ```compile_fail
    /// # async fn f(dev: &pld_sim::Device<pld_server::Rank>) {
    /// let x = pld_sim::Tensor::<f32>::zeros("x", [1, 8]);
    /// dev.get_comm_ctx(&x); // a Tensor is not a DistributedTensor
    /// # }
    /// ```
    pub fn get_comm_ctx<T: Scalar>(&self, _dt: &DistributedTensor<T>) -> CommCtx {
        CommCtx {
            rank: self.rma.rank(),
            nranks: self.rma.nranks(),
        }
    }

    /// `get_comm_ctx` on an operand of any kind: a local Tensor or a Tile
    /// is refused with the fix.
    pub fn get_comm_ctx_of<'a, T: Scalar + 'a>(
        &self,
        op: impl Into<Operand<'a, T>>,
    ) -> Result<CommCtx> {
        match op.into() {
            Operand::Distributed(dt) => Ok(self.get_comm_ctx(dt)),
            Operand::Tensor(t) => Err(Error::NotDistributed {
                call: "get_comm_ctx",
                name: t.name.clone(),
            }),
            Operand::Tile(_) => Err(Error::NotDistributed {
                call: "get_comm_ctx",
                name: "a tile".into(),
            }),
        }
    }

    fn signal_offset<T: Scalar>(
        &self,
        call: &'static str,
        signal: &DistributedTensor<T>,
        at: Shape2,
    ) -> Result<u64> {
        if T::DTYPE != Dtype::Int32 {
            return Err(Error::DtypeMismatch {
                call,
                name: signal.name.clone(),
                expected: Dtype::Int32,
                found: T::DTYPE,
                fix: "signal cells are int32: allocate the signal view as DistributedTensor<i32>",
            });
        }
        check_region(call, &signal.name, signal.shape, at, [1, 1])?;
        Ok(signal.byte_offset(at))
    }

    /// Sets or atomically adds `value` to `peer`'s int32 cell `at` of
    /// `signal` (`pld.system.notify`).
    pub async fn notify<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        peer: u32,
        at: Shape2,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        let off = self.signal_offset("notify", signal, at)?;
        let win = self.win(&signal.window)?;
        self.rma
            .notify(peer, win, off, value, op)
            .await
            .map_err(self.rma_err())
    }

    /// Waits until this rank's cell `at` of `signal` satisfies `cmp
    /// expected` (`pld.system.wait`); fails at the sync timeout naming the
    /// cell, the expected and the last value seen.
    pub async fn wait<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        at: Shape2,
        expected: i32,
        cmp: Cmp,
    ) -> Result<i32> {
        let off = self.signal_offset("wait", signal, at)?;
        let win = self.win(&signal.window)?;
        self.rma
            .wait(win, off, cmp, expected)
            .await
            .map_err(|e| Error::Rma {
                rank: self.rank(),
                message: format!("wait on '{}'[{}, {}]: {e}", signal.name, at[0], at[1]),
            })
    }

    /// Whether this rank's cell satisfies `cmp expected` now.
    pub async fn test<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        at: Shape2,
        expected: i32,
        cmp: Cmp,
    ) -> Result<bool> {
        let off = self.signal_offset("test", signal, at)?;
        let win = self.win(&signal.window)?;
        self.rma
            .test(win, off, cmp, expected)
            .await
            .map_err(self.rma_err())
    }

    /// All ranks arrive before any leaves; orders every remote access
    /// issued before it (`pld.tensor.barrier(signal)`).
    pub async fn barrier(&self, _signal: &DistributedTensor<i32>) -> Result<()> {
        self.rma.barrier().await.map_err(self.rma_err())
    }

    /// Waits for every op this rank issued.
    pub async fn quiet(&self) -> Result<()> {
        self.rma.quiet().await.map_err(self.rma_err())
    }

    // ---- local ops ------------------------------------------------------

    /// A new tile of zeros on chip.
    pub fn tile<T: Scalar>(&self, shape: Shape2) -> Result<Tile<T>> {
        Tile::alloc(&self.chip, shape, shape)
    }

    /// Loads `shape` at `offsets` of a local tensor or of this rank's
    /// window view into a tile (`pl.load`).
    pub async fn load<'a, T: Scalar>(
        &self,
        src: impl Into<Src<'a, T>>,
        offsets: Shape2,
        shape: Shape2,
    ) -> Result<Tile<T>> {
        let mut tile = Tile::alloc(&self.chip, shape, shape)?;
        match src.into() {
            Src::Tensor(t) => {
                check_region("load", &t.name, t.shape, offsets, shape)?;
                tile.data = t.slice(offsets, shape)?.data;
            }
            Src::Window(dt) => {
                let me = self.rank();
                self.read_region(dt, me, offsets, shape, &mut tile).await?;
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
    async fn read_region<T: Scalar>(
        &self,
        dt: &DistributedTensor<T>,
        peer: u32,
        offsets: Shape2,
        shape: Shape2,
        tile: &mut Tile<T>,
    ) -> Result<()> {
        check_region("remote_load", &dt.name, dt.shape, offsets, shape)?;
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
        let win = self.win(&dt.window)?;
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
    async fn write_region<T: Scalar>(
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
        let win = self.win(&dt.window)?;
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

    // ---- tile tier ------------------------------------------------------

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

    // ---- tensor tier ----------------------------------------------------

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
        let bytes = src.data.len() as u64 * T::DTYPE.size() as u64;
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

    /// Bulk put of a region of a local tensor into `peer`'s `dst`
    /// (`pld.tensor.put`): streams in `chunk_rows × chunk_cols` chunks,
    /// pipelined on request, so it is not bounded by on-chip memory.
    pub async fn put<T: Scalar>(
        &self,
        dst: &DistributedTensor<T>,
        peer: u32,
        src: &Tensor<T>,
        opts: PutOpts,
    ) -> Result<()> {
        let (d, s, shape, chunking) = opts.resolve("put", src.shape)?;
        check_region("put", &src.name, src.shape, s, shape)?;
        check_region("put", &dst.name, dst.shape, d, shape)?;
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
                offset: s[0] * src.shape[1] + s[1],
                row_stride: src.shape[1],
            },
        };
        let bytes = to_bytes(&src.data);
        let win = self.win(&dst.window)?;
        let r = match opts.atomic {
            Atomic::None => self.rma.put_region(peer, win, &t, &bytes, chunking).await,
            Atomic::Add => {
                self.rma
                    .atomic_add_region(peer, win, &t, &bytes, chunking)
                    .await
            }
        };
        r.map_err(self.rma_err())
    }

    /// Bulk get of a region of `peer`'s `src` into a local tensor
    /// (`pld.tensor.get`); `opts.dst_offsets` are in `dst`, `src_offsets`
    /// in `src`. `atomic` must be None.
    pub async fn get<T: Scalar>(
        &self,
        dst: &mut Tensor<T>,
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
        check_region("get", &src.name, src.shape, s, shape)?;
        check_region("get", &dst.name, dst.shape, d, shape)?;
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
                offset: d[0] * dst.shape[1] + d[1],
                row_stride: dst.shape[1],
            },
        };
        let mut bytes = to_bytes(&dst.data);
        let win = self.win(&src.window)?;
        self.rma
            .get_region(peer, win, &t, &mut bytes, chunking)
            .await
            .map_err(self.rma_err())?;
        dst.data = from_bytes(&bytes);
        Ok(())
    }

    /// Reads this rank's whole view into a local tensor.
    pub async fn read_own<T: Scalar>(&self, dt: &DistributedTensor<T>) -> Result<Tensor<T>> {
        let mut t = Tensor::zeros(&dt.name, dt.shape);
        let me = self.rank();
        self.get(&mut t, me, dt, PutOpts::default()).await?;
        Ok(t)
    }

    /// Checks that two tensors have one shape (for kernels' own checks).
    pub fn same_shape(&self, call: &'static str, a: Shape2, b: Shape2) -> Result<()> {
        same_shape(call, a, b)
    }
}
