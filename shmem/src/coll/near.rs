//! The collectives when the PEs share their memory and `source` and `dest`
//! are in it (the heap, or static data where the data segments are
//! shared too): each member copies straight out of the others'
//! symmetric `source` into its own `dest` between two barriers — every byte
//! that moves is copied once, by the member that needs it, with no
//! scratch and no message. The entry barrier says every member's `source`
//! is ready (and nobody still reads a `dest` this call writes); the exit
//! barrier keeps every `source` until all have copied from it.
//!
//! Up to [`ONE_ROUND_BYTES`] a member moves, and where the group fits its
//! flag cells (`team::flags`), the collectives run without barriers:
//! broadcast, fcollect and alltoall push each member's part straight into
//! the others' `dest` and signal each one (the specification has every
//! `dest` ready before any PE calls, and the pushes are done when the
//! pusher returns, so its `source` is free); collect first signals that its
//! count is published; a team's reduction pushes each `source` into the
//! others' mailboxes (`team::mailbox`) and combines what it was sent; an
//! active set's (no mailbox) signals that its `source` is ready, combines
//! every member's into a buffer of its own, signals that it is done
//! reading, and writes `dest` once all are (`dest` may be `source`).

use super::fold::Fold;
use crate::fatal::fatal;
use crate::near::Near;
use crate::pe::Pe;
use crate::team::flags::Flags;
use crate::team::group::{CollError, Members};
use crate::team::mailbox::Slots;
use pld_proto::collective::{Group, Plain};
use pld_server::WindowId;

/// The most bytes a member moves in a one-round collective: past it the
/// copies dominate, and pulling spreads them over the members (a root
/// that pushes copies everything itself).
pub(crate) const ONE_ROUND_BYTES: usize = 64 << 10;

/// `base + at` as an offset; past any window where that overflows, so
/// that the bounds check refuses it by name.
fn offset(base: u64, at: usize) -> u64 {
    base.saturating_add(at as u64)
}

/// A collective's buffers, through shared memory.
pub(crate) struct Direct<'g, 'a> {
    near: &'a Near,
    g: &'g Members<'a>,
    /// The heap window, where the mailboxes are.
    heap: WindowId,
    /// `source`'s window and offset, the same on every member.
    source: (WindowId, u64),
    /// `dest`'s window and offset.
    dest: (WindowId, u64),
    /// This PE.
    me: u32,
}

impl<'g, 'a> Direct<'g, 'a> {
    /// The direct form of a collective of `g` whose `source` spans
    /// `source_bytes` and `dest` `dest_bytes`, if both are in shared
    /// memory (which is so on every member alike: the spaces are
    /// symmetric and `near` maps them for all or none).
    pub(crate) fn new(
        p: &'a Pe,
        g: &'g Members<'a>,
        call: &'static str,
        (dest, dest_bytes): (*mut u8, usize),
        (source, source_bytes): (*const u8, usize),
    ) -> Option<Direct<'g, 'a>> {
        let near = p.near()?;
        let me = p.rank().rank();
        let (swin, soff) = p
            .try_locate(call, source, source_bytes.max(1) as u64)
            .ok()?;
        near.at(me, swin, soff, source_bytes as u64)?;
        let (dwin, doff) = p.try_locate(call, dest, dest_bytes.max(1) as u64).ok()?;
        near.at(me, dwin, doff, dest_bytes as u64)?;
        Some(Direct {
            near,
            g,
            heap: p.heap_window(),
            source: (swin, soff),
            dest: (dwin, doff),
            me,
        })
    }

    /// `len` bytes at offset `off` of window `win` of `pe`, in this
    /// process; fatal past the shared memory's end (a `source` or `dest`
    /// shorter than the call says).
    fn mapped(&self, what: &str, win: WindowId, pe: u32, off: u64, len: usize) -> *mut u8 {
        match self.near.at(pe, win, off, len as u64) {
            Some(p) => p,
            None => fatal(format!(
                "a collective's {what}: {len} bytes at offset {off} of PE {pe}'s {} run past its shared memory",
                if win == self.heap {
                    "symmetric heap"
                } else {
                    "data segment"
                }
            )),
        }
    }

