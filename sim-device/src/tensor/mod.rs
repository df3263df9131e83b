//! The three kinds of data a kernel names: [`Tensor`] (local global memory,
//! no peer can reach it), [`DistributedTensor`] (a typed view of a window,
//! the only thing peers reach) and [`Tile`] (on-chip, bounded by the
//! device's capacity, 32-byte aligned). They are different types: passing
//! a Tensor where a DistributedTensor is required does not compile.

mod tile;

pub(crate) use tile::OnChip;
pub use tile::{Profile, Tile};

use crate::error::{Error, Result};
use pld_proto::Scalar;

/// `[rows, cols]`, in elements.
pub type Shape2 = [u64; 2];

/// The most elements a shape may have: the bytes of any dtype's elements
/// then fit in a `u64` with room, so the offset arithmetic cannot overflow.
const MAX_ELEMS: u64 = 1 << 48;

/// The element count of `dims`, or [`Error::TooLarge`] naming `name` when it
/// exceeds [`MAX_ELEMS`] (or overflows): every shape that comes from a
/// caller goes through here before any arithmetic on it.
pub(crate) fn elems(call: &'static str, name: &str, dims: &[u64]) -> Result<u64> {
    dims.iter()
        .try_fold(1u64, |n, d| n.checked_mul(*d))
        .filter(|n| *n <= MAX_ELEMS)
        .ok_or_else(|| Error::TooLarge {
            call,
            name: name.into(),
            dims: dims.to_vec(),
        })
}

/// A rank-private 2-D tensor in the rank's global memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T> {
    pub(crate) name: String,
    /// The 2-D shape ops work on: the leading dimensions of `dims`
    /// collapsed into rows.
    pub(crate) shape: Shape2,
    /// The shape the tensor was made with (N-D; `shape` itself if 2-D).
    pub(crate) dims: Vec<u64>,
    pub(crate) data: Vec<T>,
}

impl<T: Scalar> Tensor<T> {
    /// A tensor whose element `i` (row-major) is `f(i)`: its shape always
    /// matches its data.
    pub fn from_fn(name: &str, shape: Shape2, f: impl FnMut(usize) -> T) -> Tensor<T> {
        let n = (shape[0] * shape[1]) as usize;
        Tensor {
            name: name.into(),
            shape,
            dims: shape.to_vec(),
            data: (0..n).map(f).collect(),
        }
    }

    /// A tensor of `shape` holding `data` (row-major).
    pub fn new(name: &str, shape: Shape2, data: Vec<T>) -> Result<Tensor<T>> {
        let n = elems("tensor", name, &shape)?;
        if data.len() as u64 != n {
            return Err(Error::Usage(format!(
                "tensor '{name}' of shape {shape:?} needs {n} elements, got {}",
                data.len()
            )));
        }
        Ok(Tensor {
            name: name.into(),
            shape,
            dims: shape.to_vec(),
            data,
        })
    }

    /// A tensor of zeros.
    pub fn zeros(name: &str, shape: Shape2) -> Tensor<T> {
        Tensor {
            name: name.into(),
            shape,
            dims: shape.to_vec(),
            data: vec![T::default(); (shape[0] * shape[1]) as usize],
        }
    }

    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its `[rows, cols]`.
    pub fn shape(&self) -> Shape2 {
        self.shape
    }
    /// The elements, row-major.
    pub fn data(&self) -> &[T] {
        &self.data
    }
    /// The elements, row-major, to write.
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// The element at `[row, col]`. Panics outside the shape, as slice
    /// indexing does; [`Tensor::slice`] is the checked form.
    pub fn at(&self, row: u64, col: u64) -> T {
        self.data[(row * self.shape[1] + col) as usize]
    }

