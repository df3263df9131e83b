//! Per-op counters of one rank: messages sent and received by kind, bytes,
//! ops issued / completed / failed, requests served and rejected. Later
//! issues prove message counts (one put per `remote_store`, P·⌈log₂P⌉
//! barrier messages) with these.

use pld_proto::{MsgKind, OpKind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const MSGS: usize = MsgKind::ALL.len();
const OPS: usize = OpKind::ALL.len();

fn zeros<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

/// Live counters, updated on the data path with relaxed atomics.
#[derive(Debug)]
pub struct Stats {
    msgs_sent: [AtomicU64; MSGS],
    msgs_received: [AtomicU64; MSGS],
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    ops_issued: [AtomicU64; OPS],
    ops_local: [AtomicU64; OPS],
    ops_failed: [AtomicU64; OPS],
    requests_served: [AtomicU64; OPS],
    requests_rejected: [AtomicU64; OPS],
    frame_errors: AtomicU64,
    auth_refused: AtomicU64,
    races: AtomicU64,
    checked_ranges: AtomicU64,
    checked_forgotten: AtomicU64,
    /// Issue-to-completion time of remote ops, by kind.
    latency: [Histogram; OPS],
}

/// Upper bounds of the latency buckets, in microseconds (1-2-5 steps from
/// 5 µs to 10 s); a last bucket takes everything slower.
pub const LATENCY_BUCKETS_US: [u64; 19] = [
    5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
    500_000, 1_000_000, 2_000_000, 10_000_000,
];

/// A latency histogram with fixed buckets, updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct Histogram {
    /// `buckets[i]` counts observations in (`bound[i-1]`, `bound[i]`]; the last
    /// one those above every bound.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn record(&self, d: std::time::Duration) {
        self.record_n(d, 1);
    }

    /// Records `n` observations of `d` each.
    pub fn record_n(&self, d: std::time::Duration, n: u64) {
        let us = d.as_micros() as u64;
        let i = LATENCY_BUCKETS_US.partition_point(|b| *b < us);
        self.buckets[i].fetch_add(n, Relaxed);
        self.sum_ns
            .fetch_add((d.as_nanos() as u64).saturating_mul(n), Relaxed);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            sum_ns: self.sum_ns.load(Relaxed),
        }
    }
}

/// A copy of a [`Histogram`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    /// Per bucket (not cumulative), the last one above every bound.
    pub buckets: Vec<u64>,
    /// The sum of every sample, in nanoseconds.
    pub sum_ns: u64,
}

impl HistogramSnapshot {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            msgs_sent: zeros(),
            msgs_received: zeros(),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            ops_issued: zeros(),
            ops_local: zeros(),
            ops_failed: zeros(),
            requests_served: zeros(),
            requests_rejected: zeros(),
            frame_errors: AtomicU64::new(0),
            auth_refused: AtomicU64::new(0),
            races: AtomicU64::new(0),
            checked_ranges: AtomicU64::new(0),
            checked_forgotten: AtomicU64::new(0),
            latency: std::array::from_fn(|_| Histogram::default()),
        }
    }
}

