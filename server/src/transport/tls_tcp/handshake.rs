//! The TLS 1.3 handshake over TCP, made by rustls's unbuffered API, and the
//! hand-over of the connection's keys to our record layer (`record.rs`).
//!
//! rustls drives the handshake (certificates, mutual authentication, key
//! schedule) over buffers we read and write; once it is complete, the
//! traffic secrets and sequence numbers are taken out of rustls
//! (`dangerous_into_kernel_connection`, the kTLS hand-over) and rustls
//! keeps only what it needs to derive the next keys of a KeyUpdate —
//! [`Kernel`]. Application data that arrived with the last handshake
//! flight was decrypted by rustls and is handed over as plaintext; bytes
//! after it as ciphertext.

use super::record::MAX_OPENED;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, InsufficientSizeError, UnbufferedConnectionCommon,
    UnbufferedStatus,
};
use rustls::{ConnectionTrafficSecrets, ExtractedSecrets};
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most a handshake flight may take in our buffer before we give up.
const MAX_FLIGHT: usize = 256 * 1024;

/// What rustls keeps after the hand-over: the key schedule, for KeyUpdate.
pub(crate) enum Kernel {
    /// We dialed.
    Client(KernelConnection<ClientConnectionData>),
    /// We accepted.
    Server(KernelConnection<ServerConnectionData>),
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kernel::Client(_) => "Kernel::Client",
            Kernel::Server(_) => "Kernel::Server",
        })
    }
}

impl Kernel {
    /// The next sending key (we send a KeyUpdate under the current one first).
    pub(crate) fn update_tx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_tx_secret(),
            Kernel::Server(k) => k.update_tx_secret(),
        }
    }

    /// The peer's next sending key, after its KeyUpdate.
    pub(crate) fn update_rx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_rx_secret(),
            Kernel::Server(k) => k.update_rx_secret(),
        }
    }

    /// A session ticket from the server (we never resume; rustls stores it).
    pub(crate) fn new_session_ticket(&mut self, body: &[u8]) -> Result<(), rustls::Error> {
        match self {
            Kernel::Client(k) => k.handle_new_session_ticket(body),
            Kernel::Server(_) => Err(rustls::Error::General(
                "a client sent a session ticket".into(),
            )),
        }
    }

    /// Records one key may seal before it must be replaced.
    pub(crate) fn confidentiality_limit(&self) -> u64 {
        let suite = match self {
            Kernel::Client(k) => k.negotiated_cipher_suite(),
            Kernel::Server(k) => k.negotiated_cipher_suite(),
        };
        suite
            .tls13()
            .map_or(1 << 23, |s| s.common.confidentiality_limit)
    }
}

/// A completed handshake, handed over.
#[derive(Debug)]
pub(crate) struct Done {
    pub secrets: Secrets,
    pub kernel: Kernel,
    /// Application data rustls decrypted with the handshake's last flight.
    pub plaintext: Vec<u8>,
    /// Bytes received after that: the start of the next records.
    pub ciphertext: Vec<u8>,
    /// The peer's end-entity certificate.
    pub peer_cert: Option<CertificateDer<'static>>,
}

/// The traffic secrets (kept out of `Debug`).
pub(crate) struct Secrets(pub ExtractedSecrets);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

/// Drives `conn` through the handshake with `process`, then hands its keys
/// over as a [`Done`] whose kernel is `Kernel::$side`.
macro_rules! hand_over {
    ($conn:ident, $data:ty, $side:ident, $stream:expr) => {{
        let (plaintext, ciphertext) = drive(
            &mut $conn,
            UnbufferedConnectionCommon::<$data>::process_tls_records,
            $stream,
        )
        .await?;
        let peer_cert = $conn.peer_certificates().and_then(|c| c.first()).cloned();
        let (secrets, kernel) = $conn
            .dangerous_into_kernel_connection()
            .map_err(tls_error)?;
        Ok(Done {
            secrets: Secrets(secrets),
            kernel: Kernel::$side(kernel),
            plaintext,
            ciphertext,
            peer_cert,
        })
    }};
}

