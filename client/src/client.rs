//! [`Client`]: a connection to one pld daemon, acting as its rank.

use crate::error::{Error, Result};
use bytes::Bytes;
use pld_proto::geometry::{byte_offset, check_buffer, packed_len, wire_region};
use pld_proto::region::{Chunking, Transfer};
use pld_proto::v1::pld_client::PldClient;
use pld_proto::v1::{self as pb, InfoResponse, Region};
use pld_proto::{Cmp, Dtype, NotifyOp};
use std::time::{Duration, Instant};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request};

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

/// A window of the cluster, resolved by name with [`Client::window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowId(pub(crate) u32);

/// A client of one pld daemon. Every op is issued by the daemon's rank, to
/// any rank of the cluster, and returns once applied at its target (a get
/// once the bytes are here), exactly like the embedded `Rank`.
///
/// Transfers larger than one gRPC message stream (`PutStream` /
/// `GetStream`) without the caller noticing. Cloning is cheap: clones share
/// the connection.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) grpc: PldClient<Channel>,
    pub(crate) addr: String,
    token: Option<MetadataValue<Ascii>>,
    info: InfoResponse,
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
                c.refresh().await?;
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
        let r = self
            .grpc
            .clone()
            .info(self.req(pb::InfoRequest {}))
            .await
            .map_err(|s| self.err(s))?;
        self.info = r.into_inner();
        Ok(&self.info)
    }

    /// What the daemon said about itself at connect time.
    pub fn info(&self) -> &InfoResponse {
        &self.info
    }

    /// The daemon's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The daemon's rank.
    pub fn rank(&self) -> u32 {
        self.info.rank
    }

    /// How many ranks the cluster has.
    pub fn nranks(&self) -> u32 {
        self.info.nranks
    }

    /// The most data one unary message carries.
    pub fn max_data(&self) -> usize {
        (self.info.max_message_data as usize).max(4096)
    }

    /// The window called `name`.
    pub fn window(&self, name: &str) -> Result<WindowId> {
        self.info
            .windows
            .iter()
            .position(|w| w.name == name)
            .map(|i| WindowId(i as u32))
            .ok_or_else(|| Error::NoSuchWindow {
                name: name.into(),
                known: self
                    .info
                    .windows
                    .iter()
                    .map(|w| format!("'{}' ({} bytes)", w.name, w.size))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    pub(crate) fn window_name(&self, w: WindowId) -> Result<String> {
        self.info
            .windows
            .get(w.0 as usize)
            .map(|w| w.name.clone())
            .ok_or_else(|| {
                Error::InvalidArgument(format!("window id {} is not this cluster's", w.0))
            })
    }

    /// A request with the token attached.
    pub(crate) fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        if let Some(t) = &self.token {
            r.metadata_mut().insert("authorization", t.clone());
        }
        r
    }

    pub(crate) fn err(&self, s: tonic::Status) -> Error {
        Error::status(&self.addr, s)
    }

    /// Writes `data` at `offset` of `peer`'s window.
    pub async fn put(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<()> {
        if data.len() > self.max_data() {
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, None, Chunking::default(), false)?,
                    data,
                )
                .await;
        }
        let req = pb::PutRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            data: Bytes::copy_from_slice(data),
            region: None,
        };
        self.grpc
            .clone()
            .put(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(())
    }

    /// Reads `len` bytes at `offset` of `peer`'s window.
    pub async fn get(&self, peer: u32, win: WindowId, offset: u64, len: u64) -> Result<Bytes> {
        if len > self.max_data() as u64 {
            let mut out = vec![0u8; usize::try_from(len).map_err(|_| too_large(len))?];
            self.get_stream_into(peer, win, offset, len, None, Chunking::default(), &mut out)
                .await?;
            return Ok(out.into());
        }
        let req = pb::GetRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            len,
            region: None,
        };
        let r = self
            .grpc
            .clone()
            .get(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner().data)
    }

    /// Elementwise `window[offset..] += operands`, atomic per element.
    pub async fn atomic_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<()> {
        if operands.len() > self.max_data() {
            let n = (operands.len() / dtype.size().max(1)) as u64;
            let region = Region {
                rows: 1,
                cols: n,
                row_stride: n,
                dtype: dtype as i32,
            };
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, Some(region), Chunking::default(), true)?,
                    operands,
                )
                .await;
        }
        let req = pb::AtomicAddRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(operands),
            region: None,
        };
        self.grpc
            .clone()
            .atomic_add(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(())
    }

    /// Atomically adds `value` to one int32/int64 cell; returns the previous value.
    pub async fn fetch_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64> {
        let req = pb::FetchAddRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            value,
        };
        let r = self
            .grpc
            .clone()
            .fetch_add(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner().previous)
    }

    /// Atomically swaps one int32/int64 cell holding `expected` for
    /// `desired`; returns the previous value.
    pub async fn compare_swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64> {
        let req = pb::CompareSwapRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            dtype: dtype as i32,
            expected,
            desired,
        };
        let r = self
            .grpc
            .clone()
            .compare_swap(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner().previous)
    }

    /// Sets or adds to an int32 signal cell of `peer`.
    pub async fn notify(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        let req = pb::NotifyRequest {
            rank: peer,
            window: self.window_name(win)?,
            offset,
            value,
            op: op as i32,
        };
        self.grpc
            .clone()
            .notify(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(())
    }

    /// Waits (up to the daemon's sync timeout) until this rank's int32 cell
    /// satisfies `cmp expected`; returns the value that did.
    pub async fn wait(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<i32> {
        self.wait_within(win, offset, cmp, expected, Duration::ZERO)
            .await
    }

    /// [`Client::wait`] with an explicit timeout (zero: the daemon's).
    pub async fn wait_within(
        &self,
        win: WindowId,
        offset: u64,
        cmp: Cmp,
        expected: i32,
        timeout: Duration,
    ) -> Result<i32> {
        let req = pb::WaitRequest {
            window: self.window_name(win)?,
            offset,
            cmp: cmp as i32,
            value: expected,
            timeout_ms: timeout.as_millis() as u64,
        };
        let r = self
            .grpc
            .clone()
            .wait(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner().value)
    }

    /// Whether this rank's int32 cell satisfies `cmp expected` now.
    pub async fn test(&self, win: WindowId, offset: u64, cmp: Cmp, expected: i32) -> Result<bool> {
        let req = pb::TestRequest {
            window: self.window_name(win)?,
            offset,
            cmp: cmp as i32,
            value: expected,
        };
        let r = self
            .grpc
            .clone()
            .test(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner().satisfied)
    }

    /// This rank enters a barrier (up to the daemon's sync timeout).
    pub async fn barrier(&self) -> Result<()> {
        self.barrier_within(Duration::ZERO).await
    }

    /// [`Client::barrier`] with an explicit timeout (zero: the daemon's).
    pub async fn barrier_within(&self, timeout: Duration) -> Result<()> {
        let req = pb::BarrierRequest {
            timeout_ms: timeout.as_millis() as u64,
        };
        self.grpc
            .clone()
            .barrier(self.req(req))
            .await
            .map_err(|s| self.err(s))?;
        Ok(())
    }

    /// Waits until every op the daemon's rank issued has completed.
    pub async fn quiet(&self) -> Result<()> {
        self.grpc
            .clone()
            .quiet(self.req(pb::QuietRequest { timeout_ms: 0 }))
            .await
            .map_err(|s| self.err(s))?;
        Ok(())
    }

    /// The daemon's counters.
    pub async fn stats(&self) -> Result<pb::StatsResponse> {
        let r = self
            .grpc
            .clone()
            .stats(self.req(pb::StatsRequest {}))
            .await
            .map_err(|s| self.err(s))?;
        Ok(r.into_inner())
    }

    /// Checks `peer` against the cluster: the client's ops are blocking, so
    /// ops to one peer are applied in the order they returned.
    pub fn fence(&self, peer: u32) -> Result<()> {
        if peer >= self.nranks() {
            return Err(Error::InvalidArgument(format!(
                "rank {peer} does not exist: the cluster has ranks 0 to {}",
                self.nranks().saturating_sub(1)
            )));
        }
        Ok(())
    }

    /// Puts a 2-D region (see `pld_proto::Rma::put_region`).
    pub async fn put_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(peer, win, t, src, chunking, false).await
    }

    /// Atomically adds a 2-D region, atomic per element.
    pub async fn atomic_add_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(peer, win, t, src, chunking, true).await
    }

    async fn store_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
        atomic: bool,
    ) -> Result<()> {
        let elem = t.dtype.size() as u64;
        check_buffer(t.src, t.shape, elem, src.len(), "the source buffer")?;
        let packed = pld_proto::region::pack(src, t.src, t.shape, elem);
        // A streamed atomic add needs a region: its dtype says how to add.
        let region = wire_region(t.dtype, t.dst, t.shape).or_else(|| {
            atomic.then_some(pb::Region {
                rows: t.shape.rows,
                cols: t.shape.cols,
                row_stride: t.shape.cols,
                dtype: t.dtype as i32,
            })
        });
        let offset = byte_offset(t.dst, elem)?;
        if packed.len() > self.max_data() || chunking != Chunking::default() {
            return self
                .put_stream_bytes(
                    self.stream_header(peer, win, offset, region, chunking, atomic)?,
                    &packed,
                )
                .await;
        }
        let window = self.window_name(win)?;
        let data = Bytes::from(packed);
        let mut grpc = self.grpc.clone();
        let r = if atomic {
            grpc.atomic_add(self.req(pb::AtomicAddRequest {
                rank: peer,
                window,
                offset,
                dtype: t.dtype as i32,
                data,
                region,
            }))
            .await
            .map(|_| ())
        } else {
            grpc.put(self.req(pb::PutRequest {
                rank: peer,
                window,
                offset,
                data,
                region,
            }))
            .await
            .map(|_| ())
        };
        r.map_err(|s| self.err(s))
    }

    /// Gets a 2-D region of `peer`'s window (`t.src`) into `dst` (`t.dst`).
    pub async fn get_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        dst: &mut [u8],
        chunking: Chunking,
    ) -> Result<()> {
        let elem = t.dtype.size() as u64;
        check_buffer(t.dst, t.shape, elem, dst.len(), "the destination buffer")?;
        let region = wire_region(t.dtype, t.src, t.shape);
        let offset = byte_offset(t.src, elem)?;
        let len = packed_len(t.shape, t.dtype)?;
        let mut packed = vec![0u8; usize::try_from(len).map_err(|_| too_large(len))?];
        if len > self.max_data() as u64 || chunking != Chunking::default() {
            self.get_stream_into(peer, win, offset, len, region, chunking, &mut packed)
                .await?;
        } else {
            let r = self
                .grpc
                .clone()
                .get(self.req(pb::GetRequest {
                    rank: peer,
                    window: self.window_name(win)?,
                    offset,
                    len,
                    region,
                }))
                .await
                .map_err(|s| self.err(s))?;
            let data = r.into_inner().data;
            if data.len() != packed.len() {
                return Err(Error::InvalidArgument(format!(
                    "the daemon returned {} bytes for a region of {}",
                    data.len(),
                    packed.len()
                )));
            }
            packed.copy_from_slice(&data);
        }
        pld_proto::region::unpack(&packed, dst, t.dst, t.shape, elem);
        Ok(())
    }
}

fn too_large(len: u64) -> Error {
    Error::InvalidArgument(format!("{len} bytes do not fit in this process's memory"))
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
