//! The client plane: the `pld.v1.Pld` gRPC service every daemon serves on
//! `--grpc ADDR`, with the standard health and reflection services.
//!
//! The server starts before the peer mesh: health reports NOT_SERVING and
//! ops fail with UNAVAILABLE until [`GrpcServer::ready`] hands it the rank.
//! Message sizes are explicit ([`GrpcOptions::max_message_data`]); larger
//! transfers stream through `PutStream` / `GetStream` in bounded memory.
//! With a client token every `Pld` call must carry it as bearer metadata;
//! without one the port must be a loopback address.

mod auth;
mod batch;
mod budget;
mod collective;
mod details;
mod drain;
pub mod error;
mod incoming;
mod metrics;
mod request;
mod service;
mod socket;
mod stream;
mod unhandled;

pub use drain::GRACE as DRAIN_GRACE;
pub use error::Error;
pub(crate) use incoming::exhausted;
pub use metrics::GrpcMetrics;

use pld_grpc::pld_server::PldServer;
use pld_server::Rank;
use pld_server::config::Config;
use pld_server::error::ConfigError;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::watch;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The data bytes one unary message carries at most, by default.
pub const DEFAULT_MAX_MESSAGE_DATA: usize = 4 << 20;
/// The range `--grpc-max-message` may take.
pub const MAX_MESSAGE_DATA_RANGE: std::ops::RangeInclusive<usize> = 4096..=(256 << 20);
/// How long a new connection may take for its TLS handshake and HTTP/2
/// preface, by default; and the range the flag may take.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The range `--grpc-handshake-timeout` may take.
pub const HANDSHAKE_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(300);
/// Concurrent client connections, by default; and the flag's range.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The range `--grpc-max-connections` may take.
pub const MAX_CONNECTIONS_RANGE: std::ops::RangeInclusive<usize> = 1..=65_536;
/// Bytes the client plane may buffer in all, by default; and the range.
pub const DEFAULT_BUFFER_BUDGET: usize = 256 << 20;
/// The range `--grpc-buffer-budget` may take.
pub const BUFFER_BUDGET_RANGE: std::ops::RangeInclusive<usize> = (4 << 20)..=(1 << 40);
/// How long a stream's client may take nothing before the stream is
/// cancelled, by default; and the range.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The range `--grpc-stall-timeout` may take.
pub const STALL_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(3600);
/// How often an idle client connection is pinged, by default (it must
/// answer within half as long again); and the range.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(20);
/// The range `--grpc-keepalive` may take.
pub const KEEPALIVE_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(3600);
/// What a message may hold beyond its data (field tags, names, regions).
const MESSAGE_OVERHEAD: usize = 64 << 10;

/// How the client plane is served.
#[derive(Debug, Clone)]
pub struct GrpcOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token every `Pld` call must carry; `None` allows only a
    /// loopback address.
    pub token: Option<String>,
    /// The most data bytes in one unary request or response.
    pub max_message_data: usize,
    /// Serve TLS with this certificate (chain) and key, PEM; clients verify
    /// it against the cluster CA (`pld-daemon certs` makes `grpc.pem`).
    pub tls: Option<GrpcTls>,
    /// A new connection must finish its TLS handshake (with `tls`) and send
    /// the HTTP/2 preface within this, or it is closed.
    pub handshake_timeout: Duration,
    /// Concurrent client connections at most; one more is closed at once
    /// (logged, rate-limited).
    pub max_connections: usize,
    /// Bytes the streams may buffer in all (read from windows and not yet
    /// handed to gRPC, or received and not yet put); they wait past it.
    pub buffer_budget: usize,
    /// A stream whose client sends or takes nothing for this long is
    /// cancelled.
    pub stall_timeout: Duration,
    /// HTTP/2 keep-alive: a ping this often to an idle client, which must
    /// answer within as long again, or its connection is closed.
    pub keepalive: Duration,
}

/// The client plane's TLS identity, PEM.
#[derive(Clone)]
pub struct GrpcTls {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// The private key.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls").finish_non_exhaustive()
    }
}

