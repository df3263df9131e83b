//! What checked mode records of one access to a window.

use super::clock::Epoch;
use std::fmt;
use std::sync::Arc;

/// The kind of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccessKind {
    /// A peer's put (a `remote_store`, a `tensor.put` chunk, a client's Put).
    Put,
    /// A peer's get (a `remote_load`, a `tensor.get` chunk, a client's Get).
    Get,
    /// A peer's atomic add (a put with `atomic=Add`, `atomic_add`).
    AtomicAdd,
    /// A peer's fetch-and-add.
    FetchAdd,
    /// A peer's compare-and-swap.
    CompareSwap,
    /// A peer's other single-cell atomic that writes: swap, set, and / or
    /// / xor (OpenSHMEM's AMOs).
    Atomic,
    /// A peer's atomic fetch of a cell.
    AtomicRead,
    /// The owner reading its own window (`pl.load` of its view, a local Get).
    Load,
    /// The owner writing its own window (`pl.store` into its view, a local Put).
    Store,
}

impl AccessKind {
    /// Whether the access changes bytes.
    pub const fn writes(self) -> bool {
        match self {
            AccessKind::Get | AccessKind::Load | AccessKind::AtomicRead => false,
            AccessKind::Put
            | AccessKind::Atomic
            | AccessKind::AtomicAdd
            | AccessKind::FetchAdd
            | AccessKind::CompareSwap
            | AccessKind::Store => true,
        }
    }

    /// Whether the access is an atomic (atomics of one kind on the same
    /// cells never race with each other).
    pub const fn atomic(self) -> bool {
        match self {
            AccessKind::AtomicAdd
            | AccessKind::FetchAdd
            | AccessKind::CompareSwap
            | AccessKind::Atomic
            | AccessKind::AtomicRead => true,
            AccessKind::Put | AccessKind::Get | AccessKind::Load | AccessKind::Store => false,
        }
    }

    /// Whether the window's owner made it, to its own memory (a load or a
    /// store), rather than a peer.
    pub const fn by_owner(self) -> bool {
        match self {
            AccessKind::Load | AccessKind::Store => true,
            AccessKind::Put
            | AccessKind::Get
            | AccessKind::AtomicAdd
            | AccessKind::FetchAdd
            | AccessKind::CompareSwap
            | AccessKind::Atomic
            | AccessKind::AtomicRead => false,
        }
    }

    /// The same access made by the window's owner to its own memory: a
    /// put is a store, a get a load; an atomic stays what it is.
    pub const fn own(self) -> AccessKind {
        match self {
            AccessKind::Put | AccessKind::Store => AccessKind::Store,
            AccessKind::Get | AccessKind::Load => AccessKind::Load,
            AccessKind::AtomicAdd => AccessKind::AtomicAdd,
            AccessKind::FetchAdd => AccessKind::FetchAdd,
            AccessKind::CompareSwap => AccessKind::CompareSwap,
            AccessKind::Atomic => AccessKind::Atomic,
            AccessKind::AtomicRead => AccessKind::AtomicRead,
        }
    }

    /// Whether two accesses to the same bytes conflict when unordered: at
    /// least one writes, and they are not atomics of one family (adds,
    /// fetching or not, commute; compare-and-swaps serialize).
    pub fn conflicts(self, other: AccessKind) -> bool {
        if !self.writes() && !other.writes() {
            return false;
        }
        let adds = |k| matches!(k, AccessKind::AtomicAdd | AccessKind::FetchAdd);
        // OpenSHMEM's AMOs (swap, fetch, set, the bitwise ops) are atomic
        // with respect to every other atomic on the cell.
        let amo = |k| matches!(k, AccessKind::Atomic | AccessKind::AtomicRead);
        let same_family = (adds(self) && adds(other))
            || (self == AccessKind::CompareSwap && other == AccessKind::CompareSwap)
            || (amo(self) && other.atomic())
            || (amo(other) && self.atomic());
        !same_family
    }

    /// What a notify of a signal cell (or put_signal's signal) is to the
    /// cell: an atomic add, or an atomic write (set). It races with a
    /// plain load, store, put or get of the cell that nothing orders with
    /// it — a reader that does not wait for the notify — and with no
    /// other atomic.
    pub const fn of_notify(op: crate::NotifyOp) -> Option<AccessKind> {
        match op {
            crate::NotifyOp::AtomicAdd => Some(AccessKind::AtomicAdd),
            crate::NotifyOp::Set => Some(AccessKind::Atomic),
            crate::NotifyOp::Unspecified => None,
        }
    }

    /// The verb a report uses ("rank 1 remote_loaded ...").
    pub fn verb(self) -> &'static str {
        match self {
            AccessKind::Put => "put into",
            AccessKind::Get => "read (get / remote_load)",
            AccessKind::AtomicAdd => "atomically added to",
            AccessKind::FetchAdd => "fetch_added",
            AccessKind::CompareSwap => "compare_swapped",
            AccessKind::Atomic => "atomically wrote (swap / set / and / or / xor)",
            AccessKind::AtomicRead => "atomically fetched",
            AccessKind::Load => "loaded its own",
            AccessKind::Store => "stored into its own",
        }
    }
}

/// One access, as the window's shadow keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    /// Who accessed, and at which point of its history.
    pub at: Epoch,
    /// What it did.
    pub kind: AccessKind,
    /// The accessing rank's op id (0 for a local access).
    pub op: u64,
    /// The barrier epoch the accessing rank was in (barriers it had left).
    pub barrier_epoch: u64,
    /// Where the program made it, as the front end names it — in the
    /// device, the tensor, offsets and shape (`data[0, 0:64]`); empty when
    /// the front end said nothing.
    pub site: Arc<str>,
}

impl Access {
    /// The accessing rank.
    pub fn rank(&self) -> u32 {
        self.at.rank
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {} {}", self.at.rank, self.kind.verb())?;
        if self.op != 0 {
            write!(f, " (op {})", self.op)?;
        }
        if !self.site.is_empty() {
            write!(f, " at {}", self.site)?;
        }
        write!(f, " after {} barrier(s)", self.barrier_epoch)
    }
}
