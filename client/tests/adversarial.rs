//! The client plane against requests crafted to break it, each a defect an
//! adversarial probe found in a landed build (issue 34), over real
//! sockets: sizes whose sum wraps, replies that would not fit, error texts
//! that echo megabytes, bytes that do not decode, collectives whose ranks
//! disagree, and the connection cap against strangers. Each test would have
//! failed on that build; the daemon must answer with the promised code and
//! keep serving.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, ClientOptions};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::{
    Algo, AllGatherRequest, AllReduceRequest, BatchOp, BatchRequest, BroadcastRequest, Dtype,
    GetRequest, PutRequest, ReduceOp, batch_op::Op,
};
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, run};
use std::time::Duration;
use tonic::Code;
use tonic_types::StatusExt;

fn get(len: u64) -> BatchOp {
    BatchOp {
        op: Some(Op::Get(GetRequest {
            rank: 0,
            window: "data".into(),
            offset: 0,
            len,
            region: None,
        })),
    }
}

fn put(offset: u64, data: &[u8]) -> BatchOp {
    BatchOp {
        op: Some(Op::Put(PutRequest {
            rank: 0,
            window: "data".into(),
            offset,
            data: data.to_vec().into(),
            region: None,
        })),
    }
}

fn reason(s: &tonic::Status) -> String {
    s.get_error_details()
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default()
}

// On the landed build the first pair aborted the daemon (the sum wrapped to
// 16 and a 64 GiB buffer was allocated before the range check), the second
// panicked a worker with "capacity overflow".
#[test]
fn batch_lengths_whose_sum_wraps_are_refused_and_the_daemon_keeps_serving() {
    run(Duration::from_secs(60), async {
        let mut c = GrpcCluster::start(TransportKind::Tcp, 1, &[]);
        let mut raw = common::raw(&c.grpc[0]).await;
        for (a, b) in [
            (1u64 << 36, 0u64.wrapping_sub(1 << 36) + 16),
            (1 << 63, (1 << 63) + 16),
        ] {
            let e = raw
                .batch(BatchRequest {
                    ops: vec![get(a), get(b)],
                })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
            assert_eq!(reason(&e), "TOO_LARGE", "{e:?}");
            assert!(e.message().contains("GetStream"), "{}", e.message());
        }
        assert!(c.daemon(0).alive(), "the daemon is still running");
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"still here").await.unwrap();
        assert_eq!(&cl.get(0, data, 0, 10).await.unwrap()[..], b"still here");
    });
}

// On the landed build a batch of 65 536 failing ops lost every result:
// OUT_OF_RANGE "encoded message length too large", though each op had run.
#[test]
fn a_batch_reply_always_fits_and_one_that_cannot_is_refused_before_any_op_runs() {
    run(Duration::from_secs(120), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &[]);
        let mut raw = common::raw(&c.grpc[0]).await;
        let size = 16u64 << 20;
        // Every op out of range: 65 536 errors of ~100 bytes each.
        let ops: Vec<BatchOp> = (0..65_536u64).map(|i| put(size + i, b"x")).collect();
        let r = raw.batch(BatchRequest { ops }).await.unwrap().into_inner();
        assert_eq!(r.results.len(), 65_536);
        for (i, res) in r.results.iter().enumerate() {
            assert_eq!(res.code, Code::OutOfRange as i32, "op {i}: {res:?}");
            assert!(res.message.starts_with(&format!("op {i}")), "{res:?}");
        }
        // Gets of the whole message limit, and a put: the replies' framing
        // would not fit, so nothing runs, the put included.
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"before").await.unwrap();
        let mut ops = vec![put(0, b"after!")];
        ops.extend((0..4096).map(|_| get(1024)));
        let e = raw.batch(BatchRequest { ops }).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
        assert!(
            e.message().contains("several smaller Batches"),
            "{}",
            e.message()
        );
        assert_eq!(&cl.get(0, data, 0, 6).await.unwrap()[..], b"before");
    });
}

// On the landed build a 10 KB window name came back as RESOURCE_EXHAUSTED
// (the NOT_FOUND status exceeded the client's 16 KiB metadata limit), and a
// 4 MB one made the daemon send 3.6 MB of trailers.
#[test]
fn an_error_echoes_a_bounded_part_of_what_the_client_sent() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &[]);
        let mut raw = common::raw(&c.grpc[0]).await;
        for n in [10_000usize, 4 << 20] {
            let name = "w".repeat(n);
            let e = raw
                .get(GetRequest {
                    rank: 0,
                    window: name,
                    offset: 0,
                    len: 1,
                    region: None,
                })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::NotFound, "{n}-byte name: {:?}", e.code());
            assert_eq!(reason(&e), "NO_SUCH_WINDOW");
            assert!(
                e.message().len() < 1200,
                "{n}-byte name: a {}-byte message",
                e.message().len()
            );
            assert!(
                e.message().contains(&format!("({n} bytes in all)")),
                "{}",
                e.message()
            );
            assert!(
                e.details().len() < 4096,
                "{} bytes of details",
                e.details().len()
            );
        }
    });
}

