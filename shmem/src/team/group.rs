//! A team, or an active set, as a [`Group`]: the house's collective
//! algorithms (`pld_proto::collective`) run over its members, numbered in
//! team order, with puts queued on pld's links and the team's barrier —
//! a quiet, then the dissemination barrier over its sync cells.

use super::flags::{Flags, Unheard};
use super::mailbox::Mailbox;
use super::sync::{Cells, SyncArea, SyncError};
use super::{CallCell, Team};
use crate::pe::Pe;
use pld_proto::bytes::Bytes;
use pld_proto::collective::{self as coll, Algo, Group, Scratch};
use pld_server::WindowId;

/// Why a collective failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CollError {
    /// An op of the rank failed.
    #[error(transparent)]
    Rank(#[from] pld_server::Error),
    /// The barrier did not complete.
    #[error("the barrier of {team} {0}", team = .1)]
    Sync(SyncError, String),
    /// Members of a one-round collective did not signal in time.
    #[error("{1}: {0}")]
    Unheard(Unheard, String),
    /// The arguments do not fit the collective.
    #[error("{0}")]
    Invalid(String),
}

/// The largest group whose barrier through shared memory runs on its flag
/// cells (`Flags::barrier`: at most two hops, n(n-1) signals at most)
/// rather than the dissemination barrier's ⌈log₂ n⌉ rounds.
pub(crate) const FLAG_BARRIER_MEMBERS: u32 = 16;

/// The members of a team or an active set, seen from this PE.
pub(crate) struct Members<'a> {
    pe: &'a Pe,
    members: &'a [u32],
    me: u32,
    sync: &'a SyncArea,
    name: &'a str,
    /// Every PE of the job, in order, over the network: pld's own barrier
    /// serves. (Through shared memory the team's cells are faster.)
    world: bool,
    /// A team's own scratch (an active set has none).
    scratch: Option<Scratch<WindowId>>,
    /// A team's mailbox (an active set has none).
    mailbox: Option<&'a Mailbox>,
    /// Where this PE describes its calls under `--checked`.
    call: CallCell,
}

impl<'a> Members<'a> {
    /// A team's members.
    pub(crate) fn of(pe: &'a Pe, team: &'a Team) -> Members<'a> {
        Members {
            pe,
            members: &team.members,
            me: team.me,
            sync: &team.sync,
            name: &team.name,
            world: is_world(pe, &team.members),
            scratch: Some(team.scratch),
            mailbox: Some(&team.mailbox),
            call: team.call,
        }
    }

    /// An active set's members, this PE being member `me`, with the
    /// barrier over its `pSync` cells.
    pub(crate) fn active(
        pe: &'a Pe,
        members: &'a [u32],
        me: u32,
        sync: &'a SyncArea,
        name: &'a str,
    ) -> Members<'a> {
        Members {
            pe,
            members,
            me,
            sync,
            name,
            world: is_world(pe, members),
            scratch: None,
            mailbox: None,
            call: CallCell::at(pe, crate::layout::ACTIVE_CALL),
        }
    }

    /// What errors call the team or active set.
    pub(crate) fn name(&self) -> &str {
        self.name
    }

    /// Where this PE describes its collective calls (`agree`).
    pub(crate) fn call_cell(&self) -> CallCell {
        self.call
    }

    /// The global PE of member `i`.
    pub(crate) fn pe_of(&self, i: u32) -> u32 {
        self.members[i as usize]
    }

    /// The team's own scratch, if it has `bytes` of room.
    pub(crate) fn scratch_for(&self, bytes: u64) -> Option<Scratch<WindowId>> {
        self.scratch.filter(|s| bytes <= s.bytes)
    }

    /// The team's mailbox, if it has one.
    pub(crate) fn mailbox(&self) -> Option<&'a Mailbox> {
        self.mailbox
    }

    /// The sync area's cells.
    pub(crate) fn cells(&self) -> Cells {
        self.sync.cells()
    }

    /// The one-round collectives' signals, when the members share their
    /// heaps and fit the cells.
    pub(crate) fn flags(&self) -> Option<Flags<'_>> {
        Flags::new(self.pe.near()?, self.cells(), self.members, self.me)
    }

    /// Waits for a signal from each member in `from` (all others: None)
    /// and takes them, within the job's timeout.
    pub(crate) async fn take(&self, f: &Flags<'_>, from: Option<u32>) -> Result<(), CollError> {
        let timeout = self.pe.sync_timeout();
        match from {
            Some(s) => f.take(&[s], timeout),
            None => f.take_all(timeout),
        }
        .map_err(|e| CollError::Unheard(e, self.name.to_string()))
    }

    /// The members' barrier without the quiet before it: `shmem_team_sync`.
    /// Over the whole job it is pld's own barrier (which quiets too).
    pub(crate) async fn sync_only(&self) -> Result<(), CollError> {
        if self.world {
            return Ok(self.pe.rank().barrier().await?);
        }
        if let Some(f) = self
            .flags()
            .filter(|_| self.nranks() <= FLAG_BARRIER_MEMBERS)
        {
            return f
                .barrier(self.pe.sync_timeout())
                .map_err(|e| CollError::Unheard(e, self.name.to_string()));
        }
        self.sync
            .run(self.pe, self.members, self.me)
            .await
            .map_err(|e| CollError::Sync(e, self.name.to_string()))
    }
}

