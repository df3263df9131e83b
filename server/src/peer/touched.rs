//! The links a `quiet` has to look at: one flag per peer, set when this
//! rank issues a request to it, cleared by a `quiet` that then finds its
//! link idle.
//!
//! Without it every `quiet` (and every barrier, whose first step is one)
//! looked at every link: two locks and a read lock on P − 1 links, each on
//! cache lines of its own — locks and cache misses per link, O(P) for a
//! program that only ever talks to its neighbours (docs/PERFORMANCE.md).
//! With it, a quiet reads P − 1 flags from one array and looks only at the
//! links that were sent something since.
//!
//! # Why no issued op is missed
//!
//! A link is busy ([`Link::is_idle`](crate::peer::link::Link::is_idle) is
//! false) from the moment its op table or its outbox takes a request. The
//! issuer sets the flag *after* that, having released the op table's lock;
//! a quiet clears the flag *before* it takes those locks to look. So for
//! one request and one quiet, either
//! - the issuer's locked section came first: the quiet's look sees the
//!   request and sets the flag again; or
//! - the quiet's look came first: its clearing happened before the
//!   issuer's section (the lock orders them), so the issuer's check of the
//!   flag sees it clear and sets it.
//!
//! Either way a busy link keeps its flag, and a request issued before a
//! quiet is seen by it (its flag was set before the call). Setting a flag
//! that is already set is a plain load: the common case of many ops to one
//! peer costs no atomic write.

use std::sync::atomic::{AtomicBool, Ordering};

/// One flag per rank (this rank's own stays clear).
#[derive(Debug)]
pub(crate) struct Touched {
    peers: Box<[AtomicBool]>,
}

impl Touched {
    /// `nranks` clear flags.
    pub fn new(nranks: usize) -> Touched {
        Touched {
            peers: (0..nranks).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Marks `peer` as sent a request since the last quiet that found its
    /// link idle. Called after the request is in the link's op table or
    /// outbox (see the module docs).
    #[inline]
    pub fn mark(&self, peer: u32) {
        if let Some(flag) = self.peers.get(peer as usize)
            && !flag.load(Ordering::Acquire)
        {
            flag.store(true, Ordering::Release);
        }
    }

    /// Clears every set flag and returns those peers, in rank order; the
    /// caller looks at each one's link and marks the busy ones again.
    pub fn take(&self) -> impl Iterator<Item = u32> + '_ {
        self.peers.iter().enumerate().filter_map(|(peer, flag)| {
            (flag.load(Ordering::Relaxed) && flag.swap(false, Ordering::AcqRel))
                .then_some(peer as u32)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_takes_only_the_peers_marked_since_the_last_one() {
        let t = Touched::new(8);
        assert_eq!(t.take().count(), 0);
        t.mark(5);
        t.mark(2);
        t.mark(5);
        assert_eq!(t.take().collect::<Vec<_>>(), [2, 5]);
        assert_eq!(t.take().count(), 0, "taking clears the flags");
    }

    #[test]
    fn a_peer_that_is_no_rank_is_ignored() {
        let t = Touched::new(2);
        t.mark(7);
        assert_eq!(t.take().count(), 0);
    }
}