impl Stats {
    pub(crate) fn sent(&self, kind: MsgKind, bytes: usize) {
        self.msgs_sent[kind as usize].fetch_add(1, Relaxed);
        self.bytes_sent.fetch_add(bytes as u64, Relaxed);
    }
    /// Counts a message whose bytes are counted when its batch is written.
    pub(crate) fn msg_sent(&self, kind: MsgKind) {
        self.msgs_sent[kind as usize].fetch_add(1, Relaxed);
    }
    pub(crate) fn bytes_out(&self, bytes: usize) {
        self.bytes_sent.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn received(&self, kind: MsgKind, bytes: usize) {
        self.msgs_received[kind as usize].fetch_add(1, Relaxed);
        self.bytes_received.fetch_add(bytes as u64, Relaxed);
    }
    /// `n` frames of `kind` received, `bytes` in all, each a request of
    /// `op` served.
    pub(crate) fn served_n(&self, op: OpKind, kind: MsgKind, n: u64, bytes: u64) {
        self.msgs_received[kind as usize].fetch_add(n, Relaxed);
        self.requests_served[op as usize].fetch_add(n, Relaxed);
        self.bytes_received.fetch_add(bytes, Relaxed);
    }
    /// `n` frames of `kind`, each issuing an `op` (their bytes are counted
    /// apart).
    pub(crate) fn sent_n(&self, op: OpKind, kind: MsgKind, n: u64) {
        self.msgs_sent[kind as usize].fetch_add(n, Relaxed);
        self.ops_issued[op as usize].fetch_add(n, Relaxed);
    }
    pub(crate) fn issued(&self, op: OpKind) {
        self.ops_issued[op as usize].fetch_add(1, Relaxed);
    }
    pub(crate) fn local(&self, op: OpKind) {
        self.ops_local[op as usize].fetch_add(1, Relaxed);
    }
    pub(crate) fn failed(&self, op: OpKind) {
        self.ops_failed[op as usize].fetch_add(1, Relaxed);
    }
    pub(crate) fn served(&self, op: OpKind, ok: bool) {
        let c = if ok {
            &self.requests_served
        } else {
            &self.requests_rejected
        };
        c[op as usize].fetch_add(1, Relaxed);
    }
    /// A remote op of `kind` completed `d` after it was issued.
    pub(crate) fn completed(&self, kind: OpKind, d: std::time::Duration) {
        self.latency[kind as usize].record(d);
    }
    /// `n` remote ops of `kind`, issued together, completed `d` after.
    pub(crate) fn completed_n(&self, kind: OpKind, d: std::time::Duration, n: u64) {
        self.latency[kind as usize].record_n(d, n);
    }
    pub(crate) fn frame_error(&self) {
        self.frame_errors.fetch_add(1, Relaxed);
    }

    /// Checked mode: the races seen so far (repeats included), the ranges
    /// the shadows keep, and those forgotten over their budget.
    pub(crate) fn set_checked(&self, c: crate::checked::CheckedCounters) {
        self.races.store(c.races, Relaxed);
        self.checked_ranges.store(c.ranges, Relaxed);
        self.checked_forgotten.store(c.forgotten, Relaxed);
    }

    /// A peer connection refused at authentication (mutual TLS).
    pub(crate) fn auth_refused(&self) {
        self.auth_refused.fetch_add(1, Relaxed);
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let load = |a: &[AtomicU64]| a.iter().map(|c| c.load(Relaxed)).collect::<Vec<_>>();
        StatsSnapshot {
            msgs_sent: load(&self.msgs_sent),
            msgs_received: load(&self.msgs_received),
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            ops_issued: load(&self.ops_issued),
            ops_local: load(&self.ops_local),
            ops_failed: load(&self.ops_failed),
            requests_served: load(&self.requests_served),
            requests_rejected: load(&self.requests_rejected),
            frame_errors: self.frame_errors.load(Relaxed),
            auth_refused: self.auth_refused.load(Relaxed),
            races: self.races.load(Relaxed),
            checked_ranges: self.checked_ranges.load(Relaxed),
            checked_forgotten: self.checked_forgotten.load(Relaxed),
            latency: self.latency.iter().map(Histogram::snapshot).collect(),
        }
    }
}

/// Acknowledged ops of one kind issued at one instant, counted together.
#[derive(Default)]
pub(crate) struct CompletedRun {
    run: Option<(OpKind, std::time::Instant, u64)>,
}

impl CompletedRun {
    #[inline]
    pub(crate) fn add(
        &mut self,
        stats: &Stats,
        kind: OpKind,
        at: std::time::Instant,
        now: std::time::Instant,
    ) {
        match &mut self.run {
            Some((k, t, n)) if *k == kind && *t == at => *n += 1,
            _ => {
                self.flush(stats, now);
                self.run = Some((kind, at, 1));
            }
        }
    }

    pub(crate) fn flush(&mut self, stats: &Stats, now: std::time::Instant) {
        if let Some((kind, at, n)) = self.run.take() {
            stats.completed_n(kind, now.saturating_duration_since(at), n);
        }
    }
}

/// The counts of small request frames queued for one write, kept in plain
/// integers and added to the shared counters when the write takes them:
/// one atomic add per run of like frames, not three per frame (an 8-byte
/// put's origin spent a tenth of its instructions' time on them).
#[derive(Debug, Default)]
pub(crate) struct SentTally {
    /// The current run: its op, its frames' kind, how many.
    run: Option<(OpKind, MsgKind, u64)>,
    frames: u64,
    bytes: u64,
}

impl SentTally {
    /// One frame of `bytes` bytes issuing an `op`.
    #[inline]
    pub(crate) fn add(&mut self, stats: &Stats, op: OpKind, kind: MsgKind, bytes: usize) {
        self.frames += 1;
        self.bytes += bytes as u64;
        match &mut self.run {
            Some((o, k, n)) if *o == op && *k == kind => *n += 1,
            run => {
                if let Some((o, k, n)) = run.replace((op, kind, 1)) {
                    stats.sent_n(o, k, n);
                }
            }
        }
    }

