//! The symmetric heap's allocator: pure and deterministic, so that the same
//! sequence of `shmem_malloc` / `shmem_free` calls — which OpenSHMEM makes
//! collective — returns the same offset on every PE. First fit over a free
//! list ordered by offset; freed blocks merge with their neighbours.

use std::collections::BTreeMap;

/// Offsets are multiples of this unless a caller asks for more: enough for
/// every OpenSHMEM type (long double and the 128-bit sized routines).
pub const MIN_ALIGN: u64 = 16;

/// The heap's base address is a multiple of this on every PE, so that an
/// offset aligned to it (or less) is an address aligned as much: the
/// largest alignment `shmem_align` grants. The mapping reserves this
/// much more address space than the heap (never committed), so it costs
/// no memory.
pub const HEAP_ALIGN: u64 = 1 << 30;

/// Maps `size` bytes of zeroed memory for the heap, `HEAP_ALIGN`-aligned,
/// committed only as pages are touched. Never unmapped: the heap lives as
/// long as the process. With `shared`, the heap is a memory file (memfd)
/// that the other PEs of this host can map too (`crate::near`); its
/// descriptor is returned. Without, or where memfd is refused, it is
/// private memory.
pub fn map(
    size: u64,
    shared: bool,
) -> std::io::Result<(std::ptr::NonNull<u8>, Option<std::os::fd::OwnedFd>)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let align = HEAP_ALIGN as usize;
    let too_large = || std::io::Error::other(format!("a heap of {size} bytes is too large"));
    let bytes = usize::try_from(size).map_err(|_| too_large())?;
    let len = bytes.checked_add(align).ok_or_else(too_large)?;
    let failed = |what: &str| {
        let e = std::io::Error::last_os_error();
        std::io::Error::other(format!(
            "cannot {what} a symmetric heap of {size} bytes (SHMEM_SYMMETRIC_SIZE): {e}"
        ))
    };
    // SAFETY: an anonymous private mapping at an address the kernel picks:
    // the address space the aligned heap is carved from.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(failed("map"));
    }
    let aligned = (p as usize).div_ceil(align) * align;
    let base = std::ptr::NonNull::new(aligned as *mut u8)
        .ok_or_else(|| std::io::Error::other("mmap gave a null address"))?;
    if !shared || bytes == 0 {
        return Ok((base, None));
    }
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor it
    // returns is ours alone.
    let fd = unsafe { libc::memfd_create(c"pld-shmem-heap".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Ok((base, None));
    }
    // SAFETY: `fd` was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own memory file.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return Err(failed("size"));
    }
    // SAFETY: replaces the aligned part of the reservation above (ours,
    // unused) with the memory file, shared.
    let q = unsafe {
        libc::mmap(
            aligned as *mut libc::c_void,
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd.as_raw_fd(),
            0,
        )
    };
    if q == libc::MAP_FAILED {
        return Err(failed("share"));
    }
    Ok((base, Some(fd)))
}

/// Why an allocation call failed.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeapError {
    /// Not enough contiguous free space.
    #[error(
        "the symmetric heap has no {size} free bytes aligned to {align} ({free} bytes free in all, {total} in the heap; set SHMEM_SYMMETRIC_SIZE for more)"
    )]
    Exhausted {
        size: u64,
        align: u64,
        free: u64,
        total: u64,
    },
    /// A size that, rounded up to whole units of [`MIN_ALIGN`], does not
    /// fit 64 bits: it would wrap to a small block.
    #[error("{size} bytes is more than any symmetric heap holds")]
    TooLarge { size: u64 },
    /// An alignment that is not a power of two, or larger than the heap's.
    #[error("alignment {align} is not a power of two of at most 1 GiB")]
    BadAlign { align: u64 },
    /// A pointer that no allocation starts at.
    #[error("offset {offset} of the symmetric heap is not the start of a live allocation")]
    NotAllocated { offset: u64 },
}

/// The allocator of `[start, end)` of the heap window.
#[derive(Debug, Clone)]
pub struct Heap {
    /// Free blocks: offset -> length.
    free: BTreeMap<u64, u64>,
    /// Live allocations: offset -> length.
    live: BTreeMap<u64, u64>,
    start: u64,
    end: u64,
}

impl Heap {
    /// An empty heap over `[start, end)`.
    pub fn new(start: u64, end: u64) -> Heap {
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        Heap {
            free,
            live: BTreeMap::new(),
            start,
            end,
        }
    }

