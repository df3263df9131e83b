//! The `pld-daemon` command line. (This file also makes `cargo test
//! --workspace` build the binary that the multi-process tests spawn.)

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::bench;
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

/// Every flag of a running rank and its environment variable.
const FLAGS: [(&str, &str); 29] = [
    ("--rank", "PLD_RANK"),
    ("--peers", "PLD_PEERS"),
    ("--listen", "PLD_LISTEN"),
    ("--transport", "PLD_TRANSPORT"),
    ("--window", "PLD_WINDOWS"),
    ("--cluster-id", "PLD_CLUSTER_ID"),
    ("--connect-timeout", "PLD_CONNECT_TIMEOUT"),
    ("--op-timeout", "PLD_OP_TIMEOUT"),
    ("--sync-timeout", "PLD_SYNC_TIMEOUT"),
    ("--progress", "PLD_PROGRESS"),
    ("--spin-idle", "PLD_SPIN_IDLE"),
    ("--max-frame", "PLD_MAX_FRAME"),
    ("--grpc", "PLD_GRPC"),
    ("--client-token", "PLD_CLIENT_TOKEN"),
    ("--grpc-max-message", "PLD_GRPC_MAX_MESSAGE"),
    ("--metrics", "PLD_METRICS"),
    ("--metrics-public", "PLD_METRICS_PUBLIC"),
    ("--tls-dir", "PLD_TLS_DIR"),
    ("--insecure", "PLD_INSECURE"),
    ("--grpc-tls", "PLD_GRPC_TLS"),
    ("--grpc-cert", "PLD_GRPC_CERT"),
    ("--grpc-key", "PLD_GRPC_KEY"),
    ("--grpc-handshake-timeout", "PLD_GRPC_HANDSHAKE_TIMEOUT"),
    ("--grpc-max-connections", "PLD_GRPC_MAX_CONNECTIONS"),
    ("--grpc-buffer-budget", "PLD_GRPC_BUFFER_BUDGET"),
    ("--grpc-stall-timeout", "PLD_GRPC_STALL_TIMEOUT"),
    ("--grpc-keepalive", "PLD_GRPC_KEEPALIVE"),
    ("--checked", "PLD_CHECKED"),
    ("--trace", "PLD_TRACE"),
];

#[test]
fn help_documents_every_flag_and_its_environment_variable() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for (flag, env) in FLAGS {
        let line = out
            .lines()
            .position(|l| {
                let l = l.trim_start();
                l.starts_with(&format!("{flag} ")) || l == flag
            })
            .unwrap_or_else(|| panic!("--help lacks {flag}:\n{out}"));
        // The variable is named in the flag's own entry.
        let entry: String = out
            .lines()
            .skip(line)
            .take(8)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            entry.contains(&format!("[env: {env}")),
            "{flag} lacks {env}:\n{entry}"
        );
    }
    // No flag is left out of the list above.
    let listed = out.lines().filter(|l| l.starts_with("      --")).count();
    assert_eq!(
        listed,
        FLAGS.len(),
        "--help has flags this test does not know:\n{out}"
    );
    assert!(out.contains("RUST_LOG"));
    assert!(out.contains("demo"));
    // The table of refused combinations.
    assert!(
        out.contains("--tls-dir and --insecure       refused"),
        "{out}"
    );
    assert!(out.contains("never a silent plaintext"), "{out}");
}

