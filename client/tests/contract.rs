//! The client plane's contract at its edges, as docs/client.md and the
//! .proto files state it: the message limit is exact and "too large" has
//! one code, a region's stride 0 means packed, empty transfers are no-ops,
//! errors name their own op and print ranks and dtypes as people read
//! them, and reflection answers in both of its versions.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use bytes::Bytes;
use common::raw;
use pld_proto::v1::{self as pb, Region};
use pld_tests::{GrpcCluster, run};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

/// Data bytes one unary message may carry (the daemons' default).
const LIMIT: usize = 4 << 20;

fn refused<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, has: &str) -> String {
    let e = r.expect_err("the request must fail");
    assert_eq!(e.code(), code, "{}", e.message());
    assert!(
        e.message().contains(has),
        "'{}' does not say '{has}'",
        e.message()
    );
    e.message().to_string()
}

fn put(rank: u32, offset: u64, data: Vec<u8>, region: Option<Region>) -> pb::PutRequest {
    pb::PutRequest {
        rank,
        window: "data".into(),
        offset,
        data: Bytes::from(data),
        region,
    }
}

fn get(rank: u32, offset: u64, len: u64) -> pb::GetRequest {
    pb::GetRequest {
        rank,
        window: "data".into(),
        offset,
        len,
        region: None,
    }
}

#[test]
fn the_message_limit_is_exact_and_too_large_has_one_code() {
    run(Duration::from_secs(120), async {
        let c = GrpcCluster::start(pld_server::TransportKind::Tcp, 2, &[]);
        let mut p = raw(&c.grpc[0]).await;
        // Exactly the limit passes; one byte more does not, though it is
        // within tonic's own allowance for the message's overhead.
        p.put(put(1, 0, vec![1; LIMIT], None)).await.unwrap();
        let msg = refused(
            p.put(put(1, 0, vec![2; LIMIT + 1], None)).await,
            Code::ResourceExhausted,
            "exceeds the message limit of 4194304 bytes",
        );
        assert!(msg.contains("PutStream"), "{msg}");
        refused(
            p.atomic_add(pb::AtomicAddRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                dtype: pb::Dtype::Int32 as i32,
                data: Bytes::from(vec![0; LIMIT + 4]),
                region: None,
            })
            .await,
            Code::ResourceExhausted,
            "AtomicAdd of 4194308 bytes exceeds the message limit",
        );
        refused(
            p.get(get(1, 0, LIMIT as u64 + 1)).await,
            Code::ResourceExhausted,
            "use GetStream",
        );
        refused(
            p.all_reduce(pb::AllReduceRequest {
                dtype: pb::Dtype::Int32 as i32,
                data: Bytes::from(vec![0; LIMIT + 4]),
                op: pb::ReduceOp::Sum as i32,
                algo: pb::Algo::Ring as i32,
            })
            .await,
            Code::ResourceExhausted,
            "exceeds the message limit",
        );
        // Nothing of the refused ones landed.
        let back = p.get(get(1, 0, 8)).await.unwrap().into_inner().data;
        assert_eq!(&back[..], &[1; 8]);
    });
}

#[test]
fn stride_zero_is_packed_and_empty_transfers_are_no_ops() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(pld_server::TransportKind::Tcp, 2, &[]);
        let mut p = raw(&c.grpc[0]).await;
        let region = |rows, cols, row_stride| Region {
            rows,
            cols,
            row_stride,
            dtype: pb::Dtype::Int8 as i32,
        };
        p.put(put(1, 0, vec![9; 32], None)).await.unwrap();
        // Stride 0: packed rows, as stride = cols.
        let rows: Vec<u8> = (1..=8).collect();
        p.put(put(1, 4, rows.clone(), Some(region(2, 4, 0))))
            .await
            .unwrap();
        let back = p.get(get(1, 0, 16)).await.unwrap().into_inner().data;
        assert_eq!(&back[..], &[9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9]);
        // Any other stride below the row is refused.
        refused(
            p.put(put(1, 4, rows, Some(region(2, 4, 2)))).await,
            Code::InvalidArgument,
            "stride",
        );
        // Empty transfers succeed and move nothing.
        p.put(put(1, 0, vec![], None)).await.unwrap();
        p.put(put(1, 0, vec![], Some(region(0, 0, 0))))
            .await
            .unwrap();
        p.put(put(1, 0, vec![], Some(region(3, 0, 0))))
            .await
            .unwrap();
        p.atomic_add(pb::AtomicAddRequest {
            rank: 1,
            window: "data".into(),
            offset: 0,
            dtype: pb::Dtype::Int32 as i32,
            data: Bytes::new(),
            region: None,
        })
        .await
        .unwrap();
        let empty = p.get(get(1, 0, 0)).await.unwrap().into_inner().data;
        assert!(empty.is_empty());
        let after = p.get(get(1, 0, 16)).await.unwrap().into_inner().data;
        assert_eq!(after, back);
    });
}

