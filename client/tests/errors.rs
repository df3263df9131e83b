//! Every gRPC code the client plane documents, each produced by a real bad
//! request to real daemons — and after each, the daemon keeps serving and
//! no window byte changed.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use bytes::Bytes;
use common::raw;
use pld_client::{Chunking, Client, ClientOptions, Cmp, Code, Dtype, Layout, Shape, Transfer};
use pld_proto::v1::{self as pb, Region};
use pld_tests::{GrpcCluster, run};
use std::time::Duration;

const TOKEN: &str = "t0ken-for-tests";

fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    r
}

fn expect_code<T: std::fmt::Debug>(
    r: Result<T, pld_client::Error>,
    code: Code,
    has: &str,
) -> String {
    let e = r.expect_err("the request must fail");
    assert_eq!(e.code(), code, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(has),
        "{code:?}: '{msg}' does not mention '{has}'"
    );
    msg
}

fn status_code<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, has: &str) {
    let e = r.expect_err("the request must fail");
    assert_eq!(e.code(), code, "{}", e.message());
    assert!(
        e.message().contains(has),
        "'{}' does not mention '{has}'",
        e.message()
    );
}

#[test]
fn every_documented_error_code_comes_from_a_real_bad_request() {
    run(Duration::from_secs(120), async {
        let mut c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            2,
            &[
                "--client-token",
                TOKEN,
                "--op-timeout",
                "3s",
                "--sync-timeout",
                "3s",
            ],
        );
        let quick = |token: Option<&str>| ClientOptions {
            token: token.map(String::from),
            wait_ready: Duration::ZERO,
            ..Default::default()
        };

        // UNAUTHENTICATED: no token, a wrong one.
        expect_code(
            Client::connect_with(&c.grpc[0], quick(None)).await,
            Code::Unauthenticated,
            "no client token",
        );
        expect_code(
            Client::connect_with(&c.grpc[0], quick(Some("guess"))).await,
            Code::Unauthenticated,
            "wrong",
        );
        let cl = Client::connect_with(&c.grpc[0], quick(Some(TOKEN)))
            .await
            .expect("the right token");
        let data = cl.window("data").unwrap();
        let sig = cl.window("signal").unwrap();
        let mut raw = raw(&c.grpc[0]).await;
        // A marker that must survive every bad request below.
        cl.put(1, data, 0, b"marker").await.unwrap();

        // INVALID_ARGUMENT: alignment, dtype, shape, chunking.
        expect_code(
            cl.atomic_add(1, data, 2, Dtype::Fp32, &[0; 8]).await,
            Code::InvalidArgument,
            "offset 2",
        );
        expect_code(
            cl.fetch_add(1, data, 0, Dtype::Fp32, 1).await,
            Code::InvalidArgument,
            "fp32",
        );
        let overlapping = Transfer {
            dtype: Dtype::Fp32,
            shape: Shape { rows: 2, cols: 8 },
            dst: Layout {
                offset: 0,
                row_stride: 4,
            },
            src: Layout {
                offset: 0,
                row_stride: 8,
            },
        };
        expect_code(
            cl.put_region(1, data, &overlapping, &[1; 64], Chunking::default())
                .await,
            Code::InvalidArgument,
            "row stride",
        );
        let rows = Transfer {
            dst: Layout {
                offset: 0,
                row_stride: 8,
            },
            ..overlapping
        };
        let pipeline_only = Chunking {
            pipeline: true,
            ..Chunking::default()
        };
        expect_code(
            cl.put_region(1, data, &rows, &[1; 64], pipeline_only).await,
            Code::InvalidArgument,
            "pipeline needs both chunk_rows and chunk_cols",
        );
        status_code(
            raw.put(authed(pb::PutRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                data: Bytes::from_static(&[0; 8]),
                region: Some(Region {
                    rows: 1,
                    cols: 2,
                    row_stride: 2,
                    dtype: 99,
                }),
            }))
            .await,
            Code::InvalidArgument,
            "unknown dtype value 99",
        );

        // OUT_OF_RANGE: past the window's end.
        expect_code(
            cl.get(1, data, (16 << 20) - 4, 8).await,
            Code::OutOfRange,
            "window 'data'",
        );
        expect_code(
            cl.put(1, data, 16 << 20, b"x").await,
            Code::OutOfRange,
            "16777216",
        );

        // NOT_FOUND: a window, a rank.
        status_code(
            raw.get(authed(pb::GetRequest {
                rank: 1,
                window: "nope".into(),
                offset: 0,
                len: 4,
                region: None,
            }))
            .await,
            Code::NotFound,
            "window 'nope' does not exist",
        );
        expect_code(cl.get(9, data, 0, 4).await, Code::NotFound, "rank 9");

        // Message limits: a unary message over the limit is refused by the
        // transport; a unary get over it is told to stream.
        let e = raw
            .put(authed(pb::PutRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                data: Bytes::from(vec![7u8; 5 << 20]),
                region: None,
            }))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
        status_code(
            raw.get(authed(pb::GetRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                len: 5 << 20,
                region: None,
            }))
            .await,
            Code::ResourceExhausted,
            "use GetStream",
        );

        // A PutStream is checked whole before its first byte lands.
        let header = |offset, len| pb::PutStreamRequest {
            header: Some(pb::PutStreamHeader {
                rank: 1,
                window: "data".into(),
                offset,
                len,
                ..Default::default()
            }),
            data: Bytes::new(),
        };
        let body = pb::PutStreamRequest {
            header: None,
            data: Bytes::from(vec![9u8; 1 << 20]),
        };
        status_code(
            raw.put_stream(authed(tokio_stream::iter([
                header((16 << 20) - (1 << 20), 2 << 20),
                body.clone(),
            ])))
            .await,
            Code::OutOfRange,
            "do not fit",
        );
        status_code(
            raw.put_stream(authed(tokio_stream::iter([
                header(1 << 20, 100),
                body.clone(),
            ])))
            .await,
            Code::InvalidArgument,
            "the stream carried",
        );

        // DEADLINE_EXCEEDED: a wait and a barrier that cannot finish say why.
        let msg = expect_code(
            cl.wait_within(sig, 8, Cmp::Eq, 5, Duration::from_millis(300))
                .await,
            Code::DeadlineExceeded,
            "signal",
        );
        assert!(msg.contains("last"), "{msg}");
        let msg = expect_code(
            cl.barrier_within(Duration::from_millis(500)).await,
            Code::DeadlineExceeded,
            "rank 1",
        );
        assert!(msg.contains("epoch"), "{msg}");

        // No window byte changed, and the daemon serves on.
        assert_eq!(&cl.get(1, data, 0, 6).await.unwrap()[..], b"marker");
        assert!(
            cl.get(1, data, 1 << 20, 1 << 20)
                .await
                .unwrap()
                .iter()
                .all(|b| *b == 0)
        );
        // The PutStream refused for its range wrote none of the part that
        // would have fit.
        assert!(
            cl.get(1, data, (16 << 20) - (1 << 20), 1 << 20)
                .await
                .unwrap()
                .iter()
                .all(|b| *b == 0),
            "the refused PutStream's first megabyte landed"
        );

        // UNAVAILABLE: the peer is gone.
        c.daemon(1).kill();
        expect_code(
            cl.put(1, data, 0, b"after death").await,
            Code::Unavailable,
            "rank 1",
        );
        cl.put(0, data, 0, b"self").await.unwrap();
        assert_eq!(&cl.get(0, data, 0, 4).await.unwrap()[..], b"self");
    });
}
