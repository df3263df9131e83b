//! Put-with-signal: the data and the signal in one pld message, the signal
//! applied after the data at the target, so a PE that sees the signal sees
//! the data. The signal is a symmetric `uint64_t`.

use crate::fatal::fatal;
use crate::job::pe;
use pld_server::NotifyOp;

/// `SHMEM_SIGNAL_SET` / `SHMEM_SIGNAL_ADD`, as shmem.h numbers them.
fn signal_op(call: &'static str, op: i32) -> NotifyOp {
    match op {
        0 => NotifyOp::Set,
        1 => NotifyOp::AtomicAdd,
        _ => fatal(format!(
            "{call}: signal operation {op} is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD"
        )),
    }
}

/// `put_signal` and `put_signal_nbi`: both return once `source` may be
/// reused; the op completes at the next quiet.
///
/// # Safety
/// `source` is valid for `nbytes`; `dest` and `sig_addr` are symmetric.
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_signal(
    call: &'static str,
    dest: *mut u8,
    source: *const u8,
    nbytes: usize,
    sig_addr: *mut u64,
    signal: u64,
    sig_op: i32,
    pe_: i32,
    _nbi: bool,
) {
    let p = pe(call);
    let peer = super::ctx::peer(p, call, pe_);
    let op = signal_op(call, sig_op);
    let at = p.locate(call, dest, nbytes as u64);
    let sig = p.locate_cell(call, sig_addr.cast(), 8);
    // SAFETY: the caller's contract.
    let data = unsafe { std::slice::from_raw_parts(source, nbytes) };
    if let Some(n) = p.near() {
        // Both in the shared heap: the data, then the signal (a release).
        if n.at(peer, sig.0, sig.1, 8).is_some() && n.put(peer, at.0, at.1, data) {
            n.signal(peer, sig.0, sig.1, op, signal);
            return;
        }
    }
    let handle = p.run(
        call,
        p.rank().put_signal_nb(peer, at, data, sig, signal, op),
    );
    super::ctx::issued(call, handle);
}

/// `shmem_signal_fetch`: the local signal's value, read atomically.
///
/// # Safety
/// `sig_addr` is a valid, aligned, symmetric `uint64_t` of this PE.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_signal_fetch(sig_addr: *const u64) -> u64 {
    let p = pe("shmem_signal_fetch");
    p.locate_cell("shmem_signal_fetch", sig_addr.cast(), 8);
    // SAFETY: the caller's contract.
    unsafe { <u64 as super::wait::Watch>::load(sig_addr) }
}

/// `shmem_signal_wait_until`: waits on the local signal; returns the value
/// that satisfied the comparison.
///
/// # Safety
/// As for [`shmem_signal_fetch`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_signal_wait_until(
    sig_addr: *mut u64,
    cmp: i32,
    cmp_value: u64,
) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        super::wait::wait_until("shmem_signal_wait_until", sig_addr, cmp, cmp_value);
        <u64 as super::wait::Watch>::load(sig_addr)
    }
}
