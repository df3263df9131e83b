//! All TLS of the peer plane, in one place.
//!
//! With [`Security::Tls`] the peer plane is mutual TLS under a cluster CA
//! (QUIC's own TLS, and rustls over TCP): a rank dials `rank-P.pld` and
//! accepts only a server certificate of the CA that names that rank; it
//! accepts only client certificates of the CA, and serves a peer only if its
//! certificate names the rank its Hello claims. [`Security::Insecure`] is
//! the old plane: QUIC encrypts under a throwaway certificate that nobody
//! checks, TCP is plaintext, and anyone who can reach the port is served.
//!
//! Only rustls's `ring` provider is compiled in: with two providers rustls
//! cannot pick a default and panics at start.

mod certs;
mod insecure;

pub use certs::{ClusterCa, LOCAL_GRPC_NAMES, RankCert, TempTlsDir};

use crate::error::{ConfigError, Error, Result, TlsError};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ALPN protocol id of pld's peer plane.
pub const ALPN: &[u8] = b"pld/1";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS name a rank's certificate carries.
pub fn server_name(rank: u32) -> String {
    format!("rank-{rank}.pld")
}

/// How a rank's peer plane is secured.
#[derive(Debug, Clone, Default)]
pub enum Security {
    /// Not chosen: [`crate::Rank::start`] refuses to start.
    #[default]
    Unset,
    /// Mutual TLS under the cluster CA of this identity.
    Tls(Arc<Identity>),
    /// No authentication: any peer that reaches the port is served.
    Insecure,
}

impl Security {
    /// Loads `rank`'s material from a directory made by
    /// `pld-daemon certs` (see [`Identity::load`]).
    pub fn from_dir(dir: &Path, rank: u32) -> Result<Security> {
        Identity::load(dir, rank).map(|i| Security::Tls(Arc::new(i)))
    }

    /// Whether peers are authenticated.
    pub fn is_tls(&self) -> bool {
        matches!(self, Security::Tls(_))
    }
}

/// A rank's TLS material: the cluster CA, and its own certificate and key.
pub struct Identity {
    rank: u32,
    ca: CertificateDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("rank", &self.rank)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The certificate and key files of `rank` in `dir`.
    pub fn files(dir: &Path, rank: u32) -> (PathBuf, PathBuf) {
        (
            dir.join(format!("rank-{rank}.pem")),
            dir.join(format!("rank-{rank}.key")),
        )
    }

    /// Reads `ca.pem`, `rank-R.pem` and `rank-R.key` from `dir`.
    pub fn load(dir: &Path, rank: u32) -> Result<Identity> {
        let (cert, key) = Identity::files(dir, rank);
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| Error::io(format!("reading {}", p.display()), e))
        };
        Identity::from_pem(
            rank,
            &read(&dir.join("ca.pem"))?,
            &read(&cert)?,
            &read(&key)?,
        )
        .map_err(|e| match e {
            Error::Tls(error) => TlsError::Identity {
                cert: cert.clone(),
                dir: dir.to_path_buf(),
                error: Box::new(error),
            }
            .into(),
            other => other,
        })
    }

    /// `rank`'s identity from PEM text: the CA certificate, this rank's
    /// certificate (chain) and its private key. The certificate must name
    /// the rank.
    pub fn from_pem(rank: u32, ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Identity> {
        let pem = |what: &'static str| {
            move |error: rustls::pki_types::pem::Error| TlsError::Pem { what, error }
        };
        let ca = CertificateDer::from_pem_slice(ca).map_err(pem("CA certificate"))?;
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(pem("certificate"))?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(pem("private key"))?;
        let Some(leaf) = chain.first() else {
            return Err(TlsError::NoCertificate {
                what: "certificate file",
            }
            .into());
        };
        if !names_rank(leaf, rank) {
            return Err(TlsError::WrongRank {
                rank,
                name: server_name(rank),
            }
            .into());
        }
        Ok(Identity {
            rank,
            ca,
            chain,
            key,
        })
    }

    /// The rank this identity is for.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    fn roots(&self) -> Result<Arc<RootCertStore>> {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.ca.clone())
            .map_err(|error| TlsError::Rustls {
                what: "CA certificate",
                error,
            })?;
        Ok(Arc::new(roots))
    }
}

/// Whether `cert` names `rank` (its DNS name `rank-R.pld`).
pub(crate) fn names_rank(cert: &CertificateDer<'_>, rank: u32) -> bool {
    let Ok(name) = ServerName::try_from(server_name(rank)) else {
        return false;
    };
    webpki::EndEntityCert::try_from(cert)
        .is_ok_and(|c| c.verify_is_valid_for_subject_name(&name).is_ok())
}

fn tls(what: &'static str) -> impl Fn(rustls::Error) -> Error {
    move |error| TlsError::Rustls { what, error }.into()
}

/// The accepting side of the peer plane for `rank`.
pub(crate) fn server_config(rank: u32, security: &Security) -> Result<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls("TLS 1.3 with the ring provider"))?;
    let mut config = match security {
        Security::Tls(id) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                id.roots()?,
                provider(),
            )
            .build()
            .map_err(|error| TlsError::Verifier { error })?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(id.chain.clone(), id.key.clone_key())
                .map_err(tls("this rank's certificate and key"))?
        }
        Security::Insecure => insecure::server(builder, rank)?,
        Security::Unset => return Err(unset()),
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The server side of the gRPC client plane (`--grpc-tls`): a certificate
/// chain and key in PEM, TLS 1.2 or 1.3, ALPN `h2`, no client certificate.
pub fn grpc_server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<rustls::ServerConfig> {
    let pem = |what: &'static str| {
        move |error: rustls::pki_types::pem::Error| TlsError::Pem { what, error }
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(pem("gRPC TLS certificate"))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            what: "gRPC TLS certificate",
        }
        .into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(pem("gRPC TLS private key"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls("TLS with the ring provider"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(tls("gRPC TLS certificate and key"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The dialing side of the peer plane.
pub(crate) fn client_config(security: &Security) -> Result<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls("TLS 1.3 with the ring provider"))?;
    let mut config = match security {
        Security::Tls(id) => builder
            .with_root_certificates(id.roots()?)
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .map_err(tls("this rank's certificate and key"))?,
        Security::Insecure => insecure::client(builder),
        Security::Unset => return Err(unset()),
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// Why a rank with [`Security::Unset`] does not start.
pub(crate) fn unset() -> Error {
    ConfigError::NoSecurity.into()
}

/// If `e` says a TLS handshake failed on a certificate (ours rejected by
/// the peer, or theirs by us), why: an error to report, not to retry.
pub fn auth_failure(e: &std::io::Error) -> Option<String> {
    let inner = e.get_ref()?;
    if let Some(t) = inner.downcast_ref::<rustls::Error>() {
        return Some(t.to_string());
    }
    match inner.downcast_ref::<quinn::ConnectionError>()? {
        quinn::ConnectionError::TransportError(t) if is_crypto(t.code) => Some(t.to_string()),
        quinn::ConnectionError::ConnectionClosed(c) if is_crypto(c.error_code) => {
            Some(c.to_string())
        }
        _ => None,
    }
}

/// QUIC carries a TLS alert as transport error 0x100 + alert.
fn is_crypto(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}
