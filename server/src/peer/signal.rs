//! Barrier signals: the connection that carries them, and what a rank does
//! with one it hears.
//!
//! Two ranks share two connections, one dialed by each: a request travels
//! on its origin's link and is answered on it, so a link carries data both
//! ways. A barrier signal is one-way. Sent on its sender's link, each of a
//! pair's signals would travel on a connection that carries data one way
//! only, and TCP then acknowledges it with a packet of its own (Linux: at
//! least every second small segment, at once, from the receiver's `recv`),
//! where data going the other way carries the acknowledgement for free. On
//! loopback that packet costs the receiving rank a transmit and the sending
//! rank a receive, each through the whole stack: two processes exchanging
//! small messages over a connection each way take markedly longer than
//! over one connection both ways (`scripts/pair-exchange.c`;
//! docs/PERFORMANCE.md, "Why the code is shaped so").
//!
//! So a pair's signals go both ways on the connection the *lower* rank of
//! the two dialed: the lower rank signals on its link, the higher one on
//! its served connection from the lower ([`Served`] holds the write side
//! of each), and each hears the other where it writes. The path is only a
//! preference: until the lower rank has dialed, after the connection
//! broke, or while the peer rejoins, the higher rank signals on its own
//! link, and a rank hears signals on either connection — the barrier's
//! state machine takes each once, in any order.
//!
//! In round k rank r signals r + 2^k and hears r − 2^k, so at larger P
//! most pairs still signal one way only (at a power of two, both ways only
//! in the last round), and the saving is largest at small P (TCP segments
//! per barrier in docs/PERFORMANCE.md).

use super::RankState;
use pld_proto::MsgKind;
use pld_proto::v1::Header;
use tokio::time::Instant;

/// Sends `header` on the served connection of peer `to` if this rank is
/// the higher one and that connection is to the peer's run `epoch`;
/// whether it did.
pub(crate) async fn send_served(
    state: &RankState,
    header: &Header,
    to: u32,
    epoch: u64,
    deadline: Instant,
) -> bool {
    let Some(w) = (to < state.config().rank)
        .then(|| state.barrier().served_to(to))
        .flatten()
        .filter(|w| w.epoch == epoch)
    else {
        return false;
    };
    match tokio::time::timeout_at(deadline, w.signal(header)).await {
        Ok(Some(Ok(n))) => {
            state.stats().sent(MsgKind::Barrier, n);
            state.activity().touch();
            return true;
        }
        Ok(None) => tracing::debug!(to, "barrier signal: the served connection is busy"),
        Ok(Some(Err(e))) => {
            tracing::debug!(to, error = %e, "barrier signal: the served connection failed")
        }
        Err(_) => tracing::debug!(to, "barrier signal: the served connection made no progress"),
    }
    false
}
