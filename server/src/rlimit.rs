//! The open-file limit: a rank holds a socket (two over TCP) per peer, so
//! a process that starts ranks raises its soft limit to the hard one, as
//! the daemon and pld-oshrun (whose PEs inherit it) do.

/// The soft and hard limits on open files.
pub fn open_files() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    Some((lim.rlim_cur, lim.rlim_max))
}

/// Raises the soft limit on open files to the hard limit; the limit now
/// (the soft one, raised or not).
pub fn raise_open_files() -> Option<u64> {
    let (soft, hard) = open_files()?;
    if soft >= hard {
        return Some(soft);
    }
    let lim = libc::rlimit {
        rlim_cur: hard,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit from the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        tracing::debug!("open-file limit raised from {soft} to {hard}");
        return Some(hard);
    }
    Some(soft)
}
