//! Communication contexts: `shmem_ctx_create`, `shmem_team_create_ctx`,
//! `destroy`, `get_team`, `fence`, `quiet`, and the context that every
//! `shmem_ctx_*` RMA, atomic and signal call runs in.
//!
//! Every context shares the PE's pld links (one per peer), so a link's
//! in-order application orders every context's ops to one peer: `fence`
//! holds for free. What a context owns is its completions: an op issued
//! on a created context keeps its handle in the context, and
//! `shmem_ctx_quiet` waits for those (and lands the context's deferred
//! fetches) — not for what other contexts issued. The default context is
//! the PE's own quiet. A context made on a team numbers PEs as the team
//! does.
//!
//! A `shmem_ctx_*` entry point runs its call with the context current on
//! the calling thread ([`with`]); the generic call bodies ask [`peer`],
//! [`issued`] and [`defer`] what the current context wants.

use crate::ctx::{Ctx, DEFAULT, INVALID, Issued};
use crate::fatal::fatal;
use crate::job::{Job, job, pe};
use crate::pe::{Deferred, Pe};
use crate::team;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static CURRENT: RefCell<Option<Arc<Ctx>>> = const { RefCell::new(None) };
}

/// The created context of handle `ctx`; `None` for the default one.
fn find(j: &Job, call: &'static str, ctx: usize) -> Option<Arc<Ctx>> {
    match ctx {
        DEFAULT => None,
        INVALID => fatal(format!("{call}: SHMEM_CTX_INVALID is not a context")),
        h => Some(j.contexts().get(h).unwrap_or_else(|| {
            fatal(format!(
                "{call}: {h:#x} is not a context of this PE (destroyed, or not a context handle)"
            ))
        })),
    }
}

/// Runs `f` with context `ctx` current on this thread.
pub(crate) fn with<R>(call: &'static str, ctx: usize, f: impl FnOnce() -> R) -> R {
    let Some(c) = find(job(call), call, ctx) else {
        return f();
    };
    struct Restore(Option<Arc<Ctx>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|cur| *cur.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(CURRENT.with(|cur| cur.borrow_mut().replace(c)));
    f()
}

fn current() -> Option<Arc<Ctx>> {
    CURRENT.with(|cur| cur.borrow().clone())
}

/// A PE number of the current context (its team's numbering) as a rank;
/// fatal if there is no such PE.
pub(crate) fn peer(p: &Pe, call: &'static str, pe_: i32) -> u32 {
    match current() {
        None => p.peer(call, pe_),
        Some(c) => c.team().pe(pe_).unwrap_or_else(|| {
            fatal(format!(
                "{call}: PE {pe_} is not in the context's team ({}, PEs 0..{})",
                c.team().name,
                c.team().members.len()
            ))
        }),
    }
}

/// Whether a created context is current: its ops then keep handles.
pub(crate) fn tracking() -> bool {
    CURRENT.with(|cur| cur.borrow().is_some())
}

/// An op issued in the current context, complete by its quiet: a created
/// context keeps the handle; the default one leaves it to the PE's quiet.
pub(crate) fn issued(call: &'static str, h: impl Into<Issued>) {
    let h = h.into();
    match current() {
        Some(c) => c.issue(h),
        None => {
            if let Err(e) = h.detach() {
                fatal(format!("{call}: {e}"));
            }
        }
    }
}

/// A fetch that lands at the current context's quiet.
pub(crate) fn defer(p: &Pe, d: Deferred) {
    match current() {
        Some(c) => c.defer(d),
        None => p.defer(d),
    }
}

/// `shmem_ctx_create`: a context on the world team.
///
/// # Safety
/// `ctx` is valid for a `shmem_ctx_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_ctx_create(options: i64, ctx: *mut usize) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { shmem_team_create_ctx(team::WORLD, options, ctx) }
}

/// `shmem_team_create_ctx`: a context whose PE numbers are the team's.
/// The options (serialized, private, nostore) promise less than pld
/// gives every context, so each is accepted.
///
/// # Safety
/// `ctx` is valid for a `shmem_ctx_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_create_ctx(team: usize, _options: i64, ctx: *mut usize) -> i32 {
    let call = "shmem_team_create_ctx";
    let j = job(call);
    let made = match team {
        0 => None,
        t => Some(j.contexts().create(j.team(call, t))),
    };
    if !ctx.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *ctx = made.unwrap_or(INVALID) };
    }
    if made.is_some() { 0 } else { -1 }
}

/// `shmem_ctx_destroy`: quiets the context, then forgets it.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_destroy(ctx: usize) {
    let call = "shmem_ctx_destroy";
    if ctx == DEFAULT {
        fatal(format!("{call}: SHMEM_CTX_DEFAULT cannot be destroyed"));
    }
    shmem_ctx_quiet_named(call, ctx);
    job(call).contexts().remove(ctx);
}

/// `shmem_ctx_get_team`: the team a context was made on.
///
/// # Safety
/// `team` is valid for a `shmem_team_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: usize, team: *mut usize) -> i32 {
    let call = "shmem_ctx_get_team";
    let id = match ctx {
        INVALID => None,
        DEFAULT => Some(team::WORLD),
        h => Some(find(job(call), call, h).map_or(team::WORLD, |c| c.team().id)),
    };
    if !team.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *team = id.unwrap_or(0) };
    }
    if id.is_some() { 0 } else { -1 }
}

/// `shmem_ctx_fence`: a link applies every context's ops to one peer in
/// issue order, so later ops already land after earlier ones.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_fence(ctx: usize) {
    let call = "shmem_ctx_fence";
    find(job(call), call, ctx);
    super::sync::fence(pe(call), call);
}

/// `shmem_ctx_quiet`: every op issued on the context is complete and its
/// fetches have landed.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_quiet(ctx: usize) {
    shmem_ctx_quiet_named("shmem_ctx_quiet", ctx);
}

fn shmem_ctx_quiet_named(call: &'static str, ctx: usize) {
    let p = pe(call);
    let Some(c) = find(job(call), call, ctx) else {
        p.quiet(call);
        return;
    };
    let issued = c.take_issued();
    let timeout = p.sync_timeout();
    for h in issued {
        // The timer is made inside the runtime (block_on enters it).
        match p.block(async { tokio::time::timeout(timeout, h.wait()).await }) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => fatal(format!("{call}: {e}")),
            Err(_) => fatal(format!(
                "{call}: an op of the context did not complete within {timeout:?}"
            )),
        }
    }
    p.land(call, c.take_deferred());
}
