//! [`Rank`]: one rank of a pld cluster, embedded in a process.
//!
//! `pld-daemon` is a `Rank` with a command line; tests, benchmarks and the
//! simulated device embed the same code. See `docs/semantics.md` for the
//! completion and ordering rules every op follows.

mod handle;
mod links;
mod paths;
mod region;
mod rma;
mod sync;

pub use pld_proto::region::{Chunking, Layout, Shape, Transfer};

pub use handle::OpHandle;
pub use paths::QuicPath;

use crate::config::{Config, TransportKind};
use crate::error::{AccessError, Error, Result};
use crate::peer::handshake;
use crate::peer::link::{self, Link};
use crate::peer::{RankState, serve};
use crate::stats::StatsSnapshot;
use crate::transport::{Endpoint, TransportSettings};
use crate::window::{Window, Windows, check_fits};
use bytes::{Bytes, BytesMut};
use handle::{Check, Finish};
use pld_proto::region::ChunkPlan;
use pld_proto::v1::{PeerCompareSwap, PeerFetchAdd, PeerGet, PeerNotify, header::Body};
use pld_proto::{Dtype, Element, NotifyOp, OpKind};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tracing::Instrument;

/// A window of this rank's cluster, resolved by name with [`Rank::window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowId(u32);

/// One rank: owns its windows, serves its peers, and issues one-sided ops
/// to any rank (itself included).
///
/// Dropping a `Rank` stops it at once; [`Rank::shutdown`] closes its
/// connections first so that peers see it leave.
#[derive(Debug)]
pub struct Rank {
    state: Arc<RankState>,
    /// Indexed by rank; `None` for this rank. Replaced when a peer restarts.
    links: Arc<links::Links>,
    endpoint: Endpoint,
    local_addr: SocketAddr,
    /// The accept loop (and through it every served connection).
    tasks: Mutex<JoinSet<()>>,
    /// One reply reader per link.
    readers: Mutex<JoinSet<()>>,
}

impl Drop for Rank {
    fn drop(&mut self) {
        // Handles of ops still in flight resolve (with this error) instead
        // of waiting for readers and sweepers that are about to stop.
        for link in self.links.all() {
            link.abandon();
        }
        self.endpoint.close();
        // The JoinSet aborts the accept loop, every served connection and
        // every reply reader when it drops.
    }
}

/// A get issued: done here, or in flight.
enum Parts {
    Local(BytesMut),
    Remote(Vec<link::Pending>),
}

enum Target {
    Local,
    Remote(Arc<Link>),
}

