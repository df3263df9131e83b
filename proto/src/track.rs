//! The table of operations an origin has issued to one peer and not yet seen
//! completed.
//!
//! Ids are handed out in issue order, starting at 1 (0 is the handshake).
//! A reply completes its id; `quiet` takes a ticket ([`PeerOps::next_id`])
//! and is satisfied once no op below the ticket is outstanding, however many
//! ops are issued meanwhile. Time is passed in, never read.

use std::collections::VecDeque;
use std::time::Instant;

pub use crate::op::OpKind;

/// One outstanding operation and whatever its issuer waits on (`T`).
#[derive(Debug)]
pub struct Outstanding<T> {
    /// The op's id on its connection.
    pub id: u64,
    /// What the op is.
    pub kind: OpKind,
    /// When it was issued.
    pub issued_at: Instant,
    /// What its issuer waits on.
    pub waiter: T,
}

#[derive(Debug)]
struct Entry<T> {
    kind: OpKind,
    issued_at: Instant,
    waiter: T,
}

/// Outstanding operations to one peer.
#[derive(Debug)]
pub struct PeerOps<T> {
    /// Id of `slots[0]`.
    base: u64,
    /// One slot per id from `base` on; `None` once completed. The front slot
    /// is always outstanding (completed fronts are popped).
    slots: VecDeque<Option<Entry<T>>>,
    live: usize,
}

impl<T> Default for PeerOps<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PeerOps<T> {
    /// An empty table; the first id issued is 1.
    pub fn new() -> Self {
        PeerOps {
            base: 1,
            slots: VecDeque::new(),
            live: 0,
        }
    }

    /// Records a new operation and returns its id.
    pub fn issue(&mut self, kind: OpKind, now: Instant, waiter: T) -> u64 {
        let id = self.next_id();
        self.slots.push_back(Some(Entry {
            kind,
            issued_at: now,
            waiter,
        }));
        self.live += 1;
        id
    }

    /// Completes `id`. `None` if it is not outstanding (never issued, already
    /// completed, expired or drained): a stale or forged reply.
    pub fn complete(&mut self, id: u64) -> Option<Outstanding<T>> {
        let idx = usize::try_from(id.checked_sub(self.base)?).ok()?;
        let entry = self.slots.get_mut(idx)?.take()?;
        self.live -= 1;
        self.pop_completed_front();
        Some(Outstanding {
            id,
            kind: entry.kind,
            issued_at: entry.issued_at,
            waiter: entry.waiter,
        })
    }

    /// Completes every outstanding op with an id in `first..=last`, oldest
    /// first, handing each to `each`; returns how many. Ids the table does
    /// not hold are skipped, so a forged range costs nothing. A cumulative
    /// acknowledgement usually starts at the oldest outstanding op: that
    /// run is popped off the front, one slot at a time, without the
    /// per-id lookup of [`PeerOps::complete`].
    pub fn complete_range(
        &mut self,
        first: u64,
        last: u64,
        mut each: impl FnMut(Outstanding<T>),
    ) -> usize {
        let end = last.min(self.next_id().saturating_sub(1));
        if first > end {
            return 0;
        }
        let mut n = 0;
        if first <= self.base {
            // The run starts at the front: everything up to `end` goes.
            while self.base <= end {
                let Some(slot) = self.slots.pop_front() else {
                    break;
                };
                let id = self.base;
                self.base += 1;
                if let Some(e) = slot {
                    self.live -= 1;
                    n += 1;
                    each(Outstanding {
                        id,
                        kind: e.kind,
                        issued_at: e.issued_at,
                        waiter: e.waiter,
                    });
                }
            }
            self.pop_completed_front();
            return n;
        }
        for id in first..=end {
            if let Some(op) = self.complete(id) {
                n += 1;
                each(op);
            }
        }
        n
    }

