//! The `pld.v1.Pld` service: each call resolves its window, checks its
//! fields and runs the op on the daemon's rank.

use super::batch;
use super::collective::{self, Kind};
use super::request::{
    cell_op, check_data, cmp, dtype, geometry, grpc_timeout, notify_op, region_dtype, window,
};
use super::{Error, Shared, stream};
use pld_grpc::Method;
use pld_grpc::pld_server::Pld;
use pld_proto::Dtype;
use pld_proto::region::Chunking;
use pld_proto::v1::{
    AllGatherRequest, AllReduceRequest, AllToAllRequest, AtomicAddRequest, AtomicAddResponse,
    BarrierRequest, BarrierResponse, BatchRequest, BatchResponse, BroadcastRequest, CellOpRequest,
    CollectiveResponse, CompareSwapRequest, Counter, FetchAddRequest, GetRequest, GetResponse,
    GetStreamRequest, InfoRequest, InfoResponse, NotifyRequest, NotifyResponse, PutRequest,
    PutResponse, PutSignalRequest, PutStreamRequest, QuietRequest, QuietResponse,
    ReduceScatterRequest, StatsRequest, StatsResponse, TestRequest, TestResponse, ValueResponse,
    WaitRequest, WaitResponse, WindowSpec,
};
use pld_server::Rank;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status, Streaming};

#[derive(Debug)]
pub(crate) struct Service {
    shared: Arc<Shared>,
}

impl Service {
    pub(crate) fn new(shared: Arc<Shared>) -> Service {
        Service { shared }
    }

    /// Runs one call: times it, counts its outcome, maps its error.
    async fn observe<T>(
        &self,
        method: Method,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<Response<T>, Status> {
        let t0 = Instant::now();
        let result = self.shared.drain.run(call).await;
        let code = result.as_ref().map_or_else(Error::code, |_| Code::Ok);
        self.shared.metrics.record(method, code, t0.elapsed());
        super::unhandled::handled();
        match result {
            Ok(r) => Ok(Response::new(r)),
            Err(e) => {
                tracing::debug!(method = method.name(), code = ?code, "{e}");
                Err(e.into())
            }
        }
    }

    fn rank(&self) -> Result<&Arc<Rank>, Error> {
        self.shared.rank()
    }

    /// Refuses a unary message whose data exceeds the documented limit
    /// exactly (tonic's own limit allows the message's overhead on top).
    fn within_limit(
        &self,
        call: &'static str,
        len: usize,
        instead: &'static str,
    ) -> Result<(), Error> {
        if len > self.shared.max_data {
            return Err(Error::TooLarge {
                call,
                len: len as u64,
                max: self.shared.max_data as u64,
                instead,
            });
        }
        Ok(())
    }

    /// How long a wait, barrier or quiet may take: the request's timeout (or
    /// `default`), cut short so that the diagnostic reaches the client
    /// before its own gRPC deadline does.
    fn budget(&self, timeout_ms: u64, default: Duration, metadata: &MetadataMap) -> Duration {
        let asked = if timeout_ms == 0 {
            default
        } else {
            Duration::from_millis(timeout_ms)
        };
        match grpc_timeout(metadata) {
            Some(deadline) => {
                let margin = (deadline / 20).max(Duration::from_millis(20));
                asked.min(deadline.saturating_sub(margin))
            }
            None => asked,
        }
    }

    fn info(&self) -> InfoResponse {
        let c = &self.shared.config;
        let mut windows: Vec<WindowSpec> = c
            .windows
            .iter()
            .map(|w| WindowSpec {
                name: w.name.clone(),
                size: w.size,
            })
            .collect();
        windows.sort_by(|a, b| a.name.cmp(&b.name));
        InfoResponse {
            rank: c.rank,
            nranks: c.nranks(),
            windows,
            transport: c.transport.to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            cluster_id: c.cluster_id.clone(),
            ready: self.shared.rank.get().is_some(),
            max_message_data: self.shared.max_data as u64,
            protocol_version: pld_proto::PROTOCOL_VERSION,
            checked: c.checked.to_string(),
        }
    }
}

#[tonic::async_trait]
impl Pld for Service {
    async fn info(&self, _: Request<InfoRequest>) -> Result<Response<InfoResponse>, Status> {
        self.observe(Method::Info, async { Ok(self.info()) }).await
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Put, async {
            self.within_limit("Put", r.data.len(), "PutStream")?;
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let dtype = region_dtype("Put", r.region.as_ref(), Dtype::Int8)?;
            let g = geometry(
                "Put",
                dtype,
                r.offset,
                r.region.as_ref(),
                r.data.len() as u64,
            )?;
            check_data("Put", &g, r.data.len())?;
            rank.put_region(r.rank, win, &g.store(), &r.data, Chunking::default())
                .await?;
            Ok(PutResponse {})
        })
        .await
    }

