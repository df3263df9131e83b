//! How the library ends a program it cannot go on with, and how it warns.
//! OpenSHMEM calls return nothing, so an error is fatal: said on stderr
//! with the PE's number, then exit status 1, which makes `pld-oshrun`
//! stop the other PEs. A leaf: every layer may call it, before the PE
//! exists too (its number then reads `?`).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// This PE's number once `shmem_init` knows it; -1 before.
static WHO: AtomicI64 = AtomicI64::new(-1);

/// Set once a fatal error is on its way out: the exit handler then only
/// closes the links (no quiet that could wait on what failed).
static FATAL: AtomicBool = AtomicBool::new(false);

/// Records this PE's number for every later message.
pub(crate) fn set_pe(rank: u32) {
    WHO.store(i64::from(rank), Ordering::Release);
}

/// Whether a fatal error is ending the program.
pub(crate) fn is_fatal() -> bool {
    FATAL.load(Ordering::Acquire)
}

fn who() -> String {
    match WHO.load(Ordering::Acquire) {
        n if n >= 0 => format!("PE {n}"),
        _ => "PE ?".into(),
    }
}

/// Stops the program with `msg`, exit status 1.
pub(crate) fn fatal(msg: impl std::fmt::Display) -> ! {
    FATAL.store(true, Ordering::Release);
    let _ = std::io::stdout().flush();
    crate::say::line(format_args!("pld-shmem: {}: error: {msg}", who()));
    // SAFETY: exit runs the C program's atexit handlers and flushes its
    // stdio, as returning from main would.
    unsafe { libc::exit(1) }
}

/// Says `msg` as a warning of this PE; the program goes on.
pub(crate) fn warn(msg: impl std::fmt::Display) {
    crate::say::line(format_args!("pld-shmem: {}: warning: {msg}", who()));
}