impl Group for Members<'_> {
    type Error = CollError;
    type Window = WindowId;

    fn rank(&self) -> u32 {
        self.me
    }

    fn nranks(&self) -> u32 {
        self.members.len() as u32
    }

    async fn put(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), CollError> {
        let pe = self.pe_of(peer);
        if self.pe.near().is_some_and(|n| n.put(pe, win, offset, data)) {
            return Ok(());
        }
        Ok(self.pe.rank().put_nbi(pe, win, offset, data).await?)
    }

    async fn get(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, CollError> {
        let pe = self.pe_of(peer);
        if let Some(n) = self.pe.near() {
            let mut out = vec![0u8; len as usize];
            if n.get(pe, win, offset, &mut out) {
                return Ok(Bytes::from(out));
            }
        }
        Ok(self.pe.rank().get(pe, win, offset, len).await?)
    }

    async fn barrier(&self) -> Result<(), CollError> {
        let r = self.pe.rank();
        if self.world {
            return Ok(r.barrier().await?);
        }
        r.quiet_within(self.pe.sync_timeout()).await?;
        self.sync_only().await
    }
}

/// Whether `members` is every PE of the job, in order, and the job runs
/// over the network (through shared memory every team uses its cells).
fn is_world(p: &Pe, members: &[u32]) -> bool {
    p.near().is_none()
        && members.len() as u32 == p.rank().nranks()
        && members.iter().enumerate().all(|(i, m)| *m == i as u32)
}

/// The OR of every parent member's `mask`: which team slots are in use
/// on some member. The house's ring allreduce over the parent, its
/// scratch the parent's count cell.
pub(crate) async fn agree_mask(p: &Pe, parent: &Team, mask: u64) -> Result<u64, CollError> {
    let g = Members::of(p, parent);
    let cells = g.cells();
    let (_, offset) = cells.count();
    let scratch = Scratch {
        window: cells.window,
        base: offset,
        bytes: 8,
    };
    // The scratch is a cell the last collective may still be reading.
    g.barrier().await?;
    let or = coll::allreduce_by(&g, &scratch, &[mask], &|a: u64, b: u64| a | b, Algo::Ring)
        .await
        .map_err(flatten)?;
    Ok(or.first().copied().unwrap_or(mask))
}

/// A house collective's error as ours.
pub(crate) fn flatten(e: coll::Error<CollError>) -> CollError {
    match e {
        coll::Error::Rma(e) => e,
        other => CollError::Invalid(other.to_string()),
    }
}
