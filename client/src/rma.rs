//! The client as an [`Rma`](pld_proto::Rma): a program written against the
//! trait runs through a daemon exactly as it runs on an embedded rank. The
//! trait's methods are the client's own (see `ops.rs`); `impl_rma!` is the
//! one list of them.

use crate::client::{Client, WindowId};
use crate::error::Error;

pld_proto::impl_rma!(Client, Error, WindowId, test: async);
