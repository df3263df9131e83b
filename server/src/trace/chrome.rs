//! A rank's events as Chrome trace-event JSON: a process per rank, its
//! tracks (Chrome "threads") for ops issued, ops applied here, and
//! barriers, waits and races.
//!
//! A track's complete events ("X") must nest: ops in flight overlap
//! without nesting (a put issued before a notify may complete after it),
//! and a viewer drops such a slice. So each track is laid out in lanes —
//! a slice goes on the first lane where it nests in what is open there —
//! and each lane is a thread of its own (`ops issued`, `ops issued 2`,
//! ...). A flow's end binds to the slice it starts or ends in, so it
//! carries its slice's lane.

use super::{Event, What, ns};
use std::fmt::Write as _;

/// The tracks of a rank's process, in display order.
const TRACKS: [(u32, &str); 3] = [
    (1, "ops issued"),
    (2, "ops applied here"),
    (3, "barriers, waits, races"),
];
const OPS: u32 = TRACKS[0].0;
const SERVED: u32 = TRACKS[1].0;
const SYNC: u32 = TRACKS[2].0;

/// Nanoseconds as microseconds with three decimals, exactly.
fn micros(ns: i64) -> String {
    format!("{}.{:03}", ns.div_euclid(1000), ns.rem_euclid(1000))
}

/// How far apart two slices' edges must be for one lane: a viewer reads
/// `ts` and `dur` as doubles and adds them, a few nanoseconds off, and a
/// slice that ends a nanosecond past its neighbour's start is dropped.
const MARGIN_NS: i64 = 16;

/// A thread id per (track, lane).
fn tid(track: u32, lane: usize) -> u64 {
    track as u64 * 1000 + lane as u64
}

