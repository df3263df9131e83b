//! Decoding a client-plane request: its window, dtype, comparison,
//! chunking, notify op and geometry, checked, with errors that name the call. Shared by
//! the unary service, the streams and the collectives.

use super::Error;
use pld_proto::region::Chunking;
use pld_proto::v1::Region;
use pld_proto::{Cmp, Dtype, NotifyOp};
use pld_server::{Rank, WindowId};
use std::time::Duration;
use tonic::metadata::MetadataMap;

/// The `grpc-timeout` the client set, if any ("100m", "5S", ...).
pub(crate) fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let v = metadata.get("grpc-timeout")?.to_str().ok()?;
    if v.len() < 2 {
        return None;
    }
    let (n, unit) = v.split_at(v.len() - 1);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

pub(crate) fn dtype(call: &'static str, value: i32) -> Result<Dtype, Error> {
    match Dtype::try_from(value) {
        Ok(Dtype::Unspecified) => Err(Error::invalid(call, "the dtype is missing")),
        Ok(d) => Ok(d),
        Err(_) => Err(Error::invalid(call, format!("unknown dtype value {value}"))),
    }
}

/// Where a transfer lies in the window and in the packed bytes of the call
/// (the rules are pld_proto's: one copy for every driver).
pub(crate) use pld_proto::geometry::Geometry;

/// A request's geometry, its errors naming `call`.
pub(crate) fn geometry(
    call: &'static str,
    dtype: Dtype,
    offset: u64,
    region: Option<&Region>,
    len: u64,
) -> Result<Geometry, Error> {
    Geometry::from_request(dtype, offset, region, len)
        .map_err(|error| Error::Geometry { call, error })
}

pub(crate) fn window(rank: &Rank, name: &str) -> Result<WindowId, Error> {
    Ok(rank.window(name)?)
}

/// A region's dtype, or `fallback` (bytes) without a region.
pub(crate) fn region_dtype(
    call: &'static str,
    region: Option<&Region>,
    fallback: Dtype,
) -> Result<Dtype, Error> {
    region.map_or(Ok(fallback), |r| dtype(call, r.dtype))
}

pub(crate) fn chunking(c: Option<&pld_proto::v1::Chunking>) -> Chunking {
    let Some(c) = c else {
        return Chunking::default();
    };
    let some = |v: u64| (v != 0).then_some(v);
    Chunking {
        chunk_rows: some(c.chunk_rows),
        chunk_cols: some(c.chunk_cols),
        pipeline: c.pipeline,
        depth: (c.depth != 0).then_some(c.depth as usize),
    }
}

pub(crate) fn check_data(call: &'static str, g: &Geometry, got: usize) -> Result<(), Error> {
    g.check_data(got)
        .map_err(|error| Error::Geometry { call, error })
}

pub(crate) fn cmp(call: &'static str, value: i32) -> Result<Cmp, Error> {
    match Cmp::try_from(value) {
        Ok(Cmp::Unspecified) | Err(_) => Err(Error::invalid(
            call,
            format!("the comparison value {value} is none of EQ, NE, GT, GE, LT, LE"),
        )),
        Ok(c) => Ok(c),
    }
}

/// A notify op: SET or ATOMIC_ADD.
pub(crate) fn notify_op(call: &'static str, value: i32) -> Result<NotifyOp, Error> {
    match NotifyOp::try_from(value) {
        Ok(op @ (NotifyOp::Set | NotifyOp::AtomicAdd)) => Ok(op),
        _ => Err(Error::invalid(
            call,
            format!("notify op value {value} is neither SET nor ATOMIC_ADD"),
        )),
    }
}

/// A cell op: its kind and, for the bitwise kinds, and / or / xor.
pub(crate) fn cell_op(
    call: &'static str,
    kind: i32,
    bit_op: i32,
    value: i64,
) -> Result<pld_proto::CellOp, Error> {
    pld_proto::CellOp::from_request(kind, bit_op, value).ok_or_else(|| {
        Error::invalid(
            call,
            format!(
                "kind {kind} with bit op {bit_op} is no cell op: kind is SWAP, FETCH, SET, BITWISE or FETCH_BITWISE, and the bitwise kinds take AND, OR or XOR"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units_parse() {
        let mut m = MetadataMap::new();
        for (v, d) in [
            ("100m", Duration::from_millis(100)),
            ("5S", Duration::from_secs(5)),
            ("2M", Duration::from_secs(120)),
            ("7u", Duration::from_micros(7)),
        ] {
            m.insert("grpc-timeout", v.parse().unwrap());
            assert_eq!(grpc_timeout(&m), Some(d), "{v}");
        }
        m.insert("grpc-timeout", "12x".parse().unwrap());
        assert_eq!(grpc_timeout(&m), None);
    }
}
