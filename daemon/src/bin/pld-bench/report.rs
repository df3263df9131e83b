//! Figures and how they are printed: a table for people, one JSON object
//! per line for scripts, with ratios to the same run's baselines.

use std::collections::HashMap;

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Figure {
    pub op: String,
    /// Bytes, or ranks for barrier_lat and the scale figures.
    pub size: u64,
    pub value: f64,
    pub unit: &'static str,
}

impl Figure {
    pub fn new(op: &str, size: u64, value: f64, unit: &'static str) -> Figure {
        Figure {
            op: op.into(),
            size,
            value,
            unit,
        }
    }
    pub fn lat(op: &str, size: u64, us: f64) -> Figure {
        Figure {
            op: op.into(),
            size,
            value: us,
            unit: "us",
        }
    }
    pub fn bw(op: &str, size: u64, mb_s: f64) -> Figure {
        Figure {
            op: op.into(),
            size,
            value: mb_s,
            unit: "MB/s",
        }
    }
    pub fn rate(op: &str, size: u64, per_s: f64) -> Figure {
        Figure {
            op: op.into(),
            size,
            value: per_s,
            unit: "msg/s",
        }
    }
    /// Whether `size` counts ranks, not bytes.
    fn per_rank_count(&self) -> bool {
        matches!(self.op.as_str(), "barrier_lat" | "allreduce_lat") || self.op.starts_with("scale_")
    }
    fn higher_is_better(&self) -> bool {
        self.unit != "us"
    }
}

/// The baselines a figure is compared with: the transport's raw floor and,
/// when measured, Open MPI's figure for the same op and size.
pub struct Baselines {
    pub raw_rtt_us: Option<f64>,
    pub raw_bw_put: Option<f64>,
    pub raw_bw_get: Option<f64>,
    pub mpi: HashMap<(String, u64), f64>,
}

impl Baselines {
    fn raw(&self, f: &Figure) -> Option<(&'static str, f64)> {
        match f.op.as_str() {
            "put_lat" | "get_lat" | "acc_lat" | "fetch_add_lat" | "cas_lat" if f.size <= 64 => {
                self.raw_rtt_us.map(|v| ("raw_rtt", v))
            }
            "put_bw" => self.raw_bw_put.map(|v| ("raw_bw", v)),
            "get_bw" => self.raw_bw_get.map(|v| ("raw_bw_get", v)),
            _ => None,
        }
    }
}

fn json_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Prints the figures as a table, or as JSON lines.
pub fn print(figs: &[Figure], base: &Baselines, transport: &str, progress: &str, json: bool) {
    if !json {
        println!(
            "{:<14} {:>10} {:>14} {:<6} {:>10} {:>12} {:>9}",
            "op", "size", "value", "unit", "vs raw", "mpi", "vs mpi"
        );
    }
    for f in figs {
        let raw = base.raw(f);
        let mpi = base.mpi.get(&(f.op.clone(), f.size)).copied();
        // Ratios are pld / baseline: below 1 is faster for latencies, above
        // 1 is faster for bandwidths and rates.
        let ratio = |b: f64| if b > 0.0 { f.value / b } else { f64::NAN };
        if json {
            let mut line = format!(
                "{{\"op\": {}, \"size\": {}, \"value\": {:.3}, \"unit\": {}, \"transport\": {}, \"progress\": {}",
                json_str(&f.op),
                f.size,
                f.value,
                json_str(f.unit),
                json_str(transport),
                json_str(progress)
            );
            if let Some((name, v)) = raw {
                line += &format!(
                    ", \"baseline\": {}, \"baseline_value\": {v:.3}, \"ratio\": {:.3}",
                    json_str(name),
                    ratio(v)
                );
            }
            if let Some(m) = mpi {
                line += &format!(", \"mpi\": {m:.3}, \"vs_mpi\": {:.3}", ratio(m));
            }
            line += &format!(", \"higher_is_better\": {}}}", f.higher_is_better());
            println!("{line}");
        } else {
            let size = if f.per_rank_count() {
                format!("{} ranks", f.size)
            } else {
                human_size(f.size)
            };
            let vs_raw = raw.map_or(String::new(), |(_, v)| format!("{:.2}x", ratio(v)));
            let (m, vs_m) = mpi.map_or((String::new(), String::new()), |m| {
                (format!("{m:.2}"), format!("{:.2}x", ratio(m)))
            });
            println!(
                "{:<14} {:>10} {:>14.2} {:<6} {:>10} {:>12} {:>9}",
                f.op, size, f.value, f.unit, vs_raw, m, vs_m
            );
        }
    }
}

/// `4096` -> `4KiB`.
pub fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
        n => format!("{n}B"),
    }
}

/// Parses the output of `mpi_rma_bench` (`op size value unit` lines).
pub fn parse_mpi(out: &str) -> HashMap<(String, u64), f64> {
    let mut m = HashMap::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if let [op, size, value, _unit] = w.as_slice()
            && let (Ok(size), Ok(value)) = (size.parse(), value.parse())
        {
            m.insert((op.to_string(), size), value);
        }
    }
    m
}
