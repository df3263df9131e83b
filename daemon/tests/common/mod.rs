//! Helpers shared by the daemon crate's test binaries.

use std::process::Command;

/// Runs pld-bench with `args`; its stdout, once it has succeeded.
pub fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pld-bench"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run pld-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "pld-bench {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
