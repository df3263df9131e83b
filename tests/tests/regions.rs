//! 2-D strided regions, streamed in chunks, between real ranks: odd shapes
//! checked byte for byte, chunk counts, exact atomic sums, and transfers far
//! larger than any buffer a rank keeps.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::MsgKind;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_server::{
    Chunking, Dtype, Error, Layout, OpKind, Rank, Shape, Transfer, TransportKind, WindowId,
};
use pld_tests::{Cluster, both, pattern};

const BIG: [&str; 2] = ["data=80MiB", "signal=64KiB"];

fn layout(offset: u64, row_stride: u64) -> Layout {
    Layout { offset, row_stride }
}

fn shape(rows: u64, cols: u64) -> Shape {
    Shape { rows, cols }
}

/// What the window holds after `region` of `src` lands at `dst` in a window
/// that held `before`: the expected bytes, computed by hand.
fn expected(before: &[u8], t: &Transfer, src: &[u8]) -> Vec<u8> {
    let e = t.dtype.size() as u64;
    let mut w = before.to_vec();
    for r in 0..t.shape.rows {
        let s = ((t.src.offset + r * t.src.row_stride) * e) as usize;
        let d = ((t.dst.offset + r * t.dst.row_stride) * e) as usize;
        let n = (t.shape.cols * e) as usize;
        w[d..d + n].copy_from_slice(&src[s..s + n]);
    }
    w
}

/// Puts a region into `peer`'s window and reads it back two ways: the whole
/// window byte for byte (the region landed, the gaps between its rows did
/// not change) and the region itself into another layout.
async fn round_trip(c: &Cluster, peer: u32, t: Transfer, chunking: Chunking, seed: u64) {
    let r = c.rank(0);
    let data = c.window("data");
    let size = r.local(data).unwrap().size();
    let before = pattern(size as usize, seed);
    r.put(peer, data, 0, &before).await.unwrap();
    let e = t.dtype.size() as u64;
    let src_len = ((t.src.offset + t.src.span_or_zero(t.shape)) * e) as usize;
    let src = pattern(src_len, seed + 1);
    r.put_region(peer, data, &t, &src, chunking).await.unwrap();
    let after = r.get(peer, data, 0, size).await.unwrap();
    let want = expected(&before, &t, &src);
    assert!(
        after[..] == want[..],
        "{}x{} {}: the window differs",
        t.shape.rows,
        t.shape.cols,
        t.dtype
    );
    // Back into a packed buffer (a different layout) through get_region.
    let back = Transfer {
        dtype: t.dtype,
        shape: t.shape,
        src: t.dst,
        dst: layout(0, t.shape.cols),
    };
    let mut packed = vec![0u8; (t.shape.rows * t.shape.cols * e) as usize];
    c.rank(1)
        .get_region(peer, data, &back, &mut packed, chunking)
        .await
        .unwrap();
    let mut want_packed = Vec::with_capacity(packed.len());
    for row in 0..t.shape.rows {
        let s = ((t.src.offset + row * t.src.row_stride) * e) as usize;
        want_packed.extend_from_slice(&src[s..s + (t.shape.cols * e) as usize]);
    }
    assert!(
        packed == want_packed,
        "{}x{} {}: get_region differs",
        t.shape.rows,
        t.shape.cols,
        t.dtype
    );
}

trait SpanOrZero {
    fn span_or_zero(self, shape: Shape) -> u64;
}
impl SpanOrZero for Layout {
    fn span_or_zero(self, shape: Shape) -> u64 {
        self.span(shape).unwrap()
    }
}

