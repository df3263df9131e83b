//! Setup, query and exit, the symmetric heap's allocation calls, and the
//! 1.3-era names existing programs still use.

use crate::fatal::{fatal, warn};
use crate::heap::MIN_ALIGN;
use crate::job::{init, pe, pe_query};
use crate::pe::Pe;
use std::ffi::{c_char, c_void};

/// `shmem_init`: starts this PE's rank and connects to the others.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_init() {
    init();
}

/// `shmem_init_thread`: pld serves any number of calling threads.
///
/// # Safety
/// `provided` is null or valid for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_init_thread(_requested: i32, provided: *mut i32) -> i32 {
    init();
    // SAFETY: the caller's contract.
    unsafe { shmem_query_thread(provided) };
    0
}

/// `shmem_query_thread`: `SHMEM_THREAD_MULTIPLE`.
///
/// # Safety
/// `provided` is null or valid for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_query_thread(provided: *mut i32) {
    if !provided.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *provided = 3 };
    }
}

/// `shmem_finalize`: quiet, a barrier, then the rank leaves its peers.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_finalize() {
    crate::job::job("shmem_finalize").finalize();
}

/// `shmem_global_exit`: ends the whole job with `status` — this PE exits
/// at once and `pld-oshrun` stops the others.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_global_exit(status: i32) {
    let p = pe("shmem_global_exit");
    // What the program printed goes out before the launcher stops anyone.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: fflush(NULL) flushes every C stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    p.tell_launcher(status);
    // SAFETY: exit flushes the program's stdio and runs its atexit
    // handlers, as the spec's exit does.
    unsafe { libc::exit(status) }
}

/// `shmem_my_pe`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_my_pe() -> i32 {
    pe_query("shmem_my_pe").rank().rank() as i32
}

/// `shmem_n_pes`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_n_pes() -> i32 {
    pe_query("shmem_n_pes").rank().nranks() as i32
}

/// `shmem_pe_accessible`: every PE of the job is.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_pe_accessible(pe_: i32) -> i32 {
    let p = pe("shmem_pe_accessible");
    (pe_ >= 0 && (pe_ as u32) < p.rank().nranks()) as i32
}

/// `shmem_addr_accessible`: whether `addr` is symmetric and `pe` exists.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_addr_accessible(addr: *const c_void, pe_: i32) -> i32 {
    let p = pe("shmem_addr_accessible");
    let symmetric = p
        .try_locate("shmem_addr_accessible", addr.cast(), 1)
        .is_ok();
    (symmetric && shmem_pe_accessible(pe_) == 1) as i32
}

/// `shmem_ptr`: where `dest` on `pe` is in this process — this PE's own
/// symmetric memory, or another PE's heap when the job shares memory
/// (docs/shmem.md); NULL where only the network reaches.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ptr(dest: *const c_void, pe_: i32) -> *mut c_void {
    let p = pe("shmem_ptr");
    match u32::try_from(pe_) {
        Ok(peer) if peer < p.rank().nranks() => pointer_on(p, "shmem_ptr", dest, peer),
        _ => std::ptr::null_mut(),
    }
}

/// Where symmetric `dest` on `peer` is in this process, or NULL.
pub(crate) fn pointer_on(
    p: &crate::pe::Pe,
    call: &'static str,
    dest: *const c_void,
    peer: u32,
) -> *mut c_void {
    let Ok((win, off)) = p.try_locate(call, dest.cast(), 1) else {
        return std::ptr::null_mut();
    };
    if peer == p.rank().rank() {
        return dest.cast_mut();
    }
    p.near()
        .and_then(|n| n.at(peer, win, off, 1))
        .map_or(std::ptr::null_mut(), |a| a.cast())
}

/// `shmem_info_get_version`.
///
/// # Safety
/// Both pointers are valid for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_info_get_version(major: *mut i32, minor: *mut i32) {
    // SAFETY: the caller's contract.
    unsafe {
        *major = 1;
        *minor = 5;
    }
}

/// The vendor string of `shmem_info_get_name` (as `SHMEM_VENDOR_STRING`).
const NAME: &[u8] = b"pld OpenSHMEM (libpld_shmem)\0";

/// `shmem_info_get_name`.
///
/// # Safety
/// `name` has room for `SHMEM_MAX_NAME_LEN` (256) bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_info_get_name(name: *mut c_char) {
    // SAFETY: the caller's contract; NAME is shorter than 256 bytes.
    unsafe { std::ptr::copy_nonoverlapping(NAME.as_ptr().cast(), name, NAME.len()) };
}

/// Allocates on the heap (collective: the same calls on every PE give the
/// same offset); ends with a barrier, as OpenSHMEM's allocation calls do.
fn alloc(call: &'static str, size: usize, align: usize) -> *mut c_void {
    let p = pe(call);
    // OpenSHMEM: a size of 0 does nothing and returns NULL (on every PE,
    // since the call is collective).
    if size == 0 {
        return std::ptr::null_mut();
    }
    let got = p.heap().alloc(size as u64, align as u64);
    let ptr = match got {
        Ok(off) => (p.heap_base() + off as usize) as *mut c_void,
        Err(e) => no_room(format_args!("{call}({size})"), e),
    };
    super::sync::shmem_barrier_all();
    ptr
}