/// One complete event, before its lane is known.
struct Slice {
    track: u32,
    /// Nanoseconds since the trace's epoch: whole, so that what nests
    /// here nests in the file too (its microseconds have three decimals).
    start: i64,
    end: i64,
    cat: &'static str,
    name: String,
    /// The `args` object's members.
    args: String,
    /// A flow it starts ("s", with its target) or ends ("f"), and its id.
    flow: Option<(&'static str, u64, Option<u32>)>,
}

/// Appends rank `me`'s events to `out`, each followed by a comma.
pub(super) fn write_rank<'a>(
    me: u32,
    events: impl IntoIterator<Item = &'a Event>,
    out: &mut String,
) {
    let mut ev = |s: std::fmt::Arguments<'_>| {
        let _ = out.write_fmt(s);
        out.push_str(",\n");
    };
    ev(format_args!(
        r#"{{"ph":"M","name":"process_name","pid":{me},"args":{{"name":"rank {me}"}}}}"#
    ));
    ev(format_args!(
        r#"{{"ph":"M","name":"process_sort_index","pid":{me},"args":{{"sort_index":{me}}}}}"#
    ));
    let mut slices = Vec::new();
    for e in events {
        if let What::Race { ranks, report } = &e.what {
            let ts = micros(ns(e.start));
            let report = json_escape(report);
            let [a, b] = *ranks;
            // On the process of the window's rank and of each rank whose
            // access it was: a race is a pair.
            let mut pids = vec![me, a, b];
            pids.sort_unstable();
            pids.dedup();
            for pid in pids {
                ev(format_args!(
                    r#"{{"ph":"i","s":"p","cat":"race","name":"race","pid":{pid},"tid":{},"ts":{ts},"args":{{"window_of":{me},"ranks":[{a},{b}],"report":"{report}"}}}}"#,
                    tid(SYNC, 0)
                ));
            }
            continue;
        }
        slices.extend(slice(me, e));
    }
    // Lanes: a slice goes where it nests; longer first at a tie, so a
    // span's own rounds nest in it.
    slices.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut lanes: Vec<(u32, Vec<i64>)> = Vec::new();
    let mut used = Vec::new();
    for s in &slices {
        let end = s.end;
        let mut lane = 0;
        let mut at = None;
        for (i, (track, open)) in lanes.iter_mut().enumerate() {
            if *track != s.track {
                continue;
            }
            while open.last().is_some_and(|e| *e + MARGIN_NS <= s.start) {
                open.pop();
            }
            if open.last().is_none_or(|e| *e >= end + MARGIN_NS) {
                open.push(end);
                at = Some(i);
                break;
            }
            lane += 1;
        }
        if at.is_none() {
            lanes.push((s.track, vec![end]));
            used.push((s.track, lane));
        }
        let tid = tid(s.track, lane);
        let (ts, dur) = (micros(s.start), micros(s.end - s.start));
        let (cat, name, args) = (s.cat, json_escape(&s.name), &s.args);
        ev(format_args!(
            r#"{{"ph":"X","cat":"{cat}","name":"{name}","pid":{me},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{{args}}}}}"#
        ));
        match s.flow {
            Some(("s", id, to)) => {
                let to = to.map_or(String::new(), |t| format!(r#","args":{{"to":{t}}}"#));
                ev(format_args!(
                    r#"{{"ph":"s","cat":"{cat}","name":"{name}","id":{id},"pid":{me},"tid":{tid},"ts":{ts}{to}}}"#
                ));
            }
            Some((_, id, _)) => ev(format_args!(
                r#"{{"ph":"f","bp":"e","cat":"{cat}","name":"{name}","id":{id},"pid":{me},"tid":{tid},"ts":{ts}}}"#
            )),
            None => {}
        }
    }
    used.sort_unstable();
    for (track, lane) in used {
        let base = TRACKS.iter().find(|t| t.0 == track).map_or("", |t| t.1);
        let name = match lane {
            0 => base.to_string(),
            n => format!("{base} {}", n + 1),
        };
        let tid = tid(track, lane);
        ev(format_args!(
            r#"{{"ph":"M","name":"thread_name","pid":{me},"tid":{tid},"args":{{"name":"{name}"}}}}"#
        ));
        ev(format_args!(
            r#"{{"ph":"M","name":"thread_sort_index","pid":{me},"tid":{tid},"args":{{"sort_index":{tid}}}}}"#
        ));
    }
}

/// An event as a slice of rank `me` (a race is none: an instant).
fn slice(me: u32, e: &Event) -> Option<Slice> {
    let (track, cat, name, args, flow) = match &e.what {
        What::Op { peer, op, id } => (
            OPS,
            "op",
            format!("{} to {peer}", op.name()),
            format!(r#""to":{peer},"id":{id}"#),
            Some(("s", flow_id(me, *peer, *id), Some(*peer))),
        ),
        What::Applied { origin, op, id } => (
            SERVED,
            "op",
            format!("{} from {origin}", op.name()),
            format!(r#""from":{origin},"id":{id}"#),
            Some(("f", flow_id(*origin, me, *id), None)),
        ),
        What::Barrier { epoch } => (
            SYNC,
            "barrier",
            match e.ok {
                true => format!("barrier epoch {epoch}"),
                false => format!("barrier epoch {epoch} (timed out)"),
            },
            format!(r#""epoch":{epoch}"#),
            None,
        ),
        What::Signal {
            peer,
            epoch,
            round,
            sent,
        } => {
            let (from, to) = if *sent { (me, *peer) } else { (*peer, me) };
            let (dir, ph) = if *sent { ("to", "s") } else { ("from", "f") };
            (
                SYNC,
                "barrier",
                format!("round {} signal {dir} {peer}", round + 1),
                format!(
                    r#""epoch":{epoch},"round":{},"from":{from},"to":{to}"#,
                    round + 1
                ),
                Some((ph, signal_flow_id(from, to, *epoch, *round), None)),
            )
        }
        What::Span { cat, name } => (SYNC, *cat, name.clone(), String::new(), None),
        What::Race { .. } => return None,
    };
    let start = ns(e.start);
    // A signal is an instant: a tenth of a microsecond, for a flow to bind.
    let end = match e.what {
        What::Signal { .. } => start + 100,
        _ => ns(e.end).max(start + 1),
    };
    let ok = format!(r#""ok":{}"#, e.ok);
    let args = if args.is_empty() {
        ok
    } else {
        format!("{args},{ok}")
    };
    Some(Slice {
        track,
        start,
        end,
        cat,
        name,
        args,
        flow,
    })
}

/// The flow of op `id` of the link from `origin` to `target`: the same
/// number on both ranks (ranks below 2048; the top bit stays clear).
pub(super) fn flow_id(origin: u32, target: u32, id: u64) -> u64 {
    ((origin as u64 & 0x7ff) << 52) | ((target as u64 & 0xfff) << 40) | (id & 0xff_ffff_ffff)
}

/// A barrier signal's flow: the top bit set, so it never meets an op's.
pub(super) fn signal_flow_id(from: u32, to: u32, epoch: u64, round: u32) -> u64 {
    ((from as u64) << 48 ^ (to as u64) << 32 ^ epoch << 6 ^ round as u64) | 1 << 63
}

fn json_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}
