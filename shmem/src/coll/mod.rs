//! The collectives: broadcast, collect, fcollect, alltoall(s) and the
//! reductions, over a team (the 1.5 forms) or an active set with its
//! `pSync` array (the 1.4 forms). Each is one of the house's algorithms
//! (`pld_proto::collective`) over the members ([`Members`]), its scratch
//! the program's symmetric `dest`; a barrier on entry keeps a member from
//! writing another's `dest` before that one has entered the call (and so
//! stopped reading what the last call left there), which also makes the
//! in-place forms safe. docs/shmem.md gives each one's message count.

mod fold;
mod near;
mod scope;

pub(crate) use fold::{ByC, ByOp, Combine, Fold, Op, Reducible};
pub(crate) use scope::{Scope, active_barrier};

use crate::fatal::fatal;
use crate::job::job;
use crate::pe::Pe;
use crate::team::agree::{Desc, agree};
use crate::team::group::{CollError, Members, flatten};
use near::Direct;
use pld_proto::collective::{self as coll, Algo, Group, Plain, Scratch, decode, encode};
use scope::hold;

/// Runs `f` over the members of `scope`, fatal on its error; -1 for an
/// invalid team. Under `--checked` the members first agree that they all
/// make the call `desc` (`team::agree`).
fn over<F>(call: &'static str, scope: Scope, desc: Desc, f: F) -> i32
where
    F: for<'a> AsyncFnOnce(&'static Pe, Members<'a>) -> Result<(), CollError>,
{
    let j = job(call);
    let p = j.pe();
    let Some(held) = hold(j, call, scope) else {
        return -1;
    };
    let g = held.group(p);
    if p.checked() {
        p.run(call, agree(&g, &desc));
    }
    p.run(call, f(p, g));
    0
}

/// A call of `count` elements: what its members must agree on.
fn counted(call: &'static str, count: usize) -> Desc {
    Desc {
        nelems: Some(count as u64),
        ..Desc::of(call)
    }
}

/// `count` elements of `T`, `times` over (the members, for the calls
/// whose `dest` holds every member's part), as bytes; the PE ends naming
/// the call where that does not fit an address space: a wrapped count
/// would move nothing, or a few bytes, where the program asked for more
/// than exists.
pub(crate) fn byte_count<T: Plain>(call: &'static str, count: usize, times: usize) -> usize {
    count
        .checked_mul(times)
        .and_then(|e| e.checked_mul(T::SIZE))
        .filter(|&b| isize::try_from(b).is_ok())
        .unwrap_or_else(|| {
            let by = if times == 1 {
                String::new()
            } else {
                format!(" for each of {times} members")
            };
            fatal(format!(
                "{call}: {count} elements of {} bytes{by} are more bytes than an address space holds",
                T::SIZE
            ))
        })
}

/// `len` bytes at `ptr`, as elements.
///
/// # Safety
/// `ptr` is valid for `len` bytes.
unsafe fn read<T: Plain>(ptr: *const T, elems: usize) -> Vec<T> {
    if elems == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    decode(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), elems * T::SIZE) })
}

/// Writes `values` at `ptr`.
///
/// # Safety
/// `ptr` is valid for `values.len()` elements.
unsafe fn write<T: Plain>(ptr: *mut T, values: &[T]) {
    let b = encode(values);
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), ptr.cast::<u8>(), b.len()) };
}

/// The symmetric `elems` elements at `dest` as a collective's scratch.
fn scratch<T: Plain>(
    p: &Pe,
    call: &'static str,
    dest: *mut T,
    elems: usize,
) -> Scratch<pld_server::WindowId> {
    let bytes = (elems * T::SIZE) as u64;
    let (window, base) = p.locate(call, dest.cast(), bytes.max(1));
    Scratch {
        window,
        base,
        bytes,
    }
}

