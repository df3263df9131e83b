//! pld's client plane: the Rust gRPC client and the `pld` CLI.
//!
//! The gRPC service and this crate's client arrive with the client-plane
//! issue; until then a program reaches pld by embedding a rank
//! (`pld_server::Rank`). The wire types are shared from [`pld_proto`].

pub use pld_proto as proto;
