//! Collectives built on the one-sided primitives, for any [`Rma`]: puts
//! into a symmetric scratch area of a window, barriers that order them,
//! and local reads and reductions. The simulated device and the daemon's
//! gRPC service both run these.
//!
//! Every rank must call the same collectives in the same order (as in
//! MPI), with the same scratch; each collective ends with a barrier, so the
//! scratch can be reused by the next one.

mod agree;
mod group;
pub use agree::{Call, CallKind, disagreement, sides};
pub use group::{Group, Plain, decode, encode};

use crate::{ReduceOp, Scalar};

/// How allreduce moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algo {
    /// Every rank puts its whole vector to every rank, which reduces all
    /// of them: one round, P − 1 puts of N per rank.
    Mesh,
    /// Reduce-scatter then allgather around the ring: 2(P − 1) rounds of
    /// N / P per rank — bandwidth-optimal.
    #[default]
    Ring,
}

impl Algo {
    /// Every algorithm.
    pub const ALL: [Algo; 2] = [Algo::Mesh, Algo::Ring];

    /// The algorithm's name: `mesh` or `ring`.
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Mesh => "mesh",
            Algo::Ring => "ring",
        }
    }

    /// The algorithm named `mesh` or `ring`.
    pub fn parse(s: &str) -> Option<Algo> {
        Algo::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// The symmetric scratch area a collective may use: the same window,
/// offset and size on every rank.
#[derive(Debug, Clone, Copy)]
pub struct Scratch<W> {
    /// The window the scratch area lies in.
    pub window: W,
    /// Byte offset in the window.
    pub base: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Why a collective failed.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error<E: std::error::Error + 'static> {
    /// An op of the rank failed.
    #[error(transparent)]
    Rma(E),
    /// The arguments do not fit the collective.
    #[error("{call}: {reason}")]
    Invalid { call: &'static str, reason: String },
    /// The scratch area is too small for this call.
    #[error(
        "{call} needs {needed} bytes of scratch, but the collective scratch has {have}; make it larger"
    )]
    ScratchTooSmall {
        call: &'static str,
        needed: u64,
        have: u64,
    },
}

impl<E: std::error::Error + crate::rma::Reason + 'static> crate::rma::Reason for Error<E> {
    fn reason(&self) -> &str {
        match self {
            Error::Rma(e) => e.reason(),
            Error::Invalid { .. } => "INVALID_ARGUMENT",
            Error::ScratchTooSmall { .. } => "SCRATCH_TOO_SMALL",
        }
    }
}

type Res<T, R> = Result<T, Error<<R as Group>::Error>>;

/// The bounds of chunk `c` of `n` elements split into `p` chunks.
fn chunk(n: usize, p: usize, c: usize) -> std::ops::Range<usize> {
    (c * n / p)..((c + 1) * n / p)
}

fn need<R: Group, T: Plain>(
    s: &Scratch<R::Window>,
    call: &'static str,
    elems: usize,
) -> Res<(), R> {
    needs(call, elems * T::SIZE, s.bytes)
}

/// Checks `call` against `nranks` ranks and `scratch` bytes of scratch —
/// what every collective checks before anything moves, and the same
/// rules: a driver that agrees on the call across ranks
/// ([`agree::disagreement`]) checks it first, so that a call that cannot
/// run fails on its own rank without waiting for the others.
pub fn check<E: std::error::Error + 'static>(
    call: &Call,
    nranks: u32,
    scratch: u64,
) -> Result<(), Error<E>> {
    let (p, size) = (nranks as usize, call.dtype.size().max(1));
    let n = (call.len / size as u64) as usize;
    let (name, elems) = scratch_elems(call.kind, call.algo, call.root, p, n)?;
    needs(name, elems * size, scratch)
}

