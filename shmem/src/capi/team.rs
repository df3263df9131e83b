//! Teams: the queries, `split_strided`, `split_2d`, `translate_pe`,
//! `team_sync`, `team_ptr` and `destroy` (crate::team holds the teams).
//! A team handle is a small number (shmem.h: `SHMEM_TEAM_WORLD` 1,
//! `SHMEM_TEAM_SHARED` 2, `SHMEM_TEAM_INVALID` 0); a call given a handle
//! that is no team of this PE fails naming it.

use crate::fatal::fatal;
use crate::job::{job, pe};
use crate::team::{self, Team, split, strided};
use std::ffi::c_void;
use std::sync::Arc;

/// `shmem_team_config_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TeamConfig {
    /// How many contexts the program will create on the team.
    pub num_contexts: i32,
}

/// `SHMEM_TEAM_NUM_CONTEXTS`: the config mask bit of `num_contexts`.
pub const NUM_CONTEXTS: i64 = 1;

fn lookup(call: &'static str, handle: usize) -> Option<Arc<Team>> {
    match handle {
        0 => None,
        h => Some(job(call).team(call, h)),
    }
}

/// `shmem_team_my_pe`: this PE's number in the team; -1 for
/// `SHMEM_TEAM_INVALID`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_my_pe(team: usize) -> i32 {
    lookup("shmem_team_my_pe", team).map_or(-1, |t| t.me as i32)
}

/// `shmem_team_n_pes`: the team's size; -1 for `SHMEM_TEAM_INVALID`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_n_pes(team: usize) -> i32 {
    lookup("shmem_team_n_pes", team).map_or(-1, |t| t.members.len() as i32)
}

/// `shmem_team_get_config`.
///
/// # Safety
/// `config` is null or valid for a `shmem_team_config_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_get_config(
    team: usize,
    config_mask: i64,
    config: *mut TeamConfig,
) -> i32 {
    let Some(t) = lookup("shmem_team_get_config", team) else {
        return -1;
    };
    if config_mask & NUM_CONTEXTS != 0 && !config.is_null() {
        // SAFETY: the caller's contract.
        unsafe { (*config).num_contexts = t.num_contexts };
    }
    0
}

/// `shmem_team_translate_pe`: `src_pe` of `src_team` as a PE number of
/// `dest_team`; -1 if it is not in it (or either team is invalid).
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_translate_pe(src_team: usize, src_pe: i32, dest_team: usize) -> i32 {
    let call = "shmem_team_translate_pe";
    let (Some(s), Some(d)) = (lookup(call, src_team), lookup(call, dest_team)) else {
        return -1;
    };
    s.pe(src_pe)
        .and_then(|g| d.index_of(g))
        .map_or(-1, |i| i as i32)
}

/// The config a split was given, if its mask names `num_contexts`.
///
/// # Safety
/// `config` is null or valid for a `shmem_team_config_t`.
unsafe fn contexts(config: *const TeamConfig, mask: i64) -> i32 {
    if mask & NUM_CONTEXTS != 0 && !config.is_null() {
        // SAFETY: the caller's contract.
        unsafe { (*config).num_contexts }
    } else {
        0
    }
}

/// Writes a new team's handle (0: `SHMEM_TEAM_INVALID`).
///
/// # Safety
/// `out` is null or valid for a `shmem_team_t`.
unsafe fn give(out: *mut usize, handle: Option<usize>, num_contexts: i32) {
    if let Some(h) = handle {
        job("shmem_team_split").teams().configure(h, num_contexts);
    }
    if !out.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *out = handle.unwrap_or(0) };
    }
}

