//! pld's own OpenSHMEM test programs (`tests/c/*.c`, the examples),
//! compiled with `pld-oshcc` and run under `pld-oshrun` at 2, 3 and 4 PEs
//! over QUIC and TCP: each PE checks its results and exits non-zero on a
//! mismatch. Real processes, real sockets, mutual TLS.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OSHCC: &str = env!("CARGO_BIN_EXE_pld-oshcc");
const OSHRUN: &str = env!("CARGO_BIN_EXE_pld-oshrun");

/// Compiles `src` (relative to the crate) into the test's scratch dir.
fn compile(src: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = Path::new(src)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("prog");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("shmem-{name}"));
    let status = Command::new(OSHCC)
        .args(["-O1", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root.join("tests/c").display()))
        .arg(root.join(src))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run pld-oshcc: {e}"));
    assert!(status.success(), "pld-oshcc {src} failed: {status}");
    out
}

/// `pld-oshrun`, its PEs loading the library `pld-oshcc` linked them
/// with (its RUNPATH: this build's), not the one cargo's
/// `LD_LIBRARY_PATH` for tests finds first (`target/debug`, which only a
/// `cargo build` refreshes, and may be an older build).
fn oshrun_cmd() -> Command {
    let mut c = Command::new(OSHRUN);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

fn oshrun(prog: &Path, np: u32, transport: &str, timeout: &str) -> Output {
    oshrun_with(prog, np, &["--transport", transport, "--timeout", timeout])
}

fn oshrun_with(prog: &Path, np: u32, flags: &[&str]) -> Output {
    finish(
        oshrun_cmd()
            .args(["-np", &np.to_string()])
            .args(flags)
            .arg(prog),
    )
    .0
}

/// Runs `prog CASE` at 2 PEs over TCP for each `(CASE, WANT)` of
/// `cases`, with shared memory and without: each must end with status 1
/// saying WANT, never print that the case was not refused, and pass
/// `more(case, how, output)`.
fn refused_on_both_paths(prog: &Path, cases: &[(&str, &str)], more: impl Fn(&str, &str, &str)) {
    for shared in MEMORY {
        for &(case, want) in cases {
            let (o, out) = finish(
                oshrun_cmd()
                    .args(["-np", "2", "--transport", "tcp", "--timeout", "30s"])
                    .args(["--shared-memory", shared])
                    .arg(prog)
                    .arg(case),
            );
            let how = format!("{case}, shared memory {shared}");
            assert_eq!(o.status.code(), Some(1), "{how}: {out}");
            assert!(out.contains(want), "{how}: want '{want}': {out}");
            assert!(!out.contains("was not refused"), "{how}: {out}");
            more(case, &how, &out);
        }
    }
}

/// Runs `cmd`, which must end with status 1 and say `want`; its text.
fn fails_saying(cmd: &mut Command, want: &str) -> String {
    let (o, out) = finish(cmd);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains(want), "want '{want}': {out}");
    out
}

/// Runs `cmd` to its end: its output, and that as text.
fn finish(cmd: &mut Command) -> (Output, String) {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run pld-oshrun: {e}"));
    let out = text(&o);
    (o, out)
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `src` at 2, 3 and 4 PEs over both transports, with and without
/// shared memory; each run must exit 0 and print `expect` (with the PE
/// count).
fn passes_everywhere(src: &str, expect: &str) {
    passes_at(src, expect, &[2, 3, 4]);
}

/// How PEs reach each other's heaps: `pld-oshrun --shared-memory`.
const MEMORY: [&str; 2] = ["on", "off"];

/// Runs `src` at each of `nps` PEs over both transports, with and without
/// shared memory.
fn passes_at(src: &str, expect: &str, nps: &[u32]) {
    passes_with(src, &[], expect, nps);
}

/// [`passes_at`], the program given `args`.
fn passes_with(src: &str, args: &[&str], expect: &str, nps: &[u32]) {
    let prog = compile(src);
    for transport in ["quic", "tcp"] {
        for shared in MEMORY {
            for &np in nps {
                let flags = [
                    "--transport",
                    transport,
                    "--timeout",
                    "30s",
                    "--shared-memory",
                    shared,
                ];
                let (o, out) = finish(
                    oshrun_cmd()
                        .args(["-np", &np.to_string()])
                        .args(flags)
                        .arg(&prog)
                        .args(args),
                );
                let how =
                    format!("{src} {args:?} at {np} PEs over {transport}, shared memory {shared}");
                assert!(o.status.success(), "{how}: {out}");
                let want = format!("{expect} on {np} PEs");
                assert!(out.contains(&want), "{how} did not print '{want}': {out}");
            }
        }
    }
}

#[test]
fn a_sleeping_wait_wakes_for_every_write_into_its_memory() {
    // Sleep (pld-oshrun's default) and spin; 4 and 8 PEs on this host's
    // cores is where a PE falls asleep while its neighbour still writes.
    // A lost wake-up never ends, so the deadline only bounds the failure:
    // 60 s, for 8 spinning PEs on 2 cores beside the other tests' jobs (a
    // run takes about 1 s alone, under stress too).
    let prog = compile("tests/c/doorbell.c");
    for progress in ["sleep", "spin"] {
        for np in [2, 4, 8] {
            let flags = [
                "--transport",
                "tcp",
                "--timeout",
                "60s",
                "--progress",
                progress,
            ];
            let o = oshrun_with(&prog, np, &flags);
            let out = text(&o);
            assert!(o.status.success(), "{np} PEs, {progress}: {out}");
            assert!(out.contains(&format!("doorbell: OK on {np} PEs")), "{out}");
        }
    }
}

/// The cores this test may run on, in order (as the launcher sees them).
fn allowed_cores() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| panic!("cannot read /proc/self/status: {e}"));
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status}"))
        .trim();
    let core = |c: &str| {
        c.parse::<usize>()
            .unwrap_or_else(|e| panic!("Cpus_allowed_list {list}: {e}"))
    };
    let mut cores = Vec::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cores.extend(core(a)..=core(b));
    }
    cores
}