/// Where a collective whose results take `elems` elements works: the
/// team's own scratch when they fit (no barrier on entry — the house's
/// closing barrier keeps the scratch for the next call — and the results
/// are copied to `dest`), else the program's `dest` itself after a
/// barrier on entry. Returns the scratch and whether it is `dest`.
async fn workspace<T: Plain>(
    p: &Pe,
    call: &'static str,
    g: &Members<'_>,
    dest: *mut T,
    elems: usize,
) -> Result<(Scratch<pld_server::WindowId>, bool), CollError> {
    if let Some(s) = g.scratch_for((elems * T::SIZE) as u64) {
        return Ok((s, false));
    }
    g.barrier().await?;
    Ok((scratch(p, call, dest, elems), true))
}

fn root_of(call: &'static str, g: &Members<'_>, root: i32) -> u32 {
    match u32::try_from(root) {
        Ok(r) if r < g.nranks() => r,
        _ => fatal(format!(
            "{call}: PE_root {root} is not a member: the team has PEs 0..{}",
            g.nranks()
        )),
    }
}

/// `broadcast`: every member's `dest` gets the root's `source`. The 1.4
/// forms leave the root's `dest` as it was (`root_keeps`).
///
/// # Safety
/// `dest` and `source` hold `nelems` elements; `dest` is symmetric.
pub(crate) unsafe fn broadcast<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nelems: usize,
    root: i32,
    root_keeps: bool,
) -> i32 {
    let desc = Desc {
        root: u32::try_from(root).ok(),
        ..counted(call, nelems)
    };
    over(call, scope, desc, async move |p, g| {
        let root = root_of(call, &g, root);
        let bytes = byte_count::<T>(call, nelems, 1);
        let direct = Direct::new(p, &g, call, (dest.cast(), bytes), (source.cast(), bytes));
        if let (Some(d), true) = (direct, nelems > 0) {
            return d.broadcast(root, bytes, root_keeps).await;
        }
        let me = g.rank() == root;
        // SAFETY: the caller's contract.
        let x = unsafe { read(source, if me { nelems } else { 0 }) };
        let x = if me {
            x
        } else {
            vec![T::read_le(&vec![0; T::SIZE]); nelems]
        };
        // SAFETY: as above.
        let kept = (me && root_keeps).then(|| unsafe { read(dest, nelems) });
        if nelems == 0 {
            return g.barrier().await;
        }
        let (s, in_dest) = workspace(p, call, &g, dest, nelems).await?;
        let r = coll::broadcast(&g, &s, &x, root).await.map_err(flatten)?;
        match kept {
            // SAFETY: as above.
            Some(k) if in_dest => unsafe { write(dest, &k) },
            Some(_) => {}
            // SAFETY: as above.
            None if !in_dest => unsafe { write(dest, &r) },
            None => {}
        }
        Ok(())
    })
}

/// `fcollect`: every member's `nelems` elements, concatenated in member
/// order, in every member's `dest`.
///
/// # Safety
/// `source` holds `nelems` elements, `dest` (symmetric) `nelems` per member.
pub(crate) unsafe fn fcollect<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) -> i32 {
    over(call, scope, counted(call, nelems), async move |p, g| {
        let bytes = byte_count::<T>(call, nelems, 1);
        let all_bytes = byte_count::<T>(call, nelems, g.nranks() as usize);
        let all = all_bytes / T::SIZE;
        let direct = Direct::new(
            p,
            &g,
            call,
            (dest.cast(), all_bytes),
            (source.cast(), bytes),
        );
        if let (Some(d), true) = (direct, nelems > 0) {
            return d.fcollect(bytes).await;
        }
        // SAFETY: the caller's contract.
        let x = unsafe { read(source, nelems) };
        if nelems == 0 {
            return g.barrier().await;
        }
        let (s, in_dest) = workspace(p, call, &g, dest, all).await?;
        let r = coll::allgather(&g, &s, &x).await.map_err(flatten)?;
        if !in_dest {
            // SAFETY: as above.
            unsafe { write(dest, &r) };
        }
        Ok(())
    })
}

