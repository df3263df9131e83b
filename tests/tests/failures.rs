//! The failure rules of docs/semantics.md ("Failures"), one test each,
//! mostly against a fake rank 1 that the test drives frame by frame: an op
//! with no reply fails with `OpTimeout` naming it; every outstanding op to
//! a lost peer fails with `PeerLost`; `quiet` counts a failed op as done; a
//! target's refusal reaches the origin with its code; a put larger than a
//! frame is applied frame by frame; and `shutdown` delivers the last
//! barrier signal.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::frame::error_header;
use pld_proto::v1::{Ack, Header, header::Body};
use pld_proto::{ErrorCode, OpKind};
use pld_server::{Error, TransportKind};
use pld_tests::raw::Faked;
use pld_tests::{Cluster, both, run};
use std::time::Duration;

#[test]
fn an_op_with_no_reply_fails_with_op_timeout_naming_op_id_and_rank() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_millis(500)).await;
        let data = f.rank.window("data").unwrap();
        let e = f.rank.put(1, data, 0, b"lost").await.unwrap_err();
        match &e {
            Error::OpTimeout {
                rank: 1,
                op: OpKind::Put,
                id,
                timeout,
            } => {
                assert_eq!(*timeout, Duration::from_millis(500));
                assert_eq!(
                    e.to_string(),
                    format!("put #{id} to rank 1 got no reply within 500ms")
                );
            }
            other => panic!("expected OpTimeout, got {other}"),
        }
        // A late reply is ignored, and the link serves the next op.
        let put = f.end.next().await;
        f.end
            .reply(Header {
                id: put.header.id,
                body: Some(Body::Ack(Ack::default())),
                checked: None,
            })
            .await;
        let handle = f.rank.put_nb(1, data, 8, b"next").await.unwrap();
        let frame = f.end.next().await;
        assert!(matches!(frame.header.body, Some(Body::Put(_))));
        f.end
            .reply(Header {
                id: frame.header.id,
                body: Some(Body::Ack(Ack::default())),
                checked: None,
            })
            .await;
        handle.wait().await.unwrap();
        // quiet counts the timed-out op as done: nothing is outstanding.
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn every_outstanding_op_to_a_lost_peer_fails_with_peer_lost() {
    run(Duration::from_secs(60), async {
        let f = Faked::start(Duration::from_secs(30)).await;
        let (data, signal) = (
            f.rank.window("data").unwrap(),
            f.rank.window("signal").unwrap(),
        );
        let r = &f.rank;
        let puts = [
            r.put_nb(1, data, 0, b"a").await.unwrap(),
            r.put_nb(1, data, 8, b"b").await.unwrap(),
        ];
        let get = r.get_nb(1, data, 0, 8).await.unwrap();
        let add = r
            .fetch_add_nb(1, data, 64, pld_server::Dtype::Int64, 1)
            .await
            .unwrap();
        let note = r
            .notify_nb(1, signal, 0, 1, pld_server::NotifyOp::Set)
            .await
            .unwrap();
        // The fake dies.
        let Faked { rank, end } = f;
        drop(end);
        let lost = |e: Error| match e {
            Error::PeerLost { rank: 1, .. } => {}
            other => panic!("expected PeerLost naming rank 1, got {other}"),
        };
        for p in puts {
            lost(p.wait().await.unwrap_err());
        }
        lost(get.wait().await.unwrap_err());
        lost(add.wait().await.unwrap_err());
        lost(note.wait().await.unwrap_err());
        // So does the next op, at once; and quiet has nothing left to wait for.
        lost(rank.put(1, data, 0, b"c").await.unwrap_err());
        rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn a_refusal_reaches_the_origin_with_the_targets_code_and_message() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let handle = f.rank.put_nb(1, data, 0, b"refused").await.unwrap();
        let frame = f.end.next().await;
        f.end
            .reply(error_header(
                frame.header.id,
                ErrorCode::OutOfRange,
                "no room here".into(),
            ))
            .await;
        match handle.wait().await.unwrap_err() {
            Error::Rejected {
                rank: 1,
                op: OpKind::Put,
                code: ErrorCode::OutOfRange,
                message,
                ..
            } => assert_eq!(message, "no room here"),
            other => panic!("expected Rejected with OUT_OF_RANGE, got {other}"),
        }
    });
}

