//! What `quiet` asks of a link: a ticket covering every op issued so far,
//! a wait for the ops below it, and the report of those still outstanding.

use super::Link;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::time::Instant;

impl Link {
    /// A ticket covering every op issued to this peer so far.
    pub fn ticket(&self) -> u64 {
        self.ops().next_id()
    }

    /// Whether nothing is queued or outstanding: a quiet has nothing to
    /// wait for here.
    pub fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.ops().outstanding() == 0
    }

    /// Waits until every op below `ticket` has completed, or `deadline`.
    /// Returns whether they all completed.
    pub async fn wait_done_before(&self, ticket: u64, deadline: Instant) -> bool {
        // Most links of a quiet (or a barrier's) have nothing outstanding.
        if self.ops().done_before(ticket) {
            return true;
        }
        self.quiet_waiters.fetch_add(1, Ordering::AcqRel);
        let _dec = Decrement(&self.quiet_waiters);
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ops().done_before(ticket) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.ops().done_before(ticket);
            }
        }
    }

    /// What is still outstanding below `ticket`, for a diagnostic:
    /// `rank 1: 2 ops (put #7 for 3.0s, get #9 for 2.9s)`.
    pub fn report_before(&self, ticket: u64) -> Option<String> {
        let pending = self.ops().pending_before(ticket);
        if pending.is_empty() {
            return None;
        }
        let now = std::time::Instant::now();
        let mut shown: Vec<String> = pending
            .iter()
            .take(4)
            .map(|(id, kind, at)| format!("{kind} #{id} for {:.1?}", now.duration_since(*at)))
            .collect();
        if pending.len() > shown.len() {
            shown.push(format!("{} more", pending.len() - shown.len()));
        }
        let state = match self.lost.get() {
            Some(r) => format!(", link lost: {r}"),
            None => String::new(),
        };
        Some(format!(
            "rank {}: {} op{} ({}){state}",
            self.peer,
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            shown.join(", ")
        ))
    }
}

struct Decrement<'a>(&'a AtomicUsize);
impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
