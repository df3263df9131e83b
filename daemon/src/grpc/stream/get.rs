//! GetStream: a region read 128 KiB at a time, a few messages ahead of
//! what the client has taken.

use super::super::Error;
use super::super::budget::{Budget, Lease, Share};
use super::super::incoming::ClientInfo;
use super::super::request::{Geometry, chunking, geometry, region_dtype, window};
use super::{Streams, block_transfers};
use bytes::Bytes;
use pld_proto::region::Chunking;
use pld_proto::v1::{GetStreamRequest, GetStreamResponse};
use pld_proto::{Dtype, OpKind};
use pld_server::{Rank, WindowId};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tonic::Status;

/// The most data in one GetStream message: small, so that what a stalled
/// client leaves in gRPC's own buffers (about two messages) stays small.
pub(crate) const GET_MESSAGE: usize = 128 << 10;
/// GetStream messages read ahead of what the client has taken.
const GET_AHEAD: usize = 4;

/// The response stream of GetStream: messages the producer read ahead.
/// Each message taken makes room for the producer to read one more.
pub(crate) struct GetStream {
    rx: mpsc::Receiver<Result<GetStreamResponse, Status>>,
    room: Arc<Semaphore>,
    /// Budget for what gRPC itself buffers of this stream (about two
    /// messages), held while the stream lives.
    _downstream: Lease,
}

impl std::fmt::Debug for GetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetStream").finish_non_exhaustive()
    }
}

impl tokio_stream::Stream for GetStream {
    type Item = Result<GetStreamResponse, Status>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = self.get_mut();
        let next = me.rx.poll_recv(cx);
        if let Poll::Ready(Some(Ok(_))) = &next {
            me.room.add_permits(1);
        }
        next
    }
}

/// Starts a GetStream: checks the request, takes the budget for gRPC's
/// own buffers of it, then reads messages a few ahead of the client.
pub(crate) async fn get(
    rank: Arc<Rank>,
    r: GetStreamRequest,
    max_message: usize,
    streams: &Streams,
    client: Option<ClientInfo>,
) -> Result<GetStream, Error> {
    const CALL: &str = "GetStream";
    let win = window(&rank, &r.window)?;
    let dtype = region_dtype(CALL, r.region.as_ref(), Dtype::Int8)?;
    let g = geometry(CALL, dtype, r.offset, r.region.as_ref(), r.len)?;
    let chunking = chunking(r.chunking.as_ref());
    rank.check_transfer(OpKind::Get, r.rank, win, &g.load(), &chunking)?;
    let message = max_message.min(GET_MESSAGE) as u64;
    let downstream = streams
        .budget
        .take(2 * message as usize, Share::Start)
        .await;
    // One slot more than the read-ahead: room for the final status.
    let (tx, rx) = mpsc::channel(GET_AHEAD + 1);
    let room = Arc::new(Semaphore::new(GET_AHEAD));
    let producer = Producer {
        rank,
        peer: r.rank,
        win,
        g,
        chunking,
        message,
        budget: streams.budget.clone(),
        stall: streams.stall_timeout,
        room: room.clone(),
        tx,
        client,
        metrics: streams.metrics.clone(),
    };
    // The daemon stopping ends the stream with a status that says so.
    let (cancelled, tx) = (streams.drain.cancelled(), producer.tx.clone());
    let refusal = Status::from(streams.drain.refusal());
    tokio::spawn(async move {
        tokio::select! {
            () = producer.run() => {}
            () = cancelled => {
                let _ = tx.try_send(Err(refusal));
            }
        }
    });
    Ok(GetStream {
        rx,
        room,
        _downstream: downstream,
    })
}

/// Reads a GetStream's messages from the window, as the client makes room.
struct Producer {
    rank: Arc<Rank>,
    peer: u32,
    win: WindowId,
    g: Geometry,
    chunking: Chunking,
    message: u64,
    budget: Budget,
    stall: Duration,
    room: Arc<Semaphore>,
    tx: mpsc::Sender<Result<GetStreamResponse, Status>>,
    client: Option<ClientInfo>,
    metrics: Arc<super::super::GrpcMetrics>,
}

