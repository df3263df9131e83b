//! [`Client`]: one connection to a pld daemon, acting as its rank. This
//! file holds the type and what it knows of the daemon; `connect.rs` makes
//! one, `ops.rs` has the ops, `stream.rs` the streamed transfers.

use crate::error::{Error, Result};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::InfoResponse;
use std::future::Future;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

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
    pub(crate) token: Option<MetadataValue<Ascii>>,
    pub(crate) info: InfoResponse,
}

impl Client {
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

    /// One unary call: the token attached, the daemon's error mapped. The
    /// one place for `grpc.clone().X(self.req(..)).await.map_err(..)`:
    /// `self.call(req, |mut g, r| async move { g.put(r).await })`.
    pub(crate) async fn call<Q, A, F, Fut>(&self, req: Q, f: F) -> Result<A>
    where
        F: FnOnce(PldClient<Channel>, Request<Q>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<A>, Status>>,
    {
        f(self.grpc.clone(), self.req(req))
            .await
            .map(Response::into_inner)
            .map_err(|s| self.err(s))
    }
}
