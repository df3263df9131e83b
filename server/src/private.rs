//! Directories and files that another local user cannot pre-create, swap
//! for a symlink, or read: where pld writes keys (and any scratch) on a
//! shared machine's `/tmp`.
//!
//! A predictable name in a world-writable directory is an invitation: a
//! user who makes `$TMPDIR/pld-oshrun-1234` before the launcher does, with
//! `rank-0.key` a symlink to a file of theirs (or to `/etc/shadow`), reads
//! a rank's key or has a root launcher overwrite any file. So a directory
//! here is made the way `mkdtemp(3)` makes one — a random name, created
//! exclusively (never one that already exists), mode 0700 — and every file
//! is created with `O_CREAT | O_EXCL | O_NOFOLLOW`: never an existing
//! file, never through a symlink.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A fresh directory only this user can enter, removed (with what is in
/// it) when dropped unless [`PrivateDir::keep`] is called.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    keep: bool,
}

impl PrivateDir {
    /// A new directory `$TMPDIR/PREFIX-XXXXXX` (mode 0700).
    pub fn new(prefix: &str) -> std::io::Result<PrivateDir> {
        PrivateDir::new_in(&std::env::temp_dir(), prefix)
    }

    /// A new directory `PARENT/PREFIX-XXXXXX` (mode 0700), made by
    /// `mkdtemp`: the kernel's exclusive `mkdir` under a random name.
    pub fn new_in(parent: &Path, prefix: &str) -> std::io::Result<PrivateDir> {
        let mut template = parent.join(format!("{prefix}-XXXXXX")).into_os_string();
        template.push("\0");
        let mut bytes = template.into_vec();
        // SAFETY: `bytes` is a NUL-terminated template ending in XXXXXX
        // that mkdtemp rewrites in place (same length).
        let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if p.is_null() {
            let e = std::io::Error::last_os_error();
            return Err(std::io::Error::new(
                e.kind(),
                format!(
                    "cannot make a private directory {}/{prefix}-XXXXXX: {e}",
                    parent.display()
                ),
            ));
        }
        bytes.pop();
        Ok(PrivateDir {
            path: PathBuf::from(OsString::from_vec(bytes)),
            keep: false,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` into a new file `name` in it with `mode` (see
    /// [`write_new`]); returns the file's path.
    pub fn write(&self, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<PathBuf> {
        let path = self.path.join(name);
        write_new(&path, bytes, mode)?;
        Ok(path)
    }

    /// Leaves the directory in place when this is dropped; its path.
    pub fn keep(mut self) -> PathBuf {
        self.keep = true;
        self.path.clone()
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.keep {
            // std's remove_dir_all does not follow symlinks it meets.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Creates `path` as a new file with `mode` and writes `bytes`: refused
/// (`AlreadyExists`, or `ELOOP` for a symlink) where anything is at `path`
/// already, so nothing another user placed there is followed or reused.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let named = |e: std::io::Error| {
        let why = match e.raw_os_error() {
            Some(libc::EEXIST) => "it exists already (pld writes only new files here)".to_string(),
            Some(libc::ELOOP) => "it is a symbolic link, which pld does not follow".to_string(),
            _ => e.to_string(),
        };
        std::io::Error::new(e.kind(), format!("cannot write {}: {why}", path.display()))
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(named)?;
    f.write_all(bytes).map_err(named)
}

/// Makes `dir` and any missing parent (each new one mode 0700); an
/// existing `dir` is used only if it is a real directory (not a symlink)
/// of this user, that no other user can write into.
pub fn ensure_own_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(dir)?;
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} {why}; choose another directory", dir.display()),
        ))
    };
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() {
        return refuse("exists and is not a directory (a symbolic link is not followed)".into());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return refuse(format!(
            "belongs to uid {}, not to this user ({me})",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return refuse(format!(
            "can be written by other users (mode {:o})",
            m.mode() & 0o777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_dir_is_new_mode_0700_and_gone_when_dropped() {
        let a = PrivateDir::new("pld-private-test").expect("mkdtemp");
        let b = PrivateDir::new("pld-private-test").expect("mkdtemp");
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path())
            .expect("made")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let f = a.write("key", b"secret", 0o600).expect("new file");
        let mode = std::fs::metadata(&f).expect("written").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }

    #[test]
    fn write_new_neither_reuses_a_file_nor_follows_a_symlink() {
        let d = PrivateDir::new("pld-private-test").expect("mkdtemp");
        let victim = d.write("victim", b"untouched", 0o600).expect("new file");
        let e = write_new(&victim, b"x", 0o600).expect_err("exists");
        assert!(e.to_string().contains("exists already"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        let e = write_new(&link, b"x", 0o600).expect_err("a symlink");
        assert!(e.to_string().contains("exists already"), "{e}");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nothing"), &dangling).expect("symlink");
        let e = write_new(&dangling, b"x", 0o600).expect_err("a dangling symlink");
        assert!(e.to_string().contains("exists already"), "{e}");
        assert!(
            !d.path().join("nothing").exists(),
            "not created through the link"
        );
        assert_eq!(std::fs::read(&victim).expect("read"), b"untouched");
    }

    #[test]
    fn ensure_own_dir_refuses_a_symlink_and_a_world_writable_dir() {
        let d = PrivateDir::new("pld-private-test").expect("mkdtemp");
        let fresh = d.path().join("a/b");
        ensure_own_dir(&fresh).expect("made");
        ensure_own_dir(&fresh).expect("ours, reused");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).expect("symlink");
        let e = ensure_own_dir(&link).expect_err("a symlink");
        assert!(e.to_string().contains("not a directory"), "{e}");
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = ensure_own_dir(&fresh).expect_err("world-writable");
        assert!(
            e.to_string().contains("can be written by other users"),
            "{e}"
        );
    }
}
