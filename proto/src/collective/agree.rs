//! Agreement on a collective call before any data moves: every rank puts
//! a description of its call ([`Call`]) into a slot of every rank's
//! agreement area, a barrier orders those puts, and each rank compares
//! the P descriptions it then holds — the same P on every rank, so every
//! rank reaches the same verdict. A disagreement (kind, reduce op, dtype,
//! length, root or algorithm) fails every rank with the same report,
//! naming the ranks of each side ([`disagreement`]); nothing else was
//! written, and no rank returns data.

use super::Algo;
use crate::{Dtype, ReduceOp};
use std::fmt;

/// The collectives a call can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// allreduce
    AllReduce,
    /// broadcast
    Broadcast,
    /// allgather
    AllGather,
    /// reduce_scatter
    ReduceScatter,
    /// all_to_all
    AllToAll,
}

impl CallKind {
    /// Every collective.
    pub const ALL: [CallKind; 5] = [
        CallKind::AllReduce,
        CallKind::Broadcast,
        CallKind::AllGather,
        CallKind::ReduceScatter,
        CallKind::AllToAll,
    ];

    /// The collective's name, as pld-pypto and messages write it.
    pub const fn name(self) -> &'static str {
        match self {
            CallKind::AllReduce => "allreduce",
            CallKind::Broadcast => "broadcast",
            CallKind::AllGather => "allgather",
            CallKind::ReduceScatter => "reduce_scatter",
            CallKind::AllToAll => "all_to_all",
        }
    }

    /// The collective named `name` ([`CallKind::name`]).
    pub fn parse(name: &str) -> Option<CallKind> {
        CallKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// What one rank's collective call is, as every rank must agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Which collective.
    pub kind: CallKind,
    /// The reduction (allreduce, reduce_scatter).
    pub op: Option<ReduceOp>,
    /// The algorithm (allreduce).
    pub algo: Option<Algo>,
    /// The root (broadcast).
    pub root: Option<u32>,
    /// The elements' type.
    pub dtype: Dtype,
    /// The bytes this rank contributes.
    pub len: u64,
}

/// Marks a slot as a call description of this layout (and not zeros or
/// something else a window held).
const MAGIC: u64 = 0x706c_6463_616c_6c01;

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod];
const ALGOS: [Algo; 2] = [Algo::Mesh, Algo::Ring];

/// Index + 1 of `v` in `all`, 0 for `None`.
fn code<T: PartialEq>(all: &[T], v: Option<&T>) -> u64 {
    v.and_then(|v| all.iter().position(|a| a == v))
        .map_or(0, |i| i as u64 + 1)
}

/// The value of `code`, `Err` for a code that names nothing.
fn uncode<T: Copy>(all: &[T], c: u64) -> Result<Option<T>, ()> {
    match c {
        0 => Ok(None),
        c => all.get(c as usize - 1).copied().map(Some).ok_or(()),
    }
}

impl Call {
    /// The bytes of one slot.
    pub const SIZE: usize = 64;

