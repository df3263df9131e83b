//! Whom a collective runs over: a team by handle, or a 1.4 active set
//! (`PE_start`, `logPE_stride`, `PE_size`) with its `pSync` array, whose
//! barrier lives on the array's cells; and the active-set barrier.

use crate::fatal::fatal;
use crate::job::{Job, job};
use crate::pe::Pe;
use crate::team::flags::ACTIVE_FLAGS;
use crate::team::group::Members;
use crate::team::sync::{Cells, SYNC_CELLS, SyncArea};
use crate::team::{self, Team};
use std::sync::Arc;

/// Where a collective runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    /// A team, by handle.
    Team(usize),
    /// A 1.4 active set (PE_start, logPE_stride, PE_size) and its `pSync`.
    Active((i32, i32, i32), *mut i64),
}

/// The members a call runs over, held for its length.
pub(crate) enum Held {
    /// A team.
    Team(Arc<Team>),
    /// An active set.
    Active {
        /// Its PEs.
        members: Vec<u32>,
        /// This PE's number among them.
        me: u32,
        /// Its barrier over the `pSync` cells.
        sync: Arc<SyncArea>,
        /// What errors call it.
        name: String,
    },
}

impl Held {
    /// The members as a group.
    pub(crate) fn group<'a>(&'a self, p: &'a Pe) -> Members<'a> {
        match self {
            Held::Team(t) => Members::of(p, t),
            Held::Active {
                members,
                me,
                sync,
                name,
            } => Members::active(p, members, *me, sync, name),
        }
    }
}

/// The members of `scope`; `None` for `SHMEM_TEAM_INVALID` (the call then
/// returns nonzero, as the 1.5 collectives do).
pub(crate) fn hold(j: &Job, call: &'static str, scope: Scope) -> Option<Held> {
    let p = j.pe();
    match scope {
        Scope::Team(0) => None,
        Scope::Team(id) => Some(Held::Team(j.team(call, id))),
        Scope::Active(set, psync) => {
            // The whole job: the world team (its barrier and scratch). The
            // set (0, 0, n) is the only one that names it (without the
            // member list, as this is every OSU-style call's path).
            let n = p.rank().nranks();
            if set.0 == 0 && set.1 == 0 && u32::try_from(set.2) == Ok(n) {
                return Some(Held::Team(j.team(call, team::WORLD)));
            }
            let all = members(call, p, set);
            let me = all
                .iter()
                .position(|m| *m == p.rank().rank())
                .unwrap_or_default() as u32;
            let (window, offset) = p.locate(call, psync.cast(), SYNC_CELLS * 8);
            let cells = Cells {
                window,
                offset,
                local: psync as usize,
                base: -1,
                flags: ACTIVE_FLAGS.0,
                flag_cells: ACTIVE_FLAGS.1,
            };
            let n = all.len() as u32;
            let sync = j.active_sync((psync as usize, set.0, set.1, set.2), || {
                SyncArea::new(me, n, cells)
            });
            let name = format!(
                "the active set (PE_start {}, logPE_stride {}, PE_size {}) with pSync {psync:p}",
                set.0, set.1, set.2
            );
            Some(Held::Active {
                members: all,
                me,
                sync,
                name,
            })
        }
    }
}

/// The PEs of an active set: `start`, `start + 2^log_stride`, ...
fn members(call: &'static str, p: &Pe, (start, log_stride, size): (i32, i32, i32)) -> Vec<u32> {
    let n = p.rank().nranks() as i64;
    let stride = 1i64
        .checked_shl(log_stride as u32)
        .filter(|_| (0..31).contains(&log_stride));
    let list: Option<Vec<u32>> = stride.and_then(|stride| {
        (0..size as i64)
            .map(|i| {
                let pe = start as i64 + i * stride;
                (0..n).contains(&pe).then_some(pe as u32)
            })
            .collect()
    });
    match list {
        Some(l) if size > 0 && start >= 0 && l.contains(&p.rank().rank()) => l,
        _ => fatal(format!(
            "{call}: the active set (PE_start {start}, logPE_stride {log_stride}, PE_size {size}) is not a set of this job's {n} PEs that holds PE {}",
            p.rank().rank()
        )),
    }
}

/// A barrier over an active set, over the cells of its `pSync` array:
/// quiet, then the dissemination barrier of its members (pld's own
/// barrier when the set is the whole job).
pub(crate) fn active_barrier(
    call: &'static str,
    set: (i32, i32, i32),
    psync: *mut i64,
    quiet: bool,
) {
    let j = job(call);
    let p = j.pe();
    let Some(held) = hold(j, call, Scope::Active(set, psync)) else {
        return;
    };
    let g = held.group(p);
    match quiet {
        true => p.run(call, pld_proto::collective::Group::barrier(&g)),
        false => p.run(call, g.sync_only()),
    }
}