impl Rank {
    /// Starts a rank: allocates its windows, listens, then connects to every
    /// other rank — retrying until the connect timeout, since ranks start
    /// in any order — and checks that all agree on the cluster's identity.
    pub async fn start(config: Config) -> Result<Rank> {
        config.validate()?;
        let specs: Vec<(String, u64)> = config
            .windows
            .iter()
            .map(|w| (w.name.clone(), w.size))
            .collect();
        let windows = Windows::new(&specs).map_err(Error::Config)?;
        let state = Arc::new(RankState::new(config, windows));
        let cfg = &state.config;
        let listen = handshake::resolve(cfg.listen_addr()).await.map_err(|e| {
            Error::io(
                format!("cannot resolve the listen address {}", cfg.listen_addr()),
                e,
            )
        })?;
        let settings = TransportSettings::for_op_timeout(cfg.op_timeout)
            .with_progress(cfg.progress)
            .with_security(cfg.security.clone())
            .for_listen_addr(listen);
        let endpoint = Endpoint::bind(cfg.transport, listen, cfg.rank, &settings).await?;
        let local_addr = endpoint
            .local_addr()
            .map_err(|e| Error::io("local address", e))?;
        let mut tasks = JoinSet::new();
        tasks.spawn(serve::accept_loop(state.clone(), endpoint.clone()));
        // TCP sockets spin by themselves (transport::spin); quinn's sockets
        // are tokio's, so keep the runtime polling for them.
        if let (crate::config::Progress::Spin { idle }, TransportKind::Quic) =
            (cfg.progress, cfg.transport)
        {
            let state = state.clone();
            tasks.spawn(async move { state.activity.spin(idle).await });
        }

        let deadline = crate::deadline::after(cfg.connect_timeout);
        let mut dials = JoinSet::new();
        for peer in (0..cfg.nranks()).filter(|p| *p != cfg.rank) {
            let (state, endpoint) = (state.clone(), endpoint.clone());
            dials.spawn(async move { handshake::dial(&state, &endpoint, peer, deadline).await });
        }
        let mut links: Vec<Option<Arc<Link>>> = vec![None; cfg.nranks() as usize];
        let mut readers = JoinSet::new();
        loop {
            // A peer of this cluster that disagrees on its identity and was
            // refused here fails the start as surely as one that refused us.
            let joined = tokio::select! {
                j = dials.join_next() => j,
                r = state.refusal() => {
                    endpoint.close();
                    return Err(Error::Mismatch { peer: r.peer, addr: r.addr, mismatch: r.mismatch });
                }
            };
            let Some(joined) = joined else { break };
            let est = match joined {
                Ok(Ok(est)) => est,
                Ok(Err(e)) => {
                    endpoint.close();
                    return Err(e);
                }
                Err(join) => {
                    endpoint.close();
                    return Err(Error::Config(format!(
                        "connecting to a peer failed: {join}"
                    )));
                }
            };
            let (link, reader) = Link::new(state.clone(), est);
            readers.spawn(link::run_reader(link.clone(), reader));
            readers.spawn(link::sweep(link.clone()));
            let p = link.peer as usize;
            links[p] = Some(link);
        }
        let links = Arc::new(links::Links::new(links));
        if let Some(rx) = lock(&state.rejoin.rx).take() {
            tasks.spawn(links::rejoin_loop(
                state.clone(),
                endpoint.clone(),
                links.clone(),
                rx,
            ));
        }
        tracing::info!(
            rank = cfg.rank,
            nranks = cfg.nranks(),
            transport = %cfg.transport,
            addr = %local_addr,
            "rank ready: connected to every peer"
        );
        Ok(Rank {
            state,
            links,
            endpoint,
            local_addr,
            tasks: Mutex::new(tasks),
            readers: Mutex::new(readers),
        })
    }