/// `collect`: like fcollect, each member contributing its own `nelems`.
/// Each member leaves its count in its sync area's count cell; the
/// others read them after the entry barrier.
///
/// # Safety
/// `source` holds `nelems` elements; `dest` (symmetric) the sum of every
/// member's.
pub(crate) unsafe fn collect<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) -> i32 {
    over(call, scope, Desc::of(call), async move |p, g| {
        let bytes = byte_count::<T>(call, nelems, 1);
        let cells = g.cells();
        let (here, at) = cells.count();
        // SAFETY: the count cell is symmetric memory of this PE.
        unsafe { here.write_volatile(nelems as i64) };
        let count_at = |i: u32| p.near().and_then(|n| n.at(g.pe_of(i), cells.window, at, 8));
        let direct = Direct::new(p, &g, call, (dest.cast(), 0), (source.cast(), bytes));
        if let (Some(d), true) = (direct, (0..g.nranks()).all(|i| count_at(i).is_some())) {
            let count_of = |i: u32| {
                let cell = count_at(i).unwrap_or(here.cast());
                // SAFETY: an aligned 8-byte cell of a live heap mapping.
                unsafe { std::sync::atomic::AtomicI64::from_ptr(cell.cast()) }
                    .load(std::sync::atomic::Ordering::Acquire)
            };
            d.collect(T::SIZE, count_of).await?;
            // Every member read the counts before the last barrier.
            // SAFETY: as above.
            unsafe { here.write_volatile(cells.base) };
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let x = unsafe { read(source, nelems) };
        g.barrier().await?;
        let n = g.nranks() as usize;
        let mut counts = Vec::with_capacity(n);
        for i in 0..n as u32 {
            let b = pld_proto::collective::Group::get(&g, i, cells.window, at, 8).await?;
            counts.push(i64::from_le_bytes(b[..8].try_into().unwrap_or_default()));
        }
        // Each member's count, as it wrote it; their sum must fit `dest`.
        let total = counts
            .iter()
            .try_fold(0usize, |t, &c| t.checked_add(usize::try_from(c).ok()?))
            .unwrap_or_else(|| {
                fatal(format!(
                    "{call}: the members' counts {counts:?} do not add up to a size"
                ))
            });
        byte_count::<T>(call, total, 1);
        if total == 0 {
            // Nothing moves (every member saw the same counts); the
            // barrier keeps the count cell until all have read it.
            g.barrier().await?;
            // SAFETY: as above.
            unsafe { here.write_volatile(cells.base) };
            return Ok(());
        }
        // The matrix all_to_all_v takes: every member sends its part to all.
        let m: Vec<i64> = (0..n * n).map(|k| counts[k / n]).collect();
        let send = vec![x; n];
        let s = scratch(p, call, dest, total);
        coll::all_to_all_v_with(&g, &s, &send, &m)
            .await
            .map_err(flatten)?;
        // Every member read the counts before the last barrier.
        // SAFETY: as above.
        unsafe { here.write_volatile(cells.base) };
        Ok(())
    })
}

/// `alltoall`: block j of `source` goes to member j, landing at block
/// (this member's number) of its `dest`.
///
/// # Safety
/// `source` and `dest` (symmetric) hold `nelems` elements per member.
pub(crate) unsafe fn alltoall<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) -> i32 {
    over(call, scope, counted(call, nelems), async move |p, g| {
        let bytes = byte_count::<T>(call, nelems, g.nranks() as usize);
        let all = bytes / T::SIZE;
        let direct = Direct::new(p, &g, call, (dest.cast(), bytes), (source.cast(), bytes));
        if let (Some(d), true) = (direct, nelems > 0) {
            return d.alltoall(nelems * T::SIZE).await;
        }
        // SAFETY: the caller's contract.
        let x = unsafe { read(source, all) };
        if all == 0 {
            return g.barrier().await;
        }
        let (s, in_dest) = workspace(p, call, &g, dest, all).await?;
        let r = coll::all_to_all(&g, &s, &x).await.map_err(flatten)?;
        if !in_dest {
            // SAFETY: as above.
            unsafe { write(dest, &r) };
        }
        Ok(())
    })
}

