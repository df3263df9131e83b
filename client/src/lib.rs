//! pld's client plane: the Rust client of a pld daemon's gRPC service, and
//! the `pld` command line.
//!
//! A [`Client`] acts as its daemon's rank: it implements
//! [`pld_proto::Rma`], as the embedded `pld_server::Rank` does, so one
//! program runs embedded or remote.
//!
//! ```no_run
//! # async fn demo() -> pld_client::Result<()> {
//! use pld_client::Client;
//! let c = Client::connect("127.0.0.1:50051").await?;   // waits until the mesh is up
//! let data = c.window("data")?;
//! c.put(1, data, 0, b"hello").await?;                   // applied at rank 1 on return
//! assert_eq!(&c.get(1, data, 0, 5).await?[..], b"hello");
//! # Ok(()) }
//! ```
//!
//! Errors carry the daemon's gRPC code ([`Error::code`]) and its message,
//! which names the rank, window and offset involved.

mod client;
mod collective;
mod connect;
mod error;
mod ops;
mod rma;
mod stream;

pub use client::{Client, WindowId};
pub use connect::ClientOptions;
pub use error::{Detail, Error, Result, code_name};
pub use pld_proto as proto;
pub use pld_proto::collective::Algo;
pub use pld_proto::region::{Chunking, Layout, Shape, Transfer};
pub use pld_proto::{Cmp, Dtype, NotifyOp, ReduceOp, Rma, Scalar};
pub use tonic::Code;
