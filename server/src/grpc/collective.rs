//! The collectives of the `pld.v1.Pld` service: each runs
//! [`pld_proto::collective`] on the daemon's rank, with the symmetric
//! window `collective` as scratch, one at a time per daemon.

use super::request::dtype;
use super::{Error, Shared};
use bytes::Bytes;
use half::{bf16, f16};
use pld_proto::collective::{self as coll, Algo, Scratch};
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::v1::{self as pb};
use pld_proto::{Dtype, ReduceOp, Scalar};

/// What one collective call asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    AllReduce(ReduceOp, Algo),
    Broadcast(u32),
    AllGather,
    ReduceScatter(ReduceOp),
    AllToAll,
}

pub(crate) fn reduce_op(call: &'static str, v: i32) -> Result<ReduceOp, Error> {
    match pb::ReduceOp::try_from(v) {
        Ok(pb::ReduceOp::Sum) => Ok(ReduceOp::Sum),
        Ok(pb::ReduceOp::Max) => Ok(ReduceOp::Max),
        Ok(pb::ReduceOp::Min) => Ok(ReduceOp::Min),
        Ok(pb::ReduceOp::Prod) => Ok(ReduceOp::Prod),
        Ok(pb::ReduceOp::Unspecified) => Err(Error::invalid(call, "the reduce op is missing")),
        Err(_) => Err(Error::invalid(
            call,
            format!("reduce op {v} is not one pld knows"),
        )),
    }
}

pub(crate) fn algo(call: &'static str, v: i32) -> Result<Algo, Error> {
    match pb::Algo::try_from(v) {
        Ok(pb::Algo::Unspecified | pb::Algo::Ring) => Ok(Algo::Ring),
        Ok(pb::Algo::Mesh) => Ok(Algo::Mesh),
        Err(_) => Err(Error::invalid(
            call,
            format!("algo {v} is not one pld knows"),
        )),
    }
}

/// Runs one collective on `data` (little-endian `dtype` elements).
pub(crate) async fn run(
    shared: &Shared,
    call: &'static str,
    dt: i32,
    data: &[u8],
    kind: Kind,
) -> Result<pb::CollectiveResponse, Error> {
    let rank = shared.rank()?;
    let dt = dtype(call, dt)?;
    if data.len() > shared.max_data {
        return Err(Error::TooLarge {
            call,
            len: data.len() as u64,
            max: shared.max_data as u64,
            instead: "smaller pieces",
        });
    }
    if data.len() % dt.size() != 0 {
        return Err(Error::invalid(
            call,
            format!(
                "{} bytes are not a whole number of {dt} elements ({} bytes each)",
                data.len(),
                dt.size()
            ),
        ));
    }
    let window = rank
        .window("collective")
        .map_err(|_| Error::NoCollectiveWindow { call })?;
    let bytes = shared
        .config
        .windows
        .iter()
        .find(|w| w.name == "collective")
        .map_or(0, |w| w.size);
    let scratch = Scratch {
        window,
        base: 0,
        bytes,
    };
    let _one_at_a_time = shared.collective.lock().await;
    let r: &crate::Rank = rank;
    let out = match dt {
        Dtype::Fp32 => typed::<f32>(r, &scratch, data, kind).await?,
        Dtype::Fp16 => typed::<f16>(r, &scratch, data, kind).await?,
        Dtype::Bf16 => typed::<bf16>(r, &scratch, data, kind).await?,
        Dtype::Int32 => typed::<i32>(r, &scratch, data, kind).await?,
        Dtype::Int16 => typed::<i16>(r, &scratch, data, kind).await?,
        Dtype::Int8 => typed::<i8>(r, &scratch, data, kind).await?,
        Dtype::Int64 => typed::<i64>(r, &scratch, data, kind).await?,
        Dtype::Fp64 => typed::<f64>(r, &scratch, data, kind).await?,
        Dtype::Unspecified => return Err(Error::invalid(call, "the dtype is missing")),
    };
    if out.len() > shared.max_data {
        return Err(Error::TooLarge {
            call,
            len: out.len() as u64,
            max: shared.max_data as u64,
            instead: "smaller pieces",
        });
    }
    Ok(pb::CollectiveResponse {
        data: Bytes::from(out),
    })
}

async fn typed<T: Scalar>(
    r: &crate::Rank,
    s: &Scratch<crate::WindowId>,
    data: &[u8],
    kind: Kind,
) -> Result<Vec<u8>, Error> {
    let x: Vec<T> = from_bytes(data);
    let out = match kind {
        Kind::AllReduce(op, algo) => coll::allreduce(r, s, &x, op, algo).await?,
        Kind::Broadcast(root) => coll::broadcast(r, s, &x, root).await?,
        Kind::AllGather => coll::allgather(r, s, &x).await?,
        Kind::ReduceScatter(op) => coll::reduce_scatter(r, s, &x, op).await?,
        Kind::AllToAll => coll::all_to_all(r, s, &x).await?,
    };
    Ok(to_bytes(&out))
}