    /// Leaves the cluster in order: finishes every outgoing stream so that
    /// what this rank already sent (its last barrier signal, say) reaches
    /// its peers, waits briefly for them to close their side, then closes
    /// the endpoint. Outstanding ops fail. Dropping a `Rank` instead stops
    /// it at once.
    pub async fn shutdown(&self) {
        let mut closing = JoinSet::new();
        for link in self.links.all() {
            closing.spawn(async move { link.close().await });
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), closing.join_all()).await;
        let mut readers = std::mem::take(&mut *lock(&self.readers));
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while readers.join_next().await.is_some() {}
        })
        .await;
        self.endpoint.close();
        if let Endpoint::Quic(e) = &self.endpoint {
            let _ = tokio::time::timeout(Duration::from_secs(1), e.wait_idle()).await;
        }
        drop(std::mem::take(&mut *lock(&self.tasks)));
    }

    /// This rank's id.
    pub fn rank(&self) -> u32 {
        self.state.config.rank
    }

    /// The number of ranks in the cluster.
    pub fn nranks(&self) -> u32 {
        self.state.config.nranks()
    }

    /// The peer-plane transport.
    pub fn transport(&self) -> TransportKind {
        self.state.config.transport
    }

    /// The address this rank listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The configuration the rank runs with.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// A copy of this rank's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.state.stats.snapshot()
    }

    /// Resolves a window by name.
    pub fn window(&self, name: &str) -> Result<WindowId> {
        self.state
            .windows
            .id_of(name)
            .map(WindowId)
            .ok_or_else(|| Error::NoSuchWindow {
                name: name.to_string(),
                known: self.state.windows.names(),
            })
    }

    /// This rank's own copy of a window, for local loads and stores
    /// (staging data before a barrier, reading what peers put).
    pub fn local(&self, win: WindowId) -> Result<&Window> {
        self.win(OpKind::Get, self.rank(), win)
    }

    fn win(&self, op: OpKind, peer: u32, win: WindowId) -> Result<&Window> {
        self.state
            .windows
            .get(win.0)
            .map_err(|error| Error::Access {
                op,
                rank: peer,
                error,
            })
    }

    /// Where an op to `peer` goes, as of now.
    fn target_now(&self, peer: u32) -> Result<Target> {
        match self.links.get(peer) {
            None => Err(Error::NoSuchRank {
                rank: peer,
                nranks: self.nranks(),
            }),
            Some(None) => Ok(Target::Local),
            Some(Some(link)) => Ok(Target::Remote(link)),
        }
    }

    /// Where an op to `peer` goes; if `peer` restarted and its new link is
    /// being made, waits for it (at most the op timeout).
    async fn target(&self, peer: u32) -> Result<Target> {
        if self.state.rejoining(peer) {
            let deadline = crate::deadline::after(self.state.config.op_timeout);
            self.state.rejoined(peer, deadline).await;
        }
        self.target_now(peer)
    }

    /// This run's epoch (its start time in ns): a restarted rank has a new
    /// one, which its peers log when it rejoins.
    pub fn epoch(&self) -> u64 {
        self.state.hello.epoch
    }

    fn local_op<T>(&self, op: OpKind, peer: u32, r: Result<T, AccessError>) -> Result<OpHandle<T>> {
        let r = r.map_err(|error| Error::Access {
            op,
            rank: peer,
            error,
        })?;
        self.state.stats.local(op);
        Ok(OpHandle::ready(Ok(r)))
    }

    fn refused(&self, op: OpKind, peer: u32) -> impl Fn(AccessError) -> Error {
        move |error| Error::Access {
            op,
            rank: peer,
            error,
        }
    }

    /// Writes `data` at byte `offset` of `peer`'s window. Returns when the
    /// data is in the peer's window.
    pub async fn put(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<()> {
        self.put_nb(peer, win, offset, data).await?.wait().await
    }

    /// Non-blocking put: returns once `data` is handed to the transport (the
    /// buffer may be reused); the handle resolves when the data is in the
    /// peer's window. Larger than one frame, it travels as several.
    pub async fn put_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        data: &[u8],
    ) -> Result<OpHandle<()>> {
        let op = OpKind::Put;
        let w = self.win(op, peer, win)?;
        w.check_range(offset, data.len() as u64)
            .map_err(self.refused(op, peer))?;
        let link = match self.target(peer).await? {
            Target::Local => return self.local_op(op, peer, w.write(offset, data)),
            Target::Remote(link) => link,
        };
        let span = tracing::debug_span!("put", peer, window = w.name(), offset, len = data.len());
        let t = contiguous(Dtype::Int8, offset, data.len() as u64);
        let plan = ChunkPlan::by_rows(t.shape, link.peer_max_payload as u64);
        let parts = region::send_chunks(&link, op, win, &t, data, plan, usize::MAX)
            .instrument(span)
            .await?;
        Ok(OpHandle::remote(
            parts.into(),
            check(peer, op, None),
            handle::acked,
        ))
    }

    /// Reads `len` bytes at byte `offset` of `peer`'s window.
    pub async fn get(&self, peer: u32, win: WindowId, offset: u64, len: u64) -> Result<Bytes> {
        self.get_nb(peer, win, offset, len).await?.wait().await
    }

    /// Non-blocking get; the handle resolves with the bytes.
    pub async fn get_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
    ) -> Result<OpHandle<Bytes>> {
        let check = check(peer, OpKind::Get, Some(len));
        match self
            .get_parts(peer, win, offset, BytesMut::zeroed(len as usize))
            .await?
        {
            Parts::Local(b) => Ok(OpHandle::ready(Ok(b.freeze()))),
            Parts::Remote(parts) => Ok(OpHandle::remote(parts, check, handle::data)),
        }
    }

    /// Non-blocking get into `buf`, all of it: the bytes at `offset` go
    /// from the socket straight into `buf` (no other copy), and the handle
    /// gives `buf` back. Reusing buffers, a program gets without allocating.
    pub async fn get_nb_into(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        buf: BytesMut,
    ) -> Result<OpHandle<BytesMut>> {
        let check = check(peer, OpKind::Get, Some(buf.len() as u64));
        match self.get_parts(peer, win, offset, buf).await? {
            Parts::Local(b) => Ok(OpHandle::ready(Ok(b))),
            Parts::Remote(parts) => Ok(OpHandle::remote(parts, check, handle::filled)),
        }
    }

    /// Issues a get of `buf.len()` bytes: one request per frame, each with
    /// its own slice of `buf` to be read into.
    async fn get_parts(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        mut buf: BytesMut,
    ) -> Result<Parts> {
        let op = OpKind::Get;
        let len = buf.len() as u64;
        let w = self.win(op, peer, win)?;
        w.check_range(offset, len).map_err(self.refused(op, peer))?;
        let link = match self.target(peer).await? {
            Target::Local => {
                w.read_into(offset, &mut buf)
                    .map_err(self.refused(op, peer))?;
                self.state.stats.local(op);
                return Ok(Parts::Local(buf));
            }
            Target::Remote(link) => link,
        };
        let span = tracing::debug_span!("get", peer, window = w.name(), offset, len);
        async {
            // Replies come to this rank: split by this rank's own frame limit.
            let mut parts = Vec::new();
            for (at, n) in pieces(len as usize, self.state.config.max_payload) {
                let body = Body::Get(PeerGet {
                    window: win.0,
                    offset: offset + at as u64,
                    len: n as u64,
                    region: None,
                });
                parts.push(link.send_into(body, buf.split_to(n)).await?);
            }
            Ok(Parts::Remote(parts))
        }
        .instrument(span)
        .await
    }

    /// Elementwise `peer_window[offset..] += operands`, atomic per element.
    /// `operands` holds little-endian elements of `dtype`; `offset` and the
    /// length must be multiples of the element size.
    pub async fn atomic_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<()> {
        self.atomic_add_nb(peer, win, offset, dtype, operands)
            .await?
            .wait()
            .await
    }

    /// [`Rank::atomic_add`] of typed elements.
    pub async fn atomic_add_elems<T: Element>(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        values: &[T],
    ) -> Result<()> {
        let bytes = pld_proto::dtype::to_bytes(values);
        self.atomic_add(peer, win, offset, T::DTYPE, &bytes).await
    }

    /// Non-blocking atomic add.
    pub async fn atomic_add_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<OpHandle<()>> {
        let op = OpKind::AtomicAdd;
        let w = self.win(op, peer, win)?;
        if dtype == Dtype::Unspecified {
            return Err(self.refused(op, peer)(AccessError::UnknownDtype {
                value: dtype as i32,
            }));
        }
        w.check_elems(offset, operands.len() as u64, dtype)
            .map_err(self.refused(op, peer))?;
        let link = match self.target(peer).await? {
            Target::Local => return self.local_op(op, peer, w.atomic_add(offset, dtype, operands)),
            Target::Remote(link) => link,
        };
        let span = tracing::debug_span!("atomic_add", peer, window = w.name(), offset, %dtype, len = operands.len());
        let size = dtype.size() as u64;
        let t = contiguous(dtype, offset / size, operands.len() as u64 / size);
        let plan = ChunkPlan::by_rows(t.shape, (link.peer_max_payload as u64 / size).max(1));
        let parts = region::send_chunks(&link, op, win, &t, operands, plan, usize::MAX)
            .instrument(span)
            .await?;
        Ok(OpHandle::remote(
            parts.into(),
            check(peer, op, None),
            handle::acked,
        ))
    }

    /// Atomically adds `value` to the int32/int64 cell at `offset`; returns
    /// the previous value.
    pub async fn fetch_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64> {
        self.fetch_add_nb(peer, win, offset, dtype, value)
            .await?
            .wait()
            .await
    }

    /// Non-blocking fetch_add; the handle resolves with the previous value.
    pub async fn fetch_add_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<OpHandle<i64>> {
        let op = OpKind::FetchAdd;
        let w = self.win(op, peer, win)?;
        w.check_cell(op, offset, dtype)
            .and_then(|_| check_fits(op, dtype, value))
            .map_err(self.refused(op, peer))?;
        let body = Body::FetchAdd(PeerFetchAdd {
            window: win.0,
            offset,
            dtype: dtype as i32,
            value,
        });
        match self.target(peer).await? {
            Target::Local => self.local_op(op, peer, w.fetch_add(offset, dtype, value)),
            Target::Remote(link) => self.single(&link, op, body, handle::value).await,
        }
    }

    /// Atomically replaces the int32/int64 cell at `offset` by `desired` if
    /// it holds `expected`; returns the previous value (equal to `expected`
    /// exactly when it swapped).
    pub async fn compare_swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64> {
        self.compare_swap_nb(peer, win, offset, dtype, expected, desired)
            .await?
            .wait()
            .await
    }

    /// Non-blocking compare_swap.
    pub async fn compare_swap_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<OpHandle<i64>> {
        let op = OpKind::CompareSwap;
        let w = self.win(op, peer, win)?;
        w.check_cell(op, offset, dtype)
            .and_then(|_| check_fits(op, dtype, expected))
            .and_then(|_| check_fits(op, dtype, desired))
            .map_err(self.refused(op, peer))?;
        let body = Body::CompareSwap(PeerCompareSwap {
            window: win.0,
            offset,
            dtype: dtype as i32,
            expected,
            desired,
        });
        match self.target(peer).await? {
            Target::Local => {
                self.local_op(op, peer, w.compare_swap(offset, dtype, expected, desired))
            }
            Target::Remote(link) => self.single(&link, op, body, handle::value).await,
        }
    }

    /// Sets (`NotifyOp::Set`) or atomically adds to (`NotifyOp::AtomicAdd`)
    /// the int32 signal cell at `offset` of `peer`'s window.
    pub async fn notify(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        self.notify_nb(peer, win, offset, value, op)
            .await?
            .wait()
            .await
    }

    /// Non-blocking notify.
    pub async fn notify_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        notify: NotifyOp,
    ) -> Result<OpHandle<()>> {
        let op = OpKind::Notify;
        let w = self.win(op, peer, win)?;
        w.check_signal(offset).map_err(self.refused(op, peer))?;
        if notify == NotifyOp::Unspecified {
            return Err(self.refused(op, peer)(AccessError::InvalidNotifyOp {
                value: notify as i32,
            }));
        }
        let body = Body::Notify(PeerNotify {
            window: win.0,
            offset,
            value,
            op: notify as i32,
        });
        match self.target(peer).await? {
            Target::Local => self.local_op(op, peer, w.notify(offset, notify, value)),
            Target::Remote(link) => self.single(&link, op, body, handle::acked).await,
        }
    }

    async fn single<T>(
        &self,
        link: &Arc<Link>,
        op: OpKind,
        body: Body,
        finish: Finish<T>,
    ) -> Result<OpHandle<T>> {
        let span = tracing::debug_span!("op", op = op.name(), peer = link.peer);
        let pending = link.send(op, body, &[]).instrument(span).await?;
        Ok(OpHandle::remote(
            vec![pending],
            check(link.peer, op, None),
            finish,
        ))
    }

    /// Orders this rank's puts, atomics and notifies to `peer`: those issued
    /// after the fence are applied after those issued before it.
    ///
    /// Every link is one ordered stream and the target applies its requests
    /// in arrival order, so ops to one peer are already applied in issue
    /// order; `fence` only checks the rank. See `docs/semantics.md`.
    pub fn fence(&self, peer: u32) -> Result<()> {
        self.target_now(peer).map(|_| ())
    }
}

