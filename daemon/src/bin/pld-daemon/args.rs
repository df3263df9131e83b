//! The flags of a running rank, and which combinations are refused.

use anyhow::Context;
use clap::Args;
use pld_daemon::grpc::{self, GrpcOptions};
use pld_server::config::{parse_duration, parse_size};
use pld_server::{Config, Progress, TransportKind, WindowConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What each combination of the security flags does (in `--help`, and in
/// docs/security.md).
pub const COMBINATIONS: &str = "\
Every flag can also be set through the environment variable shown.
Log filtering: RUST_LOG (for example RUST_LOG=debug or RUST_LOG=pld_server=trace).

Security flags, and what each combination does:
  --tls-dir DIR                  peers: mutual TLS under DIR's CA
  --insecure                     peers: no authentication (a loud warning)
  neither                        refused: choose one
  --tls-dir and --insecure       refused: they contradict each other
  --grpc ADDR (loopback)         clients: plaintext, no token needed
  --grpc ADDR (other)            refused unless --client-token is set
  --client-token T               every Pld call must carry `Bearer T`; needs --grpc
  --grpc-tls                     clients: TLS with --grpc-cert/--grpc-key, else
                                 DIR/grpc.pem and grpc.key of --tls-dir; refused
                                 without either (never a silent plaintext); needs --grpc
  --grpc-cert/--grpc-key         both or neither; only with --grpc-tls
  --metrics ADDR (loopback)      Prometheus text at http://ADDR/metrics
  --metrics ADDR (other)         refused unless --metrics-public (the counters
                                 reveal the cluster's traffic; they carry no data)
  --metrics-public               needs --metrics
Peer and client TLS are independent: --insecure --grpc-tls --grpc-cert C --grpc-key K
serves clients over TLS with an unauthenticated peer plane.";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// This rank's id: its position in --peers.
    #[arg(long, env = "PLD_RANK", required = true)]
    rank: Option<u32>,
    /// HOST:PORT of every rank, in rank order, this rank's own included.
    #[arg(long, env = "PLD_PEERS", value_delimiter = ',', required = true)]
    peers: Vec<String>,
    /// Address to listen on [default: this rank's entry in --peers].
    #[arg(long, env = "PLD_LISTEN")]
    listen: Option<String>,
    /// Peer-plane transport: quic or tcp.
    #[arg(long, env = "PLD_TRANSPORT", default_value = "quic")]
    transport: TransportKind,
    /// A window NAME=SIZE (KiB/MiB/GiB suffixes); repeat for several, or
    /// comma-separate in the variable [default: data=64MiB, signal=64KiB,
    /// collective=16MiB (the scratch of the gRPC collectives)].
    #[arg(long = "window", env = "PLD_WINDOWS", value_delimiter = ',')]
    windows: Vec<WindowConfig>,
    /// Cluster identity: ranks with different ids refuse each other.
    #[arg(long, env = "PLD_CLUSTER_ID", default_value = "pld")]
    cluster_id: String,
    /// How long to keep retrying peers that are not up yet (ms, s, m).
    #[arg(long, env = "PLD_CONNECT_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// How long an op waits for its reply before failing (ms, s, m).
    #[arg(long, env = "PLD_OP_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    op_timeout: Duration,
    /// How long a barrier or a wait may take before it fails with a report
    /// of what is missing (ms, s, m).
    #[arg(long, env = "PLD_SYNC_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    sync_timeout: Duration,
    /// How the rank waits for the network: sleep (kind to shared hosts) or
    /// spin (busy-poll while there is traffic; lowest latency, one core busy;
    /// where --peers puts more ranks on this host than it has cores, a
    /// spinning rank sleeps after a few empty polls).
    #[arg(long, env = "PLD_PROGRESS", default_value = "sleep")]
    pub progress: Progress,
    /// With --progress spin: back off to sleeping after this long without
    /// traffic (ms, s, m).
    #[arg(long, env = "PLD_SPIN_IDLE", default_value = "20ms", value_parser = parse_duration)]
    spin_idle: Duration,
    /// Run the race detector: every rank reports accesses to its windows
    /// that no barrier, wait or atomic orders (log, Stats `races`);
    /// `--checked=strict` also fails the racing op. Every rank must agree.
    #[arg(long, env = "PLD_CHECKED", num_args = 0..=1, default_missing_value = "on", default_value = "off")]
    checked: pld_server::CheckedMode,
    /// Record a timeline of this rank's ops (issue, completion, application
    /// here), barriers with their rounds, waits and races, and write it to
    /// FILE as Chrome trace-event JSON when the daemon stops (open it in
    /// ui.perfetto.dev; `pld-daemon trace-merge` joins the ranks' files). The
    /// last 2^20 events are kept.
    #[arg(long, env = "PLD_TRACE", value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Largest payload in one peer frame; bigger transfers are split.
    #[arg(long, env = "PLD_MAX_FRAME", default_value = "1MiB", value_parser = parse_size)]
    max_frame: u64,
    /// Serve the gRPC client plane (pld.v1.Pld, health, reflection) on this
    /// address, e.g. 127.0.0.1:50051. Without --client-token it must be a
    /// loopback address.
    #[arg(long, env = "PLD_GRPC")]
    grpc: Option<SocketAddr>,
    /// The bearer token every gRPC call must carry
    /// (`authorization: Bearer TOKEN`). Health checks need none.
    #[arg(long, env = "PLD_CLIENT_TOKEN", hide_env_values = true)]
    client_token: Option<String>,
    /// The most data bytes in one unary gRPC message; larger transfers use
    /// PutStream / GetStream.
    #[arg(long, env = "PLD_GRPC_MAX_MESSAGE", default_value = "4MiB", value_parser = parse_size)]
    grpc_max_message: u64,
    /// Serve Prometheus metrics (per-op counters, latency histograms) at
    /// http://ADDR/metrics.
    #[arg(long, env = "PLD_METRICS")]
    pub metrics: Option<SocketAddr>,
    /// Mutual TLS between ranks: a directory made by `pld-daemon certs`
    /// (ca.pem, rank-R.pem, rank-R.key). Peers must show a certificate of
    /// that CA naming the rank they claim.
    #[arg(long, env = "PLD_TLS_DIR")]
    tls_dir: Option<std::path::PathBuf>,
    /// Run the peer plane without authentication: anyone who can reach the
    /// port can read and write every window. For trusted networks only.
    #[arg(long, env = "PLD_INSECURE")]
    insecure: bool,
    /// Serve gRPC over TLS: with --grpc-cert and --grpc-key, or else with
    /// grpc.pem / grpc.key of --tls-dir (clients verify those with the
    /// cluster's ca.pem). Refused without either: never plaintext.
    #[arg(long, env = "PLD_GRPC_TLS")]
    grpc_tls: bool,
    /// With --grpc-tls: the server's certificate chain, PEM.
    #[arg(long, env = "PLD_GRPC_CERT")]
    grpc_cert: Option<PathBuf>,
    /// With --grpc-tls: the server's private key, PEM.
    #[arg(long, env = "PLD_GRPC_KEY")]
    grpc_key: Option<PathBuf>,
    /// A client connection must finish its TLS handshake and send the
    /// HTTP/2 preface within this, or it is closed (100ms to 5m).
    #[arg(long, env = "PLD_GRPC_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    grpc_handshake_timeout: Duration,
    /// Client connections open at once at most. At the cap a new one takes
    /// the slot of a connection that made no authenticated call (one whose
    /// calls were refused first, else one older than 1 s), or is closed at
    /// once; the refusals are logged (1 to 65536).
    #[arg(long, env = "PLD_GRPC_MAX_CONNECTIONS", default_value_t = grpc::DEFAULT_MAX_CONNECTIONS)]
    grpc_max_connections: usize,
    /// Bytes the client plane's streams may buffer in all; streams wait
    /// past it, and streams that are starting may hold three quarters of
    /// it at most (4 MiB to 1 TiB).
    #[arg(long, env = "PLD_GRPC_BUFFER_BUDGET", default_value = "256MiB", value_parser = parse_size)]
    grpc_buffer_budget: u64,
    /// A PutStream whose client sends nothing, or a GetStream whose client
    /// takes nothing, for this long is cancelled with DEADLINE_EXCEEDED (a
    /// stalled GetStream's connection is closed after as long again; 1s to
    /// 1h).
    #[arg(long, env = "PLD_GRPC_STALL_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    grpc_stall_timeout: Duration,
    /// HTTP/2 keep-alive: an idle client connection is pinged this often
    /// and closed if it does not answer within half as long (reaps clients
    /// that died without closing; 100ms to 1h).
    #[arg(long, env = "PLD_GRPC_KEEPALIVE", default_value = "20s", value_parser = parse_duration)]
    grpc_keepalive: Duration,
    /// Allow --metrics on an address other than loopback (the endpoint has
    /// no authentication; its counters carry no data).
    #[arg(long, env = "PLD_METRICS_PUBLIC")]
    metrics_public: bool,
}

impl RunArgs {
    /// Refuses the combinations of flags [`COMBINATIONS`] names, each with
    /// its reason, before anything starts.
    pub fn check_combinations(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        if self.tls_dir.is_some() && self.insecure {
            bail!(
                "--insecure and --tls-dir contradict each other: --tls-dir authenticates the \
                 peers with mutual TLS, --insecure turns authentication off; give one"
            );
        }
        if self.grpc_tls && self.grpc.is_none() {
            bail!("--grpc-tls needs --grpc ADDR: there is no client plane to secure");
        }
        if self.grpc_cert.is_some() != self.grpc_key.is_some() {
            bail!("--grpc-cert and --grpc-key go together: give both, or neither");
        }
        if self.grpc_cert.is_some() && !self.grpc_tls {
            bail!("--grpc-cert and --grpc-key are used only with --grpc-tls; add it");
        }
        if self.grpc_tls && self.grpc_cert.is_none() && self.tls_dir.is_none() {
            bail!(
                "--grpc-tls needs a certificate: give --grpc-cert FILE and --grpc-key FILE, \
                 or --tls-dir DIR with grpc.pem and grpc.key (pld-daemon certs writes them); \
                 the client plane is never served in plaintext when TLS was asked for"
            );
        }
        if self.metrics_public && self.metrics.is_none() {
            bail!("--metrics-public needs --metrics ADDR");
        }
        if let Some(m) = self.metrics
            && !m.ip().is_loopback()
            && !self.metrics_public
        {
            bail!(
                "--metrics {m} is not a loopback address: the endpoint has no authentication; \
                 bind it to loopback, or add --metrics-public to serve it there anyway"
            );
        }
        Ok(())
    }

    pub fn grpc(&self) -> anyhow::Result<Option<GrpcOptions>> {
        let Some(addr) = self.grpc else {
            if self.client_token.is_some() {
                anyhow::bail!("--client-token needs --grpc ADDR");
            }
            return Ok(None);
        };
        let mut o = GrpcOptions::new(addr);
        o.token = self.client_token.clone();
        o.max_message_data =
            usize::try_from(self.grpc_max_message).context("--grpc-max-message is too large")?;
        o.handshake_timeout = self.grpc_handshake_timeout;
        o.max_connections = self.grpc_max_connections;
        o.buffer_budget = usize::try_from(self.grpc_buffer_budget)
            .context("--grpc-buffer-budget is too large")?;
        o.stall_timeout = self.grpc_stall_timeout;
        o.keepalive = self.grpc_keepalive;
        if self.grpc_tls {
            o.tls = Some(match (&self.grpc_cert, &self.grpc_key, &self.tls_dir) {
                (Some(cert), Some(key), _) => grpc::GrpcTls::from_files(cert, key)?,
                (_, _, Some(dir)) => grpc::GrpcTls::from_dir(dir)?,
                // check_combinations refused it.
                _ => anyhow::bail!("--grpc-tls needs a certificate"),
            });
        }
        Ok(Some(o))
    }

    pub fn config(self) -> anyhow::Result<Config> {
        let rank = self.rank.context("--rank is required")?;
        let mut c = Config::new(rank, self.peers);
        c.listen = self.listen;
        c.transport = self.transport;
        if !self.windows.is_empty() {
            c.windows = self.windows;
        }
        c.cluster_id = self.cluster_id;
        c.connect_timeout = self.connect_timeout;
        c.op_timeout = self.op_timeout;
        c.sync_timeout = self.sync_timeout;
        c.progress = self.progress.with_spin_idle(self.spin_idle);
        c.checked = self.checked;
        c.trace = self.trace.is_some();
        c.max_payload = usize::try_from(self.max_frame).context("--max-frame is too large")?;
        c.security = match (self.tls_dir, self.insecure) {
            (Some(dir), _) => pld_server::Security::from_dir(&dir, rank)
                .with_context(|| format!("rank {rank}: TLS material in {}", dir.display()))?,
            (None, true) => pld_server::Security::Insecure,
            // Config::validate refuses it, after the rest of the flags.
            (None, false) => pld_server::Security::Unset,
        };
        Ok(c)
    }
}
