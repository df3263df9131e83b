//! `--checked`: after the kernels end, every rank's race reports, each
//! printed once, fail the run (exit non-zero) — whatever the goldens say,
//! since a race makes the result a matter of timing. The bytes of each
//! report are named as the kernels wrote them (the tensor, its rows and
//! columns, its shape).

use crate::device::Symmetry;
use crate::error::{Error, Result};
use pld_proto::checked::Race;
use pld_server::Rank;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A report with its bytes named by the device's views:
/// `bytes 0..256 (data[0, 0:64] of [1, 64])`.
pub fn render(race: &Race, symmetry: &Symmetry) -> String {
    let text = race.to_string();
    let names = symmetry.sites.name(&race.window, &race.bytes);
    if names.is_empty() {
        return text;
    }
    let at = format!("bytes {}..{}", race.bytes.start, race.bytes.end);
    text.replacen(&at, &format!("{at} ({})", names.join(", ")), 1)
}

/// Every race the ranks reported, named, sorted and deduplicated (two runs
/// of one program print the same).
pub fn reports<'a>(ranks: impl IntoIterator<Item = &'a Rank>, symmetry: &Symmetry) -> Vec<String> {
    let all: BTreeSet<String> = ranks
        .into_iter()
        .flat_map(Rank::races)
        .map(|race| render(&race, symmetry))
        .collect();
    all.into_iter().collect()
}

/// Fails with every race the ranks reported, or passes.
pub fn verdict(ranks: &[Arc<Rank>], symmetry: &Symmetry) -> Result<()> {
    let reports = reports(ranks.iter().map(|r| &**r), symmetry);
    if reports.is_empty() {
        return Ok(());
    }
    Err(Error::Races { reports })
}
