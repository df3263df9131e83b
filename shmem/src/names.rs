//! Naming symmetric objects in messages: a heap address by its allocation
//! and offset, a data-segment address by the executable's symbol; and the
//! `--checked` reports, each race's bytes named so.

use crate::pe::{HEAP_WINDOW, Pe, RESERVED};
use std::ops::Range;

/// Where `ptr` lies: heap offset and allocation, or data segment offset and
/// the symbol there.
pub(crate) fn describe(p: &Pe, ptr: *const u8) -> String {
    let Ok((win, off)) = p.try_locate("describe", ptr, 1) else {
        return "not symmetric".into();
    };
    match p.spaces().of(win).map(|s| s.what) {
        Some("symmetric heap") => heap_object(p, off),
        _ => data_object(p, ptr as usize, off),
    }
}

fn heap_object(p: &Pe, off: u64) -> String {
    match p.heap().holding(off) {
        Some((at, len)) => format!(
            "symmetric heap offset {off}, {} bytes into the {len}-byte allocation at offset {at}",
            off - at
        ),
        None if off < RESERVED => format!("symmetric heap offset {off}, in pld's reserved cells"),
        None => format!("symmetric heap offset {off}, in no live allocation"),
    }
}

fn data_object(p: &Pe, addr: usize, off: u64) -> String {
    match p.symbol_at(addr) {
        Some((name, into)) => format!("data segment offset {off}: `{name}`+{into}"),
        None => format!("data segment offset {off}"),
    }
}

/// The symmetric object `bytes` of window `window` lie in, for a report.
fn name_range(p: &Pe, window: &str, bytes: &Range<u64>) -> Option<String> {
    let space = p.spaces().list.iter().find(|s| {
        let id = p.rank().window(window).ok();
        id == Some(s.window)
    })?;
    Some(match window {
        HEAP_WINDOW => heap_object(p, bytes.start),
        _ => data_object(p, space.base + bytes.start as usize, bytes.start),
    })
}

/// A report in OpenSHMEM's words: which calls make each kind of access.
fn openshmem_words(text: &str) -> String {
    use pld_proto::checked::AccessKind as K;
    let calls = [
        (K::Put, "shmem put / p / iput / put_signal"),
        (K::Get, "shmem get / g / iget"),
        (K::AtomicAdd, "shmem_atomic_add / inc"),
        (K::FetchAdd, "shmem_atomic_fetch_add / fetch_inc"),
        (K::CompareSwap, "shmem_atomic_compare_swap"),
        (K::Atomic, "shmem_atomic_swap / set / and / or / xor"),
        (K::AtomicRead, "shmem_atomic_fetch"),
    ];
    let mut out = text.replace("rank ", "PE ");
    for (kind, call) in calls {
        let verb = format!(" {} (op", kind.verb());
        out = out.replace(&verb, &format!(" {} [{call}] (op", kind.verb()));
    }
    out
}

/// Prints this PE's `--checked` race reports, each race's bytes named by
/// the symmetric object they lie in; returns how many.
pub(crate) fn report_races(p: &Pe) -> usize {
    let races = p.rank().races();
    for race in &races {
        let text = race.to_string();
        let at = format!("bytes {}..{}", race.bytes.start, race.bytes.end);
        let text = match name_range(p, &race.window, &race.bytes) {
            Some(name) => text.replacen(&at, &format!("{at} ({name})"), 1),
            None => text,
        };
        let text = openshmem_words(&text);
        crate::say::line(format_args!(
            "pld-shmem: PE {}: --checked: {text}",
            p.rank().rank()
        ));
    }
    races.len()
}
