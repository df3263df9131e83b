//! [`Rank`]: one rank of a pld cluster, embedded in a process.
//!
//! `pld-daemon` is a `Rank` with a command line; tests, benchmarks and the
//! simulated device embed the same code. See `docs/semantics.md` for the
//! completion and ordering rules every op follows.

mod amo;
mod atomic;
mod checked;
mod handle;
mod links;
mod ops;
mod paths;
mod region;
mod rma;
mod sync;

pub use pld_proto::region::{Chunking, Layout, Shape, Transfer};

pub use handle::OpHandle;
pub use paths::QuicPath;

use crate::config::{Config, TransportKind};
use crate::error::{AccessError, ConfigError, Error, Result};
use crate::peer::handshake;
use crate::peer::link::{self, Link};
use crate::peer::{RankState, serve};
use crate::stats::StatsSnapshot;
use crate::transport::{Endpoint, TransportSettings};
use crate::window::{Window, Windows};
use bytes::BytesMut;
use handle::Check;
use pld_proto::lock::Locked;
use pld_proto::{Dtype, OpKind};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;

/// The most bytes of an unknown window's name that its error echoes.
pub(crate) const MAX_ECHOED_NAME: usize = 128;

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
    pub async fn start(mut config: Config) -> Result<Rank> {
        config.validate()?;
        // Spinning where ranks outnumber the cores parks early (see
        // transport::spin).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let here = config.ranks_on_this_host();
        config.progress = config.progress.on_host(here, cores);
        if config.progress.oversubscribed() {
            tracing::info!(
                rank = config.rank,
                ranks_here = here,
                cores,
                "more ranks than cores on this host: spinning threads sleep after {} empty polls",
                crate::transport::spin::PARK_AFTER
            );
        }
        let specs: Vec<(String, u64)> = config
            .windows
            .iter()
            .map(|w| (w.name.clone(), w.size))
            .collect();
        let windows = Windows::with_lent(&specs, &config.lent)?;
        let state = Arc::new(RankState::new(config, windows));
        let cfg = state.config();
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
        if let (
            crate::config::Progress::Spin {
                idle,
                oversubscribed,
            },
            TransportKind::Quic,
        ) = (cfg.progress, cfg.transport)
        {
            let state = state.clone();
            tasks.spawn(async move { state.activity().spin(idle, oversubscribed).await });
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
                r = state.members().refusal() => {
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
                    return Err(ConfigError::ConnectTask { error: join }.into());
                }
            };
            let (link, reader) = Link::new(state.clone(), est);
            link.spawn_tasks(reader, &mut readers);
            let p = link.peer as usize;
            links[p] = Some(link);
        }
        let links = Arc::new(links::Links::new(links));
        if let Some(rx) = state.members().take_rejoins() {
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
        let mut readers = std::mem::take(&mut *self.readers.locked());
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while readers.join_next().await.is_some() {}
        })
        .await;
        self.endpoint.close();
        if let Endpoint::Quic(e) = &self.endpoint {
            let _ = tokio::time::timeout(Duration::from_secs(1), e.wait_idle()).await;
        }
        drop(std::mem::take(&mut *self.tasks.locked()));
    }

    /// This rank's id.
    pub fn rank(&self) -> u32 {
        self.state.config().rank
    }

    /// The number of ranks in the cluster.
    pub fn nranks(&self) -> u32 {
        self.state.config().nranks()
    }

    /// The peer-plane transport.
    pub fn transport(&self) -> TransportKind {
        self.state.config().transport
    }

    /// The address this rank listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The configuration the rank runs with.
    pub fn config(&self) -> &Config {
        self.state.config()
    }

    /// A copy of this rank's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.state.stats().snapshot()
    }

    /// This rank's timeline, if it runs with `Config::trace`
    /// ([`crate::trace`]: `to_json`, or `trace::merge` of several ranks).
    pub fn trace(&self) -> Option<&Arc<crate::Trace>> {
        self.state.trace()
    }

    /// Resolves a window by name (an unknown one's error echoes at most
    /// `MAX_ECHOED_NAME` (128) bytes of it).
    pub fn window(&self, name: &str) -> Result<WindowId> {
        self.state
            .windows()
            .id_of(name)
            .map(WindowId)
            .ok_or_else(|| Error::NoSuchWindow {
                // The name is the caller's: a client may send megabytes.
                name: crate::error::clip(name, MAX_ECHOED_NAME).into_owned(),
                known: self.state.windows().names(),
            })
    }

    /// This rank's own copy of a window, for local loads and stores
    /// (staging data before a barrier, reading what peers put).
    pub fn local(&self, win: WindowId) -> Result<&Window> {
        self.window_for(OpKind::Get, self.rank(), win)
    }

    /// This rank's copy of window `win`, or the error that names `op` and
    /// `peer` (the window ids are the same on every rank).
    fn window_for(&self, op: OpKind, peer: u32, win: WindowId) -> Result<&Window> {
        self.state
            .windows()
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
        if self.state.members().rejoining(peer) {
            let deadline = crate::deadline::after(self.state.config().op_timeout);
            self.state.members().rejoined(peer, deadline).await;
        }
        self.target_now(peer)
    }

    /// This run's epoch (its start time in ns): a restarted rank has a new
    /// one, which its peers log when it rejoins.
    pub fn epoch(&self) -> u64 {
        self.state.epoch()
    }

    fn local_op<T>(&self, op: OpKind, peer: u32, r: Result<T, AccessError>) -> Result<OpHandle<T>> {
        let r = r.map_err(|error| Error::Access {
            op,
            rank: peer,
            error,
        })?;
        self.state.stats().local(op);
        Ok(OpHandle::ready(Ok(r)))
    }

    fn refused(&self, op: OpKind, peer: u32) -> impl Fn(AccessError) -> Error {
        move |error| Error::Access {
            op,
            rank: peer,
            error,
        }
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
