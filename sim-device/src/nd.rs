//! N-D shapes, as the seed's host programs have them: a host tensor
//! `[N_RANKS, 1, SIZE]` indexed per rank (`x[r]`), outputs written per rank
//! (`y[r] = ...`), and loads of rank ≥ 3 regions. Ops work on 2-D: the
//! leading dimensions collapse into rows (`[4, 1, 64]` is `[4, 64]`), and
//! an N-D region is accepted where it is one rectangle after collapsing.

use crate::device::{Device, Src};
use crate::error::{Error, Result};
use crate::tensor::{Shape2, Tensor, Tile};
use pld_proto::{Rma, Scalar};

pub use crate::device::collapse;

impl<T: Scalar> Tensor<T> {
    /// An N-D tensor of `dims` holding `data` (row-major).
    pub fn nd(name: &str, dims: &[u64], data: Vec<T>) -> Result<Tensor<T>> {
        let mut t = Tensor::new(name, collapse(dims), data)?;
        t.dims = dims.to_vec();
        Ok(t)
    }

    /// An N-D tensor of zeros.
    pub fn zeros_nd(name: &str, dims: &[u64]) -> Tensor<T> {
        let mut t = Tensor::zeros(name, collapse(dims));
        t.dims = dims.to_vec();
        t
    }

    /// The shape it was made with (N-D).
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    fn sub_dims(&self, call: &'static str, i: u64) -> Result<(Vec<u64>, usize, usize)> {
        let Some((&n, rest)) = self.dims.split_first().filter(|(_, r)| !r.is_empty()) else {
            return Err(Error::Usage(format!(
                "{call}: '{}' of shape {:?} has no leading dimension to index",
                self.name, self.dims
            )));
        };
        if i >= n {
            return Err(Error::Usage(format!(
                "{call}: index {i} is outside '{}' of shape {:?} (0 to {})",
                self.name,
                self.dims,
                n.saturating_sub(1)
            )));
        }
        let len: u64 = rest.iter().product();
        Ok((rest.to_vec(), (i * len) as usize, len as usize))
    }

    /// `x[i]`: the sub-tensor at index `i` of the leading dimension (a
    /// copy): `[N, 1, SIZE]` gives `[1, SIZE]`.
    pub fn index(&self, i: u64) -> Result<Tensor<T>> {
        let (dims, start, len) = self.sub_dims("index", i)?;
        let mut t = Tensor::new(
            &format!("{}[{i}]", self.name),
            collapse(&dims),
            self.data[start..start + len].to_vec(),
        )?;
        t.dims = dims;
        Ok(t)
    }

    /// `x[i] = value`: writes the sub-tensor at index `i`; `value` must
    /// have as many elements.
    pub fn set_index(&mut self, i: u64, value: &Tensor<T>) -> Result<()> {
        let (dims, start, len) = self.sub_dims("set_index", i)?;
        if value.data.len() != len {
            return Err(Error::Usage(format!(
                "set_index: '{}'[{i}] has shape {dims:?}, but '{}' has shape {:?}",
                self.name, value.name, value.dims
            )));
        }
        self.data[start..start + len].copy_from_slice(&value.data);
        Ok(())
    }
}