type Fetch = JoinHandle<Result<Bytes, Error>>;

impl Producer {
    fn fetch(&self, start: u64, lease: Lease) -> Fetch {
        let len = self.message.min(self.g.packed_len - start);
        let (rank, peer, win, g, chunking) = (
            self.rank.clone(),
            self.peer,
            self.win,
            self.g,
            self.chunking,
        );
        tokio::spawn(async move {
            let mut buf = vec![0u8; len as usize];
            for t in block_transfers(&g, start, len, false) {
                rank.get_region(peer, win, &t, &mut buf, chunking).await?;
            }
            Ok::<_, Error>(lease.attach(buf))
        })
    }

    /// Room for one more message: at once, or once the client takes one;
    /// `None` if it took nothing for the stall timeout.
    async fn room(&self) -> Option<()> {
        let permit = tokio::time::timeout(self.stall, self.room.acquire())
            .await
            .ok()?
            .ok()?;
        // Given back by the stream when the client takes a message.
        permit.forget();
        Some(())
    }

    async fn run(self) {
        let len = self.g.packed_len;
        let mut inflight: VecDeque<Fetch> = VecDeque::new();
        let mut at = 0u64;
        let mut sent = 0u64;
        loop {
            // Read ahead as far as the client has made room.
            while at < len && inflight.len() < GET_AHEAD {
                if inflight.is_empty() {
                    if self.room().await.is_none() {
                        return self.stalled(sent).await;
                    }
                } else {
                    match self.room.try_acquire() {
                        Ok(p) => p.forget(),
                        Err(_) => break,
                    }
                }
                let n = self.message.min(len - at);
                // The first read-ahead is the stream's start; each later
                // message is read because the client took one.
                let share = if at < GET_AHEAD as u64 * self.message {
                    Share::Start
                } else {
                    Share::Moving
                };
                let lease = self.budget.take(n as usize, share).await;
                inflight.push_back(self.fetch(at, lease));
                at += n;
            }
            let Some(h) = inflight.pop_front() else {
                return;
            };
            let result = h
                .await
                .unwrap_or_else(|e| Err(Error::Internal(format!("a get task failed: {e}"))));
            let item = result.map(|data| {
                sent += data.len() as u64;
                GetStreamResponse { data }
            });
            let failed = item.is_err();
            if self.tx.send(item.map_err(Status::from)).await.is_err() || failed {
                // The client went away, or the read failed (said).
                for h in inflight {
                    h.abort();
                }
                return;
            }
        }
    }

    /// The client took nothing for the stall timeout: queue a status that
    /// says so behind the data, and close the connection if the client
    /// does not take anything within another stall timeout.
    async fn stalled(self, sent: u64) {
        let remote = self
            .client
            .as_ref()
            .and_then(|c| c.remote)
            .map_or_else(|| "a client".to_string(), |a| a.to_string());
        let why = format!(
            "GetStream: the client read nothing for {:?} (--grpc-stall-timeout); the stream was \
             cancelled after {sent} of {} bytes",
            self.stall, self.g.packed_len
        );
        self.metrics
            .stalled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(rank = self.rank.rank(), client = %remote, "{why}");
        // The channel keeps a slot for this.
        let _ = self
            .tx
            .try_send(Err(Status::deadline_exceeded(why.clone())));
        if self.room().await.is_some() {
            return;
        }
        if let Some(c) = &self.client {
            tracing::info!(
                rank = self.rank.rank(),
                client = %remote,
                "closing the connection of a client that holds a stalled GetStream"
            );
            c.kill.kill(format!(
                "{why}; the client did not read for another {:?}",
                self.stall
            ));
        }
    }
}
