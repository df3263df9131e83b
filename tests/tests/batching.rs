//! Coalescing (docs/semantics.md, "Completion"): small requests issued back
//! to back share writes, and a target answers consecutive ones with one
//! cumulative acknowledgement. These tests check that nothing of the
//! per-op semantics changes: ops in one batch are applied in issue order; a
//! refused op in the middle of a batch fails alone, naming itself, with the
//! ops on both sides of it acknowledged; a cumulative ack completes exactly
//! the ops it covers, and `quiet` with them; a batch cut by a lost link
//! fails the ops not yet acknowledged; a lone op is sent without waiting
//! for company.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::frame::{self, ack_header as ack};
use pld_proto::v1::{ErrorCode, Header, PeerPut, header::Body};
use pld_proto::{MsgKind, OpKind};
use pld_server::{Error, TransportKind};
use pld_tests::raw::{Faked, RawPeer, hello_of};
use pld_tests::{Cluster, both, run};
use std::time::Duration;

both!(
    ops_in_one_batch_are_applied_in_issue_order_and_acknowledged_together,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let acks_before = c.rank(1).stats().msgs_sent(MsgKind::Ack);
        let timed_before = r.stats().latency(OpKind::Put).count();
        // 256 puts without yielding: every one to cell 0 (the last must
        // win), and each to its own cell too.
        let n = 256u32;
        for i in 1..=n {
            drop(r.put_nb(1, data, 0, &i.to_le_bytes()).await.unwrap());
            drop(
                r.put_nb(1, data, 4 * i as u64, &i.to_le_bytes())
                    .await
                    .unwrap(),
            );
        }
        r.quiet().await.unwrap();
        // Ops completed by one cumulative ack are timed together, but each
        // counts in the latency histogram.
        let timed = r.stats().latency(OpKind::Put).count() - timed_before;
        assert_eq!(timed, 2 * u64::from(n), "puts in the latency histogram");
        let got = r.get(1, data, 0, 4 * (n as u64 + 1)).await.unwrap();
        assert_eq!(&got[..4], &n.to_le_bytes(), "the last put to cell 0 won");
        for i in 1..=n as usize {
            assert_eq!(&got[4 * i..4 * i + 4], &(i as u32).to_le_bytes());
        }
        let acks = c.rank(1).stats().msgs_sent(MsgKind::Ack) - acks_before;
        assert!(
            acks < u64::from(n),
            "{} puts were acknowledged in {acks} ack frames: nothing was coalesced",
            2 * n
        );
    }
);

both!(
    a_target_merges_consecutive_acks_and_a_refused_op_breaks_the_run,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let data = c.window("data");
        let mut p = RawPeer::join(t, &c.peers[1], 1, hello_of(&c, 0)).await;
        // Ten puts in one write; the fifth lands outside the window.
        let mut batch = Vec::new();
        for id in 1..=10u64 {
            let offset = if id == 5 { 1 << 40 } else { 8 * id };
            let h = Header {
                id,
                body: Some(Body::Put(PeerPut {
                    window: 0, // "data": ids follow the sorted names
                    offset,
                    region: None,
                })),
                checked: None,
            };
            batch.extend_from_slice(&frame::encode(&h, &[id as u8; 8]));
        }
        p.send(&batch).await;
        let mut replies = Vec::new();
        while replies.len() < 3 {
            replies.push(p.read_frame().await.expect("a reply").header);
        }
        assert_eq!(replies[0], ack(4, 1), "ops 1-4: one cumulative ack");
        assert_eq!(replies[1].id, 5);
        assert!(
            matches!(&replies[1].body, Some(Body::Error(e)) if e.code == ErrorCode::OutOfRange as i32),
            "op 5 refused alone: {:?}",
            replies[1]
        );
        assert_eq!(replies[2], ack(10, 6), "ops 6-10: one cumulative ack");
        let got = c.rank(1).get(1, data, 8, 80).await.unwrap();
        for id in 1..=10usize {
            let want = if id == 5 { [0u8; 8] } else { [id as u8; 8] };
            assert_eq!(got[8 * (id - 1)..8 * id], want, "cell of op {id}");
        }
    }
);

#[test]
fn a_refused_op_in_a_batch_fails_alone_naming_itself() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let mut handles = Vec::new();
        for i in 0..8u64 {
            handles.push(f.rank.put_nb(1, data, 8 * i, &[1; 8]).await.unwrap());
        }
        let ids = f.end.ids(8).await;
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "ids {ids:?}");
        let bad = ids[3];
        f.end.refuse_one(&ids, 3, "op four is out").await;
        for (i, h) in handles.into_iter().enumerate() {
            let r = h.wait().await;
            if i == 3 {
                Faked::assert_refused_put(&r.unwrap_err(), bad, "op four is out");
            } else {
                r.unwrap_or_else(|e| panic!("op {i} failed: {e}"));
            }
        }
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn a_cumulative_ack_covering_an_op_it_does_not_answer_fails_that_op_alone() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let put = f.rank.put_nb(1, data, 0, &[1; 8]).await.unwrap();
        let get = f.rank.get_nb(1, data, 0, 8).await.unwrap();
        let add = f
            .rank
            .fetch_add_nb(1, data, 8, pld_proto::Dtype::Int64, 1)
            .await
            .unwrap();
        let ids: Vec<u64> = [f.end.next().await, f.end.next().await, f.end.next().await]
            .iter()
            .map(|fr| fr.header.id)
            .collect();
        f.end.reply(ack(ids[2], ids[0])).await;
        put.wait().await.unwrap();
        let e = get.wait().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "rank 1 broke the protocol: answered get #{} with ack",
                ids[1]
            )
        );
        // The fetch_add too: an ack carries no previous value.
        let e = add.wait().await.unwrap_err();
        assert!(matches!(e, Error::Protocol { rank: 1, .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "rank 1 broke the protocol: answered fetch_add #{} with ack",
                ids[2]
            )
        );
        f.rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn a_batch_cut_by_a_lost_link_fails_the_ops_not_yet_acknowledged() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let mut handles = Vec::new();
        for i in 0..16u64 {
            handles.push(f.rank.put_nb(1, data, 8 * i, &[2; 8]).await.unwrap());
        }
        let ids = f.end.ids(16).await;
        f.end.reply(ack(ids[3], ids[0])).await;
        let Faked { rank, end } = f;
        drop(end);
        for (i, h) in handles.into_iter().enumerate() {
            match (i < 4, h.wait().await) {
                (true, r) => r.unwrap_or_else(|e| panic!("acknowledged op {i} failed: {e}")),
                (false, Err(Error::PeerLost { rank: 1, .. })) => {}
                (false, r) => panic!("op {i} after the cut: expected PeerLost, got {r:?}"),
            }
        }
        // Failed ops count as completed.
        rank.quiet_within(Duration::from_secs(5)).await.unwrap();
    });
}

