//! `pld-oshcc` as build systems use a compiler wrapper: `CC=pld-oshcc` in
//! the environment of `make` and of CMake, and `make CC=pld-oshcc` — and
//! the chains back to itself it refuses (`PLD_OSHCC_CC` naming it, a link
//! to it, a script that calls it). Each build runs in a process group of
//! its own that is killed after a deadline: a wrapper that runs itself
//! fails the test instead of filling the machine. Needs make and cmake
//! (.ci/run installs them): elsewhere each test is reported `skipped`, and
//! under CI=true it fails instead (`pld_tests::harness`).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::harness;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const OSHCC: &str = env!("CARGO_BIN_EXE_pld-oshcc");
const OSHRUN: &str = env!("CARGO_BIN_EXE_pld-oshrun");

fn main() {
    let tests: Vec<harness::Test> = vec![
        (
            "cc_pld_oshcc_in_the_environment_of_make".into(),
            Box::new(make_with_cc_in_the_environment),
        ),
        (
            "make_cc_pld_oshcc_on_the_command_line".into(),
            Box::new(make_with_cc_on_the_command_line),
        ),
        (
            "cc_pld_oshcc_in_the_environment_of_cmake".into(),
            Box::new(cmake_with_cc_in_the_environment),
        ),
        (
            "a_chain_back_to_pld_oshcc_is_refused_by_name".into(),
            Box::new(a_chain_back_to_itself_is_refused),
        ),
    ];
    harness::main(missing, tests)
}

fn missing() -> Option<String> {
    for tool in ["make", "cmake"] {
        let ok = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return Some(format!("no {tool} here (apt-get install make cmake)"));
        }
    }
    None
}

/// A fresh project directory holding our hello program.
fn project(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("build-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.c");
    std::fs::copy(hello, dir.join("hello.c")).unwrap();
    dir
}

/// PATH with pld-oshcc's directory first, as after installing it.
fn path_with_oshcc() -> String {
    let bin = Path::new(OSHCC).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `cmd` in a process group of its own, killed whole after `limit`.
fn bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pgid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            // SAFETY: signals the process group this test started.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            return true;
        }
        false
    });
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let _ = tx.send(());
    let killed = watchdog.join().unwrap();
    assert!(
        !killed,
        "{cmd:?} was still running after {:?}, killed: {}",
        started.elapsed(),
        text(&out)
    );
    out
}

fn text(o: &Output) -> String {
    format!(
        "{:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The built program runs as a job and greets from both PEs.
fn runs(prog: &Path) {
    // The library pld-oshcc linked (its RUNPATH), not cargo's test
    // LD_LIBRARY_PATH's first find.
    let out = Command::new(OSHRUN)
        .env_remove("LD_LIBRARY_PATH")
        .args(["-np", "2", "--transport", "tcp"])
        .arg(prog)
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for pe in 0..2 {
        assert!(t.contains(&format!("Hello from PE {pe} of 2")), "{t}");
    }
}

const MAKEFILE: &str = "hello: hello.c\n\t$(CC) -O1 -o hello hello.c\n";
const LIMIT: Duration = Duration::from_secs(120);

fn make_with_cc_in_the_environment() {
    let dir = project("make-env");
    std::fs::write(dir.join("Makefile"), MAKEFILE).unwrap();
    let mut make = Command::new("make");
    make.current_dir(&dir)
        .env("PATH", path_with_oshcc())
        .env("CC", "pld-oshcc");
    let out = bounded(make, LIMIT);
    assert!(out.status.success(), "{}", text(&out));
    runs(&dir.join("hello"));
}

fn make_with_cc_on_the_command_line() {
    let dir = project("make-arg");
    std::fs::write(dir.join("Makefile"), MAKEFILE).unwrap();
    let mut make = Command::new("make");
    make.current_dir(&dir)
        .arg(format!("CC={OSHCC}"))
        // What a user's shell often has besides.
        .env("CC", OSHCC);
    let out = bounded(make, LIMIT);
    assert!(out.status.success(), "{}", text(&out));
    runs(&dir.join("hello"));
}

fn cmake_with_cc_in_the_environment() {
    let dir = project("cmake");
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(hello C)\nadd_executable(hello hello.c)\n",
    )
    .unwrap();
    let build = dir.join("build");
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(&build)
        .env("PATH", path_with_oshcc())
        .env("CC", "pld-oshcc");
    let out = bounded(configure, LIMIT);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("pld-oshcc"),
        "CMake took pld-oshcc as the C compiler: {t}"
    );
    let mut make = Command::new("cmake");
    make.arg("--build")
        .arg(&build)
        .env("PATH", path_with_oshcc());
    let out = bounded(make, LIMIT);
    assert!(out.status.success(), "{}", text(&out));
    runs(&build.join("hello"));
}

/// `pld-oshcc hello.c` with `PLD_OSHCC_CC=compiler`: refused with a
/// message holding `want`, within seconds.
fn refused(dir: &Path, compiler: &str, want: &str) {
    let mut cc = Command::new(OSHCC);
    cc.current_dir(dir)
        .args(["hello.c", "-o", "hello"])
        .env("PATH", path_with_oshcc())
        .env("PLD_OSHCC_CC", compiler);
    let out = bounded(cc, Duration::from_secs(30));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "PLD_OSHCC_CC={compiler}: {t}");
    assert!(t.contains("pld-oshcc: error:"), "{t}");
    assert!(
        t.contains(want),
        "PLD_OSHCC_CC={compiler}: want '{want}': {t}"
    );
    assert!(!dir.join("hello").exists(), "nothing was built: {t}");
}

fn a_chain_back_to_itself_is_refused() {
    let dir = project("chain");
    refused(&dir, "pld-oshcc", "is pld-oshcc itself");
    refused(&dir, OSHCC, "is pld-oshcc itself");
    let link = dir.join("mycc");
    std::os::unix::fs::symlink(OSHCC, &link).unwrap();
    refused(&dir, link.to_str().unwrap(), "is pld-oshcc itself");
    // A script that looks like a compiler and calls the wrapper: caught
    // when the wrapper starts again under its own compiler.
    let script = dir.join("cc-wrapper.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec {OSHCC} \"$@\"\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    refused(
        &dir,
        script.to_str().unwrap(),
        "was started by the compiler it runs",
    );
}
