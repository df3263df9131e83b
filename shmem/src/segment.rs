//! The executable's writable data (`.data` and `.bss`): OpenSHMEM makes a
//! program's global and static variables symmetric, so they are a window.
//! Found from the program headers of the main program (the first object
//! `dl_iterate_phdr` reports): its writable `PT_LOAD` segment, less the
//! part that becomes read-only after relocation (`PT_GNU_RELRO`).

use std::ops::Range;

/// The main program's writable data: its address range, 8-byte aligned at
/// both ends (inward), and the program's load base (what a link-time
/// address is offset by); `None` if it has none.
pub fn data_segment() -> Option<(Range<usize>, usize)> {
    let mut found: Option<(Range<usize>, usize)> = None;
    // SAFETY: `dl_iterate_phdr` calls `collect` with valid `info` pointers
    // during the call only; `data` is our `found`, alive for the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(collect),
            (&mut found as *mut Option<(Range<usize>, usize)>).cast(),
        )
    };
    found
}

unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `info`; `data` is `data_segment`'s
    // `found`.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Option<(Range<usize>, usize)>>()) };
    // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let base = info.dlpi_addr as usize;
    let range = |h: &libc::Elf64_Phdr| {
        let start = base + h.p_vaddr as usize;
        start..start + h.p_memsz as usize
    };
    let relro = headers
        .iter()
        .find(|h| h.p_type == libc::PT_GNU_RELRO)
        .map(range);
    let segment = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W != 0)
        .map(range)
        .max_by_key(|r| r.len());
    if let Some(mut seg) = segment {
        if let Some(r) = relro
            && r.start <= seg.start
            && r.end > seg.start
        {
            seg.start = r.end.min(seg.end);
        }
        let start = seg.start.div_ceil(8) * 8;
        let end = seg.end / 8 * 8;
        *found = (end > start).then_some((start..end, base));
    }
    // The first object is the main program: stop there.
    1
}
