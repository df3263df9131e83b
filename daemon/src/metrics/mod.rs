//! `--metrics ADDR`: the rank's counters and latency histograms in the
//! Prometheus text format (version 0.0.4), served over plain HTTP/1.1 at
//! `/metrics`.
//!
//! The server ([`http`]) is a few lines over tokio: it reads one request
//! head, answers and closes — enough for a Prometheus scraper or `curl`,
//! with no HTTP framework in the daemon.

mod http;

pub use http::{MAX_CONNECTIONS, serve};

use crate::grpc::GrpcMetrics;
use pld_server::Rank;
use pld_server::stats::{HistogramSnapshot, LATENCY_BUCKETS_US};
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

/// What the endpoint reports: the rank once the mesh is up, and the
/// client plane's figures if it runs.
#[derive(Debug, Default)]
pub struct Sources {
    /// This rank's id, known before the mesh is up.
    pub rank_id: u32,
    /// The rank, once the mesh is up.
    pub rank: OnceLock<Arc<Rank>>,
    /// The client plane's figures, when it runs.
    pub grpc: Option<Arc<GrpcMetrics>>,
}

/// Renders every metric.
pub fn render(src: &Sources) -> String {
    let mut out = String::new();
    let r = src.rank_id;
    let up = src.rank.get();
    gauge(
        &mut out,
        "pld_ready",
        "1 once every peer is connected and the rank serves.",
        &[(format!("rank=\"{r}\""), u64::from(up.is_some()))],
    );
    if let Some(rank) = up {
        let snap = rank.stats();
        let mut by_name: Vec<(&str, Vec<(String, u64)>)> = Vec::new();
        for (name, kind, value) in snap.counters() {
            let labels = if kind.is_empty() {
                format!("rank=\"{r}\"")
            } else if name.starts_with("msgs_") {
                format!("rank=\"{r}\",kind=\"{kind}\"")
            } else {
                format!("rank=\"{r}\",op=\"{kind}\"")
            };
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push((labels, value)),
                None => by_name.push((name, vec![(labels, value)])),
            }
        }
        for (name, series) in by_name {
            // A figure that goes down as well as up is a gauge.
            if GAUGES.contains(&name) {
                gauge(&mut out, &format!("pld_{name}"), help(name), &series);
                continue;
            }
            let _ = writeln!(out, "# HELP pld_{name}_total {}", help(name));
            let _ = writeln!(out, "# TYPE pld_{name}_total counter");
            for (labels, v) in series {
                let _ = writeln!(out, "pld_{name}_total{{{labels}}} {v}");
            }
        }
        let _ = writeln!(
            out,
            "# HELP pld_op_latency_seconds Issue-to-completion time of remote ops."
        );
        let _ = writeln!(out, "# TYPE pld_op_latency_seconds histogram");
        for op in pld_proto::OpKind::ALL {
            histogram(
                &mut out,
                "pld_op_latency_seconds",
                &format!("rank=\"{r}\",op=\"{}\"", op.name()),
                &snap.latency(op),
            );
        }
        quic_paths(&mut out, r, &rank.quic_paths());
    }
    if let Some(g) = &src.grpc {
        let plane = g.plane();
        let one = |v: u64| [(format!("rank=\"{r}\""), v)];
        gauge(
            &mut out,
            "pld_grpc_connections",
            "Client connections open (past their TLS handshake and HTTP/2 preface).",
            &one(plane.open),
        );
        counter(
            &mut out,
            "pld_grpc_connections_refused_total",
            "Client connections closed at once: --grpc-max-connections were open.",
            &one(plane.refused),
        );
        counter(
            &mut out,
            "pld_grpc_handshakes_failed_total",
            "Client connections closed for a failed or late TLS handshake or HTTP/2 preface.",
            &one(plane.handshakes_failed),
        );
        counter(
            &mut out,
            "pld_grpc_connections_evicted_total",
            "Unproven client connections closed to make room for a new one at the connection cap.",
            &one(plane.evicted),
        );
        counter(
            &mut out,
            "pld_grpc_streams_stalled_total",
            "PutStreams and GetStreams cancelled because the client sent or took nothing for --grpc-stall-timeout.",
            &one(plane.stalled),
        );
        gauge(
            &mut out,
            "pld_grpc_calls_running",
            "Pld calls in progress (a wait, a barrier, a stream included).",
            &one(plane.running),
        );
        gauge(
            &mut out,
            "pld_grpc_buffered_bytes",
            "Bytes of --grpc-buffer-budget the streams hold.",
            &one(plane.buffered),
        );
        let methods = g.snapshot();
        let _ = writeln!(
            out,
            "# HELP pld_grpc_requests_total Client-plane calls by method and status code."
        );
        let _ = writeln!(out, "# TYPE pld_grpc_requests_total counter");
        for m in &methods {
            for (code, n) in &m.calls {
                let _ = writeln!(
                    out,
                    "pld_grpc_requests_total{{rank=\"{r}\",method=\"{}\",code=\"{code}\"}} {n}",
                    m.method
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP pld_grpc_request_duration_seconds Client-plane call durations."
        );
        let _ = writeln!(out, "# TYPE pld_grpc_request_duration_seconds histogram");
        for m in &methods {
            histogram(
                &mut out,
                "pld_grpc_request_duration_seconds",
                &format!("rank=\"{r}\",method=\"{}\"", m.method),
                &m.latency,
            );
        }
    }
    out
}

/// The `Stats` figures that are gauges, not counters.
const GAUGES: [&str; 1] = ["checked_ranges"];

fn help(name: &str) -> &'static str {
    match name {
        "msgs_sent" => "Peer-plane messages sent, by kind.",
        "msgs_received" => "Peer-plane messages received, by kind.",
        "ops_issued" => "Ops issued to other ranks.",
        "ops_local" => "Ops applied to this rank's own windows.",
        "ops_failed" => "Ops issued that failed.",
        "requests_served" => "Requests from peers applied.",
        "requests_rejected" => "Requests from peers refused.",
        "bytes_sent" => "Peer-plane bytes sent.",
        "bytes_received" => "Peer-plane bytes received.",
        "frame_errors" => "Connections closed because their bytes were not pld frames.",
        "auth_refused" => {
            "Peer connections refused by mutual TLS: a certificate not of the cluster CA, or not naming the rank claimed."
        }
        "races" => "Checked mode: races seen in this rank's windows, repeats included.",
        "checked_ranges" => "Checked mode: byte ranges the window shadows keep now.",
        "checked_forgotten" => {
            "Checked mode: shadow ranges forgotten over their budget (races with them go unreported)."
        }
        _ => "A pld counter.",
    }
}

