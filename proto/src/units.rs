//! Sizes and durations as people write them on command lines:
//! `64MiB`, `250ms`. Shared by `pld-daemon`, `pld-bench` and `pld`.

use std::time::Duration;

/// Parses a size: bytes, or with a KiB/MiB/GiB (or K/M/G, KB/MB/GB — all
/// binary) suffix: `4096`, `64KiB`, `64MiB`, `1GiB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("size '{s}' must be a whole number with an optional KiB/MiB/GiB suffix")
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => {
            return Err(format!(
                "size '{s}' has unknown unit '{other}': use KiB, MiB or GiB"
            ));
        }
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// Parses a duration: `250ms`, `10s`, `2m`, `1h`, or a plain number of
/// seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration '{s}' must be a number with ms, s, m or h"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => {
            return Err(format!(
                "duration '{s}' has unknown unit '{other}': use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("duration '{s}' is out of range"))
}
