//! Which connection carries a barrier signal. A pair of ranks shares two
//! connections, one dialed by each; their barrier signals go both ways on
//! the one the lower rank dialed (so that each carries the other's
//! acknowledgement), and on the sender's own link where that connection
//! is not there. A real rank faces a fake one here, which reads and writes
//! each connection frame by frame.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::Frame;
use pld_proto::frame;
use pld_proto::v1::{BarrierSignal, Header, PeerGet, header::Body};
use pld_server::{Rank, Security, TransportKind};
use pld_tests::raw::{FakeEnd, Faked, RawPeer, fake_rank, hello};
use pld_tests::{loopback_peers, rank_config, run};
use std::time::Duration;

/// Barrier signal `round` of barrier `epoch`, as a rank sends it.
fn signal(epoch: u64, round: u32) -> Header {
    Header {
        id: 0,
        body: Some(Body::Barrier(BarrierSignal { epoch, round })),
        checked: None,
    }
}

/// Asserts that `f` is signal `round` of barrier `epoch`.
fn assert_signal(f: &Frame, epoch: u64, round: u32) {
    match &f.header.body {
        Some(Body::Barrier(b)) if b.epoch == epoch && b.round == round => {}
        other => panic!("expected barrier {epoch} round {round}, got {other:?}"),
    }
}

/// A real rank 1 (plain TCP) of two, whose link to rank 0 the fake rank 0
/// accepted; the fake's end of that link.
async fn rank_one_beside_a_fake_rank_zero(peers: &[String]) -> (Rank, FakeEnd) {
    let listener = tokio::net::TcpListener::bind(&peers[0]).await.unwrap();
    let mut conns = fake_rank(listener, 0, 2).await;
    let mut c = rank_config(1, peers, TransportKind::Tcp);
    c.security = Security::Insecure;
    let rank = Rank::start(c).await.unwrap();
    let (_, stream, buf) = conns.recv().await.expect("rank 1 dialed the fake");
    (rank, FakeEnd::new(stream, buf))
}

#[test]
fn a_higher_rank_signals_a_lower_one_on_the_connection_the_lower_one_dialed() {
    run(Duration::from_secs(60), async {
        let peers = loopback_peers(2);
        let (rank, link_end) = rank_one_beside_a_fake_rank_zero(&peers).await;
        // The fake rank 0 dials rank 1, and a request answered on that
        // connection shows that rank 1 serves it.
        let mut raw = RawPeer::connect_with(TransportKind::Tcp, &peers[1], 1, Security::Insecure)
            .await
            .unwrap();
        let reply = raw.handshake(hello(0, 2, "pld")).await.unwrap();
        assert!(matches!(reply.header.body, Some(Body::Hello(_))));
        let get = Body::Get(PeerGet {
            window: 0,
            offset: 0,
            len: 0,
            region: None,
        });
        let answer = raw.request(get, 7, &[]).await;
        assert_eq!(answer.header.id, 7, "{answer:?}");

        // Rank 1's signal comes on the connection rank 0 dialed, and rank
        // 0's signal on the same connection completes rank 1's barrier.
        // Only while the serve task is still handing back that
        // connection's writer (the Get's reply just went out) does rank 1
        // signal on its own link instead; then the fake answers there and
        // the next barrier must use the dialed connection.
        let mut raw_read = tokio::spawn(async move {
            let f = raw.read_frame().await;
            (raw, f)
        });
        let (mut rank, mut link_end) = (Some(rank), Some(link_end));
        let mut epoch = 1;
        let link_read = loop {
            let r = rank.take().unwrap();
            let barrier = tokio::spawn(async move {
                let res = r.barrier_within(Duration::from_secs(20)).await;
                (r, res)
            });
            let mut end = link_end.take().unwrap();
            let mut link_read = tokio::spawn(async move {
                let f = end.next().await;
                (end, f)
            });
            tokio::select! {
                got = &mut raw_read => {
                    let (mut raw, f) = got.unwrap();
                    assert_signal(&f.expect("rank 1's barrier signal"), epoch, 0);
                    raw.send(&frame::encode(&signal(epoch, 0), &[])).await;
                    let (r, res) = barrier.await.unwrap();
                    res.unwrap();
                    rank = Some(r);
                    break link_read;
                }
                got = &mut link_read => {
                    let (mut end, f) = got.unwrap();
                    assert_signal(&f, epoch, 0);
                    end.reply(signal(epoch, 0)).await;
                    let (r, res) = barrier.await.unwrap();
                    res.unwrap();
                    (rank, link_end) = (Some(r), Some(end));
                    epoch += 1;
                    // The writer is back long before a whole barrier has
                    // gone round: a second barrier on the fallback means
                    // the dialed connection is not used.
                    assert!(
                        epoch <= 2,
                        "rank 1 signalled on its own link in {} barriers in a row, not on the connection rank 0 dialed",
                        epoch - 1
                    );
                }
            }
        };
        let rank = rank.unwrap();
        // Rank 1's own link to rank 0 carried no signal in that barrier:
        // the next frame on it is a put issued after the barrier (the link
        // is ordered, so a signal sent there would come first).
        let data = rank.window("data").unwrap();
        let put = rank.put_nb(0, data, 0, b"marker").await.unwrap();
        let (mut link_end, f) = link_read.await.unwrap();
        assert!(
            matches!(f.header.body, Some(Body::Put(_))),
            "rank 1 signalled on its own link too: {f:?}"
        );
        link_end
            .reply(frame::ack_header(f.header.id, f.header.id))
            .await;
        put.wait().await.unwrap();
    });
}