    /// The sub-tensor `[r0..r0+rows, c0..c0+cols]` (a copy, like `x[a:b, c:d]`).
    pub fn slice(&self, offsets: Shape2, shape: Shape2) -> Result<Tensor<T>> {
        check_region("slice", &self.name, self.shape, offsets, shape)?;
        let mut data = Vec::with_capacity((shape[0] * shape[1]) as usize);
        for r in 0..shape[0] {
            let start = ((offsets[0] + r) * self.shape[1] + offsets[1]) as usize;
            data.extend_from_slice(&self.data[start..start + shape[1] as usize]);
        }
        Ok(Tensor {
            name: format!("{}[slice]", self.name),
            shape,
            dims: shape.to_vec(),
            data,
        })
    }

    /// Elementwise `self * k` (`pl.mul(x, k)`).
    pub fn mul_scalar(&self, k: f64) -> Tensor<T> {
        self.map(|v| T::from_f64(v.to_f64() * k))
    }

    /// Elementwise `self + other`.
    pub fn add(&self, other: &Tensor<T>) -> Result<Tensor<T>> {
        same_shape("add", self.shape, other.shape)?;
        Ok(self.zip(other, |a, b| a.add(b)))
    }

    /// Elementwise `self * other`.
    pub fn mul(&self, other: &Tensor<T>) -> Result<Tensor<T>> {
        same_shape("mul", self.shape, other.shape)?;
        Ok(self.zip(other, |a, b| a.mul(b)))
    }

    /// The tensor converted to another dtype (`pl.cast`).
    pub fn cast<U: Scalar>(&self) -> Tensor<U> {
        Tensor {
            name: self.name.clone(),
            shape: self.shape,
            dims: self.dims.clone(),
            data: self.data.iter().map(|v| U::from_f64(v.to_f64())).collect(),
        }
    }

    fn map(&self, f: impl Fn(T) -> T) -> Tensor<T> {
        Tensor {
            name: self.name.clone(),
            shape: self.shape,
            dims: self.dims.clone(),
            data: self.data.iter().map(|v| f(*v)).collect(),
        }
    }

    fn zip(&self, other: &Tensor<T>, f: impl Fn(T, T) -> T) -> Tensor<T> {
        Tensor {
            name: self.name.clone(),
            shape: self.shape,
            dims: self.dims.clone(),
            data: self
                .data
                .iter()
                .zip(&other.data)
                .map(|(a, b)| f(*a, *b))
                .collect(),
        }
    }
}

/// A typed 2-D view of a window: the same name, offset and shape on every
/// rank (allocated symmetrically by [`crate::Device::alloc`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedTensor<T> {
    pub(crate) name: String,
    pub(crate) window: String,
    /// Byte offset of element `[0, 0]` in the window.
    pub(crate) base: u64,
    pub(crate) shape: Shape2,
    pub(crate) _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: Scalar> DistributedTensor<T> {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The window it lies in.
    pub fn window(&self) -> &str {
        &self.window
    }
    /// Its `[rows, cols]`.
    pub fn shape(&self) -> Shape2 {
        self.shape
    }
    /// Byte offset of element `[0, 0]` in the window.
    pub fn base(&self) -> u64 {
        self.base
    }
    /// The element offset (from the window's start, in elements) of `[row, col]`.
    pub(crate) fn elem_offset(&self, at: Shape2) -> u64 {
        self.base / T::DTYPE.size() as u64 + at[0] * self.shape[1] + at[1]
    }
    /// The byte offset of `[row, col]` in the window.
    pub(crate) fn byte_offset(&self, at: Shape2) -> u64 {
        self.elem_offset(at) * T::DTYPE.size() as u64
    }
    /// Rows `first..first+rows` as a view of their own.
    pub fn rows(&self, first: u64, rows: u64) -> Result<DistributedTensor<T>> {
        check_region(
            "rows",
            &self.name,
            self.shape,
            [first, 0],
            [rows, self.shape[1]],
        )?;
        Ok(DistributedTensor {
            name: format!("{}[{first}..{}]", self.name, first + rows),
            window: self.window.clone(),
            base: self.byte_offset([first, 0]),
            shape: [rows, self.shape[1]],
            _t: std::marker::PhantomData,
        })
    }
}

