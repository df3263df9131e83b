//! A progress bar on stderr for long transfers: redrawn every 100 ms from
//! a shared byte counter, with the rate, and finished with a newline.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// When to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    /// For transfers over 4 MiB, when stderr is a terminal.
    Auto,
    /// For transfers over 4 MiB, always.
    Always,
    Never,
}

/// Transfers at least this large get a bar.
const MIN_BYTES: u64 = 4 << 20;

/// A bar being drawn; [`Bar::finish`] draws the last state.
#[derive(Debug)]
pub struct Bar {
    counter: Arc<AtomicU64>,
    state: Option<(tokio::task::JoinHandle<()>, Draw)>,
}

#[derive(Debug, Clone)]
struct Draw {
    label: String,
    total: u64,
    start: Instant,
}

impl Draw {
    fn line(&self, done: u64) -> String {
        const WIDTH: u64 = 30;
        let frac = if self.total == 0 {
            1.0
        } else {
            done as f64 / self.total as f64
        };
        let filled = ((frac * WIDTH as f64) as u64).min(WIDTH);
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        format!(
            "\r{} [{}{}] {:>3.0}% {:.1}/{:.1} MiB {:.1} MiB/s",
            self.label,
            "#".repeat(filled as usize),
            "-".repeat((WIDTH - filled) as usize),
            frac * 100.0,
            mib(done),
            mib(self.total),
            mib(done) / secs
        )
    }
}

impl Bar {
    /// Starts a bar for `total` bytes if `when` says so.
    pub fn start(label: &str, total: u64, when: When) -> Bar {
        let counter = Arc::new(AtomicU64::new(0));
        let draw = match when {
            When::Never => false,
            When::Always => total >= MIN_BYTES,
            When::Auto => total >= MIN_BYTES && std::io::stderr().is_terminal(),
        };
        let state = draw.then(|| {
            let d = Draw {
                label: label.to_string(),
                total,
                start: Instant::now(),
            };
            let (c, d2) = (counter.clone(), d.clone());
            let task = tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tick.tick().await;
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "{}", d2.line(c.load(Relaxed)));
                    let _ = err.flush();
                }
            });
            (task, d)
        });
        Bar { counter, state }
    }

    /// The counter the transfer adds its bytes to.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.counter.clone()
    }

    /// Stops redrawing and draws the final state.
    pub fn finish(self) {
        if let Some((task, d)) = self.state {
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{}", d.line(self.counter.load(Relaxed)));
        }
    }
}
