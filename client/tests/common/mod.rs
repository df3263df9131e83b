//! Helpers shared by the client-plane tests.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Each test crate uses some of these.
#![allow(dead_code)]
pub mod linear;

use pld_grpc::pld_client::PldClient;
use tonic::transport::Channel;

/// A raw tonic client of the daemon at `addr`, with room for large messages.
pub async fn raw(addr: &str) -> PldClient<Channel> {
    PldClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
    .max_decoding_message_size(64 << 20)
    .max_encoding_message_size(64 << 20)
}

/// A generic gRPC client of the daemon at `addr`, ready: for calls with
/// messages of the test's own making.
pub async fn grpc(addr: &str) -> tonic::client::Grpc<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc
}

/// GET /metrics over a plain TCP connection.
pub async fn scrape(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// The value of the first line of `body` (Prometheus text) that starts
/// with `prefix`.
pub fn metric(body: &str, prefix: &str) -> f64 {
    body.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{body}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse::<f64>()
        .unwrap()
}

/// `n` daemons (rank 0 serving Prometheus metrics too), started and
/// ready; the metrics address.
pub fn metered(
    t: pld_server::TransportKind,
    n: usize,
    args: &[&str],
) -> (pld_tests::GrpcCluster, String) {
    let metrics = pld_tests::loopback_peers(1).remove(0);
    let mut c = pld_tests::GrpcCluster::plan(t, n, args);
    c.spawn_with(0, &["--metrics", metrics.as_str()]);
    for r in 1..n as u32 {
        c.spawn(r);
    }
    for r in 0..n as u32 {
        c.daemon(r).wait_ready(std::time::Duration::from_secs(30));
    }
    (c, metrics)
}
