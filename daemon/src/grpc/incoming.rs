//! The client plane's accept loop: what a connection must do, and how
//! many there may be, before tonic sees it.
//!
//! - A cap on concurrent connections (`--grpc-max-connections`). A
//!   connection is *unproven* until a call on it passes authentication
//!   (with no token set, any call does). When the cap is full, a newcomer
//!   takes the slot of an unproven connection — first one whose call was
//!   refused, else the oldest that has held its slot for
//!   [`EVICT_AFTER`] — and that connection is closed; if there is none,
//!   the newcomer is closed at once. Proven connections are never
//!   evicted, so clients that use the daemon keep their connections
//!   whatever strangers do. Refusals and evictions are logged at most once
//!   a second, with a count.
//! - A deadline (`--grpc-handshake-timeout`) for the TLS handshake (with
//!   `--grpc-tls`) and the HTTP/2 connection preface: a connection that
//!   sends nothing, or something else, is closed — it never holds a slot
//!   or a file descriptor for longer.
//! - `accept` failing for want of file descriptors (EMFILE, ENFILE) or
//!   memory backs off (10 ms doubling to 1 s) instead of spinning, and
//!   says so, rate-limited.
//!
//! Admitted connections get TCP_NODELAY (tonic sets it only on listeners it
//! binds itself) and TCP keep-alive; HTTP/2 keep-alive (set on the server)
//! then reaps clients that died without closing.

use pld_proto::lock::Locked;
use pld_server::ratelog::RateLimited;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// The 24 bytes every HTTP/2 client sends first (RFC 9113, 3.4).
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How the accept loop admits connections.
#[derive(Clone)]
pub(crate) struct Admission {
    pub handshake_timeout: Duration,
    pub max_connections: usize,
    /// With `--grpc-tls`: the server side of the handshake.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub rank: u32,
    pub metrics: Arc<super::GrpcMetrics>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_connections", &self.max_connections)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// How long an unproven connection keeps its slot for sure; past it, a
/// newcomer may take it when the cap is full.
pub(crate) const EVICT_AFTER: Duration = Duration::from_secs(1);

/// What a connection has shown of itself ([`ClientInfo::trust`]).
const UNPROVEN: u8 = 0;
const PROVEN: u8 = 1;
const REFUSED: u8 = 2;

/// The cap's slots and who holds them.
#[derive(Debug)]
struct Slots {
    max: usize,
    held: std::sync::Mutex<Vec<Held>>,
    next: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Held {
    id: u64,
    since: Instant,
    info: ClientInfo,
}

/// One slot of the cap; given back when dropped.
#[derive(Debug)]
struct Slot {
    id: u64,
    slots: Arc<Slots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.held.locked().retain(|h| h.id != self.id);
    }
}

impl Slots {
    fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max: max.max(1),
            held: Default::default(),
            next: Default::default(),
        })
    }

    /// A slot for the connection `info`: a free one, or one taken from an
    /// unproven connection (which is closed; the second value says why);
    /// `None` if every slot is held by one that may keep it.
    fn admit(self: &Arc<Self>, info: &ClientInfo) -> Option<(Slot, Option<&'static str>)> {
        let now = Instant::now();
        let mut held = self.held.locked();
        let mut evicted = None;
        if held.len() >= self.max {
            let trust = |h: &Held| h.info.trust.load(Ordering::Relaxed);
            let victim = held
                .iter()
                .position(|h| trust(h) == REFUSED)
                .map(|i| (i, "its calls failed authentication"))
                .or_else(|| {
                    held.iter()
                        .enumerate()
                        .filter(|(_, h)| {
                            trust(h) == UNPROVEN && now.duration_since(h.since) >= EVICT_AFTER
                        })
                        .min_by_key(|(_, h)| h.since)
                        .map(|(i, _)| (i, "it made no authenticated call"))
                })?;
            let (i, why) = victim;
            let h = held.swap_remove(i);
            h.info.kill.kill(format!(
                "the connection cap (--grpc-max-connections {}) is full and {why}: its slot went to a new connection",
                self.max
            ));
            evicted = Some(why);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        held.push(Held {
            id,
            since: now,
            info: info.clone(),
        });
        let slot = Slot {
            id,
            slots: self.clone(),
        };
        Some((slot, evicted))
    }
}

