//! Ordering and barriers: `fence`, `quiet`, `barrier_all`, `sync_all`,
//! and the 1.3 active-set `shmem_barrier`.

use crate::job::pe;
use crate::pe::Pe;

/// `shmem_fence`: a pld link applies one PE's ops to another in issue
/// order, so puts, atomics and signals after the fence already land after
/// those before it.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_fence() {
    fence(pe("shmem_fence"), "shmem_fence");
}

/// A fence: free over pld's links alone; with shared memory, an op that
/// went over a link (the data segment's) must land before one after the
/// fence that goes through memory, so the links are quieted.
pub(crate) fn fence(p: &Pe, call: &'static str) {
    if p.near().is_some() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        p.run(call, p.rank().quiet_within(p.sync_timeout()));
    }
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
    world_barrier(p, "shmem_barrier_all");
}

/// The barrier of every PE: pld's own over the network, the world team's
/// cells through shared memory.
fn world_barrier(p: &Pe, call: &'static str) {
    if p.near().is_none() {
        return p.run(call, p.rank().barrier());
    }
    let world = crate::job::job(call).team(call, crate::team::WORLD);
    let g = crate::team::group::Members::of(p, &world);
    p.run(call, g.sync_only());
}

/// `shmem_sync_all`: the barrier without the quiet.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_sync_all() {
    let p = pe("shmem_sync_all");
    world_barrier(p, "shmem_sync_all");
}

/// `shmem_barrier`: the 1.4 active-set barrier (quiet, then the barrier).
///
/// # Safety
/// `psync` is a symmetric array of `SHMEM_BARRIER_SYNC_SIZE` longs, each
/// `SHMEM_SYNC_VALUE`, that no other collective uses at the same time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_barrier(
    pe_start: i32,
    log_pe_stride: i32,
    pe_size: i32,
    psync: *mut i64,
) {
    crate::coll::active_barrier(
        "shmem_barrier",
        (pe_start, log_pe_stride, pe_size),
        psync,
        true,
    );
}

/// `shmem_sync`: the active-set barrier without the quiet.
///
/// # Safety
/// As for [`shmem_barrier`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_sync(
    pe_start: i32,
    log_pe_stride: i32,
    pe_size: i32,
    psync: *mut i64,
) {
    crate::coll::active_barrier(
        "shmem_sync",
        (pe_start, log_pe_stride, pe_size),
        psync,
        false,
    );
}
