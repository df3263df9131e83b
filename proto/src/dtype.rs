//! Element types: sizes, names and little-endian encodings.

use crate::v1::Dtype;
use half::{bf16, f16};

#[cfg(target_endian = "big")]
compile_error!("pld stores window data little-endian and supports little-endian hosts only");

impl Dtype {
    /// Every dtype pld knows, in wire order.
    pub const ALL: [Dtype; 8] = [
        Dtype::Fp32,
        Dtype::Fp16,
        Dtype::Bf16,
        Dtype::Int32,
        Dtype::Int16,
        Dtype::Int8,
        Dtype::Int64,
        Dtype::Fp64,
    ];

    /// Size of one element in bytes (0 for `Unspecified`).
    pub const fn size(self) -> usize {
        match self {
            Dtype::Unspecified => 0,
            Dtype::Int8 => 1,
            Dtype::Fp16 | Dtype::Bf16 | Dtype::Int16 => 2,
            Dtype::Fp32 | Dtype::Int32 => 4,
            Dtype::Int64 | Dtype::Fp64 => 8,
        }
    }

    /// The short lowercase name used in messages and on command lines.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Unspecified => "unspecified",
            Dtype::Fp32 => "fp32",
            Dtype::Fp16 => "fp16",
            Dtype::Bf16 => "bf16",
            Dtype::Int32 => "int32",
            Dtype::Int16 => "int16",
            Dtype::Int8 => "int8",
            Dtype::Int64 => "int64",
            Dtype::Fp64 => "fp64",
        }
    }

    /// Parses a name as printed by [`Dtype::name`].
    pub fn parse(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The dtype a wire value stands for; `None` for unknown values and for
    /// `Unspecified`.
    pub fn from_wire(value: i32) -> Option<Dtype> {
        match Dtype::try_from(value) {
            Ok(Dtype::Unspecified) | Err(_) => None,
            Ok(d) => Some(d),
        }
    }

    /// Whether the dtype is an integer type.
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64
        )
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that is the element of a pld dtype.
pub trait Element: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// The dtype this type stands for.
    const DTYPE: Dtype;
    /// Writes the little-endian encoding into `out` (exactly `DTYPE.size()` bytes).
    fn write_le(self, out: &mut [u8]);
    /// Reads the little-endian encoding from `bytes` (exactly `DTYPE.size()` bytes).
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = $d;
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    };
}

element!(f32, Dtype::Fp32);
element!(f64, Dtype::Fp64);
element!(i8, Dtype::Int8);
element!(i16, Dtype::Int16);
element!(i32, Dtype::Int32);
element!(i64, Dtype::Int64);
element!(f16, Dtype::Fp16);
element!(bf16, Dtype::Bf16);

/// Encodes elements as little-endian bytes.
pub fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let size = T::DTYPE.size();
    let mut out = vec![0u8; values.len() * size];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(size)) {
        v.write_le(chunk);
    }
    out
}

/// Decodes little-endian bytes into elements; a trailing partial element is ignored.
pub fn from_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(T::DTYPE.size())
        .map(T::read_le)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_name_and_wire_value() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::parse(d.name()), Some(d));
            assert_eq!(Dtype::from_wire(d as i32), Some(d));
            // Windows check alignment with a mask (`Window::check_elems`).
            assert!(d.size().is_power_of_two(), "{d:?}");
        }
        assert_eq!(Dtype::from_wire(0), None);
        assert_eq!(Dtype::from_wire(99), None);
    }

    #[test]
    fn elements_encode_little_endian() {
        assert_eq!(
            to_bytes(&[1i32, -2]),
            vec![1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]
        );
        assert_eq!(from_bytes::<i16>(&[1, 0, 0xff, 0xff, 9]), vec![1, -1]);
        let h = [f16::from_f32(1.5), f16::from_f32(-2.0)];
        assert_eq!(from_bytes::<f16>(&to_bytes(&h)), h);
    }
}