    /// Allocates `size` bytes (at least 1) aligned to `align`.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64, HeapError> {
        if !align.is_power_of_two() || align > HEAP_ALIGN {
            return Err(HeapError::BadAlign { align });
        }
        let align = align.max(MIN_ALIGN);
        // Whole units of MIN_ALIGN, so that every free block stays aligned;
        // a size within MIN_ALIGN of 2^64 would wrap to 0 here.
        let size = size
            .max(1)
            .div_ceil(MIN_ALIGN)
            .checked_mul(MIN_ALIGN)
            .ok_or(HeapError::TooLarge { size })?;
        let found = self.free.iter().find_map(|(&at, &len)| {
            let aligned = at.div_ceil(align).checked_mul(align)?;
            let end = aligned.checked_add(size)?;
            (end <= at + len).then_some((at, len, aligned))
        });
        let Some((at, len, aligned)) = found else {
            return Err(HeapError::Exhausted {
                size,
                align,
                free: self.free.values().sum(),
                total: self.end - self.start,
            });
        };
        self.free.remove(&at);
        if aligned > at {
            self.free.insert(at, aligned - at);
        }
        let tail = at + len - (aligned + size);
        if tail > 0 {
            self.free.insert(aligned + size, tail);
        }
        self.live.insert(aligned, size);
        Ok(aligned)
    }

    /// Frees the allocation at `offset`.
    pub fn free(&mut self, offset: u64) -> Result<(), HeapError> {
        let len = self
            .live
            .remove(&offset)
            .ok_or(HeapError::NotAllocated { offset })?;
        let (mut at, mut len) = (offset, len);
        if let Some((&prev, &plen)) = self.free.range(..at).next_back()
            && prev + plen == at
        {
            self.free.remove(&prev);
            (at, len) = (prev, plen + len);
        }
        if let Some(&next_len) = self.free.get(&(at + len)) {
            self.free.remove(&(at + len));
            len += next_len;
        }
        self.free.insert(at, len);
        Ok(())
    }

    /// The length of the live allocation at `offset`.
    pub fn len_of(&self, offset: u64) -> Option<u64> {
        self.live.get(&offset).copied()
    }

    /// The live allocation that holds `offset`: its start and length (for
    /// messages that name a heap object).
    pub fn holding(&self, offset: u64) -> Option<(u64, u64)> {
        let (&at, &len) = self.live.range(..=offset).next_back()?;
        (offset < at + len).then_some((at, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_calls_give_the_same_offsets() {
        let run = || {
            let mut h = Heap::new(4096, 1 << 20);
            let a = h.alloc(100, 1).expect("fits");
            let b = h.alloc(8, 4096).expect("fits");
            h.free(a).expect("live");
            let c = h.alloc(50, 1).expect("fits");
            (a, b, c)
        };
        assert_eq!(run(), run());
        let (a, b, c) = run();
        assert_eq!(a, 4096);
        assert_eq!(b % 4096, 0);
        assert_eq!(c, a, "first fit reuses the freed block");
    }

    #[test]
    fn freed_neighbours_merge_into_one_block() {
        let mut h = Heap::new(0, 1024);
        let a = h.alloc(256, 1).expect("fits");
        let b = h.alloc(256, 1).expect("fits");
        let c = h.alloc(512, 1).expect("fits");
        for x in [b, a, c] {
            h.free(x).expect("live");
        }
        assert_eq!(h.alloc(1024, 1), Ok(0));
    }

    #[test]
    fn an_exhausted_heap_says_how_much_is_free() {
        let mut h = Heap::new(0, 1024);
        h.alloc(1000, 1).expect("fits");
        match h.alloc(100, 1) {
            Err(HeapError::Exhausted { free, total, .. }) => assert_eq!((free, total), (16, 1024)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_size_near_2_64_is_refused_and_never_aliases_a_later_block() {
        let mut h = Heap::new(4096, 1 << 20);
        // Within 15 bytes of 2^64: rounded up to 16, they wrap to 0.
        for size in [u64::MAX, u64::MAX - 1, u64::MAX - 14] {
            assert_eq!(
                h.alloc(size, 1),
                Err(HeapError::TooLarge { size }),
                "{size}"
            );
            assert_eq!(
                h.alloc(size, 4096),
                Err(HeapError::TooLarge { size }),
                "{size}"
            );
        }
        let huge = u64::MAX - 15;
        assert!(matches!(h.alloc(huge, 1), Err(HeapError::Exhausted { .. })));
        let a = h.alloc(64, 1).expect("fits");
        let b = h.alloc(64, 1).expect("fits");
        assert_ne!(a, b);
        assert_eq!(h.len_of(a), Some(64));
    }

    #[test]
    fn freeing_what_was_not_allocated_is_refused_by_offset() {
        let mut h = Heap::new(0, 1024);
        let a = h.alloc(64, 1).expect("fits");
        assert_eq!(
            h.free(a + 16),
            Err(HeapError::NotAllocated { offset: a + 16 })
        );
        assert_eq!(h.holding(a + 16), Some((a, 64)));
        h.free(a).expect("live");
        assert_eq!(h.free(a), Err(HeapError::NotAllocated { offset: a }));
    }
}
