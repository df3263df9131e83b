//! Counting the calls that never reach a handler — refused by the token
//! check, or whose request did not decode — by method and status code,
//! as the handlers count theirs (`Service::observe`): without it the
//! per-method metrics showed a flood of refused or garbage calls as
//! nothing.
//!
//! [`Counted`] wraps the `Pld` service. It runs each call inside a
//! task-local flag that a handler sets when it counts the call itself
//! ([`handled`]); a call whose response comes back with the flag unset
//! is counted here, with the code of its trailers-only response.

use super::GrpcMetrics;
use pld_grpc::Method;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::codegen::http;
use tonic::server::NamedService;

tokio::task_local! {
    static HANDLED: Cell<bool>;
}

/// A handler counted this call itself.
pub(crate) fn handled() {
    let _ = HANDLED.try_with(|h| h.set(true));
}

/// The method a request path names (`/pld.v1.Pld/Put`), if any.
fn method_of(service: &str, path: &str) -> Option<Method> {
    let name = path
        .strip_prefix('/')?
        .strip_prefix(service)?
        .strip_prefix('/')?;
    Method::ALL.into_iter().find(|m| m.name() == name)
}

/// The `Pld` service, counting what its handlers do not.
#[derive(Debug, Clone)]
pub(crate) struct Counted<S> {
    inner: S,
    metrics: Arc<GrpcMetrics>,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, metrics: Arc<GrpcMetrics>) -> Self {
        Counted { inner, metrics }
    }
}

impl<S: NamedService> NamedService for Counted<S> {
    const NAME: &'static str = S::NAME;
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, RB> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>> + NamedService + Send,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method_of(S::NAME, req.uri().path());
        let metrics = self.metrics.clone();
        let t0 = Instant::now();
        // The interceptor runs here, before the future: inside the scope
        // below, the handler runs (or does not).
        let call = self.inner.call(req);
        Box::pin(HANDLED.scope(Cell::new(false), async move {
            let res = call.await;
            let counted = HANDLED.with(Cell::get);
            if let (false, Some(m), Ok(r)) = (counted, method, &res) {
                // As the client will see it (the server's outer layer
                // remaps tonic's codec errors).
                let code = tonic::Status::from_header_map(r.headers())
                    .map_or(tonic::Code::Unknown, |s| super::error::client_code(&s));
                metrics.record(m, code, t0.elapsed());
            }
            res
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_method_of_this_service_only() {
        assert_eq!(
            method_of("pld.v1.Pld", "/pld.v1.Pld/Put"),
            Some(Method::Put)
        );
        assert_eq!(method_of("pld.v1.Pld", "/pld.v1.Pld/Nope"), None);
        assert_eq!(method_of("pld.v1.Pld", "/other.Svc/Put"), None);
        assert_eq!(method_of("pld.v1.Pld", "Put"), None);
    }
}
