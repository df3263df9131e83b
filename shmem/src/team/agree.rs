//! Under `--checked`, the members of a collective agree on the call before
//! any data moves, as pld's gRPC collectives do
//! (`pld_proto::collective::agree`). Unchecked, a program whose PEs call a
//! collective with different arguments (a length, a root, a reduction, a
//! type) gets different data on different PEs, or a hang.
//!
//! Each member writes a description of its call ([`Desc`]: the call's
//! name, which holds the type and the reduction, its element count, root
//! and strides) into its own call cell ([`CALL_BYTES`] at the same offset
//! on every member), a barrier orders those writes, and each member reads
//! every member's. The P descriptions are the same on every member, so
//! every member reaches the same verdict: a disagreement fails each one
//! with the same report, naming the PEs of each side and what differs.
//! The cells stay valid until every member has read them: a member writes
//! its cell again only in its next collective, which it enters after the
//! closing barrier of this one — which nobody leaves before every member
//! has read (every collective over the network ends with a barrier, and
//! under `--checked` every collective runs over the network).
//!
//! Off by default: the barrier and the P − 1 reads would double a small
//! collective's time.

use super::group::{CollError, Members};
use pld_proto::collective::{Group, sides};
use std::fmt;

/// Bytes of a call cell.
pub(crate) use crate::layout::CALL_BYTES;

/// Marks a cell as holding a description of this layout.
const MAGIC: u64 = 0x706c_6473_686d_6301;

/// Bytes of a description's call name (longer names are cut).
const NAME_BYTES: usize = CALL_BYTES - 40;

/// What one member's collective call is, as every member must agree on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Desc {
    /// The call (`shmem_int_sum_reduce`): the collective, type, reduction.
    pub call: String,
    /// Its element count, where every member must give the same
    /// (`collect` lets each give its own).
    pub nelems: Option<u64>,
    /// The root (broadcast), as a member number.
    pub root: Option<u32>,
    /// The destination and source strides (`alltoalls`).
    pub strides: Option<(u64, u64)>,
}

impl Desc {
    /// The call `call` with no arguments to agree on yet.
    pub(crate) fn of(call: &str) -> Desc {
        Desc {
            call: call.to_string(),
            nelems: None,
            root: None,
            strides: None,
        }
    }

    fn encode(&self) -> [u8; CALL_BYTES] {
        let some = |v: Option<u64>| v.map_or(0, |v| v.wrapping_add(1));
        let words = [
            MAGIC,
            some(self.nelems),
            some(self.root.map(u64::from)),
            some(self.strides.map(|s| s.0)),
            some(self.strides.map(|s| s.1)),
        ];
        let mut out = [0u8; CALL_BYTES];
        for (o, w) in out.chunks_exact_mut(8).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        let name = self.call.as_bytes();
        let n = name.len().min(NAME_BYTES);
        out[40..40 + n].copy_from_slice(&name[..n]);
        out
    }

    fn decode(cell: &[u8]) -> Option<Desc> {
        let w = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(cell.get(i * 8..i * 8 + 8)?);
            Some(u64::from_le_bytes(b))
        };
        let opt = |i: usize| w(i).map(|v| v.checked_sub(1));
        if w(0)? != MAGIC {
            return None;
        }
        let name = cell.get(40..CALL_BYTES)?;
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        let strides = match (opt(3)?, opt(4)?) {
            (Some(d), Some(s)) => Some((d, s)),
            _ => None,
        };
        Some(Desc {
            call: String::from_utf8_lossy(&name[..end]).into_owned(),
            nelems: opt(1)?,
            root: opt(2)?.and_then(|r| u32::try_from(r).ok()),
            strides,
        })
    }
}

impl fmt::Display for Desc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.call)?;
        if let Some(n) = self.nelems {
            write!(f, " of {n} elements")?;
        }
        if let Some(r) = self.root {
            write!(f, " from root {r}")?;
        }
        if let Some((d, s)) = self.strides {
            write!(f, " at strides dst {d}, sst {s}")?;
        }
        Ok(())
    }
}