/// A call's name in errors, and the scratch elements it needs; or why it
/// cannot run.
fn scratch_elems<E: std::error::Error + 'static>(
    kind: CallKind,
    algo: Option<Algo>,
    root: Option<u32>,
    p: usize,
    n: usize,
) -> Result<(&'static str, usize), Error<E>> {
    let invalid = |call: &'static str| move |reason| Error::Invalid { call, reason };
    Ok(match kind {
        CallKind::AllReduce => match algo.unwrap_or_default() {
            Algo::Mesh => ("allreduce (mesh)", p * n),
            Algo::Ring => ("allreduce (ring)", n),
        },
        CallKind::Broadcast => {
            let root = root.unwrap_or(0);
            if root as usize >= p {
                return Err(Error::Invalid {
                    call: "broadcast",
                    reason: format!(
                        "root {root} is not a rank: the ranks are 0 to {}",
                        p.saturating_sub(1)
                    ),
                });
            }
            ("broadcast", n)
        }
        CallKind::AllGather => ("allgather", p * n),
        CallKind::ReduceScatter => (
            "reduce_scatter",
            p * blocks("reduce_scatter", n, p).map_err(invalid("reduce_scatter"))?,
        ),
        CallKind::AllToAll => (
            "all_to_all",
            p * blocks("all_to_all", n, p).map_err(invalid("all_to_all"))?,
        ),
    })
}

fn needs<E: std::error::Error + 'static>(
    call: &'static str,
    bytes: usize,
    have: u64,
) -> Result<(), Error<E>> {
    if bytes as u64 > have {
        return Err(Error::ScratchTooSmall {
            call,
            needed: bytes as u64,
            have,
        });
    }
    Ok(())
}

/// [`check`] for a typed call of `kind` on `n` elements: the scratch
/// elements it needs.
fn check_typed<R: Group, T: Plain>(
    s: &Scratch<R::Window>,
    r: &R,
    (kind, algo, root): (CallKind, Option<Algo>, Option<u32>),
    n: usize,
) -> Res<usize, R> {
    let p = r.nranks() as usize;
    let (name, elems) = scratch_elems(kind, algo, root, p, n)?;
    needs(name, elems * T::SIZE, s.bytes)?;
    Ok(elems)
}

async fn put<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    peer: u32,
    at: usize,
    data: &[T],
) -> Res<(), R> {
    if data.is_empty() {
        return Ok(());
    }
    let off = s.base + (at * T::SIZE) as u64;
    r.put(peer, s.window, off, &encode(data))
        .await
        .map_err(Error::Rma)
}

async fn read<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    at: usize,
    len: usize,
) -> Res<Vec<T>, R> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let size = T::SIZE;
    let bytes = r
        .get(
            r.rank(),
            s.window,
            s.base + (at * size) as u64,
            (len * size) as u64,
        )
        .await
        .map_err(Error::Rma)?;
    Ok(decode(&bytes))
}

async fn sync<R: Group>(r: &R) -> Res<(), R> {
    r.barrier().await.map_err(Error::Rma)
}

/// Every rank ends with the elementwise `op` of every rank's `x`.
pub async fn allreduce<R: Group, T: Scalar>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    op: ReduceOp,
    algo: Algo,
) -> Res<Vec<T>, R> {
    allreduce_by(r, s, x, &|a, b| op.apply(a, b), algo).await
}

/// [`allreduce`] with any associative, commutative `combine` — for
/// element types and reductions pld has no [`ReduceOp`] for (OpenSHMEM's
/// unsigned and bitwise reductions, C's `long double`).
pub async fn allreduce_by<R: Group, T: Plain, F: Fn(T, T) -> T + Sync>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    combine: &F,
    algo: Algo,
) -> Res<Vec<T>, R> {
    match algo {
        Algo::Mesh => allreduce_mesh(r, s, x, combine).await,
        Algo::Ring => allreduce_ring(r, s, x, combine).await,
    }
}