    async fn get(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Get, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let dtype = region_dtype("Get", r.region.as_ref(), Dtype::Int8)?;
            let g = geometry("Get", dtype, r.offset, r.region.as_ref(), r.len)?;
            if g.packed_len > self.shared.max_data as u64 {
                return Err(Error::TooLarge {
                    call: "Get",
                    len: g.packed_len,
                    max: self.shared.max_data as u64,
                    instead: "GetStream",
                });
            }
            let mut buf = vec![0u8; g.packed_len as usize];
            rank.get_region(r.rank, win, &g.load(), &mut buf, Chunking::default())
                .await?;
            Ok(GetResponse { data: buf.into() })
        })
        .await
    }

    async fn atomic_add(
        &self,
        req: Request<AtomicAddRequest>,
    ) -> Result<Response<AtomicAddResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::AtomicAdd, async {
            let rank = self.rank()?;
            self.within_limit("AtomicAdd", r.data.len(), "PutStream with atomic_add")?;
            let win = window(rank, &r.window)?;
            let dt = dtype("AtomicAdd", r.dtype)?;
            if let Some(reg) = &r.region
                && reg.dtype != Dtype::Unspecified as i32
                && reg.dtype != dt as i32
            {
                return Err(Error::invalid(
                    "AtomicAdd",
                    format!(
                        "the region's dtype {} differs from the call's {dt}",
                        Dtype::try_from(reg.dtype)
                            .map_or_else(|_| format!("#{}", reg.dtype), |d| d.to_string())
                    ),
                ));
            }
            let g = geometry(
                "AtomicAdd",
                dt,
                r.offset,
                r.region.as_ref(),
                r.data.len() as u64,
            )?;
            check_data("AtomicAdd", &g, r.data.len())?;
            rank.atomic_add_region(r.rank, win, &g.store(), &r.data, Chunking::default())
                .await?;
            Ok(AtomicAddResponse {})
        })
        .await
    }

    async fn put_stream(
        &self,
        req: Request<Streaming<PutStreamRequest>>,
    ) -> Result<Response<PutResponse>, Status> {
        let s = req.into_inner();
        self.observe(Method::PutStream, async {
            let rank = self.rank()?.clone();
            stream::put(rank, s, &self.shared.streams).await?;
            Ok(PutResponse {})
        })
        .await
    }

    type GetStreamStream = stream::GetStream;

    async fn get_stream(
        &self,
        req: Request<GetStreamRequest>,
    ) -> Result<Response<Self::GetStreamStream>, Status> {
        let client = req
            .extensions()
            .get::<super::incoming::ClientInfo>()
            .cloned();
        let r = req.into_inner();
        let max = self.shared.max_data;
        // The call's duration is until the stream is set up; the transfer's
        // own figures are in the peer-plane counters.
        self.observe(Method::GetStream, async {
            let rank = self.rank()?.clone();
            stream::get(rank, r, max, &self.shared.streams, client).await
        })
        .await
    }

    async fn fetch_add(
        &self,
        req: Request<FetchAddRequest>,
    ) -> Result<Response<ValueResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::FetchAdd, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let dt = dtype("FetchAdd", r.dtype)?;
            let previous = rank.fetch_add(r.rank, win, r.offset, dt, r.value).await?;
            Ok(ValueResponse { previous })
        })
        .await
    }

    async fn compare_swap(
        &self,
        req: Request<CompareSwapRequest>,
    ) -> Result<Response<ValueResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::CompareSwap, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let dt = dtype("CompareSwap", r.dtype)?;
            let previous = rank
                .compare_swap(r.rank, win, r.offset, dt, r.expected, r.desired)
                .await?;
            Ok(ValueResponse { previous })
        })
        .await
    }

    async fn cell_op(
        &self,
        req: Request<CellOpRequest>,
    ) -> Result<Response<ValueResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::CellOp, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let dt = dtype("CellOp", r.dtype)?;
            let op = cell_op("CellOp", r.kind, r.bit_op, r.value)?;
            let previous = rank.cell_op(r.rank, win, r.offset, dt, op).await?;
            Ok(ValueResponse { previous })
        })
        .await
    }

    async fn put_signal(
        &self,
        req: Request<PutSignalRequest>,
    ) -> Result<Response<PutResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::PutSignal, async {
            let rank = self.rank()?;
            let at = (window(rank, &r.window)?, r.offset);
            let signal_at = (window(rank, &r.signal_window)?, r.signal_offset);
            let op = notify_op("PutSignal", r.signal_op)?;
            rank.put_signal(r.rank, at, &r.data, signal_at, r.signal, op)
                .await?;
            Ok(PutResponse {})
        })
        .await
    }

    async fn notify(
        &self,
        req: Request<NotifyRequest>,
    ) -> Result<Response<NotifyResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Notify, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let op = notify_op("Notify", r.op)?;
            rank.notify(r.rank, win, r.offset, r.value, op).await?;
            Ok(NotifyResponse {})
        })
        .await
    }

    async fn batch(&self, req: Request<BatchRequest>) -> Result<Response<BatchResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Batch, batch::run(&self.shared, r))
            .await
    }

    async fn wait(&self, req: Request<WaitRequest>) -> Result<Response<WaitResponse>, Status> {
        let budget = |rank: &Rank, ms| self.budget(ms, rank.config().sync_timeout, req.metadata());
        let r = req.get_ref();
        self.observe(Method::Wait, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let c = cmp("Wait", r.cmp)?;
            let value = rank
                .wait_within(win, r.offset, c, r.value, budget(rank, r.timeout_ms))
                .await?;
            Ok(WaitResponse { value })
        })
        .await
    }

    async fn test(&self, req: Request<TestRequest>) -> Result<Response<TestResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Test, async {
            let rank = self.rank()?;
            let win = window(rank, &r.window)?;
            let c = cmp("Test", r.cmp)?;
            let satisfied = rank.test(win, r.offset, c, r.value)?;
            Ok(TestResponse { satisfied })
        })
        .await
    }

    async fn barrier(
        &self,
        req: Request<BarrierRequest>,
    ) -> Result<Response<BarrierResponse>, Status> {
        self.observe(Method::Barrier, async {
            let rank = self.rank()?;
            let t = self.budget(
                req.get_ref().timeout_ms,
                rank.config().sync_timeout,
                req.metadata(),
            );
            rank.barrier_within(t).await?;
            Ok(BarrierResponse {})
        })
        .await
    }

    async fn quiet(&self, req: Request<QuietRequest>) -> Result<Response<QuietResponse>, Status> {
        self.observe(Method::Quiet, async {
            let rank = self.rank()?;
            let t = self.budget(
                req.get_ref().timeout_ms,
                rank.config().op_timeout,
                req.metadata(),
            );
            rank.quiet_within(t).await?;
            Ok(QuietResponse {})
        })
        .await
    }

    async fn stats(&self, _: Request<StatsRequest>) -> Result<Response<StatsResponse>, Status> {
        self.observe(Method::Stats, async {
            let rank = self.rank()?;
            let mut counters: Vec<Counter> = rank
                .stats()
                .counters()
                .into_iter()
                .map(|(name, kind, value)| Counter {
                    name: name.into(),
                    kind: kind.into(),
                    value,
                })
                .collect();
            // The client plane's own calls, every method of the service.
            counters.extend(Method::ALL.into_iter().map(|m| Counter {
                name: "grpc_calls".into(),
                kind: m.name().into(),
                value: self.shared.metrics.calls(m),
            }));
            Ok(StatsResponse {
                rank: rank.rank(),
                counters,
            })
        })
        .await
    }

    async fn all_reduce(
        &self,
        req: Request<AllReduceRequest>,
    ) -> Result<Response<CollectiveResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::AllReduce, async {
            let kind = Kind::AllReduce(
                collective::reduce_op("AllReduce", r.op)?,
                collective::algo("AllReduce", r.algo)?,
            );
            collective::run(&self.shared, "AllReduce", r.dtype, &r.data, kind).await
        })
        .await
    }

    async fn broadcast(
        &self,
        req: Request<BroadcastRequest>,
    ) -> Result<Response<CollectiveResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::Broadcast, async {
            let kind = Kind::Broadcast(r.root);
            collective::run(&self.shared, "Broadcast", r.dtype, &r.data, kind).await
        })
        .await
    }

    async fn all_gather(
        &self,
        req: Request<AllGatherRequest>,
    ) -> Result<Response<CollectiveResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::AllGather, async {
            collective::run(&self.shared, "AllGather", r.dtype, &r.data, Kind::AllGather).await
        })
        .await
    }

    async fn reduce_scatter(
        &self,
        req: Request<ReduceScatterRequest>,
    ) -> Result<Response<CollectiveResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::ReduceScatter, async {
            let kind = Kind::ReduceScatter(collective::reduce_op("ReduceScatter", r.op)?);
            collective::run(&self.shared, "ReduceScatter", r.dtype, &r.data, kind).await
        })
        .await
    }

    async fn all_to_all(
        &self,
        req: Request<AllToAllRequest>,
    ) -> Result<Response<CollectiveResponse>, Status> {
        let r = req.into_inner();
        self.observe(Method::AllToAll, async {
            collective::run(&self.shared, "AllToAll", r.dtype, &r.data, Kind::AllToAll).await
        })
        .await
    }
}
