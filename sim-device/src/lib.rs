//! pld's simulated device: kernels written against a Rust API that mirrors
//! PyPTO's `pl` / `pld` (SPEC §3) run on every rank, and their
//! communication becomes pld operations over real sockets.
//!
//! - [`Tensor`] is local and rank-private; [`DistributedTensor`] is a typed
//!   view of a window, the only thing peers reach; [`Tile`] is on chip,
//!   2-D, 32-byte aligned and counted against the [`Profile`]'s capacity.
//! - System tier: [`Device::world_size`], [`Device::get_comm_ctx`],
//!   [`rank`], [`nranks`], [`Device::notify`], [`Device::wait`],
//!   [`Device::test`].
//! - Tile tier: [`Device::remote_load`], [`Device::tile_remote_store`] —
//!   one message each.
//! - Tensor tier: [`Device::tensor_remote_store`] (one put message), the
//!   short [`Device::remote_store`], [`Device::put`] / [`Device::get`]
//!   (chunked and pipelined, from or into a tensor or a window view),
//!   [`Device::defer_wait`].
//! - Window buffers as the seed has them: [`Device::alloc_window_buffer`]
//!   and [`Device::window`] views, checked symmetric across ranks
//!   ([`Symmetry`]); N-D shapes ([`nd`]); rank arithmetic that never wraps
//!   ([`Device::peer_prev`], [`Device::peer_next`]).
//! - Barrier and collectives through the caller's signal:
//!   [`Device::barrier`], [`Device::allreduce`] (mesh and ring),
//!   [`Device::broadcast`], [`Device::allgather`],
//!   [`Device::reduce_scatter`], [`Device::all_to_all`], and the ragged
//!   [`Device::all_to_all_v`].
//! - `--compile-only`: [`plan::Planner`] records what each rank would send.
//!
//! A device runs on any [`Rma`]: an embedded `pld_server::Rank` or a
//! `pld_client::Client` of a daemon. [`launch`] runs a program on every
//! rank, as the examples (`cargo run -p pld-sim --example 05_remote_load_store
//! -- -p a2a3sim -d 0,1 --mode store`) do.

pub mod checked;
mod collective;
mod device;
mod error;
pub mod launch;
pub mod nd;
pub mod plan;
mod tensor;

pub use device::{
    Atomic, CommCtx, Device, Dst, Operand, PutOpts, Src, Symmetry, WindowBuffer, nranks, rank,
};
pub use error::{Error, ErrorKind, Result};
pub use half::{bf16, f16};
pub use pld_proto::collective::Algo;
pub use pld_proto::{Cmp, Dtype, Element, NotifyOp, Rma};
pub use pld_proto::{ReduceOp, Scalar};
pub use tensor::{DistributedTensor, Profile, Shape2, Tensor, Tile};