/// An allocation the heap cannot give. A full heap is NULL, as the
/// specification says (the same on every PE: the same calls carve the
/// same heap), with a line naming the call and SHMEM_SYMMETRIC_SIZE, for a
/// program that does not look; a size no heap could hold or a bad
/// alignment is the program's bug, and fatal.
fn no_room(call: std::fmt::Arguments<'_>, e: crate::heap::HeapError) -> *mut c_void {
    if !matches!(e, crate::heap::HeapError::Exhausted { .. }) {
        fatal(format!("{call}: {e}"));
    }
    warn(format!("{call} returns NULL: {e}"));
    std::ptr::null_mut()
}

/// The heap offset of a pointer the heap handed out.
fn offset_of(call: &'static str, p: &Pe, ptr: *mut c_void) -> u64 {
    let base = p.heap_base();
    match (ptr as usize).checked_sub(base) {
        Some(off) if p.heap().len_of(off as u64).is_some() => off as u64,
        _ => fatal(format!(
            "{call}: {ptr:p} is not a pointer shmem_malloc returned ({})",
            p.describe(ptr.cast())
        )),
    }
}

/// `shmem_malloc`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    alloc("shmem_malloc", size, MIN_ALIGN as usize)
}

/// `shmem_malloc_with_hints`: the hints ask for nothing pld does
/// differently.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_malloc_with_hints(size: usize, _hints: i64) -> *mut c_void {
    alloc("shmem_malloc_with_hints", size, MIN_ALIGN as usize)
}

/// `shmem_calloc`: the heap's bytes are zero until written, but a freed
/// block may hold old bytes: zeroed here.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        fatal(format!("shmem_calloc({count}, {size}): the size overflows"));
    };
    let p = pe("shmem_calloc");
    // As shmem_malloc(0): NULL on every PE.
    if total == 0 {
        return std::ptr::null_mut();
    }
    let off = match p.heap().alloc(total as u64, MIN_ALIGN) {
        Ok(off) => off,
        Err(e) => {
            let null = no_room(format_args!("shmem_calloc({count}, {size})"), e);
            super::sync::shmem_barrier_all();
            return null;
        }
    };
    let ptr = (p.heap_base() + off as usize) as *mut u8;
    // SAFETY: the allocation is `total` bytes of this PE's heap window.
    unsafe { std::ptr::write_bytes(ptr, 0, total) };
    super::sync::shmem_barrier_all();
    ptr.cast()
}

/// `shmem_align`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    alloc("shmem_align", size, alignment)
}

/// `shmem_free`: a barrier first (no PE still uses the block), then free.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_free(ptr: *mut c_void) {
    free("shmem_free", ptr);
}

/// Frees the block at `ptr` for `call`: a barrier, then free.
fn free(call: &'static str, ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let p = pe(call);
    let off = offset_of(call, p, ptr);
    super::sync::shmem_barrier_all();
    if let Err(e) = p.heap().free(off) {
        fatal(format!("{call}: {e}"));
    }
}

/// `shmem_realloc`: a new block holding the old one's bytes. As 1.5
/// says: a null `ptr` is `shmem_malloc(size)`, and a size of 0 frees the
/// block and returns NULL.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    if ptr.is_null() {
        return shmem_malloc(size);
    }
    if size == 0 {
        free("shmem_realloc", ptr);
        return std::ptr::null_mut();
    }
    let p = pe("shmem_realloc");
    let off = offset_of("shmem_realloc", p, ptr);
    super::sync::shmem_barrier_all();
    let old = p.heap().len_of(off).unwrap_or(0);
    let new = {
        let mut h = p.heap();
        let new = h.alloc(size as u64, MIN_ALIGN);
        if new.is_ok() {
            let _ = h.free(off);
        }
        new
    };
    // A full heap leaves the block as it was.
    let new = match new {
        Ok(n) => n,
        Err(e) => {
            let null = no_room(format_args!("shmem_realloc({size})"), e);
            super::sync::shmem_barrier_all();
            return null;
        }
    };
    let base = p.heap_base();
    // SAFETY: both blocks are in this PE's heap window; `copy` allows overlap.
    unsafe {
        std::ptr::copy(
            (base + off as usize) as *const u8,
            (base + new as usize) as *mut u8,
            old.min(size as u64) as usize,
        )
    };
    super::sync::shmem_barrier_all();
    (base + new as usize) as *mut c_void
}

/// `start_pes` (OpenSHMEM 1.0): `shmem_init`.
#[unsafe(no_mangle)]
pub extern "C" fn start_pes(_npes: i32) {
    init();
}

/// `_my_pe` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn _my_pe() -> i32 {
    shmem_my_pe()
}

/// `_num_pes` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn _num_pes() -> i32 {
    shmem_n_pes()
}

/// `shmalloc` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn shmalloc(size: usize) -> *mut c_void {
    shmem_malloc(size)
}

/// `shfree` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn shfree(ptr: *mut c_void) {
    shmem_free(ptr)
}

/// `shrealloc` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn shrealloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    shmem_realloc(ptr, size)
}

/// `shmemalign` (OpenSHMEM 1.0).
#[unsafe(no_mangle)]
pub extern "C" fn shmemalign(alignment: usize, size: usize) -> *mut c_void {
    shmem_align(alignment, size)
}

/// What a C11 generic call with a type OpenSHMEM does not take calls (the
/// header's `_Generic` default): a program that compiles with it fails
/// here with a clear message.
#[unsafe(no_mangle)]
pub extern "C" fn pld_shmem_generic_bad_type() {
    fatal("a type-generic OpenSHMEM call was given a type OpenSHMEM does not define it for");
}