impl GrpcTls {
    /// A certificate chain and a key from PEM files of the operator's.
    pub fn from_files(
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> pld_server::Result<GrpcTls> {
        let read = |p: &std::path::Path| {
            std::fs::read(p)
                .map_err(|e| pld_server::Error::io(format!("reading {}", p.display()), e))
        };
        let tls = GrpcTls {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        };
        // Refuse bad material at start, not at the first client.
        pld_server::tls::grpc_server_config(&tls.cert_pem, &tls.key_pem)?;
        Ok(tls)
    }

    /// `grpc.pem` and `grpc.key` of a directory made by `pld-daemon certs`.
    pub fn from_dir(dir: &std::path::Path) -> pld_server::Result<GrpcTls> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| {
                pld_server::Error::io(
                    format!(
                        "reading {} (pld-daemon certs --grpc-names makes it)",
                        p.display()
                    ),
                    e,
                )
            })
        };
        Ok(GrpcTls {
            cert_pem: read("grpc.pem")?,
            key_pem: read("grpc.key")?,
        })
    }
}

impl GrpcOptions {
    /// Serves on `addr`, without a token, with the default message limit.
    pub fn new(addr: SocketAddr) -> GrpcOptions {
        GrpcOptions {
            addr,
            token: None,
            max_message_data: DEFAULT_MAX_MESSAGE_DATA,
            tls: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            keepalive: DEFAULT_KEEPALIVE,
        }
    }

    fn validate(&self) -> Result<(), pld_server::Error> {
        if self.token.is_none() && !self.addr.ip().is_loopback() {
            return Err(ConfigError::PublicWithoutToken { addr: self.addr }.into());
        }
        if self.token.as_deref().is_some_and(str::is_empty) {
            return Err(ConfigError::EmptyToken.into());
        }
        let bad = |what: &'static str, flag: &'static str, got: String, range: String| {
            Err(ConfigError::OutOfRange {
                what,
                flag,
                got,
                range,
            }
            .into())
        };
        if !MAX_MESSAGE_DATA_RANGE.contains(&self.max_message_data) {
            return bad(
                "a gRPC message limit",
                "grpc-max-message",
                format!("{} bytes", self.max_message_data),
                "4 KiB to 256 MiB".into(),
            );
        }
        if !HANDSHAKE_TIMEOUT_RANGE.contains(&self.handshake_timeout) {
            return bad(
                "a gRPC handshake timeout",
                "grpc-handshake-timeout",
                format!("{:?}", self.handshake_timeout),
                "100ms to 5m".into(),
            );
        }
        if !MAX_CONNECTIONS_RANGE.contains(&self.max_connections) {
            return bad(
                "a gRPC connection cap",
                "grpc-max-connections",
                self.max_connections.to_string(),
                "1 to 65536".into(),
            );
        }
        if !BUFFER_BUDGET_RANGE.contains(&self.buffer_budget) {
            return bad(
                "a gRPC buffer budget",
                "grpc-buffer-budget",
                format!("{} bytes", self.buffer_budget),
                "4 MiB to 1 TiB".into(),
            );
        }
        if !STALL_TIMEOUT_RANGE.contains(&self.stall_timeout) {
            return bad(
                "a gRPC stall timeout",
                "grpc-stall-timeout",
                format!("{:?}", self.stall_timeout),
                "1s to 1h".into(),
            );
        }
        if !KEEPALIVE_RANGE.contains(&self.keepalive) {
            return bad(
                "a gRPC keep-alive interval",
                "grpc-keepalive",
                format!("{:?}", self.keepalive),
                "100ms to 1h".into(),
            );
        }
        Ok(())
    }
}

/// What the service knows before and after the mesh is up.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) rank: OnceLock<Arc<Rank>>,
    pub(crate) max_data: usize,
    pub(crate) metrics: Arc<GrpcMetrics>,
    /// The streams' buffer budget and stall timeout.
    pub(crate) streams: stream::Streams,
    /// One collective at a time: they share the scratch window.
    pub(crate) collective: tokio::sync::Mutex<()>,
    /// Stopping: refuses new calls, ends those that outlive the grace.
    pub(crate) drain: Arc<drain::Drain>,
}

impl Shared {
    /// The most bytes one message may encode to (data and overhead).
    pub(crate) fn message_limit(&self) -> usize {
        self.max_data + MESSAGE_OVERHEAD
    }

    pub(crate) fn rank(&self) -> Result<&Arc<Rank>, Error> {
        self.rank.get().ok_or(Error::NotReady {
            rank: self.config.rank,
        })
    }
}

