//! The names of the executable's static data, for messages that point into
//! the data segment (`--checked` reports, wait timeouts): the `STT_OBJECT`
//! symbols of its ELF symbol table (`.symtab`, so file-static variables
//! too, unless the program was stripped). Pure: the parser takes bytes.

/// One data symbol: its link-time address, size and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Link-time virtual address (add the load base for a PIE).
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// The name.
    pub name: String,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The object symbols of a little-endian ELF64 file, sorted by address;
/// empty for anything else (or a file without a symbol table).
pub fn object_symbols(elf: &[u8]) -> Vec<Symbol> {
    parse(elf).unwrap_or_default()
}

fn parse(elf: &[u8]) -> Option<Vec<Symbol>> {
    // ELF64, little-endian.
    if elf.get(..4)? != b"\x7fELF" || *elf.get(4)? != 2 || *elf.get(5)? != 1 {
        return None;
    }
    let shoff = usize::try_from(u64_at(elf, 0x28)?).ok()?;
    let shentsize = usize::from(u16_at(elf, 0x3a)?);
    let shnum = usize::from(u16_at(elf, 0x3c)?);
    let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let mut out = Vec::new();
    for i in 0..shnum {
        let sh = section(i)?;
        // SHT_SYMTAB = 2.
        if u32_at(elf, sh + 4)? != 2 {
            continue;
        }
        let (off, size) = (
            u64_at(elf, sh + 0x18)? as usize,
            u64_at(elf, sh + 0x20)? as usize,
        );
        let entsize = (u64_at(elf, sh + 0x38)? as usize).max(24);
        let strtab = section(u32_at(elf, sh + 0x28)? as usize)?;
        let str_off = u64_at(elf, strtab + 0x18)? as usize;
        let syms = elf.get(off..off.checked_add(size)?)?;
        for s in syms.chunks_exact(entsize) {
            let info = s[4];
            // STT_OBJECT = 1; shndx 0 is undefined.
            if info & 0xf != 1 || u16_at(s, 6)? == 0 {
                continue;
            }
            let name_at = str_off.checked_add(u32_at(s, 0)? as usize)?;
            let rest = elf.get(name_at..)?;
            let end = rest.iter().position(|c| *c == 0)?;
            out.push(Symbol {
                addr: u64_at(s, 8)?,
                size: u64_at(s, 16)?,
                name: String::from_utf8_lossy(&rest[..end]).into_owned(),
            });
        }
    }
    out.sort_by_key(|s| s.addr);
    Some(out)
}

/// The symbol that holds link-time address `addr`, and how far into it.
pub fn holding(symbols: &[Symbol], addr: u64) -> Option<(&Symbol, u64)> {
    let i = symbols.partition_point(|s| s.addr <= addr);
    let s = symbols.get(i.checked_sub(1)?)?;
    (addr < s.addr + s.size.max(1)).then(|| (s, addr - s.addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A static of this test binary, to be found by name.
    #[unsafe(no_mangle)]
    #[used]
    static PLD_SHMEM_TEST_OBJECT: [u64; 4] = [1, 2, 3, 4];

    #[test]
    fn a_static_of_this_executable_is_found_by_name_and_address() {
        let exe = std::fs::read("/proc/self/exe").expect("own executable");
        let syms = object_symbols(&exe);
        let s = syms
            .iter()
            .find(|s| s.name == "PLD_SHMEM_TEST_OBJECT")
            .expect("the test static is in .symtab");
        assert_eq!(s.size, 32);
        let (found, into) = holding(&syms, s.addr + 8).expect("held");
        assert_eq!((found.name.as_str(), into), ("PLD_SHMEM_TEST_OBJECT", 8));
    }

    #[test]
    fn bytes_that_are_not_elf_have_no_symbols() {
        assert!(object_symbols(b"not an elf file at all").is_empty());
        assert!(object_symbols(b"\x7fELF\x02\x01").is_empty());
    }
}