    /// Adds what was tallied to `stats`; returns how many frames.
    pub(crate) fn flush(&mut self, stats: &Stats) -> u64 {
        if let Some((o, k, n)) = self.run.take() {
            stats.sent_n(o, k, n);
        }
        if self.bytes > 0 {
            stats.bytes_out(self.bytes as usize);
        }
        self.bytes = 0;
        std::mem::take(&mut self.frames)
    }
}

/// The counts of plain puts served from one read, added to the shared
/// counters before their replies are written (so an origin that sees its
/// ack sees them counted), as [`SentTally`] does for the origin.
#[derive(Debug, Default)]
pub(crate) struct ServedTally {
    puts: u64,
    bytes: u64,
}

impl ServedTally {
    /// A put frame of `bytes` bytes received and applied.
    pub(crate) fn put(&mut self, bytes: usize) {
        self.puts += 1;
        self.bytes += bytes as u64;
    }

    /// Adds what was tallied to `stats`; returns how many frames.
    pub(crate) fn flush(&mut self, stats: &Stats) -> u64 {
        let n = std::mem::take(&mut self.puts);
        if n > 0 {
            let bytes = std::mem::take(&mut self.bytes);
            stats.served_n(OpKind::Put, MsgKind::Put, n, bytes);
        }
        n
    }
}

/// A copy of a rank's counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    msgs_sent: Vec<u64>,
    msgs_received: Vec<u64>,
    /// Peer-plane bytes sent (headers and payloads).
    pub bytes_sent: u64,
    /// Peer-plane bytes received (headers and payloads).
    pub bytes_received: u64,
    ops_issued: Vec<u64>,
    ops_local: Vec<u64>,
    ops_failed: Vec<u64>,
    requests_served: Vec<u64>,
    requests_rejected: Vec<u64>,
    /// Connections closed because their bytes were not pld frames.
    pub frame_errors: u64,
    /// Peer connections refused at authentication: a certificate not of
    /// the cluster CA, or not naming the rank claimed.
    pub auth_refused: u64,
    /// Checked mode: races seen in this rank's windows, repeats included
    /// (each is reported once).
    pub races: u64,
    /// Checked mode: byte ranges the window shadows keep now (their cost).
    pub checked_ranges: u64,
    /// Checked mode: ranges forgotten because a shadow held its budget;
    /// races with the accesses they held are not reported.
    pub checked_forgotten: u64,
    latency: Vec<HistogramSnapshot>,
}

fn at(v: &[u64], i: usize) -> u64 {
    v.get(i).copied().unwrap_or(0)
}

impl StatsSnapshot {
    /// Messages of `kind` this rank sent.
    pub fn msgs_sent(&self, kind: MsgKind) -> u64 {
        at(&self.msgs_sent, kind as usize)
    }
    /// Messages of `kind` this rank received.
    pub fn msgs_received(&self, kind: MsgKind) -> u64 {
        at(&self.msgs_received, kind as usize)
    }
    /// Ops of `kind` this rank issued to other ranks.
    pub fn ops_issued(&self, kind: OpKind) -> u64 {
        at(&self.ops_issued, kind as usize)
    }
    /// Ops of `kind` this rank applied to its own windows without the network.
    pub fn ops_local(&self, kind: OpKind) -> u64 {
        at(&self.ops_local, kind as usize)
    }
    /// Ops of `kind` this rank issued that failed (any error).
    pub fn ops_failed(&self, kind: OpKind) -> u64 {
        at(&self.ops_failed, kind as usize)
    }
    /// Requests of `kind` from peers that this rank applied.
    pub fn requests_served(&self, kind: OpKind) -> u64 {
        at(&self.requests_served, kind as usize)
    }
    /// Issue-to-completion times of remote ops of `kind`.
    pub fn latency(&self, kind: OpKind) -> HistogramSnapshot {
        self.latency.get(kind as usize).cloned().unwrap_or_default()
    }
    /// Requests of `kind` from peers that this rank refused.
    pub fn requests_rejected(&self, kind: OpKind) -> u64 {
        at(&self.requests_rejected, kind as usize)
    }

    /// Every counter as `(name, kind, value)`: the Stats RPC and the
    /// metrics endpoint both list these.
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for k in MsgKind::ALL {
            out.push(("msgs_sent", k.name(), self.msgs_sent(k)));
            out.push(("msgs_received", k.name(), self.msgs_received(k)));
        }
        for k in OpKind::ALL {
            let n = k.name();
            out.push(("ops_issued", n, self.ops_issued(k)));
            out.push(("ops_local", n, self.ops_local(k)));
            out.push(("ops_failed", n, self.ops_failed(k)));
            out.push(("requests_served", n, self.requests_served(k)));
            out.push(("requests_rejected", n, self.requests_rejected(k)));
        }
        out.push(("bytes_sent", "", self.bytes_sent));
        out.push(("bytes_received", "", self.bytes_received));
        out.push(("frame_errors", "", self.frame_errors));
        out.push(("auth_refused", "", self.auth_refused));
        out.push(("races", "", self.races));
        out.push(("checked_ranges", "", self.checked_ranges));
        out.push(("checked_forgotten", "", self.checked_forgotten));
        out
    }
}
