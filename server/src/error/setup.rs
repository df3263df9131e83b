//! Why a rank or its client plane does not start: configuration that
//! cannot form a rank, and TLS material that cannot be used. Each variant
//! names the setting (and its flag) or the file at fault.

use std::path::PathBuf;

/// A configuration that cannot form a rank.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No peers were given.
    #[error("the peer list is empty; give every rank's HOST:PORT in rank order")]
    NoPeers,
    /// The rank id is not an index of the peer list.
    #[error("rank {rank} is not in the peer list of {nranks} ranks (0 to {last})", last = .nranks.saturating_sub(1))]
    RankNotInPeers { rank: u32, nranks: u32 },
    /// A peer entry is not `HOST:PORT`.
    #[error("peer {index} '{peer}' is not HOST:PORT")]
    BadPeer { index: usize, peer: String },
    /// No window was configured.
    #[error("at least one window is needed")]
    NoWindows,
    /// Two windows share a name.
    #[error("window '{name}' is given twice")]
    DuplicateWindow { name: String },
    /// A window of no bytes.
    #[error("window '{name}' has size 0")]
    EmptyWindow { name: String },
    /// A window larger than pld allows.
    #[error(
        "window '{name}' of {size} bytes is larger than pld allows (at most {max} bytes, 1 TiB)"
    )]
    WindowTooLarge { name: String, size: u64, max: u64 },
    /// The memory for a window could not be allocated.
    #[error("window '{name}': could not allocate {size} bytes")]
    WindowAlloc { name: String, size: u64 },
    /// The TLS identity belongs to another rank.
    #[error("the TLS identity is rank {identity}'s, but this is rank {rank}")]
    IdentityOfOtherRank { identity: u32, rank: u32 },
    /// The cluster id is empty.
    #[error("the cluster id is empty")]
    EmptyClusterId,
    /// A setting outside the range pld accepts.
    #[error("{what} of {got} is out of range (--{flag}): give {range}")]
    OutOfRange {
        what: &'static str,
        flag: &'static str,
        got: String,
        range: String,
    },
    /// Neither TLS material nor `--insecure` was given.
    #[error(
        "no TLS material: give --tls-dir DIR (Security::Tls; `pld-daemon certs --ranks N \
         --out DIR` makes it), or --insecure (Security::Insecure) to run the peer plane \
         unauthenticated"
    )]
    NoSecurity,
    /// The client plane would listen beyond loopback with no token.
    #[error(
        "the gRPC port {addr} is not a loopback address and no client token is set: \
         without --client-token the client plane binds to loopback only"
    )]
    PublicWithoutToken { addr: std::net::SocketAddr },
    /// The client token is the empty string.
    #[error("the client token is empty")]
    EmptyToken,
    /// QUIC's idle timeout cannot be encoded.
    #[error("a QUIC idle timeout of {timeout:?} is too large for QUIC to encode")]
    IdleTimeout { timeout: std::time::Duration },
    /// quinn refused the endpoint settings.
    #[error("QUIC endpoint settings: {error}")]
    QuicEndpoint { error: quinn::ConfigError },
    /// QUIC was started outside a tokio runtime.
    #[error("QUIC needs a tokio runtime; start the rank inside one")]
    NoRuntime,
    /// The daemon's gRPC reflection service could not be built.
    #[error("gRPC reflection: {error}")]
    Reflection {
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The task that connected to a peer died (panicked or was cancelled).
    #[error("connecting to a peer failed: {error}")]
    ConnectTask { error: tokio::task::JoinError },
}

/// TLS material that cannot be used.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file or text does not parse.
    #[error("{what}: {error}")]
    Pem {
        what: &'static str,
        error: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{what}: no certificate in the PEM")]
    NoCertificate { what: &'static str },
    /// The certificate does not name the rank it is for.
    #[error("the certificate does not name rank {rank} ({name})")]
    WrongRank { rank: u32, name: String },
    /// A rank's identity files could not be used.
    #[error("{} (in {}): {error}", .cert.display(), .dir.display())]
    Identity {
        cert: PathBuf,
        dir: PathBuf,
        error: Box<TlsError>,
    },
    /// rustls refused a certificate, key or setting.
    #[error("{what}: {error}")]
    Rustls {
        what: &'static str,
        error: rustls::Error,
    },
    /// The client-certificate verifier could not be built.
    #[error("client certificate verifier: {error}")]
    Verifier {
        error: rustls::server::VerifierBuilderError,
    },
    /// quinn refused the TLS configuration (no TLS 1.3 cipher suite).
    #[error("QUIC {side} TLS configuration: {error}")]
    Quic {
        side: &'static str,
        error: quinn::crypto::rustls::NoInitialCipherSuite,
    },
    /// rcgen could not make a key or certificate.
    #[error("{what}: {error}")]
    Generate { what: String, error: rcgen::Error },
}
