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
mod collective;
pub mod error;
mod metrics;
mod service;
mod stream;

pub use error::Error;
pub use metrics::GrpcMetrics;

use crate::config::Config;
use crate::rank::Rank;
use pld_proto::v1::pld_server::PldServer;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::watch;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The data bytes one unary message carries at most, by default.
pub const DEFAULT_MAX_MESSAGE_DATA: usize = 4 << 20;
/// What a message may hold beyond its data (field tags, names, regions).
const MESSAGE_OVERHEAD: usize = 64 << 10;

/// How the client plane is served.
#[derive(Debug, Clone)]
pub struct GrpcOptions {
    pub addr: SocketAddr,
    /// The bearer token every `Pld` call must carry; `None` allows only a
    /// loopback address.
    pub token: Option<String>,
    /// The most data bytes in one unary request or response.
    pub max_message_data: usize,
    /// Serve TLS with this certificate (chain) and key, PEM; clients verify
    /// it against the cluster CA (`pld-daemon certs` makes `grpc.pem`).
    pub tls: Option<GrpcTls>,
}

/// The client plane's TLS identity, PEM.
#[derive(Clone)]
pub struct GrpcTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls").finish_non_exhaustive()
    }
}

impl GrpcTls {
    /// `grpc.pem` and `grpc.key` of a directory made by `pld-daemon certs`.
    pub fn from_dir(dir: &std::path::Path) -> crate::Result<GrpcTls> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| {
                crate::Error::io(
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
        }
    }

    fn validate(&self) -> Result<(), crate::Error> {
        if self.token.is_none() && !self.addr.ip().is_loopback() {
            return Err(crate::Error::Config(format!(
                "the gRPC port {} is not a loopback address and no client token is set: \
                 without --client-token the client plane binds to loopback only",
                self.addr
            )));
        }
        if self.token.as_deref().is_some_and(str::is_empty) {
            return Err(crate::Error::Config("the client token is empty".into()));
        }
        if self.max_message_data < 4096 {
            return Err(crate::Error::Config(format!(
                "a gRPC message limit of {} bytes is too small (at least 4 KiB)",
                self.max_message_data
            )));
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
    /// One collective at a time: they share the scratch window.
    pub(crate) collective: tokio::sync::Mutex<()>,
}

impl Shared {
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
    pub async fn start(opts: GrpcOptions, config: &Config) -> crate::Result<GrpcServer> {
        opts.validate()?;
        let listener = tokio::net::TcpListener::bind(opts.addr)
            .await
            .map_err(|e| crate::Error::io(format!("cannot bind the gRPC port {}", opts.addr), e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| crate::Error::io("gRPC local address", e))?;
        let shared = Arc::new(Shared {
            config: config.clone(),
            rank: OnceLock::new(),
            max_data: opts.max_message_data,
            metrics: Arc::new(GrpcMetrics::default()),
            collective: tokio::sync::Mutex::new(()),
        });
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pld_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| crate::Error::Config(format!("gRPC reflection: {e}")))?;
        let limit = opts.max_message_data + MESSAGE_OVERHEAD;
        let pld = PldServer::new(service::Service::new(shared.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        let pld = tonic::service::interceptor::InterceptedService::new(
            pld,
            auth::BearerToken::new(opts.token.clone()),
        );
        let (stop, mut stopped) = watch::channel(false);
        // tonic applies its own `tcp_nodelay` only to listeners it binds
        // itself; on ours every accepted socket kept Nagle's algorithm, so
        // a reply that went out in two writes held its second until the
        // client's delayed ACK of the first: ~44 ms on most remote ops over
        // QUIC, whose replies complete on another task (issue 12).
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = &opts.tls {
            let identity = tonic::transport::Identity::from_pem(&tls.cert_pem, &tls.key_pem);
            builder = builder
                .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
                .map_err(|e| crate::Error::Tls(format!("gRPC TLS: {e}")))?;
        }
        let router = builder
            // HTTP/2's 64 KiB default windows cap a stream at a few
            // hundred MB/s on loopback; streamed transfers need more.
            .initial_stream_window_size(Some(8 << 20))
            .initial_connection_window_size(Some(16 << 20))
            .http2_keepalive_interval(Some(Duration::from_secs(20)))
            .layer(tower::util::MapResponseLayer::new(error::remap_too_large))
            .add_service(health_service)
            .add_service(reflection)
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

    /// Reports NOT_SERVING, stops accepting calls and waits (briefly) for
    /// the calls in progress.
    pub async fn shutdown(self) {
        self.health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        self.health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
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
