//! The `pld` command line against real daemons.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::{GrpcCluster, pattern};
use std::path::PathBuf;
use std::process::{Command, Output};

fn pld(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pld"))
        .args(args)
        .output()
        .expect("run pld")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pld-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn a_256_mib_file_goes_into_a_remote_window_and_back_byte_identical() {
    let c = GrpcCluster::start(
        pld_server::TransportKind::Quic,
        2,
        &["--window", "data=256MiB", "--window", "signal=64KiB"],
    );
    let src = scratch("in.bin");
    let back = scratch("out.bin");
    std::fs::write(&src, pattern(256 << 20, 42)).unwrap();

    // Through rank 0's daemon into rank 1's window...
    let put = pld(&[
        "--daemon",
        &c.grpc[0],
        "--progress",
        "always",
        "put",
        "--rank",
        "1",
        "--window",
        "data",
        "--offset",
        "0",
        src.to_str().unwrap(),
    ]);
    assert!(put.status.success(), "{}", text(&put.stderr));
    let bar = text(&put.stderr);
    assert!(
        bar.contains("put [") && bar.contains("100%") && bar.contains("256.0 MiB"),
        "{bar}"
    );

    // ... and back out through rank 1's own daemon.
    let get = pld(&[
        "--daemon",
        &c.grpc[1],
        "--progress",
        "always",
        "get",
        "--rank",
        "1",
        "--window",
        "data",
        "--offset",
        "0",
        "--len",
        "256MiB",
        "-o",
        back.to_str().unwrap(),
    ]);
    assert!(get.status.success(), "{}", text(&get.stderr));
    assert!(text(&get.stderr).contains("100%"), "{}", text(&get.stderr));
    let (a, b) = (std::fs::read(&src).unwrap(), std::fs::read(&back).unwrap());
    assert_eq!(a.len(), b.len());
    assert!(a == b, "the file came back changed");
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&back);

    // Small transfers draw no bar; stdout carries the bytes.
    let put = Command::new(env!("CARGO_BIN_EXE_pld"))
        .args([
            "--daemon",
            &c.grpc[0],
            "--progress",
            "always",
            "put",
            "--rank",
            "0",
            "--offset",
            "100",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"hello from stdin")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(put.status.success(), "{}", text(&put.stderr));
    assert!(!text(&put.stderr).contains('['), "{}", text(&put.stderr));
    let get = pld(&[
        "--daemon", &c.grpc[1], "get", "--rank", "0", "--offset", "100", "--len", "16",
    ]);
    assert_eq!(get.stdout, b"hello from stdin");

    // info, add, barrier and stats.
    let info = pld(&["--daemon", &c.grpc[1], "info"]);
    let out = text(&info.stdout);
    assert!(
        out.contains("rank 1 of 2") && out.contains("268435456") && out.contains("checked   off"),
        "{out}"
    );
    // The 256 MiB pattern still fills the window: clear the cells first.
    let zeros = scratch("zeros.f32");
    std::fs::write(&zeros, [0u8; 16]).unwrap();
    let clear = pld(&[
        "--daemon",
        &c.grpc[0],
        "put",
        "--rank",
        "1",
        "--offset",
        "1MiB",
        zeros.to_str().unwrap(),
    ]);
    assert!(clear.status.success(), "{}", text(&clear.stderr));
    let _ = std::fs::remove_file(&zeros);
    let ones = scratch("ones.f32");
    std::fs::write(
        &ones,
        [1.0f32; 4]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    for _ in 0..2 {
        let add = pld(&[
            "--daemon",
            &c.grpc[0],
            "add",
            "--rank",
            "1",
            "--offset",
            "1MiB",
            "--dtype",
            "fp32",
            ones.to_str().unwrap(),
        ]);
        assert!(add.status.success(), "{}", text(&add.stderr));
    }
    let sum = pld(&[
        "--daemon", &c.grpc[0], "get", "--rank", "1", "--offset", "1MiB", "--len", "16",
    ]);
    let want: Vec<u8> = [2.0f32; 4].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(sum.stdout, want);
    let stats = pld(&["--daemon", &c.grpc[0], "stats"]);
    assert!(
        text(&stats.stdout).contains("atomic_add"),
        "{}",
        text(&stats.stdout)
    );
    let _ = std::fs::remove_file(&ones);
}

#[test]
fn errors_are_human_readable_with_a_hint() {
    let c = GrpcCluster::start(pld_server::TransportKind::Tcp, 2, &[]);
    let out = pld(&[
        "--daemon", &c.grpc[0], "get", "--rank", "1", "--window", "weights", "--len", "4",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("window 'weights' does not exist; the windows are 'data'"),
        "{err}"
    );
    assert!(err.contains("hint: `pld info`"), "{err}");

    let out = pld(&[
        "--daemon", &c.grpc[0], "get", "--rank", "1", "--offset", "16MiB", "--len", "4",
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("do not fit in window 'data'") && err.contains("OUT_OF_RANGE"),
        "{err}"
    );

    // Nothing listens on this port: the error says where it looked.
    let dead = pld_tests::loopback_peers(1).remove(0);
    let out = pld(&["--daemon", &dead, "--wait", "0s", "info"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("cannot reach the pld daemon at {dead}")),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
}
