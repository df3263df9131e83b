//! QUIC (quinn): one endpoint per rank that both accepts and dials; one
//! connection per (origin, target) pair carrying one long-lived request stream.

use super::{Connection, PeerReader, PeerWriter};
use crate::config::Progress;
use crate::error::{ConfigError, Error, Result, TlsError};
use crate::tls::{self, Security};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{IdleTimeout, TransportConfig, VarInt};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Transport settings: QUIC timing (derived from the rank's op timeout) and
/// the progress mode.
#[derive(Debug, Clone)]
pub struct TransportSettings {
    /// A connection with no packets for this long is dead (quinn's default
    /// is 30 s with no keep-alive; pld sets both deliberately).
    pub idle_timeout: Duration,
    /// Keep-alive interval; well below the idle timeout.
    pub keep_alive: Duration,
    /// Sleep or busy-poll.
    pub progress: Progress,
    /// Mutual TLS or none (see [`crate::tls`]).
    pub security: Security,
    /// UDP segmentation offload (GSO): batches of datagrams in one send.
    /// Needed on 1500-byte paths (several times the bandwidth there); on
    /// loopback, where MTU discovery reaches 64 KiB datagrams, it loses the
    /// tails of transfers and caps a stream's bandwidth, so loopback
    /// clusters turn it off (docs/PERFORMANCE.md).
    pub segmentation_offload: bool,
    /// The path MTU when it is known (loopback: 64 KiB datagrams): QUIC
    /// starts there instead of discovering it. Discovery sends probes
    /// padded to their size, and quinn reads padding one byte-long frame
    /// at a time: on loopback the probes of every connection made a
    /// 64-rank cluster take many seconds to form (docs/PERFORMANCE.md).
    pub known_mtu: Option<u16>,
    /// How many bidirectional streams a peer may have open at once. A
    /// link uses one; quinn keeps state for every stream a peer may open,
    /// eagerly, in every connection (256 each way cost 25 KiB a
    /// connection, and a job of N PEs holds N - 1 of them per PE).
    pub streams: u32,
}

impl TransportSettings {
    /// Idle timeout = the op timeout (at least 2 s), keep-alive every 500 ms.
    pub fn for_op_timeout(op_timeout: Duration) -> Self {
        TransportSettings {
            idle_timeout: op_timeout.max(Duration::from_secs(2)),
            keep_alive: Duration::from_millis(500),
            progress: Progress::Sleep,
            security: Security::Insecure,
            segmentation_offload: true,
            known_mtu: None,
            streams: LINK_STREAMS,
        }
    }

    /// These settings with room for `streams` bidirectional streams at
    /// once (the stream-per-op benchmark opens one per op in flight).
    pub fn with_streams(mut self, streams: u32) -> Self {
        self.streams = streams;
        self
    }

    /// These settings with `progress`.
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    /// These settings with GSO on or off (see the field).
    pub fn with_segmentation_offload(mut self, on: bool) -> Self {
        self.segmentation_offload = on;
        self
    }

    /// These settings for a rank that listens on `addr`: on loopback GSO
    /// off and the MTU known.
    pub fn for_listen_addr(mut self, addr: SocketAddr) -> Self {
        let loopback = addr.ip().is_loopback();
        self.known_mtu = loopback.then_some(MTU_PROBE_MAX);
        self.with_segmentation_offload(!loopback)
    }

    /// These settings with `security`.
    pub fn with_security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self::for_op_timeout(Duration::from_secs(10))
    }
}

