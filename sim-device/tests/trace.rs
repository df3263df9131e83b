//! `--trace`: the timeline a run writes is a Chrome trace-event document
//! whose structure shows what the tutorial teaches — every remote op's
//! flow goes from its issue on the origin's track to its application on
//! the target's, after it started; each barrier and its rounds' signals
//! are on every rank's track; a race `--checked` finds is on the track of
//! both ranks whose accesses raced.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use clap::Parser;
use pld_sim::launch::{self, Args, Check, Program};
use pld_sim::{Device, Error, Result, Rma, Tensor};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

fn example(name: &str) -> PathBuf {
    pld_tests::example_bin(name)
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pld-trace-{}-{name}.json", std::process::id()))
}

/// The events of a trace file.
fn events(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("the trace file");
    let doc: Value = serde_json::from_str(&text).expect("the trace is JSON");
    doc["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
        .clone()
}

fn num(e: &Value, key: &str) -> f64 {
    e[key].as_f64().unwrap_or_else(|| panic!("no {key} in {e}"))
}

/// Checks the structure of a step-05 run's trace at `p` ranks.
fn check_step05(ev: &[Value], p: u64, mode: &str) {
    let ranks: BTreeSet<u64> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, (0..p).collect(), "{mode}: a track per rank");
    // Every op issued on an origin: its flow's start, and where it went.
    let mut starts = HashMap::new();
    for e in ev.iter().filter(|e| e["ph"] == "s" && e["cat"] == "op") {
        let (pid, ts) = (e["pid"].as_u64().unwrap(), num(e, "ts"));
        // The op's slice on the origin's issue track, which the flow leaves.
        assert!(
            ev.iter().any(|x| x["ph"] == "X"
                && x["cat"] == "op"
                && x["pid"] == e["pid"]
                && x["tid"] == e["tid"]
                && num(x, "ts") == ts),
            "{mode}: no op slice under flow start {e}"
        );
        let to = e["args"]["to"].as_u64().unwrap();
        starts.insert(e["id"].as_u64().unwrap(), (pid, to, ts));
    }
    assert!(
        starts.len() as u64 >= p,
        "{mode}: at least one remote op per rank, got {}",
        starts.len()
    );
    let mut ended = 0;
    for e in ev.iter().filter(|e| e["ph"] == "f" && e["cat"] == "op") {
        let id = e["id"].as_u64().unwrap();
        let (origin, to, issued) = starts
            .get(&id)
            .copied()
            .unwrap_or_else(|| panic!("{mode}: flow end {e} has no start"));
        assert_eq!(e["bp"], "e", "{mode}: {e}");
        assert_eq!(
            e["pid"].as_u64().unwrap(),
            to,
            "{mode}: the flow ends on the target's track: {e}"
        );
        assert_ne!(origin, to, "{mode}: a remote op: {e}");
        assert!(
            num(e, "ts") >= issued,
            "{mode}: applied after it was issued: {e}"
        );
        ended += 1;
    }
    assert_eq!(
        ended,
        starts.len(),
        "{mode}: every op's flow ends at its target"
    );
    // The barrier (the device's dissemination barrier over its signal),
    // and each of its ⌈log2 p⌉ rounds inside it, on every rank; each
    // round's credit is a notify whose flow goes to the next rank.
    let rounds = 64 - (p - 1).leading_zeros() as u64;
    for r in 0..p {
        let spans = |prefix: &str| -> Vec<(f64, f64)> {
            ev.iter()
                .filter(|e| e["pid"] == r && e["cat"] == "barrier" && e["ph"] == "X")
                .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                .map(|e| (num(e, "ts"), num(e, "ts") + num(e, "dur")))
                .collect()
        };
        let barrier = spans("barrier of ");
        assert_eq!(barrier.len(), 1, "{mode}: rank {r}'s barrier");
        let (b0, b1) = barrier[0];
        for round in 1..=rounds {
            let k = 1u64 << (round - 1);
            let (to, from) = ((r + k) % p, (r + p - k) % p);
            let name = format!("barrier round {round}: credit to {to}, from {from}");
            let got = spans(&name);
            assert_eq!(got.len(), 1, "{mode}: rank {r}'s {name}");
            let (s0, s1) = got[0];
            assert!(
                s0 >= b0 && s1 <= b1 + 0.01,
                "{mode}: rank {r}'s {name} inside its barrier"
            );
        }
    }
}

#[test]
fn a_step05_trace_shows_each_op_flow_ending_on_its_target_after_it_started_and_every_barrier_round()
{
    for mode in ["load", "store"] {
        let path = temp(mode);
        let out = Command::new(example("05_remote_load_store"))
            .args(["-p", "a2a3sim", "-d", "0,1,2,3", "--mode", mode, "--trace"])
            .arg(&path)
            .output()
            .expect("run step 05");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.trim_end().ends_with("OK"),
            "step 05 --mode {mode} --trace failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        check_step05(&events(&path), 4, mode);
        let _ = std::fs::remove_file(&path);
    }
}

/// Step 05 in load mode without its barrier: the checked mode's trap.
struct LoadNoBarrier;

impl Program for LoadNoBarrier {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        const SIZE: u64 = 64;
        let me = dev.rank();
        let data = dev.alloc::<f32>("data", "data", [1, SIZE])?;
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut y = Tensor::<f32>::zeros("y", [1, SIZE]);
        let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
        dev.store(&tile, [0, 0], &data).await?;
        let next = dev.peer_next(1);
        let recv = dev
            .remote_load(&data, next, [0, 0], [1, SIZE], None)
            .await?;
        dev.store(&recv, [0, 0], &mut y).await?;
        Ok(Check::exact(&[0f32], &[0f32]))
    }
}

#[test]
fn a_race_checked_mode_finds_is_on_the_tracks_of_both_racing_ranks() {
    let path = temp("race");
    let trace = path.to_str().unwrap();
    let args = Args::try_parse_from(["trap", "-d", "0,1", "--checked", "--trace", trace])
        .expect("arguments");
    let rt = tokio::runtime::Runtime::new().unwrap();
    match rt.block_on(launch::run(&args, Arc::new(LoadNoBarrier))) {
        Err(Error::Races { reports }) => assert_eq!(reports.len(), 2, "{reports:#?}"),
        other => panic!("the trap ran without its races: {other:?}"),
    }
    let ev = events(&path);
    let races: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "race").collect();
    // Each owner found one race (its own store, the other rank's get):
    // each is on the owner's track and on the reader's.
    for owner in [0u64, 1] {
        let reader = 1 - owner;
        let mine: Vec<&&Value> = races
            .iter()
            .filter(|e| e["args"]["window_of"] == owner)
            .collect();
        let pids: BTreeSet<u64> = mine.iter().map(|e| e["pid"].as_u64().unwrap()).collect();
        assert_eq!(pids, BTreeSet::from([owner, reader]), "{mine:#?}");
        assert!(
            mine.iter().all(|e| e["args"]["report"]
                .as_str()
                .is_some_and(|r| r.contains(&format!("rank {owner}'s window")))),
            "{mine:#?}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_trace_path_that_cannot_be_written_is_refused_before_the_ranks_start() {
    let o = Command::new(example("05_remote_load_store"))
        .args(["-d", "0,1", "--trace", "/nonexistent-pld-dir/t.json"])
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("--trace /nonexistent-pld-dir/t.json: cannot write there"),
        "{out}"
    );
    assert!(!out.contains("OK"), "the program ran: {out}");
}
