//! `pld-daemon` refusing a configuration it cannot run: it exits non-zero
//! at once and says what is wrong once, naming the flag's value.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_tests::daemon_bin;

/// Runs `pld-daemon ARGS`; its exit success and stderr.
fn daemon(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(daemon_bin())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// On the landed build each of these printed its reason twice in one line
// ("invalid configuration: X: X"): the message and, again, its source.
#[test]
fn a_configuration_error_says_what_is_wrong_once() {
    for (args, reason) in [
        (
            &["--rank", "5", "--peers", "127.0.0.1:1", "--insecure"][..],
            "rank 5 is not in the peer list of 1 ranks (0 to 0)",
        ),
        (
            &[
                "--rank",
                "0",
                "--peers",
                "127.0.0.1:1",
                "--insecure",
                "--window",
                "data=0",
            ][..],
            "window 'data' has size 0",
        ),
    ] {
        let (ok, stderr) = daemon(args);
        assert!(!ok, "{args:?} started");
        assert_eq!(stderr.matches(reason).count(), 1, "{args:?}:\n{stderr}");
        assert!(
            stderr.contains("pld-daemon: error: invalid configuration: "),
            "{stderr}"
        );
    }
}
