//! `--checked`: after the kernels end, every rank's race reports, each
//! printed once, fail the run (exit non-zero) — whatever the goldens say,
//! since a race makes the result a matter of timing.

use crate::error::{Error, Result};
use pld_server::Rank;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Fails with every race the ranks reported (sorted and deduplicated, so
/// that two runs of one program print the same), or passes.
pub fn verdict(ranks: &[Arc<Rank>]) -> Result<()> {
    let reports: BTreeSet<String> = ranks.iter().flat_map(|r| r.race_reports()).collect();
    if reports.is_empty() {
        return Ok(());
    }
    Err(Error::Races {
        reports: reports.into_iter().collect(),
    })
}