#[test]
fn a_put_larger_than_a_frame_is_sent_and_applied_frame_by_frame() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        // The fake's Hello allows 1 MiB frames: 3 MiB + 1 byte is four frames,
        // all sent before any is acknowledged, each a put of its own part.
        let bytes = pld_tests::pattern((3 << 20) + 1, 3);
        let handle = f.rank.put_nb(1, data, 4096, &bytes).await.unwrap();
        let mut parts = Vec::new();
        for _ in 0..4 {
            let frame = f.end.next().await;
            let Some(Body::Put(p)) = &frame.header.body else {
                panic!("expected a put frame, got {:?}", frame.header);
            };
            parts.push((p.offset, frame.payload.len(), frame.header.id));
        }
        let offsets: Vec<u64> = parts.iter().map(|p| p.0).collect();
        assert_eq!(
            offsets,
            vec![4096, 4096 + (1 << 20), 4096 + (2 << 20), 4096 + (3 << 20)]
        );
        assert_eq!(parts.iter().map(|p| p.1).sum::<usize>(), bytes.len());
        // A reader between two of these acks sees part of the put: the op
        // completes only with the last.
        for (_, _, id) in &parts {
            f.end
                .reply(Header {
                    id: *id,
                    body: Some(Body::Ack(Ack::default())),
                    checked: None,
                })
                .await;
        }
        handle.wait().await.unwrap();
    });
}

both!(
    shutdown_delivers_the_last_barrier_signal,
    120,
    |t: TransportKind| async move {
        for round in 0..5 {
            let mut c = Cluster::start(t, 2, &[]).await;
            let r1 = c.ranks[1].take().unwrap();
            let r0 = c.ranks[0].take().unwrap();
            // Rank 1 enters first; once its signal is at rank 0, rank 0's
            // barrier completes the moment it sends its own — and rank 0
            // shuts down right after, with that signal maybe still on its
            // way. Rank 1 must get it.
            let second = tokio::spawn(async move {
                let got = r1.barrier_within(Duration::from_secs(10)).await;
                r1.shutdown().await;
                got
            });
            let seen = std::time::Instant::now() + Duration::from_secs(10);
            while r0.stats().msgs_received(pld_proto::MsgKind::Barrier) == 0 {
                assert!(
                    std::time::Instant::now() < seen,
                    "rank 1's signal never came"
                );
                tokio::task::yield_now().await;
            }
            r0.barrier().await.unwrap();
            r0.shutdown().await;
            second
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
    }
);

// docs/semantics.md, "Failures": a write that makes no progress for the op
// timeout fails the link. Here without root: a peer that stops reading (a
// cut network does the same to the socket), so the kernel's buffers fill.
#[test]
fn a_write_that_makes_no_progress_for_the_op_timeout_fails_the_link() {
    run(Duration::from_secs(60), async {
        let op_timeout = Duration::from_secs(2);
        let f = Faked::start(op_timeout).await;
        let data = f.rank.window("data").unwrap();
        // 16 MiB: far more than loopback's socket buffers hold.
        let big = vec![5u8; 16 << 20];
        let t0 = std::time::Instant::now();
        let e = f.rank.put(1, data, 0, &big).await.unwrap_err();
        match &e {
            Error::PeerLost { rank: 1, reason } => {
                assert!(reason.contains("no progress writing for 2s"), "{reason}")
            }
            other => panic!("expected the stalled link to be lost, got {other}"),
        }
        // Checked every tenth of the op timeout: a few of them at most,
        // with room for a loaded machine.
        assert!(t0.elapsed() < 5 * op_timeout, "{:?}", t0.elapsed());
        // The link is lost for every later op too, until it is dialed again.
        let e = f.rank.put(1, data, 0, b"x").await.unwrap_err();
        assert!(matches!(e, Error::PeerLost { rank: 1, .. }), "{e}");
        drop(f.end);
    });
}