#[test]
fn a_lower_rank_hears_a_higher_ones_signal_on_its_own_link() {
    run(Duration::from_secs(60), async {
        let mut f = Faked::start(Duration::from_secs(30)).await;
        let Faked { rank, end } = &mut f;
        let (r, ()) = tokio::join!(rank.barrier_within(Duration::from_secs(20)), async {
            // Rank 0 signals the fake rank 1 on its link, and the fake
            // answers on the same connection.
            assert_signal(&end.next().await, 1, 0);
            end.reply(signal(1, 0)).await;
        });
        r.unwrap();
    });
}

#[test]
fn a_higher_rank_that_the_lower_one_has_not_dialed_signals_on_its_own_link() {
    run(Duration::from_secs(60), async {
        let peers = loopback_peers(2);
        let (rank, mut link_end) = rank_one_beside_a_fake_rank_zero(&peers).await;
        let (r, ()) = tokio::join!(rank.barrier_within(Duration::from_secs(20)), async {
            assert_signal(&link_end.next().await, 1, 0);
            link_end.reply(signal(1, 0)).await;
        });
        r.unwrap();
    });
}

// docs/semantics.md, "Barrier": a signal that cannot be sent fails the
// barrier at once with PeerLost, and is kept: the next barrier call sends
// it first, on the link that replaced the lost one.
#[test]
fn a_barrier_signal_a_lost_link_could_not_carry_is_sent_first_on_the_next_link() {
    run(Duration::from_secs(60), async {
        let peers = loopback_peers(2);
        let listener = tokio::net::TcpListener::bind(&peers[1]).await.unwrap();
        let mut conns = fake_rank(listener, 1, 2).await;
        let mut c = rank_config(0, &peers, TransportKind::Tcp);
        c.security = Security::Insecure;
        let rank = Rank::start(c).await.unwrap();
        let data = rank.window("data").unwrap();
        let (_, stream, buf) = conns.recv().await.expect("rank 0 dialed the fake");
        // The fake rank 1 goes away, and stops listening: rank 0 sees its
        // link lost, and its redials (every second) fail until the fake
        // listens again below.
        drop(conns);
        drop(FakeEnd::new(stream, buf));
        match rank.put(1, data, 0, b"x").await {
            Err(pld_server::Error::PeerLost { rank: 1, .. }) => {}
            Err(e) => panic!("expected PeerLost, got {e}"),
            Ok(()) => panic!("a put to a closed connection was acknowledged"),
        }
        let e = rank
            .barrier_within(Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(
            matches!(e, pld_server::Error::PeerLost { rank: 1, .. }),
            "{e}"
        );
        assert!(
            e.to_string().contains("could not signal it in round 1"),
            "{e}"
        );
        // The link comes back (rank 0 dials again every second): the first
        // frame on it is the kept signal, and the barrier completes.
        // (The fake's task lets go of the old listener as it ends.)
        let listening = std::time::Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match tokio::net::TcpListener::bind(&peers[1]).await {
                Ok(l) => break l,
                Err(e) if std::time::Instant::now() < listening => {
                    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => panic!("the fake's old listener never closed: {e}"),
            }
        };
        let mut conns = fake_rank(listener, 1, 2).await;
        let (_, stream, buf) = conns.recv().await.expect("rank 0 dialed again");
        let mut end = FakeEnd::new(stream, buf);
        let fake = tokio::spawn(async move {
            assert_signal(&end.next().await, 1, 0);
            end.reply(signal(1, 0)).await;
            end
        });
        // Until rank 0 has put the new link in place, a barrier call still
        // finds the lost one (and keeps the signal again).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match rank.barrier_within(Duration::from_secs(20)).await {
                Ok(()) => break,
                Err(pld_server::Error::PeerLost { rank: 1, .. }) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the link never came back"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("expected the barrier to pass, got {e}"),
            }
        }
        let _end = fake.await.unwrap();
    });
}
