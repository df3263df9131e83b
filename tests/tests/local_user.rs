//! A hostile local user and the keys pld writes for local clusters: the
//! other user (`nobody`) plants the directory `pld-daemon demo` used to
//! make (`$TMPDIR/pld-tls-PID-0`), with symlinks where the keys go, before
//! the demo starts. The demo must neither use, remove nor follow it. Needs
//! root: elsewhere each test is reported `skipped`, and under CI=true it
//! fails instead (`pld_tests::harness`).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::local_user::{self, SharedTmp};
use pld_tests::{daemon_bin, harness};

fn main() {
    let tests: Vec<harness::Test> = vec![(
        "the_demo_neither_uses_nor_follows_a_key_directory_another_user_planted".into(),
        Box::new(the_demo_neither_uses_nor_follows_a_planted_key_directory),
    )];
    harness::main(local_user::unavailable, tests)
}

fn the_demo_neither_uses_nor_follows_a_planted_key_directory() {
    let tmp = SharedTmp::new("demo");
    let victim = tmp.victim("victim", "untouched\n");
    let loot = tmp.path().join("loot");
    // Every name the demo's old predictable directory had, for this pid.
    let plant = r#"d="$TMPDIR/pld-tls-$1-0"; mkdir "$d"; : > "$LOOT"; chmod 666 "$LOOT"
        ln -s "$VICTIM" "$d/ca.pem"; ln -s "$VICTIM" "$d/rank-0.pem"; ln -s "$VICTIM" "$d/rank-1.pem"
        ln -s "$LOOT" "$d/rank-0.key"; ln -s "$LOOT" "$d/rank-1.key"; ln -s "$LOOT" "$d/grpc.key""#;
    let (out, text) = tmp.run_after_planting(
        plant,
        &daemon_bin(),
        &["demo", "--transport", "tcp"],
        &victim,
        &loot,
    );
    assert!(out.status.success(), "the demo: {text}");
    // Untouched: still the other user's six symlinks, nothing added.
    tmp.assert_planted_untouched("pld-tls-", 6, &victim, &loot, &text);
}
