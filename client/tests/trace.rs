//! `pld-daemon --trace FILE` and `pld-daemon trace-merge`, as
//! docs/trace.md promises them: two daemons write their timelines at
//! shutdown, `trace-merge` joins them into one document a viewer reads
//! (parsed here as JSON: every event of both ranks, the put among them);
//! a truncated file is refused by name, and a path the daemon cannot
//! write is refused at start, not found out at shutdown.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::Client;
use pld_server::TransportKind;
use pld_tests::{Daemon, daemon_bin, loopback_peers, run};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("trace-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn merge(out: &Path, files: &[PathBuf]) -> std::process::Output {
    Command::new(daemon_bin())
        .args(["trace-merge", "--out"])
        .arg(out)
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn two_daemons_trace_a_put_and_trace_merge_joins_their_files_into_one_document() {
    let dir = scratch("merge");
    let files: Vec<PathBuf> = (0..2).map(|r| dir.join(format!("rank{r}.json"))).collect();
    run(Duration::from_secs(90), async {
        let peers = loopback_peers(2);
        let grpc = loopback_peers(2);
        let mut ds: Vec<Daemon> = (0..2u32)
            .map(|r| {
                let trace = files[r as usize].display().to_string();
                let extra = ["--grpc", &grpc[r as usize], "--trace", &trace];
                let mut cmd = Command::new(daemon_bin());
                cmd.args(Daemon::args(r, &peers, TransportKind::Tcp, &extra));
                Daemon::start(r, cmd)
            })
            .collect();
        for d in &mut ds {
            d.wait_ready(Duration::from_secs(30));
        }
        let cl = Client::connect(&grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(1, data, 0, b"traced").await.unwrap();
        drop(cl);
        for d in ds {
            d.signal(libc::SIGTERM);
            let (ok, log) = d.wait_exit(Duration::from_secs(30));
            assert!(ok, "{log}");
            assert!(log.contains("wrote its trace to"), "{log}");
        }
    });
    let all = dir.join("all.json");
    let o = merge(&all, &files);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&all).unwrap()).expect("one JSON document");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    for pid in 0..2 {
        assert!(
            events.iter().any(|e| e["pid"] == pid),
            "no event of rank {pid}: {doc}"
        );
    }
    assert!(
        events
            .iter()
            .any(|e| e["pid"] == 0 && e["name"].as_str().is_some_and(|n| n.starts_with("put"))),
        "the put is on rank 0's track: {doc}"
    );
    // A file cut short (a rank killed while writing it) is refused by
    // name, and nothing is written.
    let text = std::fs::read_to_string(&files[1]).unwrap();
    let cut = dir.join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let out = dir.join("never.json");
    let o = merge(&out, &[files[0].clone(), cut.clone()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{} is truncated", cut.display())),
        "{err}"
    );
    assert!(!out.exists(), "a merge of a truncated file was written");
}

#[test]
fn a_trace_path_the_daemon_cannot_write_is_refused_at_start() {
    let peers = loopback_peers(1);
    let mut cmd = Command::new(daemon_bin());
    cmd.args(Daemon::args(
        0,
        &peers,
        TransportKind::Tcp,
        &["--trace", "/nonexistent-pld-dir/t.json"],
    ));
    // Found at shutdown, the daemon would serve on: wait_exit fails.
    let (ok, err) = Daemon::start(0, cmd).wait_exit(Duration::from_secs(20));
    assert!(!ok, "{err}");
    assert!(
        err.contains("--trace /nonexistent-pld-dir/t.json: cannot write there"),
        "{err}"
    );
}
