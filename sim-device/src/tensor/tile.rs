//! [`Tile`]: data on a simulated core's chip, bounded by the device
//! profile's on-chip capacity ([`OnChip`], [`Profile`]) and 32-byte aligned.

use super::{Shape2, elems, same_shape};
use crate::error::{Error, Result};
use pld_proto::Scalar;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The on-chip memory of one simulated device: what its live tiles hold.
#[derive(Debug)]
pub(crate) struct OnChip {
    pub(crate) profile: Profile,
    pub(crate) used: AtomicU64,
}

/// A device profile: how much on-chip memory tiles may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Ascend a2/a3 simulator: 184 KiB usable on chip.
    A2a3sim,
    /// Ascend a5 simulator: 240 KiB usable on chip.
    A5sim,
}

impl Profile {
    /// The profile named `a2a3sim` or `a5sim`.
    /// The hardware names (`a2a3`, `a5`) are their simulators' profiles:
    /// a pld rank simulates the chip whichever a program names.
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "a2a3sim" | "a2a3" => Some(Profile::A2a3sim),
            "a5sim" | "a5" => Some(Profile::A5sim),
            _ => None,
        }
    }
    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::A2a3sim => "a2a3sim",
            Profile::A5sim => "a5sim",
        }
    }
    /// Usable on-chip bytes.
    pub fn capacity(self) -> u64 {
        match self {
            Profile::A2a3sim => 184 << 10,
            Profile::A5sim => 240 << 10,
        }
    }
}

/// Data on chip: 2-D, rows 32-byte aligned, counted against the device's
/// capacity until dropped. `valid` is the part that holds data (the rest
/// is padding, zero).
#[derive(Debug)]
pub struct Tile<T> {
    pub(crate) shape: Shape2,
    pub(crate) valid: Shape2,
    pub(crate) data: Vec<T>,
    chip: Arc<OnChip>,
    bytes: u64,
}

impl<T> Drop for Tile<T> {
    fn drop(&mut self) {
        self.chip.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl<T: Scalar> Tile<T> {
    /// Reserves on-chip memory for a `shape` tile of zeros.
    pub(crate) fn alloc(chip: &Arc<OnChip>, shape: Shape2, valid: Shape2) -> Result<Tile<T>> {
        elems("tile", "a tile", &shape)?;
        let size = T::DTYPE.size() as u64;
        let row_bytes = shape[1] * size;
        // A [N, 1] tile is a column vector (PTO's column-major layout): its
        // N elements are contiguous, so the column is what is aligned.
        let aligned = if shape[1] == 1 {
            (shape[0] * size) % 32 == 0
        } else {
            row_bytes % 32 == 0
        };
        if shape[0] == 0 || shape[1] == 0 || !aligned {
            return Err(Error::MisalignedTile {
                rows: shape[0],
                cols: shape[1],
                dtype: T::DTYPE,
                row_bytes,
                multiple: 32 / size,
            });
        }
        if valid[0] > shape[0] || valid[1] > shape[1] {
            return Err(Error::Usage(format!(
                "valid_shape {valid:?} is larger than the tile's shape {shape:?}"
            )));
        }
        let bytes = shape[0] * row_bytes;
        let capacity = chip.profile.capacity();
        let mut used = chip.used.load(Ordering::Relaxed);
        loop {
            if used + bytes > capacity {
                return Err(Error::TileOverCapacity {
                    rows: shape[0],
                    cols: shape[1],
                    dtype: T::DTYPE,
                    bytes,
                    free: capacity.saturating_sub(used),
                    capacity,
                    profile: chip.profile.name(),
                });
            }
            match chip.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        Ok(Tile {
            shape,
            valid,
            data: vec![T::default(); (shape[0] * shape[1]) as usize],
            chip: chip.clone(),
            bytes,
        })
    }

    /// The tile's allocated `[rows, cols]`.
    pub fn shape(&self) -> Shape2 {
        self.shape
    }
    /// The `[rows, cols]` that hold data.
    pub fn valid_shape(&self) -> Shape2 {
        self.valid
    }
    /// The elements, row-major over the allocated shape.
    pub fn data(&self) -> &[T] {
        &self.data
    }
    /// The valid part, row-major.
    pub fn valid_data(&self) -> Vec<T> {
        let mut out = Vec::with_capacity((self.valid[0] * self.valid[1]) as usize);
        for r in 0..self.valid[0] {
            let s = (r * self.shape[1]) as usize;
            out.extend_from_slice(&self.data[s..s + self.valid[1] as usize]);
        }
        out
    }

    fn derive(&self, data: Vec<T>) -> Result<Tile<T>> {
        let mut t = Tile::alloc(&self.chip, self.shape, self.valid)?;
        t.data = data;
        Ok(t)
    }

    /// Elementwise `self + other` into a new tile.
    pub fn add(&self, other: &Tile<T>) -> Result<Tile<T>> {
        same_shape("add", self.shape, other.shape)?;
        let data = self
            .data
            .iter()
            .zip(&other.data)
            .map(|(a, b)| a.add(*b))
            .collect();
        self.derive(data)
    }

    /// Elementwise `self * other` into a new tile.
    pub fn mul(&self, other: &Tile<T>) -> Result<Tile<T>> {
        same_shape("mul", self.shape, other.shape)?;
        let data = self
            .data
            .iter()
            .zip(&other.data)
            .map(|(a, b)| a.mul(*b))
            .collect();
        self.derive(data)
    }

    /// Elementwise `self * k` into a new tile.
    pub fn mul_scalar(&self, k: f64) -> Result<Tile<T>> {
        let data = self
            .data
            .iter()
            .map(|v| T::from_f64(v.to_f64() * k))
            .collect();
        self.derive(data)
    }

    /// Elementwise `self + k` into a new tile.
    pub fn add_scalar(&self, k: f64) -> Result<Tile<T>> {
        let data = self
            .data
            .iter()
            .map(|v| T::from_f64(v.to_f64() + k))
            .collect();
        self.derive(data)
    }

    /// The tile converted to another dtype (`pl.cast`); the new tile must be
    /// aligned and fit on chip too.
    pub fn cast<U: Scalar>(&self) -> Result<Tile<U>> {
        let mut t = Tile::<U>::alloc(&self.chip, self.shape, self.valid)?;
        t.data = self.data.iter().map(|v| U::from_f64(v.to_f64())).collect();
        Ok(t)
    }
}
