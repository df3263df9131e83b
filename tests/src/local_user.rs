//! Another local user of the same machine, for tests of what pld writes
//! into a shared `/tmp`: a user (`nobody`, uid 65534) who plants
//! directories and symlinks where a pld program is about to write, before
//! it starts. Needs root (to become that user with `setpriv`);
//! [`unavailable`] says why not.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The other user's uid (and gid): `nobody`.
pub const UID: u32 = 65534;

/// Why this machine cannot play another user, if so.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("acting as another local user needs root".into());
    }
    match Command::new("setpriv").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("no setpriv (util-linux) to act as another user".into()),
    }
}

/// A directory like `/tmp` for one test — anyone may create in it, only
/// an entry's owner may remove it (mode 1777) — that the test's program
/// gets as `TMPDIR`; removed with what is in it on drop.
#[derive(Debug)]
pub struct SharedTmp(PathBuf);

impl SharedTmp {
    /// A new one under the system's temporary directory.
    pub fn new(name: &str) -> SharedTmp {
        let dir = pld_server::private::PrivateDir::new(&format!("pld-shared-tmp-{name}"))
            .expect("a scratch directory")
            .keep();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))
            .expect("chmod 1777");
        SharedTmp(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A file of this (root) user's in it with `text`, mode 0644: what a
    /// root program must never overwrite through a planted symlink.
    pub fn victim(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write the victim");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        p
    }
}

impl SharedTmp {
    /// Runs `program args` after the other user ran `plant`
    /// ([`after_planting`]), with this directory as `TMPDIR` and `VICTIM`
    /// and `LOOT` set for the script (and the cargo test's
    /// `LD_LIBRARY_PATH` removed: the program loads what it was linked
    /// with). The output, and it as text; fails the test if planting did.
    pub fn run_after_planting(
        &self,
        plant: &str,
        program: &Path,
        args: &[&str],
        victim: &Path,
        loot: &Path,
    ) -> (std::process::Output, String) {
        let out = after_planting(plant, program, args)
            .env_remove("LD_LIBRARY_PATH")
            .env("TMPDIR", self.path())
            .env("VICTIM", victim)
            .env("LOOT", loot)
            .output()
            .unwrap();
        let text = format!(
            "{:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(97), "planting failed: {text}");
        (out, text)
    }

    /// After the program ran (`text`, its output): the directory the
    /// other user planted (the one whose name starts with `prefix`) is
    /// still there, holding only that user's `links` symlinks; `victim`
    /// is untouched and `loot` empty (nothing written through a link);
    /// and the program's own directory is gone, so only the planted one
    /// is left.
    pub fn assert_planted_untouched(
        &self,
        prefix: &str,
        links: usize,
        victim: &Path,
        loot: &Path,
        text: &str,
    ) {
        let names = || {
            std::fs::read_dir(self.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
        };
        let planted = names()
            .find(|n| n.starts_with(prefix))
            .map(|n| self.path().join(n))
            .unwrap_or_else(|| panic!("the planted directory is gone (removed): {text}"));
        let entries = listing(&planted);
        assert_eq!(entries.len(), links, "nothing added: {entries:?}");
        assert!(
            entries
                .iter()
                .all(|(_, uid, target)| *uid == UID && target.is_some()),
            "{entries:?}"
        );
        assert_eq!(std::fs::read_to_string(victim).unwrap(), "untouched\n");
        assert_eq!(
            std::fs::read(loot).unwrap(),
            b"",
            "a key was written into the other user's file"
        );
        let left: Vec<String> = names().filter(|n| n.starts_with("pld-")).collect();
        assert_eq!(
            left.len(),
            1,
            "the program's own directory is removed: {left:?}"
        );
    }
}

impl Drop for SharedTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `program args`, started so that first the other user runs `plant` (a
/// `sh` script whose `$1` is the pid `program` will have, and whose
/// environment is the command's), and then `program` is exec'd as this
/// user in the same process. If planting fails, the command exits 97.
pub fn after_planting(plant: &str, program: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "pid=$$; setpriv --reuid={UID} --regid={UID} --clear-groups -- sh -ec \"$1\" plant \"$pid\" || exit 97; shift; exec \"$@\""
        ))
        .arg("sh")
        .arg(plant)
        .arg(program)
        .args(args);
    c
}

/// What is in `dir` now: each entry's name, owner and (for a symlink)
/// target, sorted.
pub fn listing(dir: &Path) -> Vec<(String, u32, Option<PathBuf>)> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| {
            let e = e.expect("an entry");
            let m = std::fs::symlink_metadata(e.path()).expect("lstat");
            let target = m
                .file_type()
                .is_symlink()
                .then(|| std::fs::read_link(e.path()).expect("readlink"));
            (
                e.file_name().to_string_lossy().into_owned(),
                m.uid(),
                target,
            )
        })
        .collect();
    v.sort();
    v
}