#[test]
fn errors_name_their_own_op_and_read_as_people_write() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            4,
            &[
                "--window",
                "data=16MiB",
                "--window",
                "signal=64KiB",
                "--window",
                "collective=1MiB",
            ],
        );
        let mut p = raw(&c.grpc[0]).await;
        let wait = |offset| pb::WaitRequest {
            window: "signal".into(),
            offset,
            cmp: pb::Cmp::Eq as i32,
            value: 0,
            timeout_ms: 100,
        };
        let msg = refused(p.wait(wait(2)).await, Code::InvalidArgument, "offset 2");
        assert!(msg.starts_with("wait on rank 0's signal cell"), "{msg}");
        let msg = refused(
            p.test(pb::TestRequest {
                window: "signal".into(),
                offset: 64 << 10,
                cmp: pb::Cmp::Eq as i32,
                value: 0,
            })
            .await,
            Code::OutOfRange,
            "",
        );
        assert!(msg.starts_with("test on rank 0's signal cell"), "{msg}");
        let msg = refused(
            p.put(put(4, 0, vec![1], None)).await,
            Code::NotFound,
            "rank 4 does not exist: the cluster has ranks 0 to 3",
        );
        assert!(!msg.contains(".."), "{msg}");
        let msg = refused(
            p.broadcast(pb::BroadcastRequest {
                dtype: pb::Dtype::Int32 as i32,
                data: Bytes::from(vec![0; 8]),
                root: 99,
            })
            .await,
            Code::InvalidArgument,
            "root 99 is not a rank: the ranks are 0 to 3",
        );
        assert!(!msg.contains(".."), "{msg}");
        refused(
            p.atomic_add(pb::AtomicAddRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                dtype: pb::Dtype::Fp32 as i32,
                data: Bytes::from(vec![0; 8]),
                region: Some(Region {
                    rows: 1,
                    cols: 2,
                    row_stride: 2,
                    dtype: pb::Dtype::Int32 as i32,
                }),
            })
            .await,
            Code::InvalidArgument,
            "the region's dtype int32 differs from the call's fp32",
        );
    });
}

#[test]
fn reflection_answers_in_v1_and_v1alpha() {
    use tonic_reflection::pb::{v1, v1alpha};
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(pld_server::TransportKind::Tcp, 1, &[]);
        let channel = Channel::from_shared(format!("http://{}", c.grpc[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let req = v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            )),
        };
        let mut v1c = v1::server_reflection_client::ServerReflectionClient::new(channel.clone());
        let mut answers = v1c
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner();
        let answer = answers.message().await.unwrap().expect("a v1 answer");
        assert!(format!("{answer:?}").contains("pld.v1.Pld"), "{answer:?}");
        let req = v1alpha::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
            ),
        };
        let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel);
        let mut answers = alpha
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner();
        let answer = answers.message().await.unwrap().expect("a v1alpha answer");
        assert!(format!("{answer:?}").contains("pld.v1.Pld"), "{answer:?}");
    });
}

#[test]
fn the_client_streams_in_messages_the_daemon_accepts() {
    run(Duration::from_secs(60), async {
        // A limit below the client's 1 MiB stream messages.
        let c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            2,
            &["--grpc-max-message", "64KiB"],
        );
        let cl = pld_client::Client::connect(&c.grpc[0]).await.unwrap();
        assert_eq!(cl.max_data(), 64 << 10);
        let data = cl.window("data").unwrap();
        let bytes = pld_tests::pattern((1 << 20) + 3, 21);
        cl.put(1, data, 0, &bytes).await.unwrap();
        assert!(cl.get(1, data, 0, bytes.len() as u64).await.unwrap()[..] == bytes[..]);
    });
}