// One thread runs the rank and the test, with the clock paused while the
// test waits for the frame: the test's task stays runnable (it yields), so
// the runtime is never idle and never advances the paused clock — no
// timer can fire, however long the wait or loaded the machine. A flush
// that waited for company, for any time at all, is never written, and the
// test fails at its bound; one that does not wait is written within a few
// polls.
#[test]
fn a_lone_op_is_sent_without_waiting_for_company() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let test = async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        tokio::time::pause();
        // Nobody waits for the op or calls quiet: its frame still leaves.
        let h = f
            .rank
            .notify_nb(1, data, 0, 1, pld_proto::NotifyOp::Set)
            .await;
        let mut polls = 0;
        while !f.end.has_unread() {
            polls += 1;
            assert!(
                polls <= 10_000,
                "the lone op's frame was not written while no time passed"
            );
            tokio::task::yield_now().await;
        }
        tokio::time::resume();
        let frame = f.end.next().await;
        assert!(matches!(frame.header.body, Some(Body::Notify(_))));
        f.end.reply(ack(frame.header.id, 0)).await;
        h.unwrap().wait().await.unwrap();
    };
    let done = rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), test).await });
    done.expect("the test finished within 60 s");
}

#[test]
fn a_cumulative_ack_of_a_huge_range_costs_only_the_outstanding_ops() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let data = f.rank.window("data").unwrap();
        let a = f.rank.put_nb(1, data, 0, &[1; 8]).await.unwrap();
        let b = f.rank.put_nb(1, data, 8, &[1; 8]).await.unwrap();
        let first = f.end.next().await.header.id;
        f.end.next().await;
        // Ids 1..u64::MAX: the origin walks only the two it holds.
        f.end.reply(ack(u64::MAX, first)).await;
        a.wait().await.unwrap();
        b.wait().await.unwrap();
        // The link goes on: the next op waits for its own ack.
        let c = f.rank.put_nb(1, data, 16, &[1; 8]).await.unwrap();
        let id = f.end.next().await.header.id;
        f.end.reply(ack(id, 0)).await;
        c.wait().await.unwrap();
    });
}

both!(
    each_op_of_a_batch_is_counted_once_as_issued_sent_received_and_served,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        let (origin, target) = (r.stats(), c.rank(1).stats());
        // Runs of puts broken by gets: the outbox and the target tally
        // counts per run, and every run must be added.
        let (puts, every) = (40u64, 8u64);
        let mut gets = Vec::new();
        for i in 0..puts {
            drop(r.put_nb(1, data, 8 * i, &i.to_le_bytes()).await.unwrap());
            if i % every == every - 1 {
                gets.push(r.get_nb(1, data, 8 * i, 8).await.unwrap());
            }
        }
        r.quiet().await.unwrap();
        for (k, g) in gets.into_iter().enumerate() {
            let i = every * k as u64 + every - 1;
            assert_eq!(&g.wait().await.unwrap()[..], &i.to_le_bytes());
        }
        let gets = puts / every;
        let (o, tg) = (r.stats(), c.rank(1).stats());
        let d = |now: u64, before: u64| now - before;
        for (op, kind, n) in [
            (OpKind::Put, MsgKind::Put, puts),
            (OpKind::Get, MsgKind::Get, gets),
        ] {
            let what = op.name();
            let issued = d(o.ops_issued(op), origin.ops_issued(op));
            assert_eq!(issued, n, "{what} issued");
            let sent = d(o.msgs_sent(kind), origin.msgs_sent(kind));
            assert_eq!(sent, n, "{what} sent");
            let received = d(tg.msgs_received(kind), target.msgs_received(kind));
            assert_eq!(received, n, "{what} received");
            let served = d(tg.requests_served(op), target.requests_served(op));
            assert_eq!(served, n, "{what} served");
        }
        assert!(
            d(o.bytes_sent, origin.bytes_sent) >= puts * (frame::PREFIX_LEN as u64 + 8),
            "every put's frame counts as sent bytes"
        );
        assert_eq!(
            d(
                tg.requests_rejected(OpKind::Put),
                target.requests_rejected(OpKind::Put)
            ),
            0
        );
        assert!(d(tg.bytes_received, target.bytes_received) >= puts * 8);
    }
);
