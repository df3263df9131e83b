//! The pld daemon around an embedded rank ([`pld_server::Rank`]): the
//! gRPC client plane ([`grpc`]: `pld.v1.Pld` with health and reflection)
//! and the Prometheus metrics endpoint ([`metrics`]). The bins
//! `pld-daemon` (a rank with a command line) and `pld-bench` (the
//! benchmarks) are built from this crate.
//!
//! What embeds a rank without serving clients — the device, the OpenSHMEM
//! library, tests — depends on `pld-server` alone and links no gRPC stack.

pub mod grpc;
pub mod metrics;
