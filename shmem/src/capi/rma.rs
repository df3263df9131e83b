//! put, get, p, g, iput, iget and their `_nbi` forms. A put returns once
//! its source may be reused (OpenSHMEM's local completion): pld copies it
//! into the link's outbox, and `quiet` (or a barrier) completes it at the
//! target. A get returns with the bytes.

use super::ctx;
use crate::job::pe;
use crate::pe::Deferred;
use pld_server::{Chunking, Dtype, Layout, Shape, Transfer};

/// Moves `nbytes` from `source` (local) into `dest` (symmetric) on `pe`.
///
/// # Safety
/// `source` is valid for `nbytes` bytes.
pub unsafe fn put(
    call: &'static str,
    dest: *mut u8,
    source: *const u8,
    nbytes: usize,
    pe_: i32,
    _nbi: bool,
) {
    let p = pe(call);
    let peer = ctx::peer(p, call, pe_);
    if nbytes == 0 {
        return;
    }
    let (win, off) = p.locate(call, dest, nbytes as u64);
    // SAFETY: the caller's contract.
    let data = unsafe { std::slice::from_raw_parts(source, nbytes) };
    if p.near().is_some_and(|n| n.put(peer, win, off, data)) {
        return;
    }
    if ctx::tracking() {
        let handle = p.run(call, p.rank().put_nb(peer, win, off, data));
        ctx::issued(call, handle);
    } else {
        p.run(call, p.rank().put_nbi(peer, win, off, data));
    }
}

/// Moves `nbytes` from `source` (symmetric) on `pe` into `dest` (local).
/// Blocking unless `nbi`; an `_nbi` get into symmetric memory lands there
/// by the next quiet, one into private memory is copied there at it.
///
/// # Safety
/// `dest` is valid for `nbytes` bytes.
pub unsafe fn get(
    call: &'static str,
    dest: *mut u8,
    source: *const u8,
    nbytes: usize,
    pe_: i32,
    nbi: bool,
) {
    let p = pe(call);
    let peer = ctx::peer(p, call, pe_);
    if nbytes == 0 {
        return;
    }
    let (win, off) = p.locate(call, source, nbytes as u64);
    if let Some(n) = p.near() {
        // SAFETY: the caller's contract.
        let out = unsafe { std::slice::from_raw_parts_mut(dest, nbytes) };
        if n.get(peer, win, off, out) {
            return;
        }
    }
    let rank = p.rank();
    if nbi {
        if let (false, Ok((dwin, doff))) =
            (ctx::tracking(), p.try_locate(call, dest, nbytes as u64))
        {
            p.run(
                call,
                rank.get_nbi(peer, win, off, nbytes as u64, dwin, doff),
            );
        } else {
            let handle = p.run(call, rank.get_nb(peer, win, off, nbytes as u64));
            ctx::defer(
                p,
                Deferred::Bytes {
                    handle,
                    to: dest as usize,
                },
            );
        }
        return;
    }
    let bytes = p.run(call, rank.get(peer, win, off, nbytes as u64));
    // SAFETY: the caller's contract; `bytes` holds exactly `nbytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dest, nbytes) };
}

/// `shmem_T_p`: one element.
///
/// # Safety
/// As for [`put`].
pub unsafe fn p<T: Copy>(call: &'static str, dest: *mut T, value: T, pe_: i32) {
    // SAFETY: `value` is a local of `size_of::<T>()` bytes.
    unsafe {
        put(
            call,
            dest.cast(),
            (&raw const value).cast(),
            size_of::<T>(),
            pe_,
            false,
        )
    }
}

/// `shmem_T_g`: one element.
///
/// # Safety
/// As for [`get`].
pub unsafe fn g<T: Copy>(call: &'static str, source: *const T, pe_: i32) -> T {
    let mut v = std::mem::MaybeUninit::<T>::uninit();
    // SAFETY: `v` has room for one `T`, which the get fills.
    unsafe {
        get(
            call,
            v.as_mut_ptr().cast(),
            source.cast(),
            size_of::<T>(),
            pe_,
            false,
        );
        v.assume_init()
    }
}

/// The bytes that `nelems` (at least 1) elements of `size` bytes, `stride`
/// elements apart, span from the first's start to the last's end — or,
/// where that overflows (an address space holds at most `isize::MAX`
/// bytes), the PE ends naming the call and its arguments: a wrapped span
/// would pass the bounds check and write outside it.
fn strided_span(call: &'static str, side: &str, nelems: usize, stride: usize, size: usize) -> u64 {
    let span = (nelems - 1)
        .checked_mul(stride)
        .and_then(|e| e.checked_add(1))
        .and_then(|e| e.checked_mul(size))
        .filter(|&b| isize::try_from(b).is_ok());
    match span {
        Some(b) => b as u64,
        None => crate::fatal::fatal(format!(
            "{call}: {nelems} elements of {size} bytes at a {side} stride of {stride} span more bytes than an address space holds"
        )),
    }
}

/// A stride as OpenSHMEM gives it (`ptrdiff_t`, in elements): positive.
fn positive(call: &'static str, side: &str, stride: isize) -> usize {
    match usize::try_from(stride) {
        Ok(0) => crate::fatal::fatal(format!(
            "{call}: {side} stride 0 (each element would land on the same place)"
        )),
        Ok(s) => s,
        Err(_) => crate::fatal::fatal(format!("{call}: {side} stride {stride} is not positive")),
    }
}

