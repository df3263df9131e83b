//! A peer (a cert holder, or anyone under `--insecure`) that floods a rank
//! with barrier signals it must ignore — epochs far ahead of any barrier —
//! gets one warning a second with a count, not a line each, and in checked
//! mode leaves no clock behind: a signal is validated before anything of
//! it is kept.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::frame;
use pld_proto::v1::{BarrierSignal, CheckedStamp, Header, PeerGet, header::Body};
use pld_server::{CheckedMode, TransportKind};
use pld_tests::raw::{RawPeer, hello_of};
use pld_tests::{Cluster, WINDOWS, both};
use std::time::Instant;

const SIGNALS: u64 = 300_000;

// On the landed build 200 000 such signals wrote 200 000 WARN lines, and in
// checked mode kept a clock for each epoch (+22 MB).
both!(
    barrier_signals_for_epochs_far_ahead_are_counted_not_logged_or_kept,
    120,
    |t: TransportKind| async move {
        let mut c = Cluster::start_full(t, 2, &[1], &WINDOWS, &["--checked"], |c| {
            c.checked = CheckedMode::On
        })
        .await;
        let mut hello = hello_of(&c, 0);
        hello.checked = true;
        let mut raw = RawPeer::join(t, &c.peers[1], 1, hello).await;
        let rss0 = c.daemon(1).memory().unwrap();
        let t0 = Instant::now();
        let mut batch = Vec::new();
        for i in 0..SIGNALS {
            let h = Header {
                id: 0,
                // Round 0 of rank 1's barrier is rank 0's to send: only
                // the epoch is wrong.
                body: Some(Body::Barrier(BarrierSignal {
                    epoch: 1_000 + i,
                    round: 0,
                })),
                checked: Some(CheckedStamp {
                    clock: vec![i, 0],
                    barriers: 0,
                }),
            };
            batch.extend_from_slice(&frame::encode(&h, &[]));
            if batch.len() > 256 << 10 {
                raw.send(&batch).await;
                batch.clear();
            }
        }
        raw.send(&batch).await;
        // The rank serves a connection's frames in order: this reply comes
        // after every signal was taken and ignored.
        let get = Body::Get(PeerGet {
            window: 0,
            offset: 0,
            len: 8,
            region: None,
        });
        let reply = raw.request(get, 7, &[]).await;
        assert_eq!(reply.header.id, 7, "{reply:?}");
        let took = t0.elapsed();
        let grown = c.daemon(1).memory().unwrap().saturating_sub(rss0);
        assert!(grown < 8 << 20, "RSS grew {} MiB", grown >> 20);
        // The daemon still serves rank 0.
        let data = c.window("data");
        c.rank(0).put(1, data, 0, b"served").await.unwrap();
        assert_eq!(&c.rank(0).get(1, data, 0, 6).await.unwrap()[..], b"served");
        let log = c.daemon(1).kill_and_stderr_now();
        let lines = log.matches("ignored a barrier message").count();
        let most = took.as_secs() + 2;
        assert!(
            (1..=most as usize).contains(&lines),
            "{lines} warnings in {took:?}:\n{}",
            &log[..log.len().min(4000)]
        );
        assert!(log.contains("but this rank is at epoch 1"), "{log}");
        if lines > 1 {
            assert!(log.contains("more like it since the last report"), "{log}");
        }
    }
);
