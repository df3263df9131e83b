//! How a rank's result compares with its golden, and the deterministic
//! inputs the tutorial programs compute their goldens from.

use crate::error::Result;
use crate::tensor::{Shape2, Tensor};
use pld_proto::Scalar;

/// How a rank's result compares with its golden.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// The largest absolute difference, and where: (element, got, want).
    pub worst: Option<(usize, f64, f64)>,
    /// The largest absolute difference (NaN if any value is NaN).
    pub max_diff: f64,
    /// What counts as equal.
    pub tol: f64,
}

impl Check {
    /// `got` must equal `want` exactly.
    pub fn exact<T: Scalar>(got: &[T], want: &[T]) -> Check {
        Check::close(got, want, 0.0)
    }

    /// `|got − want| ≤ tol · max(1, |want|)` elementwise (allclose).
    pub fn close<T: Scalar>(got: &[T], want: &[T], tol: f64) -> Check {
        let mut c = Check {
            tol,
            ..Check::default()
        };
        if got.len() != want.len() {
            c.max_diff = f64::INFINITY;
            c.worst = Some((
                got.len().min(want.len()),
                got.len() as f64,
                want.len() as f64,
            ));
            return c;
        }
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (g, w) = (g.to_f64(), w.to_f64());
            let d = (g - w).abs() / w.abs().max(1.0);
            if d > c.max_diff || (d.is_nan() && !c.max_diff.is_nan()) {
                c.max_diff = d;
                c.worst = Some((i, g, w));
            }
        }
        c
    }

    /// Both must pass.
    pub fn and(self, other: Check) -> Check {
        if other.failed() && !self.failed() || other.max_diff > self.max_diff {
            other
        } else {
            self
        }
    }

    /// Whether the difference exceeds the tolerance (or is NaN).
    pub fn failed(&self) -> bool {
        self.max_diff.is_nan() || self.max_diff > self.tol
    }
}

/// Deterministic input of rank `rank`: small integers (exact in every
/// dtype), different on every rank and element.
pub fn input<T: Scalar>(name: &str, rank: u32, shape: Shape2) -> Tensor<T> {
    Tensor::from_fn(name, shape, |i| {
        T::from_f64(((rank as usize * 31 + i * 7) % 23) as f64 - 11.0)
    })
}

/// The host's N-D input `[nranks, rows, cols]` (the tutorial's
/// `torch.randn((N_RANKS, 1, SIZE))`, made deterministic): its index `r`
/// (`x[r]`) is rank r's [`input`].
pub fn input_nd<T: Scalar>(name: &str, nranks: u32, per_rank: Shape2) -> Tensor<T> {
    Tensor {
        name: name.into(),
        shape: [u64::from(nranks) * per_rank[0], per_rank[1]],
        dims: vec![u64::from(nranks), per_rank[0], per_rank[1]],
        data: (0..nranks)
            .flat_map(|r| input::<T>(name, r, per_rank).data)
            .collect(),
    }
}

/// The golden of an all-reduce: the elementwise sum of every `x[r]`.
pub fn sum_of_slices<T: Scalar>(x: &Tensor<T>) -> Result<Vec<T>> {
    let n = x.dims().first().copied().unwrap_or(0);
    let mut acc = x.index(0)?.data;
    for r in 1..n {
        for (a, v) in acc.iter_mut().zip(x.index(r)?.data) {
            *a = a.add(v);
        }
    }
    Ok(acc)
}
