//! How many PEs fit on this host. Every PE keeps a link to every other
//! one — a QUIC connection, or two TCP sockets — so a job of N PEs holds
//! N(N-1) links, and its memory grows as N². Measured (private memory,
//! docs/PERFORMANCE.md, "Memory per PE"): about 1.5 MiB a PE plus 95 KiB
//! a QUIC link (quinn's transmit buffer for 64 KiB loopback datagrams,
//! its connection state) or 75 KiB a TCP one (rustls's record buffers).
//! A job that cannot fit is refused before anything starts, naming the
//! limit, instead of taking the host's memory and failing at a deadline.

use anyhow::bail;

/// Memory a PE holds with no links, rounded up from the measurement.
const PE_BYTES: u64 = 3 << 20;

/// Memory each link of a PE holds, rounded up from the measurement.
fn link_bytes(transport: &str) -> u64 {
    match transport {
        "tcp" => 128 << 10,
        _ => 160 << 10,
    }
}

/// About how much memory a job of `npes` PEs holds.
pub(crate) fn job_bytes(npes: u64, transport: &str) -> u64 {
    let links = npes.saturating_sub(1).saturating_mul(link_bytes(transport));
    npes.saturating_mul(PE_BYTES.saturating_add(links))
}

/// The share of the memory available now that a job may take.
const MEMORY_SHARE: f64 = 0.8;

/// File descriptors a PE holds besides its links.
const PE_FILES: u64 = 64;

/// File descriptors a PE of a job of `npes` holds.
fn pe_files(npes: u64, transport: &str) -> u64 {
    let per_link = if transport == "tcp" { 2 } else { 0 };
    PE_FILES + per_link * npes.saturating_sub(1)
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// `bytes` in MiB or GiB, for messages.
fn human(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// Refuses a job of `npes` PEs that this host cannot hold: more memory
/// than [`MEMORY_SHARE`] of what is available, or more open files per PE
/// than the hard limit allows. Raises this process's soft limit on open
/// files to the hard one, for the PEs to inherit.
pub(crate) fn check(npes: u32, transport: &str) -> anyhow::Result<()> {
    let n = u64::from(npes);
    if let Some(avail) = available_memory() {
        let budget = (avail as f64 * MEMORY_SHARE) as u64;
        let need = job_bytes(n, transport);
        if need > budget {
            let fit = (1..=n)
                .take_while(|&k| job_bytes(k, transport) <= budget)
                .last()
                .unwrap_or(0);
            bail!(
                "-np {npes}: {npes} PEs on this host would hold about {} ({} a PE, plus {} KiB for each of its {} links over {transport}: every PE keeps a link to every other), more than {} of the {} available (MemAvailable); at most {fit} PEs fit here — run a larger job across hosts",
                human(need),
                human(PE_BYTES),
                link_bytes(transport) >> 10,
                n - 1,
                format_args!("{:.0} %", MEMORY_SHARE * 100.0),
                human(avail),
            );
        }
    }
    let files = pe_files(n, transport);
    if let Some(limit) = pld_server::rlimit::raise_open_files()
        && files > limit
    {
        let (_, hard) = pld_server::rlimit::open_files().unwrap_or((limit, limit));
        let fit = (limit.saturating_sub(PE_FILES)) / 2 + 1;
        bail!(
            "-np {npes}: each PE would hold about {files} open files (two TCP sockets for each other PE), more than the limit of {limit} (ulimit -n; hard limit {hard}); at most {fit} PEs fit over TCP — raise the hard limit, or use --transport quic (one socket a PE)"
        );
    }
    Ok(())
}

/// How long a PE waits for every other one to connect, unless
/// `PLD_CONNECT_TIMEOUT` says: 30 s, and longer for a job whose N(N-1)/2
/// handshakes (mutual TLS) take longer on this host's cores — 128 PEs over
/// QUIC took 83 s to connect on two cores.
pub(crate) fn connect_timeout(npes: u32, transport: &str) -> std::time::Duration {
    let pairs = u64::from(npes) * u64::from(npes.saturating_sub(1)) / 2;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;
    // A pair's handshakes, in CPU time on a loaded host, rounded up.
    let per_pair_us = if transport == "tcp" { 4_000 } else { 25_000 };
    let extra = std::time::Duration::from_micros(pairs * per_pair_us / cores);
    std::time::Duration::from_secs(30).max(extra * 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_grows_as_the_square_of_its_pes() {
        let (a, b) = (job_bytes(64, "quic"), job_bytes(128, "quic"));
        assert!(b > 3 * a && b < 5 * a, "{a} {b}");
        assert!(job_bytes(2, "tcp") < job_bytes(2, "quic"));
        assert_eq!(job_bytes(u64::MAX, "quic"), u64::MAX);
    }

    #[test]
    fn a_job_that_cannot_fit_is_refused_naming_the_limit() {
        let e = check(100_000, "quic").expect_err("too large").to_string();
        assert!(
            e.starts_with("-np 100000: 100000 PEs on this host would hold about"),
            "{e}"
        );
        assert!(e.contains("PEs fit here"), "{e}");
    }

    #[test]
    fn the_connect_timeout_is_30_s_for_small_jobs_and_grows_for_large_ones() {
        assert_eq!(connect_timeout(4, "quic").as_secs(), 30);
        assert!(connect_timeout(128, "quic").as_secs() > 90);
        assert!(connect_timeout(128, "quic") > connect_timeout(128, "tcp"));
    }
}
