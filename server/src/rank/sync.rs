//! Synchronisation: `quiet`, `barrier`, `wait` and `test`. Every one has a
//! deadline, and at the deadline it fails with a report of what is missing
//! — the outstanding ops, the barrier's epoch, round and silent ranks, the
//! signal cell and its last value — naming the ranks that are dead or cut
//! off. The same report goes to the log.

use super::{Rank, WindowId};
use crate::error::{AccessError, Error, Result, unreachable_note};
use crate::peer::barrier::signal_header;
use crate::peer::link::{Handle, Issue, Link};
use crate::peer::{RankState, signal};
use pld_proto::Cmp;
use pld_proto::barrier::{Advance, join};
use pld_proto::v1::{PeerGet, header::Body};
use std::time::Duration;
use tokio::time::Instant;

/// How long a rank that is named in a report may take to answer a probe
/// before it is reported unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

impl Rank {
    /// Waits until every op this rank issued before the call has completed
    /// at its target, for at most the op timeout. If requests issued without
    /// a handle ([`Rank::put_nbi`]) failed since the last quiet, it then
    /// fails with the first of them and their number.
    pub async fn quiet(&self) -> Result<()> {
        self.quiet_within(self.state.config().op_timeout).await
    }

    /// [`Rank::quiet`] with an explicit deadline; on expiry the error lists
    /// the outstanding ops per peer.
    pub async fn quiet_within(&self, timeout: Duration) -> Result<()> {
        self.quiet_until(None, timeout).await?;
        match self.state.implicit().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits for every op issued before the call (a barrier's first step
    /// too); failed implicit requests stay for the next `quiet`.
    /// `deadline` None: `timeout` from now, read only if a link is busy.
    async fn quiet_until(&self, deadline: Option<Instant>, timeout: Duration) -> Result<()> {
        // Only links sent something since the last quiet can be busy; most
        // quiets (every barrier's) find none: no list of tickets or reports,
        // not even a look at the clock.
        let links = self.links.busy(self.state.touched());
        if links.is_empty() {
            return Ok(());
        }
        let deadline = deadline.unwrap_or_else(|| crate::deadline::after(timeout));
        let tickets: Vec<_> = links.iter().map(|l| (l, l.ticket())).collect();
        for link in &links {
            link.flush().await;
        }
        let mut late = Vec::new();
        for (link, ticket) in &tickets {
            if !link.wait_done_before(*ticket, deadline).await {
                late.push((*link, *ticket));
            }
        }
        let report: Vec<String> = late
            .iter()
            .filter_map(|(l, t)| l.report_before(*t))
            .collect();
        if report.is_empty() {
            return Ok(());
        }
        let peers: Vec<u32> = late.iter().map(|(l, _)| l.peer).collect();
        let e = Error::QuietTimeout {
            timeout,
            outstanding: report.join("; "),
            unreachable: self.unreachable(&peers).await,
        };
        tracing::error!(rank = self.rank(), "{e}");
        Err(e)
    }

    /// Waits until every rank has entered the barrier, for at most the sync
    /// timeout. Every put, atomic and notify this rank issued before it is
    /// applied at its target before any rank leaves.
    pub async fn barrier(&self) -> Result<()> {
        self.barrier_within(self.state.config().sync_timeout).await
    }

    /// [`Rank::barrier`] with an explicit deadline. At the deadline it fails
    /// with the epoch, the round, the ranks not heard from and those that
    /// are unreachable; the barrier then stays pending, and the next barrier
    /// call resumes it.
    pub async fn barrier_within(&self, timeout: Duration) -> Result<()> {
        let deadline = crate::deadline::after(timeout);
        // A barrier is quiet + dissemination: once this rank signals, its
        // earlier ops are applied, and nobody leaves before every rank signalled.
        self.quiet_until(Some(deadline), timeout).await?;
        let state = &self.state;
        let barrier = state.barrier();
        let entered = std::time::Instant::now();
        barrier.enter(entered, state.checked().map(|c| &**c));
        // Higher-ranked peers signal this rank on its links to them: those
        // readers spin for the signals until the barrier ends.
        let _listening = Listening::new(self);
        let mut out = Vec::new();
        loop {
            let woken = barrier.woken();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let progress = barrier.step(&mut out);
            for i in 0..out.len() {
                let s = out[i];
                // A peer that restarted: signal its new run, not the dead one.
                if state.members().rejoining(s.to) {
                    state.members().rejoined(s.to, deadline).await;
                }
                if let Some(Some(link)) = self.links.get(s.to) {
                    // A signal that cannot be sent fails the barrier now: this
                    // rank may already hold everything it waits for, and
                    // leaving would strand the peer that never hears from it.
                    if let Err(e) = send_signal(state, &link, s, deadline).await {
                        tracing::warn!(to = s.to, error = %e, "barrier signal not sent");
                        barrier.keep_unsent(out.drain(i..).collect());
                        return Err(Error::PeerLost {
                            rank: s.to,
                            reason: format!(
                                "barrier epoch {} on rank {} could not signal it in round {}: {e}",
                                s.epoch,
                                self.rank(),
                                s.round + 1
                            ),
                        });
                    }
                }
            }
            // The rank just signalled may be waiting on this very core: let
            // it run now rather than after this rank's spin
            // (docs/PERFORMANCE.md, "Barrier").
            if !out.is_empty() && state.config().progress.oversubscribed() {
                std::thread::yield_now();
            }
            out.clear();
            match progress {
                Advance::Done { epoch } => {
                    self.barrier_done(epoch, entered);
                    return Ok(());
                }
                Advance::Idle => return Ok(()),
                Advance::Waiting => {
                    if tokio::time::timeout_at(deadline, woken).await.is_err() {
                        // One last look: the message may have raced the deadline.
                        let (last, missing) = barrier.last_look(&mut out);
                        if let (Advance::Waiting, Some(missing)) = (last, missing) {
                            if let Some(t) = state.trace() {
                                t.barrier(missing.epoch, entered, false);
                            }
                            return Err(self.barrier_timeout(missing, timeout).await);
                        }
                        if let Advance::Done { epoch } = last {
                            self.barrier_done(epoch, entered);
                        }
                        debug_assert!(out.is_empty(), "the last round sends nothing");
                        return Ok(());
                    }
                }
            }
        }
    }

    /// A barrier entered at `entered` completed: on the timeline; in
    /// checked mode this rank acquires every rank's clock at entry.
    fn barrier_done(&self, epoch: u64, entered: std::time::Instant) {
        if let Some(t) = self.state.trace() {
            t.barrier(epoch, entered, true);
        }
        if let Some(c) = self.state.checked() {
            c.barrier_done(epoch);
            self.state.stats().set_checked(c.counters());
        }
    }

    /// Checked mode: a wait or test passed.
    fn waited(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) {
        if let Some(c) = self.state.checked() {
            c.waited(win.0, offset, cmp, expected);
        }
    }

    async fn barrier_timeout(&self, m: pld_proto::barrier::Missing, timeout: Duration) -> Error {
        // Probe every peer, not only those not heard from: a rank this one
        // waits for may itself be stuck on a dead one further along.
        let others: Vec<u32> = (0..self.nranks()).filter(|r| *r != self.rank()).collect();
        let unreachable = self.unreachable(&others).await;
        let hint = if unreachable.is_empty() {
            format!(
                "; rank{} {} answer{} but did not enter this barrier",
                if m.not_heard_from.len() == 1 { "" } else { "s" },
                join(&m.not_heard_from),
                if m.not_heard_from.len() == 1 { "s" } else { "" },
            )
        } else {
            unreachable_note(&unreachable)
        };
        let report = format!("{m} (timed out after {timeout:?}){hint}");
        tracing::error!(rank = self.rank(), "{report}");
        Error::BarrierTimeout {
            epoch: m.epoch,
            round: m.round + 1,
            waiting_for: m.waiting_for,
            not_heard_from: m.not_heard_from,
            unreachable,
            report,
        }
    }

    /// Whether this rank's int32 signal cell at `offset` satisfies
    /// `value cmp expected` now.
    pub fn test(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<bool> {
        let (w, _) = self.signal_cell("test", win, offset, cmp)?;
        let v = w.load_signal(offset).map_err(self.cell_refused("test"))?;
        let holds = cmp.holds(v, expected);
        if holds {
            self.waited(win, offset, cmp, expected);
        }
        Ok(holds)
    }

    /// Waits until this rank's int32 signal cell at `offset` satisfies
    /// `value cmp expected`, for at most the sync timeout; returns the value.
    pub async fn wait(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<i32> {
        self.wait_within(win, offset, cmp, expected, self.state.config().sync_timeout)
            .await
    }

    /// [`Rank::wait`] with an explicit timeout. At the deadline it fails
    /// naming the cell, the expected value and the last value seen.
    pub async fn wait_within(
        &self,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
        expected: i32,
        timeout: Duration,
    ) -> Result<i32> {
        let (w, _) = self.signal_cell("wait", win, offset, cmp)?;
        // What this rank queued may be what the cell waits for (a notify
        // that another rank answers): send it before sleeping.
        for link in self.links.all() {
            link.flush().await;
        }
        let deadline = crate::deadline::after(timeout);
        let traced = self.state.trace().map(|t| (t, std::time::Instant::now()));
        let mut last = 0;
        let held = self
            .state
            .windows()
            .board()
            .until(deadline, || {
                last = w.load_signal(offset).unwrap_or(last);
                cmp.holds(last, expected)
            })
            .await;
        if let Some((t, started)) = traced {
            let what = format!("signal cell {offset} of '{}' {cmp} {expected}", w.name());
            t.wait(&what, started, held);
        }
        if held {
            self.waited(win, offset, cmp, expected);
            return Ok(last);
        }
        let peers: Vec<u32> = (0..self.nranks()).filter(|r| *r != self.rank()).collect();
        let unreachable = self.unreachable(&peers).await;
        let report = format!(
            "wait on rank {} for signal cell {offset} of window '{}' to be {cmp} {expected} timed out after {timeout:?}; last value seen {last}{}",
            self.rank(),
            w.name(),
            unreachable_note(&unreachable)
        );
        tracing::error!(rank = self.rank(), "{report}");
        Err(Error::WaitTimeout {
            window: w.name().to_string(),
            offset,
            cmp,
            expected,
            last,
            unreachable,
            report,
        })
    }

    /// Waits until `ready()` holds or `timeout` passes; returns whether it
    /// held. `ready` is looked at again whenever a peer changes any window
    /// of this rank — for a program that waits on its own window memory by
    /// address (OpenSHMEM's `wait_until`), without spinning. What this rank
    /// queued is sent first: it may be what another rank answers.
    pub async fn watch(&self, timeout: Duration, ready: impl FnMut() -> bool) -> bool {
        for link in self.links.all() {
            link.flush().await;
        }
        let deadline = crate::deadline::after(timeout);
        self.state.windows().board().until(deadline, ready).await
    }

    /// Runs `hook` after every change a peer makes to any window of this
    /// rank (what wakes [`Rank::watch`]), on the thread that applied it:
    /// it must be quick. Set once; false if a hook was already set.
    pub fn on_window_change(&self, hook: crate::window::board::ChangeHook) -> bool {
        self.state.windows().board().on_change(hook)
    }

    fn signal_cell(
        &self,
        op: &'static str,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
    ) -> Result<(&crate::window::Window, usize)> {
        let w = self.local(win)?;
        if cmp == Cmp::Unspecified {
            return Err(self.cell_refused(op)(AccessError::InvalidCmp {
                value: cmp as i32,
            }));
        }
        let at = w.check_signal(offset).map_err(self.cell_refused(op))?;
        Ok((w, at))
    }

    fn cell_refused(&self, op: &'static str) -> impl Fn(AccessError) -> Error {
        let rank = self.rank();
        move |error| Error::CellAccess { op, rank, error }
    }

    /// Which of `peers` are dead or cut off, and why: a lost link, or no
    /// answer to a zero-length get within half a second.
    pub async fn unreachable(&self, peers: &[u32]) -> Vec<(u32, String)> {
        let mut probes = tokio::task::JoinSet::new();
        for &p in peers {
            let Some(Some(link)) = self.links.get(p) else {
                continue;
            };
            if let Some(why) = link.lost_reason() {
                probes.spawn(std::future::ready((p, Some(why.to_string()))));
                continue;
            }
            probes.spawn(async move {
                let probe = Body::Get(PeerGet {
                    window: 0,
                    offset: 0,
                    len: 0,
                    region: None,
                });
                let answer = tokio::time::timeout(PROBE_TIMEOUT, async {
                    let probe = Issue::body(probe, &[], Handle);
                    link.request(probe).await?.wait().await
                })
                .await;
                let why = match answer {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some(format!("no answer to a probe within {PROBE_TIMEOUT:?}")),
                };
                (p, why)
            });
        }
        let mut out = Vec::new();
        while let Some(Ok((p, why))) = probes.join_next().await {
            if let Some(why) = why {
                out.push((p, why));
            }
        }
        out.sort_by_key(|(p, _)| *p);
        out
    }
}

/// Sends barrier signal `s` to `link`'s peer: on the connection the lower
/// of the two ranks dialed, where there is one (see `peer::signal`); else
/// on the link. One frame, built once, for either way.
async fn send_signal(
    state: &RankState,
    link: &Link,
    s: pld_proto::barrier::Signal,
    deadline: Instant,
) -> Result<()> {
    if let Some(t) = state.trace() {
        t.signal(s.to, s.epoch, s.round, true);
    }
    let header = signal_header(&s, state.checked().map(|c| &**c));
    if signal::send_served(state, &header, s.to, link.epoch, deadline).await {
        return Ok(());
    }
    link.signal(&header).await
}

/// While a barrier runs, the readers of this rank's links to the
/// higher-ranked peers that signal it in some round spin for their
/// signals (which come on those links: see `peer::signal`), until it ends,
/// however it ends.
struct Listening<'a>(&'a Rank);

impl Listening<'_> {
    fn new(rank: &Rank) -> Listening<'_> {
        let on = Listening(rank);
        on.set(true);
        on
    }

    fn set(&self, on: bool) {
        let (me, n) = (self.0.rank(), self.0.nranks());
        for k in 0..pld_proto::barrier::rounds(n) {
            let p = pld_proto::barrier::signaller(me, n, k);
            if p > me {
                self.0.links.with(p, |link| link.expect_signals(on));
            }
        }
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}
