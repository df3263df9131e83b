//! [`Rma`]: the one-sided API a pld program is written against.
//!
//! An embedded rank (`pld_server::Rank`) and a remote client of a daemon
//! (`pld_client::Client`) both implement it, so one program runs either way:
//! the simulated device and the examples are generic over `R: Rma`.
//!
//! Offsets are bytes into a window; data is little-endian. Completion and
//! ordering follow `docs/semantics.md`: a blocking call returns once its
//! effect is applied at the target (a get once the bytes are here).

use crate::region::{Chunking, Transfer};
use crate::{CellOp, Cmp, Dtype, NotifyOp};
use bytes::Bytes;
use std::future::Future;

/// An RMA error's stable reason (UPPER_SNAKE: `WAIT_TIMEOUT`,
/// `PEER_LOST`, `OUT_OF_BOUNDS`...; docs/client.md lists them), the same
/// whether the rank is embedded or a daemon's, so that a program branches
/// on the kind of failure instead of its text.
pub trait Reason {
    /// The reason.
    fn reason(&self) -> &str;
}

/// One rank's view of a pld cluster: one-sided put, get and atomics to any
/// rank (itself included), signals and synchronisation.
pub trait Rma: Send + Sync {
    /// What every call can fail with.
    type Error: std::error::Error + Reason + Send + Sync + 'static;
    /// A window, resolved once by name with [`Rma::window`].
    type Window: Copy + Send + Sync + std::fmt::Debug + 'static;

    /// This rank's id.
    fn rank(&self) -> u32;
    /// How many ranks the cluster has.
    fn nranks(&self) -> u32;
    /// The window called `name` (the same on every rank).
    fn window(&self, name: &str) -> Result<Self::Window, Self::Error>;

