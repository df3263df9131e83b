//! Arithmetic on the element types a kernel computes with.

use crate::Element;
use half::{bf16, f16};

/// An element type kernels compute with: every pld dtype.
///
/// Arithmetic goes through `f64` and rounds back to the type (to nearest
/// even for fp16/bf16, wrapping for integers), which is exact for every
/// integer type but int64 beyond 2^53.
pub trait Scalar: Element + crate::collective::Plain + PartialOrd + Default {
    /// The value as `f64` (exact for every type but int64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// The nearest value of this type.
    fn from_f64(v: f64) -> Self;
    /// `self + other`.
    fn add(self, other: Self) -> Self {
        Self::from_f64(self.to_f64() + other.to_f64())
    }
    /// `self * other`.
    fn mul(self, other: Self) -> Self {
        Self::from_f64(self.to_f64() * other.to_f64())
    }
}

macro_rules! float {
    ($t:ty) => {
        impl Scalar for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
float!(f32);
float!(f64);

macro_rules! int {
    ($t:ty) => {
        impl Scalar for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                (v as i64) as $t
            }
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
        }
    };
}
int!(i8);
int!(i16);
int!(i32);
int!(i64);

impl Scalar for f16 {
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Scalar for bf16 {
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

/// How a reduction combines two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Add.
    Sum,
    /// Keep the larger.
    Max,
    /// Keep the smaller.
    Min,
    /// Multiply.
    Prod,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod];

    /// The reduction's name, as PyPTO's `ReduceOp` writes it.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "Sum",
            ReduceOp::Max => "Max",
            ReduceOp::Min => "Min",
            ReduceOp::Prod => "Prod",
        }
    }

    /// The reduction named `name` ([`ReduceOp::name`]).
    pub fn parse(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Combines `a` and `b`.
    pub fn apply<T: Scalar>(self, a: T, b: T) -> T {
        match self {
            ReduceOp::Sum => a.add(b),
            ReduceOp::Prod => a.mul(b),
            ReduceOp::Max => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            ReduceOp::Min => {
                if b < a {
                    b
                } else {
                    a
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_combine_as_named() {
        assert_eq!(ReduceOp::Sum.apply(2.0f32, 3.0), 5.0);
        assert_eq!(ReduceOp::Prod.apply(2i32, 3), 6);
        assert_eq!(ReduceOp::Max.apply(2i8, -3), 2);
        assert_eq!(ReduceOp::Min.apply(2i16, -3), -3);
        assert_eq!(
            ReduceOp::Sum.apply(f16::from_f32(1.0), f16::from_f32(2.0)),
            f16::from_f32(3.0)
        );
        assert_eq!(i8::MAX.add(1), i8::MIN, "integers wrap");
    }
}