    /// `len` bytes at `at` of member `i`'s `source`, in this process.
    fn source_of(&self, i: u32, at: usize, len: usize) -> *const u8 {
        let (win, off) = self.source;
        self.mapped("source", win, self.g.pe_of(i), offset(off, at), len)
    }

    /// `len` bytes at `at` of `pe`'s `dest`, in this process.
    fn dest_of(&self, pe: u32, at: usize, len: usize) -> *mut u8 {
        let (win, off) = self.dest;
        self.mapped("dest", win, pe, offset(off, at), len)
    }

    /// `len` bytes at `at` of `pe`'s mailbox, in this process.
    fn mailbox_of(&self, pe: u32, at: u64, len: usize) -> *mut u8 {
        self.mapped("mailbox", self.heap, pe, at, len)
    }

    /// Copies `len` bytes of member `i`'s `source` at `from` to `dest + to`.
    fn pull(&self, i: u32, from: usize, to: usize, len: usize) {
        let src = self.source_of(i, from, len);
        let dst = self.dest_of(self.me, to, len);
        // SAFETY: both ranges lie in live heap mappings (checked above);
        // `copy`, as in place they may be the same bytes.
        unsafe { std::ptr::copy(src, dst, len) };
    }

    /// Copies `len` bytes of this member's `source` at `from` to member
    /// `i`'s `dest + to`.
    fn push(&self, i: u32, from: usize, to: usize, len: usize) {
        let src = self.source_of(self.g.rank(), from, len);
        let dst = self.dest_of(self.g.pe_of(i), to, len);
        // SAFETY: both ranges lie in live heap mappings (checked above);
        // `copy`, as in place they may be the same bytes.
        unsafe { std::ptr::copy(src, dst, len) };
    }

