//! The device against real in-process ranks over loopback: every
//! diagnostic of SPEC §5's first bullet fires before anything is sent,
//! with its message; remote_store is exactly one message; put streams in
//! chunks; waits and barriers that cannot finish say why.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::MsgKind;
use pld_server::{Rank, TransportKind};
use pld_sim::{Atomic, Cmp, Device, Error, NotifyOp, Operand, Profile, PutOpts, Tensor, launch};
use std::sync::Arc;
use std::time::Duration;

const WINDOWS: [(&str, u64); 2] = [("data", 4 << 20), ("signal", 64 << 10)];

async fn devices(n: u32, transport: TransportKind, sync: Duration) -> Vec<Arc<Device<Rank>>> {
    let windows: Vec<(String, u64)> = WINDOWS.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    launch::start_ranks(n, transport, &windows, sync)
        .await
        .expect("ranks start")
        .into_iter()
        .map(|r| Arc::new(Device::new(Arc::new(r), Profile::A2a3sim, windows.clone())))
        .collect()
}

/// Every message rank `r` has sent so far, of every kind.
fn sent(dev: &Device<Rank>) -> Vec<u64> {
    let s = dev.rma().stats();
    MsgKind::ALL.iter().map(|k| s.msgs_sent(*k)).collect()
}

fn run(body: impl std::future::Future<Output = ()>) {
    pld_tests::run(Duration::from_secs(120), body);
}

#[test]
fn every_mistake_is_caught_before_anything_is_sent_and_says_the_fix() {
    run(async {
        let devs = devices(2, TransportKind::Tcp, Duration::from_secs(10)).await;
        let d = &devs[0];
        let data = d.alloc::<f32>("data", "data", [4, 64]).unwrap();
        let counts = d.alloc::<f32>("counts", "signal", [1, 8]).unwrap();
        let x = Tensor::<f32>::zeros("x", [4, 64]);
        let before = sent(d);
        let mut errors: Vec<Error> = Vec::new();

        // A DT/Tensor mix-up.
        errors.push(d.get_comm_ctx_of(Operand::Tensor(&x)).unwrap_err());
        errors.push(
            d.remote_store(&data, &data, 1, [0, 0], Atomic::None)
                .await
                .unwrap_err(),
        );
        // An out-of-bounds region.
        let tile = d.tile::<f32>([1, 64]).unwrap();
        errors.push(
            d.tile_remote_store(&tile, &data, 1, [4, 0], Atomic::None)
                .await
                .unwrap_err(),
        );
        errors.push(
            d.remote_load(&data, 1, [0, 8], [1, 64], None)
                .await
                .unwrap_err(),
        );
        // A dtype mismatch: signals are int32.
        errors.push(
            d.notify(&counts, 1, [0, 0], 1, NotifyOp::Set)
                .await
                .unwrap_err(),
        );
        // A tile over on-chip capacity (184 KiB on a2a3sim).
        errors.push(d.tile::<f32>([64, 1024]).unwrap_err());
        // A misaligned tile: 10 fp32 = 40 bytes a row.
        errors.push(d.tile::<f32>([1, 10]).unwrap_err());
        // pipeline without chunk sizes; offsets without shape.
        let opts = PutOpts {
            pipeline: true,
            ..PutOpts::default()
        };
        errors.push(d.put(&data, 1, &x, opts).await.unwrap_err());
        let opts = PutOpts {
            dst_offsets: Some([0, 0]),
            ..PutOpts::default()
        };
        errors.push(d.put(&data, 1, &x, opts).await.unwrap_err());

        let expect = [
            (
                "get_comm_ctx needs a DistributedTensor, but 'x' is a local Tensor",
                "allocate the shared buffer with alloc_window_buffer and pass a window view of it",
            ),
            (
                "the source 'data' is a window view",
                "load it into a tile first",
            ),
            (
                "the region at [4, 0] of shape [1, 64] does not fit in 'data' of shape [4, 64]",
                "shrink the shape",
            ),
            (
                "the region at [0, 8] of shape [1, 64] does not fit in 'data'",
                "move the offsets",
            ),
            (
                "'counts' is fp32, but int32 is required",
                "allocate the signal view as DistributedTensor<i32>",
            ),
            (
                "a [64, 1024] fp32 tile needs 262144 bytes of on-chip memory, but a2a3sim has",
                "use smaller tiles",
            ),
            (
                "tiles are 32-byte aligned",
                "pad the columns to a multiple of 8",
            ),
            (
                "put: pipeline=true needs both chunk_rows and chunk_cols",
                "give both",
            ),
            (
                "dst_offsets, src_offsets and shape go together",
                "give all three",
            ),
        ];
        assert_eq!(errors.len(), expect.len());
        for (e, (what, fix)) in errors.iter().zip(expect) {
            let msg = e.to_string();
            assert!(
                msg.contains(what) && msg.contains(fix),
                "{msg}\n  wants: {what} … {fix}"
            );
        }
        assert_eq!(sent(d), before, "nothing was sent");
        // The peer's window is untouched.
        let back = devs[1].read_own(&data).await.unwrap();
        assert!(back.data().iter().all(|v| *v == 0.0));
    });
}

