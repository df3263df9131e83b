//! What a collective needs of the ranks it runs over ([`Group`]) and of
//! the elements it moves ([`Plain`]).
//!
//! Every [`Rma`] is a group of all its ranks. A program that runs a
//! collective over some of them — an OpenSHMEM team, an active set —
//! implements [`Group`] over those members, numbered 0..n in its order,
//! and the same algorithms serve it.

use crate::Rma;
use bytes::Bytes;
use std::future::Future;

/// Ranks a collective runs over: this member's number among them, puts
/// and gets by member number, and a barrier of the members.
pub trait Group: Send + Sync {
    /// What every call can fail with.
    type Error: std::error::Error + Send + Sync + 'static;
    /// A window, the same on every member.
    type Window: Copy + Send + Sync + std::fmt::Debug + 'static;

    /// This member's number: 0..[`Group::nranks`].
    fn rank(&self) -> u32;
    /// How many members the group has.
    fn nranks(&self) -> u32;
    /// Writes `data` at `offset` of member `peer`'s window.
    fn put(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Reads `len` bytes at `offset` of member `peer`'s window.
    fn get(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<Bytes, Self::Error>> + Send;
    /// Returns once every member has entered it; what this member put
    /// before it is applied at its target by then.
    fn barrier(&self) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

impl<R: Rma> Group for R {
    type Error = R::Error;
    type Window = R::Window;

    fn rank(&self) -> u32 {
        Rma::rank(self)
    }
    fn nranks(&self) -> u32 {
        Rma::nranks(self)
    }
    fn put(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        Rma::put(self, peer, win, offset, data)
    }
    fn get(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<Bytes, Self::Error>> + Send {
        Rma::get(self, peer, win, offset, len)
    }
    fn barrier(&self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        Rma::barrier(self)
    }
}

/// An element a collective moves: a fixed size and a little-endian
/// encoding. Every pld [`crate::Element`] is one, and so are the integer
/// types pld has no dtype for and byte arrays (an element another
/// language defines, such as C's `long double`, moved as its bytes).
pub trait Plain: Copy + Send + Sync + 'static {
    /// Bytes per element.
    const SIZE: usize;
    /// Writes the encoding into `out` (exactly `SIZE` bytes).
    fn write_le(self, out: &mut [u8]);
    /// Reads the encoding from `bytes` (exactly `SIZE` bytes).
    fn read_le(bytes: &[u8]) -> Self;
    /// Writes the encoding of every element of `values` into `out`
    /// (exactly `values.len() * SIZE` bytes). The primitive types copy
    /// their memory in one go.
    fn write_all(values: &[Self], out: &mut [u8]) {
        for (v, chunk) in values.iter().zip(out.chunks_exact_mut(Self::SIZE)) {
            v.write_le(chunk);
        }
    }
    /// Appends the elements `bytes` encodes to `out`; a trailing partial
    /// element is ignored.
    fn read_all(bytes: &[u8], out: &mut Vec<Self>) {
        out.extend(bytes.chunks_exact(Self::SIZE).map(Self::read_le));
    }
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
            fn write_all(values: &[Self], out: &mut [u8]) {
                let n = std::mem::size_of_val(values);
                // SAFETY: a primitive number has no padding and its memory
                // is its little-endian encoding (pld builds for
                // little-endian hosts only: crate::dtype); `out` holds `n`
                // bytes by the contract, checked here.
                let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), n) };
                out[..n].copy_from_slice(bytes);
            }
            fn read_all(bytes: &[u8], out: &mut Vec<Self>) {
                let n = bytes.len() / Self::SIZE;
                out.reserve(n);
                // SAFETY: every bit pattern is a value of a primitive
                // number; the `n` elements fit the reserved capacity and
                // are initialised by the copy before the length is set.
                unsafe {
                    let at = out.as_mut_ptr().add(out.len());
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.cast::<u8>(), n * Self::SIZE);
                    out.set_len(out.len() + n);
                }
            }
        }
    )*};
}

plain!(
    i8,
    i16,
    i32,
    i64,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize,
    f32,
    f64,
    half::f16,
    half::bf16
);

impl<const N: usize> Plain for [u8; N] {
    const SIZE: usize = N;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self);
    }
    fn read_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; N];
        b.copy_from_slice(bytes);
        b
    }
    fn write_all(values: &[Self], out: &mut [u8]) {
        let n = values.len() * N;
        out[..n].copy_from_slice(values.as_flattened());
    }
}

/// The encoding of `values`.
pub fn encode<T: Plain>(values: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * T::SIZE];
    T::write_all(values, &mut out);
    out
}

/// The elements `bytes` encodes; a trailing partial element is ignored.
pub fn decode<T: Plain>(bytes: &[u8]) -> Vec<T> {
    let mut out = Vec::new();
    T::read_all(bytes, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bulk_encoding_is_the_element_encoding() {
        let v: Vec<i32> = vec![1, -2, i32::MAX, i32::MIN];
        let mut each = vec![0u8; 16];
        for (x, c) in v.iter().zip(each.chunks_exact_mut(4)) {
            x.write_le(c);
        }
        assert_eq!(encode(&v), each);
        assert_eq!(decode::<i32>(&each), v);
        let h = vec![half::f16::from_f32(1.5), half::f16::from_f32(-0.25)];
        assert_eq!(decode::<half::f16>(&encode(&h)), h);
        let a = vec![[1u8, 2, 3], [4, 5, 6]];
        assert_eq!(encode(&a), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(decode::<[u8; 3]>(&[1, 2, 3, 4, 5, 6, 7]), a);
    }
}
