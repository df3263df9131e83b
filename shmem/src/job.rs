//! The job as this process holds it: the PE ([`Pe`]) and what the program
//! made beside it — its teams, its contexts, the barriers of the active
//! sets it used. One static, made by `shmem_init`; the C entry points
//! reach it through [`pe`] and [`job`], and everything below them takes
//! the handle it is given (a `&Pe`, a `&Team`), never this static.

use crate::ctx::Contexts;
use crate::fatal::{fatal, is_fatal};
use crate::pe::Pe;
use crate::team::sync::SyncArea;
use crate::team::{self, Team, Teams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// An active set of the 1.4 collectives, with its `pSync` array's address.
pub(crate) type ActiveSet = (usize, i32, i32, i32);

/// The job.
pub(crate) struct Job {
    pe: Pe,
    /// The teams this PE belongs to.
    teams: team::Registry,
    /// `SHMEM_TEAM_WORLD`, which no call destroys: every barrier and
    /// world collective takes it without the registry's lock.
    world_team: OnceLock<Arc<Team>>,
    /// The contexts the program created.
    contexts: Mutex<Contexts>,
    /// Per active set and `pSync` array, its barrier.
    active_sets: Mutex<HashMap<ActiveSet, Arc<SyncArea>>>,
}

static JOB: OnceLock<Job> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The job, for the call `call`; fatal before `shmem_init`, and after
/// `shmem_finalize` (which must be the last call: its links are closed),
/// whichever path the call would take.
pub(crate) fn job(call: &'static str) -> &'static Job {
    let j = job_query(call);
    if j.pe.is_finalized() && call != "shmem_finalize" {
        fatal(format!(
            "{call} called after shmem_finalize, which must be the last OpenSHMEM call"
        ));
    }
    j
}

/// The PE, for the call `call` (as [`job`]).
pub(crate) fn pe(call: &'static str) -> &'static Pe {
    &job(call).pe
}

fn job_query(call: &'static str) -> &'static Job {
    match JOB.get() {
        Some(j) => j,
        None => fatal(format!("{call} called before shmem_init")),
    }
}

/// The PE, for a query of its constants (`shmem_my_pe`, `shmem_n_pes`),
/// which programs also make after `shmem_finalize`; fatal before
/// `shmem_init`.
pub(crate) fn pe_query(call: &'static str) -> &'static Pe {
    &job_query(call).pe
}

/// Starts the PE and its teams (idempotent: a second `shmem_init` is a
/// no-op).
pub(crate) fn init() -> &'static Pe {
    if let Some(j) = JOB.get() {
        return &j.pe;
    }
    let pe = match crate::pe::start() {
        Ok(p) => p,
        Err(e) => fatal(format!("shmem_init: {e:#}")),
    };
    crate::fatal::set_pe(pe.rank().rank());
    let _ = JOB.set(Job {
        pe,
        teams: Mutex::default(),
        world_team: OnceLock::new(),
        contexts: Mutex::default(),
        active_sets: Mutex::default(),
    });
    let j = job("shmem_init");
    *j.teams() = Teams::start(&j.pe, j.pe.shared().to_vec());
    if let Some(world) = j.teams().get(team::WORLD) {
        let _ = j.world_team.set(world);
    }
    // SAFETY: registers a plain `extern "C" fn()`.
    unsafe { libc::atexit(at_exit) };
    &j.pe
}

/// Runs when the program exits — OpenSHMEM 1.0 programs return from `main`
/// without `shmem_finalize`, and a fatal error exits: what this PE issued
/// is completed (unless an error is why it exits) and its links are
/// closed in order, so that peers receive everything it sent, down to its
/// last barrier signal, and then see it leave.
extern "C" fn at_exit() {
    let Some(j) = JOB.get() else { return };
    let p = &j.pe;
    if p.mark_finalized() {
        return;
    }
    // On a thread of its own: glibc has destroyed the exiting thread's
    // thread-locals (the runtime's context among them) before it runs
    // exit handlers.
    let closing = std::thread::spawn(|| {
        if !is_fatal() {
            let _ = p.block(p.rank().quiet_within(p.sync_timeout()));
        }
        let races = crate::races::report_races(p);
        p.block(p.rank().shutdown());
        races
    });
    if closing.join().unwrap_or(0) > 0 && !is_fatal() {
        // SAFETY: _exit ends the process now, with the status that says
        // the run raced (exit handlers cannot call exit again).
        unsafe { libc::_exit(1) }
    }
}

impl Job {
    /// The PE.
    pub(crate) fn pe(&self) -> &Pe {
        &self.pe
    }

    /// The teams this PE belongs to.
    pub(crate) fn teams(&self) -> MutexGuard<'_, Teams> {
        lock(&self.teams)
    }

    /// The teams' registry, for a split.
    pub(crate) fn registry(&self) -> &team::Registry {
        &self.teams
    }

    /// The team of handle `team` for `call`; fatal for an invalid handle.
    pub(crate) fn team(&self, call: &'static str, team: usize) -> Arc<Team> {
        if let Some(world) = self.world_team.get().filter(|_| team == team::WORLD) {
            return world.clone();
        }
        self.teams().get(team).unwrap_or_else(|| {
            fatal(format!(
                "{call}: {team:#x} is not a team of this PE (SHMEM_TEAM_INVALID, destroyed, or not a team handle)"
            ))
        })
    }

    /// The contexts the program created.
    pub(crate) fn contexts(&self) -> MutexGuard<'_, Contexts> {
        lock(&self.contexts)
    }

    /// The barrier of an active set over its `pSync` cells, made on first
    /// use: the same set and array keep their barrier's epochs.
    pub(crate) fn active_sync(
        &self,
        key: ActiveSet,
        make: impl FnOnce() -> SyncArea,
    ) -> Arc<SyncArea> {
        lock(&self.active_sets)
            .entry(key)
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }

    /// Ends the PE: quiet, a last barrier, then the rank closes its links
    /// so that peers see it leave. Idempotent.
    pub(crate) fn finalize(&self) {
        let p = &self.pe;
        if p.mark_finalized() {
            return;
        }
        p.quiet("shmem_finalize");
        p.run("shmem_finalize", p.rank().barrier());
        let races = crate::races::report_races(p);
        if let (Some(path), Some(t)) = (p.trace_path(), p.rank().trace())
            && let Err(e) = std::fs::write(path, t.to_json())
        {
            crate::say::line(format_args!(
                "PE {}: could not write its trace to {}: {e}",
                p.rank().rank(),
                path.display()
            ));
        }
        p.block(p.rank().shutdown());
        if races > 0 {
            fatal(format!(
                "--checked: {races} races in this PE's symmetric memory, reported above"
            ));
        }
    }
}
