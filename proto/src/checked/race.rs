//! A race report: the two unordered accesses, the bytes they share, the
//! ordering that is missing, and — where the pair is a row of the seed's
//! failure catalog — the catalog's fix. Rendered the same whichever of the
//! two reached the window first, so a report does not depend on timing.

use super::access::{Access, AccessKind};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// Two accesses to overlapping bytes that no ordering separates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Race {
    /// The rank whose window it is.
    pub owner: u32,
    /// The window's name.
    pub window: Arc<str>,
    /// The bytes both touched (window offsets).
    pub bytes: Range<u64>,
    /// The pair in report order: a write before a read; two writes by rank.
    pub first: Access,
    /// The other access.
    pub second: Access,
}

/// What identifies a report for deduplication: the window and both
/// accesses' rank, kind and site (not their op ids or epochs, which a
/// loop repeats).
pub type RaceKey = (u32, Arc<str>, [(u32, AccessKind, Arc<str>); 2]);

impl Race {
    /// The race of `a` and `b` (in either order) over `bytes`.
    pub(crate) fn new(a: Access, b: Access, bytes: Range<u64>) -> Race {
        let rank_of = |x: &Access| (!x.kind.writes(), x.rank());
        let (first, second) = if rank_of(&a) <= rank_of(&b) {
            (a, b)
        } else {
            (b, a)
        };
        Race {
            owner: 0,
            window: Arc::from(""),
            bytes,
            first,
            second,
        }
    }

    /// Whether this race is of `a` and `b` (in either order).
    pub(crate) fn is_pair(&self, a: &Access, b: &Access) -> bool {
        (&self.first == a && &self.second == b) || (&self.first == b && &self.second == a)
    }

    /// The deduplication key.
    pub fn key(&self) -> RaceKey {
        let part = |a: &Access| (a.rank(), a.kind, a.site.clone());
        (
            self.owner,
            self.window.clone(),
            [part(&self.first), part(&self.second)],
        )
    }

    /// The row of the seed's failure catalog this race is, if any: the
    /// symptom and the fix.
    pub fn catalog(&self) -> Option<(&'static str, &'static str)> {
        let (w, r) = (self.first.kind, self.second.kind);
        let owner_is = |a: &Access| a.rank() == self.owner;
        let plain_write = |k: AccessKind| k.writes() && !k.atomic();
        if w == AccessKind::Store && !r.writes() && !r.by_owner() && owner_is(&self.first) {
            Some((
                "a remote read returns zeros: remote_load before the owner staged its slice",
                "in load mode, stage, then barrier, then remote_load",
            ))
        } else if w.writes() && !w.by_owner() && r == AccessKind::Load && owner_is(&self.second) {
            Some((
                "a rank reads stale data: the barrier is missing or before the store",
                "in store mode, remote_store, then barrier, then read your own slice \
                 (a barrier before the store does not help)",
            ))
        } else if plain_write(w) && plain_write(r) && !(w.by_owner() && r.by_owner()) {
            Some((
                "two ranks write the same bytes with no ordering between them",
                "give each rank its own slice, add with atomic=AtomicType.Add, \
                 or order the writes with a barrier or a notify/wait",
            ))
        } else {
            None
        }
    }
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "race on rank {}'s window '{}' bytes {}..{}: {} and {} are unordered — \
             no barrier both passed, no wait on a signal notified after the first, \
             and no atomic on a shared cell orders one before the other",
            self.owner, self.window, self.bytes.start, self.bytes.end, self.first, self.second,
        )?;
        if let Some((symptom, fix)) = self.catalog() {
            write!(f, "; the catalog's \"{symptom}\": {fix}")?;
        }
        Ok(())
    }
}
