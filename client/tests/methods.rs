//! Every `Pld` method is counted: `/metrics` and `Stats` report each call
//! of each of the service's methods, whatever its outcome. The methods are
//! read off the service (`pld_grpc::Method`), so a new rpc is in this
//! test as soon as it is in `pld.proto`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pld_grpc::Method;
use pld_proto::v1 as pb;
use pld_tests::both;
use std::collections::BTreeMap;
use tonic::Code;

/// Calls `method` once on the daemon behind `c` and returns its code; a
/// request the daemon refuses is a call all the same.
async fn call(
    c: &mut pld_grpc::pld_client::PldClient<tonic::transport::Channel>,
    method: Method,
) -> Code {
    fn code<T>(r: Result<T, tonic::Status>) -> Code {
        r.map_or_else(|s| s.code(), |_| Code::Ok)
    }
    let win = || "data".to_string();
    match method {
        Method::Info => code(c.info(pb::InfoRequest {}).await),
        Method::Put => code(
            c.put(pb::PutRequest {
                window: win(),
                data: vec![1u8; 8].into(),
                ..Default::default()
            })
            .await,
        ),
        Method::Get => code(
            c.get(pb::GetRequest {
                window: win(),
                len: 8,
                ..Default::default()
            })
            .await,
        ),
        Method::AtomicAdd => code(c.atomic_add(pb::AtomicAddRequest::default()).await),
        Method::PutStream => code(
            c.put_stream(tokio_stream::iter(Vec::<pb::PutStreamRequest>::new()))
                .await,
        ),
        Method::GetStream => code(c.get_stream(pb::GetStreamRequest::default()).await),
        Method::FetchAdd => code(c.fetch_add(pb::FetchAddRequest::default()).await),
        Method::CompareSwap => code(c.compare_swap(pb::CompareSwapRequest::default()).await),
        Method::CellOp => code(c.cell_op(pb::CellOpRequest::default()).await),
        Method::PutSignal => code(c.put_signal(pb::PutSignalRequest::default()).await),
        Method::Notify => code(c.notify(pb::NotifyRequest::default()).await),
        Method::Batch => code(c.batch(pb::BatchRequest::default()).await),
        Method::Wait => code(c.wait(pb::WaitRequest::default()).await),
        Method::Test => code(c.test(pb::TestRequest::default()).await),
        Method::Barrier => code(c.barrier(pb::BarrierRequest::default()).await),
        Method::Quiet => code(c.quiet(pb::QuietRequest::default()).await),
        Method::Stats => code(c.stats(pb::StatsRequest {}).await),
        Method::AllReduce => code(c.all_reduce(pb::AllReduceRequest::default()).await),
        Method::Broadcast => code(c.broadcast(pb::BroadcastRequest::default()).await),
        Method::AllGather => code(c.all_gather(pb::AllGatherRequest::default()).await),
        Method::ReduceScatter => code(c.reduce_scatter(pb::ReduceScatterRequest::default()).await),
        Method::AllToAll => code(c.all_to_all(pb::AllToAllRequest::default()).await),
    }
}

both!(
    every_pld_method_is_counted_in_metrics_and_stats,
    60,
    |t: pld_server::TransportKind| async move {
        let (c, metrics) = common::metered(t, 1, &[]);
        let mut raw = common::raw(&c.grpc[0]).await;
        let mut codes = BTreeMap::new();
        for m in Method::ALL {
            codes.insert(m, call(&mut raw, m).await);
        }
        assert_eq!(codes.len(), 22, "pld.proto's service has 22 methods");
        // Some calls succeed and some are refused: both are counted.
        assert_eq!(codes[&Method::Info], Code::Ok);
        assert_eq!(codes[&Method::Put], Code::Ok);
        assert_eq!(codes[&Method::Barrier], Code::Ok);
        // No window named "": refused, and counted.
        assert_eq!(codes[&Method::AtomicAdd], Code::NotFound);

        // Stats: one `grpc_calls` counter per method, this Stats call not
        // yet among them.
        let stats = raw.stats(pb::StatsRequest {}).await.unwrap().into_inner();
        let counted: BTreeMap<&str, u64> = stats
            .counters
            .iter()
            .filter(|k| k.name == "grpc_calls")
            .map(|k| (k.kind.as_str(), k.value))
            .collect();
        for m in Method::ALL {
            assert_eq!(
                counted.get(m.name()),
                Some(&1),
                "Stats for {m:?}: {counted:?}"
            );
        }

        // /metrics: every method's calls by code, and its latencies.
        let body = common::scrape(&metrics).await;
        for m in Method::ALL {
            let series = format!(
                "pld_grpc_requests_total{{rank=\"0\",method=\"{}\",",
                m.name()
            );
            let calls: f64 = body
                .lines()
                .filter(|l| l.starts_with(&series))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
                .sum();
            let want = if m == Method::Stats { 2.0 } else { 1.0 };
            assert_eq!(calls, want, "{m:?} in\n{body}");
            let count = format!(
                "pld_grpc_request_duration_seconds_count{{rank=\"0\",method=\"{}\"}}",
                m.name()
            );
            assert_eq!(common::metric(&body, &count), want, "{m:?}");
        }
    }
);
