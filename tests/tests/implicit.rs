//! Implicit-completion puts (`Rank::put_nbi`, docs/semantics.md,
//! "Completion"): no handle; the next `quiet` waits for them and fails if
//! any failed, naming the first and counting them, then starts afresh. What
//! is refused before anything is sent is refused by `put_nbi` itself.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::OpKind;
use pld_proto::frame::ack_header as ack;
use pld_server::{Error, TransportKind};
use pld_tests::raw::Faked;
use pld_tests::{Cluster, both, run};
use std::time::Duration;

/// The quiet error's count and first failure.
fn failures(r: pld_server::Result<()>) -> (u64, Error) {
    match r {
        Err(Error::ImplicitFailed { failed, first }) => (failed, *first),
        other => panic!("expected quiet to report failed implicit requests, got {other:?}"),
    }
}

both!(
    put_nbi_small_large_and_local_are_all_applied_by_quiet,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        // 256 small puts, each to its own cell, one to cell 0 after them all.
        let n = 256u32;
        for i in 1..=n {
            r.put_nbi(1, data, 4 * u64::from(i), &i.to_le_bytes())
                .await
                .unwrap();
        }
        r.put_nbi(1, data, 0, &n.to_le_bytes()).await.unwrap();
        // One larger than a frame (it travels in chunks), and one to itself.
        let big: Vec<u8> = (0..(5 << 19)).map(|i| (i % 251) as u8).collect();
        r.put_nbi(1, data, 4 << 20, &big).await.unwrap();
        r.put_nbi(0, data, 0, &[9; 8]).await.unwrap();
        r.quiet().await.unwrap();
        let got = r.get(1, data, 0, 4 * (u64::from(n) + 1)).await.unwrap();
        assert_eq!(&got[..4], &n.to_le_bytes(), "cell 0");
        for i in 1..=n as usize {
            assert_eq!(
                &got[4 * i..4 * i + 4],
                &(i as u32).to_le_bytes(),
                "cell {i}"
            );
        }
        let got = r.get(1, data, 4 << 20, big.len() as u64).await.unwrap();
        assert!(got[..] == big[..], "the chunked put_nbi arrived whole");
        assert_eq!(&r.get(0, data, 0, 8).await.unwrap()[..], &[9; 8]);
    }
);

#[test]
fn a_put_nbi_refused_at_the_origin_fails_at_once_and_leaves_quiet_clean() {
    run(Duration::from_secs(60), async {
        let f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        match f.rank.put_nbi(1, data, 1 << 40, &[1; 8]).await {
            Err(Error::Access {
                op: OpKind::Put,
                rank: 1,
                ..
            }) => {}
            other => panic!("expected the origin to refuse the range, got {other:?}"),
        }
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn a_put_nbi_refused_by_the_target_fails_the_next_quiet_naming_itself_once() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        for i in 0..8u64 {
            f.rank.put_nbi(1, data, 8 * i, &[1; 8]).await.unwrap();
        }
        let ids = f.end.ids(8).await;
        let bad = ids[3];
        f.end.refuse_one(&ids, 3, "op four is out").await;
        let (failed, first) = failures(f.rank.quiet_within(Duration::from_secs(5)).await);
        assert_eq!(failed, 1, "only the refused put failed");
        Faked::assert_refused_put(&first, bad, "op four is out");
        // Reported once: the next quiet has nothing to say.
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn put_nbi_requests_cut_by_a_lost_link_fail_the_next_quiet_with_their_count() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        for i in 0..16u64 {
            f.rank.put_nbi(1, data, 8 * i, &[2; 8]).await.unwrap();
        }
        let ids = f.end.ids(16).await;
        f.end.reply(ack(ids[3], ids[0])).await;
        let Faked { rank, mut end } = f;
        // A put_nbi of two chunks (the fake's frames carry at most 1 MiB),
        // read off the link while it is written.
        let big = vec![3u8; 3 << 19];
        let (put, chunks) = tokio::join!(rank.put_nbi(1, data, 1 << 20, &big), end.ids(2));
        put.unwrap();
        assert_eq!(
            chunks,
            [ids[15] + 1, ids[15] + 2],
            "the chunks follow the puts"
        );
        drop(end);
        let (failed, first) = failures(rank.quiet_within(Duration::from_secs(5)).await);
        assert_eq!(failed, 12 + 2, "the 12 unacknowledged puts and both chunks");
        assert!(matches!(first, Error::PeerLost { rank: 1, .. }), "{first}");
        rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

/// Barrier signal `round` of barrier `epoch`, as the fake rank 1 sends it.
fn signal(epoch: u64, round: u32) -> pld_proto::v1::Header {
    use pld_proto::v1::{BarrierSignal, Header, header::Body};
    Header {
        id: 0,
        body: Some(Body::Barrier(BarrierSignal { epoch, round })),
        checked: None,
    }
}

// One thread runs the rank and the fake: the barrier's task gets to run at
// each of the test's yields, so a barrier that did not wait for the puts
// would have its signal on the wire before the fake answers them.
#[test]
fn a_barrier_waits_for_put_nbi_puts_and_leaves_their_failures_to_the_next_quiet() {
    use pld_proto::v1::header::Body;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let test = async {
        let f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        for i in 0..4u64 {
            f.rank.put_nbi(1, data, 8 * i, &[1; 8]).await.unwrap();
        }
        let Faked { rank, mut end } = f;
        let (barrier, ()) = tokio::join!(rank.barrier_within(Duration::from_secs(20)), async {
            let ids = end.ids(4).await;
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
            assert!(
                !end.has_unread(),
                "the barrier signalled before its puts were answered"
            );
            end.refuse_one(&ids, 1, "the second put is out").await;
            // Now the signal: rank 0 signals rank 1 in round 0.
            let f = end.next().await;
            assert!(matches!(f.header.body, Some(Body::Barrier(_))), "{f:?}");
            end.reply(signal(1, 0)).await;
        });
        barrier.expect("the barrier passes: a put_nbi's failure is the next quiet's");
        let (failed, first) = failures(rank.quiet_within(Duration::from_secs(5)).await);
        assert_eq!(failed, 1);
        assert!(
            first.to_string().contains("the second put is out"),
            "{first}"
        );
    };
    let done = rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), test).await });
    done.expect("the test finished within 60 s");
}