/// A running client-plane server.
#[derive(Debug)]
pub struct GrpcServer {
    shared: Arc<Shared>,
    health: HealthReporter,
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The name health reports the service under.
pub const SERVICE_NAME: &str = "pld.v1.Pld";

impl GrpcServer {
    /// Binds the port and starts serving, NOT_SERVING until [`ready`].
    ///
    /// [`ready`]: GrpcServer::ready
    pub async fn start(opts: GrpcOptions, config: &Config) -> pld_server::Result<GrpcServer> {
        opts.validate()?;
        let listener = tokio::net::TcpListener::bind(opts.addr)
            .await
            .map_err(|e| {
                pld_server::Error::io(format!("cannot bind the gRPC port {}", opts.addr), e)
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| pld_server::Error::io("gRPC local address", e))?;
        let metrics = Arc::new(GrpcMetrics::default());
        let drain = drain::Drain::new(config.rank);
        let shared = Arc::new(Shared {
            config: config.clone(),
            rank: OnceLock::new(),
            max_data: opts.max_message_data,
            metrics: metrics.clone(),
            streams: stream::Streams {
                budget: budget::Budget::new(opts.buffer_budget),
                stall_timeout: opts.stall_timeout,
                metrics,
                drain: drain.clone(),
            },
            collective: tokio::sync::Mutex::new(()),
            drain,
        });
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        // Reflection in both versions clients speak: v1, and v1alpha
        // (grpcio-reflection, grpc_cli, older grpcurl, Postman).
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(pld_grpc::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_v1 = reflection()
            .build_v1()
            .map_err(|error| ConfigError::Reflection {
                error: Box::new(error),
            })?;
        let reflection_v1alpha =
            reflection()
                .build_v1alpha()
                .map_err(|error| ConfigError::Reflection {
                    error: Box::new(error),
                })?;
        let limit = shared.message_limit();
        let pld = PldServer::new(service::Service::new(shared.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        let pld = tonic::service::interceptor::InterceptedService::new(
            pld,
            auth::BearerToken::new(opts.token.clone()),
        );
        // Refused and undecodable calls count too, by method.
        let pld = unhandled::Counted::new(pld, shared.metrics.clone());
        let (stop, mut stopped) = watch::channel(false);
        let tls = match &opts.tls {
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(Arc::new(
                pld_server::tls::grpc_server_config(&t.cert_pem, &t.key_pem)?,
            ))),
            None => None,
        };
        // Our own accept loop: the connection cap, the handshake deadline,
        // TCP_NODELAY (tonic sets it only on listeners it binds itself;
        // without it a reply in two writes waited ~44 ms for the client's
        // delayed ACK: issue 12) and a back-off on EMFILE.
        let incoming = incoming::accept(
            listener,
            incoming::Admission {
                handshake_timeout: opts.handshake_timeout,
                max_connections: opts.max_connections,
                tls,
                rank: config.rank,
                metrics: shared.metrics.clone(),
            },
        );
        shared.metrics.watch_budget(shared.streams.budget.clone());
        shared.metrics.watch_drain(shared.drain.clone());
        let builder = tonic::transport::Server::builder();
        let router = builder
            // HTTP/2's 64 KiB default windows cap a stream at a few
            // hundred MB/s on loopback; streamed transfers need more.
            .initial_stream_window_size(Some(8 << 20))
            .initial_connection_window_size(Some(16 << 20))
            // Clients that died without closing stop answering pings.
            .http2_keepalive_interval(Some(opts.keepalive))
            .http2_keepalive_timeout(Some(opts.keepalive / 2))
            .layer(tower::util::MapResponseLayer::new(
                error::remap_codec_errors,
            ))
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(pld);
        let rank = config.rank;
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
            {
                tracing::error!(rank, "the gRPC server stopped: {e}");
            }
        });
        tracing::info!(rank, addr = %local_addr, token = opts.token.is_some(), tls = opts.tls.is_some(), "gRPC client plane listening");
        Ok(GrpcServer {
            shared,
            health,
            local_addr,
            stop,
            task,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The mesh is up: serve ops on `rank` and report SERVING.
    pub async fn ready(&self, rank: Arc<Rank>) {
        let _ = self.shared.rank.set(rank);
        self.health
            .set_service_status("", ServingStatus::Serving)
            .await;
        self.health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
    }

    /// The client plane's request counters and latencies.
    pub fn metrics(&self) -> Arc<GrpcMetrics> {
        self.shared.metrics.clone()
    }

    /// Reports NOT_SERVING, refuses new calls, gives those in progress
    /// [`DRAIN_GRACE`] to finish and fails the rest with UNAVAILABLE
    /// naming the shutdown, then closes the connections (waiting briefly).
    pub async fn shutdown(self) {
        self.health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        self.health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        self.shared.drain.drain().await;
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(2), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}
