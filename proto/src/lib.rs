//! pld's wire types and the pure parts of its protocol.
//!
//! - [`v1`]: the protobuf messages of package `pld.v1`, generated from
//!   `proto/pld/v1/*.proto` at build time with protox (no system `protoc`).
//! - [`frame`]: the peer-plane frame codec — a small protobuf header plus the
//!   raw payload bytes, which never pass through protobuf.
//! - [`handshake`]: the check two ranks run on each other's [`v1::Hello`].
//! - [`op`]: the one list of operations ([`OpKind`], [`MsgKind`]) every
//!   per-op table derives from.
//! - [`track`]: the per-peer table of outstanding operations behind
//!   completion, `quiet` and its diagnostics; [`reply`]: what a reply
//!   means for the op it answers.
//! - [`barrier`]: the dissemination barrier; [`checked`]: the happens-before
//!   rules and window shadows of checked mode (the race detector).
//! - [`signal`]: the comparisons of `wait` and `test`.
//! - [`dtype`]: element types and their byte encodings.
//! - [`region`]: 2-D regions, transfers and chunk plans.
//! - [`geometry`]: the rules every driver applies to a transfer: request
//!   geometry, buffer checks, the wire form of a region, chunking and depth.
//! - [`rma`]: the [`Rma`] trait that embedded ranks and remote clients share.
//!
//! Nothing here does I/O or reads a clock: time is passed in, so that every
//! state machine can be driven deterministically by tests. `proto/clippy.toml`
//! makes the clock and the socket types a lint error in the crate's code
//! (tests may use them), and CI checks that tokio is no dependency.

#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::disallowed_types))]

pub mod barrier;
pub mod cell;
pub mod checked;
pub mod collective;
pub mod dtype;
pub mod frame;
pub mod geometry;
pub mod handshake;
pub mod lock;
pub mod op;
pub mod region;
pub mod reply;
pub mod rma;
pub mod scalar;
pub mod signal;
pub mod track;
pub mod units;

/// Generated protobuf types of package `pld.v1`.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations
)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/pld.v1.rs"));
}

/// Re-exported for [`impl_rma!`], whose expansions name `Bytes`.
pub use bytes;
pub use cell::CellOp;
pub use dtype::Element;
pub use frame::{Frame, FrameError, MsgKind};
pub use op::{OpKind, ReplyShape};
pub use rma::Rma;
pub use scalar::{ReduceOp, Scalar};
pub use track::PeerOps;
pub use v1::{BitOp, Cmp, Dtype, ErrorCode, NotifyOp};

/// The peer-plane protocol version; ranks that speak different versions refuse
/// each other at the handshake.
pub const PROTOCOL_VERSION: u32 = 2;