    /// Pops completed slots off the front, so that the front slot is
    /// outstanding (or the table empty).
    fn pop_completed_front(&mut self) {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// What waits for `id`, if it is outstanding.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let idx = usize::try_from(id.checked_sub(self.base)?).ok()?;
        self.slots.get_mut(idx)?.as_mut().map(|e| &mut e.waiter)
    }

    /// The id the next op will get: a `quiet` ticket covering every op
    /// issued so far.
    pub fn next_id(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Whether every op with an id below `ticket` has completed.
    pub fn done_before(&self, ticket: u64) -> bool {
        self.slots.is_empty() || self.base >= ticket
    }

    /// How many ops are outstanding.
    pub fn outstanding(&self) -> usize {
        self.live
    }

    /// The outstanding ops below `ticket`: id, kind and issue time.
    pub fn pending_before(&self, ticket: u64) -> Vec<(u64, OpKind, Instant)> {
        self.iter_live()
            .take_while(|(id, _)| *id < ticket)
            .map(|(id, e)| (id, e.kind, e.issued_at))
            .collect()
    }

    /// Removes and returns the ops issued before `cutoff` (they have waited
    /// longer than the op timeout).
    pub fn expire(&mut self, cutoff: Instant) -> Vec<Outstanding<T>> {
        let ids: Vec<u64> = self
            .iter_live()
            .filter(|(_, e)| e.issued_at < cutoff)
            .map(|(id, _)| id)
            .collect();
        ids.into_iter().filter_map(|id| self.complete(id)).collect()
    }

    /// Removes and returns every outstanding op (the link to the peer is
    /// gone). Ids are not reused: a late reply to a drained op completes
    /// nothing.
    pub fn drain(&mut self) -> Vec<Outstanding<T>> {
        let base = self.base;
        let span = self.slots.len() as u64;
        let out = self
            .slots
            .drain(..)
            .enumerate()
            .filter_map(|(i, e)| {
                e.map(|e| Outstanding {
                    id: base + i as u64,
                    kind: e.kind,
                    issued_at: e.issued_at,
                    waiter: e.waiter,
                })
            })
            .collect();
        self.base = base + span;
        self.live = 0;
        out
    }

    fn iter_live(&self) -> impl Iterator<Item = (u64, &Entry<T>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, e)| e.as_ref().map(|e| (self.base + i as u64, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The ids `complete_range` hands over, and the table's state after.
    fn run(ops: &mut PeerOps<u64>, first: u64, last: u64) -> Vec<u64> {
        let mut got = Vec::new();
        let n = ops.complete_range(first, last, |op| {
            assert_eq!(op.waiter, op.id, "each op keeps its own waiter");
            got.push(op.id);
        });
        assert_eq!(n, got.len());
        got
    }

    #[test]
    fn a_range_completes_exactly_its_outstanding_ids_whatever_was_done_before() {
        let t = Instant::now();
        // Every pattern of earlier completions over 8 ops, and every range.
        for done in 0u32..256 {
            for first in 0..=10 {
                for last in 0..=10 {
                    let mut ops = PeerOps::new();
                    for i in 1..=8u64 {
                        assert_eq!(ops.issue(OpKind::Put, t, i), i);
                    }
                    for i in 1..=8u64 {
                        if done & (1 << (i - 1)) != 0 {
                            ops.complete(i).unwrap();
                        }
                    }
                    let outstanding = |i: u64| done & (1 << (i - 1)) == 0;
                    let want: Vec<u64> = (first.max(1)..=last.min(8))
                        .filter(|&i| outstanding(i))
                        .collect();
                    assert_eq!(
                        run(&mut ops, first, last),
                        want,
                        "done {done:08b}, {first}..={last}"
                    );
                    // The same table as completing them one by one.
                    let left: Vec<u64> = (1..=8)
                        .filter(|&i| outstanding(i) && !want.contains(&i))
                        .collect();
                    assert_eq!(ops.outstanding(), left.len());
                    for i in 1..=8 {
                        assert_eq!(ops.get_mut(i).is_some(), left.contains(&i), "op {i}");
                    }
                    assert_eq!(ops.done_before(9), left.is_empty());
                    assert_eq!(ops.next_id(), 9, "ids are never reused");
                }
            }
        }
    }

    #[test]
    fn a_forged_range_completes_nothing_and_costs_nothing() {
        let t = Instant::now();
        let mut ops = PeerOps::new();
        for i in 1..=3u64 {
            ops.issue(OpKind::Put, t, i);
        }
        assert!(run(&mut ops, 4, u64::MAX).is_empty());
        assert!(run(&mut ops, 3, 2).is_empty());
        assert_eq!(run(&mut ops, 0, u64::MAX), vec![1, 2, 3]);
        assert!(run(&mut ops, 0, u64::MAX).is_empty());
        assert_eq!(ops.outstanding(), 0);
    }

    #[test]
    fn ids_start_at_one_and_complete_out_of_order() {
        let t = Instant::now();
        let mut ops = PeerOps::new();
        let a = ops.issue(OpKind::Put, t, 'a');
        let b = ops.issue(OpKind::Get, t, 'b');
        let c = ops.issue(OpKind::Notify, t, 'c');
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(ops.complete(b).map(|o| o.waiter), Some('b'));
        assert_eq!(
            ops.complete(b).map(|o| o.waiter),
            None,
            "a second reply completes nothing"
        );
        assert_eq!(ops.outstanding(), 2);
        assert_eq!(ops.complete(a).map(|o| o.kind), Some(OpKind::Put));
        assert_eq!(ops.complete(c).map(|o| o.kind), Some(OpKind::Notify));
        assert_eq!(ops.outstanding(), 0);
        assert_eq!(ops.next_id(), 4);
        assert!(
            ops.complete(0).is_none()
                && ops.complete(99).is_none()
                && ops.complete(u64::MAX).is_none()
        );
    }

    #[test]
    fn quiet_ticket_ignores_ops_issued_after_it() {
        let t = Instant::now();
        let mut ops = PeerOps::new();
        let a = ops.issue(OpKind::Put, t, ());
        let ticket = ops.next_id();
        assert!(!ops.done_before(ticket));
        let later = ops.issue(OpKind::Put, t, ());
        assert_eq!(ops.pending_before(ticket).len(), 1);
        ops.complete(a);
        assert!(
            ops.done_before(ticket),
            "the op issued after the ticket does not hold quiet"
        );
        assert!(!ops.done_before(ops.next_id()));
        ops.complete(later);
        assert!(ops.done_before(ops.next_id()));
    }

    #[test]
    fn expire_removes_only_ops_older_than_the_cutoff() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(5);
        let mut ops = PeerOps::new();
        ops.issue(OpKind::Put, t0, 1);
        ops.issue(OpKind::Get, t1, 2);
        let gone = ops.expire(t0 + Duration::from_secs(1));
        assert_eq!(gone.iter().map(|o| o.waiter).collect::<Vec<_>>(), vec![1]);
        assert_eq!(ops.outstanding(), 1);
    }

    #[test]
    fn drain_fails_everything_and_never_reuses_ids() {
        let t = Instant::now();
        let mut ops = PeerOps::new();
        for i in 0..5 {
            ops.issue(OpKind::AtomicAdd, t, i);
        }
        ops.complete(2);
        let drained: Vec<u64> = ops.drain().iter().map(|o| o.id).collect();
        assert_eq!(drained, vec![1, 3, 4, 5]);
        assert_eq!(ops.outstanding(), 0);
        assert!(ops.done_before(u64::MAX));
        assert!(
            ops.complete(3).is_none(),
            "a late reply to a drained op completes nothing"
        );
        assert_eq!(ops.issue(OpKind::Put, t, 9), 6);
    }
}