/// Runs a rank of a 1-rank cluster with `flags`: it must refuse to start,
/// with exit code 1 and a message that contains `says`.
fn refused(flags: &[&str], says: &str) {
    let mut args = vec!["--rank", "0", "--peers", "127.0.0.1:1"];
    args.extend_from_slice(flags);
    let (code, out, err) = run(&args);
    assert_eq!(code, 1, "{flags:?} started:\n{out}\n{err}");
    assert!(err.contains(says), "{flags:?}: {err:?} should say {says:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn every_refused_combination_of_security_flags_says_why() {
    let dir = pld_server::tls::TempTlsDir::new(1).expect("certs");
    let d = dir.path().to_str().expect("utf-8 path");
    let cert = format!("{d}/grpc.pem");
    let key = format!("{d}/grpc.key");
    refused(&[], "no TLS material");
    refused(
        &["--tls-dir", d, "--insecure"],
        "--insecure and --tls-dir contradict each other",
    );
    // The downgrade of issue 13: TLS asked for, no certificate to serve it.
    refused(
        &["--insecure", "--grpc-tls", "--grpc", "127.0.0.1:0"],
        "--grpc-tls needs a certificate",
    );
    refused(
        &["--insecure", "--grpc-tls"],
        "--grpc-tls needs --grpc ADDR",
    );
    refused(
        &[
            "--insecure",
            "--grpc",
            "127.0.0.1:0",
            "--grpc-tls",
            "--grpc-cert",
            &cert,
        ],
        "--grpc-cert and --grpc-key go together",
    );
    refused(
        &[
            "--insecure",
            "--grpc",
            "127.0.0.1:0",
            "--grpc-cert",
            &cert,
            "--grpc-key",
            &key,
        ],
        "are used only with --grpc-tls",
    );
    refused(
        &[
            "--insecure",
            "--grpc",
            "127.0.0.1:0",
            "--grpc-tls",
            "--grpc-cert",
            &key,
            "--grpc-key",
            &key,
        ],
        "gRPC TLS certificate",
    );
    refused(
        &["--insecure", "--client-token", "t"],
        "--client-token needs --grpc ADDR",
    );
    refused(
        &["--insecure", "--grpc", "0.0.0.0:0"],
        "without --client-token the client plane binds to loopback only",
    );
    refused(
        &["--insecure", "--grpc", "127.0.0.1:0", "--client-token", ""],
        "the client token is empty",
    );
    refused(
        &["--insecure", "--metrics", "0.0.0.0:0"],
        "add --metrics-public",
    );
    refused(
        &["--insecure", "--metrics-public"],
        "--metrics-public needs --metrics ADDR",
    );
}

#[test]
fn out_of_range_durations_and_sizes_are_refused_not_panicked_on() {
    let huge = "10000000000000000000";
    for (flag, says) in [
        ("--connect-timeout", "connect timeout"),
        ("--op-timeout", "op timeout"),
        ("--sync-timeout", "sync timeout"),
    ] {
        refused(&["--insecure", flag, huge], says);
        refused(&["--insecure", flag, "0"], "give 1ms to 24h");
        refused(&["--insecure", flag, "25h"], "give 1ms to 24h");
    }
    refused(
        &["--insecure", "--progress", "spin", "--spin-idle", "2m"],
        "--spin-idle",
    );
    refused(
        &["--insecure", "--max-frame", "1GiB"],
        "give 4 KiB to 256 MiB",
    );
    refused(
        &["--insecure", "--max-frame", "100"],
        "give 4 KiB to 256 MiB",
    );
    refused(
        &["--insecure", "--window", "data=2048GiB"],
        "larger than pld allows",
    );
    let grpc = ["--insecure", "--grpc", "127.0.0.1:0"];
    for (flag, value, says) in [
        ("--grpc-max-message", "1GiB", "--grpc-max-message"),
        ("--grpc-handshake-timeout", "0", "--grpc-handshake-timeout"),
        ("--grpc-handshake-timeout", huge, "--grpc-handshake-timeout"),
        ("--grpc-max-connections", "0", "--grpc-max-connections"),
        ("--grpc-buffer-budget", "1KiB", "--grpc-buffer-budget"),
        ("--grpc-stall-timeout", huge, "--grpc-stall-timeout"),
        ("--grpc-keepalive", huge, "--grpc-keepalive"),
    ] {
        let mut args = grpc.to_vec();
        args.extend_from_slice(&[flag, value]);
        refused(&args, says);
    }
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
        err.contains("rank 3 is not in the peer list of 2 ranks (0 to 1)"),
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
        let stdout = bench(&[
            "all",
            "--transport",
            transport,
            "--progress",
            "spin",
            "--json",
            "--quick",
            "--sizes",
            "8,65536",
            "--ranks",
            "2",
        ]);
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
            "cas_lat",
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

#[test]
fn ports_prints_distinct_loopback_ports_free_for_tcp_and_udp() {
    let (code, out, err) = run(&["ports", "5"]);
    assert_eq!(code, 0, "{err}");
    let ports: Vec<u16> = out.lines().map(|l| l.parse().expect("a port")).collect();
    assert_eq!(ports.len(), 5, "{out}");
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "{out}");
    for p in ports {
        // Below Linux's ephemeral range, and bindable both ways now.
        assert!((20_000..32_000).contains(&p), "{p}");
        std::net::TcpListener::bind(("127.0.0.1", p)).expect("free for TCP");
        std::net::UdpSocket::bind(("127.0.0.1", p)).expect("free for UDP");
    }
}
