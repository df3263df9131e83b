//! [`ChangeBoard`]: how a `wait` on a window cell learns that the cell may
//! have changed.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::time::Instant;

/// What an embedder runs after every change, besides waking `until`.
pub type ChangeHook = Box<dyn Fn() + Send + Sync>;

/// Wakes tasks that `wait` on window cells whenever a window byte may have
/// changed. Writers pay one atomic load when nobody waits.
#[derive(Default)]
pub struct ChangeBoard {
    notify: tokio::sync::Notify,
    waiters: AtomicUsize,
    hook: OnceLock<ChangeHook>,
}

impl std::fmt::Debug for ChangeBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeBoard")
            .field("waiters", &self.waiters)
            .field("hook", &self.hook.get().is_some())
            .finish()
    }
}

impl ChangeBoard {
    /// Called after every write to a window.
    pub fn changed(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.notify.notify_waiters();
        }
        if let Some(hook) = self.hook.get() {
            hook();
        }
    }

    /// Runs `hook` after every change from now on — for a waiter that
    /// sleeps outside tokio (pld-shmem's futex doorbell, which PEs of one
    /// host also ring). Set once; false if a hook was already set.
    pub fn on_change(&self, hook: ChangeHook) -> bool {
        self.hook.set(hook).is_ok()
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