/// A GetRequest whose window is bytes: a name that is not UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct BytesWindow {
    #[prost(uint32, tag = "1")]
    rank: u32,
    #[prost(bytes = "vec", tag = "2")]
    window: Vec<u8>,
}

/// A GetRequest whose rank is a string: the wrong wire type.
#[derive(Clone, PartialEq, prost::Message)]
struct StringRank {
    #[prost(string, tag = "1")]
    rank: String,
}

async fn call_get<M: prost::Message + Send + Sync + 'static>(
    addr: &str,
    m: M,
) -> Result<pld_proto::v1::GetResponse, tonic::Status> {
    call_get_as(addr, m, None).await
}

/// [`call_get`] with the bearer token `token`.
async fn call_get_as<M: prost::Message + Send + Sync + 'static>(
    addr: &str,
    m: M,
    token: Option<&str>,
) -> Result<pld_proto::v1::GetResponse, tonic::Status> {
    let mut grpc = common::grpc(addr).await;
    let codec = tonic_prost::ProstCodec::<M, pld_proto::v1::GetResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pld.v1.Pld/Get");
    let mut req = tonic::Request::new(m);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    grpc.unary(req, path, codec)
        .await
        .map(tonic::Response::into_inner)
}

// On the landed build neither showed in pld_grpc_requests_total: they
// never reached the handler that counts.
#[test]
fn refused_and_undecodable_calls_are_counted_by_method_and_code() {
    run(Duration::from_secs(60), async {
        let (c, metrics) = common::metered(TransportKind::Tcp, 1, &["--client-token", "s3cret"]);
        let garbage = || StringRank {
            rank: "zero".into(),
        };
        let e = call_get_as(&c.grpc[0], garbage(), None).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        for _ in 0..2 {
            let e = call_get_as(&c.grpc[0], garbage(), Some("s3cret"))
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        }
        let body = common::scrape(&metrics).await;
        let line = |code: &str| {
            common::metric(
                &body,
                &format!("pld_grpc_requests_total{{rank=\"0\",method=\"Get\",code=\"{code}\"}}"),
            )
        };
        assert_eq!(line("UNAUTHENTICATED"), 1.0, "{body}");
        assert_eq!(line("INVALID_ARGUMENT"), 2.0, "{body}");
        assert!(
            common::metric(
                &body,
                "pld_grpc_request_duration_seconds_count{rank=\"0\",method=\"Get\"}"
            ) >= 3.0,
            "{body}"
        );
    });
}

// On the landed build both came back INTERNAL, as if the daemon had failed.
#[test]
fn requests_that_do_not_decode_are_invalid_arguments() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &[]);
        let not_utf8 = BytesWindow {
            rank: 0,
            window: vec![0xff, 0xfe, b'd'],
        };
        let e = call_get(&c.grpc[0], not_utf8).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("does not decode"), "{}", e.message());
        let garbage = StringRank {
            rank: "zero".into(),
        };
        let e = call_get(&c.grpc[0], garbage).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        assert_eq!(cl.rank(), 0);
    });
}

/// Calls AllReduce on every rank at once, `req(r)` on rank r.
async fn on_every_rank<F, Fut, T>(c: &GrpcCluster, call: F) -> Vec<Result<T, tonic::Status>>
where
    F: Fn(u32, PldClient<tonic::transport::Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut clients = Vec::new();
    for addr in &c.grpc {
        clients.push(common::raw(addr).await);
    }
    let calls = clients
        .into_iter()
        .enumerate()
        .map(|(r, cl)| call(r as u32, cl));
    pld_tests::join_all(calls).await
}

fn allreduce(len: usize, op: ReduceOp, dtype: Dtype, algo: Algo) -> AllReduceRequest {
    AllReduceRequest {
        dtype: dtype as i32,
        data: vec![0u8; len * 4].into(),
        op: op as i32,
        algo: algo as i32,
    }
}

/// Every rank failed with the same COLLECTIVE_MISMATCH that names `what`.
fn assert_mismatch<T: std::fmt::Debug>(got: &[Result<T, tonic::Status>], what: &str) {
    // After the call's own name ("AllReduce: ..."), which each rank's is.
    let report = |e: &tonic::Status| e.message().split_once(": ").map(|(_, r)| r.to_string());
    let first = report(got[0].as_ref().unwrap_err()).unwrap();
    for (r, g) in got.iter().enumerate() {
        let e = g.as_ref().unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "rank {r}: {e:?}");
        assert_eq!(reason(e), "COLLECTIVE_MISMATCH", "rank {r}");
        assert_eq!(
            report(e).unwrap(),
            first,
            "rank {r} says the same as rank 0"
        );
    }
    assert!(first.contains(what), "{first}");
}

