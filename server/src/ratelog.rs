//! Log lines a stranger can trigger, at most once per interval each, with
//! a count of those left out — so that a flood of bad connections cannot
//! flood the log.

use pld_proto::lock::Locked;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One kind of log line, rate-limited. Clones share the limit.
#[derive(Debug, Clone)]
pub struct RateLimited(Arc<Mutex<State>>);

/// Log lines rate-limited per reason: each distinct reason (a different
/// TLS failure, a different refusal) once per interval. At most `KEYS`
/// reasons are remembered; a new one past that evicts the oldest.
#[derive(Debug, Clone)]
pub struct RateLimitedBy {
    every: Duration,
    keys: Arc<Mutex<Vec<(String, RateLimited)>>>,
}

const KEYS: usize = 32;

impl RateLimitedBy {
    /// At most one line per `every` for each reason.
    pub fn every(every: Duration) -> RateLimitedBy {
        RateLimitedBy {
            every,
            keys: Arc::default(),
        }
    }

    /// As [`RateLimited::admit`], for lines about `reason`.
    pub fn admit(&self, reason: &str) -> Option<String> {
        let limiter = {
            let mut keys = self.keys.locked();
            match keys.iter().position(|(k, _)| k == reason) {
                Some(i) => keys[i].1.clone(),
                None => {
                    if keys.len() >= KEYS {
                        keys.remove(0);
                    }
                    let l = RateLimited::every(self.every);
                    keys.push((reason.to_string(), l.clone()));
                    l
                }
            }
        };
        limiter.admit()
    }
}

#[derive(Debug)]
struct State {
    every: Duration,
    last: Option<Instant>,
    left_out: u64,
}

impl RateLimited {
    /// At most one line per `every`.
    pub fn every(every: Duration) -> RateLimited {
        RateLimited(Arc::new(Mutex::new(State {
            every,
            last: None,
            left_out: 0,
        })))
    }

    /// Whether to log now: `Some` with a note of how many lines were left
    /// out since the last one (empty if none), or `None` to stay quiet.
    pub fn admit(&self) -> Option<String> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<String> {
        let mut s = self.0.locked();
        if s.last.is_some_and(|t| now.duration_since(t) < s.every) {
            s.left_out += 1;
            return None;
        }
        s.last = Some(now);
        let note = match std::mem::take(&mut s.left_out) {
            0 => String::new(),
            n => format!(" ({n} more like it since the last report)"),
        };
        Some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_limit() {
        let r = RateLimitedBy::every(Duration::from_secs(60));
        assert_eq!(r.admit("no certificate").as_deref(), Some(""));
        assert_eq!(r.admit("unknown issuer").as_deref(), Some(""));
        assert_eq!(r.admit("no certificate"), None);
        assert_eq!(r.admit("unknown issuer"), None);
        for i in 0..KEYS {
            assert!(r.admit(&format!("reason {i}")).is_some());
        }
        // The oldest reasons were forgotten: logged again.
        assert!(r.admit("no certificate").is_some());
    }

    #[test]
    fn one_line_per_interval_then_a_count_of_the_rest() {
        let r = RateLimited::every(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(r.admit_at(t0).as_deref(), Some(""));
        for i in 1..=5 {
            assert_eq!(r.admit_at(t0 + Duration::from_millis(100 * i)), None);
        }
        let shared = r.clone();
        assert_eq!(
            shared.admit_at(t0 + Duration::from_millis(1000)).as_deref(),
            Some(" (5 more like it since the last report)")
        );
        assert_eq!(r.admit_at(t0 + Duration::from_millis(1500)), None);
    }
}
