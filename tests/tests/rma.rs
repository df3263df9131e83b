//! One-sided ops between real ranks over real loopback sockets: embedded
//! ranks drive the ops, and every cluster has at least one `pld-daemon`.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use half::{bf16, f16};
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::{Element, MsgKind};
use pld_server::{Dtype, NotifyOp, OpKind, Rank, TransportKind, WindowId};
use pld_tests::{Cluster, both, pattern};

const SIZES: [usize; 10] = [
    1,
    7,
    64,
    4096,
    65_539,
    1 << 20,
    (4 << 20) - 1,
    4 << 20,
    (4 << 20) + 5,
    8 << 20,
];

/// Every embedded rank puts to every rank (daemons and itself included)
/// and reads back through a different rank, for every size.
async fn put_get_round_trips(c: &Cluster) {
    let data = c.window("data");
    let n = c.n();
    for (i, &size) in SIZES.iter().enumerate() {
        for origin in c.embedded() {
            for target in 0..n {
                let bytes = pattern(
                    size,
                    (i as u64) << 16 | (origin.rank() as u64) << 8 | target as u64,
                );
                let offset = 3 + 8 * origin.rank() as u64;
                origin.put(target, data, offset, &bytes).await.unwrap();
                // Read it back through every embedded rank: the data is at the
                // target, not cached at the origin.
                for reader in c.embedded() {
                    let got = reader.get(target, data, offset, size as u64).await.unwrap();
                    assert!(
                        got[..] == bytes[..],
                        "size {size}: rank {} put to rank {target}, rank {} read something else",
                        origin.rank(),
                        reader.rank()
                    );
                }
            }
        }
    }
}

both!(
    put_get_sizes_1b_to_8mib_at_2_ranks,
    240,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[1]).await;
        put_get_round_trips(&c).await;
    }
);

both!(
    put_get_sizes_1b_to_8mib_at_4_ranks,
    480,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 4, &[2, 3]).await;
        put_get_round_trips(&c).await;
    }
);

/// Random element values of every dtype; finite floats with varied
/// exponents so that sums round.
fn values<T: Element>(n: usize, seed: u64, make: impl Fn(u64) -> T) -> Vec<T> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            make(x)
        })
        .collect()
}

fn float_from(x: u64) -> f64 {
    let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
    let exp = ((x >> 3) % 24) as i32 - 12;
    mantissa * 2f64.powi(exp)
}

/// Sets `init` at `target`, lets rank 0 then rank 1 add their operands,
/// and compares with `reference(reference(init, a), b)` elementwise.
async fn check_dtype<T: Element>(
    c: &Cluster,
    target: u32,
    add: [&Rank; 2],
    make: impl Fn(u64) -> T + Copy,
    reference: impl Fn(T, T) -> T,
    same: impl Fn(T, T) -> bool,
) {
    let data = c.window("data");
    let n = 1000;
    let init = values(n, 1, make);
    let a = values(n, 2, make);
    let b = values(n, 3, make);
    let offset = 4096;
    add[0]
        .put(target, data, offset, &to_bytes(&init))
        .await
        .unwrap();
    add[0]
        .atomic_add_elems(target, data, offset, &a)
        .await
        .unwrap();
    add[1]
        .atomic_add_elems(target, data, offset, &b)
        .await
        .unwrap();
    let bytes = add[1]
        .get(target, data, offset, (n * T::DTYPE.size()) as u64)
        .await
        .unwrap();
    let got: Vec<T> = from_bytes(&bytes);
    for i in 0..n {
        let want = reference(reference(init[i], a[i]), b[i]);
        assert!(
            same(got[i], want),
            "{} element {i} at rank {target}: {:?} + {:?} + {:?} = {:?}, want {:?}",
            T::DTYPE,
            init[i],
            a[i],
            b[i],
            got[i],
            want
        );
    }
}

async fn atomic_add_every_dtype(c: &Cluster, target: u32) {
    let adders = [c.rank(0), c.rank(1)];
    check_dtype(
        c,
        target,
        adders,
        |x| x as i8,
        i8::wrapping_add,
        |a, b| a == b,
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        |x| x as i16,
        i16::wrapping_add,
        |a, b| a == b,
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        |x| x as i32,
        i32::wrapping_add,
        |a, b| a == b,
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        |x| x as i64,
        i64::wrapping_add,
        |a, b| a == b,
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        |x| float_from(x) as f32,
        |a, b| a + b,
        |a, b| a.to_bits() == b.to_bits(),
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        float_from,
        |a, b| a + b,
        |a, b| a.to_bits() == b.to_bits(),
    )
    .await;
    // fp16/bf16: the exact sum in f64, rounded once to nearest even.
    check_dtype(
        c,
        target,
        adders,
        |x| f16::from_f64(float_from(x)),
        |a, b| f16::from_f64(a.to_f64() + b.to_f64()),
        |a, b| a.to_bits() == b.to_bits(),
    )
    .await;
    check_dtype(
        c,
        target,
        adders,
        |x| bf16::from_f64(float_from(x) * 1e3),
        |a, b| bf16::from_f64(a.to_f64() + b.to_f64()),
        |a, b| a.to_bits() == b.to_bits(),
    )
    .await;
}

