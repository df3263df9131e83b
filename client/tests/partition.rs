//! Network partitions with real daemons in network namespaces: one rank
//! is cut off (its bridge port down) during a barrier and during a 256 MiB
//! put. The others report it by name within their deadlines and keep
//! serving. Needs root (CI runs as root): elsewhere each test is reported
//! `skipped`, with the reason, and under CI=true it fails instead
//! (`pld_tests::harness`, this file's `main`).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::linear::{Call, Outcome, check_counter, check_swaps};
use pld_server::TransportKind;
use pld_tests::harness;
use pld_tests::netns::Lab;
use pld_tests::{Daemon, daemon_bin, pattern};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 7000;
const GRPC: &str = "127.0.0.1:50051";

fn pld_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pld"))
}

/// Every rank's daemon, in its namespace, gRPC on that namespace's loopback.
fn daemons(lab: &Lab, n: u32, t: TransportKind, extra: &[&str]) -> Vec<Daemon> {
    let peers = lab.peers(PORT);
    let mut ds: Vec<Daemon> = (0..n)
        .map(|r| {
            let mut args = vec!["--grpc", GRPC, "--listen"];
            let listen = format!("0.0.0.0:{PORT}");
            args.push(&listen);
            args.extend_from_slice(extra);
            let mut cmd = lab.command(r, &daemon_bin());
            cmd.args(Daemon::args(r, &peers, t, &args));
            let d = Daemon::start(r, cmd);
            let first = d.next_line(Duration::from_secs(30)).expect("gRPC line");
            assert!(first.contains("gRPC on"), "{first}");
            d
        })
        .collect();
    for d in &mut ds {
        d.wait_ready(Duration::from_secs(30));
    }
    ds
}

