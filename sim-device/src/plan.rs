//! `--compile-only`: the kernel runs against a [`Planner`] instead of a
//! rank — an [`Rma`] that sends nothing and records, per rank, every
//! message the kernel would send (local accesses of a rank's own window
//! are not messages). Reads return zeros and every wait is satisfied at
//! once, so a kernel whose control flow depends on data it reads plans the
//! path that zeros take; the plan is printed, the goldens are not checked.

use bytes::Bytes;
use pld_proto::lock::Locked;
use pld_proto::region::{Chunking, Transfer};
use pld_proto::{CellOp, Cmp, Dtype, NotifyOp, Rma};
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// Why a planned op failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A window the program did not declare.
    #[error("window '{name}' does not exist; the windows are {have:?}")]
    NoWindow {
        /// The name asked for.
        name: String,
        /// The program's windows.
        have: Vec<String>,
    },
}

impl pld_proto::rma::Reason for PlanError {
    fn reason(&self) -> &str {
        match self {
            PlanError::NoWindow { .. } => "NO_SUCH_WINDOW",
        }
    }
}

/// One rank's planner: records what its kernel would send.
#[derive(Debug)]
pub struct Planner {
    rank: u32,
    nranks: u32,
    windows: Vec<String>,
    sent: Arc<Mutex<Vec<String>>>,
}

impl Planner {
    /// The planner of `rank` of `nranks`, with the program's windows.
    pub fn new(rank: u32, nranks: u32, windows: Vec<String>) -> Planner {
        Planner {
            rank,
            nranks,
            windows,
            sent: Arc::default(),
        }
    }

    /// The messages recorded so far, one line each.
    pub fn messages(&self) -> Vec<String> {
        self.sent.locked().clone()
    }

    fn record(&self, peer: u32, win: usize, what: String) {
        if peer != self.rank {
            let w = self.windows.get(win).map_or("?", String::as_str);
            self.sent
                .locked()
                .push(format!("{what} -> rank {peer}, window '{w}'"));
        }
    }
}

fn region(t: &Transfer, chunking: Chunking) -> String {
    let mut s = format!(
        "[{}, {}] {} at element {}",
        t.shape.rows, t.shape.cols, t.dtype, t.dst.offset
    );
    if let (Some(r), Some(c)) = (chunking.chunk_rows, chunking.chunk_cols) {
        let _ = write!(s, " in {r}x{c} chunks");
        if chunking.pipeline {
            s.push_str(", pipelined");
        }
    }
    s
}

impl Rma for Planner {
    type Error = PlanError;
    type Window = usize;

    fn rank(&self) -> u32 {
        self.rank
    }
    fn nranks(&self) -> u32 {
        self.nranks
    }
    fn window(&self, name: &str) -> Result<usize, PlanError> {
        self.windows
            .iter()
            .position(|w| w == name)
            .ok_or_else(|| PlanError::NoWindow {
                name: name.into(),
                have: self.windows.clone(),
            })
    }
    async fn put(&self, peer: u32, win: usize, offset: u64, data: &[u8]) -> Result<(), PlanError> {
        self.record(peer, win, format!("put {} bytes at +{offset}", data.len()));
        Ok(())
    }
    async fn get(&self, peer: u32, win: usize, offset: u64, len: u64) -> Result<Bytes, PlanError> {
        self.record(peer, win, format!("get {len} bytes at +{offset}"));
        Ok(Bytes::from(vec![0u8; len as usize]))
    }
    async fn atomic_add(
        &self,
        peer: u32,
        win: usize,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<(), PlanError> {
        let n = operands.len() / dtype.size().max(1);
        self.record(peer, win, format!("atomic_add {n} {dtype} at +{offset}"));
        Ok(())
    }
    async fn fetch_add(
        &self,
        peer: u32,
        win: usize,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64, PlanError> {
        self.record(
            peer,
            win,
            format!("fetch_add {value} ({dtype}) at +{offset}"),
        );
        Ok(0)
    }
    async fn compare_swap(
        &self,
        peer: u32,
        win: usize,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64, PlanError> {
        let what = format!("compare_swap {expected} -> {desired} ({dtype}) at +{offset}");
        self.record(peer, win, what);
        Ok(expected)
    }
    async fn cell_op(
        &self,
        peer: u32,
        win: usize,
        offset: u64,
        dtype: Dtype,
        op: CellOp,
    ) -> Result<i64, PlanError> {
        self.record(
            peer,
            win,
            format!("{} {op:?} ({dtype}) at +{offset}", op.kind()),
        );
        Ok(0)
    }
    async fn put_signal(
        &self,
        peer: u32,
        (win, offset): (usize, u64),
        data: &[u8],
        (_, signal_offset): (usize, u64),
        signal: u64,
        op: NotifyOp,
    ) -> Result<(), PlanError> {
        let what = format!(
            "put_signal {} bytes at +{offset}, then {op:?} {signal} at +{signal_offset}",
            data.len()
        );
        self.record(peer, win, what);
        Ok(())
    }
    async fn notify(
        &self,
        peer: u32,
        win: usize,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<(), PlanError> {
        self.record(peer, win, format!("notify {op:?} {value} at +{offset}"));
        Ok(())
    }
    async fn wait(
        &self,
        _win: usize,
        _offset: u64,
        _cmp: Cmp,
        expected: i32,
    ) -> Result<i32, PlanError> {
        Ok(expected)
    }
    async fn test(
        &self,
        _win: usize,
        _offset: u64,
        _cmp: Cmp,
        _expected: i32,
    ) -> Result<bool, PlanError> {
        Ok(true)
    }
    async fn barrier(&self) -> Result<(), PlanError> {
        Ok(())
    }
    async fn quiet(&self) -> Result<(), PlanError> {
        Ok(())
    }
    async fn quiet_within(&self, _timeout: std::time::Duration) -> Result<(), PlanError> {
        Ok(())
    }
    fn fence(&self, _peer: u32) -> Result<(), PlanError> {
        Ok(())
    }
    async fn put_region(
        &self,
        peer: u32,
        win: usize,
        t: &Transfer,
        _src: &[u8],
        chunking: Chunking,
    ) -> Result<(), PlanError> {
        self.record(peer, win, format!("put {}", region(t, chunking)));
        Ok(())
    }
    async fn atomic_add_region(
        &self,
        peer: u32,
        win: usize,
        t: &Transfer,
        _src: &[u8],
        chunking: Chunking,
    ) -> Result<(), PlanError> {
        self.record(peer, win, format!("atomic_add {}", region(t, chunking)));
        Ok(())
    }
    async fn get_region(
        &self,
        peer: u32,
        win: usize,
        t: &Transfer,
        _dst: &mut [u8],
        chunking: Chunking,
    ) -> Result<(), PlanError> {
        let src = Transfer { dst: t.src, ..*t };
        self.record(peer, win, format!("get {}", region(&src, chunking)));
        Ok(())
    }
}
