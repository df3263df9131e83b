//! The Rust client against real daemons: every op across 2 and 4 daemons on
//! both transports, one program running embedded and remote, health and
//! reflection, and the metrics endpoint.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use bytes::Bytes;
use pld_client::{
    Chunking, Client, ClientOptions, Cmp, Code, Dtype, Layout, NotifyOp, Rma, Shape, Transfer,
};
use pld_grpc::pld_client::PldClient;
use pld_tests::{Cluster, GrpcCluster, both, pattern, run};
use std::time::Duration;
use tokio::task::JoinSet;

async fn connect_all(c: &GrpcCluster) -> Vec<Client> {
    let mut out = Vec::new();
    for addr in &c.grpc {
        out.push(Client::connect(addr).await.expect("connect"));
    }
    out
}

/// The seed's store-mode ring, written once against [`Rma`]: it runs on an
/// embedded rank and on a client of a daemon alike.
async fn store_ring<R: Rma>(r: &R, offset: u64) -> Result<Vec<u8>, R::Error> {
    let (me, n) = (r.rank(), r.nranks());
    let data = r.window("data")?;
    r.put((me + 1) % n, data, offset, &[me as u8 + 1; 64])
        .await?;
    r.barrier().await?;
    let got = r.get(me, data, offset, 64).await?;
    r.barrier().await?;
    Ok(got.to_vec())
}

fn ring_expect(me: u32, n: u32) -> Vec<u8> {
    vec![((me + n - 1) % n) as u8 + 1; 64]
}

fn fp32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

both!(
    rust_client_drives_two_and_four_daemons,
    300,
    |t: pld_server::TransportKind| async move {
        for n in [2u32, 4] {
            let c = GrpcCluster::start(t, n as usize, &[]);
            let clients = connect_all(&c).await;
            assert_eq!(clients[n as usize - 1].rank(), n - 1);
            assert_eq!(clients[0].nranks(), n);

            // Every rank runs the ring at once through its own daemon.
            let mut set = JoinSet::new();
            for cl in &clients {
                let cl = cl.clone();
                set.spawn(async move { (cl.rank(), store_ring(&cl, 4096).await) });
            }
            while let Some(j) = set.join_next().await {
                let (me, got) = j.expect("join");
                assert_eq!(got.expect("ring"), ring_expect(me, n), "rank {me}");
            }

            // Every rank adds into rank 0 at once: no update lost.
            let data = clients[0].window("data").unwrap();
            let ones = fp32(&[1.0; 256]);
            let mut set = JoinSet::new();
            for cl in &clients {
                let (cl, ones) = (cl.clone(), ones.clone());
                set.spawn(async move {
                    for _ in 0..20 {
                        cl.atomic_add(0, data, 1 << 20, Dtype::Fp32, &ones)
                            .await
                            .expect("atomic_add");
                    }
                });
            }
            while set.join_next().await.is_some() {}
            let sum = clients[n as usize - 1]
                .get(0, data, 1 << 20, 1024)
                .await
                .unwrap();
            let want = fp32(&[20.0 * n as f32; 256]);
            assert!(sum == want, "sum of adds from {n} ranks");

            // A strided 2-D region: rows land 8 elements apart, the gaps
            // stay untouched.
            let vals: Vec<f32> = (0..15).map(|i| i as f32).collect();
            let t35 = Transfer {
                dtype: Dtype::Fp32,
                shape: Shape { rows: 3, cols: 5 },
                dst: Layout {
                    offset: 1 << 16,
                    row_stride: 8,
                },
                src: Layout {
                    offset: 0,
                    row_stride: 5,
                },
            };
            clients[1]
                .put_region(n - 1, data, &t35, &fp32(&vals), Chunking::default())
                .await
                .unwrap();
            let back = clients[0]
                .get(n - 1, data, (1 << 16) * 4, 3 * 8 * 4)
                .await
                .unwrap();
            for r in 0..3 {
                let row = &back[r * 32..r * 32 + 20];
                assert_eq!(row, &fp32(&vals[r * 5..r * 5 + 5])[..], "row {r}");
                assert!(back[r * 32 + 20..r * 32 + 32].iter().all(|b| *b == 0));
            }

            // More than one message: streamed, pipelined, chunked.
            let big = pattern(6 << 20, u64::from(n));
            let rows = Transfer {
                dtype: Dtype::Int8,
                shape: Shape {
                    rows: 1536,
                    cols: 4096,
                },
                dst: Layout {
                    offset: 8 << 20,
                    row_stride: 4096,
                },
                src: Layout {
                    offset: 0,
                    row_stride: 4096,
                },
            };
            clients[0]
                .put_region(1, data, &rows, &big, Chunking::pipelined(64, 4096))
                .await
                .unwrap();
            let mut got = vec![0u8; big.len()];
            let load = Transfer {
                src: rows.dst,
                dst: rows.src,
                ..rows
            };
            clients[n as usize - 1]
                .get_region(1, data, &load, &mut got, Chunking::chunks(128, 1024))
                .await
                .unwrap();
            assert!(got == big, "6 MiB streamed round trip");
            let plain = clients[1].get(1, data, 8 << 20, 6 << 20).await.unwrap();
            assert!(plain[..] == big[..]);

            // Cells and signals.
            let sig = clients[0].window("signal").unwrap();
            let before = clients[1]
                .fetch_add(0, data, 0, Dtype::Int64, 5)
                .await
                .unwrap();
            assert_eq!(
                clients[0]
                    .fetch_add(0, data, 0, Dtype::Int64, 1)
                    .await
                    .unwrap(),
                before + 5
            );
            assert_eq!(
                clients[1]
                    .compare_swap(0, data, 0, Dtype::Int64, before + 6, 77)
                    .await
                    .unwrap(),
                before + 6
            );
            let waiter = {
                let cl = clients[n as usize - 1].clone();
                tokio::spawn(async move { cl.wait(sig, 16, Cmp::Ge, 3).await })
            };
            for cl in &clients[..2] {
                cl.notify(n - 1, sig, 16, 1, NotifyOp::AtomicAdd)
                    .await
                    .unwrap();
            }
            clients[0]
                .notify(n - 1, sig, 16, 1, NotifyOp::AtomicAdd)
                .await
                .unwrap();
            assert_eq!(waiter.await.unwrap().unwrap(), 3);
            assert!(
                clients[n as usize - 1]
                    .test(sig, 16, Cmp::Eq, 3)
                    .await
                    .unwrap()
            );
            clients[0].quiet().await.unwrap();
            // Rank 1 added into rank 0 twenty times: remote ops, counted.
            let stats = clients[1].stats().await.unwrap();
            let issued = |kind: &str| {
                stats
                    .counters
                    .iter()
                    .find(|c| c.name == "ops_issued" && c.kind == kind)
                    .map(|c| c.value)
            };
            assert!(issued("atomic_add") >= Some(20), "{:?}", stats.counters);
        }
    }
);

