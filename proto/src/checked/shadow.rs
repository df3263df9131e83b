//! The shadow of one window: per byte range, the last write and the reads
//! since, kept as an interval map (adjacent ranges with the same history
//! merge), so a 64 MiB window with a few hundred live regions costs
//! kilobytes. What an ordering has made irrelevant is forgotten
//! ([`Shadow::forget_ordered_before`], after barriers), and the map never
//! holds more than its budget of ranges: past it, the least recently
//! touched ranges are forgotten and counted ([`Shadow::forgotten`]), so
//! that memory is bounded whatever the access pattern and a lost access is
//! reported, not silent.

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

impl History {
    fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.reads.is_empty()
    }
}

/// Appends without the spare room `Vec::push` leaves: most histories hold
/// one access, and a shadow holds many of them.
fn push_exact(v: &mut Vec<Access>, a: Access) {
    v.reserve_exact(1);
    v.push(a);
}

/// One range of the map: where it ends, its history, and when it was last
/// touched (for the budget).
#[derive(Debug, Clone)]
struct Entry {
    end: u64,
    history: History,
    touched: u64,
}

/// The most ranges one window's shadow keeps, by default: past it the
/// least recently touched are forgotten. At ~150 bytes a range (one
/// access, its map slot), about 10 MB a window at most.
pub const DEFAULT_MAX_RANGES: usize = 1 << 16;

/// The shadow of one window.
#[derive(Debug, Clone)]
pub struct Shadow {
    owner: u32,
    window: Arc<str>,
    /// start → entry; ranges never overlap; absent bytes have no history.
    map: BTreeMap<u64, Entry>,
    /// Accesses so far: the clock of `Entry::touched`.
    now: u64,
    max_ranges: usize,
    /// Ranges forgotten over the budget, with their accesses.
    forgotten: u64,
}

impl Shadow {
    /// The empty shadow of rank `owner`'s window `window`, with the
    /// default budget.
    pub fn new(owner: u32, window: &str) -> Shadow {
        Shadow::with_budget(owner, window, DEFAULT_MAX_RANGES)
    }

    /// The empty shadow of rank `owner`'s window `window`, keeping at
    /// most `max_ranges` ranges (at least 1).
    pub fn with_budget(owner: u32, window: &str, max_ranges: usize) -> Shadow {
        Shadow {
            owner,
            window: Arc::from(window),
            map: BTreeMap::new(),
            now: 0,
            max_ranges: max_ranges.max(1),
            forgotten: 0,
        }
    }

    /// How many ranges it keeps (its cost).
    pub fn ranges(&self) -> usize {
        self.map.len()
    }

    /// The window's name.
    pub fn window(&self) -> &str {
        &self.window
    }

    /// Ranges forgotten because the shadow was over its budget: races
    /// with the accesses they held are no longer reported.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Forgets every access that happens before `clock`: when every rank's
    /// clock is at least `clock` (all ranks have left the barrier that
    /// produced it), no later access can race with them. Ranges left with
    /// no history go; neighbours left with one history merge.
    pub fn forget_ordered_before(&mut self, clock: &VectorClock) {
        let ordered = |a: &Access| a.at.happens_before(clock);
        let old = std::mem::take(&mut self.map);
        let mut last: Option<(u64, Entry)> = None;
        for (start, mut e) in old {
            e.history.writes.retain(|a| !ordered(a));
            e.history.reads.retain(|a| !ordered(a));
            if e.history.is_empty() {
                continue;
            }
            match &mut last {
                Some((_, l)) if l.end == start && l.history == e.history => {
                    l.end = e.end;
                    l.touched = l.touched.max(e.touched);
                }
                _ => {
                    if let Some((s, l)) = last.replace((start, e)) {
                        self.map.insert(s, l);
                    }
                }
            }
        }
        if let Some((s, l)) = last {
            self.map.insert(s, l);
        }
    }

    /// Over the budget: forgets the least recently touched quarter of it.
    fn enforce_budget(&mut self) {
        if self.map.len() <= self.max_ranges {
            return;
        }
        let keep = self.max_ranges - self.max_ranges / 4;
        let mut ages: Vec<(u64, u64)> = self.map.iter().map(|(s, e)| (e.touched, *s)).collect();
        let drop = ages.len() - keep;
        ages.select_nth_unstable(drop - 1);
        for (_, start) in &ages[..drop] {
            self.map.remove(start);
        }
        self.forgotten += drop as u64;
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
        self.now += 1;
        let mut races: Vec<Race> = Vec::new();
        for (&start, e) in self.map.range_mut(bytes.start..bytes.end) {
            e.touched = self.now;
            let (end, history) = (&e.end, &mut e.history);
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
                push_exact(&mut history.writes, access.clone());
            } else {
                history.reads.retain(|r| r.rank() != access.rank());
                push_exact(&mut history.reads, access.clone());
            }
        }
        self.merge_around(bytes);
        self.enforce_budget();
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
        for (&start, Entry { end, history, .. }) in self.map.range(first..bytes.end) {
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
        let Some((_, e)) = self.map.range_mut(..at).next_back() else {
            return;
        };
        if e.end <= at {
            return;
        }
        let tail = Entry {
            end: e.end,
            history: e.history.clone(),
            touched: e.touched,
        };
        e.end = at;
        self.map.insert(at, tail);
    }

    /// Inserts empty ranges where `bytes` has none.
    fn fill_gaps(&mut self, bytes: Range<u64>) {
        let mut gaps = Vec::new();
        let mut at = bytes.start;
        for (&start, e) in self.map.range(bytes.start..bytes.end) {
            if start > at {
                gaps.push((at, start));
            }
            at = e.end;
        }
        if at < bytes.end {
            gaps.push((at, bytes.end));
        }
        for (s, end) in gaps {
            let e = Entry {
                end,
                history: History::default(),
                touched: self.now,
            };
            self.map.insert(s, e);
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
                (Some(ke), Some(se)) => (ke.end, ke.history == se.history),
                _ => (0, false),
            };
            if same && k_end == s {
                let (s_end, s_touched) = self.map.remove(&s).map_or((s, 0), |e| (e.end, e.touched));
                if let Some(entry) = self.map.get_mut(&k) {
                    entry.end = s_end;
                    entry.touched = entry.touched.max(s_touched);
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
