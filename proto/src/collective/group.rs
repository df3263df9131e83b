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
}

/// The encoding of `values`.
pub fn encode<T: Plain>(values: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * T::SIZE];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(T::SIZE)) {
        v.write_le(chunk);
    }
    out
}

/// The elements `bytes` encodes; a trailing partial element is ignored.
pub fn decode<T: Plain>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::read_le).collect()
}