/// The fields in which the known descriptions differ.
fn differ(known: &[&Desc]) -> Vec<&'static str> {
    let differs = |same: &dyn Fn(&Desc, &Desc) -> bool| known.windows(2).any(|w| !same(w[0], w[1]));
    let calls = differs(&|a, b| a.call == b.call);
    [
        ("call", calls),
        // Other calls take other arguments: only one call's differ.
        (
            "element count",
            !calls && differs(&|a, b| a.nelems == b.nelems),
        ),
        ("root", !calls && differs(&|a, b| a.root == b.root)),
        ("strides", !calls && differs(&|a, b| a.strides == b.strides)),
    ]
    .into_iter()
    .filter(|(_, d)| *d)
    .map(|(n, _)| n)
    .collect()
}

/// What `calls` (member i's in slot i) say when they differ, naming each
/// member by its global PE number.
fn report(g: &Members<'_>, name: &str, calls: &[Option<Desc>]) -> Option<String> {
    let known: Vec<&Desc> = calls.iter().flatten().collect();
    let one = |i: usize| format!("PE {}", g.pe_of(i as u32));
    let many = |is: &[usize]| {
        let pes: Vec<String> = is.iter().map(|i| g.pe_of(*i as u32).to_string()).collect();
        format!("PEs {}", pes.join(", "))
    };
    sides(calls, &differ(&known), &one, &many)
        .map(|s| format!("the members of {name} disagree on the collective call{s}"))
}

/// Agrees on `desc` with every member of `g` (see the module docs): `Ok`
/// where every member made the same call, else the report.
pub(crate) async fn agree(g: &Members<'_>, desc: &Desc) -> Result<(), CollError> {
    let cell = g.call_cell();
    let mine = desc.encode();
    // SAFETY: the cell is CALL_BYTES of this PE's reserved heap bytes,
    // written only here and read by the members after the barrier below.
    unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), cell.local as *mut u8, CALL_BYTES) };
    g.barrier().await?;
    let mut calls = Vec::with_capacity(g.nranks() as usize);
    for i in 0..g.nranks() {
        let call = if i == g.rank() {
            Some(desc.clone())
        } else {
            let b = Group::get(g, i, cell.window, cell.offset, CALL_BYTES as u64).await?;
            Desc::decode(&b)
        };
        calls.push(call);
    }
    match report(g, g.name(), &calls) {
        None => Ok(()),
        Some(r) => Err(CollError::Invalid(r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_survives_its_cell_and_zeros_are_none() {
        let d = Desc {
            call: "shmem_ulonglong_max_reduce".into(),
            nelems: Some(7),
            root: Some(0),
            strides: Some((2, 1)),
        };
        assert_eq!(Desc::decode(&d.encode()), Some(d));
        assert_eq!(Desc::decode(&[0u8; CALL_BYTES]), None);
        let collect = Desc::of("shmem_int_collect");
        assert_eq!(Desc::decode(&collect.encode()), Some(collect));
    }

    #[test]
    fn the_fields_that_differ_are_named_only_within_one_call() {
        let a = Desc {
            nelems: Some(4),
            ..Desc::of("shmem_int_sum_reduce")
        };
        let b = Desc {
            nelems: Some(8),
            ..a.clone()
        };
        assert_eq!(differ(&[&a, &b]), ["element count"]);
        let c = Desc {
            nelems: Some(8),
            ..Desc::of("shmem_long_sum_reduce")
        };
        assert_eq!(differ(&[&a, &c]), ["call"]);
        assert!(differ(&[&a, &a]).is_empty());
        let got = sides(
            &[Some(a.clone()), Some(b), Some(a)],
            &["element count"],
            &|i| format!("PE {i}"),
            &|is| format!("PEs {is:?}"),
        )
        .expect("a disagreement");
        assert_eq!(
            got,
            " (they differ in element count): PEs [0, 2]: shmem_int_sum_reduce of 4 elements; PE 1: shmem_int_sum_reduce of 8 elements"
        );
    }
}