async fn allreduce_mesh<R: Group, T: Plain, F: Fn(T, T) -> T + Sync>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    combine: &F,
) -> Res<Vec<T>, R> {
    let (p, me, n) = (r.nranks() as usize, r.rank() as usize, x.len());
    check_typed::<R, T>(s, r, (CallKind::AllReduce, Some(Algo::Mesh), None), n)?;
    for j in 0..p {
        put(r, s, j as u32, me * n, x).await?;
    }
    sync(r).await?;
    let all: Vec<T> = read(r, s, 0, p * n).await?;
    sync(r).await?;
    Ok((0..n)
        .map(|i| (1..p).fold(all[i], |a, k| combine(a, all[k * n + i])))
        .collect())
}

async fn allreduce_ring<R: Group, T: Plain, F: Fn(T, T) -> T + Sync>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    combine: &F,
) -> Res<Vec<T>, R> {
    let (p, me, n) = (r.nranks() as usize, r.rank() as usize, x.len());
    check_typed::<R, T>(s, r, (CallKind::AllReduce, Some(Algo::Ring), None), n)?;
    let next = ((me + 1) % p) as u32;
    let mut acc = x.to_vec();
    // Reduce-scatter: after P − 1 steps rank r holds the full reduction of
    // chunk (r + 1) mod P. Each step writes a different chunk of the
    // next rank's scratch than the one it reads, and a barrier separates
    // a write from the read of the same chunk.
    for k in 0..p - 1 {
        let send = chunk(n, p, (me + p - k) % p);
        put(r, s, next, send.start, &acc[send.clone()]).await?;
        sync(r).await?;
        let recv = chunk(n, p, (me + 2 * p - k - 1) % p);
        let got: Vec<T> = read(r, s, recv.start, recv.len()).await?;
        for (v, g) in acc[recv].iter_mut().zip(got) {
            *v = combine(g, *v);
        }
    }
    // Allgather: pass the reduced chunks around the ring.
    for k in 0..p - 1 {
        let send = chunk(n, p, (me + 1 + p - k) % p);
        put(r, s, next, send.start, &acc[send.clone()]).await?;
        sync(r).await?;
        let recv = chunk(n, p, (me + p - k) % p);
        let got: Vec<T> = read(r, s, recv.start, recv.len()).await?;
        acc[recv].copy_from_slice(&got);
    }
    sync(r).await?;
    Ok(acc)
}

/// Every rank ends with `root`'s `x` (the others' `x` gives the length).
pub async fn broadcast<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    root: u32,
) -> Res<Vec<T>, R> {
    let p = r.nranks();
    check_typed::<R, T>(s, r, (CallKind::Broadcast, None, Some(root)), x.len())?;
    if r.rank() == root {
        for j in 0..p {
            put(r, s, j, 0, x).await?;
        }
    }
    sync(r).await?;
    let data = read(r, s, 0, x.len()).await?;
    sync(r).await?;
    Ok(data)
}

/// Every rank ends with every rank's `x`, concatenated by rank.
pub async fn allgather<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
) -> Res<Vec<T>, R> {
    let (p, me, n) = (r.nranks() as usize, r.rank() as usize, x.len());
    check_typed::<R, T>(s, r, (CallKind::AllGather, None, None), n)?;
    for j in 0..p {
        put(r, s, j as u32, me * n, x).await?;
    }
    sync(r).await?;
    let data = read(r, s, 0, p * n).await?;
    sync(r).await?;
    Ok(data)
}

fn blocks(call: &'static str, len: usize, p: usize) -> Result<usize, String> {
    if len % p != 0 {
        return Err(format!(
            "{len} elements do not split into {p} equal blocks ({call})"
        ));
    }
    Ok(len / p)
}

/// `x` holds P equal blocks; rank r ends with block r of the elementwise
/// `op` of every rank's `x`.
pub async fn reduce_scatter<R: Group, T: Scalar>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
    op: ReduceOp,
) -> Res<Vec<T>, R> {
    let (p, me) = (r.nranks() as usize, r.rank() as usize);
    let blk = check_typed::<R, T>(s, r, (CallKind::ReduceScatter, None, None), x.len())? / p;
    for j in 0..p {
        put(r, s, j as u32, me * blk, &x[j * blk..(j + 1) * blk]).await?;
    }
    sync(r).await?;
    let all: Vec<T> = read(r, s, 0, p * blk).await?;
    sync(r).await?;
    Ok((0..blk)
        .map(|i| (1..p).fold(all[i], |a, k| op.apply(a, all[k * blk + i])))
        .collect())
}

