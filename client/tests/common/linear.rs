//! Histories of atomics under faults, and the checks that they are
//! linearizable. Two objects:
//!
//! - a **counter** (fetch_add 1, and compare_swap from the value a client
//!   last saw to one more): every value a call took (fetch_add's previous
//!   value, a compare_swap's expected value when it swapped) is distinct; a
//!   call that returned before another was invoked took the smaller one;
//!   every value below the final one that no successful call took — a
//!   *gap* — was taken by a failed call that may have applied it, one
//!   failed call a gap, and in real-time order (a failed call cannot have
//!   taken a value below one a call that returned before it was invoked
//!   took, nor — if it failed in a way that applies by its return — above
//!   one a call invoked after it returned took). A failed call's error
//!   says when it may have applied ([`Applied`]): never (the front was
//!   not reached), by its return (its link broke), or later (it timed out
//!   in flight: a stalled target applies it when it resumes). So a
//!   successful call applied twice leaves a gap no failed call explains,
//!   and is caught, where counting failures alone could not tell. A
//!   compare_swap that found another value read the counter: that value
//!   must lie between what calls before it left and what calls after it
//!   took.
//! - a **swap register** (each swap writes a value no other call writes
//!   and returns the old one): the returned values chain from the initial
//!   0 through every successful swap to the final value, each value
//!   returned once, in real-time order; a failed swap is on the chain or
//!   off it (applied or not).

use std::time::Instant;

/// How one call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A counter call that took `value` (fetch_add's previous value, a
    /// compare_swap that swapped from `value`).
    Took(i64),
    /// A compare_swap that found `value` and changed nothing.
    Saw(i64),
    /// A swap that wrote its value and returned `value`.
    Swapped(i64),
    /// The call failed: applied once or not at all.
    Failed(String),
}

/// One call of a history.
#[derive(Debug, Clone)]
pub struct Call {
    /// Who called (for the printed history).
    pub client: String,
    /// The object.
    pub cell: usize,
    /// For a swap, the value it wrote.
    pub wrote: Option<i64>,
    pub invoked: Instant,
    pub returned: Instant,
    pub outcome: Outcome,
}

/// When a failed call may have been applied, from what its error says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Never: it did not leave the client (the front could not be
    /// reached, or refused it before sending it on).
    Never,
    /// If at all, before it returned: its link broke, and nothing on it
    /// arrives after that.
    ByReturn,
    /// If at all, at any time after it was invoked: it timed out while in
    /// flight, and a stalled target applies it when it resumes.
    Later,
}

impl Call {
    /// Whether the call failed.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed(_))
    }

    /// When a failed call may have been applied.
    pub fn applied(&self) -> Applied {
        let Outcome::Failed(e) = &self.outcome else {
            return Applied::ByReturn;
        };
        let never = [
            "tcp connect error",
            "not serving yet",
            "failed to connect",
            "Connection refused",
        ];
        if never.iter().any(|n| e.contains(n)) {
            Applied::Never
        } else if e.contains("got no reply within") || e.contains("OP_TIMEOUT") {
            Applied::Later
        } else {
            Applied::ByReturn
        }
    }
}

/// The value the call took, if it took one.
fn took(c: &Call) -> Option<i64> {
    match c.outcome {
        Outcome::Took(v) => Some(v),
        _ => None,
    }
}

