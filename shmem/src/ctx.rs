//! Communication contexts as the job keeps them: what a created context
//! owns (its team, the handles of the ops issued on it, its fetches that
//! land at its quiet) and the registry of this PE's contexts by handle.
//! The C entry points and the context current on a thread are in
//! `capi::ctx`.

use crate::pe::Deferred;
use crate::team::Team;
use pld_server::OpHandle;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// `SHMEM_CTX_INVALID`'s handle (shmem.h defines the same numbers).
pub const INVALID: usize = 0;
/// `SHMEM_CTX_DEFAULT`'s handle.
pub const DEFAULT: usize = 1;

/// A created context.
pub(crate) struct Ctx {
    team: Arc<Team>,
    /// Ops issued on it and not yet known complete.
    issued: Mutex<Vec<Issued>>,
    /// Its fetches that land at its quiet.
    deferred: Mutex<Vec<Deferred>>,
}

/// An op's handle, whatever it resolves with.
pub(crate) enum Issued {
    /// A put, add or signal.
    Unit(OpHandle<()>),
    /// A cell op whose value the program does not take.
    Value(OpHandle<i64>),
}

impl From<OpHandle<()>> for Issued {
    fn from(h: OpHandle<()>) -> Issued {
        Issued::Unit(h)
    }
}

impl From<OpHandle<i64>> for Issued {
    fn from(h: OpHandle<i64>) -> Issued {
        Issued::Value(h)
    }
}

impl Issued {
    /// Leaves the op to the PE's quiet.
    pub(crate) fn detach(self) -> pld_server::Result<()> {
        match self {
            Issued::Unit(h) => h.detach(),
            Issued::Value(h) => h.detach(),
        }
    }

    /// Waits for the op.
    pub(crate) async fn wait(self) -> pld_server::Result<()> {
        match self {
            Issued::Unit(h) => h.wait().await,
            Issued::Value(h) => h.wait().await.map(drop),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ctx {
    /// The team the context was made on.
    pub(crate) fn team(&self) -> &Arc<Team> {
        &self.team
    }

    /// Keeps an op's handle for the context's quiet.
    pub(crate) fn issue(&self, h: Issued) {
        lock(&self.issued).push(h);
    }

    /// Keeps a fetch for the context's quiet.
    pub(crate) fn defer(&self, d: Deferred) {
        lock(&self.deferred).push(d);
    }

    /// What the context's quiet waits for, taken.
    pub(crate) fn take_issued(&self) -> Vec<Issued> {
        std::mem::take(&mut *lock(&self.issued))
    }

    /// The fetches the context's quiet lands, taken.
    pub(crate) fn take_deferred(&self) -> Vec<Deferred> {
        std::mem::take(&mut *lock(&self.deferred))
    }
}

/// The contexts this PE created, by handle.
#[derive(Default)]
pub(crate) struct Contexts {
    map: HashMap<usize, Arc<Ctx>>,
    next: usize,
}

impl Contexts {
    /// The context of handle `h`, if it is one of this PE's.
    pub(crate) fn get(&self, h: usize) -> Option<Arc<Ctx>> {
        self.map.get(&h).cloned()
    }

    /// A new context on `team`; its handle.
    pub(crate) fn create(&mut self, team: Arc<Team>) -> usize {
        self.next = self.next.max(DEFAULT + 1);
        let id = self.next;
        self.next += 1;
        self.map.insert(
            id,
            Arc::new(Ctx {
                team,
                issued: Mutex::default(),
                deferred: Mutex::default(),
            }),
        );
        id
    }

    /// Forgets context `h`.
    pub(crate) fn remove(&mut self, h: usize) {
        self.map.remove(&h);
    }
}