pub(crate) fn same_shape(call: &'static str, a: Shape2, b: Shape2) -> Result<()> {
    if a == b {
        return Ok(());
    }
    Err(Error::ShapeMismatch {
        call,
        a_rows: a[0],
        a_cols: a[1],
        b_rows: b[0],
        b_cols: b[1],
    })
}

/// Checks that `[offsets, offsets + shape)` lies inside `bounds`.
pub(crate) fn check_region(
    call: &'static str,
    name: &str,
    bounds: Shape2,
    offsets: Shape2,
    shape: Shape2,
) -> Result<()> {
    let fits = |i: usize| {
        offsets[i]
            .checked_add(shape[i])
            .is_some_and(|end| end <= bounds[i])
    };
    if fits(0) && fits(1) {
        return Ok(());
    }
    Err(Error::OutOfBounds {
        call,
        name: name.into(),
        row: offsets[0],
        col: offsets[1],
        rows: shape[0],
        cols: shape[1],
        shape_rows: bounds[0],
        shape_cols: bounds[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn chip(profile: Profile) -> Arc<OnChip> {
        Arc::new(OnChip {
            profile,
            used: AtomicU64::new(0),
        })
    }

    #[test]
    fn tiles_count_against_capacity_until_dropped() {
        let c = chip(Profile::A2a3sim);
        // 184 KiB = 23 tiles of 8 KiB.
        let tiles: Vec<Tile<f32>> = (0..23)
            .map(|_| Tile::alloc(&c, [8, 256], [8, 256]).unwrap())
            .collect();
        let e = Tile::<f32>::alloc(&c, [8, 256], [8, 256]).unwrap_err();
        assert!(matches!(e, Error::TileOverCapacity { free: 0, .. }), "{e}");
        drop(tiles);
        assert_eq!(c.used.load(Ordering::Relaxed), 0);
        // a5 has room for more.
        let c5 = chip(Profile::A5sim);
        let _t: Vec<Tile<f32>> = (0..30)
            .map(|_| Tile::alloc(&c5, [8, 256], [8, 256]).unwrap())
            .collect();
    }

    #[test]
    fn tile_rows_must_be_32_byte_aligned() {
        let c = chip(Profile::A5sim);
        let e = Tile::<f32>::alloc(&c, [1, 10], [1, 10]).unwrap_err();
        assert!(e.to_string().contains("multiple of 8"), "{e}");
        assert!(Tile::<f16>::alloc(&c, [1, 16], [1, 10]).is_ok());
    }

    use half::f16;

    #[test]
    fn a_shape_too_large_for_anything_is_an_error_not_an_overflow() {
        let c = chip(Profile::A5sim);
        let huge = 1u64 << 62;
        for e in [
            Tile::<f32>::alloc(&c, [huge, huge], [1, 1]).unwrap_err(),
            Tensor::<f32>::new("x", [huge, huge], vec![]).unwrap_err(),
            crate::nd::collapse_region(
                "load",
                "x",
                &[huge, huge, 8],
                &[huge - 1, 0, 0],
                &[1, 1, 8],
            )
            .unwrap_err(),
        ] {
            let msg = e.to_string();
            assert!(
                msg.contains("more than 2^48 elements") || msg.contains("not one 2-D rectangle"),
                "{msg}"
            );
        }
        assert_eq!(elems("t", "x", &[1 << 24, 1 << 24]).unwrap(), 1 << 48);
    }

    #[test]
    fn slices_and_regions_are_bounds_checked() {
        let t = Tensor::new("x", [2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(t.slice([1, 1], [1, 2]).unwrap().data(), &[5, 6]);
        let e = t.slice([1, 1], [2, 2]).unwrap_err();
        assert!(e.to_string().contains("does not fit in 'x'"), "{e}");
        assert_eq!(t.mul_scalar(2.0).data(), &[2, 4, 6, 8, 10, 12]);
    }
}