#[test]
fn tile_and_tensor_remote_store_each_send_exactly_one_put_message() {
    run(async {
        let devs = devices(2, TransportKind::Quic, Duration::from_secs(10)).await;
        let d = &devs[0];
        // Strided targets: [8, 64] regions inside a [16, 128] view.
        let win = d.alloc::<f32>("win", "data", [16, 128]).unwrap();
        let src = launch::input::<f32>("x", 0, [8, 64]);
        let tile = d.load(&src, [0, 0], [8, 64]).await.unwrap();
        let put = |dev: &Device<Rank>| dev.rma().stats().msgs_sent(MsgKind::Put);
        let add = |dev: &Device<Rank>| dev.rma().stats().msgs_sent(MsgKind::AtomicAdd);

        let (p0, a0) = (put(d), add(d));
        d.tile_remote_store(&tile, &win, 1, [0, 32], Atomic::None)
            .await
            .unwrap();
        assert_eq!(put(d), p0 + 1, "tile remote_store: one put message");
        d.tensor_remote_store(&src, &win, 1, [8, 0], Atomic::None)
            .await
            .unwrap();
        assert_eq!(put(d), p0 + 2, "tensor remote_store: one put message");
        // The short form dispatches to the same single message.
        d.remote_store(&src, &win, 1, [8, 64], Atomic::Add)
            .await
            .unwrap();
        d.remote_store(&tile, &win, 1, [8, 64], Atomic::Add)
            .await
            .unwrap();
        assert_eq!(
            (put(d), add(d)),
            (p0 + 2, a0 + 2),
            "atomic: one atomic-add put each"
        );

        // The data landed where the offsets say.
        let got = devs[1].read_own(&win).await.unwrap();
        for r in 0..8u64 {
            for c in 0..64u64 {
                let v = src.at(r, c);
                assert_eq!(got.at(r, 32 + c), v);
                assert_eq!(got.at(8 + r, c), v);
                assert_eq!(got.at(8 + r, 64 + c), 2.0 * v);
            }
        }
        assert_eq!(got.at(0, 31), 0.0, "outside the region");

        // put streams chunked: 8 rows in 2×32 chunks are 8 messages.
        let p1 = put(d);
        let opts = PutOpts::region([0, 0], [0, 0], [8, 64])
            .chunks(2, 32)
            .pipelined();
        d.put(&win, 1, &src, opts).await.unwrap();
        assert_eq!(put(d), p1 + 8, "4 row-chunks × 2 column-chunks");
        let mut back = Tensor::<f32>::zeros("back", [8, 64]);
        d.get(
            &mut back,
            1,
            &win,
            PutOpts::region([0, 0], [0, 0], [8, 64]).chunks(4, 64),
        )
        .await
        .unwrap();
        assert_eq!(back.data(), src.data());
    });
}

#[test]
fn a_wait_that_cannot_finish_names_the_cell_and_a_barrier_the_missing_rank() {
    run(async {
        let devs = devices(3, TransportKind::Tcp, Duration::from_millis(500)).await;
        let sig = devs[0].alloc::<i32>("sig", "signal", [1, 8]).unwrap();
        let bar = devs[0].alloc::<i32>("bar", "signal", [3, 1]).unwrap();
        devs[0]
            .notify(&sig, 0, [0, 3], 2, NotifyOp::Set)
            .await
            .unwrap();
        let e = devs[0].wait(&sig, [0, 3], 5, Cmp::Ge).await.unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("wait on 'sig'[0, 3]")
                && msg.contains(">= 5")
                && msg.contains("last value seen 2"),
            "{msg}"
        );
        assert!(devs[0].test(&sig, [0, 3], 2, Cmp::Eq).await.unwrap());

        // Ranks 0 and 1 enter a barrier; rank 2 never does.
        let (a, b) = (devs[0].clone(), devs[1].clone());
        let s0 = bar.clone();
        let s1 = bar.clone();
        let (ra, rb) = tokio::join!(
            tokio::spawn(async move { a.barrier(&s0).await }),
            tokio::spawn(async move { b.barrier(&s1).await })
        );
        for r in [ra.unwrap(), rb.unwrap()] {
            let msg = r.unwrap_err().to_string();
            assert!(
                msg.contains("barrier on signal 'bar', round")
                    && msg.contains("rank 2 never arrived at cell"),
                "{msg}"
            );
        }
    });
}
