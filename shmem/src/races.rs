//! The `--checked` race reports in OpenSHMEM's words, each race's bytes
//! named by the symmetric object they lie in ([`Pe::describe`]'s names).

use crate::layout::HEAP_WINDOW;
use crate::pe::Pe;
use std::ops::Range;

/// The symmetric object `bytes` of window `window` lie in, for a report.
fn name_range(p: &Pe, window: &str, bytes: &Range<u64>) -> Option<String> {
    let space = p.spaces().list.iter().find(|s| {
        let id = p.rank().window(window).ok();
        id == Some(s.window)
    })?;
    Some(match window {
        HEAP_WINDOW => p.heap_object(bytes.start),
        _ => p.data_object(space.base + bytes.start as usize, bytes.start),
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
