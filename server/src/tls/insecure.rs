//! [`super::Security::Insecure`]: a throwaway self-signed certificate on the
//! accepting side, and a dialer that accepts any certificate (but still
//! checks that the handshake is signed by its key). Encrypted on QUIC,
//! authenticated nowhere.

use super::server_name;
use crate::error::{Result, TlsError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ConfigBuilder, DigitallySignedStruct, SignatureScheme, WantsVerifier};
use std::sync::Arc;

pub(super) fn server(
    builder: ConfigBuilder<rustls::ServerConfig, WantsVerifier>,
    rank: u32,
) -> Result<rustls::ServerConfig> {
    let cert = rcgen::generate_simple_self_signed(vec![server_name(rank)]).map_err(|error| {
        TlsError::Generate {
            what: format!("certificate for rank {rank}"),
            error,
        }
    })?;
    let key = PrivateKeyDer::from(cert.signing_key);
    builder
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .map_err(|error| {
            TlsError::Rustls {
                what: "self-signed certificate",
                error,
            }
            .into()
        })
}

pub(super) fn client(
    builder: ConfigBuilder<rustls::ClientConfig, WantsVerifier>,
) -> rustls::ClientConfig {
    let verifier = AnyServerCert {
        algorithms: super::provider().signature_verification_algorithms,
    };
    builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth()
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
