//! The launcher's signals. What a batch scheduler (TERM, then KILL after a
//! grace period), a closed terminal or ssh session (HUP) or a user (INT,
//! QUIT) sends `pld-oshrun` reaches its PEs; and a launcher killed
//! outright (KILL, which it cannot catch) takes its PEs with it: each PE
//! gets the parent-death signal SIGKILL.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The signals the launcher passes on to its PEs.
pub(super) const FORWARDED: [libc::c_int; 4] =
    [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// A signal's name, for messages.
pub(super) fn name(sig: libc::c_int) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        n => format!("signal {n}"),
    }
}

fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset fill a sigset_t we own.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the [`FORWARDED`] signals in the calling thread — call it before
/// any other thread starts, so that every thread inherits the mask — and
/// hands each one that arrives to `on`, on a thread of its own that waits
/// for them (`sigwait`): no handler runs inside whatever the launcher was
/// doing.
pub(super) fn catch(on: impl Fn(libc::c_int) + Send + 'static) -> io::Result<()> {
    let set = forwarded_set();
    // SAFETY: sets this thread's mask from a valid set.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    std::thread::Builder::new()
        .name("pld-oshrun-signals".into())
        .spawn(move || {
            loop {
                let mut sig = 0;
                // SAFETY: waits for a signal of a valid set; `sig` is ours.
                if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                    on(sig);
                }
            }
        })?;
    Ok(())
}

/// Makes the process `cmd` starts die with the launcher (SIGKILL when
/// the launcher's thread that started it ends: the main thread, which
/// ends with the launcher), and start with no signal blocked (the
/// launcher blocks those it forwards).
pub(super) fn die_with_launcher(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let launcher = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and
    // calls only async-signal-safe functions (sigemptyset, sigprocmask,
    // prctl, getppid, _exit), on memory of its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut none = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The launcher died between the fork and the prctl: the
            // signal will never come, so go now.
            if libc::getppid() != launcher {
                libc::_exit(128 + libc::SIGKILL);
            }
            Ok(())
        });
    }
}
