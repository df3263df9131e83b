//! Dtype dispatch: Python names a dtype by string; each binding call runs
//! its generic body for the matching Rust element type. Data crosses the
//! boundary as bytes in the dtype's little-endian layout (numpy's).

use half::f16;
use pld_sim::Tile;

/// Runs `$body` with `$T` bound to the element type of `$dt` (a
/// `pld_proto::Dtype`), or returns a Python `ValueError` for a dtype the
/// device does not move. The match is exhaustive: a new dtype is a compile
/// error here.
macro_rules! by_dtype {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            pld_proto::Dtype::Fp32 => {
                type $T = f32;
                $body
            }
            pld_proto::Dtype::Fp16 => {
                type $T = half::f16;
                $body
            }
            pld_proto::Dtype::Fp64 => {
                type $T = f64;
                $body
            }
            pld_proto::Dtype::Int32 => {
                type $T = i32;
                $body
            }
            pld_proto::Dtype::Int16 => {
                type $T = i16;
                $body
            }
            pld_proto::Dtype::Int8 => {
                type $T = i8;
                $body
            }
            pld_proto::Dtype::Int64 => {
                type $T = i64;
                $body
            }
            pld_proto::Dtype::Bf16 => {
                type $T = half::bf16;
                $body
            }
            other @ pld_proto::Dtype::Unspecified => {
                Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "dtype {other} is not one pld-pypto moves: fp32, fp16, bf16, fp64, int8, int16, int32, int64"
                )))
            }
        }
    };
}
pub(crate) use by_dtype;

/// A tile of any dtype: the Rust device's tile, which holds the data and
/// its share of on-chip memory until dropped.
#[derive(Debug)]
pub(crate) enum AnyTile {
    F32(Tile<f32>),
    F16(Tile<f16>),
    Bf16(Tile<half::bf16>),
    F64(Tile<f64>),
    I32(Tile<i32>),
    I16(Tile<i16>),
    I8(Tile<i8>),
    I64(Tile<i64>),
}

/// Converts between a typed tile and [`AnyTile`].
pub(crate) trait Tiled: pld_proto::Scalar {
    fn wrap(t: Tile<Self>) -> AnyTile;
    fn unwrap(t: &AnyTile) -> Option<&Tile<Self>>;
}

macro_rules! tiled {
    ($($t:ty => $v:ident),*) => {$(
        impl Tiled for $t {
            fn wrap(t: Tile<Self>) -> AnyTile {
                AnyTile::$v(t)
            }
            fn unwrap(t: &AnyTile) -> Option<&Tile<Self>> {
                match t {
                    AnyTile::$v(t) => Some(t),
                    _ => None,
                }
            }
        }
    )*};
}
tiled!(f32 => F32, f16 => F16, half::bf16 => Bf16, f64 => F64, i32 => I32, i16 => I16, i8 => I8, i64 => I64);

impl AnyTile {
    /// The tile's dtype.
    pub(crate) fn dtype(&self) -> pld_proto::Dtype {
        use pld_proto::Dtype;
        match self {
            AnyTile::F32(_) => Dtype::Fp32,
            AnyTile::F16(_) => Dtype::Fp16,
            AnyTile::Bf16(_) => Dtype::Bf16,
            AnyTile::F64(_) => Dtype::Fp64,
            AnyTile::I32(_) => Dtype::Int32,
            AnyTile::I16(_) => Dtype::Int16,
            AnyTile::I8(_) => Dtype::Int8,
            AnyTile::I64(_) => Dtype::Int64,
        }
    }

    pub(crate) fn parts(&self) -> ([u64; 2], [u64; 2], Vec<u8>) {
        fn of<T: pld_proto::Scalar>(t: &Tile<T>) -> ([u64; 2], [u64; 2], Vec<u8>) {
            (
                t.shape(),
                t.valid_shape(),
                pld_proto::dtype::to_bytes(t.data()),
            )
        }
        match self {
            AnyTile::F32(t) => of(t),
            AnyTile::F16(t) => of(t),
            AnyTile::Bf16(t) => of(t),
            AnyTile::F64(t) => of(t),
            AnyTile::I32(t) => of(t),
            AnyTile::I16(t) => of(t),
            AnyTile::I8(t) => of(t),
            AnyTile::I64(t) => of(t),
        }
    }
}