    /// Writes `data` at `offset` of `peer`'s window.
    fn put(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Reads `len` bytes at `offset` of `peer`'s window.
    fn get(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<Bytes, Self::Error>> + Send;

    /// Elementwise `window[offset..] += operands`, atomic per element.
    fn atomic_add(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Atomically adds `value` to one int32/int64 cell; returns the previous value.
    fn fetch_add(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> impl Future<Output = Result<i64, Self::Error>> + Send;

    /// Atomically replaces one int32/int64 cell holding `expected` by
    /// `desired`; returns the previous value.
    fn compare_swap(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> impl Future<Output = Result<i64, Self::Error>> + Send;

    /// A single-cell atomic on an int32/int64 cell (swap, fetch, set, and
    /// / or / xor with or without fetch), atomic at the target; returns
    /// the previous value (0 for set and the non-fetching bitwise ops).
    fn cell_op(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        dtype: Dtype,
        op: CellOp,
    ) -> impl Future<Output = Result<i64, Self::Error>> + Send;

    /// Writes `data` at `at` of `peer`, then sets or adds `signal` to the
    /// 8-byte signal cell at `signal_at`: one message; whoever sees the
    /// signal sees the data.
    fn put_signal(
        &self,
        peer: u32,
        at: (Self::Window, u64),
        data: &[u8],
        signal_at: (Self::Window, u64),
        signal: u64,
        signal_op: NotifyOp,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Sets or atomically adds to an int32 signal cell of `peer`.
    fn notify(
        &self,
        peer: u32,
        win: Self::Window,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Waits until this rank's int32 cell satisfies `cmp expected`; returns
    /// the value that did. Fails at the sync timeout with the cell, the
    /// expected value and the last value seen.
    fn wait(
        &self,
        win: Self::Window,
        offset: u64,
        cmp: Cmp,
        expected: i32,
    ) -> impl Future<Output = Result<i32, Self::Error>> + Send;

    /// Whether this rank's int32 cell satisfies `cmp expected` now.
    fn test(
        &self,
        win: Self::Window,
        offset: u64,
        cmp: Cmp,
        expected: i32,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Waits until every rank has entered the barrier; every put, atomic and
    /// notify issued before it is applied before any rank leaves.
    fn barrier(&self) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Waits until every op this rank issued has completed.
    fn quiet(&self) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// [`Rma::quiet`] for at most `timeout`: then it fails naming the ops
    /// still outstanding.
    fn quiet_within(
        &self,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Orders this rank's puts, atomics and notifies to `peer`: those after
    /// the fence are applied after those before it.
    fn fence(&self, peer: u32) -> Result<(), Self::Error>;

    /// Puts a 2-D region: `src` holds it in `t.src`'s layout; it lands in
    /// `peer`'s window in `t.dst`'s layout, streamed as `chunking` says.
    fn put_region(
        &self,
        peer: u32,
        win: Self::Window,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Atomically adds a 2-D region into `peer`'s window, atomic per element.
    fn atomic_add_region(
        &self,
        peer: u32,
        win: Self::Window,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Gets a 2-D region of `peer`'s window (`t.src`'s layout) into `dst`
    /// (`t.dst`'s layout).
    fn get_region(
        &self,
        peer: u32,
        win: Self::Window,
        t: &Transfer,
        dst: &mut [u8],
        chunking: Chunking,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Implements [`Rma`] for a type whose inherent methods have the trait's
/// names and signatures, by calling them: the one place that lists the
/// trait's methods for an implementation. `test: sync` for a type whose
/// `test` returns at once (an embedded rank reads its own cell), `test:
/// async` for one that asks over the network.
///
/// ```ignore
/// pld_proto::impl_rma!(Client, Error, WindowId, test: async);
/// ```
#[macro_export]
macro_rules! impl_rma {
    ($ty:ty, $err:ty, $win:ty, test: $mode:ident) => {
        impl $crate::Rma for $ty {
            type Error = $err;
            type Window = $win;

            fn rank(&self) -> u32 {
                <$ty>::rank(self)
            }
            fn nranks(&self) -> u32 {
                <$ty>::nranks(self)
            }
            fn window(&self, name: &str) -> ::std::result::Result<$win, $err> {
                <$ty>::window(self, name)
            }
            async fn put(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                data: &[u8],
            ) -> ::std::result::Result<(), $err> {
                <$ty>::put(self, peer, win, offset, data).await
            }
            async fn get(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                len: u64,
            ) -> ::std::result::Result<$crate::bytes::Bytes, $err> {
                <$ty>::get(self, peer, win, offset, len).await
            }
            async fn atomic_add(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                dtype: $crate::Dtype,
                operands: &[u8],
            ) -> ::std::result::Result<(), $err> {
                <$ty>::atomic_add(self, peer, win, offset, dtype, operands).await
            }
            async fn fetch_add(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                dtype: $crate::Dtype,
                value: i64,
            ) -> ::std::result::Result<i64, $err> {
                <$ty>::fetch_add(self, peer, win, offset, dtype, value).await
            }
            async fn compare_swap(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                dtype: $crate::Dtype,
                expected: i64,
                desired: i64,
            ) -> ::std::result::Result<i64, $err> {
                <$ty>::compare_swap(self, peer, win, offset, dtype, expected, desired).await
            }
            async fn cell_op(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                dtype: $crate::Dtype,
                op: $crate::CellOp,
            ) -> ::std::result::Result<i64, $err> {
                <$ty>::cell_op(self, peer, win, offset, dtype, op).await
            }
            async fn put_signal(
                &self,
                peer: u32,
                at: ($win, u64),
                data: &[u8],
                signal_at: ($win, u64),
                signal: u64,
                signal_op: $crate::NotifyOp,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::put_signal(self, peer, at, data, signal_at, signal, signal_op).await
            }
            async fn notify(
                &self,
                peer: u32,
                win: $win,
                offset: u64,
                value: i32,
                op: $crate::NotifyOp,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::notify(self, peer, win, offset, value, op).await
            }
            async fn wait(
                &self,
                win: $win,
                offset: u64,
                cmp: $crate::Cmp,
                expected: i32,
            ) -> ::std::result::Result<i32, $err> {
                <$ty>::wait(self, win, offset, cmp, expected).await
            }
            async fn test(
                &self,
                win: $win,
                offset: u64,
                cmp: $crate::Cmp,
                expected: i32,
            ) -> ::std::result::Result<bool, $err> {
                $crate::impl_rma!(@$mode <$ty>::test(self, win, offset, cmp, expected))
            }
            async fn barrier(&self) -> ::std::result::Result<(), $err> {
                <$ty>::barrier(self).await
            }
            async fn quiet(&self) -> ::std::result::Result<(), $err> {
                <$ty>::quiet(self).await
            }
            async fn quiet_within(
                &self,
                timeout: ::std::time::Duration,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::quiet_within(self, timeout).await
            }
            fn fence(&self, peer: u32) -> ::std::result::Result<(), $err> {
                <$ty>::fence(self, peer)
            }
            async fn put_region(
                &self,
                peer: u32,
                win: $win,
                t: &$crate::region::Transfer,
                src: &[u8],
                chunking: $crate::region::Chunking,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::put_region(self, peer, win, t, src, chunking).await
            }
            async fn atomic_add_region(
                &self,
                peer: u32,
                win: $win,
                t: &$crate::region::Transfer,
                src: &[u8],
                chunking: $crate::region::Chunking,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::atomic_add_region(self, peer, win, t, src, chunking).await
            }
            async fn get_region(
                &self,
                peer: u32,
                win: $win,
                t: &$crate::region::Transfer,
                dst: &mut [u8],
                chunking: $crate::region::Chunking,
            ) -> ::std::result::Result<(), $err> {
                <$ty>::get_region(self, peer, win, t, dst, chunking).await
            }
        }
    };
    (@sync $e:expr) => {
        $e
    };
    (@async $e:expr) => {
        $e.await
    };
}
