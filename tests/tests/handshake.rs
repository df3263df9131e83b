//! Admission on the peer port: a Hello's fields are range-checked before
//! any use, a claim is believed only when the certificate names the
//! claimed rank, and a second live instance of a rank is refused.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::ErrorCode;
use pld_proto::v1::{Hello, header::Body};
use pld_server::TransportKind;
use pld_tests::raw::{RawPeer, hello};
use pld_tests::{Cluster, Daemon, both, loopback_peers, security};
use std::time::Duration;

/// The refusal a raw peer got for `h` (panics on anything else).
async fn refused(t: TransportKind, addr: &str, target: u32, cert: u32, h: Hello) -> String {
    let mut p = RawPeer::connect_with(t, addr, target, security(cert))
        .await
        .expect("dial");
    let reply = p.handshake(h).await.expect("an answer to the hello");
    match reply.header.body {
        Some(Body::Error(e)) => {
            assert_eq!(e.code, ErrorCode::HandshakeRefused as i32, "{e:?}");
            e.message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A deterministic stream of field values from the edges of each range.
struct Edges(u64);
impl Edges {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn u32(&mut self) -> u32 {
        [0, 1, 2, 3, 99, u32::MAX][(self.next() % 6) as usize]
    }
    fn u64(&mut self) -> u64 {
        [0, 1, 4096, 16 << 20, u64::MAX][(self.next() % 5) as usize]
    }
}

both!(
    a_hello_for_no_rank_of_the_cluster_is_refused_and_panics_nothing,
    120,
    |t: TransportKind| async move {
        let mut c = Cluster::start(t, 2, &[1]).await;
        let addr = c.peers[1].clone();
        // Another cluster's id and a rank far outside this one: the range
        // is checked first (this once indexed the peer list with 99).
        let mut evil = hello(99, 2, "evil");
        evil.epoch = c.rank(0).epoch();
        let why = refused(t, &addr, 1, 0, evil).await;
        assert!(why.contains("rank 99"), "{why}");
        assert!(why.contains("0 to 1"), "{why}");
        // Structurally valid Hellos with fields from every edge.
        let mut e = Edges(0x9e37_79b9_7f4a_7c15);
        for _ in 0..40 {
            let mut h = hello(0, 2, ["pld", "evil", ""][(e.next() % 3) as usize]);
            h.rank = e.u32();
            h.nranks = [2, e.u32()][(e.next() % 2) as usize];
            h.protocol_version = [h.protocol_version, e.u32()][(e.next() % 2) as usize];
            h.max_payload = e.u64();
            h.epoch = e.u64();
            h.barrier_epoch = e.u64();
            if e.next() % 3 == 0 {
                h.windows[0].size = e.u64();
            }
            let mut p = RawPeer::connect_with(t, &addr, 1, security(0))
                .await
                .expect("dial");
            // Refused, or (a well-formed claim of rank 0) answered.
            let _ = p.handshake(h).await;
        }
        // The daemon serves on, and never panicked.
        let (r0, data) = (c.rank(0), c.window("data"));
        r0.put(1, data, 64, b"still here").await.unwrap();
        assert_eq!(&r0.get(1, data, 64, 10).await.unwrap()[..], b"still here");
        let log = c.daemon(1).kill_and_stderr_now();
        assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
    }
);

both!(
    a_stranger_with_another_ranks_certificate_never_stops_a_starting_rank,
    120,
    |t: TransportKind| async move {
        let peers = loopback_peers(3);
        let mut r0 = Daemon::spawn(0, &peers, t, &[]);
        // Wait until rank 0 listens: its first dial attempts are logged
        // only at debug, so connect until the handshake is answered.
        let mut evil = hello(1, 3, "evil");
        evil.epoch = 1;
        let why = loop {
            if let Ok(mut p) = RawPeer::connect_with(t, &peers[0], 0, security(2)).await
                && let Some(f) = p.handshake(evil.clone()).await
            {
                match f.header.body {
                    Some(Body::Error(e)) => break e.message,
                    other => panic!("expected a refusal, got {other:?}"),
                }
            }
            assert!(r0.alive(), "rank 0 exited");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            why.contains("claims rank 1 but its certificate does not name rank-1.pld"),
            "{why}"
        );
        // Rank 0 holds nothing against rank 1: the real ranks join.
        let mut r1 = Daemon::spawn(1, &peers, t, &[]);
        let mut r2 = Daemon::spawn(2, &peers, t, &[]);
        for d in [&mut r0, &mut r1, &mut r2] {
            d.wait_ready(Duration::from_secs(30));
        }
        let log = r0.kill_and_stderr_now();
        assert!(!log.contains("panicked"), "{log}");
    }
);

both!(
    a_second_live_rank_is_refused_naming_both_addresses,
    120,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 3, &[1]).await;
        let data = c.window("data");
        c.rank(0).put(1, data, 0, b"first").await.unwrap();
        // A second rank 1, listening elsewhere.
        let other = loopback_peers(1).remove(0);
        let second = Daemon::spawn(
            1,
            &c.peers,
            t,
            &["--listen", &other, "--connect-timeout", "10s"],
        );
        let (ok, log) = second.wait_exit(Duration::from_secs(30));
        assert!(!ok, "the second rank 1 started:\n{log}");
        assert!(
            log.contains(&format!("rank 1 is already running at {}", c.peers[1])),
            "{log}"
        );
        assert!(log.contains(&other), "names its own address: {log}");
        // The first rank 1 serves on, as before.
        for r in [0, 2] {
            let got = c.rank(r).get(1, data, 0, 5).await.unwrap();
            assert_eq!(&got[..], b"first", "rank {r}");
        }
        c.rank(2).put(1, data, 8, b"later").await.unwrap();
        assert_eq!(&c.rank(0).get(1, data, 8, 5).await.unwrap()[..], b"later");
    }
);

both!(
    a_stranger_that_sends_nothing_is_closed_at_the_hello_deadline,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        // Connected (and, over QUIC, past the TLS handshake), then silent.
        let mut quiet = RawPeer::connect_with(t, &c.peers[1], 1, security(0))
            .await
            .expect("dial");
        let took = quiet
            .closed_within(Duration::from_secs(20))
            .await
            .expect("a silent peer is closed");
        assert!(took < Duration::from_secs(15), "closed only after {took:?}");
        // And the rank serves on.
        let data = c.window("data");
        c.rank(0).put(1, data, 0, b"on").await.unwrap();
    }
);