/// A client connection that finished its handshake and sent the preface;
/// it holds one of the cap's slots until it closes.
pub(crate) struct ClientConn {
    io: Io,
    /// The preface (and how much of it tonic has read), handed to tonic
    /// before anything else is read.
    preface: Option<([u8; 24], usize)>,
    info: ClientInfo,
    _slot: Slot,
    metrics: Arc<super::GrpcMetrics>,
}

impl Drop for ClientConn {
    fn drop(&mut self) {
        self.metrics.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a call knows of its connection (a request extension).
#[derive(Debug, Clone)]
pub(crate) struct ClientInfo {
    pub remote: Option<SocketAddr>,
    /// Closes the connection from the daemon's side.
    pub kill: Arc<Kill>,
    /// Whether a call on it passed authentication, or failed it (the
    /// accept loop evicts such connections first when the cap is full).
    trust: Arc<AtomicU8>,
}

impl ClientInfo {
    /// A call on the connection passed authentication (or failed it).
    pub(crate) fn authenticated(&self, passed: bool) {
        let to = if passed { PROVEN } else { REFUSED };
        // A connection that proved itself once stays proven.
        let _ = self
            .trust
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t != PROVEN).then_some(to)
            });
    }
}

/// Closes a client connection from the daemon's side: its next read fails,
/// and hyper drops the connection with every stream and buffer on it. For
/// a client that holds a stream open without reading it past its deadline
/// (HTTP/2 cannot tell it otherwise: its flow-control window is shut).
#[derive(Debug, Default)]
pub(crate) struct Kill {
    why: std::sync::OnceLock<String>,
    reader: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Kill {
    /// Closes the connection, saying why (the first reason wins).
    pub fn kill(&self, why: String) {
        let _ = self.why.set(why);
        let waker = self.reader.locked().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn check(&self, cx: &Context<'_>) -> Option<io::Error> {
        if let Some(why) = self.why.get() {
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                why.clone(),
            ));
        }
        let mut slot = self.reader.locked();
        if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        drop(slot);
        // A kill between the first look and the registration.
        self.why
            .get()
            .map(|why| io::Error::new(io::ErrorKind::ConnectionAborted, why.clone()))
    }
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for ClientConn {
    type ConnectInfo = ClientInfo;
    fn connect_info(&self) -> ClientInfo {
        self.info.clone()
    }
}

impl AsyncRead for ClientConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if let Some(e) = me.info.kill.check(cx) {
            return Poll::Ready(Err(e));
        }
        if let Some((p, at)) = me.preface.as_mut() {
            let n = (p.len() - *at).min(buf.remaining());
            buf.put_slice(&p[*at..*at + n]);
            *at += n;
            if *at == p.len() {
                me.preface = None;
            }
            return Poll::Ready(Ok(()));
        }
        match &mut me.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Whether an accept error means the process (or the system) is out of
/// descriptors or memory: retrying at once would only spin.
pub(crate) fn exhausted(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accepts connections on `listener` for as long as the returned stream
/// is polled (it ends when tonic drops it).
pub(crate) fn accept(
    listener: TcpListener,
    admission: Admission,
) -> ReceiverStream<io::Result<ClientConn>> {
    let (tx, rx) = mpsc::channel(64);
    let slots = Slots::new(admission.max_connections);
    tokio::spawn(async move {
        let rank = admission.rank;
        let refused = RateLimited::every(Duration::from_secs(1));
        let starved = RateLimited::every(Duration::from_secs(1));
        let failed = RateLimited::every(Duration::from_secs(1));
        let evictions = RateLimited::every(Duration::from_secs(1));
        let mut backoff = Duration::from_millis(10);
        loop {
            let (tcp, remote) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) if exhausted(&e) => {
                        if let Some(more) = starved.admit() {
                            tracing::warn!(rank, "cannot accept gRPC clients: {e}{more}; retrying in {backoff:?}");
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                    // A connection reset before it was accepted, and the like.
                    Err(e) => {
                        tracing::debug!(rank, "accepting a gRPC client failed: {e}");
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            backoff = Duration::from_millis(10);
            let info = ClientInfo {
                remote: Some(remote),
                kill: Arc::default(),
                trust: Arc::default(),
            };
            let Some((slot, evicted)) = slots.admit(&info) else {
                if let Some(more) = refused.admit() {
                    tracing::warn!(
                        rank,
                        %remote,
                        "refused a gRPC client connection: {} connections are open (--grpc-max-connections){more}",
                        admission.max_connections
                    );
                }
                admission.metrics.refused.fetch_add(1, Ordering::Relaxed);
                drop(tcp);
                continue;
            };
            if let Some(why) = evicted {
                admission.metrics.evicted.fetch_add(1, Ordering::Relaxed);
                if let Some(more) = evictions.admit() {
                    tracing::info!(
                        rank,
                        %remote,
                        "closed an unproven gRPC client connection for a new one: the cap of {} is full and {why}{more}",
                        admission.max_connections
                    );
                }
            }
            let (tx, admission, failed) = (tx.clone(), admission.clone(), failed.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(
                    admission.handshake_timeout,
                    handshake(tcp, info, &admission, slot),
                )
                .await
                {
                    Ok(Ok(conn)) => {
                        let _ = tx.send(Ok(conn)).await;
                    }
                    Ok(Err(why)) => {
                        admission
                            .metrics
                            .handshakes_failed
                            .fetch_add(1, Ordering::Relaxed);
                        if let Some(more) = failed.admit() {
                            tracing::info!(rank, %remote, "closed a gRPC client connection: {why}{more}");
                        }
                    }
                    Err(_) => {
                        admission
                            .metrics
                            .handshakes_failed
                            .fetch_add(1, Ordering::Relaxed);
                        if let Some(more) = failed.admit() {
                            tracing::info!(
                                rank,
                                %remote,
                                "closed a gRPC client connection: no {} within {:?} (--grpc-handshake-timeout){more}",
                                if admission.tls.is_some() { "TLS handshake and HTTP/2 preface" } else { "HTTP/2 preface" },
                                admission.handshake_timeout
                            );
                        }
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The TLS handshake (if any) and the preface; the caller bounds its time.
async fn handshake(
    tcp: TcpStream,
    info: ClientInfo,
    admission: &Admission,
    slot: Slot,
) -> Result<ClientConn, String> {
    if let Err(e) = super::socket::tune(&tcp) {
        tracing::warn!(
            client = ?info.remote,
            "cannot set TCP_NODELAY and keep-alive on a client connection: {e}"
        );
    }
    let mut io = match &admission.tls {
        Some(acceptor) => Io::Tls(Box::new(
            acceptor
                .accept(tcp)
                .await
                .map_err(|e| format!("TLS handshake failed: {e}"))?,
        )),
        None => Io::Plain(tcp),
    };
    let mut preface = [0u8; 24];
    let read = match &mut io {
        Io::Plain(s) => s.read_exact(&mut preface).await,
        Io::Tls(s) => s.read_exact(&mut preface).await,
    };
    read.map_err(|e| format!("no HTTP/2 preface: {e}"))?;
    if &preface != PREFACE {
        return Err("the first bytes are not the HTTP/2 preface (is it an HTTP/2 client?)".into());
    }
    admission.metrics.open.fetch_add(1, Ordering::Relaxed);
    Ok(ClientConn {
        io,
        preface: Some((preface, 0)),
        info,
        _slot: slot,
        metrics: admission.metrics.clone(),
    })
}
