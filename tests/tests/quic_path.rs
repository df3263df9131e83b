//! The QUIC path between ranks on loopback: its MTU is known (64 KiB
//! datagrams), so QUIC starts there and never probes. Discovery would send
//! probes padded to their size, which quinn reads one padding byte at a
//! time (~4 ms of CPU per connection: 64 ranks took 20 s to form), and a
//! probe that cannot be delivered holds the congestion window until its
//! probe timeout (25 ms or more), and every op behind it waited that long.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_server::TransportKind;
use pld_tests::{Cluster, run};
use std::time::Duration;

/// The largest UDP payload IPv4 carries: 65 535 - 20 (IP) - 8 (UDP).
const IPV4_MAX_UDP_PAYLOAD: u16 = 65_507;

#[test]
fn on_loopback_quic_starts_at_the_largest_datagram_and_sends_no_probe() {
    run(Duration::from_secs(120), async {
        let c = Cluster::start(TransportKind::Quic, 2, &[]).await;
        let (r0, data) = (c.rank(0), c.window("data"));
        // Small ops and a large one, both ways.
        for _ in 0..100 {
            r0.put(1, data, 0, &[2; 8]).await.unwrap();
            c.rank(1).put(0, data, 0, &[3; 8]).await.unwrap();
        }
        r0.put(1, data, 0, &vec![4; 4 << 20]).await.unwrap();
        for rank in c.embedded() {
            let paths = rank.quic_paths();
            assert!(!paths.is_empty(), "rank {} has QUIC paths", rank.rank());
            for p in paths {
                assert_eq!(
                    p.mtu,
                    IPV4_MAX_UDP_PAYLOAD,
                    "rank {} to rank {}: {p:?}",
                    rank.rank(),
                    p.peer
                );
                assert_eq!(p.sent_mtu_probes, 0, "no MTU discovery on loopback: {p:?}");
                assert_eq!(p.lost_mtu_probes, 0, "{p:?}");
                // Room for several of the largest datagrams in flight.
                assert!(p.cwnd >= 2 * u64::from(p.mtu), "{p:?}");
            }
        }
    });
}
