//! OpenSHMEM teams: `SHMEM_TEAM_WORLD`, `SHMEM_TEAM_SHARED` and the teams
//! split from them. A team is its members (global PEs, in team order),
//! this PE's number among them, and its sync area: [`sync::SYNC_CELLS`]
//! cells in one of the library's slots of reserved heap bytes, the same
//! slot on every member, where its barrier's signals land; then its
//! mailbox (`mailbox`) and its scratch.
//!
//! A split is collective over the parent team: its members agree on a
//! slot that is free on all of them (an OR-reduction of their slot
//! masks), so two teams that share a PE never share cells; teams with no
//! PE in common may share a slot.

pub(crate) mod agree;
pub(crate) mod flags;
pub(crate) mod group;
pub(crate) mod mailbox;
pub(crate) mod sync;

use crate::fatal::fatal;
use crate::layout::{CALL_BYTES, TEAM_BYTES};
use crate::pe::Pe;
use mailbox::Mailbox;
use pld_proto::collective::Scratch;
use pld_server::WindowId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use sync::{Cells, SyncArea};

/// Bytes of one team slot in the reserved heap bytes: its sync cells,
/// its mailbox, its call cell (`agree`), then its scratch.
pub(crate) const SLOT_BYTES: u64 = 16 << 10;
/// The bytes of a slot that hold its sync cells.
const CELL_BYTES: u64 = 1024;
/// The bytes of a slot that hold its mailbox.
const MAILBOX_BYTES: u64 = (7 << 10) - CALL_BYTES as u64;
/// Where in a slot its call cell is.
const CALL_AT: u64 = CELL_BYTES + MAILBOX_BYTES;
/// Where in a slot its scratch is.
const SCRATCH_AT: u64 = CALL_AT + CALL_BYTES as u64;
/// How many teams a PE can belong to at once (world and shared included).
pub(crate) const SLOTS: u32 = (TEAM_BYTES / SLOT_BYTES) as u32;
const _: () = assert!(sync::SYNC_CELLS * 8 <= CELL_BYTES && SLOTS <= 64);

/// `SHMEM_TEAM_WORLD`'s handle (shmem.h defines the same numbers).
pub(crate) const WORLD: usize = 1;
/// `SHMEM_TEAM_SHARED`'s handle.
pub(crate) const SHARED: usize = 2;

/// One team this PE belongs to.
pub(crate) struct Team {
    /// Its handle.
    pub id: usize,
    /// The members, as global PE numbers, in team order.
    pub members: Vec<u32>,
    /// This PE's number in the team.
    pub me: u32,
    /// Its slot of reserved heap bytes.
    pub slot: u32,
    /// `shmem_team_config_t.num_contexts` as created.
    pub num_contexts: i32,
    /// What errors call it.
    pub name: String,
    /// Its barrier.
    pub sync: SyncArea,
    /// Its scratch: where a small collective works (the house's
    /// algorithms end with a barrier, so the next one may reuse it).
    pub scratch: Scratch<WindowId>,
    /// Where a small reduction through shared memory pushes `source`.
    pub mailbox: Mailbox,
    /// Where this PE describes its collective calls under `--checked`.
    pub call: CallCell,
}

/// Where a member keeps the description of its current collective call,
/// for the others to read (`agree`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallCell {
    /// The heap window.
    pub window: WindowId,
    /// Its offset, the same on every member.
    pub offset: u64,
    /// Its address here.
    pub local: usize,
}

impl CallCell {
    /// The cell at heap offset `offset` of this PE.
    pub(crate) fn at(p: &Pe, offset: u64) -> CallCell {
        CallCell {
            window: p.heap_window(),
            offset,
            local: p.heap_base() + offset as usize,
        }
    }
}

impl Team {
    /// The team of `members` (holding this PE) in `slot`.
    fn new(p: &Pe, id: usize, members: Vec<u32>, slot: u32, name: String) -> Team {
        let me = members
            .iter()
            .position(|m| *m == p.rank().rank())
            .unwrap_or_else(|| fatal(format!("{name} does not hold this PE")))
            as u32;
        let offset = slot as u64 * SLOT_BYTES;
        let cells = Cells {
            window: p.heap_window(),
            offset,
            local: p.heap_base() + offset as usize,
            base: 0,
            flags: flags::team_flags(CELL_BYTES).0,
            flag_cells: flags::team_flags(CELL_BYTES).1,
        };
        let sync = SyncArea::new(me, members.len() as u32, cells);
        let mailbox = Mailbox::new(offset + CELL_BYTES, MAILBOX_BYTES);
        let scratch = Scratch {
            window: p.heap_window(),
            base: offset + SCRATCH_AT,
            bytes: SLOT_BYTES - SCRATCH_AT,
        };
        Team {
            scratch,
            mailbox,
            call: CallCell::at(p, offset + CALL_AT),
            id,
            members,
            me,
            slot,
            num_contexts: 0,
            name,
            sync,
        }
    }

