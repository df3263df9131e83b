//! pld's simulated device: tile- and tensor-level kernels in the PyPTO
//! `pld` style, run on every rank and lowered to pld operations.
//!
//! The device types, tiers, collectives and the tutorial programs arrive
//! with the device issue; the element types it computes with are shared
//! from [`pld_proto::dtype`].

pub use pld_proto::{Dtype, Element};
