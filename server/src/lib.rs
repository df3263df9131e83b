//! The pld rank engine: window memory and dtype atomics, the QUIC and TCP
//! peer plane, and [`Rank`], the in-process handle that programs embed and
//! that `pld-daemon` (crate `pld-daemon`, with the gRPC client plane and
//! metrics) wraps. No gRPC stack is linked here.
//!
//! ```no_run
//! # async fn demo() -> pld_server::Result<()> {
//! use pld_server::{Config, Rank, Security};
//! let peers = vec!["127.0.0.1:7000".to_string(), "127.0.0.1:7001".to_string()];
//! let mut config = Config::new(0, peers);
//! // Mutual TLS under the cluster CA (`pld-daemon certs --ranks 2 --out certs`).
//! config.security = Security::from_dir("certs".as_ref(), 0)?;
//! let rank = Rank::start(config).await?;
//! let data = rank.window("data")?;
//! rank.put(1, data, 0, b"hello").await?;            // applied at rank 1 on return
//! assert_eq!(&rank.get(1, data, 0, 5).await?[..], b"hello");
//! # Ok(()) }
//! ```

pub mod checked;
pub mod config;
mod deadline;
pub mod error;
mod lent;
mod peer;
pub mod private;
mod rank;
pub mod ratelog;
pub mod rlimit;
pub mod stats;
pub mod tls;
pub mod trace;
pub mod transport;
pub mod window;

pub use checked::CheckedMode;
pub use config::{Config, Progress, TransportKind, WindowConfig};
pub use error::{AccessError, ConfigError, Error, Result, TlsError};
pub use lent::ForeignMemory;
pub use pld_proto::{Cmp, Dtype, Element, NotifyOp, OpKind};
pub use rank::{Chunking, Layout, OpHandle, QuicPath, Rank, Shape, Transfer, WindowId};
pub use stats::StatsSnapshot;
pub use tls::Security;
pub use trace::Trace;
