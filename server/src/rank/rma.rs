//! The embedded rank as an [`Rma`](pld_proto::Rma): the same program runs
//! against a `Rank` in its process or, through `pld_client::Client`, against
//! a daemon. The trait's methods are the rank's own; `impl_rma!` is the one
//! list of them. A rank tests its own cell at once: `test` is synchronous.

use super::{Rank, WindowId};
use crate::error::Error;

pld_proto::impl_rma!(Rank, Error, WindowId, test: sync);