    /// Member `i`'s global PE number, if there is one.
    pub(crate) fn pe(&self, i: i32) -> Option<u32> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.members.get(i).copied())
    }

    /// The team number of global PE `pe`, if it is a member.
    pub(crate) fn index_of(&self, pe: u32) -> Option<u32> {
        self.members.iter().position(|m| *m == pe).map(|i| i as u32)
    }
}

/// The teams this PE belongs to, by handle, and the slots they hold.
#[derive(Default)]
pub(crate) struct Teams {
    map: HashMap<usize, Arc<Team>>,
    next: usize,
    slots: u64,
}

impl Teams {
    /// World and shared, made at `shmem_init`.
    pub(crate) fn start(p: &Pe, shared: Vec<u32>) -> Teams {
        let world: Vec<u32> = (0..p.rank().nranks()).collect();
        let mut t = Teams {
            next: SHARED + 1,
            ..Teams::default()
        };
        t.insert(Team::new(p, WORLD, world, 0, "SHMEM_TEAM_WORLD".into()));
        t.insert(Team::new(p, SHARED, shared, 1, "SHMEM_TEAM_SHARED".into()));
        t
    }

    fn insert(&mut self, team: Team) {
        self.slots |= 1 << team.slot;
        self.map.insert(team.id, Arc::new(team));
    }

    /// The team of handle `id`.
    pub(crate) fn get(&self, id: usize) -> Option<Arc<Team>> {
        self.map.get(&id).cloned()
    }

    /// The slots in use here, as a mask.
    pub(crate) fn used(&self) -> u64 {
        self.slots
    }

    /// Adds a team in `slot`; returns its handle.
    pub(crate) fn add(&mut self, p: &Pe, members: Vec<u32>, slot: u32, name: String) -> usize {
        let id = self.next;
        self.next += 1;
        let mut team = Team::new(p, id, members, slot, name.replace("{id}", &id.to_string()));
        team.num_contexts = 0;
        self.insert(team);
        id
    }

    /// Sets a team's `num_contexts`.
    pub(crate) fn configure(&mut self, id: usize, num_contexts: i32) {
        if let Some(t) = self.map.get_mut(&id).and_then(Arc::get_mut) {
            t.num_contexts = num_contexts;
        }
    }

    /// Removes a team (not world or shared); its slot is free again.
    pub(crate) fn remove(&mut self, id: usize) -> Option<Arc<Team>> {
        if id == WORLD || id == SHARED {
            return None;
        }
        let t = self.map.remove(&id)?;
        self.slots &= !(1 << t.slot);
        Some(t)
    }
}

/// Splits `parent`: every member of the parent calls it with its own
/// `mine` (the members of the team it joins, or `None`); returns the new
/// team's handle, or `None` where `mine` is. Collective over the parent;
/// `Err` (on every parent member alike) when no slot is free on all of
/// them: a PE belongs to [`SLOTS`] teams at most.
pub(crate) fn split(
    p: &Pe,
    teams: &Registry,
    call: &'static str,
    parent: &Team,
    mine: Option<Vec<u32>>,
    what: String,
) -> Result<Option<usize>, NoSlot> {
    let used = lock(teams).used();
    let all = p.run(call, group::agree_mask(p, parent, used));
    let Some(slot) = (0..SLOTS).find(|s| all & (1 << s) == 0) else {
        return Err(NoSlot);
    };
    let Some(members) = mine else {
        return Ok(None);
    };
    let name = format!(
        "team {{id}} ({what}: PEs {})",
        pld_proto::barrier::join(&members)
    );
    Ok(Some(lock(teams).add(p, members, slot, name)))
}

/// No team slot is free on every member of the parent.
#[derive(Debug)]
pub(crate) struct NoSlot;

/// The members of a team to be: `size` parent members from `start`,
/// `stride` apart, as global PEs; `None` if they are not all members.
pub(crate) fn strided(parent: &Team, start: i32, stride: i32, size: i32) -> Option<Vec<u32>> {
    if size < 1 || start < 0 || (stride < 1 && size > 1) {
        return None;
    }
    (0..size as i64)
        .map(|i| {
            let idx = start as i64 + i * stride as i64;
            i32::try_from(idx).ok().and_then(|i| parent.pe(i))
        })
        .collect()
}

/// The registry as the job holds it.
pub(crate) type Registry = Mutex<Teams>;

fn lock(teams: &Registry) -> std::sync::MutexGuard<'_, Teams> {
    teams.lock().unwrap_or_else(|p| p.into_inner())
}
