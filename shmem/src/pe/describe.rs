//! Naming symmetric objects in messages: a heap address by its allocation
//! and offset, a data-segment address by the executable's symbol.

use super::Pe;
use crate::layout::RESERVED;

impl Pe {
    /// Where `ptr` lies: heap offset and allocation, or data segment offset
    /// and the symbol there.
    pub(crate) fn describe(&self, ptr: *const u8) -> String {
        let Ok((win, off)) = self.try_locate("describe", ptr, 1) else {
            return "not symmetric".into();
        };
        match self.spaces().of(win).map(|s| s.what) {
            Some("symmetric heap") => self.heap_object(off),
            _ => self.data_object(ptr as usize, off),
        }
    }

    /// The heap object at heap offset `off`.
    pub(crate) fn heap_object(&self, off: u64) -> String {
        match self.heap().holding(off) {
            Some((at, len)) => format!(
                "symmetric heap offset {off}, {} bytes into the {len}-byte allocation at offset {at}",
                off - at
            ),
            None if off < RESERVED => {
                format!("symmetric heap offset {off}, in pld's reserved cells")
            }
            None => format!("symmetric heap offset {off}, in no live allocation"),
        }
    }

    /// The data-segment object at address `addr` (offset `off`).
    pub(crate) fn data_object(&self, addr: usize, off: u64) -> String {
        match self.symbol_at(addr) {
            Some((name, into)) => format!("data segment offset {off}: `{name}`+{into}"),
            None => format!("data segment offset {off}"),
        }
    }

    /// The executable's data symbol at `addr` (a runtime address), and how
    /// far into it.
    pub(crate) fn symbol_at(&self, addr: usize) -> Option<(String, u64)> {
        let syms = self.symbols.get_or_init(|| {
            std::fs::read("/proc/self/exe")
                .map(|b| crate::symbols::object_symbols(&b))
                .unwrap_or_default()
        });
        let link = (addr as u64).checked_sub(self.load_base as u64)?;
        crate::symbols::holding(syms, link).map(|(s, into)| (s.name.clone(), into))
    }
}
