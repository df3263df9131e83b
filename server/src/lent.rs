//! [`ForeignMemory`]: memory the process already owns, lent to a rank as
//! a window. On its own (not in `window`) so that the configuration can
//! name it without importing the window machinery.

use crate::error::ConfigError;
use std::ptr::NonNull;

/// Memory the process already owns, lent to a rank as a window — an
/// OpenSHMEM program's data segment (`static long x;` is symmetric). The
/// one way to make a window over memory the rank did not allocate.
#[derive(Debug)]
pub struct ForeignMemory {
    name: String,
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a `ForeignMemory` is an address range, valid for the process's
// lifetime by `ForeignMemory::new`'s contract; the window over it accesses
// it only through bounds-checked copies and atomics (see the module docs).
unsafe impl Send for ForeignMemory {}
// SAFETY: as above.
unsafe impl Sync for ForeignMemory {}

impl ForeignMemory {
    /// Lends `size` bytes at `ptr` as the window `name`.
    ///
    /// # Safety
    /// The range must be readable and writable for as long as any rank
    /// serves it — in practice, the process's lifetime (a data segment) —
    /// and 8-byte aligned, so that an element offset that is a multiple of
    /// its size is naturally aligned. Peers write it at any time: the
    /// program must treat it as OpenSHMEM symmetric memory (no Rust
    /// reference into it may be held across a remote write).
    pub unsafe fn new(
        name: &str,
        ptr: NonNull<u8>,
        size: u64,
    ) -> Result<ForeignMemory, ConfigError> {
        let fail = || ConfigError::WindowAlloc {
            name: name.to_string(),
            size,
        };
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(fail)?;
        if ptr.as_ptr() as usize % 8 != 0 {
            return Err(fail());
        }
        Ok(ForeignMemory {
            name: name.to_string(),
            ptr,
            size,
        })
    }

    /// The window's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size as u64
    }
}

impl ForeignMemory {
    /// The address and length of the lent range.
    pub(crate) fn range(&self) -> (NonNull<u8>, usize) {
        (self.ptr, self.size)
    }
}
