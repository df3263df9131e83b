//! Client authentication: a bearer token in the `authorization` metadata.

use super::Error;
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Lets a call through if it carries `authorization: Bearer <token>`, or if
/// the daemon has no token (and then listens on loopback only).
#[derive(Clone)]
pub(crate) struct BearerToken {
    token: Option<std::sync::Arc<str>>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("BearerToken")
            .field("set", &self.token.is_some())
            .finish()
    }
}

impl BearerToken {
    pub(crate) fn new(token: Option<String>) -> BearerToken {
        BearerToken {
            token: token.map(Into::into),
        }
    }

    fn check(&self, header: Option<&[u8]>) -> Result<(), Error> {
        let Some(want) = &self.token else {
            return Ok(());
        };
        let Some(value) = header else {
            return Err(Error::Unauthenticated("the call carries no client token"));
        };
        let got = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "))
            .ok_or(Error::Unauthenticated(
                "the authorization metadata is not a bearer token",
            ))?;
        if constant_time_eq(got, want.as_bytes()) {
            Ok(())
        } else {
            Err(Error::Unauthenticated("the client token is wrong"))
        }
    }
}

/// Compares the SHA-256 digests of both, without an early exit: neither
/// how much of a guess was right nor how long the token is shows in the
/// time the comparison takes.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let (da, db) = (
        ring::digest::digest(&ring::digest::SHA256, a),
        ring::digest::digest(&ring::digest::SHA256, b),
    );
    da.as_ref()
        .iter()
        .zip(db.as_ref())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

impl Interceptor for BearerToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        let checked = self.check(header);
        // The accept loop keeps proven connections and evicts refused ones
        // first when the connection cap is full.
        if let Some(conn) = request.extensions().get::<super::incoming::ClientInfo>() {
            conn.authenticated(checked.is_ok());
        }
        checked?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let t = BearerToken::new(Some("s3cret".into()));
        assert!(t.check(Some(b"Bearer s3cret")).is_ok());
        for bad in [
            None,
            Some(&b"Bearer s3cre"[..]),
            Some(b"Bearer s3cret "),
            Some(b"s3cret"),
            Some(b"Basic s3cret"),
        ] {
            let e = t.check(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(BearerToken::new(None).check(None).is_ok());
    }
}
