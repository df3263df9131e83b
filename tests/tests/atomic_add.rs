//! Atomic add on the store path (docs/semantics.md, "Completion"): a
//! small atomic add is queued and coalesced as a put is, written with a
//! hand-made frame head and applied at the target without a `Header`.
//! These tests check that it means exactly what the generic path means:
//! every add lands once, in issue order with the puts around it; the
//! target refuses a bad add in a batch alone, with the error the generic
//! path gives, and changes no byte for it; `atomic_add_nbi` completes by
//! `quiet` and a refused one fails that quiet, naming itself.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::frame::{self, ack_header as ack};
use pld_proto::v1::{ErrorCode, Header, PeerAtomicAdd, header::Body};
use pld_proto::{Dtype, MsgKind, OpKind};
use pld_server::{Error, TransportKind};
use pld_tests::raw::{Faked, RawPeer, hello_of};
use pld_tests::{Cluster, both, run};
use std::time::Duration;

both!(
    atomic_add_nbi_updates_of_counters_all_land_by_quiet_and_share_acks,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let (acks_before, served_before) = (
            c.rank(1).stats().msgs_sent(MsgKind::Ack),
            c.rank(1).stats().requests_served(OpKind::AtomicAdd),
        );
        // 400 adds to one int64 counter, 400 to one fp32 counter.
        let n = 400i64;
        for i in 1..=n {
            r.atomic_add_nbi(1, data, 0, Dtype::Int64, &i.to_le_bytes())
                .await
                .unwrap();
            r.atomic_add_nbi(1, data, 8, Dtype::Fp32, &1f32.to_le_bytes())
                .await
                .unwrap();
        }
        // One add larger than a frame (it travels in chunks), one to itself.
        let ones: Vec<u8> = std::iter::repeat_n(1i32.to_le_bytes(), 3 << 18)
            .flatten()
            .collect();
        r.atomic_add_nbi(1, data, 4 << 20, Dtype::Int32, &ones)
            .await
            .unwrap();
        r.atomic_add_nbi(0, data, 0, Dtype::Int64, &7i64.to_le_bytes())
            .await
            .unwrap();
        r.quiet().await.unwrap();
        let got = r.get(1, data, 0, 12).await.unwrap();
        let counter = i64::from_le_bytes(got[..8].try_into().unwrap());
        assert_eq!(counter, n * (n + 1) / 2, "the int64 counter");
        let fp = f32::from_le_bytes(got[8..12].try_into().unwrap());
        assert_eq!(fp, n as f32, "the fp32 counter");
        let got = r.get(1, data, 4 << 20, ones.len() as u64).await.unwrap();
        assert!(got[..] == ones[..], "the chunked add arrived whole, once");
        assert_eq!(
            &r.get(0, data, 0, 8).await.unwrap()[..],
            &7i64.to_le_bytes()
        );
        let (stats, adds) = (c.rank(1).stats(), 2 * n as u64);
        let served = stats.requests_served(OpKind::AtomicAdd) - served_before;
        assert!(served >= adds, "{served} adds served of {adds}");
        let acks = stats.msgs_sent(MsgKind::Ack) - acks_before;
        assert!(
            acks < adds,
            "{adds} adds were acknowledged in {acks} ack frames: nothing was coalesced"
        );
    }
);

both!(
    puts_and_atomic_adds_in_one_batch_are_applied_in_issue_order,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        // Per cell, without yielding: put 5, add 3, put 10, add i. Only
        // issue order gives 10 + i.
        let cells = 128u64;
        for i in 0..cells {
            let at = 8 * i;
            drop(r.put_nb(1, data, at, &5i64.to_le_bytes()).await.unwrap());
            let three = 3i64.to_le_bytes();
            drop(
                r.atomic_add_nb(1, data, at, Dtype::Int64, &three)
                    .await
                    .unwrap(),
            );
            drop(r.put_nb(1, data, at, &10i64.to_le_bytes()).await.unwrap());
            let i_bytes = (i as i64).to_le_bytes();
            drop(
                r.atomic_add_nb(1, data, at, Dtype::Int64, &i_bytes)
                    .await
                    .unwrap(),
            );
        }
        r.quiet().await.unwrap();
        let got = r.get(1, data, 0, 8 * cells).await.unwrap();
        for i in 0..cells as usize {
            let v = i64::from_le_bytes(got[8 * i..8 * i + 8].try_into().unwrap());
            assert_eq!(v, 10 + i as i64, "cell {i}");
        }
    }
);