both!(
    atomic_add_every_dtype_matches_the_reference,
    120,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 4, &[2, 3]).await;
        // At a daemon, at another embedded rank, and at one of the adders itself.
        for target in [3, 1, 0] {
            atomic_add_every_dtype(&c, target).await;
        }
    }
);

both!(
    notify_sets_and_adds_signal_cells,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[1]).await;
        let (r, signal) = (c.rank(0), c.window("signal"));
        r.notify(1, signal, 8, 5, NotifyOp::Set).await.unwrap();
        r.notify(1, signal, 8, -7, NotifyOp::AtomicAdd)
            .await
            .unwrap();
        r.notify(0, signal, 8, 40, NotifyOp::AtomicAdd)
            .await
            .unwrap();
        assert_eq!(
            from_bytes::<i32>(&r.get(1, signal, 8, 4).await.unwrap()),
            vec![-2]
        );
        assert_eq!(r.local(signal).unwrap().load_signal(8).unwrap(), 40);
    }
);

/// Rank 0's frames to a fake rank 1, read as rank 1 would apply them:
/// (op id, byte offset in the window, payload) of each put, in arrival
/// order, until `n` frames came.
async fn arrivals(end: &mut pld_tests::raw::FakeEnd, n: usize) -> Vec<(u64, u64, Vec<u8>)> {
    use pld_proto::v1::header::Body;
    let mut got = Vec::new();
    for _ in 0..n {
        let f = end.next().await;
        let offset = match &f.header.body {
            Some(Body::Put(p)) => p.offset,
            Some(Body::AtomicAdd(a)) => a.offset,
            other => panic!("expected a store, got {other:?}"),
        };
        got.push((f.header.id, offset, f.payload.to_vec()));
    }
    got
}

// The test below this one passes with a no-op `fence`: ops to one target
// are issued in order and every link is ordered. This one would fail on a
// transport that reorders: the fake target holds back every reply, and
// what it receives — a put of several frames, then, after the fence, a put
// and an add of the same bytes — must arrive in issue order, every frame
// of the first put before the second.
#[test]
fn a_fence_keeps_a_multi_frame_put_before_the_store_after_it_on_the_wire() {
    pld_tests::run(std::time::Duration::from_secs(60), async {
        let mut f = pld_tests::raw::Faked::start(std::time::Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let big = pattern(3 << 20, 1);
        let a = f.rank.put_nb(1, data, 0, &big).await.unwrap();
        f.rank.fence(1).unwrap();
        let b = f.rank.put_nb(1, data, 0, b"after").await.unwrap();
        f.rank.fence(1).unwrap();
        f.rank
            .atomic_add_nbi(1, data, 0, Dtype::Int8, &[1])
            .await
            .unwrap();
        // One frame per MiB of the big put (the frame limit), then two.
        let got = arrivals(&mut f.end, 5).await;
        let offsets: Vec<u64> = got.iter().map(|(_, o, _)| *o).collect();
        assert_eq!(offsets, [0, 1 << 20, 2 << 20, 0, 0], "{offsets:?}");
        let mut window = vec![0u8; 3 << 20];
        for (_, at, payload) in &got[..3] {
            window[*at as usize..*at as usize + payload.len()].copy_from_slice(payload);
        }
        assert!(
            window == big,
            "the first put's frames carry its bytes in order"
        );
        assert_eq!(got[3].2, b"after");
        assert_eq!(got[4].2, [1]);
        let ids: Vec<u64> = got.iter().map(|(id, _, _)| *id).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids in issue order: {ids:?}"
        );
        // Nothing was acknowledged yet: none of them waited for another.
        f.end
            .reply(pld_proto::frame::ack_header(ids[4], ids[0]))
            .await;
        a.wait().await.unwrap();
        b.wait().await.unwrap();
        f.rank.quiet().await.unwrap();
    });
}