both!(
    one_program_runs_embedded_and_remote,
    120,
    |t: pld_server::TransportKind| async move {
        let embedded = Cluster::start(t, 2, &[]).await;
        let (a, b) = tokio::join!(
            store_ring(embedded.rank(0), 0),
            store_ring(embedded.rank(1), 0)
        );
        assert_eq!(a.unwrap(), ring_expect(0, 2));
        assert_eq!(b.unwrap(), ring_expect(1, 2));

        let daemons = GrpcCluster::start(t, 2, &[]);
        let clients = connect_all(&daemons).await;
        let (a, b) = tokio::join!(store_ring(&clients[0], 0), store_ring(&clients[1], 0));
        assert_eq!(a.unwrap(), ring_expect(0, 2));
        assert_eq!(b.unwrap(), ring_expect(1, 2));
    }
);

#[test]
fn health_is_not_serving_until_the_mesh_is_up_and_reflection_lists_the_service() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    run(Duration::from_secs(90), async {
        let mut c = GrpcCluster::plan(pld_server::TransportKind::Quic, 2, &[]);
        c.spawn(0);
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", c.grpc[0]))
            .unwrap()
            .connect()
            .await
            .expect("gRPC is up before the mesh");
        let mut health = HealthClient::new(channel.clone());
        for service in ["", "pld.v1.Pld"] {
            let s = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(s.status(), ServingStatus::NotServing, "'{service}'");
        }
        // Ops are refused with UNAVAILABLE and say why.
        let mut raw = PldClient::new(channel.clone());
        let e = raw
            .put(pld_proto::v1::PutRequest {
                rank: 1,
                window: "data".into(),
                offset: 0,
                data: Bytes::from_static(b"early"),
                region: None,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unavailable);
        assert!(e.message().contains("not serving yet"), "{}", e.message());
        let info = raw
            .info(pld_proto::v1::InfoRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(!info.ready);
        let quick = ClientOptions {
            wait_ready: Duration::ZERO,
            ..ClientOptions::default()
        };
        let e = Client::connect_with(&c.grpc[0], quick).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e}");

        // Watch the status while the second rank comes up.
        let mut watch = health
            .watch(HealthCheckRequest {
                service: "pld.v1.Pld".into(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = watch.message().await.unwrap().expect("a first status");
        assert_eq!(first.status(), ServingStatus::NotServing);
        c.spawn(1);
        let next = watch.message().await.unwrap().expect("a status change");
        assert_eq!(next.status(), ServingStatus::Serving);
        c.daemon(0).wait_ready(Duration::from_secs(30));

        // Reflection lists the services.
        use tonic_reflection::pb::v1::ServerReflectionRequest;
        use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
        let mut refl = ServerReflectionClient::new(channel);
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut answers = refl
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner();
        let answer = answers.message().await.unwrap().expect("an answer");
        let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
            panic!("not a service list: {answer:?}");
        };
        let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"pld.v1.Pld"), "{names:?}");
        assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
        // And the service's schema resolves.
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol("pld.v1.Pld".into())),
        };
        let mut answers = refl
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner();
        let answer = answers.message().await.unwrap().expect("an answer");
        assert!(
            matches!(
                answer.message_response,
                Some(MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty()
            ),
            "{answer:?}"
        );
    });
}

