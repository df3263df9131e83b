//! pld's client plane as tonic sees it: the client ([`pld_client`]) and
//! server ([`pld_server`]) of `service pld.v1.Pld`, generated over
//! [`pld_proto::v1`]'s message types, [`Method`] (one variant per rpc,
//! read off the service), and the descriptor set for server reflection.
//!
//! A crate of its own so that what embeds a rank (`pld-server`) and what
//! speaks the wire (`pld-proto`) link no gRPC stack: only the daemon and
//! the clients depend on this.

#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/pld.v1.rs"));
}

pub use generated::{pld_client, pld_server};

include!(concat!(env!("OUT_DIR"), "/pld_methods.rs"));

/// The encoded `FileDescriptorSet` of every `pld.v1` file, for gRPC server
/// reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/pld_descriptor.bin"));
