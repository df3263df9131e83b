//! The `pld-daemon` command line. (This file also makes `cargo test
//! --workspace` build the binary that the multi-process tests spawn.)

use std::process::Command;

fn daemon() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pld-daemon"));
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("PLD_") {
            c.env_remove(k);
        }
    }
    c
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = daemon().args(args).output().expect("run pld-daemon");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_documents_every_flag_and_its_environment_variable() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for (flag, env) in [
        ("--rank", "PLD_RANK"),
        ("--peers", "PLD_PEERS"),
        ("--listen", "PLD_LISTEN"),
        ("--transport", "PLD_TRANSPORT"),
        ("--window", "PLD_WINDOWS"),
        ("--cluster-id", "PLD_CLUSTER_ID"),
        ("--connect-timeout", "PLD_CONNECT_TIMEOUT"),
        ("--op-timeout", "PLD_OP_TIMEOUT"),
        ("--max-frame", "PLD_MAX_FRAME"),
    ] {
        assert!(out.contains(flag), "--help lacks {flag}:\n{out}");
        assert!(out.contains(env), "--help lacks {env}:\n{out}");
    }
    assert!(out.contains("RUST_LOG"));
    assert!(out.contains("demo"));
}

#[test]
fn bad_flags_are_refused_with_the_reason() {
    let (code, _, err) = run(&[
        "--rank",
        "0",
        "--peers",
        "127.0.0.1:1",
        "--transport",
        "udp",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown transport 'udp': expected quic or tcp"),
        "{err}"
    );
    let (code, _, err) = run(&["--rank", "0", "--peers", "127.0.0.1:1", "--window", "data"]);
    assert_eq!(code, 2);
    assert!(err.contains("window 'data' must be NAME=SIZE"), "{err}");
    let (code, _, err) = run(&[
        "--rank",
        "0",
        "--peers",
        "127.0.0.1:1",
        "--window",
        "data=12XB",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown unit 'xb'"), "{err}");
    let (code, _, err) = run(&[
        "--rank",
        "0",
        "--peers",
        "127.0.0.1:1",
        "--op-timeout",
        "soon",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("duration 'soon'"), "{err}");
    let (code, _, err) = run(&["--peers", "127.0.0.1:1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--rank"), "{err}");
}

#[test]
fn an_impossible_configuration_is_refused_before_binding() {
    let (code, _, err) = run(&["--rank", "3", "--peers", "127.0.0.1:1,127.0.0.1:2"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("rank 3 is not in the peer list of 2 ranks"),
        "{err}"
    );
    let (code, _, err) = run(&["--rank", "0", "--peers", "nohost"]);
    assert_eq!(code, 1);
    assert!(err.contains("peer 0 'nohost' is not HOST:PORT"), "{err}");
}

#[test]
fn flags_come_from_the_environment_too() {
    let out = daemon()
        .env("PLD_RANK", "5")
        .env("PLD_PEERS", "127.0.0.1:1,127.0.0.1:2")
        .env("PLD_WINDOWS", "data=1MiB,signal=4KiB")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("rank 5 is not in the peer list of 2 ranks"),
        "{err}"
    );
}

#[test]
fn the_demo_prints_ok_over_both_transports() {
    for transport in ["quic", "tcp"] {
        let (code, out, err) = run(&["demo", "--transport", transport]);
        assert_eq!(code, 0, "demo over {transport} failed:\n{out}\n{err}");
        assert!(out.contains("hello from rank 0"), "{out}");
        assert!(out.contains("[3.0, 5.0, 7.0, 9.0]"), "{out}");
        assert!(out.trim_end().ends_with("OK"), "{out}");
    }
}

#[test]
fn pld_bench_all_prints_json_lines_with_every_op_and_no_setup() {
    for transport in ["tcp", "quic"] {
        let out = Command::new(env!("CARGO_BIN_EXE_pld-bench"))
            .args([
                "all",
                "--transport",
                transport,
                "--progress",
                "spin",
                "--json",
                "--quick",
            ])
            .args(["--sizes", "8,65536", "--ranks", "2"])
            .env_remove("RUST_LOG")
            .output()
            .expect("run pld-bench");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pld-bench over {transport} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        for line in &lines {
            assert!(
                line.starts_with("{\"op\": \"") && line.ends_with('}'),
                "not a JSON object: {line}"
            );
            assert!(
                line.contains("\"unit\": \"") && line.contains("\"value\": "),
                "{line}"
            );
        }
        for op in [
            "put_lat",
            "get_lat",
            "acc_lat",
            "fetch_add_lat",
            "put_bw",
            "get_bw",
            "barrier_lat",
            "raw_rtt",
            "raw_bw",
        ] {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("{{\"op\": \"{op}\", \"size\": "))),
                "{transport}: no {op} in\n{stdout}"
            );
        }
        // Figures are measured, not placeholders.
        let put = lines
            .iter()
            .find(|l| l.starts_with("{\"op\": \"put_lat\", \"size\": 8,"))
            .expect("put_lat 8");
        let value: f64 = put
            .split("\"value\": ")
            .nth(1)
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .expect("a value");
        assert!(value > 0.0 && value < 100_000.0, "{put}");
    }
}
