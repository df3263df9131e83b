//! A hostile local user and `pld-oshrun`'s keys: the other user
//! (`nobody`) plants the directory the launcher used to make
//! (`$TMPDIR/pld-oshrun-PID`), with symlinks where the CA, the keys and the
//! traces go, before the launcher starts. The job must run without using,
//! removing or following it. Needs root: elsewhere the test is reported
//! `skipped`, and under CI=true it fails instead (`pld_tests::harness`).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::harness;
use pld_tests::local_user::{self, SharedTmp};
use std::path::{Path, PathBuf};
use std::process::Command;

const OSHCC: &str = env!("CARGO_BIN_EXE_pld-oshcc");
const OSHRUN: &str = env!("CARGO_BIN_EXE_pld-oshrun");

fn main() {
    let tests: Vec<harness::Test> = vec![(
        "pld_oshrun_neither_uses_nor_follows_a_key_directory_another_user_planted".into(),
        Box::new(the_launcher_neither_uses_nor_follows_a_planted_key_directory),
    )];
    harness::main(local_user::unavailable, tests)
}

fn hello() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("local-user-hello");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.c");
    let s = Command::new(OSHCC)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(s.success(), "pld-oshcc {}: {s}", src.display());
    out
}

fn the_launcher_neither_uses_nor_follows_a_planted_key_directory() {
    let prog = hello();
    let tmp = SharedTmp::new("oshrun");
    let victim = tmp.victim("victim", "untouched\n");
    let loot = tmp.path().join("loot");
    let trace = tmp.path().join("job-trace.json");
    let plant = r#"d="$TMPDIR/pld-oshrun-$1"; mkdir "$d"; : > "$LOOT"; chmod 666 "$LOOT"
        ln -s "$VICTIM" "$d/ca.pem"; ln -s "$VICTIM" "$d/rank-0.pem"; ln -s "$VICTIM" "$d/rank-1.pem"
        ln -s "$LOOT" "$d/rank-0.key"; ln -s "$LOOT" "$d/rank-1.key"
        ln -s "$VICTIM" "$d/trace-0.json"; ln -s "$VICTIM" "$d/trace-1.json""#;
    let trace_arg = trace.display().to_string();
    let prog_arg = prog.display().to_string();
    let args = [
        "-np",
        "2",
        "--transport",
        "tcp",
        "--trace",
        &trace_arg,
        &prog_arg,
    ];
    let (out, text) = tmp.run_after_planting(plant, Path::new(OSHRUN), &args, &victim, &loot);
    assert!(out.status.success(), "the job: {text}");
    for pe in 0..2 {
        assert!(text.contains(&format!("Hello from PE {pe} of 2")), "{text}");
    }
    assert!(trace.is_file(), "the job's trace: {text}");
    tmp.assert_planted_untouched("pld-oshrun-", 7, &victim, &loot, &text);
}
