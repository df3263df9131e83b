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
//!
//! The methods are grouped by tier: `alloc.rs` (window buffers),
//! `system.rs`, `tile.rs` (local ops and the tile tier), `tensor.rs`.

mod alloc;
mod peer;
mod sites;
mod system;
mod tensor;
mod tile;

use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, OnChip, Profile, Shape2, Tensor, Tile};
pub use alloc::{Symmetry, WindowBuffer, collapse};
use pld_proto::Rma;
use pld_proto::region::Chunking;
pub use sites::Sites;
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
    /// This rank.
    pub rank: u32,
    /// How many ranks share the window.
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
    /// A local tensor.
    Tensor(&'a Tensor<T>),
    /// A window view.
    Distributed(&'a DistributedTensor<T>),
    /// An on-chip tile.
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
    /// A local tensor.
    Tensor(&'a Tensor<T>),
    /// This rank's view of a window.
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
    /// A local tensor.
    Tensor(&'a mut Tensor<T>),
    /// This rank's view of a window.
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
    /// Where the region starts in the destination, `[row, col]`.
    pub dst_offsets: Option<Shape2>,
    /// Where the region starts in the source, `[row, col]`.
    pub src_offsets: Option<Shape2>,
    /// The region's `[rows, cols]`.
    pub shape: Option<Shape2>,
    /// Whether a put adds into the destination instead of overwriting.
    pub atomic: Atomic,
    /// Rows per chunk.
    pub chunk_rows: Option<u64>,
    /// Columns per chunk.
    pub chunk_cols: Option<u64>,
    /// Keep several chunks in flight.
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
    /// The allocation log every rank of the launch shares.
    symmetry: Arc<Symmetry>,
    /// Signals a collective is using now: `(window, start, end, call)`.
    signals: Mutex<Vec<(String, u64, u64, &'static str)>>,
    /// Conditions `defer_wait` registered: the kernel is complete once
    /// they hold.
    deferred: Mutex<Vec<system::Deferred>>,
    /// The rank's timeline (`--trace`), where the device names its
    /// barriers' rounds.
    trace: Option<Arc<pld_server::Trace>>,
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
            symmetry: Arc::new(Symmetry::default()),
            signals: Mutex::new(Vec::new()),
            deferred: Mutex::new(Vec::new()),
            trace: None,
        }
    }

    /// Shares `symmetry` with the other ranks of a launch, so that a rank
    /// that allocates window buffers differently is named, not silently
    /// given different offsets.
    pub fn with_symmetry(mut self, symmetry: Arc<Symmetry>) -> Device<R> {
        self.symmetry = symmetry;
        self
    }

    /// Records this device's barriers and their rounds on `trace` (its
    /// rank's, with `--trace`).
    pub fn with_trace(mut self, trace: Option<Arc<pld_server::Trace>>) -> Device<R> {
        self.trace = trace;
        self
    }

    /// The timeline, with `--trace`.
    pub(crate) fn trace(&self) -> Option<&pld_server::Trace> {
        self.trace.as_deref()
    }

    /// The signals collectives hold now.
    pub(crate) fn signals(&self) -> &Mutex<Vec<(String, u64, u64, &'static str)>> {
        &self.signals
    }

    /// The rank this device runs on.
    pub fn rma(&self) -> &R {
        &self.rma
    }
    /// The chip profile this device simulates.
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

    pub(crate) fn rma_err(&self) -> impl Fn(R::Error) -> Error + '_ {
        move |e| Error::Rma {
            rank: self.rma.rank(),
            reason: pld_proto::rma::Reason::reason(&e).into(),
            message: e.to_string(),
        }
    }

    pub(crate) fn window_id(&self, dt_window: &str) -> Result<R::Window> {
        self.rma.window(dt_window).map_err(self.rma_err())
    }
}