#[test]
fn each_pe_is_bound_to_the_core_of_its_index_unless_told_none() {
    let prog = compile("tests/c/bind.c");
    let cores = allowed_cores();
    for np in [2u32, 3] {
        let o = oshrun_with(&prog, np, &["--transport", "tcp"]);
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        for pe in 0..np {
            let core = cores[pe as usize % cores.len()];
            let want = format!("PE {pe} of {np} may run on 1 cores, first {core}");
            assert!(out.contains(&want), "bound: want '{want}': {out}");
        }
    }
    let o = oshrun_with(&prog, 2, &["--transport", "tcp", "--bind-to", "none"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for pe in 0..2 {
        let want = format!(
            "PE {pe} of 2 may run on {} cores, first {}",
            cores.len(),
            cores[0]
        );
        assert!(out.contains(&want), "unbound: want '{want}': {out}");
    }
}

#[test]
fn heaps_and_static_data_are_shared_between_pes_of_one_host_unless_turned_off() {
    let prog = compile("tests/c/rma.c");
    for (flag, want) in [("on", "shared"), ("off", "none")] {
        let o = oshrun_with(&prog, 2, &["--transport", "tcp", "--shared-memory", flag]);
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        for what in ["another PE", "another PE's static data"] {
            let line = format!("shmem_ptr to {what}: {want}");
            assert!(out.contains(&line), "--shared-memory {flag}: {out}");
        }
    }
    // The race detector sees every op: no shared memory under --checked.
    let o = oshrun_with(&prog, 2, &["--transport", "tcp", "--checked"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for what in ["another PE", "another PE's static data"] {
        let line = format!("shmem_ptr to {what}: none");
        assert!(out.contains(&line), "--checked: {out}");
    }
}

#[test]
fn setup_query_and_the_heap_calls_are_symmetric() {
    passes_everywhere("tests/c/setup.c", "setup: OK");
}

#[test]
fn teams_split_translate_sync_and_free_their_slots() {
    passes_at("tests/c/teams.c", "teams: OK", &[2, 3, 4, 8]);
}

// Through shared memory a team of more than 16 members syncs with the
// dissemination barrier over its cells, not the flag barrier.
#[test]
fn teams_of_more_than_sixteen_members_sync_through_shared_memory() {
    let prog = compile("tests/c/teams.c");
    for transport in ["quic", "tcp"] {
        let o = oshrun_with(
            &prog,
            17,
            &[
                "--transport",
                transport,
                "--timeout",
                "60s",
                "--shared-memory",
                "on",
            ],
        );
        let out = text(&o);
        assert!(o.status.success(), "17 PEs over {transport}: {out}");
        assert!(out.contains("teams: OK on 17 PEs"), "{out}");
    }
}

#[test]
fn every_team_collective_of_every_type_matches_its_definition_on_every_team_shape() {
    passes_at("tests/c/collectives.c", "collectives: OK", &[2, 3, 4, 8]);
}

#[test]
fn the_active_set_collectives_match_their_definitions_and_restore_psync() {
    passes_at("tests/c/active_set.c", "active sets: OK", &[2, 3, 4, 8]);
}

#[test]
fn contexts_complete_their_own_ops_and_number_pes_as_their_team() {
    passes_at("tests/c/contexts.c", "contexts: OK", &[2, 3, 4, 8]);
}

#[test]
fn locks_exclude_under_contention_and_test_lock_takes_only_a_free_lock() {
    passes_at("tests/c/locks.c", "locks: OK", &[2, 3, 4, 8]);
}

// Without the exit handler PE 0 timed out in 23 of these 24 runs: the
// returned PEs' last puts, or their last barrier signals, never came.
#[test]
fn a_program_returning_without_finalize_still_delivers_its_last_puts_and_barrier() {
    for mode in ["data", "barrier"] {
        passes_with(
            "tests/c/no_finalize.c",
            &[mode],
            "no_finalize: OK",
            &[2, 3, 4],
        );
    }
}

// 1.5, 9.3: an allocation the heap cannot give returns NULL on every PE,
// and realloc leaves its block; SHMEM_SYMMETRIC_SIZE sets the heap.
#[test]
fn shmem_symmetric_size_bounds_the_heap_and_a_full_heap_returns_null() {
    let prog = compile("tests/c/heap_size.c");
    for (mib, shared) in [("8", "on"), ("8", "off"), ("40", "off")] {
        let (o, out) = finish(
            oshrun_cmd()
                .args(["-np", "3", "--transport", "tcp", "--timeout", "30s"])
                .args(["--shared-memory", shared])
                .arg(&prog)
                .arg(mib)
                .env("SHMEM_SYMMETRIC_SIZE", format!("{mib}M")),
        );
        assert!(
            o.status.success(),
            "{mib} MiB, shared memory {shared}: {out}"
        );
        assert!(out.contains("heap_size: OK on 3 PEs"), "{out}");
        let bytes = mib.parse::<u64>().unwrap() << 20;
        for call in [
            format!("shmem_malloc({bytes})"),
            format!("shmem_calloc(1, {bytes})"),
            format!("shmem_realloc({bytes})"),
        ] {
            let want = format!(
                "warning: {call} returns NULL: the symmetric heap has no {bytes} free bytes"
            );
            assert_eq!(out.matches(&want).count(), 3, "{want}: {out}");
        }
        assert!(out.contains("set SHMEM_SYMMETRIC_SIZE for more"), "{out}");
    }
    // The program's half of a 40 MiB heap does not fit a heap of 8.
    fails_saying(
        oshrun_cmd()
            .args(["-np", "2", "--transport", "tcp", "--timeout", "30s"])
            .arg(&prog)
            .arg("40")
            .env("SHMEM_SYMMETRIC_SIZE", "8M"),
        "half the heap (20971520 bytes) did not fit",
    );
}

#[test]
fn a_lock_passes_to_its_waiters_in_arrival_order() {
    passes_with(
        "tests/c/lock_order.c",
        &["fifo"],
        "lock_order: OK",
        &[2, 4, 8],
    );
}

#[test]
fn a_lock_wait_fails_at_the_timeout_naming_the_lock_and_the_pe_ahead() {
    let prog = compile("tests/c/lock_order.c");
    for shared in MEMORY {
        let (o, out) = finish(
            oshrun_cmd()
                .args(["-np", "3", "--transport", "tcp", "--timeout", "3s"])
                .args(["--shared-memory", shared])
                .arg(&prog)
                .arg("timeout"),
        );
        assert_eq!(o.status.code(), Some(1), "shared memory {shared}: {out}");
        assert!(
            out.contains("pld-shmem: PE 1: error: shmem_set_lock: timed out after 3s waiting for PE 0 to hand on its hold of the lock at 0x"),
            "shared memory {shared}: {out}"
        );
        assert!(out.contains("`lock`+0)"), "{out}");
    }
}

#[test]
fn rma_on_heap_and_static_data_reaches_every_pe() {
    passes_everywhere("tests/c/rma.c", "rma: OK");
}

#[test]
fn every_atomic_under_contention_from_all_pes_is_exact() {
    passes_everywhere("tests/c/atomics.c", "atomics: OK");
}

#[test]
fn put_signal_data_is_visible_when_the_signal_is() {
    passes_everywhere("tests/c/signal.c", "signal: OK");
}

#[test]
fn wait_until_and_test_variants_see_remote_writes() {
    passes_everywhere("tests/c/wait.c", "wait: OK");
}

#[test]
fn fence_orders_a_flag_after_its_data() {
    passes_everywhere("tests/c/fence.c", "fence: OK");
}

#[test]
fn the_readme_examples_run() {
    let hello = compile("examples/hello.c");
    let o = oshrun(&hello, 4, "quic", "30s");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for pe in 0..4 {
        assert!(out.contains(&format!("Hello from PE {pe} of 4")), "{out}");
    }
    let ring = compile("examples/ring.c");
    let o = oshrun(&ring, 3, "tcp", "30s");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(out.matches(": OK").count(), 3, "{out}");
}

#[test]
fn global_exit_ends_the_job_with_its_status_and_stops_the_rest() {
    let prog = compile("tests/c/global_exit.c");
    for transport in ["quic", "tcp"] {
        let o = oshrun(&prog, 3, transport, "30s");
        let out = text(&o);
        assert_eq!(o.status.code(), Some(7), "{out}");
        assert!(out.contains("PE 2 calls shmem_global_exit(7)"), "{out}");
        assert!(
            out.contains("PE 2 called shmem_global_exit(7)"),
            "the launcher names it: {out}"
        );
        assert!(!out.contains("left a barrier"), "{out}");
    }
    // A failure is never reported as success: the launcher exits with
    // what exit() gives the status (its low 8 bits), as a shell sees it.
    for (status, want) in [(-1, 255), (1, 1), (255, 255), (-2, 254), (300, 44)] {
        let (o, out) = finish(
            oshrun_cmd()
                .args(["-np", "2", "--transport", "tcp", "--timeout", "30s"])
                .arg(&prog)
                .arg(status.to_string()),
        );
        assert_eq!(
            o.status.code(),
            Some(want),
            "shmem_global_exit({status}): {out}"
        );
        assert!(
            out.contains(&format!("PE 1 called shmem_global_exit({status})")),
            "{out}"
        );
    }
}

#[test]
fn a_non_symmetric_address_is_refused_naming_the_call_the_address_and_both_ranges() {
    let prog = compile("tests/c/bad_address.c");
    let o = oshrun(&prog, 2, "quic", "30s");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    for part in [
        "PE 0: error: shmem_long_put: 8 bytes at 0x",
        "are not symmetric",
        "symmetric heap 0x",
        "data segment 0x",
    ] {
        assert!(out.contains(part), "missing '{part}': {out}");
    }
    assert!(!out.contains("was not refused"), "{out}");
}

/// Starts the PEs of `prog` by hand, as across hosts (PLD_RANK,
/// PLD_PEERS, PLD_TLS_DIR), so that no launcher stops them.
fn start_by_hand(prog: &Path, np: u32, transport: &str, timeout: &str) -> Vec<std::process::Child> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shmem-certs-{}-{transport}", std::process::id()));
    pld_server::tls::ClusterCa::generate("shmem-test")
        .and_then(|ca| ca.write_dir(&dir, np, &[]))
        .unwrap_or_else(|e| panic!("certificates: {e}"));
    let mut ports = Vec::new();
    while ports.len() < np as usize {
        let p = pld_server::transport::free_loopback_port().unwrap_or_else(|e| panic!("port: {e}"));
        if !ports.contains(&p) {
            ports.push(p);
        }
    }
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    (0..np)
        .map(|rank| {
            Command::new(prog)
                .env_remove("LD_LIBRARY_PATH")
                .env("PLD_RANK", rank.to_string())
                .env("PLD_PEERS", peers.join(","))
                .env("PLD_TLS_DIR", &dir)
                .env("PLD_TRANSPORT", transport)
                .env("PLD_SYNC_TIMEOUT", timeout)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("start PE {rank}: {e}"))
        })
        .collect()
}

#[test]
fn a_killed_pe_is_named_by_the_others_within_the_timeout() {
    let prog = compile("tests/c/killed.c");
    for transport in ["quic", "tcp"] {
        let started = std::time::Instant::now();
        let pes = start_by_hand(&prog, 3, transport, "5s");
        let outs: Vec<Output> = pes
            .into_iter()
            .map(|c| c.wait_with_output().unwrap_or_else(|e| panic!("wait: {e}")))
            .collect();
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            outs[1].status.signal(),
            Some(9),
            "PE 1 killed itself: {}",
            text(&outs[1])
        );
        for pe in [0, 2] {
            let out = text(&outs[pe]);
            assert_eq!(
                outs[pe].status.code(),
                Some(1),
                "PE {pe} over {transport}: {out}"
            );
            // PE 1 dies in the wait, or (its last barrier signal not yet
            // out) in the barrier before it: either way the others time
            // out in a sync call and name it.
            assert!(
                out.contains(&format!("pld-shmem: PE {pe}: error: shmem_")),
                "{out}"
            );
            assert!(out.contains("timed out after 5s"), "{out}");
            let names_1 = out.contains("cannot be reached: 1 (") || out.contains("for rank 1;");
            assert!(names_1, "PE {pe} names PE 1: {out}");
        }
    }
}

#[test]
fn a_collective_entered_by_only_some_members_names_the_missing_one_within_the_timeout() {
    let prog = compile("tests/c/missing.c");
    let cases = [
        // PE 2 skips an fcollect on the even PEs' team (PEs 0 and 2).
        (
            "team",
            vec![
                "shmem_int_fcollect",
                "team 3",
                "waiting for PE 2",
                "not heard from PEs 2",
            ],
        ),
        // PE 3 skips a world reduction. pld's world barrier carries no
        // call: PE 3's next barriers match the reduction's, and the
        // others time out in whichever call they are in, naming it.
        ("world", vec!["shmem_", "rank 3"]),
    ];
    for transport in ["quic", "tcp"] {
        for (case, wants) in &cases {
            let started = std::time::Instant::now();
            let o = oshrun_cmd()
                .args(["-np", "4", "--transport", transport, "--timeout", "3s"])
                .arg(&prog)
                .arg(case)
                .output()
                .unwrap_or_else(|e| panic!("cannot run pld-oshrun: {e}"));
            let took = started.elapsed();
            let out = text(&o);
            assert_eq!(o.status.code(), Some(1), "{case} over {transport}: {out}");
            assert!(
                took < std::time::Duration::from_secs(20),
                "took {took:?}: {out}"
            );
            assert!(out.contains("timed out after 3s"), "{case}: {out}");
            for want in wants {
                assert!(
                    out.contains(want),
                    "{case} over {transport} names '{want}': {out}"
                );
            }
        }
    }
}

#[test]
fn checked_names_an_unordered_put_and_get_with_both_pes_the_calls_and_the_objects() {
    let prog = compile("tests/c/race.c");
    let o = oshrun_with(&prog, 3, &["--checked", "--timeout", "30s"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let reports: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("--checked: race"))
        .collect();
    assert_eq!(reports.len(), 2, "{out}");
    let data = reports
        .iter()
        .find(|l| l.contains("'shmem.data'"))
        .expect("the static race");
    assert!(data.contains("`table`+24"), "{data}");
    let heap = reports
        .iter()
        .find(|l| l.contains("'shmem.heap'"))
        .expect("the heap race");
    assert!(
        heap.contains("16 bytes into the 64-byte allocation at offset 1114112"),
        "{heap}"
    );
    for r in [data, heap] {
        assert!(
            r.starts_with("pld-shmem: PE 1: --checked: race on PE 1's window"),
            "{r}"
        );
        assert!(
            r.contains("PE 0 put into [shmem put / p / iput / put_signal]"),
            "{r}"
        );
        assert!(
            r.contains("PE 2 read (get / remote_load) [shmem get / g / iget]"),
            "{r}"
        );
    }
    // --checked=strict refuses the racing access: the PE whose access
    // came second (PE 0's put or PE 2's get, of the table or the heap
    // block) fails, naming the race.
    let o = oshrun_with(&prog, 3, &["--checked=strict", "--timeout", "30s"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let refused: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("rejected put") || l.contains("rejected get"))
        .collect();
    assert!(!refused.is_empty(), "no access refused: {out}");
    for l in refused {
        assert!(
            l.starts_with("pld-shmem: PE 0: error: shmem_quiet:")
                || l.starts_with("pld-shmem: PE 2: error: shmem_long_g:"),
            "{l}"
        );
        assert!(
            l.contains("race on rank 1's window 'shmem.data' bytes 152..160")
                || l.contains("race on rank 1's window 'shmem.heap' bytes 1114128..1114136"),
            "{l}"
        );
    }
    // The same programs that order their accesses report nothing.
    let ordered = compile("tests/c/rma.c");
    let o = oshrun_with(&ordered, 3, &["--checked", "--timeout", "30s"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn checked_orders_collectives_team_syncs_and_locks_and_reports_a_read_of_a_collectives_target() {
    // Correct programs: no report (the team barriers and locks order).
    for src in [
        "tests/c/collectives.c",
        "tests/c/active_set.c",
        "tests/c/teams.c",
        "tests/c/locks.c",
        "tests/c/contexts.c",
    ] {
        let prog = compile(src);
        let o = oshrun_with(&prog, 4, &["--checked", "--timeout", "30s"]);
        assert!(o.status.success(), "{src} under --checked: {}", text(&o));
    }
    // PE 1 reads PE 0's fcollect target while PEs 0 and 2 run it.
    let prog = compile("tests/c/coll_race.c");
    let o = oshrun_with(&prog, 3, &["--checked", "--timeout", "30s"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let report = out
        .lines()
        .find(|l| l.contains("--checked: race"))
        .unwrap_or_else(|| panic!("no race reported: {out}"));
    assert!(report.contains("on PE 0's window 'shmem.data'"), "{report}");
    assert!(report.contains("`dst`+16384"), "{report}");
    assert!(report.contains("PE 2 put into"), "{report}");
    assert!(report.contains("PE 1 read (get / remote_load)"), "{report}");
}

/// Whether process `pid` is gone (or a zombie no one has reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The PEs of a job, by pid: killed when dropped, so that a failed test
/// leaves none behind.
struct Pes(Vec<i32>);

impl Drop for Pes {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if !gone(pid) {
                // SAFETY: signals a PE of a job this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Starts `hang` as a 2-PE job; returns the launcher and, once both PEs
/// have said so, their pids and the key directory.
fn hanging_job(prog: &Path) -> (std::process::Child, Pes, PathBuf) {
    use std::io::BufRead;
    let mut launcher = oshrun_cmd()
        .args(["-np", "2", "--transport", "tcp", "--timeout", "600s"])
        .arg(prog)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run pld-oshrun: {e}"));
    let out = launcher.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(out).lines();
    let (mut pids, mut keys) = (Vec::new(), PathBuf::new());
    while pids.len() < 2 {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the job ended before both PEs started"))
            .expect("a line");
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.len(), 6, "{line}");
        pids.push(w[3].parse::<i32>().expect("a pid"));
        keys = PathBuf::from(w[5]);
    }
    (launcher, Pes(pids), keys)
}

/// Waits until every process of `pids` is gone; panics after `within`.
fn all_gone(pids: &[i32], within: std::time::Duration, what: &str) {
    let until = std::time::Instant::now() + within;
    while !pids.iter().all(|&p| gone(p)) {
        assert!(
            std::time::Instant::now() < until,
            "{what}: PEs {:?} still run after {within:?}",
            pids.iter().filter(|&&p| !gone(p)).collect::<Vec<_>>()
        );
        // A poll of /proc with a deadline: they are not our children.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_signal_to_the_launcher_stops_every_pe_and_removes_the_key_directory() {
    let prog = compile("tests/c/hang.c");
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let (mut launcher, pids, keys) = hanging_job(&prog);
        assert!(keys.is_dir(), "{}", keys.display());
        // SAFETY: signals the launcher this test started.
        unsafe { libc::kill(launcher.id() as i32, sig) };
        let status = launcher.wait().expect("wait");
        // The launcher waited for its PEs: none is left, nor their keys.
        let what = format!("signal {sig}");
        all_gone(&pids.0, std::time::Duration::from_secs(2), &what);
        // (The PEs shared the launcher's stderr: it ends with them.)
        let mut err = String::new();
        use std::io::Read;
        let stderr = launcher.stderr.take().expect("stderr");
        let _ = { stderr }.read_to_string(&mut err);
        assert_eq!(status.code(), Some(128 + sig), "signal {sig}: {err}");
        assert!(err.contains("passing it to the PEs"), "{err}");
        assert!(!keys.exists(), "{} is left behind", keys.display());
    }
}

#[test]
fn pes_die_with_a_launcher_killed_outright() {
    let prog = compile("tests/c/hang.c");
    let (mut launcher, pids, keys) = hanging_job(&prog);
    launcher.kill().expect("SIGKILL");
    launcher.wait().expect("wait");
    // The parent-death signal: each PE gets SIGKILL as the launcher ends.
    all_gone(&pids.0, std::time::Duration::from_secs(30), "SIGKILL");
    // What SIGKILL cannot clean: the directory, private to this user.
    let _ = std::fs::remove_dir_all(keys);
}

#[test]
fn sizes_counts_and_strides_that_overflow_are_refused_by_name_on_both_paths() {
    let prog = compile("tests/c/bad_sizes.c");
    let cases = [
        (
            "malloc",
            "shmem_malloc(18446744073709551607): 18446744073709551607 bytes is more than any symmetric heap holds",
        ),
        (
            "align",
            "shmem_align(18446744073709551615): 18446744073709551615 bytes is more than any symmetric heap holds",
        ),
        (
            "realloc",
            "shmem_realloc(18446744073709551614): 18446744073709551614 bytes is more than any symmetric heap holds",
        ),
        (
            "calloc",
            "shmem_calloc(1, 18446744073709551615): 18446744073709551615 bytes is more than any symmetric heap holds",
        ),
        (
            "iput",
            "shmem_long_iput: 3 elements of 8 bytes at a destination stride of 1152921504606846976 span more bytes than an address space holds",
        ),
        (
            "iget",
            "shmem_long_iget: 3 elements of 8 bytes at a source stride of 1152921504606846976 span more bytes than an address space holds",
        ),
        (
            "broadcast",
            "shmem_long_broadcast: 4611686018427387903 elements of 8 bytes are more bytes than an address space holds",
        ),
        (
            "fcollect",
            "shmem_long_fcollect: 1152921504606846975 elements of 8 bytes for each of 2 members are more bytes than an address space holds",
        ),
        (
            "reduce",
            "shmem_long_sum_reduce: 9223372036854775807 elements of 8 bytes are more bytes than an address space holds",
        ),
        ("reserved", "shmem_long_put: 8 bytes at 0x"),
    ];
    refused_on_both_paths(&prog, &cases, |case, how, out| {
        assert!(out.contains("pld-shmem: PE "), "{how}: {out}");
        assert!(!out.contains(" gave "), "{case}, {how}: {out}");
    });
    // The put into the reserved bytes says why it is refused.
    let (_, out) = finish(
        oshrun_cmd()
            .args(["-np", "2", "--transport", "tcp"])
            .arg(&prog)
            .arg("reserved"),
    );
    assert!(
        out.contains(
            "which pld keeps for its own cells (the program's symmetric objects start at 0x"
        ),
        "{out}"
    );
    // A heap too small for pld's own cells is refused at start, by name.
    fails_saying(
        oshrun_cmd()
            .args(["-np", "2", "--transport", "tcp"])
            .arg(&prog)
            .arg("none")
            .env("SHMEM_SYMMETRIC_SIZE", "64K"),
        "SHMEM_SYMMETRIC_SIZE=64K: smaller than the",
    );
}

#[test]
fn checked_fails_every_pe_of_a_collective_whose_pes_disagree_naming_the_disagreement() {
    let prog = compile("tests/c/mismatch.c");
    let cases = [
        (
            "length",
            "the members of SHMEM_TEAM_WORLD disagree on the collective call (they differ in element count): PEs 0, 2: shmem_long_sum_reduce of 4 elements; PE 1: shmem_long_sum_reduce of 8 elements",
        ),
        (
            "root",
            "(they differ in root): PEs 0, 2: shmem_long_broadcast of 4 elements from root 0; PE 1: shmem_long_broadcast of 4 elements from root 1",
        ),
        (
            "op",
            "(they differ in call): PEs 0, 2: shmem_long_sum_reduce of 4 elements; PE 1: shmem_long_max_reduce of 4 elements",
        ),
        (
            "type",
            "(they differ in call): PEs 0, 2: shmem_long_sum_reduce of 4 elements; PE 1: shmem_int_sum_reduce of 4 elements",
        ),
        (
            "active",
            "disagree on the collective call (they differ in element count): PEs 0, 2: shmem_long_sum_to_all of 2 elements; PE 1: shmem_long_sum_to_all of 3 elements",
        ),
    ];
    for (case, want) in cases {
        let (o, out) = finish(
            oshrun_cmd()
                .args(["-np", "3", "--checked", "--timeout", "30s"])
                .arg(&prog)
                .arg(case),
        );
        assert_eq!(o.status.code(), Some(1), "{case}: {out}");
        assert!(out.contains(want), "{case}: want '{want}': {out}");
        assert!(!out.contains("returned"), "{case}: {out}");
    }
    // Calls that agree (collect's counts may differ) pass.
    let o = oshrun_with(&prog, 3, &["--checked", "--timeout", "30s"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("mismatch: agreeing calls OK on 3 PEs"),
        "{out}"
    );
}

#[test]
fn a_job_larger_than_the_host_or_an_unknown_flag_is_refused_before_anything_starts() {
    let started = std::time::Instant::now();
    let (o, out) = finish(oshrun_cmd().args(["-np", "100000", "/bin/true"]));
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("pld-oshrun: error: -np 100000: 100000 PEs on this host would hold about"),
        "{out}"
    );
    assert!(out.contains("(MemAvailable); at most "), "{out}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{out}"
    );
    // An unknown flag is a flag the launcher does not know, not a program
    // it cannot find.
    let (o, out) = finish(oshrun_cmd().args(["--np-typo", "2", "/bin/true"]));
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("unexpected argument '--np-typo'"), "{out}");
    assert!(!out.contains("cannot start"), "{out}");
}

#[test]
fn misaligned_cells_null_fetches_and_calls_after_finalize_are_refused_by_name_on_both_paths() {
    let prog = compile("tests/c/misuse.c");
    let cases = [
        (
            "misaligned_amo",
            "shmem_long_atomic_fetch_add: the 8-byte variable at 0x",
        ),
        (
            "misaligned_wait",
            "shmem_long_wait_until: the 8-byte variable at 0x",
        ),
        (
            "misaligned_test",
            "shmem_long_test: the 8-byte variable at 0x",
        ),
        (
            "fetch_null",
            "shmem_long_atomic_fetch_nbi: fetch is a null pointer",
        ),
        (
            "swap_null",
            "shmem_long_atomic_swap_nbi: fetch is a null pointer",
        ),
        (
            "after_finalize",
            "shmem_long_p called after shmem_finalize, which must be the last OpenSHMEM call",
        ),
    ];
    refused_on_both_paths(&prog, &cases, |case, how, out| {
        if case.starts_with("misaligned") {
            assert!(out.contains("is not aligned to 8 bytes"), "{how}: {out}");
        }
        if case == "after_finalize" {
            assert!(
                // Whichever PE fails first, the launcher stops the other.
                out.contains(" of 2 after shmem_finalize"),
                "{how}: {out}"
            );
        }
    });
}

#[test]
fn error_lines_of_several_pes_at_once_stay_whole() {
    // Every PE reports its races at shmem_finalize, after one barrier:
    // eight processes writing about a hundred lines each to one pipe at
    // once, three times.
    // Into a file, as a batch scheduler writes a job's output.
    let prog = compile("tests/c/many_races.c");
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("many-races.log");
    for run in 0..3 {
        let file = std::fs::File::create(&log).unwrap();
        let status = oshrun_cmd()
            .args([
                "-np",
                "8",
                "--checked",
                "--transport",
                "tcp",
                "--timeout",
                "60s",
            ])
            .arg(&prog)
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .status()
            .unwrap_or_else(|e| panic!("cannot run pld-oshrun: {e}"));
        let out = std::fs::read_to_string(&log).unwrap();
        assert_eq!(status.code(), Some(1), "{out}");
        let reports = out
            .lines()
            .filter(|l| l.contains("--checked: race"))
            .count();
        // Until the first PE to finish ends the job, at least one PE
        // reports each pair of its readers and writers.
        assert!(reports >= 50, "run {run}: {reports} reports: {out}");
        for l in out.lines().filter(|l| !l.is_empty()) {
            let whole = (l.starts_with("pld-shmem: PE ") || l.starts_with("pld-oshrun: "))
                && l.matches("pld-shmem: PE ").count() <= 1;
            assert!(
                whole,
                "run {run}: a line that is not one whole message: {l:?}"
            );
            if l.contains("--checked: race") {
                assert!(l.contains("orders one before the other"), "{l:?}");
            }
        }
    }
}

#[test]
fn pld_oshrun_trace_merges_every_pe_s_timeline_into_one_document() {
    let prog = compile("examples/ring.c");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let trace = dir.join("oshrun-trace.json");
    let _ = std::fs::remove_file(&trace);
    let t = trace.display().to_string();
    let flags = [
        "--transport",
        "tcp",
        "--shared-memory",
        "off",
        "--trace",
        &t,
    ];
    let o = oshrun_with(&prog, 3, &flags);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).expect("one JSON document");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    for pe in 0..3 {
        assert!(
            events
                .iter()
                .any(|e| e["pid"] == pe && e["name"].as_str().is_some_and(|n| n.starts_with("put"))),
            "PE {pe}'s puts are on its track: {doc}"
        );
    }
    // A path it cannot write is refused before any PE starts.
    let o = oshrun_with(&prog, 2, &["--trace", "/nonexistent-pld-dir/t.json"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("--trace /nonexistent-pld-dir/t.json: cannot write there"),
        "{out}"
    );
    assert!(!out.contains(": OK"), "the PEs ran: {out}");
}
