//! Every error reason a gRPC client can meet (docs/client.md, "Errors a
//! program can match on"), each produced by a real request to real
//! daemons and matched on its reason and code, as a program would. The
//! Python client's `test_reasons.py` produces the same set. The reasons of
//! the embedded API and of a daemon's start (MISMATCH, REFUSED,
//! CONNECT_TIMEOUT, PROTOCOL, AUTHENTICATION, MISALIGNED_LENGTH,
//! UNKNOWN_DTYPE, INVALID_CMP, INVALID_NOTIFY_OP, IMPLICIT_FAILED) are
//! caught earlier on the client plane, and tested where they arise;
//! INTERNAL, a bug in the daemon, has no request that produces it.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, ClientOptions, Code, Dtype, Error};
use pld_proto::v1::{self as pb, PutStreamHeader, PutStreamRequest, QuietRequest, WaitRequest};
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, run};
use std::time::Duration;

/// `e`'s reason and code are `reason` and `code`.
fn is(e: &Error, reason: &str, code: Code) {
    assert_eq!(e.reason(), Some(reason), "{e}");
    assert_eq!(e.code(), code, "{e}");
}

/// The same for a raw tonic status.
fn status_is(s: &tonic::Status, reason: &str, code: Code) {
    use tonic_types::StatusExt;
    let got = s.get_error_details().error_info().map(|i| i.reason.clone());
    assert_eq!(got.as_deref(), Some(reason), "{s:?}");
    assert_eq!(s.code(), code, "{s:?}");
}

#[test]
fn every_reason_of_a_bad_request_reaches_the_client() {
    run(Duration::from_secs(120), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 2, &pld_tests::SMALL_WINDOWS);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        let mut raw = common::raw(&c.grpc[0]).await;
        let size = 1u64 << 20;

        let e = cl.put(1, data, size, b"x").await.unwrap_err();
        is(&e, "OUT_OF_BOUNDS", Code::OutOfRange);
        let e = cl.fetch_add(1, data, 4, Dtype::Int64, 1).await.unwrap_err();
        is(&e, "MISALIGNED_OFFSET", Code::InvalidArgument);
        let e = cl.fetch_add(1, data, 0, Dtype::Fp32, 1).await.unwrap_err();
        is(&e, "UNSUPPORTED_DTYPE", Code::InvalidArgument);
        let e = cl
            .fetch_add(1, data, 0, Dtype::Int32, 1 << 40)
            .await
            .unwrap_err();
        is(&e, "VALUE_OUT_OF_RANGE", Code::InvalidArgument);
        let e = cl
            .atomic_add(1, data, 2, Dtype::Fp32, &[0; 8])
            .await
            .unwrap_err();
        is(&e, "INVALID_GEOMETRY", Code::InvalidArgument);
        let no_dtype = pb::FetchAddRequest {
            rank: 1,
            window: "data".into(),
            offset: 0,
            dtype: 0,
            value: 1,
        };
        status_is(
            &raw.fetch_add(no_dtype).await.unwrap_err(),
            "INVALID_ARGUMENT",
            Code::InvalidArgument,
        );
        // A PutStream that carries less than its header says.
        let header = PutStreamHeader {
            rank: 1,
            window: "data".into(),
            offset: 0,
            len: 100,
            ..Default::default()
        };
        let short = [PutStreamRequest {
            header: Some(header),
            data: vec![1u8; 60].into(),
        }];
        let e = raw.put_stream(tokio_stream::iter(short)).await.unwrap_err();
        status_is(&e, "STREAM_LENGTH", Code::InvalidArgument);
        let e = cl.put(7, data, 0, b"x").await.unwrap_err();
        is(&e, "NO_SUCH_RANK", Code::NotFound);
        let get = pb::GetRequest {
            rank: 0,
            window: "nope".into(),
            offset: 0,
            len: 1,
            region: None,
        };
        status_is(
            &raw.get(get).await.unwrap_err(),
            "NO_SUCH_WINDOW",
            Code::NotFound,
        );
        let e = cl.get(0, data, 0, 1 << 30).await.unwrap_err();
        // (The Rust client streams what exceeds the limit: the window
        // refuses the range first.)
        is(&e, "OUT_OF_BOUNDS", Code::OutOfRange);
        let big = pb::GetRequest {
            rank: 0,
            window: "data".into(),
            offset: 0,
            len: 8 << 20,
            region: None,
        };
        status_is(
            &raw.get(big).await.unwrap_err(),
            "TOO_LARGE",
            Code::ResourceExhausted,
        );
        // The collective window is 64 KiB: an allgather of 32 KiB from each
        // of 2 ranks needs 64 KiB plus the agreement's slots.
        let scratch = cl.all_gather(&vec![0i32; 8 << 10]).await.unwrap_err();
        is(&scratch, "SCRATCH_TOO_SMALL", Code::ResourceExhausted);
        // A barrier and a wait nobody completes.
        let e = cl
            .barrier_within(Duration::from_millis(300))
            .await
            .unwrap_err();
        is(&e, "BARRIER_TIMEOUT", Code::DeadlineExceeded);
        let signal = cl.window("signal").unwrap();
        let e = cl
            .wait_within(
                signal,
                0,
                pld_client::Cmp::Eq,
                9,
                Duration::from_millis(300),
            )
            .await
            .unwrap_err();
        is(&e, "WAIT_TIMEOUT", Code::DeadlineExceeded);
        // The barrier left pending resumes: rank 1 enters it too.
        let c1 = Client::connect(&c.grpc[1]).await.unwrap();
        let (a, b) = tokio::join!(cl.barrier(), c1.barrier());
        a.unwrap();
        b.unwrap();
    });
}

