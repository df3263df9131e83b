//! `--trace`: what a rank did and when, for a timeline — each op from its
//! issue to its completion at the origin and its application at the
//! target, each barrier with its rounds' signals, each wait on a signal
//! cell, each race `--checked` found — written as Chrome trace-event JSON,
//! which Perfetto's UI (ui.perfetto.dev) and chrome://tracing open: a
//! process per rank, a flow from each op's issue to its application.
//!
//! Off (the default) a rank holds no `Trace`, and each place that records
//! costs one branch on an `Option`. On, an event is a few words pushed
//! under a mutex into a ring of [`Trace::capacity`] events: past it the
//! oldest are dropped, and the file says how many.
//!
//! Times are microseconds since the Unix epoch, read through one anchor
//! per process (the wall clock once, `Instant` after), so the files of
//! ranks on one host line up when merged ([`merge`]).

use pld_proto::OpKind;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The tracks (Chrome "threads") of a rank's process.
const OPS: u32 = 1;
const SERVED: u32 = 2;
const SYNC: u32 = 3;

/// One recorded event.
#[derive(Debug, Clone)]
enum Event {
    /// An op this rank issued to `peer`, from issue to completion.
    Op {
        peer: u32,
        op: OpKind,
        id: u64,
        issued: Instant,
        done: Instant,
        ok: bool,
    },
    /// An op of `origin` applied here.
    Applied {
        origin: u32,
        op: OpKind,
        id: u64,
        start: Instant,
        end: Instant,
        ok: bool,
    },
    /// A barrier, from entry to its end (or its deadline).
    Barrier {
        epoch: u64,
        start: Instant,
        end: Instant,
        ok: bool,
    },
    /// A barrier signal sent to `to` (`sent`) or heard from it.
    Signal {
        peer: u32,
        epoch: u64,
        round: u32,
        at: Instant,
        sent: bool,
    },
    /// A span on the sync track: a wait on a signal cell (`wait ...`), or
    /// what a layer above the rank names (a device barrier's rounds).
    Span {
        cat: &'static str,
        name: String,
        start: Instant,
        end: Instant,
        ok: bool,
    },
    /// A race in this rank's window between accesses of `ranks`.
    Race {
        ranks: [u32; 2],
        what: String,
        at: Instant,
    },
}

/// A rank's trace: a ring of its latest events.
#[derive(Debug)]
pub struct Trace {
    rank: u32,
    ring: Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    events: VecDeque<Event>,
    dropped: u64,
}

impl Trace {
    /// Events a trace keeps (about 100 bytes each).
    pub const fn capacity() -> usize {
        1 << 20
    }

    /// The trace of rank `rank`.
    pub fn new(rank: u32) -> Trace {
        anchor();
        Trace {
            rank,
            ring: Mutex::new(Ring {
                events: VecDeque::new(),
                dropped: 0,
            }),
        }
    }

    fn push(&self, e: Event) {
        let mut r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if r.events.len() == Self::capacity() {
            r.events.pop_front();
            r.dropped += 1;
        }
        r.events.push_back(e);
    }

    /// An op to `peer`, issued at `issued`, completed (or failed) now.
    pub(crate) fn op(
        &self,
        peer: u32,
        op: OpKind,
        id: u64,
        issued: Instant,
        done: Instant,
        ok: bool,
    ) {
        self.push(Event::Op {
            peer,
            op,
            id,
            issued,
            done,
            ok,
        });
    }

    /// An op of `origin` applied here between `start` and now.
    pub(crate) fn applied(&self, origin: u32, op: OpKind, id: u64, start: Instant, ok: bool) {
        let end = Instant::now();
        self.push(Event::Applied {
            origin,
            op,
            id,
            start,
            end,
            ok,
        });
    }

    /// A barrier of `epoch` entered at `start`, ended now.
    pub(crate) fn barrier(&self, epoch: u64, start: Instant, ok: bool) {
        let end = Instant::now();
        self.push(Event::Barrier {
            epoch,
            start,
            end,
            ok,
        });
    }

