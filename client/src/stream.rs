//! Streamed transfers: PutStream and GetStream, from and to memory, readers
//! and writers, in messages of at most 1 MiB. Neither side holds a whole
//! transfer unless the caller's buffer is one.

use crate::client::{Client, WindowId};
use crate::error::{Error, Result};
use bytes::Bytes;
use pld_proto::region::Chunking;
use pld_proto::v1::{self as pb, Region};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Data bytes per streamed message, at most: fewer when the daemon's
/// message limit is smaller (a message over it is refused).
const MESSAGE: usize = 1 << 20;

fn wire_chunking(c: Chunking) -> Option<pb::Chunking> {
    (c != Chunking::default()).then(|| pb::Chunking {
        chunk_rows: c.chunk_rows.unwrap_or(0),
        chunk_cols: c.chunk_cols.unwrap_or(0),
        pipeline: c.pipeline,
        depth: c.depth.unwrap_or(0) as u32,
    })
}

impl Client {
    /// Data bytes per PutStream message: 1 MiB, or the daemon's limit if
    /// that is smaller.
    fn stream_message(&self) -> usize {
        MESSAGE.min(self.max_data()).max(1)
    }

    /// The header of a PutStream; its `len` is filled in by the caller.
    pub(crate) fn stream_header(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        region: Option<Region>,
        chunking: Chunking,
        atomic_add: bool,
    ) -> Result<pb::PutStreamHeader> {
        Ok(pb::PutStreamHeader {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            len: 0,
            region,
            chunking: wire_chunking(chunking),
            atomic_add,
        })
    }

    /// Puts `data` (packed bytes of the header's region, or contiguous
    /// bytes) with PutStream.
    pub(crate) async fn put_stream_bytes(
        &self,
        mut header: pb::PutStreamHeader,
        data: &[u8],
    ) -> Result<()> {
        header.len = data.len() as u64;
        let message = self.stream_message();
        let (feeder, rx) = mpsc::channel(4);
        let feed = async move {
            for piece in data.chunks(message) {
                let m = pb::PutStreamRequest {
                    header: None,
                    data: Bytes::copy_from_slice(piece),
                };
                if feeder.send(m).await.is_err() {
                    // The call ended; its status says why.
                    break;
                }
            }
            Ok(())
        };
        self.run_put_stream(header, feed, rx).await
    }

    /// Puts `len` bytes read from `reader` at `offset` of `peer`'s window,
    /// streamed; `progress` counts the bytes handed to the connection.
    pub async fn put_from_reader(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
        mut reader: impl AsyncRead + Unpin,
        progress: Option<Arc<AtomicU64>>,
    ) -> Result<()> {
        let mut header = self.stream_header(peer, win, offset, None, Chunking::default(), false)?;
        header.len = len;
        let message = self.stream_message();
        let (feeder, rx) = mpsc::channel(4);
        let feed = async move {
            let mut left = len;
            while left > 0 {
                let n = (left as usize).min(message);
                let mut buf = vec![0u8; n];
                reader
                    .read_exact(&mut buf)
                    .await
                    .map_err(|error| Error::Io {
                        context: format!("reading byte {} of {len}", len - left),
                        error,
                    })?;
                left -= n as u64;
                let m = pb::PutStreamRequest {
                    header: None,
                    data: buf.into(),
                };
                if feeder.send(m).await.is_err() {
                    break;
                }
                if let Some(p) = &progress {
                    p.fetch_add(n as u64, Relaxed);
                }
            }
            Ok(())
        };
        self.run_put_stream(header, feed, rx).await
    }

    /// Runs a PutStream: the header goes first, alone (the daemon checks it
    /// before any data arrives), then whatever `feed` sends into the
    /// channel whose receiver is `rx`; the stream ends when `feed` drops its
    /// sender.
    async fn run_put_stream(
        &self,
        header: pb::PutStreamHeader,
        feed: impl std::future::Future<Output = Result<()>>,
        rx: mpsc::Receiver<pb::PutStreamRequest>,
    ) -> Result<()> {
        let first = tokio_stream::once(pb::PutStreamRequest {
            header: Some(header),
            data: Bytes::new(),
        });
        let messages = tokio_stream::StreamExt::chain(first, ReceiverStream::new(rx));
        let mut grpc = self.grpc.clone();
        let call = grpc.put_stream(self.req(messages));
        let (answer, fed) = tokio::join!(call, feed);
        match (answer, fed) {
            (Ok(_), fed) => fed,
            // A local read error is the cause when both failed.
            (Err(_), Err(local)) => Err(local),
            (Err(s), Ok(())) => Err(self.err(s)),
        }
    }

    /// Reads a region (or `len` contiguous bytes) with GetStream into `out`,
    /// which must be exactly its packed size.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn get_stream_into(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
        region: Option<Region>,
        chunking: Chunking,
        out: &mut [u8],
    ) -> Result<()> {
        let mut at = 0usize;
        self.get_stream_each(peer, win, offset, len, region, chunking, |data| {
            let end = at + data.len();
            if end > out.len() {
                return Err(Error::InvalidArgument(format!(
                    "the daemon streamed more than the {} bytes asked for",
                    out.len()
                )));
            }
            out[at..end].copy_from_slice(&data);
            at = end;
            Ok(())
        })
        .await?;
        if at != out.len() {
            return Err(Error::InvalidArgument(format!(
                "the daemon streamed {at} of {} bytes",
                out.len()
            )));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn get_stream_each(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
        region: Option<Region>,
        chunking: Chunking,
        mut each: impl FnMut(Bytes) -> Result<()>,
    ) -> Result<()> {
        let req = pb::GetStreamRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            len,
            region,
            chunking: wire_chunking(chunking),
        };
        let mut s = self
            .grpc
            .clone()
            .get_stream(self.req(req))
            .await
            .map_err(|s| self.err(s))?
            .into_inner();
        while let Some(m) = s.message().await.map_err(|s| self.err(s))? {
            each(m.data)?;
        }
        Ok(())
    }

    /// Streams `len` bytes at `offset` of `peer`'s window into `writer`;
    /// `progress` counts the bytes written.
    pub async fn get_to_writer(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
        mut writer: impl AsyncWrite + Unpin,
        progress: Option<Arc<AtomicU64>>,
    ) -> Result<()> {
        let req = pb::GetStreamRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            len,
            region: None,
            chunking: None,
        };
        let mut s = self
            .grpc
            .clone()
            .get_stream(self.req(req))
            .await
            .map_err(|s| self.err(s))?
            .into_inner();
        let mut got = 0u64;
        while let Some(m) = s.message().await.map_err(|s| self.err(s))? {
            writer.write_all(&m.data).await.map_err(|error| Error::Io {
                context: format!("writing byte {got} of {len}"),
                error,
            })?;
            got += m.data.len() as u64;
            if let Some(p) = &progress {
                p.fetch_add(m.data.len() as u64, Relaxed);
            }
        }
        writer.flush().await.map_err(|error| Error::Io {
            context: "flushing the output".into(),
            error,
        })?;
        if got != len {
            return Err(Error::InvalidArgument(format!(
                "the daemon streamed {got} of {len} bytes"
            )));
        }
        Ok(())
    }
}
