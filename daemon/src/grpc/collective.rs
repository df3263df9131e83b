//! The collectives of the `pld.v1.Pld` service: each runs
//! [`pld_proto::collective`] on the daemon's rank, with the symmetric
//! window `collective` as scratch, one at a time per daemon.

use super::request::dtype;
use super::{Error, Shared};
use bytes::Bytes;
use half::{bf16, f16};
use pld_proto::collective::{self as coll, Algo, CallKind, Scratch};
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

impl Kind {
    /// The call as the ranks must agree on it.
    fn call(self, dtype: Dtype, len: u64) -> coll::Call {
        let (kind, op, algo, root) = match self {
            Kind::AllReduce(op, algo) => (CallKind::AllReduce, Some(op), Some(algo), None),
            Kind::Broadcast(root) => (CallKind::Broadcast, None, None, Some(root)),
            Kind::AllGather => (CallKind::AllGather, None, None, None),
            Kind::ReduceScatter(op) => (CallKind::ReduceScatter, Some(op), None, None),
            Kind::AllToAll => (CallKind::AllToAll, None, None, None),
        };
        coll::Call {
            kind,
            op,
            algo,
            root,
            dtype,
            len,
        }
    }
}

/// Every rank puts its `call` into its slot of every rank's agreement
/// area (at `at` of `window`), a barrier orders the puts, and each rank
/// compares the P calls it then holds: the same P everywhere, so all
/// ranks pass or all fail, with the same report. A failing rank passes
/// one more barrier first, so that no rank's next call overwrites a slot
/// another is still reading. (`pld_proto::collective::agree`.)
async fn agree(
    r: &pld_server::Rank,
    name: &'static str,
    window: pld_server::WindowId,
    at: u64,
    call: coll::Call,
) -> Result<(), Error> {
    let (me, p) = (u64::from(r.rank()), r.nranks());
    let size = coll::Call::SIZE as u64;
    let slot = call.encode();
    // Puts with handles, not put_nbi: a put that fails is this
    // collective's error, not one left for the client's next Quiet.
    let mut puts = Vec::with_capacity(p as usize);
    for peer in 0..p {
        puts.push(r.put_nb(peer, window, at + me * size, &slot).await?);
    }
    for put in puts {
        put.wait().await?;
    }
    r.barrier().await?;
    let all = r.get(r.rank(), window, at, u64::from(p) * size).await?;
    let calls: Vec<Option<coll::Call>> = all
        .chunks(coll::Call::SIZE)
        .map(coll::Call::decode)
        .collect();
    let Some(report) = coll::disagreement(&calls) else {
        return Ok(());
    };
    r.barrier().await?;
    Err(Error::CollectiveMismatch { call: name, report })
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
    // The last P slots of the window are the agreement area.
    let slots = u64::from(rank.nranks()) * coll::Call::SIZE as u64;
    let scratch = Scratch {
        window,
        base: 0,
        bytes: bytes.saturating_sub(slots),
    };
    let _one_at_a_time = shared.collective.lock().await;
    let r: &pld_server::Rank = rank;
    // What can be refused here is, before any rank waits for another.
    let c = kind.call(dt, data.len() as u64);
    coll::check::<pld_server::Error>(&c, rank.nranks(), scratch.bytes)?;
    agree(r, call, window, scratch.bytes, c).await?;
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
    r: &pld_server::Rank,
    s: &Scratch<pld_server::WindowId>,
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
