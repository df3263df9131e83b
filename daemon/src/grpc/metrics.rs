//! Request counters and latency histograms of the client plane.

use pld_grpc::Method;
use pld_server::stats::{Histogram, HistogramSnapshot};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// gRPC status codes 0 (OK) to 16.
const CODES: usize = 17;

/// Per method: calls by status code, and the duration of every call; and
/// the connections and buffers of the plane.
#[derive(Debug)]
pub struct GrpcMetrics {
    calls: [[AtomicU64; CODES]; Method::ALL.len()],
    latency: [Histogram; Method::ALL.len()],
    /// Client connections open now (past their handshake).
    pub(crate) open: AtomicU64,
    /// Connections closed at once: the cap was reached.
    pub(crate) refused: AtomicU64,
    /// Connections closed for a failed or late TLS handshake or preface.
    pub(crate) handshakes_failed: AtomicU64,
    /// Unproven connections closed to make room for a new one.
    pub(crate) evicted: AtomicU64,
    /// Streams cancelled because their client stopped sending or reading.
    pub(crate) stalled: AtomicU64,
    budget: std::sync::OnceLock<super::budget::Budget>,
    drain: std::sync::OnceLock<std::sync::Arc<super::drain::Drain>>,
}

impl Default for GrpcMetrics {
    fn default() -> Self {
        GrpcMetrics {
            calls: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: std::array::from_fn(|_| Histogram::default()),
            open: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            handshakes_failed: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
            budget: std::sync::OnceLock::new(),
            drain: std::sync::OnceLock::new(),
        }
    }
}

/// The plane's connection and buffer figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaneSnapshot {
    pub open: u64,
    pub refused: u64,
    pub handshakes_failed: u64,
    pub evicted: u64,
    pub stalled: u64,
    /// Bytes of the buffer budget in use.
    pub buffered: u64,
    /// `Pld` calls in progress.
    pub running: u64,
}

/// One method's figures.
#[derive(Debug, Clone)]
pub struct MethodSnapshot {
    pub method: &'static str,
    /// `(code name, calls)` for every code seen.
    pub calls: Vec<(&'static str, u64)>,
    pub latency: HistogramSnapshot,
}

impl GrpcMetrics {
    pub(crate) fn record(&self, method: Method, code: tonic::Code, took: Duration) {
        let m = method as usize;
        let c = (code as usize).min(CODES - 1);
        self.calls[m][c].fetch_add(1, Relaxed);
        self.latency[m].record(took);
    }

    /// Calls of `method` so far, whatever their outcome.
    pub fn calls(&self, method: Method) -> u64 {
        self.calls[method as usize]
            .iter()
            .map(|c| c.load(Relaxed))
            .sum()
    }

    pub(crate) fn watch_budget(&self, b: super::budget::Budget) {
        let _ = self.budget.set(b);
    }

    pub(crate) fn watch_drain(&self, d: std::sync::Arc<super::drain::Drain>) {
        let _ = self.drain.set(d);
    }

    /// Connections and buffers now.
    pub fn plane(&self) -> PlaneSnapshot {
        PlaneSnapshot {
            open: self.open.load(Relaxed),
            refused: self.refused.load(Relaxed),
            handshakes_failed: self.handshakes_failed.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            stalled: self.stalled.load(Relaxed),
            buffered: self.budget.get().map_or(0, |b| b.in_use() as u64),
            running: self.drain.get().map_or(0, |d| d.running() as u64),
        }
    }

    /// Every method that was called at least once.
    pub fn snapshot(&self) -> Vec<MethodSnapshot> {
        Method::ALL
            .iter()
            .enumerate()
            .filter_map(|(m, method)| {
                let calls: Vec<_> = (0..CODES)
                    .filter_map(|c| {
                        let n = self.calls[m][c].load(Relaxed);
                        (n > 0).then(|| (code_name(c), n))
                    })
                    .collect();
                (!calls.is_empty()).then(|| MethodSnapshot {
                    method: method.name(),
                    calls,
                    latency: self.latency[m].snapshot(),
                })
            })
            .collect()
    }
}

fn code_name(c: usize) -> &'static str {
    [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ][c.min(CODES - 1)]
}
