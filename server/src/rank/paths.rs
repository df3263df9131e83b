//! What the QUIC transport knows of the path to each peer — its round
//! trip, datagram size, congestion window and losses — for the metrics
//! endpoint and for tests that check the transport's own behaviour.

use super::Rank;
use std::time::Duration;

/// quinn's view of the QUIC path from this rank to one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicPath {
    /// The peer's rank.
    pub peer: u32,
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// The largest UDP payload the path carries, as MTU discovery found it.
    pub mtu: u16,
    /// The congestion window, in bytes.
    pub cwnd: u64,
    /// Packets declared lost (MTU probes not counted).
    pub lost_packets: u64,
    /// MTU probes sent, and those declared lost: a lost probe holds the
    /// window until its probe timeout fires.
    pub sent_mtu_probes: u64,
    /// MTU probes declared lost.
    pub lost_mtu_probes: u64,
}

impl Rank {
    /// The QUIC path to every connected peer (empty over TCP).
    pub fn quic_paths(&self) -> Vec<QuicPath> {
        self.links
            .all()
            .iter()
            .filter_map(|link| {
                let p = link.quic_stats()?.path;
                Some(QuicPath {
                    peer: link.peer,
                    rtt: p.rtt,
                    mtu: p.current_mtu,
                    cwnd: p.cwnd,
                    lost_packets: p.lost_packets,
                    sent_mtu_probes: p.sent_plpmtud_probes,
                    lost_mtu_probes: p.lost_plpmtud_probes,
                })
            })
            .collect()
    }
}