/// `pld ARGS` against rank `r`'s daemon, started.
fn pld(lab: &Lab, r: u32, args: &[&str]) -> Child {
    lab.command(r, &pld_bin())
        .args(["--daemon", GRPC])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pld")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits for a `pld` process, at most `within`.
fn finish(child: Child, within: Duration) -> Output {
    let t0 = Instant::now();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(within)
        .unwrap_or_else(|_| {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            panic!("pld (pid {pid}) still running after {:?}", t0.elapsed())
        })
        .expect("pld output")
}

async fn a_rank_cut_off_during_a_barrier_is_named_by_the_others_in_time(t: TransportKind) {
    let lab = Lab::new(3);
    let ds = daemons(&lab, 3, t, &["--op-timeout", "3s", "--sync-timeout", "6s"]);
    // The cluster works across the lab network.
    let all: Vec<Child> = (0..3).map(|r| pld(&lab, r, &["barrier"])).collect();
    for c in all {
        let o = finish(c, Duration::from_secs(20));
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    // Ranks 0 and 1 enter a barrier; rank 2 is cut off and enters too.
    let t0 = Instant::now();
    let a = pld(&lab, 0, &["barrier"]);
    let b = pld(&lab, 1, &["barrier"]);
    lab.cut(2);
    let c = pld(&lab, 2, &["barrier"]);
    let (a, b, c) = (
        finish(a, Duration::from_secs(30)),
        finish(b, Duration::from_secs(30)),
        finish(c, Duration::from_secs(30)),
    );
    // Every barrier fails by its deadline (6 s, plus a probe of the
    // missing ranks), naming who is missing.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    for (who, o) in [(0, &a), (1, &b)] {
        let e = text(&o.stderr);
        assert!(!o.status.success(), "rank {who} cannot pass without rank 2");
        assert!(e.contains("barrier epoch 2"), "rank {who}: {e}");
        assert!(e.contains("rank 2"), "rank {who} names rank 2: {e}");
    }
    let e = text(&c.stderr);
    assert!(!c.status.success());
    assert!(e.contains("rank 0") || e.contains("rank 1"), "rank 2: {e}");
    // The others keep serving each other.
    let o = finish(pld(&lab, 0, &["info"]), Duration::from_secs(20));
    assert!(o.status.success(), "{}", text(&o.stderr));

    // The partition heals: lost links are dialed again (every second),
    // and the pending barrier completes; then barriers run as before.
    lab.heal(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut clean = 0;
    while clean < 2 {
        let all: Vec<Child> = (0..3)
            .map(|r| pld(&lab, r, &["barrier", "--timeout", "5s"]))
            .collect();
        let outs: Vec<Output> = all
            .into_iter()
            .map(|c| finish(c, Duration::from_secs(30)))
            .collect();
        if outs.iter().all(|o| o.status.success()) {
            clean += 1;
        } else {
            clean = 0;
            let why: Vec<String> = outs.iter().map(|o| text(&o.stderr)).collect();
            assert!(
                Instant::now() < deadline,
                "the healed cluster does not pass barriers: {why:?}"
            );
        }
    }
    drop(ds);
}

async fn a_rank_cut_off_during_a_256_mib_put_fails_the_put_by_name_and_the_rest_go_on(
    t: TransportKind,
) {
    let lab = Lab::new(3);
    let _ds = daemons(
        &lab,
        3,
        t,
        &[
            "--window",
            "data=256MiB",
            "--window",
            "signal=64KiB",
            "--window",
            "collective=64KiB",
            "--op-timeout",
            "4s",
        ],
    );
    let file = std::env::temp_dir().join(format!("pld-partition-{}-{t}.bin", std::process::id()));
    std::fs::write(&file, pattern(256 << 20, 11)).unwrap();
    // ~10 s for 256 MiB into rank 1: long enough to cut in the middle.
    lab.limit_to(1, "200mbit");
    let mut put = pld(
        &lab,
        0,
        &[
            "--progress",
            "always",
            "put",
            "--rank",
            "1",
            file.to_str().unwrap(),
        ],
    );
    // Cut rank 1 off once the put is moving (its progress bar passed 5 %).
    let mut err = put.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = err.read(&mut buf).expect("read the progress bar");
        assert!(n > 0, "the put ended before it was cut: {}", text(&seen));
        seen.extend_from_slice(&buf[..n]);
        let moving = text(&seen)
            .rsplit('\r')
            .filter_map(|l| l.split('%').next()?.rsplit(' ').next()?.parse::<u32>().ok())
            .any(|p| (5..100).contains(&p));
        if moving {
            break;
        }
    }
    let t0 = Instant::now();
    lab.cut(1);
    let tail = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = err.read_to_end(&mut rest);
        rest
    });
    let out = finish(put, Duration::from_secs(60));
    seen.extend(tail.join().expect("stderr"));
    let e = text(&seen);
    assert!(!out.status.success(), "the put cannot complete: {e}");
    // The op timeout is 4 s; the put is told within a few of them.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert!(e.contains("rank 1"), "the error names rank 1: {e}");
    assert!(!e.contains("100%"), "{e}");
    // Rank 0 keeps serving: a put to rank 2 and back.
    let small =
        std::env::temp_dir().join(format!("pld-partition-{}-{t}.small", std::process::id()));
    std::fs::write(&small, b"after the cut").unwrap();
    let o = finish(
        pld(&lab, 0, &["put", "--rank", "2", small.to_str().unwrap()]),
        Duration::from_secs(20),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = finish(
        pld(&lab, 0, &["get", "--rank", "2", "--len", "13"]),
        Duration::from_secs(20),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(o.stdout, b"after the cut");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&small);
}

/// Runs `f` on a thread of its own inside rank `r`'s namespace: every
/// socket it makes is there (a lab's daemons' gRPC ports are on their
/// namespaces' loopback). `f` makes its own runtime.
fn in_namespace<T: Send + 'static>(
    lab: &Lab,
    r: u32,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{}", lab.ns(r));
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let ns = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: moves this thread (only) into the namespace of a file we
        // hold open.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

/// One paced client of the cut-link test, through the daemon of the
/// namespace it runs in, until `until`: fetch_add on the counters, swaps
/// on the registers (cell >= 2).
fn paced_client(id: i64, cells: &'static [(u32, u64)], until: Instant) -> Vec<Call> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let cl = pld_client::Client::connect(GRPC).await.unwrap();
        let data = cl.window("data").unwrap();
        let mut calls = Vec::new();
        let mut seq = 0i64;
        while Instant::now() < until {
            let cell = (seq as usize) % cells.len();
            seq += 1;
            let (r, at) = cells[cell];
            let invoked = Instant::now();
            let (wrote, got) = if cell < 2 {
                (
                    None,
                    cl.fetch_add(r, data, at, pld_server::Dtype::Int64, 1).await,
                )
            } else {
                let w = (id << 40) | seq;
                let op = pld_proto::CellOp::Swap(w);
                (
                    Some(w),
                    cl.cell_op(r, data, at, pld_server::Dtype::Int64, op).await,
                )
            };
            let returned = Instant::now();
            let outcome = match (wrote, got) {
                (_, Err(e)) => Outcome::Failed(e.to_string()),
                (None, Ok(v)) => Outcome::Took(v),
                (Some(_), Ok(v)) => Outcome::Swapped(v),
            };
            calls.push(Call {
                client: format!("client {id}"),
                cell,
                wrote,
                invoked,
                returned,
                outcome,
            });
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        calls
    })
}