/// `shmem_team_split_strided`: the parent's members `start`, `start +
/// stride`, ... (`size` of them) form a new team. Collective over the
/// parent; a PE not in the new team gets `SHMEM_TEAM_INVALID`.
///
/// # Safety
/// `config` is null or valid; `new_team` is valid for a `shmem_team_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent: usize,
    start: i32,
    stride: i32,
    size: i32,
    config: *const TeamConfig,
    config_mask: i64,
    new_team: *mut usize,
) -> i32 {
    let call = "shmem_team_split_strided";
    // SAFETY: the caller's contract.
    unsafe { give(new_team, None, 0) };
    let Some(parent) = lookup(call, parent) else {
        return -1;
    };
    let Some(all) = strided(&parent, start, stride, size) else {
        return -1;
    };
    let j = job(call);
    let p = j.pe();
    let mine = all.contains(&p.rank().rank()).then(|| all.clone());
    let what = format!("split of {} from {start} by {stride}", parent.name);
    // Out of team slots: SHMEM_TEAM_INVALID and nonzero, on every PE.
    let Ok(made) = split(p, j.registry(), call, &parent, mine, what) else {
        return -1;
    };
    // SAFETY: the caller's contract.
    unsafe { give(new_team, made, contexts(config, config_mask)) };
    0
}

/// `shmem_team_split_2d`: the parent as a grid `xrange` wide; the x-axis
/// team is this PE's row, the y-axis team its column. Collective over the
/// parent.
///
/// # Safety
/// The configs are null or valid; the team pointers valid.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn shmem_team_split_2d(
    parent: usize,
    xrange: i32,
    xaxis_config: *const TeamConfig,
    xaxis_mask: i64,
    xaxis_team: *mut usize,
    yaxis_config: *const TeamConfig,
    yaxis_mask: i64,
    yaxis_team: *mut usize,
) -> i32 {
    let call = "shmem_team_split_2d";
    // SAFETY: the caller's contract.
    unsafe {
        give(xaxis_team, None, 0);
        give(yaxis_team, None, 0);
    }
    let Some(parent) = lookup(call, parent) else {
        return -1;
    };
    if xrange < 1 {
        return -1;
    }
    let j = job(call);
    let p = j.pe();
    let n = parent.members.len();
    let x = (xrange as usize).min(n);
    let me = parent.me as usize;
    let row: Vec<u32> = (me / x * x..(me / x * x + x).min(n))
        .map(|i| parent.members[i])
        .collect();
    let column: Vec<u32> = (me % x..n).step_by(x).map(|i| parent.members[i]).collect();
    let x_name = format!("x-axis of {}", parent.name);
    let Ok(xs) = split(p, j.registry(), call, &parent, Some(row), x_name) else {
        return -1;
    };
    let y_name = format!("y-axis of {}", parent.name);
    let Ok(ys) = split(p, j.registry(), call, &parent, Some(column), y_name) else {
        if let Some(x) = xs {
            j.teams().remove(x);
        }
        return -1;
    };
    // SAFETY: the caller's contract.
    unsafe {
        give(xaxis_team, xs, contexts(xaxis_config, xaxis_mask));
        give(yaxis_team, ys, contexts(yaxis_config, yaxis_mask));
    }
    0
}

/// `shmem_team_destroy`: this PE leaves the team; its slot is free again.
/// World and shared cannot be destroyed.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_destroy(team: usize) {
    let call = "shmem_team_destroy";
    if team == 0 {
        return;
    }
    if team == team::WORLD || team == team::SHARED {
        fatal(format!(
            "{call}: SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED cannot be destroyed"
        ));
    }
    if job(call).teams().remove(team).is_none() {
        fatal(format!("{call}: {team:#x} is not a team of this PE"));
    }
}

/// `shmem_team_sync`: the team's barrier, without a quiet.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_sync(team: usize) -> i32 {
    let call = "shmem_team_sync";
    let Some(t) = lookup(call, team) else {
        return -1;
    };
    let p = pe(call);
    let g = crate::team::group::Members::of(p, &t);
    p.run(call, g.sync_only());
    0
}

/// `shmem_team_ptr`: as `shmem_ptr`, for member `pe` of the team.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_ptr(team: usize, dest: *const c_void, pe_: i32) -> *mut c_void {
    let call = "shmem_team_ptr";
    let Some(t) = lookup(call, team) else {
        return std::ptr::null_mut();
    };
    match t.pe(pe_) {
        Some(g) => super::setup::pointer_on(pe(call), call, dest, g),
        None => std::ptr::null_mut(),
    }
}
