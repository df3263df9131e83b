//! The QUIC path between ranks: MTU discovery finds loopback's large
//! datagrams without ever probing past what the path can carry — a probe
//! that cannot be delivered holds the congestion window until its probe
//! timeout (25 ms or more), and every op behind it waited that long.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_server::TransportKind;
use pld_tests::{Cluster, run};
use std::time::{Duration, Instant};

/// The largest UDP payload IPv4 carries: 65 535 - 20 (IP) - 8 (UDP).
const IPV4_MAX_UDP_PAYLOAD: u16 = 65_507;

#[test]
fn mtu_probes_never_exceed_the_path_and_none_is_lost() {
    run(Duration::from_secs(120), async {
        let c = Cluster::start(TransportKind::Quic, 2, &[]).await;
        let (r0, data) = (c.rank(0), c.window("data"));
        // Traffic drives discovery; wait (bounded) until both directions
        // have found loopback's large datagrams.
        let found = Instant::now() + Duration::from_secs(20);
        let settled = |rank: &pld_server::Rank| {
            rank.quic_paths().iter().all(|p| p.mtu >= 65_000) && !rank.quic_paths().is_empty()
        };
        while !(settled(c.rank(0)) && settled(c.rank(1))) {
            assert!(
                Instant::now() < found,
                "MTU discovery did not reach 65 000 bytes on loopback: {:?} / {:?}",
                c.rank(0).quic_paths(),
                c.rank(1).quic_paths()
            );
            r0.put(1, data, 0, &[1; 8]).await.unwrap();
        }
        // A probe past the path's limit would be declared lost one probe
        // timeout after it was sent; keep traffic going well past that.
        let watch = Instant::now() + Duration::from_millis(500);
        while Instant::now() < watch {
            r0.put(1, data, 0, &[2; 8]).await.unwrap();
            c.rank(1).put(0, data, 0, &[3; 8]).await.unwrap();
        }
        for rank in c.embedded() {
            for p in rank.quic_paths() {
                assert!(p.sent_mtu_probes > 0, "no MTU discovery ran: {p:?}");
                assert!(
                    p.mtu <= IPV4_MAX_UDP_PAYLOAD,
                    "rank {} believes the path carries {} bytes: {p:?}",
                    rank.rank(),
                    p.mtu
                );
                assert_eq!(
                    p.lost_mtu_probes,
                    0,
                    "rank {} lost MTU probes to rank {}: each held every op behind it: {p:?}",
                    rank.rank(),
                    p.peer
                );
                // Room for ops next to a probe in flight.
                assert!(p.cwnd >= 2 * u64::from(p.mtu), "{p:?}");
            }
        }
    });
}