    /// The slot's bytes (eight little-endian u64 words).
    pub fn encode(&self) -> [u8; Call::SIZE] {
        let words = [
            MAGIC,
            code(&CallKind::ALL, Some(&self.kind)),
            code(&OPS, self.op.as_ref()),
            code(&ALGOS, self.algo.as_ref()),
            self.root.map_or(0, |r| u64::from(r) + 1),
            self.dtype as i32 as u64,
            self.len,
            0,
        ];
        let mut out = [0u8; Call::SIZE];
        for (o, w) in out.chunks_exact_mut(8).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// A slot's call; `None` if the slot holds none.
    pub fn decode(slot: &[u8]) -> Option<Call> {
        if slot.len() < Call::SIZE {
            return None;
        }
        let w = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&slot[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        if w(0) != MAGIC {
            return None;
        }
        Some(Call {
            kind: uncode(&CallKind::ALL, w(1)).ok()??,
            op: uncode(&OPS, w(2)).ok()?,
            algo: uncode(&ALGOS, w(3)).ok()?,
            root: match w(4) {
                0 => None,
                r => Some(u32::try_from(r - 1).ok()?),
            },
            dtype: Dtype::try_from(i32::try_from(w(5)).ok()?).ok()?,
            len: w(6),
        })
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        if let Some(op) = self.op {
            write!(f, " {}", format!("{op:?}").to_lowercase())?;
        }
        if let Some(a) = self.algo {
            write!(f, " ({})", format!("{a:?}").to_lowercase())?;
        }
        if let Some(r) = self.root {
            write!(f, " from root {r}")?;
        }
        let elems = self.len / self.dtype.size().max(1) as u64;
        write!(
            f,
            " of {elems} {} elements ({} bytes)",
            self.dtype, self.len
        )
    }
}

/// What the ranks' descriptions (slot r: rank r's, `None`: no call there)
/// say, when they do not all say the same: each distinct call with the
/// ranks that made it, and what differs.
pub fn disagreement(calls: &[Option<Call>]) -> Option<String> {
    let known: Vec<Call> = calls.iter().filter_map(|c| *c).collect();
    let differs =
        |same: &dyn Fn(&Call, &Call) -> bool| known.windows(2).any(|w| !same(&w[0], &w[1]));
    let kinds = differs(&|a, b| a.kind == b.kind);
    let fields: [(&str, bool); 6] = [
        ("collective", kinds),
        // Other collectives take other arguments: only calls of one kind
        // differ in them.
        ("reduce op", !kinds && differs(&|a, b| a.op == b.op)),
        ("algorithm", !kinds && differs(&|a, b| a.algo == b.algo)),
        ("root", !kinds && differs(&|a, b| a.root == b.root)),
        ("dtype", differs(&|a, b| a.dtype == b.dtype)),
        ("length", differs(&|a, b| a.len == b.len)),
    ];
    let differ: Vec<&str> = fields.iter().filter(|(_, d)| *d).map(|(n, _)| *n).collect();
    sides(calls, &differ, &|r| format!("rank {r}"), &|rs| {
        format!("ranks {}", list(rs))
    })
    .map(|sides| format!("the ranks disagree on the collective call{sides}"))
}

/// `0, 2, 5`.
fn list(ids: &[usize]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sides of a disagreement among `calls` (slot i: participant i's,
/// `None`: no readable call), `None` where all made the same call: the
/// fields that `differ`, then each distinct call after the participants
/// that made it (`one` names a single participant, `many` several) —
/// ` (they differ in length): ranks 0, 2: ...; rank 1: ...`. Any front
/// end's agreement on a call (the gRPC collectives, OpenSHMEM's) reports
/// through it.
pub fn sides<T: PartialEq + fmt::Display>(
    calls: &[Option<T>],
    differ: &[&str],
    one: &dyn Fn(usize) -> String,
    many: &dyn Fn(&[usize]) -> String,
) -> Option<String> {
    let first = calls.first()?.as_ref();
    if first.is_some() && calls.iter().all(|c| c.as_ref() == first) {
        return None;
    }
    let mut groups: Vec<(Option<&T>, Vec<usize>)> = Vec::new();
    for (r, c) in calls.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == c.as_ref()) {
            Some((_, who)) => who.push(r),
            None => groups.push((c.as_ref(), vec![r])),
        }
    }
    let side = |(c, who): &(Option<&T>, Vec<usize>)| {
        let who = match who.as_slice() {
            [r] => one(*r),
            rs => many(rs),
        };
        match c {
            Some(c) => format!("{who}: {c}"),
            None => format!("{who}: no readable call (another pld version?)"),
        }
    };
    let sides: Vec<String> = groups.iter().map(side).collect();
    let differ = match differ {
        [] => String::new(),
        d => format!(" (they differ in {})", d.join(", ")),
    };
    Some(format!("{differ}: {}", sides.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allreduce(len: u64, op: ReduceOp, dtype: Dtype) -> Call {
        Call {
            kind: CallKind::AllReduce,
            op: Some(op),
            algo: Some(Algo::Ring),
            root: None,
            dtype,
            len,
        }
    }

    #[test]
    fn a_call_survives_its_slot_and_zeros_are_no_call() {
        let c = Call {
            kind: CallKind::Broadcast,
            op: None,
            algo: None,
            root: Some(3),
            dtype: Dtype::Bf16,
            len: 24,
        };
        assert_eq!(Call::decode(&c.encode()), Some(c));
        assert_eq!(Call::decode(&[0u8; Call::SIZE]), None);
        let mut bad = c.encode();
        bad[8] = 99;
        assert_eq!(Call::decode(&bad), None, "a kind that names nothing");
    }

    #[test]
    fn equal_calls_agree_and_unequal_ones_name_each_side_and_the_field() {
        let a = allreduce(24, ReduceOp::Sum, Dtype::Fp32);
        assert_eq!(disagreement(&[Some(a); 3]), None);
        let b = allreduce(48, ReduceOp::Sum, Dtype::Fp32);
        let got = disagreement(&[Some(a), Some(b), Some(a)]).expect("a mismatch");
        assert_eq!(
            got,
            "the ranks disagree on the collective call (they differ in length): \
             ranks 0, 2: allreduce sum (ring) of 6 fp32 elements (24 bytes); \
             rank 1: allreduce sum (ring) of 12 fp32 elements (48 bytes)"
        );
        let c = allreduce(24, ReduceOp::Max, Dtype::Int32);
        let got = disagreement(&[Some(a), Some(c), None]).expect("a mismatch");
        assert!(got.contains("(they differ in reduce op, dtype)"), "{got}");
        assert!(got.contains("rank 2: no readable call"), "{got}");
    }
}
