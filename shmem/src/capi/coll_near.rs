//! The collectives when the PEs share their heaps and `source` and `dest`
//! are on the heap: each member copies straight out of the others'
//! symmetric `source` into its own `dest` between two barriers — every byte
//! that moves is copied once, by the member that needs it, with no
//! scratch and no message. The entry barrier says every member's `source`
//! is ready (and nobody still reads a `dest` this call writes); the exit
//! barrier keeps every `source` until all have copied from it.

use crate::near::Near;
use crate::pe::{Pe, fatal};
use crate::team::group::{CollError, Members};
use pld_proto::collective::{Group, Plain};
use pld_server::WindowId;

/// A collective's buffers, through shared memory.
pub(crate) struct Direct<'g, 'a> {
    near: &'a Near,
    g: &'g Members<'a>,
    heap: WindowId,
    /// `source`'s offset in every member's heap.
    source: u64,
    /// `dest`'s offset in this member's heap.
    dest: u64,
    /// This PE.
    me: u32,
}

impl<'g, 'a> Direct<'g, 'a> {
    /// The direct form of a collective of `g` whose `source` spans
    /// `source_bytes` and `dest` `dest_bytes`, if both are on the shared
    /// heap.
    pub(crate) fn new(
        p: &'a Pe,
        g: &'g Members<'a>,
        call: &'static str,
        (dest, dest_bytes): (*mut u8, usize),
        (source, source_bytes): (*const u8, usize),
    ) -> Option<Direct<'g, 'a>> {
        let near = p.near()?;
        let me = p.rank().rank();
        let (heap, off) = p
            .try_locate(call, source, source_bytes.max(1) as u64)
            .ok()?;
        near.at(me, heap, off, source_bytes as u64)?;
        let (dheap, doff) = p.try_locate(call, dest, dest_bytes.max(1) as u64).ok()?;
        near.at(me, dheap, doff, dest_bytes as u64)?;
        Some(Direct {
            near,
            g,
            heap,
            source: off,
            dest: doff,
            me,
        })
    }

    /// `len` bytes at heap offset `off` of `pe`, in this process; fatal
    /// past the heap's end (a `source` or `dest` shorter than the call
    /// says).
    fn heap_at(&self, what: &str, pe: u32, off: u64, len: usize) -> *mut u8 {
        match self.near.at(pe, self.heap, off, len as u64) {
            Some(p) => p,
            None => fatal(format!(
                "a collective's {what}: {len} bytes at heap offset {off} of PE {pe} run past the symmetric heap"
            )),
        }
    }

    /// `len` bytes at `at` of member `i`'s `source`, in this process.
    fn source_of(&self, i: u32, at: usize, len: usize) -> *const u8 {
        self.heap_at("source", self.g.pe_of(i), self.source + at as u64, len)
    }

    /// Copies `len` bytes of member `i`'s `source` at `from` to `dest + to`.
    fn pull(&self, i: u32, from: usize, to: usize, len: usize) {
        let src = self.source_of(i, from, len);
        let dst = self.heap_at("dest", self.me, self.dest + to as u64, len);
        // SAFETY: both ranges lie in live heap mappings (checked above);
        // `copy`, as in place they may be the same bytes.
        unsafe { std::ptr::copy(src, dst, len) };
    }

    /// `broadcast`: every member's `dest` gets the root's `source` (the
    /// root's own too unless `root_keeps`).
    pub(crate) async fn broadcast(
        &self,
        root: u32,
        bytes: usize,
        root_keeps: bool,
    ) -> Result<(), CollError> {
        self.g.barrier().await?;
        if self.g.rank() != root || !root_keeps {
            self.pull(root, 0, 0, bytes);
        }
        self.g.barrier().await
    }

    /// `fcollect`: every member's `bytes`, in member order.
    pub(crate) async fn fcollect(&self, bytes: usize) -> Result<(), CollError> {
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
        self.g.barrier().await?;
        let mut at = 0;
        for i in 0..self.g.nranks() {
            let len = count_of(i).max(0) as usize * size;
            self.pull(i, 0, at, len);
            at += len;
        }
        self.g.barrier().await
    }

    /// `alltoall`: block (this member) of member i's `source` to block i of
    /// `dest`.
    pub(crate) async fn alltoall(&self, block: usize) -> Result<(), CollError> {
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
    pub(crate) async fn reduce<T: Plain, F: Fn(T, T) -> T>(
        &self,
        n: usize,
        combine: F,
    ) -> Result<(), CollError> {
        /// Elements combined at a time: the vectors stay small.
        const CHUNK: usize = 8192;
        let (members, me) = (self.g.nranks() as usize, self.g.rank() as usize);
        let per = n.div_ceil(members);
        let slice = |m: usize| (m * per).min(n)..((m + 1) * per).min(n);
        self.g.barrier().await?;
        let (mut acc, mut x) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
        let mine = slice(me);
        for start in mine.clone().step_by(CHUNK) {
            let len = CHUNK.min(mine.end - start);
            let (at, bytes) = (start * T::SIZE, len * T::SIZE);
            let view = |i: u32, into: &mut Vec<T>| {
                into.clear();
                // SAFETY: `source_of` gives `bytes` readable bytes of a
                // live mapping; the program does not change a `source`
                // during the call.
                let b = unsafe { std::slice::from_raw_parts(self.source_of(i, at, bytes), bytes) };
                T::read_all(b, into);
            };
            view(0, &mut acc);
            for i in 1..members as u32 {
                view(i, &mut x);
                for (a, v) in acc.iter_mut().zip(&x) {
                    *a = combine(*a, *v);
                }
            }
            let dst = self.heap_at("dest", self.me, self.dest + at as u64, bytes);
            // SAFETY: `dst` holds `bytes` bytes of this PE's heap.
            T::write_all(&acc, unsafe { std::slice::from_raw_parts_mut(dst, bytes) });
        }
        self.g.barrier().await?;
        for m in (0..members).filter(|m| *m != me) {
            let r = slice(m);
            let (at, len) = (r.start * T::SIZE, r.len() * T::SIZE);
            let pe = self.g.pe_of(m as u32);
            let src = self.heap_at("dest", pe, self.dest + at as u64, len);
            let dst = self.heap_at("dest", self.me, self.dest + at as u64, len);
            // SAFETY: both in live heap mappings (checked); different
            // PEs' memory.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        }
        // Every member's slice stays until all have copied it.
        self.g.barrier().await
    }
}