    /// A barrier signal of `epoch`'s `round` sent to `peer` or heard from it, now.
    pub(crate) fn signal(&self, peer: u32, epoch: u64, round: u32, sent: bool) {
        let at = Instant::now();
        self.push(Event::Signal {
            peer,
            epoch,
            round,
            at,
            sent,
        });
    }

    /// A wait for `what`, from `start` until now.
    pub(crate) fn wait(&self, what: &str, start: Instant, ok: bool) {
        self.span("wait", format!("wait {what}"), start, ok);
    }

    /// A span of category `cat` named `name` on this rank's sync track,
    /// from `start` until now: for layers above the rank (a device's
    /// barrier and its rounds, a collective).
    pub fn span(&self, cat: &'static str, name: String, start: Instant, ok: bool) {
        let end = Instant::now();
        self.push(Event::Span {
            cat,
            name,
            start,
            end,
            ok,
        });
    }

    /// A race in this rank's window between accesses of `ranks`,
    /// described by `what`.
    pub(crate) fn race(&self, ranks: [u32; 2], what: String) {
        let at = Instant::now();
        self.push(Event::Race { ranks, what, at });
    }

    /// The trace as a Chrome trace-event JSON document.
    pub fn to_json(&self) -> String {
        merge(&[self])
    }

    /// Appends this trace's events (JSON objects, each followed by a
    /// comma) to `out`; returns how many were dropped.
    fn write_events(&self, out: &mut String) -> u64 {
        let r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let me = self.rank;
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
        for (tid, name) in [
            (OPS, "ops issued"),
            (SERVED, "ops applied here"),
            (SYNC, "barriers, waits, races"),
        ] {
            ev(format_args!(
                r#"{{"ph":"M","name":"thread_name","pid":{me},"tid":{tid},"args":{{"name":"{name}"}}}}"#
            ));
        }
        for e in &r.events {
            match e {
                Event::Op {
                    peer,
                    op,
                    id,
                    issued,
                    done,
                    ok,
                } => {
                    let (name, ts, dur) = (op.name(), us(*issued), span(*issued, *done));
                    let flow = flow_id(me, *peer, *id);
                    ev(format_args!(
                        r#"{{"ph":"X","cat":"op","name":"{name} to {peer}","pid":{me},"tid":{OPS},"ts":{ts:.3},"dur":{dur:.3},"args":{{"to":{peer},"id":{id},"ok":{ok}}}}}"#
                    ));
                    ev(format_args!(
                        r#"{{"ph":"s","cat":"op","name":"{name}","id":{flow},"pid":{me},"tid":{OPS},"ts":{ts:.3},"args":{{"to":{peer}}}}}"#
                    ));
                }
                Event::Applied {
                    origin,
                    op,
                    id,
                    start,
                    end,
                    ok,
                } => {
                    let (name, ts, dur) = (op.name(), us(*start), span(*start, *end));
                    let flow = flow_id(*origin, me, *id);
                    ev(format_args!(
                        r#"{{"ph":"X","cat":"op","name":"{name} from {origin}","pid":{me},"tid":{SERVED},"ts":{ts:.3},"dur":{dur:.3},"args":{{"from":{origin},"id":{id},"ok":{ok}}}}}"#
                    ));
                    ev(format_args!(
                        r#"{{"ph":"f","bp":"e","cat":"op","name":"{name}","id":{flow},"pid":{me},"tid":{SERVED},"ts":{ts:.3}}}"#
                    ));
                }
                Event::Barrier {
                    epoch,
                    start,
                    end,
                    ok,
                } => {
                    let (ts, dur) = (us(*start), span(*start, *end));
                    let name = if *ok {
                        "barrier"
                    } else {
                        "barrier (timed out)"
                    };
                    ev(format_args!(
                        r#"{{"ph":"X","cat":"barrier","name":"{name} epoch {epoch}","pid":{me},"tid":{SYNC},"ts":{ts:.3},"dur":{dur:.3},"args":{{"epoch":{epoch},"ok":{ok}}}}}"#
                    ));
                }
                Event::Signal {
                    peer,
                    epoch,
                    round,
                    at,
                    sent,
                } => {
                    let ts = us(*at);
                    let (from, to) = if *sent { (me, *peer) } else { (*peer, me) };
                    let name = if *sent {
                        format!("round {} signal to {peer}", round + 1)
                    } else {
                        format!("round {} signal from {peer}", round + 1)
                    };
                    ev(format_args!(
                        r#"{{"ph":"X","cat":"barrier","name":"{name}","pid":{me},"tid":{SYNC},"ts":{ts:.3},"dur":0.1,"args":{{"epoch":{epoch},"round":{},"from":{from},"to":{to}}}}}"#,
                        round + 1
                    ));
                    let (ph, bp) = if *sent {
                        ("s", "")
                    } else {
                        ("f", r#","bp":"e""#)
                    };
                    let flow = signal_flow_id(from, to, *epoch, *round);
                    ev(format_args!(
                        r#"{{"ph":"{ph}"{bp},"cat":"barrier","name":"signal","id":{flow},"pid":{me},"tid":{SYNC},"ts":{ts:.3}}}"#
                    ));
                }
                Event::Span {
                    cat,
                    name,
                    start,
                    end,
                    ok,
                } => {
                    let (ts, dur) = (us(*start), span(*start, *end));
                    let name = json_escape(name);
                    ev(format_args!(
                        r#"{{"ph":"X","cat":"{cat}","name":"{name}","pid":{me},"tid":{SYNC},"ts":{ts:.3},"dur":{dur:.3},"args":{{"ok":{ok}}}}}"#
                    ));
                }
                Event::Race { ranks, what, at } => {
                    let ts = us(*at);
                    let what = json_escape(what);
                    let [a, b] = *ranks;
                    // On the track of the window's rank and of each rank
                    // whose access it was: a race is a pair.
                    let mut pids = vec![me, a, b];
                    pids.sort_unstable();
                    pids.dedup();
                    for pid in pids {
                        ev(format_args!(
                            r#"{{"ph":"i","s":"p","cat":"race","name":"race","pid":{pid},"tid":{SYNC},"ts":{ts:.3},"args":{{"window_of":{me},"ranks":[{a},{b}],"report":"{what}"}}}}"#
                        ));
                    }
                }
            }
        }
        r.dropped
    }
}

/// The traces of several ranks as one Chrome trace-event JSON document.
pub fn merge(traces: &[&Trace]) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut dropped = 0;
    for t in traces {
        dropped += t.write_events(&mut out);
    }
    let _ = write!(
        out,
        r#"{{"ph":"M","name":"pld","pid":0,"args":{{"dropped_events":{dropped},"capacity_per_rank":{}}}}}"#,
        Trace::capacity()
    );
    out.push_str("\n]}\n");
    out
}