#[test]
fn every_reason_of_a_rank_in_trouble_reaches_the_client() {
    run(Duration::from_secs(120), async {
        let args = [&pld_tests::SMALL_WINDOWS[..], &["--op-timeout", "1s"]].concat();
        let mut c = GrpcCluster::plan(TransportKind::Tcp, 2, &args);
        c.spawn(0);
        // Rank 1 is not up yet: rank 0 answers, and says it is not ready.
        let mut raw = common::raw(&c.grpc[0]).await;
        let put = || pb::PutRequest {
            rank: 0,
            window: "data".into(),
            offset: 0,
            data: vec![1u8].into(),
            region: None,
        };
        status_is(
            &raw.put(put()).await.unwrap_err(),
            "NOT_READY",
            Code::Unavailable,
        );
        c.spawn(1);
        for r in 0..2 {
            c.daemon(r).wait_ready(Duration::from_secs(30));
        }
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        // Rank 1 stops answering: an op to it times out, and a quiet while
        // one is outstanding times out naming it.
        c.daemon(1).pause();
        let issued = || async {
            let s = cl.stats().await.unwrap();
            s.counters
                .iter()
                .find(|k| k.name == "ops_issued" && k.kind == "put")
                .map_or(0, |k| k.value)
        };
        let before = issued().await;
        let (op, quiet) = tokio::join!(cl.put(1, data, 0, b"late"), async {
            // Once rank 0 has the put outstanding, a quiet cannot finish.
            while issued().await == before {}
            raw.quiet(QuietRequest { timeout_ms: 300 }).await
        });
        is(&op.unwrap_err(), "OP_TIMEOUT", Code::DeadlineExceeded);
        status_is(&quiet.unwrap_err(), "QUIET_TIMEOUT", Code::DeadlineExceeded);
        c.daemon(1).resume();
        // Rank 1 dies: an op to it is lost, at once over TCP.
        c.daemon(1).kill();
        let e = cl.put(1, data, 0, b"gone").await.unwrap_err();
        is(&e, "PEER_LOST", Code::Unavailable);
    });
}

#[test]
fn a_token_daemon_names_unauthenticated_calls_and_health_needs_no_token() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--client-token", "s3cret"]);
        let opts = ClientOptions {
            wait_ready: Duration::ZERO,
            ..ClientOptions::default()
        };
        let e = Client::connect_with(&c.grpc[0], opts)
            .await
            .map(|_| ())
            .unwrap_err();
        is(&e, "UNAUTHENTICATED", Code::Unauthenticated);
        // Health and reflection answer without the token (probes).
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.grpc[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let req = tonic_health::pb::HealthCheckRequest {
            service: "pld.v1.Pld".into(),
        };
        let r = health.check(req).await.unwrap().into_inner();
        assert_eq!(
            r.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
        use tonic_reflection::pb::v1;
        let list = v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            )),
        };
        let mut refl = v1::server_reflection_client::ServerReflectionClient::new(channel);
        let mut answers = refl
            .server_reflection_info(tokio_stream::iter([list]))
            .await
            .unwrap()
            .into_inner();
        let answer = answers.message().await.unwrap().expect("an answer");
        assert!(format!("{answer:?}").contains("pld.v1.Pld"), "{answer:?}");
    });
}

