//! [`ChangeBoard`]: how a `wait` on a window cell learns that the cell may
//! have changed.

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::time::Instant;

/// Wakes tasks that `wait` on window cells whenever a window byte may have
/// changed. Writers pay one atomic load when nobody waits.
#[derive(Debug, Default)]
pub struct ChangeBoard {
    notify: tokio::sync::Notify,
    waiters: AtomicUsize,
}

impl ChangeBoard {
    /// Called after every write to a window.
    pub fn changed(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Waits until `ready()` holds or `deadline` passes; returns whether it
    /// held. `ready` is checked after every change and once at the deadline.
    pub async fn until(&self, deadline: Instant, mut ready: impl FnMut() -> bool) -> bool {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let held = loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready() {
                break true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break ready();
            }
        };
        self.waiters.fetch_sub(1, Ordering::AcqRel);
        held
    }
}