/// A counter and a register on the rank that is cut off, and one each on
/// another: (rank, offset) in `data`.
const CUT_CELLS: [(u32, u64); 4] = [(2, 0), (1, 64), (2, 128), (1, 192)];

async fn atomics_through_a_link_that_is_cut_and_heals_stay_linearizable(t: TransportKind) {
    let lab = Lab::new(3);
    let _ds = daemons(&lab, 3, t, &["--op-timeout", "2s"]);
    // Clients of ranks 0 and 1, paced, over a schedule: rank 2 is cut off
    // from 1 s to 4 s (past the op timeout), then healed.
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs(8);
    let clients: Vec<_> = [(1, 0u32), (2, 0), (3, 1)]
        .into_iter()
        .map(|(id, r)| in_namespace(&lab, r, move || paced_client(id, &CUT_CELLS, until)))
        .collect();
    let at = |s: f64| tokio::time::sleep_until((t0 + Duration::from_secs_f64(s)).into());
    at(1.0).await;
    lab.cut(2);
    let cut = Instant::now();
    at(4.0).await;
    lab.heal(2);
    let healed = Instant::now();
    let mut calls = Vec::new();
    for c in clients {
        calls.extend(c.join().unwrap());
    }
    // The last values, once the links are back (dialed again every
    // second): read through rank 0, retried until rank 2 answers.
    let last = in_namespace(&lab, 0, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cl = pld_client::Client::connect(GRPC).await.unwrap();
            let data = cl.window("data").unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut out = Vec::new();
            for (r, at) in CUT_CELLS {
                loop {
                    match cl.get(r, data, at, 8).await {
                        Ok(b) => {
                            out.push(i64::from_le_bytes(b[..8].try_into().unwrap()));
                            break;
                        }
                        Err(e) => assert!(
                            Instant::now() < deadline,
                            "rank {r} never answered again: {e}"
                        ),
                    }
                }
            }
            out
        })
    })
    .join()
    .unwrap();
    let mut failures = Vec::new();
    let met = [
        (
            "a call to the cut-off rank failed during the cut",
            calls.iter().any(|c| {
                CUT_CELLS[c.cell].0 == 2 && c.failed() && c.invoked > cut && c.invoked < healed
            }),
        ),
        (
            "a call to the cut-off rank succeeded after the heal",
            calls
                .iter()
                .any(|c| CUT_CELLS[c.cell].0 == 2 && !c.failed() && c.invoked > healed),
        ),
        (
            "a call to another rank succeeded during the cut",
            calls.iter().any(|c| {
                CUT_CELLS[c.cell].0 != 2 && !c.failed() && c.invoked > cut && c.returned < healed
            }),
        ),
    ];
    for (what, happened) in met {
        if !happened {
            failures.push(format!(
                "the schedule missed the clients: no case where {what}"
            ));
        }
    }
    for (cell, (r, _)) in CUT_CELLS.iter().enumerate() {
        let mine: Vec<&Call> = calls.iter().filter(|c| c.cell == cell).collect();
        let verdict = if cell < 2 {
            let failed: Vec<&Call> = mine.iter().filter(|c| c.failed()).copied().collect();
            check_counter(&mine, &failed, Some(last[cell]))
        } else {
            check_swaps(&mine, last[cell])
        };
        if let Err(e) = verdict {
            failures.push(format!("cell {cell} (rank {r}): {e}"));
        }
    }
    if !failures.is_empty() {
        for c in &calls {
            println!("{c:?}");
        }
        panic!("{failures:#?}");
    }
}

fn main() {
    let mut tests = harness::both(
        "a_rank_cut_off_during_a_barrier_is_named_by_the_others_in_time",
        120,
        a_rank_cut_off_during_a_barrier_is_named_by_the_others_in_time,
    );
    tests.extend(harness::both(
        "a_rank_cut_off_during_a_256_mib_put_fails_the_put_by_name_and_the_rest_go_on",
        180,
        a_rank_cut_off_during_a_256_mib_put_fails_the_put_by_name_and_the_rest_go_on,
    ));
    tests.extend(harness::both(
        "atomics_through_a_link_that_is_cut_and_heals_stay_linearizable",
        120,
        atomics_through_a_link_that_is_cut_and_heals_stay_linearizable,
    ));
    harness::main(Lab::unavailable, tests)
}
