//! Every tutorial program, run as its own process the way a user runs it:
//! every example in every mode at P = 2, 3, 4 and 8, each over QUIC and
//! over TCP, and against real pld-daemon processes through their gRPC
//! client plane (2 over QUIC, 3 over TCP). Each must print OK.
//!
//! `cargo test` builds the examples; this runs the binaries it built.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::GrpcCluster;
use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    pld_tests::example_bin(name)
}

/// The tests of this file run one at a time: each example run and each
/// daemon cluster picks free loopback ports and binds them a moment later,
/// and two starting at once could pick the same port.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `name args...` and checks that it printed OK and succeeded.
fn run_ok(name: &str, args: &[&str]) {
    let out = Command::new(example(name))
        .args(args)
        .args(["--timeout", "20s"])
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("OK"),
        "{name} {args:?}: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
}

/// (example, modes): `[]` means no --mode; `--use-builtin` is a mode too.
const ALL: &[(&str, &[&str])] = &[
    ("01_hello_rank", &[]),
    ("02_programming_model", &[]),
    ("03_window_buffer", &[]),
    ("04_barrier", &["", "--use-builtin"]),
    ("05_remote_load_store", &["load", "store"]),
    ("06_put_get", &["put", "get"]),
    ("07_put_get_any_p", &["put", "get"]),
    ("08_allreduce_mesh", &[]),
    ("09_allreduce_two_phase", &[]),
    ("10_allreduce_ring", &[]),
    ("11_allreduce_builtin", &["mesh", "ring"]),
    ("12_broadcast", &["hand", "builtin"]),
    ("13_allgather", &["hand", "builtin"]),
    ("14_reduce_scatter", &["hand", "builtin"]),
    ("15_all_to_all", &["hand", "builtin"]),
    ("16_putting_it_together", &[]),
    ("push_scaled", &[]),
    ("all_to_all_combine", &["fp32", "bf16"]),
];

/// The tutorial's steps 09 and 10 split SIZE = 64 into P chunks, so they
/// run at P = 2, 4 and 8 only (and say so otherwise).
const SIZE_SPLITS_INTO_P: &[&str] = &["09_allreduce_two_phase", "10_allreduce_ring"];

/// Runs every example (all modes) at `p` ranks, with `extra` arguments
/// (`-d ...` or `--daemons ...`, a transport).
fn run_all(p: usize, profile: &str, extra: &[&str]) {
    for (name, modes) in ALL {
        if 64 % p != 0 && SIZE_SPLITS_INTO_P.contains(name) {
            continue;
        }
        let mut base = vec!["-p", profile];
        base.extend_from_slice(extra);
        if modes.is_empty() {
            run_ok(name, &base);
        }
        for m in *modes {
            let mut args = base.clone();
            match *m {
                "" => {}
                "--use-builtin" => args.push("--use-builtin"),
                m => args.extend(["--mode", m]),
            }
            run_ok(name, &args);
        }
    }
}

/// Every example at `p` ranks over QUIC and over TCP.
fn run_both_transports(p: usize, profile: &str) {
    let devices = (0..p).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    for transport in ["quic", "tcp"] {
        run_all(p, profile, &["-d", &devices, "--transport", transport]);
    }
}

#[test]
fn every_example_prints_ok_at_two_ranks() {
    let _one = serial();
    run_both_transports(2, "a2a3sim");
}

#[test]
fn every_example_prints_ok_at_three_ranks() {
    let _one = serial();
    // P = 3 is where unsigned `(r - 1) % n` goes wrong.
    run_both_transports(3, "a2a3sim");
}

#[test]
fn every_example_prints_ok_at_four_ranks() {
    let _one = serial();
    run_both_transports(4, "a5sim");
}

#[test]
fn every_example_prints_ok_at_eight_ranks() {
    let _one = serial();
    run_both_transports(8, "a2a3sim");
}

/// `--checked`: no example races, at P = 2, 4 and 8 over both transports
/// (a race would fail the run, printing it).
#[test]
fn every_example_runs_checked_without_a_race() {
    let _one = serial();
    for p in [2usize, 4, 8] {
        let devices = (0..p).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        for transport in ["quic", "tcp"] {
            run_all(
                p,
                "a2a3sim",
                &["-d", &devices, "--transport", transport, "--checked"],
            );
        }
    }
}

#[test]
fn every_example_prints_ok_against_real_daemons_through_grpc() {
    let _one = serial();
    for (kind, p) in [
        (pld_server::TransportKind::Quic, 2),
        (pld_server::TransportKind::Tcp, 3),
    ] {
        let c = GrpcCluster::start(kind, p, &[]);
        let daemons = c.grpc.join(",");
        run_all(p, "a2a3sim", &["--daemons", &daemons]);
        // A second run finds the daemons' windows cleared for it.
        run_ok(
            "11_allreduce_builtin",
            &["--daemons", &daemons, "--mode", "ring"],
        );
    }
}

#[test]
fn wrong_arguments_are_refused_before_anything_runs() {
    let _one = serial();
    // --daemons in the wrong order.
    let c = GrpcCluster::start(pld_server::TransportKind::Tcp, 2, &[]);
    let swapped = format!("{},{}", c.grpc[1], c.grpc[0]);
    let out = Command::new(example("05_remote_load_store"))
        .args(["--daemons", &swapped])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("list the daemons in rank order"), "{err}");
    let out = Command::new(example("05_remote_load_store"))
        .args(["-d", "0,1", "--mode", "sideways"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--mode sideways is not one of load, store")
    );
    // The same device twice.
    let out = Command::new(example("05_remote_load_store"))
        .args(["-d", "0,1,1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-d lists device 1 twice (positions 1 and 2)"),
        "{err}"
    );
    // A step whose SIZE does not split into P chunks.
    let out = Command::new(example("10_allreduce_ring"))
        .args(["-d", "0,1,2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run with P = 2, 4 or 8 ranks, not 3"), "{err}");
}

#[test]
fn compile_only_prints_what_each_rank_would_send_without_running() {
    let _one = serial();
    let out = Command::new(example("12_broadcast"))
        .args(["-d", "0,1,2", "--mode", "builtin", "--compile-only"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // Root credits both ranks; each pulls root's data and credits it back.
    for want in [
        "compile_only: 3 ranks on a2a3sim; nothing was sent",
        "rank 0 would send 2 messages",
        "notify AtomicAdd 1 at +256 -> rank 2, window 'data'",
        "rank 1 would send 2 messages\n  get 256 bytes at +0 -> rank 0, window 'data'",
        "compile_only done",
    ] {
        assert!(stdout.contains(want), "{want:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("OK"),
        "nothing ran, so nothing was checked"
    );
}
