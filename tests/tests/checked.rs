//! Checked mode on embedded ranks: what the detector counts and, in
//! strict mode, refuses — with the rank, window and bytes named — while
//! ordered accesses pass and the windows stay untouched by refused ops.

use pld_proto::v1::ErrorCode;
use pld_server::{CheckedMode, Error, TransportKind};
use pld_tests::{Cluster, both};

both!(
    strict_mode_refuses_a_get_unordered_with_the_owners_put,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start_with(t, 2, &[], |c| c.checked = CheckedMode::Strict).await;
        let (r0, r1) = (c.rank(0), c.rank(1));
        let data = r0.window("data").unwrap();
        // Rank 0 writes its own window; rank 1 reads it with nothing
        // ordering the two: refused, naming the race.
        r0.put(0, data, 0, &[7u8; 64]).await.unwrap();
        let e = r1
            .get(0, data, 0, 64)
            .await
            .expect_err("the get races the put");
        match &e {
            Error::Rejected { code, message, .. } => {
                assert_eq!(*code, ErrorCode::Race, "{e}");
                assert!(
                    message.contains("race on rank 0's window 'data' bytes 0..64"),
                    "{message}"
                );
                assert!(message.contains("rank 0 stored into its own"), "{message}");
                assert!(message.contains("rank 1 read"), "{message}");
            }
            other => panic!("not a race refusal: {other}"),
        }
        assert_eq!(r0.stats().races, 1);
        // A refused put changes no byte: rank 1's put to the same bytes
        // races rank 0's put as well.
        let e = r1
            .put(0, data, 0, &[9u8; 64])
            .await
            .expect_err("the put races");
        assert!(
            e.to_string().contains("two ranks write the same bytes"),
            "{e}"
        );
        assert_eq!(&r0.get(0, data, 0, 64).await.unwrap()[..], &[7u8; 64][..]);
        // After a barrier both are ordered: the same get passes.
        let (a, b) = tokio::join!(r0.barrier(), r1.barrier());
        a.unwrap();
        b.unwrap();
        assert_eq!(&r1.get(0, data, 0, 64).await.unwrap()[..], &[7u8; 64][..]);
        assert!(r0.race_reports().len() >= 2);
    }
);

both!(
    off_sends_no_clock_and_records_nothing,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        let (r0, r1) = (c.rank(0), c.rank(1));
        let data = r0.window("data").unwrap();
        r0.put(0, data, 0, &[1u8; 64]).await.unwrap();
        r1.get(0, data, 0, 64).await.unwrap();
        assert_eq!(r0.stats().races, 0);
        assert!(r0.race_reports().is_empty());
    }
);