/// A one-row transfer of `len` elements of `dtype` from the start of the
/// caller's buffer to element `offset` of the window.
fn contiguous(dtype: Dtype, offset: u64, len: u64) -> Transfer {
    Transfer {
        dtype,
        shape: Shape { rows: 1, cols: len },
        dst: Layout {
            offset,
            row_stride: len,
        },
        src: Layout {
            offset: 0,
            row_stride: len,
        },
    }
}

/// Splits `len` bytes into frames of at most `max`: `(start, length)` of
/// each. An empty transfer is one empty frame, so that it is still checked
/// and acknowledged by the target.
fn pieces(len: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = len.div_ceil(max).max(1);
    (0..count).map(move |i| {
        let at = i * max;
        (at, max.min(len - at))
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn check(peer: u32, op: OpKind, len: Option<u64>) -> Check {
    Check { peer, op, len }
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_cover_the_transfer_in_order_without_overlap() {
        assert_eq!(pieces(0, 4).collect::<Vec<_>>(), vec![(0, 0)]);
        assert_eq!(pieces(4, 4).collect::<Vec<_>>(), vec![(0, 4)]);
        assert_eq!(
            pieces(9, 4).collect::<Vec<_>>(),
            vec![(0, 4), (4, 4), (8, 1)]
        );
    }
}
