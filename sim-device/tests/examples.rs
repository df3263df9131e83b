//! Every tutorial program, run as its own process the way a user runs it:
//! each example at P = 2, the P-generic ones at P = 4, over QUIC; step 05
//! in both modes over TCP; and step 05 against real pld-daemon processes
//! through their gRPC client plane. Each must print OK.
//!
//! `cargo test` builds the examples; this runs the binaries it built.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::GrpcCluster;
use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<test-exe> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} does not exist: `cargo test -p pld-sim` builds it",
        bin.display()
    );
    bin
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
    ("12_broadcast", &["", "--use-builtin"]),
    ("13_allgather", &["", "--use-builtin"]),
    ("14_reduce_scatter", &["", "--use-builtin"]),
    ("15_all_to_all", &["", "--use-builtin"]),
    ("16_putting_it_together", &[]),
    ("push_scaled", &[]),
    ("all_to_all_combine", &["fp32", "bf16"]),
];

fn run_all(devices: &str, profile: &str) {
    for (name, modes) in ALL {
        let base = ["-p", profile, "-d", devices];
        if modes.is_empty() {
            run_ok(name, &base);
        }
        for m in *modes {
            let mut args = base.to_vec();
            match *m {
                "" => {}
                "--use-builtin" => args.push("--use-builtin"),
                m => args.extend(["--mode", m]),
            }
            run_ok(name, &args);
        }
    }
}

#[test]
fn every_example_prints_ok_at_two_ranks_over_quic() {
    run_all("0,1", "a2a3sim");
}

#[test]
fn every_example_prints_ok_at_four_ranks_over_quic() {
    // All of them are P-generic.
    run_all("0,1,2,3", "a5sim");
}

#[test]
fn step_05_prints_ok_in_both_modes_over_tcp() {
    for mode in ["load", "store"] {
        run_ok(
            "05_remote_load_store",
            &[
                "-p",
                "a2a3sim",
                "-d",
                "0,1",
                "--mode",
                mode,
                "--transport",
                "tcp",
            ],
        );
    }
}

#[test]
fn examples_run_against_real_daemons_through_grpc() {
    let c = GrpcCluster::start(pld_server::TransportKind::Quic, 2, &[]);
    let daemons = c.grpc.join(",");
    for (name, mode) in [
        ("05_remote_load_store", "load"),
        ("05_remote_load_store", "store"),
        ("11_allreduce_builtin", "ring"),
        ("all_to_all_combine", "bf16"),
    ] {
        // Twice: a second run finds the daemons' windows cleared for it.
        for _ in 0..2 {
            run_ok(
                name,
                &["-p", "a2a3sim", "--daemons", &daemons, "--mode", mode],
            );
        }
    }
    run_ok("04_barrier", &["--daemons", &daemons]);
    run_ok("16_putting_it_together", &["--daemons", &daemons]);
}

#[test]
fn wrong_arguments_are_refused_before_anything_runs() {
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
}