/// Checks the history `calls` of a counter whose final value is `last`
/// (see the module docs); `failed` are the failed calls that may have
/// applied in this history. Without `last` (a history whose end was lost:
/// a killed rank's), only what does not need it: distinct values, in
/// real-time order.
pub fn check_counter(calls: &[&Call], failed: &[&Call], last: Option<i64>) -> Result<(), String> {
    let mut claims: Vec<(i64, &Call)> = calls.iter().filter_map(|c| Some((took(c)?, *c))).collect();
    claims.sort_by_key(|(v, _)| *v);
    for w in claims.windows(2) {
        if w[0].0 == w[1].0 {
            return Err(format!(
                "value {} taken twice: {:?} and {:?}",
                w[0].0, w[0].1, w[1].1
            ));
        }
    }
    let bound = last.unwrap_or(i64::MAX);
    if let Some((v, c)) = claims.iter().find(|(v, _)| *v < 0 || *v >= bound) {
        return Err(format!("{c:?} took {v}, outside 0..{bound}"));
    }
    for (va, a) in &claims {
        for (vb, b) in &claims {
            if a.returned < b.invoked && va > vb {
                return Err(format!(
                    "{a:?} returned before {b:?} was invoked, and took a larger value"
                ));
            }
        }
    }
    // The window of values each call could have taken or seen, from the
    // calls that returned before it began and began after it ended.
    let window = |c: &Call| {
        let lo = claims
            .iter()
            .filter(|(_, b)| b.returned < c.invoked)
            .map(|(v, _)| v + 1)
            .max()
            .unwrap_or(0);
        let hi = claims
            .iter()
            .filter(|(_, b)| b.invoked > c.returned)
            .map(|(v, _)| *v)
            .min()
            .unwrap_or(bound);
        (lo, hi)
    };
    for c in calls {
        if let Outcome::Saw(v) = c.outcome {
            let (lo, hi) = window(c);
            if v < lo || v > hi {
                return Err(format!(
                    "{c:?} read {v}, but the counter held {lo}..={hi} while it ran"
                ));
            }
        }
    }
    // Every gap to a failed call whose window holds it, one each: gaps in
    // order, each to the open window that closes first (a greedy matching
    // of points to intervals, which finds one when one exists).
    let Some(last) = last else {
        return Ok(());
    };
    let taken: std::collections::HashSet<i64> = claims.iter().map(|(v, _)| *v).collect();
    let gaps: Vec<i64> = (0..last).filter(|v| !taken.contains(v)).collect();
    let mut windows: Vec<(i64, i64, &Call)> = failed
        .iter()
        .filter(|c| c.applied() != Applied::Never)
        .map(|c| {
            let (lo, hi) = window(c);
            // A timed-out op may land long after it returned.
            let hi = if c.applied() == Applied::Later {
                last
            } else {
                hi
            };
            (lo, hi, *c)
        })
        .collect();
    windows.sort_by_key(|(lo, _, _)| *lo);
    let mut open: Vec<(i64, &Call)> = Vec::new();
    let mut next = 0;
    for g in gaps {
        while next < windows.len() && windows[next].0 <= g {
            open.push((windows[next].1, windows[next].2));
            next += 1;
        }
        open.retain(|(hi, _)| *hi >= g);
        let Some(i) = (0..open.len()).min_by_key(|i| open[*i].0) else {
            return Err(format!(
                "value {g} was taken, but by no call that succeeded, and no failed call could have taken it then ({} failed calls in all)",
                failed.len()
            ));
        };
        open.swap_remove(i);
    }
    Ok(())
}

/// Checks the history `calls` of a swap register that started at 0 and
/// ended at `last` (see the module docs). The successful swaps link the
/// value each returned to the one it wrote; their links form segments,
/// which failed swaps (applied, unseen) join: so every segment must begin
/// at 0 or at a failed swap's value, one must end at `last`, no more
/// segments than failed swaps may need joining, every returned value was
/// written by a call invoked before it was returned, and along a segment
/// no swap returned before the one it follows was invoked.
pub fn check_swaps(calls: &[&Call], last: i64) -> Result<(), String> {
    let writer: std::collections::HashMap<i64, &Call> =
        calls.iter().filter_map(|c| Some((c.wrote?, *c))).collect();
    let mut out: std::collections::HashMap<i64, &Call> = Default::default();
    for c in calls {
        if let Outcome::Swapped(v) = c.outcome {
            if let Some(other) = out.insert(v, c) {
                return Err(format!("value {v} returned twice: {other:?} and {c:?}"));
            }
            if v != 0 {
                let w = writer
                    .get(&v)
                    .ok_or_else(|| format!("{c:?} returned {v}, which no call wrote"))?;
                if w.invoked > c.returned {
                    return Err(format!(
                        "{c:?} returned {v}, written by {w:?}, which began after it returned"
                    ));
                }
            }
        }
    }
    if last != 0 && !writer.contains_key(&last) {
        return Err(format!("the register holds {last}, which no call wrote"));
    }
    let failed: Vec<&Call> = calls
        .iter()
        .filter(|c| c.failed() && c.applied() != Applied::Never)
        .copied()
        .collect();
    // The segments: from 0, and from each failed swap's value.
    let heads = std::iter::once(0).chain(failed.iter().filter_map(|c| c.wrote));
    let (mut seen, mut joins, mut ends_at_last) = (0usize, 0usize, false);
    for (i, head) in heads.enumerate() {
        let (mut at, mut prev): (i64, Option<&Call>) = (head, None);
        let mut len = 0;
        while let Some(c) = out.get(&at) {
            if let Some(p) = prev
                && c.returned < p.invoked
            {
                return Err(format!(
                    "{c:?} returned before {p:?}, whose value it replaced, was invoked"
                ));
            }
            prev = Some(c);
            at = c.wrote.ok_or_else(|| format!("{c:?} wrote nothing"))?;
            len += 1;
            if len > calls.len() {
                return Err("the swaps' values form a cycle".into());
            }
        }
        seen += len;
        if at == last {
            ends_at_last = true;
        } else if len > 0 || i == 0 {
            // Its end was replaced by a failed swap.
            joins += 1;
        }
    }
    let succeeded = calls
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Swapped(_)))
        .count();
    if seen != succeeded {
        return Err(format!(
            "{} successful swaps are on no segment from 0 or from a failed swap's value",
            succeeded - seen
        ));
    }
    if !ends_at_last {
        return Err(format!(
            "no chain of swaps ends at the register's value {last}"
        ));
    }
    if joins > failed.len() {
        return Err(format!(
            "{joins} segments of swaps end at a value that no successful swap replaced, but only {} swaps failed",
            failed.len()
        ));
    }
    Ok(())
}