/// Merges trace documents written by [`merge`] (ranks of other processes)
/// into one: their events, in one `traceEvents` array.
pub fn merge_documents(docs: &[String]) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut first = true;
    for d in docs {
        let Some(body) = d
            .split_once("\"traceEvents\":[")
            .and_then(|(_, rest)| rest.rsplit_once(']'))
            .map(|(events, _)| events.trim())
        else {
            continue;
        };
        if body.is_empty() {
            continue;
        }
        if !first {
            out.push_str(",\n");
        }
        out.push_str(body);
        first = false;
    }
    out.push_str("\n]}\n");
    out
}

/// The process's clock anchor: an instant and the wall-clock time at it.
fn anchor() -> &'static (Instant, f64) {
    static ANCHOR: OnceLock<(Instant, f64)> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6);
        (Instant::now(), wall)
    })
}

/// `at` in microseconds since the Unix epoch.
fn us(at: Instant) -> f64 {
    let (i, wall) = anchor();
    if at >= *i {
        wall + at.duration_since(*i).as_secs_f64() * 1e6
    } else {
        wall - i.duration_since(at).as_secs_f64() * 1e6
    }
}

/// Microseconds from `a` to `b`, at least a nanosecond (a slice of no
/// length binds no flow).
fn span(a: Instant, b: Instant) -> f64 {
    (b.saturating_duration_since(a).as_secs_f64() * 1e6).max(0.001)
}