fn transport_config(s: &TransportSettings) -> Result<Arc<TransportConfig>> {
    let mut t = TransportConfig::default();
    // One request stream per connection, and no unidirectional ones:
    // quinn's 100/100 default holds state for 200 streams no link opens.
    t.max_concurrent_bidi_streams(VarInt::from_u32(s.streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(0));
    // quinn's 1.25 MB stream window would stall pipelined frames: allow
    // many whole frames per stream and more per connection.
    t.stream_receive_window(VarInt::from_u32(16 << 20));
    t.receive_window(VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    t.keep_alive_interval(Some(s.keep_alive));
    t.max_idle_timeout(Some(IdleTimeout::try_from(s.idle_timeout).map_err(
        |_| ConfigError::IdleTimeout {
            timeout: s.idle_timeout,
        },
    )?));
    // Ranks sit on one LAN or host: start loss recovery from a LAN RTT
    // rather than quinn's internet default of 333 ms.
    t.initial_rtt(Duration::from_millis(10));
    t.enable_segmentation_offload(s.segmentation_offload);
    // quinn stops MTU discovery at 1452 bytes. Let it go as far as the path
    // allows (64 KiB on loopback, 9000 with jumbo frames; on a 1500-byte
    // Ethernet path the probes simply fail and it stays at 1452): fewer,
    // bigger packets mean fewer encryptions and syscalls per byte.
    match s.known_mtu {
        Some(known) => {
            t.initial_mtu(known);
            t.mtu_discovery_config(None);
        }
        None => {
            let mut mtu = quinn::MtuDiscoveryConfig::default();
            mtu.upper_bound(MTU_PROBE_MAX);
            t.mtu_discovery_config(Some(mtu));
        }
    }
    // An MTU probe counts as bytes in flight until it is acknowledged or
    // declared lost, and a lost one is declared lost only when the probe
    // timeout fires (RTT + 4 RTT variance + the peer's 25 ms ACK delay).
    // With quinn's 14 720-byte initial window one 64 KiB probe alone fills
    // the window, so every op behind it waited for that: stalls of
    // remote ops at the start of each connection and at each periodic
    // re-probe (issue 12). A window of several probes lets ops pass a probe
    // in flight, lost or not; ranks sit on one LAN or host, where a burst of
    // this size is what any TCP stream sends too.
    let mut cc = quinn::congestion::CubicConfig::default();
    cc.initial_window(INITIAL_WINDOW);
    t.congestion_controller_factory(Arc::new(cc));
    Ok(Arc::new(t))
}

/// The bidirectional streams a link may have open at once: the one it
/// uses, and room for its replacement while a reconnect overlaps.
pub const LINK_STREAMS: u32 = 4;

/// The largest UDP payload QUIC may receive.
const MAX_UDP_PAYLOAD: u16 = 65_527;
/// The largest datagram MTU discovery probes for: the largest UDP payload
/// IPv4 can carry (65 535 - 20 - 8). quinn allows up to IPv6's 65 527, but
/// an IPv4 probe that large cannot be sent at all, so each of its three
/// tries was lost and blocked the connection until its probe timeout.
const MTU_PROBE_MAX: u16 = 65_507;
/// The congestion window a connection starts with: four of the largest
/// probes.
const INITIAL_WINDOW: u64 = 4 * MTU_PROBE_MAX as u64;
/// UDP socket buffers: enough for bursts of large datagrams without drops
/// (the kernel caps them at net.core.{r,w}mem_max).
const UDP_BUFFER: usize = 8 << 20;

/// A quinn endpoint on a socket of our own making: bigger buffers, and
/// room for datagrams as large as MTU discovery finds.
fn endpoint(addr: SocketAddr, server: Option<quinn::ServerConfig>) -> Result<quinn::Endpoint> {
    use socket2::{Domain, Protocol, Socket, Type};
    let io = |e| Error::io(format!("quic socket {addr}"), e);
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(io)?;
    // Best effort: a smaller buffer than asked for is still a working one.
    let _ = socket.set_recv_buffer_size(UDP_BUFFER);
    let _ = socket.set_send_buffer_size(UDP_BUFFER);
    socket.bind(&addr.into()).map_err(io)?;
    let mut config = quinn::EndpointConfig::default();
    config
        .max_udp_payload_size(MAX_UDP_PAYLOAD)
        .map_err(|error| ConfigError::QuicEndpoint { error })?;
    let runtime = quinn::default_runtime().ok_or(ConfigError::NoRuntime)?;
    quinn::Endpoint::new(config, server, socket.into(), runtime).map_err(io)
}

fn client_config(s: &TransportSettings) -> Result<quinn::ClientConfig> {
    let crypto = QuicClientConfig::try_from(tls::client_config(&s.security)?).map_err(|error| {
        TlsError::Quic {
            side: "client",
            error,
        }
    })?;
    let mut c = quinn::ClientConfig::new(Arc::new(crypto));
    c.transport_config(transport_config(s)?);
    Ok(c)
}

pub(super) fn bind(addr: SocketAddr, rank: u32, s: &TransportSettings) -> Result<quinn::Endpoint> {
    let crypto =
        QuicServerConfig::try_from(tls::server_config(rank, &s.security)?).map_err(|error| {
            TlsError::Quic {
                side: "server",
                error,
            }
        })?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport_config(s)?);
    let mut endpoint = endpoint(addr, Some(server))?;
    endpoint.set_default_client_config(client_config(s)?);
    Ok(endpoint)
}

pub(super) fn client_only(s: &TransportSettings) -> Result<quinn::Endpoint> {
    let any: SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut endpoint = endpoint(any, None)?;
    endpoint.set_default_client_config(client_config(s)?);
    Ok(endpoint)
}

pub(super) async fn dial(
    e: &quinn::Endpoint,
    addr: SocketAddr,
    peer: u32,
) -> io::Result<Connection> {
    let conn = e
        .connect(addr, &tls::server_name(peer))
        .map_err(|err| io::Error::other(err.to_string()))?
        .await?;
    let (send, recv) = conn.open_bi().await?;
    Ok(Connection {
        reader: PeerReader::Quic(recv),
        writer: PeerWriter::Quic(send),
        remote: addr,
        peer_cert: peer_cert(&conn),
        quic: Some(conn),
    })
}

pub(super) async fn establish(incoming: quinn::Incoming) -> io::Result<Connection> {
    let remote = incoming.remote_address();
    let conn = incoming.await?;
    let (send, recv) = conn.accept_bi().await?;
    Ok(Connection {
        reader: PeerReader::Quic(recv),
        writer: PeerWriter::Quic(send),
        remote,
        peer_cert: peer_cert(&conn),
        quic: Some(conn),
    })
}

/// The peer's certificate, if it showed one (mutual TLS).
fn peer_cert(conn: &quinn::Connection) -> Option<rustls::pki_types::CertificateDer<'static>> {
    let certs = conn
        .peer_identity()?
        .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
        .ok()?;
    certs.into_iter().next()
}
