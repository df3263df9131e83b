//! Whether a rank moves frames, and the spin progress of transports whose
//! sockets tokio drives: the data path only bumps a counter; the spinner
//! reads the clock.

/// Whether a rank moves frames, and a way to wait for the next one. The
/// data path only bumps a counter; the spinner reads the clock.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    frames: std::sync::atomic::AtomicU64,
    /// Set while the spinner sleeps, so that the next frame wakes it.
    asleep: std::sync::atomic::AtomicBool,
    woke: tokio::sync::Notify,
}

impl Activity {
    /// Records a frame sent or received.
    pub fn touch(&self) {
        self.touch_n(1);
    }

    /// Records `n` frames sent or received at once (none: nothing).
    pub fn touch_n(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if n == 0 {
            return;
        }
        self.frames.fetch_add(n, Relaxed);
        if self.asleep.load(Relaxed) && self.asleep.swap(false, Relaxed) {
            self.woke.notify_one();
        }
    }

    /// Keeps the runtime polling while frames moved within `idle`, and
    /// sleeps until the next frame otherwise: the spin progress of
    /// transports whose sockets tokio drives (QUIC). A yielding task makes
    /// the worker poll the reactor before running it again, so the thread
    /// never sleeps while it spins. Oversubscribed, it sleeps after
    /// [`PARK_AFTER`](crate::transport::spin::PARK_AFTER) quiet polls, as a
    /// spinning TCP socket does.
    pub async fn spin(&self, idle: std::time::Duration, oversubscribed: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut seen = self.frames.load(Relaxed);
        let mut since = std::time::Instant::now();
        let (mut polls, mut quiet_polls, mut moved) = (0u32, 0u32, false);
        let park_after = if oversubscribed {
            crate::transport::spin::PARK_AFTER
        } else {
            u32::MAX
        };
        loop {
            polls = polls.wrapping_add(1);
            let now = self.frames.load(Relaxed);
            if now != seen {
                (seen, quiet_polls, moved) = (now, 0, true);
            } else {
                quiet_polls += 1;
                // Nothing moves: let other ranks on these cores run (see
                // transport::spin).
                if quiet_polls >= 32 {
                    std::thread::yield_now();
                }
            }
            // The clock is read once per 64 polls.
            let mut sleep = quiet_polls > park_after;
            if polls % 64 == 0 {
                if moved {
                    (since, moved) = (std::time::Instant::now(), false);
                } else if since.elapsed() >= idle {
                    sleep = true;
                }
            }
            if sleep {
                self.asleep.store(true, Relaxed);
                // A frame between the check and the flag: don't sleep.
                if self.frames.load(Relaxed) == seen {
                    self.woke.notified().await;
                }
                self.asleep.store(false, Relaxed);
                (seen, since) = (self.frames.load(Relaxed), std::time::Instant::now());
                (quiet_polls, moved) = (0, false);
                continue;
            }
            tokio::task::yield_now().await;
        }
    }
}