    /// The flags, if this call may run in one round.
    fn one_round(&self, bytes: usize) -> Option<Flags<'g>> {
        (bytes <= ONE_ROUND_BYTES).then(|| self.g.flags()).flatten()
    }

    /// `broadcast`: every member's `dest` gets the root's `source` (the
    /// root's own too unless `root_keeps`).
    pub(crate) async fn broadcast(
        &self,
        root: u32,
        bytes: usize,
        root_keeps: bool,
    ) -> Result<(), CollError> {
        if let Some(f) = self.one_round(bytes) {
            if self.g.rank() != root {
                return self.g.take(&f, Some(root)).await;
            }
            for i in (0..self.g.nranks()).filter(|i| *i != root) {
                self.push(i, 0, 0, bytes);
                f.signal(i);
            }
            if !root_keeps {
                self.pull(root, 0, 0, bytes);
            }
            return Ok(());
        }
        self.g.barrier().await?;
        if self.g.rank() != root || !root_keeps {
            self.pull(root, 0, 0, bytes);
        }
        self.g.barrier().await
    }

    /// `fcollect`: every member's `bytes`, in member order.
    pub(crate) async fn fcollect(&self, bytes: usize) -> Result<(), CollError> {
        if let Some(f) = self.one_round(bytes * self.g.nranks() as usize) {
            let me = self.g.rank();
            for i in (0..self.g.nranks()).filter(|i| *i != me) {
                self.push(i, 0, me as usize * bytes, bytes);
                f.signal(i);
            }
            self.pull(me, 0, me as usize * bytes, bytes);
            return self.g.take(&f, None).await;
        }
        self.g.barrier().await?;
        for i in 0..self.g.nranks() {
            self.pull(i, 0, i as usize * bytes, bytes);
        }
        self.g.barrier().await
    }

    /// `collect`: member i's `counts[i]` elements of `size` bytes, in
    /// member order. The counts come from the members' count cells, which
    /// `count_of` reads after the entry barrier.
    pub(crate) async fn collect(
        &self,
        size: usize,
        count_of: impl Fn(u32) -> i64,
    ) -> Result<(), CollError> {
        // A member's count was checked against the address space when it
        // entered; their sums are checked here.
        let len = |i: u32| {
            usize::try_from(count_of(i))
                .unwrap_or(0)
                .saturating_mul(size)
        };
        let sum = |r: std::ops::Range<u32>| {
            r.map(len)
                .try_fold(0usize, usize::checked_add)
                .unwrap_or_else(|| {
                    fatal("collect: the members' counts add up to more bytes than an address space holds")
                })
        };
        match self.g.flags() {
            Some(f) => {
                // Every count is published (a member writes its next one
                // only after the last round's signals: all have read it).
                f.signal_all();
                self.g.take(&f, None).await?;
                let me = self.g.rank();
                let at = sum(0..me);
                let total = sum(0..self.g.nranks());
                if total <= ONE_ROUND_BYTES {
                    let mine = len(me);
                    for i in (0..self.g.nranks()).filter(|i| *i != me) {
                        self.push(i, 0, at, mine);
                        f.signal(i);
                    }
                    self.pull(me, 0, at, mine);
                    return self.g.take(&f, None).await;
                }
            }
            None => self.g.barrier().await?,
        }
        // Large, or no flag cells: each member pulls every part; the
        // barrier keeps each `source` and count until all have read them.
        sum(0..self.g.nranks());
        let mut at = 0;
        for i in 0..self.g.nranks() {
            self.pull(i, 0, at, len(i));
            at += len(i);
        }
        self.g.barrier().await
    }

    /// `alltoall`: block (this member) of member i's `source` to block i of
    /// `dest`.
    pub(crate) async fn alltoall(&self, block: usize) -> Result<(), CollError> {
        if let Some(f) = self.one_round(block * self.g.nranks() as usize) {
            let me = self.g.rank();
            for i in (0..self.g.nranks()).filter(|i| *i != me) {
                self.push(i, i as usize * block, me as usize * block, block);
                f.signal(i);
            }
            self.pull(me, me as usize * block, me as usize * block, block);
            return self.g.take(&f, None).await;
        }
        self.g.barrier().await?;
        let me = self.g.rank() as usize;
        for i in 0..self.g.nranks() {
            self.pull(i, me * block, i as usize * block, block);
        }
        self.g.barrier().await
    }

    /// A reduction, reduce-scatter then allgather: member m combines
    /// slice m of every member's `source`, in member order (so the result
    /// is the same bit for bit whoever computes it), into slice m of its
    /// own `dest` — only member m reads slice m anywhere, so `dest` may be
    /// `source` — then, after a barrier, copies every other slice from the
    /// member that computed it.
    pub(crate) async fn reduce<T: Plain>(
        &self,
        n: usize,
        fold: &dyn Fold<T>,
    ) -> Result<(), CollError> {
        /// Elements combined at a time: the vectors stay small.
        const CHUNK: usize = 8192;
        let (members, me) = (self.g.nranks() as usize, self.g.rank() as usize);
        if let Some(f) = self.one_round(n * T::SIZE) {
            let bytes = (n * T::SIZE) as u64;
            return match self.g.mailbox() {
                Some(m) if bytes <= m.slot_bytes(members as u32) => {
                    let slots = m.begin(members as u32);
                    self.reduce_pushed(&f, &slots, n, fold).await
                }
                _ => self.reduce_one_round(&f, n, fold).await,
            };
        }
        let per = n.div_ceil(members);
        let slice = |m: usize| (m * per).min(n)..((m + 1) * per).min(n);
        self.g.barrier().await?;
        let mut acc = Vec::with_capacity(CHUNK);
        let mine = slice(me);
        for start in mine.clone().step_by(CHUNK) {
            let len = CHUNK.min(mine.end - start);
            let (at, bytes) = (start * T::SIZE, len * T::SIZE);
            self.combine_into(&mut acc, (at, len), fold);
            let dst = self.dest_of(self.me, at, bytes);
            // SAFETY: `dst` holds `bytes` bytes of this PE's heap; `acc`
            // is `len` elements of our own.
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr().cast::<u8>(), dst, bytes) };
        }
        self.g.barrier().await?;
        for m in (0..members).filter(|m| *m != me) {
            let r = slice(m);
            let (at, len) = (r.start * T::SIZE, r.len() * T::SIZE);
            let pe = self.g.pe_of(m as u32);
            let src = self.dest_of(pe, at, len);
            let dst = self.dest_of(self.me, at, len);
            // SAFETY: both in live heap mappings (checked); different
            // PEs' memory.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        }
        // Every member's slice stays until all have copied it.
        self.g.barrier().await
    }

    /// A small reduction without barriers: every `source` is ready (first
    /// round), each member combines all of them in member order into a
    /// buffer, all are done reading (second round), each writes its `dest`.
    async fn reduce_one_round<T: Plain>(
        &self,
        f: &Flags<'_>,
        n: usize,
        fold: &dyn Fold<T>,
    ) -> Result<(), CollError> {
        let bytes = n * T::SIZE;
        f.signal_all();
        self.g.take(f, None).await?;
        let mut acc = Vec::with_capacity(n);
        self.combine_into(&mut acc, (0, n), fold);
        f.signal_all();
        self.g.take(f, None).await?;
        let dst = self.dest_of(self.me, 0, bytes);
        // SAFETY: `dst` holds `bytes` bytes of this PE's heap; `acc` is
        // `n` elements of our own.
        unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr().cast::<u8>(), dst, bytes) };
        Ok(())
    }

    /// A small reduction in one round: each member pushes its `source`
    /// into its slot of every other member's mailbox and signals it; once
    /// all have, each combines its own `source` and its mailbox's slots in
    /// member order and writes its `dest`. The pushes are done when a
    /// member returns, so its `source` is free (and `dest` may be
    /// `source`: it is read before `dest` is written).
    async fn reduce_pushed<T: Plain>(
        &self,
        f: &Flags<'_>,
        slots: &Slots,
        n: usize,
        fold: &dyn Fold<T>,
    ) -> Result<(), CollError> {
        let bytes = n * T::SIZE;
        let me = self.g.rank();
        let mine = self.source_of(me, 0, bytes);
        for i in (0..self.g.nranks()).filter(|i| *i != me) {
            let to = self.mailbox_of(self.g.pe_of(i), slots.of(me), bytes);
            // SAFETY: `mine` is `bytes` bytes of this PE's `source`, `to`
            // the slot of another PE's mailbox (both checked live).
            unsafe { std::ptr::copy_nonoverlapping(mine, to, bytes) };
            f.signal(i);
        }
        self.g.take(f, None).await?;
        let part = |i: u32| match i == me {
            true => mine,
            false => self.mailbox_of(self.me, slots.of(i), bytes).cast_const(),
        };
        let mut acc = Vec::with_capacity(n);
        combine_parts(&mut acc, n, (0..self.g.nranks()).map(part), fold);
        let dst = self.dest_of(self.me, 0, bytes);
        // SAFETY: `dst` holds `bytes` bytes of this PE's heap; `acc` is
        // `n` elements of our own.
        unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr().cast::<u8>(), dst, bytes) };
        Ok(())
    }

    /// Sets `acc` to the `len` elements at byte `at` of every member's
    /// `source`, combined in member order (the same result bit for bit
    /// whoever computes it), read straight out of the mappings.
    fn combine_into<T: Plain>(
        &self,
        acc: &mut Vec<T>,
        (at, len): (usize, usize),
        fold: &dyn Fold<T>,
    ) {
        let bytes = len * T::SIZE;
        let parts = (0..self.g.nranks()).map(|i| self.source_of(i, at, bytes));
        combine_parts(acc, len, parts, fold);
    }
}

/// Sets `acc` to the `len` elements at each of `parts`, combined in order.
/// Every part must be `len` readable elements of a live mapping that
/// nobody changes meanwhile.
fn combine_parts<T: Plain>(
    acc: &mut Vec<T>,
    len: usize,
    mut parts: impl Iterator<Item = *const u8>,
    fold: &dyn Fold<T>,
) {
    const { assert!(T::SIZE == std::mem::size_of::<T>()) };
    acc.clear();
    let Some(first) = parts.next() else {
        return;
    };
    acc.reserve(len);
    // SAFETY: `first` is `len` readable elements (the callers' parts: a
    // `source` or a mailbox slot, checked live), `acc` has room for `len`,
    // and every Plain type is a number or bytes, valid at any bit pattern.
    unsafe {
        std::ptr::copy_nonoverlapping(first, acc.as_mut_ptr().cast::<u8>(), len * T::SIZE);
        acc.set_len(len);
    }
    for from in parts {
        // SAFETY: as above, `from` is `len` readable elements.
        unsafe { fold.fold(acc, from) };
    }
}
