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
//! oldest are dropped, and the file says how many (`otherData`).
//!
//! Times are microseconds since 2026-01-01 UTC ([`EPOCH_UNIX_S`]), read
//! through one anchor per process (the wall clock once, `Instant` after),
//! so the files of ranks on one host line up when merged ([`merge`]).

mod chrome;
mod merge;

pub use merge::{MergeError, merge_documents};

use pld_proto::OpKind;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One recorded event: what, from when to when, and whether it went well
/// (an instant starts and ends at once).
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub what: What,
    pub start: Instant,
    pub end: Instant,
    pub ok: bool,
}

/// What an event was.
#[derive(Debug, Clone)]
pub(crate) enum What {
    /// An op this rank issued to `peer`, from issue to completion.
    Op { peer: u32, op: OpKind, id: u64 },
    /// An op of `origin` applied here.
    Applied { origin: u32, op: OpKind, id: u64 },
    /// A barrier, from entry to its end (or its deadline).
    Barrier { epoch: u64 },
    /// A barrier signal sent to `peer` (`sent`) or heard from it.
    Signal {
        peer: u32,
        epoch: u64,
        round: u32,
        sent: bool,
    },
    /// A span on the sync track: a wait on a signal cell (`wait ...`), or
    /// what a layer above the rank names (a device barrier's rounds).
    Span { cat: &'static str, name: String },
    /// A race in this rank's window between accesses of `ranks`.
    Race { ranks: [u32; 2], report: String },
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

    fn record(&self, e: Event) {
        let mut r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if r.events.len() == Self::capacity() {
            r.events.pop_front();
            r.dropped += 1;
        }
        r.events.push_back(e);
    }

    /// Records `what`, from `start` until now.
    fn push(&self, what: What, start: Instant, ok: bool) {
        let end = Instant::now();
        self.record(Event {
            what,
            start,
            end,
            ok,
        });
    }

    /// An op to `peer`, issued at `issued`, completed (or failed) at `done`.
    pub(crate) fn op(
        &self,
        peer: u32,
        op: OpKind,
        id: u64,
        issued: Instant,
        done: Instant,
        ok: bool,
    ) {
        let what = What::Op { peer, op, id };
        self.record(Event {
            what,
            start: issued,
            end: done,
            ok,
        });
    }

    /// An op of `origin` applied here between `start` and now.
    pub(crate) fn applied(&self, origin: u32, op: OpKind, id: u64, start: Instant, ok: bool) {
        self.push(What::Applied { origin, op, id }, start, ok);
    }

    /// A barrier of `epoch` entered at `start`, ended now.
    pub(crate) fn barrier(&self, epoch: u64, start: Instant, ok: bool) {
        self.push(What::Barrier { epoch }, start, ok);
    }

    /// A barrier signal of `epoch`'s `round` sent to `peer` or heard from it, now.
    pub(crate) fn signal(&self, peer: u32, epoch: u64, round: u32, sent: bool) {
        let what = What::Signal {
            peer,
            epoch,
            round,
            sent,
        };
        self.push(what, Instant::now(), true);
    }

    /// A wait for `what`, from `start` until now.
    pub(crate) fn wait(&self, what: &str, start: Instant, ok: bool) {
        self.span("wait", format!("wait {what}"), start, ok);
    }

    /// A span of category `cat` named `name` on this rank's sync track,
    /// from `start` until now: for layers above the rank (a device's
    /// barrier and its rounds, a collective).
    pub fn span(&self, cat: &'static str, name: String, start: Instant, ok: bool) {
        self.push(What::Span { cat, name }, start, ok);
    }

    /// A race in this rank's window between accesses of `ranks`,
    /// described by `report`.
    pub(crate) fn race(&self, ranks: [u32; 2], report: String) {
        self.push(What::Race { ranks, report }, Instant::now(), false);
    }

    /// The trace as a Chrome trace-event JSON document.
    pub fn to_json(&self) -> String {
        merge(&[self])
    }

    /// Appends this trace's events (JSON objects, each followed by a
    /// comma) to `out`; returns how many were dropped.
    fn write_events(&self, out: &mut String) -> u64 {
        let r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        chrome::write_rank(self.rank, &r.events, out);
        r.dropped
    }
}

/// Checks at start that the timeline can be written to `path` (it is
/// written at the end of a run, when finding out is too late): creates
/// the file, or opens an existing one, for writing. An error says why.
pub fn check_writable(path: &std::path::Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
}

/// The traces of several ranks as one Chrome trace-event JSON document.
pub fn merge(traces: &[&Trace]) -> String {
    let mut out = String::from(merge::HEAD);
    let mut dropped = 0;
    for t in traces {
        dropped += t.write_events(&mut out);
    }
    // The last event's comma.
    out.truncate(out.trim_end().trim_end_matches(',').len());
    let _ = write!(
        out,
        "\n],\n\"otherData\":{{\"dropped_events\":{dropped},\"capacity_per_rank\":{}}}}}\n",
        Trace::capacity()
    );
    out
}

/// Where a trace's clock starts: 2026-01-01T00:00:00Z, in seconds since
/// the Unix epoch. Viewers read a timestamp as a double of microseconds:
/// counted from here they keep nanoseconds for years (from 1970 they
/// would keep a quarter of a microsecond).
pub const EPOCH_UNIX_S: u64 = 1_767_225_600;

/// The process's clock anchor: an instant and the wall-clock time at it,
/// in nanoseconds since [`EPOCH_UNIX_S`].
fn anchor() -> &'static (Instant, i64) {
    static ANCHOR: OnceLock<(Instant, i64)> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        (Instant::now(), wall - EPOCH_UNIX_S as i64 * 1_000_000_000)
    })
}

/// `at` in nanoseconds since [`EPOCH_UNIX_S`].
pub(crate) fn ns(at: Instant) -> i64 {
    let (i, wall) = anchor();
    if at >= *i {
        wall + at.duration_since(*i).as_nanos() as i64
    } else {
        wall - i.duration_since(at).as_nanos() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::chrome::{flow_id, signal_flow_id};
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
                r#""ph":"s","cat":"op","name":"put to 1","id":{id},"pid":0"#
            )),
            "{doc}"
        );
        assert!(
            doc.contains(&format!(
                r#""ph":"f","bp":"e","cat":"op","name":"put from 0","id":{id},"pid":1"#
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
    fn ops_in_flight_that_overlap_without_nesting_go_on_lanes_of_their_own() {
        let t = Trace::new(0);
        let ms = std::time::Duration::from_millis;
        let t0 = Instant::now();
        // [t0, t0+4] and [t0+2, t0+6] overlap, neither inside the other.
        t.op(1, OpKind::Put, 1, t0, t0 + ms(4), true);
        t.op(1, OpKind::Notify, 2, t0 + ms(2), t0 + ms(6), true);
        let doc = t.to_json();
        let tid_of = |name: &str| {
            let at = doc.find(&format!(r#""name":"{name}""#)).expect(name);
            let rest = &doc[at..];
            let t = &rest[rest.find(r#""tid":"#).expect("tid") + 6..];
            t[..t.find(',').expect("comma")].to_string()
        };
        assert_ne!(tid_of("put to 1"), tid_of("notify to 1"), "{doc}");
        assert!(doc.contains(r#""args":{"name":"ops issued 2"}"#), "{doc}");
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
