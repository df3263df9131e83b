//! Deadlines from durations a user chose: `Instant::now() + d` panics when
//! `d` is absurd (a typo on a flag, a client's `timeout_ms = u64::MAX`), so
//! every user duration meets the clock here, saturating instead.

use std::time::Duration;
use tokio::time::Instant;

/// Far enough to be never, near enough for every clock to represent.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `now + d`, or a deadline a century away if that overflows.
pub(crate) fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(NEVER))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn absurd_durations_saturate_instead_of_panicking() {
        let far = after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(365 * 24 * 3600));
        let near = after(Duration::from_millis(5));
        assert!(near <= Instant::now() + Duration::from_millis(5));
    }
}