// On the landed build every case returned OK with a different wrong
// result on every rank (mismatched algorithms: one rank OK and wrong, two
// timed out).
#[test]
fn collectives_whose_ranks_disagree_fail_every_rank_naming_the_mismatch() {
    run(Duration::from_secs(120), async {
        let mut args = pld_tests::SMALL_WINDOWS.to_vec();
        args.extend(["--sync-timeout", "20s"]);
        let c = GrpcCluster::start(TransportKind::Tcp, 3, &args);
        use Algo::{Mesh, Ring};
        use Dtype::{Fp32, Int32};
        use ReduceOp::{Max, Prod, Sum};
        let lens = [6, 12, 3];
        let got = on_every_rank(&c, |r, mut cl| async move {
            cl.all_reduce(allreduce(lens[r as usize], Sum, Fp32, Ring))
                .await
        })
        .await;
        assert_mismatch(
            &got,
            "(they differ in length): rank 0: allreduce sum (ring) of 6 fp32 elements (24 bytes); \
             rank 1: allreduce sum (ring) of 12 fp32 elements (48 bytes); rank 2:",
        );
        let ops = [Sum, Max, Prod];
        let got = on_every_rank(&c, |r, mut cl| async move {
            cl.all_reduce(allreduce(4, ops[r as usize], Fp32, Ring))
                .await
        })
        .await;
        assert_mismatch(&got, "(they differ in reduce op)");
        let dtypes = [Fp32, Int32, Fp32];
        let got = on_every_rank(&c, |r, mut cl| async move {
            cl.all_reduce(allreduce(4, Sum, dtypes[r as usize], Ring))
                .await
        })
        .await;
        assert_mismatch(&got, "(they differ in dtype): ranks 0, 2: allreduce");
        let algos = [Mesh, Ring, Ring];
        let got = on_every_rank(&c, |r, mut cl| async move {
            cl.all_reduce(allreduce(4, Sum, Fp32, algos[r as usize]))
                .await
        })
        .await;
        assert_mismatch(&got, "(they differ in algorithm)");
        let data = || -> bytes::Bytes { vec![0u8; 16].into() };
        let got = on_every_rank(&c, |r, mut cl| async move {
            let dtype = Fp32 as i32;
            match r {
                0 => cl.all_reduce(allreduce(4, Sum, Fp32, Ring)).await,
                1 => {
                    let req = BroadcastRequest {
                        dtype,
                        data: data(),
                        root: 0,
                    };
                    cl.broadcast(req).await
                }
                _ => {
                    cl.all_gather(AllGatherRequest {
                        dtype,
                        data: data(),
                    })
                    .await
                }
            }
        })
        .await;
        assert_mismatch(&got, "(they differ in collective): rank 0: allreduce");
        // The ranks are in step again: a call they agree on runs.
        let got = on_every_rank(&c, |r, mut cl| async move {
            let mut req = allreduce(2, Sum, Int32, Ring);
            req.data = [r as i32 + 1, 10]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            cl.all_reduce(req).await
        })
        .await;
        for g in got {
            let out = g.unwrap().into_inner().data;
            assert_eq!(
                &out[..],
                [6i32, 30]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<_>>()
            );
        }
    });
}

// On the landed build a loop of connections that sent the preface and then
// nothing held every slot of a small cap for as long as they stayed open:
// no real client got in.
#[test]
fn at_the_connection_cap_a_new_client_takes_the_slot_of_an_unproven_connection() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(
            TransportKind::Tcp,
            1,
            &[
                "--grpc-max-connections",
                "4",
                "--grpc-handshake-timeout",
                "30s",
                "--client-token",
                "s3cret",
            ],
        );
        let addr = c.grpc[0].clone();
        // Four strangers hold the four slots past the preface.
        let mut strangers = Vec::new();
        for _ in 0..4 {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut s, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                .await
                .unwrap();
            strangers.push(s);
        }
        // Older than the eviction grace (1 s): measured by the daemon from
        // their admission, so this wait is the point of the test.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let opts = ClientOptions {
            token: Some("s3cret".into()),
            ..ClientOptions::default()
        };
        // Each new client takes a stranger's slot; the first one keeps
        // its own once its call proved it.
        let first = Client::connect_with(&addr, opts.clone()).await.unwrap();
        let data = first.window("data").unwrap();
        first.put(0, data, 0, b"in").await.unwrap();
        let mut others = Vec::new();
        for i in 1..4 {
            let cl = Client::connect_with(&addr, opts.clone()).await.unwrap();
            cl.put(0, data, 8 * i, b"also in").await.unwrap();
            others.push(cl);
        }
        // Every slot is proven now: the next connection is refused, and
        // the first client still works.
        let none = ClientOptions {
            wait_ready: Duration::ZERO,
            ..opts.clone()
        };
        assert!(Client::connect_with(&addr, none).await.is_err());
        assert_eq!(&first.get(0, data, 0, 2).await.unwrap()[..], b"in");
        // The strangers' connections were closed.
        for s in &mut strangers {
            let mut buf = [0u8; 1024];
            let closed = tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    match tokio::io::AsyncReadExt::read(s, &mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            })
            .await;
            assert!(closed.is_ok(), "a stranger kept its slot");
        }
    });
}
