//! A team's mailbox: where the members of a small reduction through
//! shared memory push their `source` into each other's bytes, so the
//! reduction needs one round of signals, not two (with nothing pushed,
//! every `source` must stay until all have read it: a second round).
//!
//! Each member keeps a slot per sender, in two halves taken in turn by
//! the team's successive mailbox reductions. Two halves suffice: a member
//! writes into a half again two reductions later, and it cannot have
//! finished the reduction between without the owner's signal of that one,
//! which the owner sends only after reading the half in the one before.
//! All members count the team's reductions alike (a team's collectives
//! are called in the same order on every member), so they agree on the
//! half without a word.

use std::sync::atomic::{AtomicU64, Ordering};

/// A team's mailbox in its slot of the reserved heap bytes.
pub(crate) struct Mailbox {
    /// The first byte's offset in the heap, the same on every member.
    offset: u64,
    bytes: u64,
    /// The team's mailbox reductions so far, here.
    calls: AtomicU64,
}

/// Where one call of a mailbox reduction puts each sender's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slots {
    /// The offset of this call's half.
    half: u64,
    /// Bytes of one sender's slot.
    pub slot_bytes: u64,
}

impl Slots {
    /// The heap offset of `sender`'s slot in this call's half, on every
    /// member.
    pub(crate) fn of(&self, sender: u32) -> u64 {
        self.half + sender as u64 * self.slot_bytes
    }
}

impl Mailbox {
    /// The mailbox of `bytes` bytes at heap offset `offset`.
    pub(crate) fn new(offset: u64, bytes: u64) -> Mailbox {
        Mailbox {
            offset,
            bytes,
            calls: AtomicU64::new(0),
        }
    }

    /// Bytes of one sender's slot for a team of `members` (a multiple of
    /// 64, so that senders do not share a cache line, where it can be).
    pub(crate) fn slot_bytes(&self, members: u32) -> u64 {
        let per = self.bytes / (2 * members.max(1) as u64);
        if per >= 64 {
            per / 64 * 64
        } else {
            per / 8 * 8
        }
    }

    /// Starts a mailbox reduction of `members` members: the slots of its
    /// half. Every member calls this exactly when the others do.
    pub(crate) fn begin(&self, members: u32) -> Slots {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let slot_bytes = self.slot_bytes(members);
        Slots {
            half: self.offset + (call % 2) * slot_bytes * members as u64,
            slot_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox() -> Mailbox {
        Mailbox::new(1024, 7 << 10)
    }

    #[test]
    fn successive_calls_alternate_halves_that_do_not_overlap() {
        let m = mailbox();
        let (a, b, c) = (m.begin(4), m.begin(4), m.begin(4));
        assert_eq!(a.of(0), 1024);
        assert_eq!(b.of(0), 1024 + 4 * a.slot_bytes);
        assert_eq!(c.of(0), a.of(0));
        // The last slot of the second half ends inside the mailbox.
        assert!(b.of(3) + b.slot_bytes <= 1024 + (7 << 10));
    }

    #[test]
    fn slots_are_cache_lines_apart_where_they_can_be() {
        let m = mailbox();
        assert_eq!(m.slot_bytes(2), 1792);
        assert_eq!(m.slot_bytes(8), 448);
        assert_eq!(m.slot_bytes(63) % 8, 0);
        assert!(m.slot_bytes(63) * 2 * 63 <= 7 << 10);
    }
}