/// Maps an N-D region of `dims` to the 2-D `(offsets, shape)` of the
/// collapsed view, if it is one rectangle there: the last dimension gives
/// the columns; of the leading ones, those before the first partial one
/// must be 1 and those after it whole.
pub fn collapse_region(
    call: &'static str,
    name: &str,
    dims: &[u64],
    offsets: &[u64],
    shape: &[u64],
) -> Result<(Shape2, Shape2)> {
    let bad = || Error::NotRectangular {
        call,
        name: name.into(),
        dims: dims.to_vec(),
        offsets: offsets.to_vec(),
        shape: shape.to_vec(),
    };
    if dims.is_empty() || offsets.len() != dims.len() || shape.len() != dims.len() {
        return Err(bad());
    }
    let n = dims.len() - 1;
    let (lead, lead_off, lead_shape) = (&dims[..n], &offsets[..n], &shape[..n]);
    // Which leading dims span several rows: at most the first that is
    // neither 1 nor trailed only by whole dims.
    let first_multi = lead_shape.iter().position(|s| *s != 1).unwrap_or(n);
    let whole_after = (first_multi + 1..n).all(|i| lead_shape[i] == lead[i] && lead_off[i] == 0);
    if !whole_after {
        return Err(bad());
    }
    // Row offset: the row-major index of the region's first row.
    let row = lead_off
        .iter()
        .zip(lead)
        .try_fold(0u64, |acc, (o, d)| acc.checked_mul(*d)?.checked_add(*o))
        .ok_or_else(bad)?;
    let rows = lead_shape
        .iter()
        .try_fold(1u64, |a, s| a.checked_mul(*s))
        .ok_or_else(bad)?;
    Ok(([row, offsets[n]], [rows, shape[n]]))
}

impl<R: Rma> Device<R> {
    /// `pl.load` of an N-D region (`offsets` and `shape` with one entry
    /// per dimension of `dims`, the source's N-D shape).
    pub async fn load_nd<'a, T: Scalar>(
        &self,
        src: impl Into<Src<'a, T>>,
        dims: &[u64],
        offsets: &[u64],
        shape: &[u64],
    ) -> Result<Tile<T>> {
        let src = src.into();
        let name = match &src {
            Src::Tensor(t) => t.name().to_string(),
            Src::Window(w) => w.name().to_string(),
        };
        let (o, s) = collapse_region("load", &name, dims, offsets, shape)?;
        self.load(src, o, s).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_tensor_is_indexed_per_rank_like_the_seeds_x_r() {
        let mut x = Tensor::<i32>::nd("x", &[3, 1, 4], (0..12).collect()).unwrap();
        assert_eq!(x.shape(), [3, 4]);
        let x1 = x.index(1).unwrap();
        assert_eq!(
            (x1.dims(), x1.shape(), x1.data()),
            (&[1u64, 4][..], [1, 4], &[4, 5, 6, 7][..])
        );
        x.set_index(2, &Tensor::new("v", [1, 4], vec![9; 4]).unwrap())
            .unwrap();
        assert_eq!(&x.data()[8..], &[9, 9, 9, 9]);
        let e = x.index(3).unwrap_err().to_string();
        assert!(
            e.contains("index 3 is outside 'x' of shape [3, 1, 4]"),
            "{e}"
        );
        let e = x.set_index(0, &Tensor::zeros("w", [1, 3])).unwrap_err();
        assert!(e.to_string().contains("has shape [1, 4]"), "{e}");
    }

    #[test]
    fn an_n_d_region_collapses_only_where_it_is_one_rectangle() {
        // [2, 3, 8]: rows are (i, j) pairs.
        let d = [2, 3, 8];
        assert_eq!(
            collapse_region("load", "x", &d, &[1, 0, 2], &[1, 3, 4]).unwrap(),
            ([3, 2], [3, 4])
        );
        assert_eq!(
            collapse_region("load", "x", &d, &[0, 1, 0], &[1, 2, 8]).unwrap(),
            ([1, 0], [2, 8])
        );
        assert_eq!(
            collapse_region("load", "x", &d, &[0, 0, 0], &[2, 3, 8]).unwrap(),
            ([0, 0], [6, 8])
        );
        // Two rows of i, but only part of j: not one rectangle.
        let e = collapse_region("load", "x", &d, &[0, 1, 0], &[2, 2, 8]).unwrap_err();
        assert!(e.to_string().contains("not one 2-D rectangle"), "{e}");
        assert_eq!(collapse(&[64]), [1, 64]);
        assert_eq!(collapse(&[4, 1, 64]), [4, 64]);
    }
}
