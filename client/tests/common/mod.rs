//! Helpers shared by the client-plane tests.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::v1::pld_client::PldClient;
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
