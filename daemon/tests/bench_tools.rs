//! `pld-bench --mpi` and `--plot`, which need what this machine may not
//! have (Open MPI; a TrueType font): each is reported `skipped`, with the
//! reason, where it is missing, and under CI=true fails instead
//! (`pld_tests::harness`; .ci/run installs both).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::harness;
mod common;

use common::bench;

fn main() {
    harness::main_each(vec![
        (
            "pld_bench_mpi_measures_mpi_rma_beside_every_op_in_the_same_run".into(),
            no_open_mpi,
            Box::new(pld_bench_mpi_measures_mpi_rma_beside_every_op_in_the_same_run),
        ),
        (
            "pld_bench_plot_draws_labelled_latency_and_bandwidth_charts_as_svg_and_png".into(),
            no_font,
            Box::new(pld_bench_plot_draws_labelled_latency_and_bandwidth_charts_as_svg_and_png),
        ),
    ])
}

/// What `--mpi` needs and this machine lacks: Open MPI's compiler.
fn no_open_mpi() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .any(|d| d.join("mpicc.openmpi").is_file() || d.join("mpicc").is_file());
    (!found).then(|| "no Open MPI here (apt-get install openmpi-bin libopenmpi-dev)".into())
}

/// The TrueType font `--plot` labels its PNG charts with.
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// What `--plot` needs and this machine lacks: a font.
fn no_font() -> Option<String> {
    let found = std::path::Path::new(FONT).is_file() || std::env::var_os("PLD_PLOT_FONT").is_some();
    (!found).then(|| format!("no {FONT} here (apt-get install fonts-dejavu-core)"))
}

fn pld_bench_mpi_measures_mpi_rma_beside_every_op_in_the_same_run() {
    let stdout = bench(&[
        "put_lat",
        "get_lat",
        "fetch_add_lat",
        "cas_lat",
        "put_bw",
        "msg_rate",
        "barrier_lat",
        "--sizes",
        "8",
        "--ranks",
        "2,3",
        "--transport",
        "tcp",
        "--json",
        "--quick",
        "--mpi",
    ]);
    let mpi_of = |op: &str, size: u64| -> f64 {
        let head = format!("{{\"op\": \"{op}\", \"size\": {size},");
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no {op} {size} in\n{stdout}"));
        line.split("\"mpi\": ")
            .nth(1)
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no MPI figure beside {line}"))
    };
    for (op, size) in [
        ("put_lat", 8),
        ("get_lat", 8),
        ("fetch_add_lat", 8),
        ("cas_lat", 8),
        ("put_bw", 8),
        ("msg_rate", 8),
        ("barrier_lat", 2),
        ("barrier_lat", 3),
    ] {
        let m = mpi_of(op, size);
        assert!(m > 0.0 && m < 1e9, "{op} {size}: MPI's figure {m}");
    }
}

fn pld_bench_plot_draws_labelled_latency_and_bandwidth_charts_as_svg_and_png() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pld-bench-plot");
    let _ = std::fs::remove_dir_all(&dir);
    let plot = dir.to_str().expect("a UTF-8 temp dir");
    bench(&[
        "put_lat",
        "get_lat",
        "put_bw",
        "raw_rtt",
        "raw_bw",
        "--sizes",
        "8,4096,65536",
        "--transport",
        "tcp",
        "--quick",
        "--plot",
        plot,
    ]);
    let read = |name: &str| {
        std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name} was not written: {e}"))
    };
    for (chart, axis, lines) in [
        (
            "latency",
            "latency (us",
            ["pld put_lat", "pld get_lat", "raw tcp round trip"],
        ),
        (
            "bandwidth",
            "bandwidth (MB/s",
            ["pld put_bw", "raw tcp stream", "raw tcp stream"],
        ),
    ] {
        let svg = String::from_utf8(read(&format!("{chart}.svg"))).expect("SVG is text");
        assert!(
            (3_000..2_000_000).contains(&svg.len()),
            "{chart}.svg is {} bytes",
            svg.len()
        );
        assert!(
            svg.starts_with("<svg"),
            "{chart}.svg: {}",
            &svg[..80.min(svg.len())]
        );
        for label in ["message size (bytes)", axis].iter().chain(lines.iter()) {
            assert!(svg.contains(label), "{chart}.svg has no label {label:?}");
        }
        // A line per series: polylines, not only the axes.
        assert!(
            svg.matches("<polyline").count() >= 2,
            "{chart}.svg draws no lines"
        );
        let png = read(&format!("{chart}.png"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{chart}.png is not a PNG");
        let (w, h) = (
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            u32::from_be_bytes(png[20..24].try_into().unwrap()),
        );
        assert_eq!((w, h), (960, 600), "{chart}.png's size");
        // Text, lines and points: far more than a blank image compresses to.
        assert!(
            png.len() > 15_000,
            "{chart}.png is only {} bytes",
            png.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
