//! Address translation: which symmetric space a pointer of the program lies
//! in — the heap window or the data-segment window — and at which offset.
//! Pure: the same offsets on every PE name the same object.

use std::fmt;

/// One symmetric space: a window over the PE's own memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space<W> {
    /// The window.
    pub window: W,
    /// The address of its first byte in this process.
    pub base: usize,
    /// Its length.
    pub len: u64,
    /// "symmetric heap" or "data segment", for messages.
    pub what: &'static str,
    /// Bytes at its start that are the library's own (the heap's team
    /// cells and control block): no call of the program may reach them.
    pub reserved: u64,
}

/// Where an address lies in a space.
enum Within {
    /// At this offset, in the program's part.
    Program(u64),
    /// In the reserved bytes at the start.
    Reserved,
}

impl<W> Space<W> {
    fn holds(&self, addr: usize, len: u64) -> Option<Within> {
        let off = (addr as u64).checked_sub(self.base as u64)?;
        (off.checked_add(len)? <= self.len).then_some(if off < self.reserved {
            Within::Reserved
        } else {
            Within::Program(off)
        })
    }
}

impl<W> fmt::Display for Space<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:#x}..{:#x}",
            self.what,
            self.base,
            self.base as u64 + self.len
        )
    }
}

/// A pointer outside every symmetric space.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {len} bytes at {addr:#x} are not symmetric: {why}")]
pub struct NotSymmetric {
    /// The OpenSHMEM call.
    pub call: &'static str,
    /// The address.
    pub addr: usize,
    /// The bytes the call would reach there.
    pub len: u64,
    /// Where they lie instead: outside both spaces (named with their
    /// ranges), or in a space's reserved bytes.
    pub why: String,
}

/// The symmetric spaces of a PE.
#[derive(Debug, Clone)]
pub struct Spaces<W> {
    /// The heap and, when it could be found, the data segment.
    pub list: Vec<Space<W>>,
}

impl<W: Copy> Spaces<W> {
    /// The window and offset of `len` bytes at `addr`.
    pub fn locate(
        &self,
        call: &'static str,
        addr: usize,
        len: u64,
    ) -> Result<(W, u64), NotSymmetric> {
        for s in &self.list {
            match s.holds(addr, len) {
                Some(Within::Program(off)) => return Ok((s.window, off)),
                Some(Within::Reserved) => {
                    return Err(NotSymmetric {
                        call,
                        addr,
                        len,
                        why: format!(
                            "they lie in the first {} bytes of the {s}, which pld keeps for its own cells (the program's symmetric objects start at {:#x})",
                            s.reserved,
                            s.base as u64 + s.reserved
                        ),
                    });
                }
                None => {}
            }
        }
        Err(NotSymmetric {
            call,
            addr,
            len,
            why: format!(
                "they lie in neither the {}",
                self.list
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" nor the ")
            ),
        })
    }

    /// The space of `window`.
    pub fn of(&self, window: W) -> Option<&Space<W>>
    where
        W: PartialEq,
    {
        self.list.iter().find(|s| s.window == window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spaces() -> Spaces<u8> {
        Spaces {
            list: vec![
                Space {
                    window: 1,
                    base: 0x1000,
                    len: 0x100,
                    what: "symmetric heap",
                    reserved: 0x10,
                },
                Space {
                    window: 2,
                    base: 0x8000,
                    len: 0x20,
                    what: "data segment",
                    reserved: 0,
                },
            ],
        }
    }

    #[test]
    fn a_pointer_inside_a_space_is_its_window_and_offset() {
        assert_eq!(spaces().locate("shmem_putmem", 0x1010, 16), Ok((1, 0x10)));
        assert_eq!(spaces().locate("shmem_putmem", 0x8000, 0x20), Ok((2, 0)));
    }

    #[test]
    fn a_pointer_outside_both_is_refused_naming_the_call_the_address_and_both_ranges() {
        let e = spaces()
            .locate("shmem_long_put", 0x9000, 8)
            .expect_err("not symmetric");
        let text = e.to_string();
        for part in [
            "shmem_long_put",
            "0x9000",
            "symmetric heap 0x1000..0x1100",
            "data segment 0x8000..0x8020",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }

    #[test]
    fn the_reserved_bytes_at_the_start_of_a_space_are_refused_by_name() {
        let e = spaces()
            .locate("shmem_putmem", 0x1008, 8)
            .expect_err("reserved");
        let text = e.to_string();
        assert!(
            text.contains("first 16 bytes of the symmetric heap 0x1000..0x1100"),
            "{text}"
        );
        assert!(text.contains("start at 0x1010"), "{text}");
        assert!(spaces().locate("shmem_putmem", 0x1000, 1).is_err());
        assert_eq!(spaces().locate("shmem_putmem", 0x1010, 1), Ok((1, 0x10)));
    }

    #[test]
    fn a_range_that_runs_past_the_end_is_refused() {
        assert!(spaces().locate("shmem_getmem", 0x10f8, 16).is_err());
        assert!(spaces().locate("shmem_getmem", usize::MAX, 16).is_err());
    }
}
