//! Checked mode on the owner's side: this rank's own accesses to its
//! windows, its waits and its barriers feed the detector (`crate::checked`).

use super::{Rank, WindowId};
use crate::error::{AccessError, Error, Result};
use pld_proto::checked::AccessKind;
use pld_proto::{Dtype, OpKind};
use std::ops::Range;

impl Rank {
    /// Checked mode: every race reported in this rank's windows, each once,
    /// rendered (both accesses, the bytes, the missing ordering and the
    /// catalog's fix where it applies). Empty when checked mode is off.
    pub fn race_reports(&self) -> Vec<String> {
        self.races().iter().map(ToString::to_string).collect()
    }

    /// Checked mode: the races reported in this rank's windows, as data
    /// (a front end names their bytes its own way).
    pub fn races(&self) -> Vec<pld_proto::checked::Race> {
        self.state
            .checked()
            .as_ref()
            .map(|c| c.reports())
            .unwrap_or_default()
    }

    /// Records this rank's own `kind` access to `bytes` of window `win`; in
    /// strict mode a racing one fails before it is applied. A write also
    /// forgets the notifies that explained the signal cells it overwrote.
    pub(super) fn check_local(
        &self,
        op: OpKind,
        win: WindowId,
        bytes: &[Range<u64>],
        kind: AccessKind,
    ) -> Result<()> {
        let Some(c) = self.state.checked() else {
            return Ok(());
        };
        if kind.writes() {
            for b in bytes {
                c.overwrote_cells(win.0, b.clone());
            }
        }
        let result = c.access(win.0, bytes, kind, None);
        self.state.stats().set_checked(c.counters());
        result.map_err(|report| Error::Access {
            op,
            rank: self.rank(),
            error: AccessError::Race { report },
        })
    }

    /// This rank's own notify of its signal cell at `offset`: recorded as
    /// the atomic it is (without forgetting the notifies before it, as a
    /// store would: it is one of them).
    pub(super) fn check_local_notify(
        &self,
        op: OpKind,
        win: WindowId,
        offset: u64,
        notify: pld_proto::NotifyOp,
    ) -> Result<()> {
        let (Some(c), Some(kind)) = (self.state.checked(), AccessKind::of_notify(notify)) else {
            return Ok(());
        };
        let cell = offset..offset + 4;
        let result = c.access(win.0, std::slice::from_ref(&cell), kind, None);
        self.state.stats().set_checked(c.counters());
        result.map_err(|report| Error::Access {
            op,
            rank: self.rank(),
            error: AccessError::Race { report },
        })
    }

    /// This rank's own fetching atomic on its cell: recorded, and applied
    /// under the detector's lock (a release, then an acquire of the cell).
    pub(super) fn local_atomic(
        &self,
        op: OpKind,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        kind: AccessKind,
        apply: impl FnOnce() -> std::result::Result<i64, AccessError>,
    ) -> std::result::Result<i64, AccessError> {
        let Some(c) = self.state.checked() else {
            return apply();
        };
        let bytes = offset..offset + dtype.size() as u64;
        if let Err(Error::Access { error, .. }) =
            self.check_local(op, win, std::slice::from_ref(&bytes), kind)
        {
            return Err(error);
        }
        c.atomic(win.0, offset, None, apply).map(|(v, _)| v)
    }
}
