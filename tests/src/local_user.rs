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