both!(
    metrics_serve_counters_and_latency_histograms_in_prometheus_text,
    60,
    |t: pld_server::TransportKind| async move {
        let (c, metrics) = common::metered(t, 2, &[]);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        for i in 0..3u64 {
            cl.put(1, data, i * 8, b"12345678").await.unwrap();
        }
        let body = common::scrape(&metrics).await;
        let line = |prefix: &str| common::metric(&body, prefix);
        assert_eq!(line("pld_ready{rank=\"0\"}"), 1.0);
        assert!(line("pld_ops_issued_total{rank=\"0\",op=\"put\"}") >= 3.0);
        assert!(line("pld_op_latency_seconds_count{rank=\"0\",op=\"put\"}") >= 3.0);
        assert!(line("pld_op_latency_seconds_bucket{rank=\"0\",op=\"put\",le=\"+Inf\"}") >= 3.0);
        assert_eq!(
            line("pld_grpc_requests_total{rank=\"0\",method=\"Put\",code=\"OK\"}"),
            3.0
        );
        assert!(body.contains("# TYPE pld_op_latency_seconds histogram"));
        // The client plane's own families, each with rank 0's series.
        for (family, kind) in [
            ("pld_grpc_connections", "gauge"),
            ("pld_grpc_connections_refused_total", "counter"),
            ("pld_grpc_connections_evicted_total", "counter"),
            ("pld_grpc_handshakes_failed_total", "counter"),
            ("pld_grpc_streams_stalled_total", "counter"),
            ("pld_grpc_calls_running", "gauge"),
            ("pld_grpc_buffered_bytes", "gauge"),
            ("pld_grpc_requests_total", "counter"),
            ("pld_grpc_request_duration_seconds", "histogram"),
        ] {
            assert!(
                body.contains(&format!("# TYPE {family} {kind}")),
                "{family}:\n{body}"
            );
        }
        // This client's connection is open; nothing was refused or reaped.
        assert!(line("pld_grpc_connections{rank=\"0\"}") >= 1.0);
        assert_eq!(line("pld_grpc_connections_refused_total{rank=\"0\"}"), 0.0);
        assert_eq!(line("pld_grpc_streams_stalled_total{rank=\"0\"}"), 0.0);
        // QUIC reports its path to each peer; TCP has none to report.
        if t == pld_server::TransportKind::Quic {
            assert!(line("pld_quic_mtu_bytes{rank=\"0\",peer=\"1\"}") >= 1200.0);
            assert!(line("pld_quic_rtt_microseconds{rank=\"0\",peer=\"1\"}") > 0.0);
            assert!(line("pld_quic_cwnd_bytes{rank=\"0\",peer=\"1\"}") > 0.0);
            assert_eq!(
                line("pld_quic_lost_mtu_probes_total{rank=\"0\",peer=\"1\"}"),
                0.0
            );
            assert!(body.contains("# TYPE pld_quic_lost_packets_total counter"));
        } else {
            assert!(!body.contains("pld_quic_"), "{body}");
        }
    }
);
