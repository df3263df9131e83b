//! The client as an [`Rma`]: a program written against the trait runs
//! through a daemon exactly as it runs on an embedded rank.

use crate::client::{Client, WindowId};
use crate::error::Error;
use bytes::Bytes;
use pld_proto::region::{Chunking, Transfer};
use pld_proto::{Cmp, Dtype, NotifyOp, Rma};

impl Rma for Client {
    type Error = Error;
    type Window = WindowId;

    fn rank(&self) -> u32 {
        Client::rank(self)
    }
    fn nranks(&self) -> u32 {
        Client::nranks(self)
    }
    fn window(&self, name: &str) -> Result<WindowId, Error> {
        Client::window(self, name)
    }
    async fn put(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<(), Error> {
        Client::put(self, peer, win, offset, data).await
    }
    async fn get(&self, peer: u32, win: WindowId, offset: u64, len: u64) -> Result<Bytes, Error> {
        Client::get(self, peer, win, offset, len).await
    }
    async fn atomic_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<(), Error> {
        Client::atomic_add(self, peer, win, offset, dtype, operands).await
    }
    async fn fetch_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64, Error> {
        Client::fetch_add(self, peer, win, offset, dtype, value).await
    }
    async fn compare_swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64, Error> {
        Client::compare_swap(self, peer, win, offset, dtype, expected, desired).await
    }
    async fn notify(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<(), Error> {
        Client::notify(self, peer, win, offset, value, op).await
    }
    async fn wait(
        &self,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
        expected: i32,
    ) -> Result<i32, Error> {
        Client::wait(self, win, offset, cmp, expected).await
    }
    async fn test(
        &self,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
        expected: i32,
    ) -> Result<bool, Error> {
        Client::test(self, win, offset, cmp, expected).await
    }
    async fn barrier(&self) -> Result<(), Error> {
        Client::barrier(self).await
    }
    async fn quiet(&self) -> Result<(), Error> {
        Client::quiet(self).await
    }
    fn fence(&self, peer: u32) -> Result<(), Error> {
        Client::fence(self, peer)
    }
    async fn put_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<(), Error> {
        Client::put_region(self, peer, win, t, src, chunking).await
    }
    async fn atomic_add_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<(), Error> {
        Client::atomic_add_region(self, peer, win, t, src, chunking).await
    }
    async fn get_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        dst: &mut [u8],
        chunking: Chunking,
    ) -> Result<(), Error> {
        Client::get_region(self, peer, win, t, dst, chunking).await
    }
}
