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

/// The part of the data segment that lives in a memory file, so that the
/// other PEs of this host can map it as they map the heap.
#[derive(Debug)]
pub struct SharedData {
    /// The memory file.
    pub file: std::os::fd::OwnedFd,
    /// Its inode, which a PE that opens it through `/proc` checks.
    pub ino: u64,
    /// Where in the data window the file's first byte is: the bytes
    /// before the first whole page stay private (reached over the link).
    pub head: u64,
    /// The file's length: whole pages.
    pub len: u64,
}

/// Moves the whole pages of the data segment `range` into a memory file,
/// mapped shared at the same addresses with the same contents, so that the
/// other PEs of this host can map them (`near`). Only while no other
/// thread writes the segment: `shmem_init`, before the PE starts its
/// runtime. Err says why not; the segment then stays private.
pub fn share(range: &Range<usize>) -> Result<SharedData, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| p.is_power_of_two())
        .ok_or("no page size")?;
    let start = range.start.div_ceil(page) * page;
    let end = range.end.div_ceil(page) * page;
    if start >= end {
        return Err("no whole page of data".into());
    }
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    if !private_writable(&maps, start..end) {
        return Err(format!(
            "{start:#x}..{end:#x} is not all private writable memory"
        ));
    }
    let len = end - start;
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor it
    // returns is ours alone.
    let fd = unsafe { libc::memfd_create(c"pld-shmem-data".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os("memfd_create"));
    }
    // SAFETY: `fd` was just created and is owned here.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fstat into a zeroed struct, on our own descriptor.
    let ino = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(file.as_raw_fd(), &mut st) != 0 {
            return Err(os("fstat"));
        }
        st.st_ino
    };
    let mut done = 0;
    while done < len {
        // SAFETY: writes from the segment's own pages, readable (checked
        // above), into our memory file.
        let n = unsafe {
            libc::pwrite(
                file.as_raw_fd(),
                (start + done) as *const libc::c_void,
                len - done,
                done as libc::off_t,
            )
        };
        if n <= 0 {
            return Err(os("copying the data segment"));
        }
        done += n as usize;
    }
    // SAFETY: replaces the segment's whole pages (checked above to be the
    // process's private writable memory) with the file, which holds the
    // same bytes; no other thread writes them meanwhile (the caller's
    // contract), so the program sees no change.
    let q = unsafe {
        libc::mmap(
            start as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if q == libc::MAP_FAILED {
        return Err(os("mapping the data segment's file"));
    }
    Ok(SharedData {
        file,
        ino,
        head: (start - range.start) as u64,
        len: len as u64,
    })
}

/// Whether `/proc/self/maps` (`maps`) covers `want` with private writable
/// mappings only.
fn private_writable(maps: &str, want: Range<usize>) -> bool {
    let mut at = want.start;
    let mut lines: Vec<(usize, usize, &str)> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, b) = f.next()?.split_once('-')?;
            let perms = f.next()?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
                perms,
            ))
        })
        .collect();
    lines.sort();
    for (a, b, perms) in lines {
        if b <= at || a > at {
            continue;
        }
        if !perms.starts_with("rw") || !perms.ends_with('p') {
            return false;
        }
        at = b;
        if at >= want.end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::private_writable;

    const MAPS: &str = "\
55d0a000-55d0b000 r--p 00000000 08:01 1 /bin/x
55d0b000-55d0c000 rw-p 00001000 08:01 1 /bin/x
55d0c000-55d0e000 rw-p 00000000 00:00 0
55d0e000-55d0f000 rw-s 00000000 00:01 9 /memfd:x (deleted)
";

    #[test]
    fn only_private_writable_pages_end_to_end_are_shared() {
        assert!(
            private_writable(MAPS, 0x55d0b000..0x55d0e000),
            "two private rw mappings"
        );
        assert!(
            !private_writable(MAPS, 0x55d0a000..0x55d0c000),
            "a read-only page"
        );
        assert!(
            !private_writable(MAPS, 0x55d0c000..0x55d0f000),
            "a shared page"
        );
        assert!(
            !private_writable(MAPS, 0x55d0d000..0x55d10000),
            "a hole after"
        );
        assert!(
            !private_writable(MAPS, 0x55d00000..0x55d0c000),
            "a hole before"
        );
    }
}
