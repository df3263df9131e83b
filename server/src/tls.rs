//! All TLS setup of the QUIC peer plane, in one place.
//!
//! For now every rank makes a throwaway self-signed certificate at start and
//! dialers accept any certificate: the connection is encrypted but not
//! authenticated. The hardening issue replaces this module with a cluster CA
//! and mutual TLS; nothing outside it builds rustls configurations.
//!
//! Only rustls's `ring` provider is compiled in: with two providers rustls
//! cannot pick a default and panics at start.

use crate::error::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
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

/// The server side: a fresh self-signed certificate for `rank`.
pub fn server_config(rank: u32) -> Result<rustls::ServerConfig> {
    let cert = rcgen::generate_simple_self_signed(vec![server_name(rank)])
        .map_err(|e| Error::Tls(format!("certificate for rank {rank}: {e}")))?;
    let key = PrivateKeyDer::from(cert.signing_key);
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .map_err(|e| Error::Tls(e.to_string()))?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The client side: accepts any server certificate (see the module docs).
pub fn client_config() -> Result<rustls::ClientConfig> {
    let provider = provider();
    let verifier = AnyServerCert {
        algorithms: provider.signature_verification_algorithms,
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// Accepts any certificate but still checks that the handshake is signed by
/// the certificate's key.
#[derive(Debug)]
struct AnyServerCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