/// The QUIC path to each peer, as quinn sees it.
fn quic_paths(out: &mut String, r: u32, paths: &[pld_server::QuicPath]) {
    if paths.is_empty() {
        return;
    }
    let series = |f: &dyn Fn(&pld_server::QuicPath) -> u64| -> Vec<(String, u64)> {
        paths
            .iter()
            .map(|p| (format!("rank=\"{r}\",peer=\"{}\"", p.peer), f(p)))
            .collect()
    };
    gauge(
        out,
        "pld_quic_rtt_microseconds",
        "Smoothed round-trip time of the QUIC path to a peer.",
        &series(&|p| p.rtt.as_micros() as u64),
    );
    gauge(
        out,
        "pld_quic_mtu_bytes",
        "Largest UDP payload the QUIC path to a peer carries (MTU discovery).",
        &series(&|p| u64::from(p.mtu)),
    );
    gauge(
        out,
        "pld_quic_cwnd_bytes",
        "Congestion window of the QUIC path to a peer.",
        &series(&|p| p.cwnd),
    );
    counter(
        out,
        "pld_quic_lost_packets_total",
        "QUIC packets to a peer declared lost (MTU probes not counted).",
        &series(&|p| p.lost_packets),
    );
    counter(
        out,
        "pld_quic_lost_mtu_probes_total",
        "MTU probes to a peer declared lost; each held the congestion window until its probe timeout.",
        &series(&|p| p.lost_mtu_probes),
    );
}

fn counter(out: &mut String, name: &str, help: &str, series: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    for (labels, v) in series {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

fn gauge(out: &mut String, name: &str, help: &str, series: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (labels, v) in series {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let mut cumulative = 0;
    for (i, bound) in LATENCY_BUCKETS_US.iter().enumerate() {
        cumulative += h.buckets.get(i).copied().unwrap_or(0);
        let le = *bound as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count());
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_ns as f64 / 1e9);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count());
}
