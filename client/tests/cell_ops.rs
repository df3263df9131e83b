//! The OpenSHMEM ops pld serves natively — swap, fetch, set, and / or /
//! xor with and without fetch, put_signal — written once against `Rma`
//! and run on embedded ranks and through gRPC clients of daemons alike:
//! every rank at once on one cell, exact results; put_signal's data and
//! signal applied together; bad requests refused by name with no byte
//! changed.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, Code, Dtype, NotifyOp, Rma};
use pld_proto::{BitOp, CellOp};
use pld_tests::{Cluster, GrpcCluster, both};

/// Every rank at once: each sets its bit with fetch_bitwise(or) and sees
/// its bit clear before; swaps a token; then rank 0 checks the totals.
async fn contended<R: Rma>(r: &R) -> Result<(), R::Error> {
    let (me, n) = (r.rank(), r.nranks());
    let data = r.window("data")?;
    // Cells at 64 (bits), 72 (token), 80 (xor), 88 (set/fetch).
    let before = r
        .cell_op(
            0,
            data,
            64,
            Dtype::Int64,
            CellOp::FetchBitwise(BitOp::Or, 1 << me),
        )
        .await?;
    assert_eq!(
        before & (1 << me),
        0,
        "rank {me} saw its own bit set before it set it"
    );
    let old = r
        .cell_op(0, data, 72, Dtype::Int64, CellOp::Swap(me as i64 + 1))
        .await?;
    assert!((0..=n as i64).contains(&old), "swap returned {old}");
    r.cell_op(
        0,
        data,
        80,
        Dtype::Int32,
        CellOp::Bitwise(BitOp::Xor, 0x0f0f),
    )
    .await?;
    r.cell_op(
        0,
        data,
        80,
        Dtype::Int32,
        CellOp::Bitwise(BitOp::Xor, 0x0f0f),
    )
    .await?;
    r.barrier().await?;
    if me == 0 {
        let bits = r.cell_op(0, data, 64, Dtype::Int64, CellOp::Fetch).await?;
        assert_eq!(bits, (1 << n) - 1, "every rank's bit, once");
        assert_eq!(
            r.cell_op(0, data, 80, Dtype::Int32, CellOp::Fetch).await?,
            0,
            "xor twice"
        );
        let token = r.cell_op(0, data, 72, Dtype::Int64, CellOp::Fetch).await?;
        assert!((1..=n as i64).contains(&token), "token {token}");
        let cleared = r
            .cell_op(0, data, 64, Dtype::Int64, CellOp::Bitwise(BitOp::And, 0))
            .await?;
        assert_eq!(cleared, 0, "a non-fetching op answers 0");
        r.cell_op(1 % n, data, 88, Dtype::Int32, CellOp::Set(-5))
            .await?;
        let set = r
            .cell_op(1 % n, data, 88, Dtype::Int32, CellOp::Fetch)
            .await?;
        assert_eq!(set, -5, "set then fetch, int32 sign-extended");
    }
    r.barrier().await?;
    // put_signal: 4 KiB and an ADD of 1 into the right neighbour's signal.
    let right = (me + 1) % n;
    let payload = vec![me as u8 + 1; 4096];
    r.put_signal(
        right,
        (data, 8192),
        &payload,
        (data, 128),
        1,
        NotifyOp::AtomicAdd,
    )
    .await?;
    r.barrier().await?;
    let left = (me + n - 1) % n;
    let got = r.get(me, data, 8192, 4096).await?;
    assert!(
        got.iter().all(|b| *b == left as u8 + 1),
        "the data arrived with the signal"
    );
    let signal = r
        .cell_op(me, data, 128, Dtype::Int64, CellOp::Fetch)
        .await?;
    assert_eq!(signal, 1, "one signal");
    Ok(())
}

both!(
    cell_ops_and_put_signal_are_exact_on_embedded_ranks,
    60,
    |t: pld_server::TransportKind| async move {
        let c = Cluster::start(t, 3, &[]).await;
        let (a, b, d) = tokio::join!(
            contended(c.rank(0)),
            contended(c.rank(1)),
            contended(c.rank(2))
        );
        for r in [a, b, d] {
            r.unwrap();
        }
    }
);

both!(
    cell_ops_and_put_signal_are_exact_through_grpc,
    120,
    |t: pld_server::TransportKind| async move {
        let c = GrpcCluster::start(t, 3, &[]);
        let mut set = tokio::task::JoinSet::new();
        for addr in &c.grpc {
            let cl = Client::connect(addr).await.unwrap();
            set.spawn(async move { contended(&cl).await });
        }
        while let Some(j) = set.join_next().await {
            j.unwrap().unwrap();
        }
    }
);

both!(
    a_bad_cell_op_is_refused_by_name_and_changes_no_byte,
    60,
    |t: pld_server::TransportKind| async move {
        let c = GrpcCluster::start(t, 2, &[]);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(1, data, 0, &[7u8; 16]).await.unwrap();
        // Bitwise ops take integer cells only.
        let e = cl
            .cell_op(1, data, 0, Dtype::Fp32, CellOp::Bitwise(BitOp::Or, 1))
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("atomic_bitwise does not support dtype"),
            "{e}"
        );
        // A misaligned cell.
        let e = cl
            .cell_op(1, data, 4, Dtype::Int64, CellOp::Swap(1))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
        // A kind the service does not know, raw.
        let mut raw = common::raw(&c.grpc[0]).await;
        let s = raw
            .cell_op(pld_proto::v1::CellOpRequest {
                rank: 1,
                window: "data".into(),
                dtype: Dtype::Int64 as i32,
                kind: 4,
                bit_op: 0,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "{s:?}");
        assert!(s.message().contains("no cell op"), "{s:?}");
        // A signal cell that is not 8-byte aligned.
        let e = cl
            .put_signal(1, (data, 0), &[1; 8], (data, 4), 1, NotifyOp::Set)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(
            &cl.get(1, data, 0, 16).await.unwrap()[..],
            &[7u8; 16],
            "no byte changed"
        );
    }
);