// docs/client.md: without a timeout_ms, Wait, Barrier and Quiet use the
// call's gRPC deadline (grpc-timeout) if the client sent one, or else the
// daemon's --sync-timeout.
#[test]
fn a_wait_without_its_own_timeout_ends_at_the_calls_grpc_deadline() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--sync-timeout", "1h"]);
        let mut raw = common::raw(&c.grpc[0]).await;
        let mut req = tonic::Request::new(WaitRequest {
            window: "signal".into(),
            offset: 0,
            cmp: pb::Cmp::Eq as i32,
            value: 9,
            timeout_ms: 0,
        });
        // The daemon answers a twentieth of the deadline before it (250 ms
        // here), so that its answer, naming the cell, beats the client's
        // own timer.
        req.set_timeout(Duration::from_secs(5));
        let t0 = std::time::Instant::now();
        let e = raw.wait(req).await.unwrap_err();
        status_is(&e, "WAIT_TIMEOUT", Code::DeadlineExceeded);
        // Not the hour of --sync-timeout; the margin is for a loaded machine.
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    });
}

/// A PutStream message whose header's window is bytes, so that a window
/// name that is not UTF-8 can be sent.
#[derive(Clone, PartialEq, prost::Message)]
struct LooseStreamMessage {
    #[prost(message, optional, tag = "1")]
    header: Option<LooseHeader>,
    #[prost(bytes = "vec", tag = "2")]
    data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LooseHeader {
    #[prost(uint32, tag = "1")]
    rank: u32,
    #[prost(bytes = "vec", tag = "2")]
    window: Vec<u8>,
    #[prost(uint64, tag = "4")]
    len: u64,
}

// A collective on a daemon without a `collective` window, and a
// PutStream whose second message does not decode: both reasons are in the
// table, and neither had a request that produced it.
#[test]
fn a_daemon_without_a_collective_window_and_a_broken_stream_name_their_reasons() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--window", "data=1MiB"]);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let e = cl
            .all_reduce(&[1i64], pld_client::ReduceOp::Sum, pld_client::Algo::Ring)
            .await
            .unwrap_err();
        is(&e, "NO_COLLECTIVE_WINDOW", Code::FailedPrecondition);
        assert_eq!(e.detail().unwrap().get("call"), Some("AllReduce"), "{e}");

        let mut grpc = common::grpc(&c.grpc[0]).await;
        let first = LooseStreamMessage {
            header: Some(LooseHeader {
                rank: 0,
                window: b"data".to_vec(),
                len: 16,
            }),
            data: vec![1; 8],
        };
        let second = LooseStreamMessage {
            header: Some(LooseHeader {
                rank: 0,
                window: vec![0xff, 0xfe],
                len: 16,
            }),
            data: vec![2; 8],
        };
        let codec = tonic_prost::ProstCodec::<LooseStreamMessage, pb::PutResponse>::default();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pld.v1.Pld/PutStream");
        let messages = tokio_stream::iter([first, second]);
        let e = grpc
            .client_streaming(tonic::Request::new(messages), path, codec)
            .await
            .unwrap_err();
        status_is(&e, "CLIENT_STREAM", Code::InvalidArgument);
        assert!(e.message().contains("does not decode"), "{}", e.message());
        // The daemon serves on.
        assert_eq!(
            cl.get(0, cl.window("data").unwrap(), 0, 8)
                .await
                .unwrap()
                .len(),
            8
        );
    });
}

// A collective's own puts failing is the collective's error: before, its
// agreement puts had no handle, and the client's next Quiet failed with
// IMPLICIT_FAILED for requests it never made.
#[test]
fn a_collective_that_fails_leaves_nothing_for_the_next_quiet() {
    run(Duration::from_secs(60), async {
        let args = [
            &pld_tests::SMALL_WINDOWS[..],
            &["--op-timeout", "500ms", "--sync-timeout", "2s"],
        ]
        .concat();
        let mut c = GrpcCluster::start(TransportKind::Tcp, 2, &args);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        c.daemon(1).pause();
        let e = cl
            .all_reduce(&[1i64], pld_client::ReduceOp::Sum, pld_client::Algo::Ring)
            .await
            .unwrap_err();
        is(&e, "OP_TIMEOUT", Code::DeadlineExceeded);
        c.daemon(1).resume();
        let mut raw = common::raw(&c.grpc[0]).await;
        raw.quiet(QuietRequest { timeout_ms: 5000 }).await.unwrap();
    });
}