/// A strided side: `stride` elements of `size` bytes between consecutive
/// elements. pld's regions are 2-D: `nelems` rows of one element each,
/// `stride` elements apart. The caller has checked the span
/// ([`strided_span`]), so no figure here overflows.
fn region(size: usize, stride: usize, nelems: usize) -> Transfer {
    let dtype = match size {
        1 => Dtype::Int8,
        2 => Dtype::Int16,
        4 => Dtype::Int32,
        _ => Dtype::Int64,
    };
    let per = (size / dtype.size()) as u64;
    let layout = |s: u64| Layout {
        offset: 0,
        row_stride: s.saturating_mul(per),
    };
    Transfer {
        dtype,
        shape: Shape {
            rows: nelems as u64,
            cols: per,
        },
        src: layout(1),
        dst: layout(stride as u64),
    }
}

/// A strided target's offset in elements: its address must be aligned to
/// the element's size, as OpenSHMEM requires of typed pointers.
fn element_offset(call: &'static str, off: u64, dtype: Dtype) -> u64 {
    let size = dtype.size() as u64;
    if off % size != 0 {
        crate::fatal::fatal(format!(
            "{call}: the symmetric address is not aligned to its {size}-byte elements (offset {off})"
        ));
    }
    off / size
}

/// `shmem_iput`: element `i` of `source` (at stride `sst`) to element `i`
/// of `dest` (at stride `dst`) on `pe`, as one 2-D region.
///
/// # Safety
/// `source` is valid for `nelems` elements at stride `sst`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iput(
    call: &'static str,
    dest: *mut u8,
    source: *const u8,
    dst: isize,
    sst: isize,
    nelems: usize,
    size: usize,
    pe_: i32,
) {
    let p = pe(call);
    let peer = ctx::peer(p, call, pe_);
    if nelems == 0 {
        return;
    }
    let dst = positive(call, "destination", dst);
    let sst = positive(call, "source", sst);
    let span = strided_span(call, "destination", nelems, dst, size);
    // The source is this process's memory: the caller's, but its span
    // must not wrap either.
    strided_span(call, "source", nelems, sst, size);
    let mut t = region(size, dst, nelems);
    let (win, off) = p.locate(call, dest, span);
    // Packed locally: the source's stride is ours to gather.
    let mut packed = Vec::with_capacity(nelems * size);
    for i in 0..nelems {
        // SAFETY: the caller's contract: element i lies at i * sst, which
        // strided_span checked does not overflow.
        let e = unsafe { std::slice::from_raw_parts(source.add(i * sst * size), size) };
        packed.extend_from_slice(e);
    }
    if let Some(to) = p.near().and_then(|n| n.at(peer, win, off, span)) {
        let step = dst * size;
        for (i, e) in packed.chunks_exact(size).enumerate() {
            // SAFETY: element i of the destination lies at i * step inside
            // the span `at` checked.
            unsafe { std::ptr::copy(e.as_ptr(), to.add(i * step), size) };
        }
        if let Some(n) = p.near() {
            n.ring(peer);
        }
        return;
    }
    t.dst.offset = off / t.dtype.size() as u64;
    p.run(
        call,
        p.rank()
            .put_region(peer, win, &t, &packed, Chunking::default()),
    );
}

/// `shmem_iget`: element `i` of `source` (stride `sst`) on `pe` to element
/// `i` of `dest` (stride `dst`).
///
/// # Safety
/// `dest` is valid for `nelems` elements at stride `dst`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iget(
    call: &'static str,
    dest: *mut u8,
    source: *const u8,
    dst: isize,
    sst: isize,
    nelems: usize,
    size: usize,
    pe_: i32,
) {
    let p = pe(call);
    let peer = ctx::peer(p, call, pe_);
    if nelems == 0 {
        return;
    }
    let sst = positive(call, "source", sst);
    let dst = positive(call, "destination", dst);
    let span = strided_span(call, "source", nelems, sst, size);
    strided_span(call, "destination", nelems, dst, size);
    let t0 = region(size, sst, nelems);
    // The remote side is the source: swap the layouts.
    let mut t = Transfer {
        src: t0.dst,
        dst: t0.src,
        ..t0
    };
    let (win, off) = p.locate(call, source, span);
    t.src.offset = element_offset(call, off, t.dtype);
    let mut packed = vec![0u8; nelems * size];
    if let Some(from) = p.near().and_then(|n| n.at(peer, win, off, span)) {
        let step = sst * size;
        for (i, e) in packed.chunks_exact_mut(size).enumerate() {
            // SAFETY: element i of the source lies at i * step inside the
            // span `at` checked.
            unsafe { std::ptr::copy(from.add(i * step), e.as_mut_ptr(), size) };
        }
    } else {
        p.run(
            call,
            p.rank()
                .get_region(peer, win, &t, &mut packed, Chunking::default()),
        );
    }
    for (i, e) in packed.chunks_exact(size).enumerate() {
        // SAFETY: the caller's contract: element i lies at i * dst.
        unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), dest.add(i * dst * size), size) };
    }
}
