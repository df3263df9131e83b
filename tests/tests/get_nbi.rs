//! `get_nbi` (docs/semantics.md, "Completion"): a get without a handle
//! whose bytes go from the socket straight into the origin's own window.
//! These tests check that the bytes land by `quiet` where they were asked
//! to and nowhere else, in chunks as in one frame and from the own rank;
//! that what the origin can check it refuses before anything is sent; that
//! a refused get, a wrong reply and a lost link fail the next `quiet`,
//! naming the get, and leave the other gets' bytes landed; and that a
//! `wait` on the landing bytes wakes.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::frame;
use pld_proto::v1::{ErrorCode, GetReply, Header, header::Body};
use pld_server::{AccessError, CheckedMode, Cmp, Error, OpKind, TransportKind};
use pld_tests::raw::Faked;
use pld_tests::{Cluster, both, run};
use std::time::{Duration, Instant};

/// Bytes `0..n` of a pattern no two neighbouring cells share.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

both!(
    get_nbi_lands_the_bytes_in_the_own_window_by_quiet_and_nowhere_else,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let src = pattern(3 << 20);
        c.rank(1).local(data).unwrap().write(0, &src).unwrap();
        let mine = r.local(data).unwrap();
        mine.write(0, &vec![0xee; 8 << 20]).unwrap();
        let served_before = c.rank(1).stats().requests_served(OpKind::Get);
        // 256 gets of one 8 B cell each, issued without yielding, then one
        // larger than a frame (it travels as several gets).
        for i in 0..256u64 {
            r.get_nbi(1, data, 8 * i, 8, data, 8 * i).await.unwrap();
        }
        r.get_nbi(1, data, 0, 3 << 20, data, 4 << 20).await.unwrap();
        r.quiet().await.unwrap();
        let got = mine.read(0, 8 << 20).unwrap();
        assert!(got[..2048] == src[..2048], "the 256 cells landed");
        assert!(
            got[2048..4 << 20].iter().all(|&b| b == 0xee),
            "no byte between the destinations changed"
        );
        assert!(
            got[4 << 20..7 << 20] == src[..],
            "the chunked get landed whole"
        );
        assert!(
            got[7 << 20..].iter().all(|&b| b == 0xee),
            "no byte after the chunked get's destination changed"
        );
        let served = c.rank(1).stats().requests_served(OpKind::Get) - served_before;
        assert!(
            served >= 259,
            "{served} get requests served of 256 + 3 chunks"
        );
        // From the own rank, into overlapping bytes of the same window: the
        // bytes as they were before the get.
        r.get_nbi(0, data, 0, 64, data, 32).await.unwrap();
        r.quiet().await.unwrap();
        assert!(
            mine.read(32, 64).unwrap()[..] == src[..64],
            "a local get, overlapping"
        );
    }
);

both!(
    get_nbi_refuses_what_the_origin_can_check_and_sends_nothing,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let size = 16u64 << 20;
        let served_before = c.rank(1).stats().requests_served(OpKind::Get);
        let e = r.get_nbi(1, data, 0, 16, data, size - 8).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Access {
                    op: OpKind::Get,
                    rank: 0,
                    ..
                }
            ),
            "a destination outside the own window names this rank: {e}"
        );
        let e = r.get_nbi(1, data, size - 8, 16, data, 0).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Access {
                    op: OpKind::Get,
                    rank: 1,
                    ..
                }
            ),
            "a source outside the target's window names the target: {e}"
        );
        let e = r.get_nbi(9, data, 0, 16, data, 0).await.unwrap_err();
        assert!(matches!(e, Error::NoSuchRank { rank: 9, .. }), "{e}");
        r.quiet().await.unwrap();
        let served = c.rank(1).stats().requests_served(OpKind::Get) - served_before;
        assert_eq!(
            served, 0,
            "nothing refused at the origin reached the target"
        );
    }
);

both!(
    a_wait_on_bytes_a_get_nbi_lands_wakes_when_they_land,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, signal) = (c.rank(0), c.window("signal"));
        c.rank(1)
            .local(signal)
            .unwrap()
            .write(16, &7i32.to_le_bytes())
            .unwrap();
        let started = Instant::now();
        // The wait's deadline is a minute: only a wake-up ends it sooner
        // (half of it is room for a loaded machine).
        let wait = r.wait_within(signal, 16, Cmp::Eq, 7, Duration::from_secs(60));
        let (v, ()) = tokio::join!(wait, async {
            r.get_nbi(1, signal, 16, 4, signal, 16).await.unwrap();
        });
        assert_eq!(v.unwrap(), 7);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the wait ended at its deadline, not when the bytes landed"
        );
        r.quiet().await.unwrap();
    }
);