/// `alltoalls`: alltoall with strides — member j gets `nelems` elements
/// from `source + j * nelems * sst`, `sst` apart, at `dest + me * nelems *
/// dst`, `dst` apart.
///
/// # Safety
/// `source` and `dest` (symmetric) span the strided blocks of every member.
pub(crate) unsafe fn alltoalls<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
) -> i32 {
    if dst < 1 || sst < 1 {
        fatal(format!(
            "{call}: the strides must be positive (dst {dst}, sst {sst})"
        ));
    }
    let (dst, sst) = (dst as usize, sst as usize);
    let desc = Desc {
        strides: Some((dst as u64, sst as u64)),
        ..counted(call, nelems)
    };
    over(call, scope, desc, async move |p, g| {
        g.barrier().await?;
        let n = g.nranks() as usize;
        if nelems > 0 {
            // Every member's block, strided, on both sides.
            let span = |stride: usize| {
                nelems
                    .checked_mul(n)
                    .and_then(|e| (e - 1).checked_mul(stride))
                    .and_then(|e| e.checked_add(1))
                    .and_then(|e| e.checked_mul(T::SIZE))
                    .filter(|&b| isize::try_from(b).is_ok())
                    .unwrap_or_else(|| {
                        fatal(format!(
                            "{call}: {nelems} elements per member at a stride of {stride} span more bytes than an address space holds"
                        ))
                    })
            };
            span(sst);
            let span = span(dst) as u64;
            let (win, base) = p.locate(call, dest.cast(), span);
            let me = g.rank() as usize;
            for j in 0..n {
                for i in 0..nelems {
                    // SAFETY: the caller's contract.
                    let v = unsafe { source.add((j * nelems + i) * sst).read_unaligned() };
                    let at = base + (((me * nelems + i) * dst) * T::SIZE) as u64;
                    g.put(j as u32, win, at, &encode(&[v])).await?;
                }
            }
        }
        g.barrier().await
    })
}

/// A reduction of every member's `source`, elementwise with `fold`,
/// into every member's `dest` (which may be `source`).
///
/// # Safety
/// `source` and `dest` (symmetric) hold `nreduce` elements.
pub(crate) unsafe fn reduce<T: Plain>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nreduce: usize,
    fold: &dyn Fold<T>,
) -> i32 {
    over(call, scope, counted(call, nreduce), async move |p, g| {
        let bytes = byte_count::<T>(call, nreduce, 1);
        let direct = Direct::new(p, &g, call, (dest.cast(), bytes), (source.cast(), bytes));
        if let (Some(d), true) = (direct, nreduce > 0) {
            return d.reduce(nreduce, fold).await;
        }
        // SAFETY: the caller's contract.
        let x = unsafe { read(source, nreduce) };
        if nreduce == 0 {
            return g.barrier().await;
        }
        // Small: every member's vector in the team's scratch, one round
        // (mesh). Large: the ring, its scratch `dest` (N elements).
        let combine = |a, b| fold.element(a, b);
        let mesh = bytes.saturating_mul(g.nranks() as usize);
        let r = match g.scratch_for(mesh as u64) {
            Some(s) => coll::allreduce_by(&g, &s, &x, &combine, Algo::Mesh).await,
            None => {
                g.barrier().await?;
                let s = scratch(p, call, dest, nreduce);
                coll::allreduce_by(&g, &s, &x, &combine, Algo::Ring).await
            }
        }
        .map_err(flatten)?;
        // SAFETY: as above.
        unsafe { write(dest, &r) };
        Ok(())
    })
}