both!(
    odd_shapes_land_byte_for_byte,
    300,
    |t: TransportKind| async move {
        // Rank 2 (the target) is a daemon; ranks 0 and 1 are embedded.
        let c = Cluster::start_windows(t, 3, &[2], &BIG, |_| {}).await;
        let cases = [
            // 1 x 1
            (
                Transfer {
                    dtype: Dtype::Fp64,
                    shape: shape(1, 1),
                    dst: layout(3, 1),
                    src: layout(0, 1),
                },
                Chunking::default(),
            ),
            // 3 x 5 with row stride 7 on both sides
            (
                Transfer {
                    dtype: Dtype::Int16,
                    shape: shape(3, 5),
                    dst: layout(11, 7),
                    src: layout(2, 7),
                },
                Chunking::default(),
            ),
            (
                Transfer {
                    dtype: Dtype::Int16,
                    shape: shape(3, 5),
                    dst: layout(11, 7),
                    src: layout(2, 7),
                },
                Chunking::pipelined(2, 2),
            ),
            // 1 x 16M
            (
                Transfer {
                    dtype: Dtype::Int8,
                    shape: shape(1, 16 << 20),
                    dst: layout(5, 16 << 20),
                    src: layout(0, 16 << 20),
                },
                Chunking::default(),
            ),
            (
                Transfer {
                    dtype: Dtype::Int8,
                    shape: shape(1, 16 << 20),
                    dst: layout(5, 16 << 20),
                    src: layout(0, 16 << 20),
                },
                Chunking::pipelined(1, 1 << 20),
            ),
            // 4096 x 4096 fp32, dense, then as a window into a wider matrix
            (
                Transfer {
                    dtype: Dtype::Fp32,
                    shape: shape(4096, 4096),
                    dst: layout(0, 4096),
                    src: layout(0, 4096),
                },
                Chunking::pipelined(256, 1024),
            ),
            (
                Transfer {
                    dtype: Dtype::Fp32,
                    shape: shape(4096, 4096),
                    dst: layout(64, 4100),
                    src: layout(0, 4096),
                },
                Chunking::default(),
            ),
            (
                Transfer {
                    dtype: Dtype::Fp32,
                    shape: shape(4096, 4096),
                    dst: layout(0, 4096),
                    src: layout(7, 4103),
                },
                Chunking::chunks(80, 3000),
            ),
        ];
        for (i, (tr, chunking)) in cases.into_iter().enumerate() {
            round_trip(&c, 2, tr, chunking, i as u64 * 10).await;
            // And to an embedded rank, and to the origin itself.
            if tr.shape.rows * tr.shape.cols < 1 << 20 {
                round_trip(&c, 1, tr, chunking, i as u64 * 10 + 5).await;
                round_trip(&c, 0, tr, chunking, i as u64 * 10 + 7).await;
            }
        }
    }
);

async fn sent(r: &Rank, kind: MsgKind) -> u64 {
    r.stats().msgs_sent(kind)
}

both!(
    chunk_sizes_set_the_number_of_chunk_messages,
    120,
    |t: TransportKind| async move {
        let c = Cluster::start_windows(t, 2, &[1], &BIG, |_| {}).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let tr = Transfer {
            dtype: Dtype::Fp32,
            shape: shape(1000, 3000),
            dst: layout(0, 3000),
            src: layout(0, 3000),
        };
        let src = pattern(1000 * 3000 * 4, 1);
        let mut back = vec![0u8; src.len()];
        for (chunking, want) in [
            (Chunking::chunks(80, 3000), 13),
            (Chunking::pipelined(80, 3000), 13),
            (Chunking::pipelined(64, 1000), 16 * 3),
            (Chunking::chunks(1000, 1), 3000),
            (
                Chunking {
                    depth: Some(2),
                    ..Chunking::pipelined(7, 512)
                },
                143 * 6,
            ),
            // No chunking: whole rows that fill a 1 MiB frame (87 rows of 12 000 bytes).
            (Chunking::default(), 12),
        ] {
            let (p0, a0) = (
                sent(r, MsgKind::Put).await,
                r.stats().msgs_received(MsgKind::Ack),
            );
            r.put_region(1, data, &tr, &src, chunking).await.unwrap();
            assert_eq!(sent(r, MsgKind::Put).await - p0, want, "put {chunking:?}");
            // Each chunk is acknowledged alone or within a cumulative ack
            // of consecutive chunks the target answered in one write.
            let acks = r.stats().msgs_received(MsgKind::Ack) - a0;
            assert!(
                (1..=want).contains(&acks),
                "{acks} ack frames for {want} chunks"
            );
            let g0 = sent(r, MsgKind::Get).await;
            r.get_region(1, data, &tr, &mut back, chunking)
                .await
                .unwrap();
            assert_eq!(sent(r, MsgKind::Get).await - g0, want, "get {chunking:?}");
            assert!(back == src);
        }
        // Errors before anything is sent.
        let before = r.stats().bytes_sent;
        let puts_before = r.stats().ops_issued(OpKind::Put);
        let bad = [
            Chunking {
                pipeline: true,
                ..Chunking::default()
            },
            Chunking {
                chunk_rows: Some(10),
                ..Chunking::default()
            },
            Chunking::chunks(0, 10),
            Chunking {
                depth: Some(1),
                ..Chunking::pipelined(10, 10)
            },
            Chunking::chunks(1000, 3000), // 12 MB chunks exceed the 1 MiB frame
        ];
        for chunking in bad {
            let e = r
                .put_region(1, data, &tr, &src, chunking)
                .await
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidTransfer { .. }),
                "{chunking:?}: {e}"
            );
        }
        let e = r
            .put_region(1, data, &tr, &src[..100], Chunking::default())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("the source buffer holds 100 bytes"),
            "{e}"
        );
        let off_end = Transfer {
            dst: layout(20 << 20, 3000),
            ..tr
        };
        assert!(matches!(
            r.put_region(1, data, &off_end, &src, Chunking::default())
                .await,
            Err(Error::Access { .. })
        ));
        let e = Transfer::from_parts(Dtype::Fp32, Some(layout(0, 1)), None, Some(shape(1, 1)))
            .unwrap_err();
        assert!(e.to_string().contains("give all three or none"), "{e}");
        assert_eq!(r.stats().bytes_sent, before, "nothing was sent");
        assert_eq!(
            r.stats().ops_issued(OpKind::Put),
            puts_before,
            "no put was issued"
        );
    }
);

