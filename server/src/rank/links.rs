//! The origin side's links to every peer, and their replacement when a
//! peer restarts (rejoin).
//!
//! A survivor that accepts a Hello from a rank it knew under another epoch
//! marks a rejoin pending *before* it answers (see `peer::handshake`), so
//! that by the time the restarted rank is ready, every survivor either has
//! its new link or is dialing it; ops to the rank wait for that (up to the
//! op timeout) instead of failing on the dead link.

use crate::peer::link::Link;
use crate::peer::touched::Touched;
use crate::peer::{RankState, handshake};
use crate::transport::Endpoint;
use pld_proto::lock::RwLocked;
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// One slot per rank: `None` for this rank.
#[derive(Debug)]
pub(crate) struct Links {
    slots: Vec<Option<RwLock<Arc<Link>>>>,
}

impl Links {
    pub fn new(links: Vec<Option<Arc<Link>>>) -> Links {
        Links {
            slots: links.into_iter().map(|l| l.map(RwLock::new)).collect(),
        }
    }

    /// `None` if `peer` is no rank; `Some(None)` for this rank.
    pub fn get(&self, peer: u32) -> Option<Option<Arc<Link>>> {
        self.slots
            .get(peer as usize)
            .map(|s| s.as_ref().map(|l| l.read_locked().clone()))
    }

    /// Runs `f` on `peer`'s link in place, without taking a reference to
    /// it; `None` if `peer` is this rank or no rank.
    pub fn with<R>(&self, peer: u32, f: impl FnOnce(&Arc<Link>) -> R) -> Option<R> {
        let slot = self.slots.get(peer as usize)?.as_ref()?;
        Some(f(&slot.read_locked()))
    }

    /// The links that are not idle ([`Link::is_idle`]), among those sent a
    /// request since a quiet last found them idle (`touched`, which this
    /// clears for the idle ones): nothing is allocated when all are idle.
    pub fn busy(&self, touched: &Touched) -> Vec<Arc<Link>> {
        let mut busy = Vec::new();
        for peer in touched.take() {
            // In place: an idle link costs no reference count.
            if let Some(Some(link)) = self.with(peer, |l| (!l.is_idle()).then(|| l.clone())) {
                touched.mark(peer);
                busy.push(link);
            }
        }
        busy
    }

    /// Every peer's current link.
    pub fn all(&self) -> Vec<Arc<Link>> {
        (0..self.slots.len() as u32)
            .filter_map(|p| self.get(p).flatten())
            .collect()
    }

    /// Puts `link` in its peer's slot; returns the link it replaces.
    fn replace(&self, link: Arc<Link>) -> Option<Arc<Link>> {
        let slot = self.slots.get(link.peer as usize)?.as_ref()?;
        let mut s = slot.write_locked();
        Some(std::mem::replace(&mut *s, link))
    }
}

/// How often lost links to peers that did not restart are dialed again
/// (a partition that heals, a peer whose connection broke).
const REDIAL_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Dials every restarted peer the handshake reports, and every peer whose
/// link was lost, and swaps the new link in. Runs for the rank's life; the
/// new links' reader tasks live in its JoinSet.
pub(crate) async fn rejoin_loop(
    state: Arc<RankState>,
    endpoint: Endpoint,
    links: Arc<Links>,
    mut restarted: UnboundedReceiver<u32>,
) {
    let mut readers = JoinSet::new();
    let mut tick = tokio::time::interval(REDIAL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            peer = restarted.recv() => {
                let Some(peer) = peer else { return };
                let deadline = crate::deadline::after(state.config().connect_timeout);
                match handshake::dial(&state, &endpoint, peer, deadline).await {
                    Ok(est) => swap(&state, &links, &mut readers, est),
                    Err(e) => {
                        tracing::warn!(peer, "rank {peer} restarted but cannot be reached: {e}");
                    }
                }
                state.members().rejoin_done(peer);
            }
            _ = tick.tick() => {
                while readers.try_join_next().is_some() {}
                for link in links.all() {
                    let peer = link.peer;
                    if link.lost_reason().is_none() || state.members().rejoining(peer) {
                        continue;
                    }
                    // One quick attempt; the next tick tries again.
                    let deadline = Instant::now() + REDIAL_EVERY;
                    match handshake::dial(&state, &endpoint, peer, deadline).await {
                        Ok(est) => swap(&state, &links, &mut readers, est),
                        Err(e) => tracing::debug!(peer, "rank {peer} still unreachable: {e}"),
                    }
                }
            }
        }
    }
}

/// Puts a new link to `est`'s peer in place of the old one, and queues
/// again what the running barrier sent over the old one.
fn swap(
    state: &Arc<RankState>,
    links: &Links,
    readers: &mut JoinSet<()>,
    est: handshake::Established,
) {
    let (peer, epoch) = (est.peer.rank, est.peer.epoch);
    let (link, reader) = Link::new(state.clone(), est);
    link.spawn_tasks(reader, readers);
    let what = match links.replace(link) {
        Some(old) if old.epoch != epoch => {
            old.fail(format!("rank {peer} restarted (now epoch {epoch})"));
            "rejoined"
        }
        Some(old) => {
            old.fail(format!("rank {peer} has a new link"));
            "is reachable again"
        }
        None => "is linked",
    };
    tracing::warn!(
        rank = state.config().rank,
        peer,
        epoch,
        "rank {peer} {what} with epoch {epoch}: link replaced"
    );
    // What this rank signalled over the old link in the running barrier
    // may be lost with it: a barrier waiting on this peer sends it again
    // now (the peer ignores what it already has).
    state.barrier().resend_to(peer);
}
