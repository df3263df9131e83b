//! Connecting to a daemon: options, TLS, name resolution that works in a
//! static binary, and retrying until the daemon's mesh is up.

use crate::client::Client;
use crate::error::{Error, Result};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::{self as pb, InfoResponse};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Endpoint;

/// What a message may hold beyond its data.
const MESSAGE_OVERHEAD: usize = 64 << 10;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The daemon's client token (`pld-daemon --client-token`).
    pub token: Option<String>,
    /// How long to keep trying while the daemon is not up, or up but still
    /// connecting to its peers (NOT_SERVING). Zero: one attempt, and a
    /// daemon whose mesh is not up is an error.
    pub wait_ready: Duration,
    /// Talk TLS (`pld-daemon --grpc-tls`), trusting this CA certificate
    /// (PEM; the cluster's `ca.pem`). `None`: plaintext.
    pub tls_ca: Option<Vec<u8>>,
    /// The name the daemon's certificate must carry; by default the host
    /// part of the address dialed.
    pub tls_domain: Option<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            wait_ready: Duration::from_secs(30),
            tls_ca: None,
            tls_domain: None,
        }
    }
}

impl Client {
    /// Connects to the daemon at `HOST:PORT` and waits (up to 30 s) until
    /// its mesh is up.
    pub async fn connect(addr: &str) -> Result<Client> {
        Client::connect_with(addr, ClientOptions::default()).await
    }

    /// Connects with explicit options.
    pub async fn connect_with(addr: &str, opts: ClientOptions) -> Result<Client> {
        let token = match &opts.token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| Error::InvalidArgument("the client token is not ASCII".into()))?,
            ),
            None => None,
        };
        let scheme = if opts.tls_ca.is_some() {
            "https"
        } else {
            "http"
        };
        let tls = opts.tls_ca.as_ref().map(|ca| {
            // The name to verify: given, or the host of HOST:PORT / a URI.
            let host = addr
                .rsplit("://")
                .next()
                .unwrap_or(addr)
                .rsplit_once(':')
                .map_or(addr, |(h, _)| h)
                .trim_matches(|c| c == '[' || c == ']');
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(ca))
                .domain_name(opts.tls_domain.clone().unwrap_or_else(|| host.to_string()))
        });
        let endpoint_of = |uri: String| -> Result<Endpoint> {
            let mut endpoint = Endpoint::from_shared(uri).map_err(|e| Error::Connect {
                addr: addr.into(),
                reason: format!("not an address: {e}"),
            })?;
            if let Some(tls) = &tls {
                endpoint = endpoint
                    .tls_config(tls.clone())
                    .map_err(|e| Error::Connect {
                        addr: addr.into(),
                        reason: format!("TLS: {e}"),
                    })?;
            }
            Ok(endpoint
                .connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true)
                .initial_stream_window_size(Some(8 << 20))
                .initial_connection_window_size(Some(16 << 20))
                .http2_keep_alive_interval(Duration::from_secs(20)))
        };
        // A full URI is used as it is; HOST:PORT is resolved here, which
        // also works in a static binary without NSS (the container image).
        let fixed = if addr.contains("://") {
            Some(endpoint_of(addr.to_string())?)
        } else {
            endpoint_of(format!("{scheme}://{addr}"))?;
            None
        };
        // A saturating deadline: `wait_ready` is the caller's to choose.
        let deadline = Instant::now()
            .checked_add(opts.wait_ready)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let mut backoff = Duration::from_millis(20);
        loop {
            let attempt = async {
                let endpoint = match &fixed {
                    Some(e) => e.clone(),
                    None => {
                        let ip = pld_resolve::resolve(addr)
                            .await
                            .map_err(|e| Error::Connect {
                                addr: addr.into(),
                                reason: e.to_string(),
                            })?;
                        endpoint_of(format!("{scheme}://{ip}"))?
                    }
                };
                let channel = endpoint.connect().await.map_err(|e| Error::Connect {
                    addr: addr.into(),
                    reason: source_chain(&e),
                })?;
                let grpc = PldClient::new(channel)
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX);
                let mut c = Client {
                    grpc,
                    addr: addr.into(),
                    token: token.clone(),
                    info: InfoResponse::default(),
                };
                c.refresh()
                    .await
                    .map_err(|e| first_call(addr, e, tls.is_some()))?;
                Ok::<_, Error>(c)
            };
            let e = match attempt.await {
                Ok(c) if c.info.ready => return Ok(c.limited()),
                Ok(c) => Error::Status {
                    addr: addr.into(),
                    code: Code::Unavailable,
                    message: format!(
                        "rank {} is still connecting to its peers (not ready)",
                        c.info.rank
                    ),
                    detail: Some(crate::error::Detail {
                        reason: "NOT_READY".into(),
                        metadata: [("rank".to_string(), c.info.rank.to_string())].into(),
                        field: None,
                    }),
                },
                Err(e) => e,
            };
            let retry =
                matches!(e.code(), Code::Unavailable) && Instant::now() + backoff < deadline;
            if !retry {
                return Err(e);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    /// Applies the daemon's message limit to this side too.
    fn limited(mut self) -> Client {
        let limit = self.max_data() + MESSAGE_OVERHEAD;
        self.grpc = self
            .grpc
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        self
    }

    /// Asks the daemon who it is again.
    pub async fn refresh(&mut self) -> Result<&InfoResponse> {
        self.info = self
            .call(
                pb::InfoRequest {},
                |mut g, r| async move { g.info(r).await },
            )
            .await?;
        Ok(&self.info)
    }
}

/// The first call on a new connection failing in the transport (tonic's
/// UNKNOWN "transport error": the HTTP/2 handshake itself failed; or "h2
/// protocol error" when the answer's first bytes are not HTTP/2, as a TLS
/// server's are, seen under load) is a failure to connect, not the
/// daemon's answer; the usual cause is a plaintext client at a daemon
/// whose client plane speaks TLS.
fn first_call(addr: &str, e: Error, tls: bool) -> Error {
    let hint = if tls {
        ""
    } else {
        "; if the daemon serves its client plane over TLS (--grpc-tls), connect with its CA (tls_ca, pld --tls-ca)"
    };
    match e {
        Error::Status {
            code: Code::Unknown,
            ref message,
            ..
        } if message.contains("transport error") || message.contains("h2 protocol error") => {
            Error::Connect {
                addr: addr.into(),
                reason: format!(
                    "the connection failed before the daemon answered ({message}){hint}"
                ),
            }
        }
        e => e,
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(message: &str) -> Error {
        Error::Status {
            addr: "a:1".into(),
            code: Code::Unknown,
            message: message.into(),
            detail: None,
        }
    }

    #[test]
    fn a_first_call_failing_in_the_transport_is_a_connect_error_with_the_tls_hint() {
        for m in ["transport error", "h2 protocol error: http2 error"] {
            match first_call("a:1", unknown(m), false) {
                Error::Connect { reason, .. } => {
                    assert!(reason.contains(m), "{reason}");
                    assert!(
                        reason.contains("(--grpc-tls), connect with its CA"),
                        "{reason}"
                    );
                }
                other => panic!("{m}: {other:?}"),
            }
        }
        // The daemon's own answers stay what they are.
        assert!(matches!(
            first_call("a:1", unknown("something else"), false),
            Error::Status { .. }
        ));
    }
}
