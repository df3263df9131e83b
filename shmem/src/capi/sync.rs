//! Ordering and barriers: `fence`, `quiet`, `barrier_all`, `sync_all`,
//! and the 1.3 active-set `shmem_barrier`.

use crate::pe::{Pe, RESERVED, fatal, pe};
use pld_proto::Dtype;

/// `shmem_fence`: a pld link applies one PE's ops to another in issue
/// order, so puts, atomics and signals after the fence already land after
/// those before it.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_fence() {
    pe("shmem_fence");
}

/// `shmem_quiet`: every put, atomic and signal this PE issued is complete
/// at its target, and every deferred fetch has landed.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_quiet() {
    pe("shmem_quiet").quiet("shmem_quiet");
}

/// `shmem_barrier_all`: quiet, then pld's dissemination barrier (which
/// names the PEs that did not arrive when it times out).
#[unsafe(no_mangle)]
pub extern "C" fn shmem_barrier_all() {
    let p = pe("shmem_barrier_all");
    p.quiet("shmem_barrier_all");
    p.run("shmem_barrier_all", p.rank().barrier());
}

/// `shmem_sync_all`: the barrier without the quiet.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_sync_all() {
    let p = pe("shmem_sync_all");
    p.run("shmem_sync_all", p.rank().barrier());
}

/// The PEs of an active set: `start`, `start + 2^log_stride`, ...
pub(crate) fn members(
    call: &'static str,
    p: &Pe,
    (start, log_stride, size): (i32, i32, i32),
) -> Vec<u32> {
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

/// The cell of the library's reserved heap bytes where the root of an
/// active set counts arrivals (one 8-byte cell per root PE's slot).
const ARRIVALS: u64 = 0;
/// Where each member learns the root released it.
const RELEASE: u64 = 8 * 1024;

/// A barrier over an active set: the whole job is pld's barrier; a subset
/// gathers at its first PE (an atomic add each) and is released by it (a
/// put to each), over cells the library keeps at the start of the heap.
pub(crate) fn active_barrier(call: &'static str, p: &Pe, set: (i32, i32, i32)) {
    let all = members(call, p, set);
    p.quiet(call);
    if all.len() as u32 == p.rank().nranks() {
        p.run(call, p.rank().barrier());
        return;
    }
    let epoch = p.next_epoch(set);
    let heap = p
        .rank()
        .window(crate::pe::HEAP_WINDOW)
        .unwrap_or_else(|e| fatal(e));
    let root = all[0];
    let me = p.rank().rank();
    let slot = (set.0 as u64 * 31 + set.1 as u64 * 7 + set.2 as u64) % (RELEASE / 8);
    let arrive = ARRIVALS + slot * 8;
    let release = RELEASE + (slot % ((RESERVED - RELEASE) / 8)) * 8;
    let rank = p.rank();
    if me == root {
        let want = epoch as i64 * (all.len() as i64 - 1);
        let cell = (p.heap_base() + arrive as usize) as *mut i64;
        // SAFETY: the cell is in the library's reserved heap bytes.
        unsafe { super::wait::wait_until(call, cell, 5, want) };
        for &m in &all[1..] {
            p.run(call, rank.set(m, heap, release, Dtype::Int64, epoch as i64));
        }
    } else {
        p.run(
            call,
            rank.atomic_add(root, heap, arrive, Dtype::Int64, &1i64.to_le_bytes()),
        );
        let cell = (p.heap_base() + release as usize) as *mut i64;
        // SAFETY: as above.
        unsafe { super::wait::wait_until(call, cell, 5, epoch as i64) };
    }
}

/// `shmem_barrier`: the 1.3 active-set barrier.
///
/// # Safety
/// `psync` is unused (pld keeps its own cells).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_barrier(
    pe_start: i32,
    log_pe_stride: i32,
    pe_size: i32,
    _psync: *mut i64,
) {
    let p = pe("shmem_barrier");
    active_barrier("shmem_barrier", p, (pe_start, log_pe_stride, pe_size));
}