/// `x` holds P equal blocks; block j goes to rank j, and each rank ends
/// with the blocks every rank sent it, by sender.
pub async fn all_to_all<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    x: &[T],
) -> Res<Vec<T>, R> {
    let (p, me) = (r.nranks() as usize, r.rank() as usize);
    let blk = check_typed::<R, T>(s, r, (CallKind::AllToAll, None, None), x.len())? / p;
    for j in 0..p {
        put(r, s, j as u32, me * blk, &x[j * blk..(j + 1) * blk]).await?;
    }
    sync(r).await?;
    let data = read(r, s, 0, p * blk).await?;
    sync(r).await?;
    Ok(data)
}

/// `send[j]` (any length) goes to rank j; returns what each rank sent this
/// one, by sender. The lengths are exchanged first ([`all_to_all_v_counts`]).
pub async fn all_to_all_v<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    send: &[Vec<T>],
) -> Res<Vec<Vec<T>>, R> {
    let m = all_to_all_v_counts(r, s, send).await?;
    all_to_all_v_with(r, s, send, &m).await
}

/// The first round of [`all_to_all_v`]: every rank learns every length,
/// as a P × P matrix (row: sender, column: receiver) gathered from all.
pub async fn all_to_all_v_counts<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    send: &[Vec<T>],
) -> Res<Vec<i64>, R> {
    let p = r.nranks() as usize;
    if send.len() != p {
        return Err(Error::Invalid {
            call: "all_to_all_v",
            reason: format!("{} send buffers for {p} ranks", send.len()),
        });
    }
    let lens: Vec<i64> = send.iter().map(|v| v.len() as i64).collect();
    allgather(r, s, &lens).await
}

/// The elements the busiest rank receives, given the length matrix: the
/// scratch [`all_to_all_v_with`] needs.
pub fn all_to_all_v_largest(m: &[i64], p: usize) -> usize {
    (0..p)
        .map(|dst| {
            (0..p)
                .map(|src| m.get(src * p + dst).copied().unwrap_or(0).max(0) as usize)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// The second round of [`all_to_all_v`], with the length matrix of
/// [`all_to_all_v_counts`]: rank r receives from each sender after every
/// earlier sender's part.
pub async fn all_to_all_v_with<R: Group, T: Plain>(
    r: &R,
    s: &Scratch<R::Window>,
    send: &[Vec<T>],
    m: &[i64],
) -> Res<Vec<Vec<T>>, R> {
    let (p, me) = (r.nranks() as usize, r.rank() as usize);
    if send.len() != p || m.len() != p * p {
        return Err(Error::Invalid {
            call: "all_to_all_v",
            reason: format!(
                "{} send buffers and {} lengths for {p} ranks",
                send.len(),
                m.len()
            ),
        });
    }
    let to = |src: usize, dst: usize| m[src * p + dst].max(0) as usize;
    let total = |dst: usize| (0..p).map(|src| to(src, dst)).sum::<usize>();
    need::<R, T>(s, "all_to_all_v", all_to_all_v_largest(m, p))?;
    for (j, part) in send.iter().enumerate() {
        let at: usize = (0..me).map(|src| to(src, j)).sum();
        put(r, s, j as u32, at, part).await?;
    }
    sync(r).await?;
    let all: Vec<T> = read(r, s, 0, total(me)).await?;
    sync(r).await?;
    let mut out = Vec::with_capacity(p);
    let mut at = 0;
    for src in 0..p {
        out.push(all[at..at + to(src, me)].to_vec());
        at += to(src, me);
    }
    Ok(out)
}