both!(
    ops_to_one_target_apply_in_issue_order_across_fence,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[1]).await;
        let (r, data, signal) = (c.rank(0), c.window("data"), c.window("signal"));
        for i in 0..200u32 {
            let first = pattern(256, i as u64);
            let second = pattern(256, 10_000 + i as u64);
            let a = r.put_nb(1, data, 0, &first).await.unwrap();
            r.fence(1).unwrap();
            let b = r.put_nb(1, data, 0, &second).await.unwrap();
            // Atomics across a fence: a set-by-put cell, then adds after it,
            // then a fetch_add that must see both.
            r.fence(1).unwrap();
            let put_cell = r.put_nb(1, data, 4096, &10i64.to_le_bytes()).await.unwrap();
            r.fence(1).unwrap();
            let add = r
                .atomic_add_nb(1, data, 4096, Dtype::Int64, &to_bytes(&[5i64]))
                .await
                .unwrap();
            r.fence(1).unwrap();
            let fetched = r
                .fetch_add_nb(1, data, 4096, Dtype::Int64, 1)
                .await
                .unwrap();
            // A notify after the fence lands after every op before it.
            r.fence(1).unwrap();
            let s = r
                .notify_nb(1, signal, 0, i as i32, NotifyOp::Set)
                .await
                .unwrap();
            r.quiet().await.unwrap();
            // Handles of ops that quiet saw complete resolve at once.
            a.wait().await.unwrap();
            b.wait().await.unwrap();
            put_cell.wait().await.unwrap();
            add.wait().await.unwrap();
            assert_eq!(fetched.wait().await.unwrap(), 15, "iteration {i}");
            s.wait().await.unwrap();
            assert_eq!(
                &r.get(1, data, 0, 256).await.unwrap()[..],
                &second[..],
                "iteration {i}"
            );
            // The notify issued after the fences is the cell's value.
            let cell = r.get(1, signal, 0, 4).await.unwrap();
            assert_eq!(i32::from_le_bytes(cell[..4].try_into().unwrap()), i as i32);
            let total = r.get(1, data, 4096, 8).await.unwrap();
            assert_eq!(i64::from_le_bytes(total[..8].try_into().unwrap()), 16);
        }
    }
);

both!(
    quiet_waits_for_every_outstanding_op,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 4, &[2, 3]).await;
        let r = c.rank(0);
        let data = c.window("data");
        let block = pattern(64 * 1024, 9);
        // Issue many non-blocking ops to every peer and drop the handles.
        for i in 0..64u64 {
            for peer in 1..4 {
                drop(r.put_nb(peer, data, i * 65536, &block).await.unwrap());
                drop(
                    r.atomic_add_nb(peer, data, 8 << 20, Dtype::Int64, &to_bytes(&[1i64]))
                        .await
                        .unwrap(),
                );
            }
        }
        r.quiet().await.unwrap();
        // Everything is applied: check through another rank.
        for peer in 2..4 {
            let last = c.rank(1).get(peer, data, 63 * 65536, 65536).await.unwrap();
            assert_eq!(&last[..], &block[..]);
            let n = from_bytes::<i64>(&c.rank(1).get(peer, data, 8 << 20, 8).await.unwrap());
            assert_eq!(n, vec![64]);
        }
    }
);

both!(
    counters_count_each_message,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 4, &[3]).await;
        let data = c.window("data");
        let before0 = c.rank(0).stats();
        let before1 = c.rank(1).stats();
        for _ in 0..10 {
            c.rank(0).put(1, data, 0, &[1; 100]).await.unwrap();
        }
        c.rank(0).put(1, data, 0, &vec![2; 9 << 20]).await.unwrap(); // 9 frames of at most 1 MiB
        c.rank(0).put(0, data, 0, &[3; 8]).await.unwrap(); // to itself: no message
        let get = c.rank(0).get(1, data, 0, 8).await.unwrap();
        assert_eq!(&get[..], &[2; 8]);
        let after0 = c.rank(0).stats();
        let after1 = c.rank(1).stats();
        let d = |a: u64, b: u64| a - b;
        assert_eq!(
            d(
                after0.msgs_sent(MsgKind::Put),
                before0.msgs_sent(MsgKind::Put)
            ),
            19
        );
        assert_eq!(
            d(
                after0.ops_local(OpKind::Put),
                before0.ops_local(OpKind::Put)
            ),
            1
        );
        assert_eq!(
            d(
                after0.msgs_received(MsgKind::Ack),
                before0.msgs_received(MsgKind::Ack)
            ),
            19
        );
        assert_eq!(
            d(
                after0.msgs_sent(MsgKind::Get),
                before0.msgs_sent(MsgKind::Get)
            ),
            1
        );
        assert_eq!(
            d(
                after1.msgs_received(MsgKind::Put),
                before1.msgs_received(MsgKind::Put)
            ),
            19
        );
        assert_eq!(
            d(
                after1.requests_served(OpKind::Put),
                before1.requests_served(OpKind::Put)
            ),
            19
        );
        assert!(d(after0.bytes_sent, before0.bytes_sent) >= 9 << 20);
    }
);

/// Window contents of `peer` as seen from `r`.
pub async fn snapshot(r: &Rank, peer: u32, win: WindowId) -> bytes::Bytes {
    let size = r.local(win).unwrap().size();
    r.get(peer, win, 0, size).await.unwrap()
}