#[test]
fn a_silent_tcp_connection_to_the_peer_port_is_closed_at_the_hello_deadline() {
    pld_tests::run(Duration::from_secs(60), async {
        let c = Cluster::start(TransportKind::Tcp, 2, &[]).await;
        // Not even a TLS handshake.
        let mut s = tokio::net::TcpStream::connect(&c.peers[1]).await.unwrap();
        let t0 = std::time::Instant::now();
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::io::AsyncReadExt::read(&mut s, &mut buf),
        )
        .await
        .expect("a silent connection is closed");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        assert!(t0.elapsed() < Duration::from_secs(15));
    });
}

// A peer of another protocol version is refused by name, with both
// versions, and the daemon serves on.
both!(
    a_peer_of_another_protocol_version_is_refused_by_name,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[1]).await;
        let mut h = pld_tests::raw::hello_of(&c, 0);
        h.protocol_version += 1;
        let why = refused(t, &c.peers[1], 1, 0, h).await;
        let v = pld_proto::PROTOCOL_VERSION;
        assert!(
            why.contains(&format!(
                "protocol version mismatch: rank 1 speaks version {v}, rank 0 version {}",
                v + 1
            )),
            "{why}"
        );
        let (r0, data) = (c.rank(0), c.window("data"));
        r0.put(1, data, 0, b"served").await.unwrap();
    }
);
