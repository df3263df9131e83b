//! The peer plane: what a rank says to other ranks, over either transport.
//!
//! - [`state`]: what both sides need of the local rank (config, windows,
//!   counters), each part with its owner: [`barrier`] (the barrier's
//!   driver state), [`members`] (peers' runs, rejoins, refusals),
//!   [`activity`] (spin progress), [`touched`];
//! - [`wire`]: frames on a stream — the reader, the writer, finishing;
//! - [`handshake`]: dialing with retries, accepting, the identity check;
//! - [`touched`]: which links a `quiet` has to look at;
//! - [`link`]: the origin side of one (origin, target) connection — issue
//!   requests (one way: `Link::issue`), queue and write them (its outbox:
//!   small requests issued back to back share a write), match replies by
//!   id, fail everything when the peer is gone;
//! - [`signal`]: which connection carries a barrier signal (the one the
//!   lower rank of a pair dialed, both ways), and what a heard one does;
//! - [`serve`]: the target side — apply requests to the windows in arrival
//!   order ([`apply`]) and answer each ([`replies`]: answers from one read
//!   leave in one write, consecutive acks merged into one cumulative ack).
//!
//! Dependencies run one way: `serve` and `link` use `handshake`, all use
//! `wire` and `state`.

pub(crate) mod activity;
mod apply;
pub(crate) mod barrier;
pub(crate) mod handshake;
pub(crate) mod link;
pub(crate) mod members;
pub(crate) mod replies;
pub(crate) mod serve;
pub(crate) mod served;
pub(crate) mod signal;
pub(crate) mod state;
pub(crate) mod touched;
pub(crate) mod wire;

pub(crate) use members::Refusal;
pub(crate) use state::RankState;
pub(crate) use wire::{FrameReader, ReadError, finish, write_frame};