/// A plain atomic add frame, as any peer may write it.
fn add_frame(id: u64, offset: u64, dtype: i32, operand: i64) -> Vec<u8> {
    let h = Header {
        id,
        body: Some(Body::AtomicAdd(PeerAtomicAdd {
            window: 0, // "data": ids follow the sorted names
            offset,
            dtype,
            region: None,
        })),
        checked: None,
    };
    frame::encode(&h, &operand.to_le_bytes()).to_vec()
}

both!(
    a_target_refuses_a_bad_atomic_add_in_a_batch_alone_and_changes_no_byte,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let data = c.window("data");
        let mut p = RawPeer::join(t, &c.peers[1], 1, hello_of(&c, 0)).await;
        // Seven int64 adds in one write, each to its own cell: the third
        // names an unknown dtype, the fifth a misaligned offset, the
        // sixth lies outside the window.
        let int64 = Dtype::Int64 as i32;
        let mut batch = Vec::new();
        for id in 1..=7u64 {
            let (offset, dtype) = match id {
                3 => (8 * id, 99),
                5 => (8 * id + 4, int64),
                6 => (1 << 40, int64),
                _ => (8 * id, int64),
            };
            batch.extend(add_frame(id, offset, dtype, 100 + id as i64));
        }
        p.send(&batch).await;
        let mut replies = Vec::new();
        while replies.len() < 6 {
            replies.push(p.read_frame().await.expect("a reply").header);
        }
        let refused = |h: &Header, id: u64, code: ErrorCode| {
            assert_eq!(h.id, id, "{h:?}");
            assert!(
                matches!(&h.body, Some(Body::Error(e)) if e.code == code as i32),
                "add {id} refused alone with {code:?}: {h:?}"
            );
        };
        assert_eq!(replies[0], ack(2, 1), "adds 1-2: one cumulative ack");
        refused(&replies[1], 3, ErrorCode::UnknownDtype);
        assert_eq!(replies[2], ack(4, 0), "add 4: a plain ack");
        refused(&replies[3], 5, ErrorCode::Misaligned);
        refused(&replies[4], 6, ErrorCode::OutOfRange);
        assert_eq!(replies[5], ack(7, 0), "add 7: a plain ack");
        let got = c.rank(1).get(1, data, 0, 64).await.unwrap();
        assert_eq!(&got[..8], &[0; 8], "cell 0, no add's");
        // (The misaligned add would have straddled cells 5 and 6.)
        for id in 1..=7usize {
            let v = i64::from_le_bytes(got[8 * id..8 * id + 8].try_into().unwrap());
            let want = if matches!(id, 3 | 5 | 6) {
                0
            } else {
                100 + id as i64
            };
            assert_eq!(v, want, "cell of add {id}");
        }
        let stats = c.rank(1).stats();
        assert_eq!(stats.requests_rejected(OpKind::AtomicAdd), 3);
    }
);

#[test]
fn an_atomic_add_nbi_refused_by_the_target_fails_the_next_quiet_naming_itself() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        for i in 0..6u64 {
            let one = 1i64.to_le_bytes();
            f.rank
                .atomic_add_nbi(1, data, 8 * i, Dtype::Int64, &one)
                .await
                .unwrap();
        }
        let mut ids = Vec::new();
        for _ in 0..6 {
            let fr = f.end.next().await;
            assert!(
                matches!(fr.header.body, Some(Body::AtomicAdd(_))),
                "an atomic add's frame: {:?}",
                fr.header
            );
            ids.push(fr.header.id);
        }
        f.end.refuse_one(&ids, 2, "add three is out").await;
        match f.rank.quiet_within(Duration::from_secs(5)).await {
            Err(Error::ImplicitFailed { failed: 1, first }) => match *first {
                Error::Rejected {
                    rank: 1,
                    op: OpKind::AtomicAdd,
                    id,
                    code: ErrorCode::OutOfRange,
                    ref message,
                } if id == ids[2] && message == "add three is out" => {}
                other => panic!("expected the refusal of add #{}, got {other}", ids[2]),
            },
            other => panic!("expected quiet to report the refused add, got {other:?}"),
        }
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}
