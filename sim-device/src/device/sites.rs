//! The window views a launch's kernels made, so that a byte range of a
//! window (a checked-mode race report) can be named as the kernel wrote
//! it: the tensor, its rows and columns, and its shape.

use pld_proto::lock::Locked;
use std::ops::Range;
use std::sync::Mutex;

/// One view: `name`, `[rows, cols]` elements of `elem` bytes at byte
/// `base` of `window`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    name: String,
    window: String,
    base: u64,
    shape: [u64; 2],
    elem: u64,
}

/// Every distinct view (the same on every rank: allocations are symmetric).
#[derive(Debug, Default)]
pub struct Sites {
    views: Mutex<Vec<View>>,
}

impl Sites {
    pub(crate) fn record(&self, name: &str, window: &str, base: u64, shape: [u64; 2], elem: u64) {
        let v = View {
            name: name.into(),
            window: window.into(),
            base,
            shape,
            elem,
        };
        let mut views = self.views.locked();
        if !views.contains(&v) {
            views.push(v);
        }
    }

    /// `bytes` of `window` as the views that cover them name them:
    /// `data[0, 0:64] of [1, 64]` (rows and columns the range touches).
    pub fn name(&self, window: &str, bytes: &Range<u64>) -> Vec<String> {
        let views = self.views.locked();
        views
            .iter()
            .filter(|v| v.window == window && v.elem > 0 && v.shape[1] > 0)
            .filter_map(|v| {
                let end = v.base + v.shape[0] * v.shape[1] * v.elem;
                let (s, e) = (bytes.start.max(v.base), bytes.end.min(end));
                if s >= e {
                    return None;
                }
                let (first, last) = ((s - v.base) / v.elem, (e - v.base).div_ceil(v.elem) - 1);
                let cols = v.shape[1];
                let (r0, r1) = (first / cols, last / cols);
                let (c0, c1) = if r0 == r1 {
                    (first % cols, last % cols + 1)
                } else {
                    (0, cols)
                };
                let rows = if r0 == r1 {
                    r0.to_string()
                } else {
                    format!("{r0}:{}", r1 + 1)
                };
                Some(format!(
                    "{}[{rows}, {c0}:{c1}] of [{}, {}]",
                    v.name, v.shape[0], v.shape[1]
                ))
            })
            .collect()
    }
}