/// Makes the handshake as the client that dialed `name`.
pub(crate) async fn client(
    stream: &mut TcpStream,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<Done> {
    let mut conn = UnbufferedClientConnection::new(config, name).map_err(tls_error)?;
    hand_over!(conn, ClientConnectionData, Client, stream)
}

/// Makes the handshake as the server that accepted `stream`.
pub(crate) async fn server(
    stream: &mut TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> io::Result<Done> {
    let mut conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
    hand_over!(conn, ServerConnectionData, Server, stream)
}

/// A rustls error as an I/O error that `tls::auth_failure` recognises.
pub(crate) fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

type Process<Data> = for<'c, 'i> fn(
    &'c mut UnbufferedConnectionCommon<Data>,
    &'i mut [u8],
) -> UnbufferedStatus<'c, 'i, Data>;

/// What the driver does after rustls has said what it wants.
enum Next {
    Again,
    Read,
    Done,
    Failed(rustls::Error),
}

/// Runs the handshake to its end: returns the plaintext rustls decrypted
/// after it and the ciphertext left over. On a failure, the alert rustls
/// queued goes to the peer before the error is returned.
async fn drive<Data>(
    conn: &mut UnbufferedConnectionCommon<Data>,
    process: Process<Data>,
    stream: &mut TcpStream,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut incoming = vec![0u8; MAX_OPENED];
    let mut used = 0;
    let mut outgoing = vec![0u8; 4096];
    let mut queued = 0;
    let mut plaintext = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = process(conn, &mut incoming[..used]);
        let next = match state {
            Err(e) => Next::Failed(e),
            Ok(ConnectionState::EncodeTlsData(mut s)) => loop {
                match s.encode(&mut outgoing[queued..]) {
                    Ok(n) => {
                        queued += n;
                        break Next::Again;
                    }
                    Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                        outgoing.resize(queued + required_size, 0);
                    }
                    Err(e) => return Err(io::Error::other(e.to_string())),
                }
            },
            Ok(ConnectionState::TransmitTlsData(t)) => {
                stream.write_all(&outgoing[..queued]).await?;
                queued = 0;
                t.done();
                Next::Again
            }
            Ok(ConnectionState::BlockedHandshake) => Next::Read,
            Ok(ConnectionState::ReadTraffic(mut r)) => {
                while let Some(record) = r.next_record() {
                    plaintext.extend_from_slice(record.map_err(tls_error)?.payload);
                }
                Next::Again
            }
            // The server may send before the client's last flight arrived;
            // the handshake is complete once both sides may.
            Ok(ConnectionState::WriteTraffic(_)) => Next::Done,
            Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ));
            }
            Ok(other) => {
                return Err(io::Error::other(format!(
                    "unexpected TLS handshake state {other:?}"
                )));
            }
        };
        incoming.copy_within(discard..used, 0);
        used -= discard;
        match next {
            Next::Again => {}
            Next::Failed(e) => {
                send_alert(conn, process, stream, &mut incoming[..used]).await;
                return Err(tls_error(e));
            }
            Next::Done if !conn.is_handshaking() => {
                incoming.truncate(used);
                return Ok((plaintext, incoming));
            }
            Next::Read | Next::Done => {
                if used == incoming.len() {
                    if incoming.len() >= MAX_FLIGHT {
                        return Err(io::Error::other("TLS handshake flight too large"));
                    }
                    incoming.resize(incoming.len() * 2, 0);
                }
                let n = stream.read(&mut incoming[used..]).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ));
                }
                used += n;
            }
        }
    }
}

/// Best effort: writes the alert rustls queued when the handshake failed,
/// so that the peer learns why (a refused certificate, say).
async fn send_alert<Data>(
    conn: &mut UnbufferedConnectionCommon<Data>,
    process: Process<Data>,
    stream: &mut TcpStream,
    incoming: &mut [u8],
) {
    // rustls hands out the alert it queued before it looks at `incoming`
    // again (which must be what is left of the buffer, as on every call).
    // Only once: after a failure it must not process records again.
    if !conn.wants_write() {
        return;
    }
    let mut out = vec![0u8; 512];
    let UnbufferedStatus { state, .. } = process(conn, incoming);
    if let Ok(ConnectionState::EncodeTlsData(mut s)) = state
        && let Ok(n) = s.encode(&mut out)
    {
        let _ = stream.write_all(&out[..n]).await;
    }
}
