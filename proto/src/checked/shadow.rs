//! The shadow of one window: per byte range, the last write and the reads
//! since, kept as an interval map (adjacent ranges with the same history
//! merge), so a 64 MiB window with a few hundred live regions costs
//! kilobytes.

use super::access::Access;
use super::clock::VectorClock;
use super::race::Race;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// What the shadow knows of one byte range: the writes and the reads no
/// later write is ordered after — at most one of each per rank (a rank's
/// later access is ordered after its earlier ones). Keeping every
/// unordered one, not just the last, is what makes the reports of three
/// racing ranks the same whichever order their bytes arrived in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct History {
    writes: Vec<Access>,
    reads: Vec<Access>,
}

/// The shadow of one window.
#[derive(Debug, Clone)]
pub struct Shadow {
    owner: u32,
    window: Arc<str>,
    /// start → (end, history); ranges never overlap; absent bytes have no
    /// history.
    map: BTreeMap<u64, (u64, History)>,
}

impl Shadow {
    /// The empty shadow of rank `owner`'s window `window`.
    pub fn new(owner: u32, window: &str) -> Shadow {
        Shadow {
            owner,
            window: Arc::from(window),
            map: BTreeMap::new(),
        }
    }

    /// How many ranges it keeps (its cost).
    pub fn ranges(&self) -> usize {
        self.map.len()
    }

    /// Records `access` to `bytes`, made by a rank whose clock at the time
    /// was `clock`, and returns the races it makes with what the shadow
    /// held: one per earlier access, over the bytes they share.
    pub fn access(&mut self, bytes: Range<u64>, access: &Access, clock: &VectorClock) -> Vec<Race> {
        if bytes.start >= bytes.end {
            return Vec::new();
        }
        self.split_at(bytes.start);
        self.split_at(bytes.end);
        self.fill_gaps(bytes.clone());
        let mut races: Vec<Race> = Vec::new();
        for (&start, (end, history)) in self.map.range_mut(bytes.start..bytes.end) {
            let here = start..*end;
            let mut against = |earlier: &Access| {
                if races_with(earlier, access, clock) {
                    add_race(&mut races, earlier, access, here.clone());
                }
            };
            for w in &history.writes {
                against(w);
            }
            let superseded = |a: &Access| a.at.happens_before(clock);
            if access.kind.writes() {
                for r in &history.reads {
                    against(r);
                }
                history.writes.retain(|w| !superseded(w));
                history.reads.retain(|r| !superseded(r));
                history.writes.push(access.clone());
            } else {
                history.reads.retain(|r| r.rank() != access.rank());
                history.reads.push(access.clone());
            }
        }
        self.merge_around(bytes);
        for r in &mut races {
            r.owner = self.owner;
            r.window = self.window.clone();
        }
        races
    }

    /// The races `access` to `bytes` would make, recording nothing (strict
    /// mode refuses such an access: it never happened).
    pub fn conflicts(&self, bytes: Range<u64>, access: &Access, clock: &VectorClock) -> Vec<Race> {
        let mut races: Vec<Race> = Vec::new();
        let first = self
            .map
            .range(..bytes.start)
            .next_back()
            .map_or(bytes.start, |(s, _)| *s);
        for (&start, (end, history)) in self.map.range(first..bytes.end) {
            let here = start.max(bytes.start)..(*end).min(bytes.end);
            if here.start >= here.end {
                continue;
            }
            let writes = history.writes.iter();
            let reads = history.reads.iter().filter(|_| access.kind.writes());
            for earlier in writes.chain(reads) {
                if races_with(earlier, access, clock) {
                    add_race(&mut races, earlier, access, here.clone());
                }
            }
        }
        for r in &mut races {
            r.owner = self.owner;
            r.window = self.window.clone();
        }
        races
    }

    /// Splits the range containing `at` (if any) into two at `at`.
    fn split_at(&mut self, at: u64) {
        let Some((&start, (end, history))) = self.map.range(..at).next_back() else {
            return;
        };
        if *end <= at {
            return;
        }
        let (end, history) = (*end, history.clone());
        self.map.insert(start, (at, history.clone()));
        self.map.insert(at, (end, history));
    }

    /// Inserts empty ranges where `bytes` has none.
    fn fill_gaps(&mut self, bytes: Range<u64>) {
        let mut gaps = Vec::new();
        let mut at = bytes.start;
        for (&start, (end, _)) in self.map.range(bytes.start..bytes.end) {
            if start > at {
                gaps.push((at, start));
            }
            at = *end;
        }
        if at < bytes.end {
            gaps.push((at, bytes.end));
        }
        for (s, e) in gaps {
            self.map.insert(s, (e, History::default()));
        }
    }

    /// Merges neighbouring ranges with one history, from just before
    /// `bytes` to just after it.
    fn merge_around(&mut self, bytes: Range<u64>) {
        let first = self
            .map
            .range(..bytes.start)
            .next_back()
            .map_or(bytes.start, |(s, _)| *s);
        let starts: Vec<u64> = self.map.range(first..=bytes.end).map(|(s, _)| *s).collect();
        let mut keep: Option<u64> = None;
        for s in starts {
            let Some(k) = keep else {
                keep = Some(s);
                continue;
            };
            let (k_end, same) = match (self.map.get(&k), self.map.get(&s)) {
                (Some((k_end, kh)), Some((_, sh))) => (*k_end, kh == sh),
                _ => (0, false),
            };
            if same && k_end == s {
                let s_end = self.map.remove(&s).map_or(s, |(e, _)| e);
                if let Some(entry) = self.map.get_mut(&k) {
                    entry.0 = s_end;
                }
            } else {
                keep = Some(s);
            }
        }
    }
}

/// Whether `later` (made with `clock`) races with `earlier`.
fn races_with(earlier: &Access, later: &Access, clock: &VectorClock) -> bool {
    // One rank's accesses to one window are ordered: its ops to one target
    // apply in issue order, and its own loads and stores are program order.
    earlier.rank() != later.rank()
        && earlier.kind.conflicts(later.kind)
        && !earlier.at.happens_before(clock)
}

/// Adds `bytes` to the race of this pair, or a new race.
fn add_race(races: &mut Vec<Race>, earlier: &Access, later: &Access, bytes: Range<u64>) {
    if let Some(r) = races.iter_mut().find(|r| r.is_pair(earlier, later)) {
        r.bytes.start = r.bytes.start.min(bytes.start);
        r.bytes.end = r.bytes.end.max(bytes.end);
        return;
    }
    races.push(Race::new(earlier.clone(), later.clone(), bytes));
}