/// The flow of op `id` of the link from `origin` to `target`: the same
/// number on both ranks (ranks below 2048; the top bit stays clear).
fn flow_id(origin: u32, target: u32, id: u64) -> u64 {
    ((origin as u64 & 0x7ff) << 52) | ((target as u64 & 0xfff) << 40) | (id & 0xff_ffff_ffff)
}

/// A barrier signal's flow: the top bit set, so it never meets an op's.
fn signal_flow_id(from: u32, to: u32, epoch: u64, round: u32) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_flow_has_one_id_on_the_origin_and_on_the_target() {
        let (origin, target) = (Trace::new(0), Trace::new(1));
        let t0 = Instant::now();
        origin.op(1, OpKind::Put, 7, t0, Instant::now(), true);
        target.applied(0, OpKind::Put, 7, t0, true);
        let doc = merge(&[&origin, &target]);
        let id = flow_id(0, 1, 7);
        assert!(
            doc.contains(&format!(
                r#""ph":"s","cat":"op","name":"put","id":{id},"pid":0"#
            )),
            "{doc}"
        );
        assert!(
            doc.contains(&format!(
                r#""ph":"f","bp":"e","cat":"op","name":"put","id":{id},"pid":1"#
            )),
            "{doc}"
        );
        assert_ne!(flow_id(0, 1, 7), flow_id(1, 0, 7));
        assert_ne!(
            signal_flow_id(0, 1, 1, 0) >> 63,
            flow_id(2047, 4095, u64::MAX) >> 63
        );
    }

    #[test]
    fn a_race_is_on_the_tracks_of_the_window_and_of_both_accesses() {
        let t = Trace::new(0);
        t.race([0, 2], "race on rank 0's \"data\"\nbytes 0..8".into());
        let doc = t.to_json();
        for pid in [0, 2] {
            assert!(
                doc.contains(&format!(r#""cat":"race","name":"race","pid":{pid}"#)),
                "{doc}"
            );
        }
        assert_eq!(doc.matches(r#""cat":"race""#).count(), 2, "{doc}");
        assert!(
            doc.contains(r#"rank 0's \"data\"\nbytes"#),
            "escaped: {doc}"
        );
    }

    #[test]
    fn merged_documents_hold_every_rank_s_events_in_one_array() {
        let docs: Vec<String> = (0..3)
            .map(|r| {
                let t = Trace::new(r);
                t.barrier(1, Instant::now(), true);
                t.to_json()
            })
            .collect();
        let all = merge_documents(&docs);
        assert!(all.starts_with("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"));
        assert!(all.trim_end().ends_with("]}"));
        for r in 0..3 {
            assert!(
                all.contains(&format!(r#""args":{{"name":"rank {r}"}}"#)),
                "{all}"
            );
        }
        assert_eq!(all.matches("barrier epoch 1").count(), 3);
    }

    #[test]
    fn a_full_ring_drops_the_oldest_events_and_says_how_many() {
        let t = Trace::new(0);
        for round in 0..Trace::capacity() as u32 + 5 {
            t.signal(1, 1, round, true);
        }
        let doc = t.to_json();
        assert!(
            doc.contains(r#""dropped_events":5"#),
            "{}",
            &doc[doc.len() - 200..]
        );
        assert!(!doc.contains(r#""name":"round 5 signal to 1""#));
        assert!(doc.contains(r#""name":"round 6 signal to 1""#));
    }
}