both!(
    in_strict_checked_mode_a_get_nbi_landing_on_unordered_bytes_is_refused_as_a_race,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start_with(t, 2, &[], |c| c.checked = CheckedMode::Strict).await;
        let (r0, r1) = (c.rank(0), c.rank(1));
        let data = r0.window("data").unwrap();
        r1.local(data).unwrap().write(4096, &[3; 64]).unwrap();
        // Rank 1 stores into rank 0's bytes 0..64; rank 0 lands a get in
        // them with nothing ordering the two: the landing races the put.
        r1.put(0, data, 0, &[7; 64]).await.unwrap();
        let e = r0.get_nbi(1, data, 4096, 64, data, 0).await.unwrap_err();
        match &e {
            Error::Access {
                op: OpKind::Get,
                rank: 0,
                error: AccessError::Race { report },
            } => assert!(
                report.contains("window 'data' bytes 0..64"),
                "the race names the bytes: {report}"
            ),
            other => panic!("expected a race refusal, got {other}"),
        }
        assert_eq!(
            &r0.local(data).unwrap().read(0, 64).unwrap(),
            &[7; 64],
            "nothing landed"
        );
        // After a barrier the two are ordered: the same get lands.
        let (a, b) = tokio::join!(r0.barrier(), r1.barrier());
        a.unwrap();
        b.unwrap();
        r0.get_nbi(1, data, 4096, 64, data, 0).await.unwrap();
        r0.quiet().await.unwrap();
        assert_eq!(&r0.local(data).unwrap().read(0, 64).unwrap(), &[3; 64]);
    }
);

fn get_reply(id: u64) -> Header {
    Header {
        id,
        body: Some(Body::GetReply(GetReply {})),
        checked: None,
    }
}

#[test]
fn a_refused_or_misanswered_get_nbi_fails_the_next_quiet_and_the_others_land() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        for i in 0..4u64 {
            f.rank.get_nbi(1, data, 0, 8, data, 8 * i).await.unwrap();
        }
        let mut ids = Vec::new();
        for _ in 0..4 {
            let fr = f.end.next().await;
            assert!(
                matches!(fr.header.body, Some(Body::Get(_))),
                "a get's frame: {:?}",
                fr.header
            );
            ids.push(fr.header.id);
        }
        // The first and last answered right; the second refused; the third
        // answered with 4 bytes of the 8 asked.
        f.end.reply_with(get_reply(ids[0]), &[1; 8]).await;
        let refusal = frame::error_header(ids[1], ErrorCode::OutOfRange, "two is out".into());
        f.end.reply(refusal).await;
        f.end.reply_with(get_reply(ids[2]), &[3; 4]).await;
        f.end.reply_with(get_reply(ids[3]), &[4; 8]).await;
        match f.rank.quiet_within(Duration::from_secs(5)).await {
            Err(Error::ImplicitFailed { failed: 2, first }) => match *first {
                Error::Rejected {
                    rank: 1,
                    op: OpKind::Get,
                    id,
                    code: ErrorCode::OutOfRange,
                    ref message,
                } if id == ids[1] && message == "two is out" => {}
                other => panic!("expected the refusal of get #{}, got {other}", ids[1]),
            },
            other => panic!("expected quiet to report the two failed gets, got {other:?}"),
        }
        let got = f.rank.local(data).unwrap().read(0, 32).unwrap();
        assert_eq!(&got[..8], &[1; 8], "get one landed");
        assert_eq!(&got[8..24], &[0; 16], "the failed gets changed nothing");
        assert_eq!(&got[24..], &[4; 8], "get four landed");
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
        // The wrong answer alone: a protocol error naming the get.
        f.rank.get_nbi(1, data, 0, 8, data, 64).await.unwrap();
        let id = f.end.next().await.header.id;
        f.end.reply_with(get_reply(id), &[5; 9]).await;
        match f.rank.quiet_within(Duration::from_secs(5)).await {
            Err(Error::ImplicitFailed { failed: 1, first }) => match *first {
                Error::Protocol {
                    rank: 1,
                    ref reason,
                } if reason.contains(&format!("get #{id} of 8 bytes with 9 bytes")) => {}
                other => panic!("expected a protocol error naming get #{id}, got {other}"),
            },
            other => panic!("expected quiet to report the misanswered get, got {other:?}"),
        }
    });
}

#[test]
fn a_get_nbi_on_a_link_that_is_lost_fails_the_next_quiet() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        f.rank.get_nbi(1, data, 0, 8, data, 0).await.unwrap();
        f.end.next().await;
        drop(f.end);
        match f.rank.quiet_within(Duration::from_secs(10)).await {
            Err(Error::ImplicitFailed { failed: 1, first }) => {
                assert!(matches!(*first, Error::PeerLost { rank: 1, .. }), "{first}");
            }
            other => panic!("expected quiet to report the lost get, got {other:?}"),
        }
    });
}