both!(
    three_ranks_add_64_mib_each_into_one_rank_exactly,
    300,
    |t: TransportKind| async move {
        let c = std::sync::Arc::new(Cluster::start_windows(t, 4, &[3], &BIG, |_| {}).await);
        let data = c.window("data");
        let n: u64 = 16 << 20; // int32 elements: 64 MiB
        let value = |r: u32, i: u64| ((i * (r as u64 + 1)) % 1009) as i32 - 500;
        let tasks: Vec<_> = (0..3u32)
            .map(|r| {
                let c = c.clone();
                tokio::spawn(async move {
                    let operands: Vec<i32> = (0..n).map(|i| value(r, i)).collect();
                    let tr = Transfer {
                        dtype: Dtype::Int32,
                        shape: shape(4096, 4096),
                        dst: layout(0, 4096),
                        src: layout(0, 4096),
                    };
                    c.rank(r)
                        .atomic_add_region(
                            3,
                            data,
                            &tr,
                            &to_bytes(&operands),
                            Chunking::pipelined(64, 4096),
                        )
                        .await
                        .unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let sums = from_bytes::<i32>(&c.rank(0).get(3, data, 0, n * 4).await.unwrap());
        for (i, s) in sums.iter().enumerate() {
            let want: i32 = (0..3).map(|r| value(r, i as u64)).sum();
            assert_eq!(*s, want, "element {i}");
        }
    }
);

both!(
    a_256_mib_region_moves_through_bounded_memory,
    300,
    |t: TransportKind| async move {
        let windows = ["data=260MiB", "signal=64KiB"];
        let c = Cluster::start_windows(t, 2, &[1], &windows, |_| {}).await;
        let (r, data): (&Rank, WindowId) = (c.rank(0), c.window("data"));
        let n = 256u64 << 20;
        let tr = Transfer {
            dtype: Dtype::Int8,
            shape: shape(1024, 256 << 10),
            dst: layout(0, 256 << 10),
            src: layout(0, 256 << 10),
        };
        let src = pattern(n as usize, 77);
        r.put_region(1, data, &tr, &src, Chunking::pipelined(4, 256 << 10))
            .await
            .unwrap();
        let mut back = vec![0u8; n as usize];
        r.get_region(1, data, &tr, &mut back, Chunking::pipelined(4, 256 << 10))
            .await
            .unwrap();
        assert!(back == src, "256 MiB came back byte for byte");
        // The daemon holds its 260 MiB window; it never held a whole transfer too.
        let peak = c.daemons[0].peak_memory().expect("VmHWM");
        eprintln!("daemon peak memory: {} MiB", peak >> 20);
        assert!(
            peak < (260 << 20) + (96 << 20),
            "daemon peak {} MiB",
            peak >> 20
        );
    }
);
