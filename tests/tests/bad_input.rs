//! Bad input on the peer plane: every case gets an error that says which,
//! the daemon keeps serving, and no window byte changes.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bytes::Bytes;
use pld_proto::ErrorCode;
use pld_proto::frame::{self, PREAMBLE};
use pld_proto::v1::{
    Ack, Header, PeerAtomicAdd, PeerCompareSwap, PeerFetchAdd, PeerGet, PeerNotify, PeerPut,
    header::Body,
};
use pld_server::{AccessError, Dtype, Error, NotifyOp, TransportKind};
use pld_tests::raw::{RawPeer, hello, hello_of};
use pld_tests::{Cluster, both, pattern};

async fn cluster(t: TransportKind) -> (Cluster, Bytes, Bytes) {
    pld_tests::patterned(t, 2, 1).await
}

async fn unchanged(c: &mut Cluster, data: &Bytes, signal: &Bytes) {
    pld_tests::assert_unchanged(c, data, signal).await
}

fn access(e: Error) -> AccessError {
    match e {
        Error::Access { error, .. } => error,
        other => panic!("expected an access error, got {other}"),
    }
}

both!(
    bad_calls_fail_before_sending_and_change_nothing,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        let r = c.rank(0);
        let (data, signal) = (c.window("data"), c.window("signal"));
        let size = 16u64 << 20;
        let before = r.stats();

        let e = r.put(1, data, size - 2, &[1, 2, 3]).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "put to rank 1: 3 bytes at offset {} do not fit in window 'data' of {size} bytes",
                size - 2
            )
        );
        assert!(matches!(
            access(r.get(1, data, size, 1).await.unwrap_err()),
            AccessError::OutOfBounds { .. }
        ));
        assert!(matches!(
            access(r.get(1, data, u64::MAX, 2).await.unwrap_err()),
            AccessError::OutOfBounds { .. }
        ));
        let e = r
            .atomic_add(1, data, 6, Dtype::Int32, &[0; 4])
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(
                "offset 6 in window 'data' is not a multiple of the int32 element size (4 bytes)"
            ),
            "{e}"
        );
        let e = r
            .atomic_add(1, data, 8, Dtype::Fp64, &[0; 12])
            .await
            .unwrap_err();
        assert!(matches!(
            access(e),
            AccessError::MisalignedLength { len: 12, .. }
        ));
        let e = r
            .atomic_add(1, data, 8, Dtype::Unspecified, &[0; 4])
            .await
            .unwrap_err();
        assert!(matches!(access(e), AccessError::UnknownDtype { .. }));
        let e = r.fetch_add(1, data, 0, Dtype::Fp32, 1).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "fetch_add to rank 1: fetch_add does not support dtype fp32; it takes int32 or int64"
        );
        let e = r
            .compare_swap(1, data, 4, Dtype::Int64, 0, 1)
            .await
            .unwrap_err();
        assert!(matches!(access(e), AccessError::MisalignedOffset { .. }));
        let e = r
            .fetch_add(1, data, 0, Dtype::Int32, i64::MAX)
            .await
            .unwrap_err();
        assert!(matches!(access(e), AccessError::ValueOutOfRange { .. }));
        let e = r.notify(1, signal, 2, 1, NotifyOp::Set).await.unwrap_err();
        assert!(matches!(access(e), AccessError::MisalignedOffset { .. }));
        let e = r
            .notify(1, signal, 64 << 10, 1, NotifyOp::Set)
            .await
            .unwrap_err();
        assert!(matches!(access(e), AccessError::OutOfBounds { .. }));
        let e = r
            .notify(1, signal, 0, 1, NotifyOp::Unspecified)
            .await
            .unwrap_err();
        assert!(matches!(access(e), AccessError::InvalidNotifyOp { .. }));
        let e = r.window("weights").unwrap_err();
        assert_eq!(
            e.to_string(),
            "window 'weights' does not exist; the windows are 'data', 'signal'"
        );
        let e = r.put(2, data, 0, &[1]).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "rank 2 does not exist: the cluster has ranks 0 to 1"
        );

        let after = r.stats();
        assert_eq!(after.bytes_sent, before.bytes_sent, "nothing was sent");
        unchanged(&mut c, &d0, &s0).await;
    }
);

/// The code and message of an error reply.
fn error_of(f: &frame::Frame) -> (ErrorCode, String) {
    match &f.header.body {
        Some(Body::Error(e)) => (
            ErrorCode::try_from(e.code).unwrap_or(ErrorCode::Unspecified),
            e.message.clone(),
        ),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

both!(
    bad_requests_on_the_wire_are_rejected_and_the_link_goes_on,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        let addr = c.peers[1].clone();
        let mut p = RawPeer::join(t, &addr, 1, hello_of(&c, 0)).await;
        let size = 16u64 << 20;
        let cases: Vec<(Body, Vec<u8>, ErrorCode, String)> = vec![
            (
                Body::Put(PeerPut {
                    window: 0,
                    offset: size - 1,
                    region: None,
                }),
                vec![7; 2],
                ErrorCode::OutOfRange,
                format!(
                    "2 bytes at offset {} do not fit in window 'data' of {size} bytes",
                    size - 1
                ),
            ),
            (
                Body::Get(PeerGet {
                    window: 0,
                    offset: u64::MAX - 1,
                    len: 4,
                    region: None,
                }),
                vec![],
                ErrorCode::OutOfRange,
                "do not fit in window 'data'".into(),
            ),
            (
                Body::Put(PeerPut {
                    window: 7,
                    offset: 0,
                    region: None,
                }),
                vec![7; 8],
                ErrorCode::UnknownWindow,
                "unknown window id 7: this rank has 2 windows".into(),
            ),
            (
                Body::AtomicAdd(PeerAtomicAdd {
                    window: 0,
                    offset: 2,
                    dtype: Dtype::Int32 as i32,
                    region: None,
                }),
                vec![1; 4],
                ErrorCode::Misaligned,
                "offset 2 in window 'data' is not a multiple of the int32 element size".into(),
            ),
            (
                Body::AtomicAdd(PeerAtomicAdd {
                    window: 0,
                    offset: 0,
                    dtype: Dtype::Fp32 as i32,
                    region: None,
                }),
                vec![1; 6],
                ErrorCode::Misaligned,
                "length 6 is not a multiple of the fp32 element size".into(),
            ),
            (
                Body::AtomicAdd(PeerAtomicAdd {
                    window: 0,
                    offset: 0,
                    dtype: 99,
                    region: None,
                }),
                vec![1; 4],
                ErrorCode::UnknownDtype,
                "unknown dtype value 99".into(),
            ),
            (
                Body::AtomicAdd(PeerAtomicAdd {
                    window: 0,
                    offset: 0,
                    dtype: 0,
                    region: None,
                }),
                vec![1; 4],
                ErrorCode::UnknownDtype,
                "unknown dtype value 0".into(),
            ),
            (
                Body::FetchAdd(PeerFetchAdd {
                    window: 0,
                    offset: 0,
                    dtype: Dtype::Fp16 as i32,
                    value: 1,
                }),
                vec![],
                ErrorCode::UnsupportedDtype,
                "fetch_add does not support dtype fp16".into(),
            ),
            (
                Body::CompareSwap(PeerCompareSwap {
                    window: 1,
                    offset: 64 << 10,
                    dtype: Dtype::Int64 as i32,
                    expected: 0,
                    desired: 1,
                }),
                vec![],
                ErrorCode::OutOfRange,
                "do not fit in window 'signal'".into(),
            ),
            (
                Body::Notify(PeerNotify {
                    window: 1,
                    offset: 0,
                    value: 1,
                    op: 9,
                }),
                vec![],
                ErrorCode::InvalidArgument,
                "notify op value 9 is neither set nor atomic_add".into(),
            ),
            (
                Body::Get(PeerGet {
                    window: 0,
                    offset: 0,
                    len: 8 << 20,
                    region: None,
                }),
                vec![],
                ErrorCode::InvalidArgument,
                "exceeds the origin's frame limit".into(),
            ),
            // Large payloads take the straight-into-the-window path; refused,
            // they are read and dropped, and the link goes on.
            (
                Body::Put(PeerPut {
                    window: 0,
                    offset: size - (1 << 20) + 1,
                    region: None,
                }),
                vec![9; 1 << 20],
                ErrorCode::OutOfRange,
                "1048576 bytes at offset".into(),
            ),
            (
                Body::Put(PeerPut {
                    window: 0,
                    offset: 0,
                    region: Some(pld_proto::v1::Region {
                        rows: 4,
                        cols: 1000,
                        row_stride: 2000,
                        dtype: Dtype::Fp32 as i32,
                    }),
                }),
                vec![9; 1 << 20],
                ErrorCode::InvalidArgument,
                "the payload holds 1048576 bytes, the region 16000".into(),
            ),
            (
                Body::Put(PeerPut {
                    window: 9,
                    offset: 0,
                    region: None,
                }),
                vec![9; 200_000],
                ErrorCode::UnknownWindow,
                "unknown window id 9".into(),
            ),
            (
                Body::Ack(Ack::default()),
                vec![],
                ErrorCode::UnexpectedMessage,
                "a ack is not a request".into(),
            ),
            (
                Body::Hello(hello(0, 2, "pld")),
                vec![],
                ErrorCode::UnexpectedMessage,
                "is not a request".into(),
            ),
        ];
        for (i, (body, payload, code, text)) in cases.into_iter().enumerate() {
            let id = 100 + i as u64;
            let reply = p.request(body, id, &payload).await;
            assert_eq!(reply.header.id, id, "the error answers request {id}");
            let (got, msg) = error_of(&reply);
            assert_eq!(got, code, "case {i}: {msg}");
            assert!(msg.contains(&text), "case {i}: {msg:?} should say {text:?}");
        }
        // The same connection still serves good requests.
        let reply = p
            .request(
                Body::Get(PeerGet {
                    window: 0,
                    offset: 0,
                    len: 16,
                    region: None,
                }),
                7,
                &[],
            )
            .await;
        assert!(matches!(reply.header.body, Some(Body::GetReply(_))));
        assert_eq!(&reply.payload[..], &d0[..16]);
        unchanged(&mut c, &d0, &s0).await;
    }
);

/// Sends `bytes` on a fresh connection (after a good handshake if `join`),
/// expects an error reply with `code`, then the connection closed.
async fn fatal(
    c: &Cluster,
    t: TransportKind,
    join: bool,
    bytes: &[u8],
    code: ErrorCode,
    text: &str,
) {
    let addr = &c.peers[1];
    let mut p = if join {
        RawPeer::join(t, addr, 1, hello_of(c, 0)).await
    } else {
        RawPeer::connect(t, addr, 1).await
    };
    p.send(bytes).await;
    let reply = p
        .read_frame()
        .await
        .expect("an error reply before the close");
    let (got, msg) = error_of(&reply);
    assert_eq!(got, code, "{msg}");
    assert!(msg.contains(text), "{msg:?} should say {text:?}");
    assert!(
        p.read_frame().await.is_none(),
        "then the rank closes the connection"
    );
}

both!(
    garbage_and_oversized_frames_close_only_their_connection,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        // Garbage instead of the preamble.
        fatal(
            &c,
            t,
            false,
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            ErrorCode::BadPreamble,
            "47 45 54 20",
        )
        .await;
        // A frame whose payload length is over the limit (a put of 64 MiB).
        let mut big = bytes::BytesMut::new();
        frame::encode_head(
            &Header {
                id: 1,
                body: Some(Body::Put(PeerPut {
                    window: 0,
                    offset: 0,
                    region: None,
                })),
                checked: None,
            },
            64 << 20,
            &mut big,
        );
        fatal(
            &c,
            t,
            true,
            &big,
            ErrorCode::FrameTooLarge,
            "frame payload of 67108864 bytes exceeds the limit of 1048576 bytes",
        )
        .await;
        // A header length over the limit.
        let mut huge = Vec::new();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&0u32.to_le_bytes());
        fatal(
            &c,
            t,
            true,
            &huge,
            ErrorCode::FrameTooLarge,
            "frame header of 4294967295 bytes",
        )
        .await;
        // A header that is not protobuf, followed by what would be a payload.
        let mut bad = Vec::new();
        bad.extend_from_slice(&4u32.to_le_bytes());
        bad.extend_from_slice(&4u32.to_le_bytes());
        bad.extend_from_slice(&[0xff; 8]);
        fatal(
            &c,
            t,
            true,
            &bad,
            ErrorCode::MalformedFrame,
            "frame header does not decode",
        )
        .await;
        // A first frame that is not a hello.
        let mut not_hello = PREAMBLE.to_vec();
        not_hello.extend_from_slice(&frame::encode(
            &Header {
                id: 1,
                body: Some(Body::Put(PeerPut {
                    window: 0,
                    offset: 0,
                    region: None,
                })),
                checked: None,
            },
            b"x",
        ));
        fatal(
            &c,
            t,
            false,
            &not_hello,
            ErrorCode::UnexpectedMessage,
            "must be a hello",
        )
        .await;
        // Pseudo-random garbage after a good handshake.
        for seed in 0..20 {
            let junk = pattern(64 + seed * 97, 1000 + seed as u64);
            let addr = &c.peers[1];
            let mut p = RawPeer::join(t, addr, 1, hello_of(&c, 0)).await;
            p.send(&junk).await;
            // Whatever the bytes decode to, the rank answers and keeps its windows.
            while let Some(f) = p.read_frame().await {
                if matches!(f.header.body, Some(Body::Error(_))) && f.header.id == 0 {
                    break;
                }
            }
        }
        unchanged(&mut c, &d0, &s0).await;
    }
);

both!(
    a_stranger_is_refused_at_the_handshake,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        let addr = c.peers[1].clone();
        // (the Hello, the rank whose certificate the peer shows, the refusal)
        for (h, cert, text) in [
            (
                hello(0, 2, "other"),
                0,
                "cluster id mismatch: rank 1 is in cluster 'pld', rank 0 in cluster 'other'",
            ),
            (hello(0, 3, "pld"), 0, "nranks mismatch"),
            (
                hello(1, 2, "pld"),
                1,
                "a peer claims rank 1, which is this rank's own",
            ),
            (
                hello(1, 2, "pld"),
                0,
                "claims rank 1 but its certificate does not name rank-1.pld",
            ),
            (
                hello(5, 2, "pld"),
                0,
                "claims rank 5, but the cluster has ranks 0 to 1",
            ),
        ] {
            let mut p = RawPeer::connect_with(t, &addr, 1, pld_tests::security(cert))
                .await
                .expect("dial");
            let reply = p.handshake(h).await.expect("a refusal");
            let (code, msg) = error_of(&reply);
            assert_eq!(code, ErrorCode::HandshakeRefused);
            assert!(msg.contains(text), "{msg:?} should say {text:?}");
            assert!(p.read_frame().await.is_none(), "the connection is closed");
        }
        unchanged(&mut c, &d0, &s0).await;
    }
);

#[test]
fn garbage_datagrams_on_the_quic_port_are_ignored() {
    pld_tests::run(std::time::Duration::from_secs(60), async {
        let (mut c, d0, s0) = cluster(TransportKind::Quic).await;
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for seed in 0..2000u64 {
            let junk = pattern(1 + (seed as usize * 37) % 1400, seed);
            sock.send_to(&junk, &c.peers[1]).unwrap();
        }
        // A datagram that looks like the start of a QUIC long header.
        let mut initial = vec![0xc0, 0, 0, 0, 1, 8];
        initial.extend_from_slice(&pattern(1200, 5));
        sock.send_to(&initial, &c.peers[1]).unwrap();
        unchanged(&mut c, &d0, &s0).await;
    });
}

/// A put cancelled in the middle of its frame must not leave a stream
/// that goes on after half a frame: the origin ends that stream and fails
/// that link only.
#[test]
fn a_put_cancelled_mid_frame_ends_its_stream_and_only_its_link() {
    use tokio::io::AsyncReadExt;
    pld_tests::run(std::time::Duration::from_secs(60), async {
        let t = TransportKind::Tcp;
        let peers = pld_tests::loopback_peers(3);
        // Rank 1 is the fake; ranks 0 and 2 are real.
        let listener = tokio::net::TcpListener::bind(&peers[1]).await.unwrap();
        let mut conns = pld_tests::raw::fake_rank(listener, 1, 3).await;
        // The fake speaks plain TCP: the cluster runs without TLS.
        let insecure = |r| {
            let mut c = pld_tests::rank_config(r, &peers, t);
            c.security = pld_server::Security::Insecure;
            c
        };
        let (r0, r2) = tokio::join!(
            pld_server::Rank::start(insecure(0)),
            pld_server::Rank::start(insecure(2)),
        );
        let (r0, r2) = (r0.unwrap(), r2.unwrap());
        let mut from0 = None;
        while from0.is_none() {
            let (rank, s, buf) = conns.recv().await.expect("connections from ranks 0 and 2");
            if rank == 0 {
                from0 = Some((s, buf));
            }
        }
        let (mut s, mut buf) = from0.expect("rank 0's connection");
        let data = r0.window("data").unwrap();
        let big = pattern(16 << 20, 3);
        // The fake reads the first 64 KiB of the put and then stops reading:
        // the rest cannot leave rank 0, and the put is cancelled mid-frame.
        tokio::select! {
            r = r0.put(1, data, 0, &big) => panic!("the put cannot finish: {r:?}"),
            _ = async {
                while buf.len() < 64 * 1024 {
                    s.read_buf(&mut buf).await.unwrap();
                }
            } => {}
        }
        let e = r0.put(1, data, 0, b"x").await.unwrap_err();
        assert!(
            e.to_string().contains(
                "rank 1 is unreachable: an op was cancelled while its frame was half written"
            ),
            "{e}"
        );
        // Rank 0 ended the stream after the partial frame: the fake sees the
        // end of the stream before a whole put arrived.
        let mut rest = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut rest))
            .await
            .expect("the stream ends")
            .unwrap();
        assert!(
            buf.len() + rest.len() < big.len(),
            "only part of the put was sent"
        );
        // Rank 0's other links are untouched.
        r0.put(2, data, 0, b"still fine").await.unwrap();
        assert_eq!(
            &r2.local(data).unwrap().read(0, 10).unwrap()[..],
            b"still fine"
        );
    });
}

/// xorshift64*, so the garbage is the same on every run.
fn garbage(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed >> 12;
            *seed ^= *seed << 25;
            *seed ^= *seed >> 27;
            (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

both!(
    random_frames_from_a_joined_peer_change_no_window_byte,
    120,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        let mut seed = 0x5EED_u64 + t as u64;
        for i in 0..100u32 {
            let mut p = RawPeer::join(t, &c.peers[1], 1, hello_of(&c, 0)).await;
            // A length prefix the decoder accepts, then random header and
            // payload bytes; or raw random bytes.
            let head = garbage(&mut seed, 1 + (i as usize * 7) % 60);
            let payload = garbage(&mut seed, (i as usize * 13) % 200);
            let mut bytes = Vec::new();
            if i % 4 != 3 {
                bytes.extend((head.len() as u32).to_le_bytes());
                bytes.extend((payload.len() as u32).to_le_bytes());
            }
            bytes.extend(&head);
            bytes.extend(&payload);
            p.send(&bytes).await;
            // The daemon answers with frames and closes; should a random
            // header happen to be a whole valid request, it answers that and
            // keeps the connection open, which is fine too.
            let quiet = std::time::Duration::from_secs(2);
            while let Ok(Some(_)) = tokio::time::timeout(quiet, p.read_frame()).await {}
        }
        unchanged(&mut c, &d0, &s0).await;
    }
);

// docs/security.md: before its Hello is accepted, a peer can make the rank
// buffer at most 64 KiB of payload, whatever --max-frame says (1 MiB
// here): a first frame claiming more is refused and its connection closed.
both!(
    a_frame_over_64_kib_before_a_hello_is_refused_whatever_the_frame_limit,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t).await;
        let mut bytes = pld_proto::frame::PREAMBLE.to_vec();
        let mut head = bytes::BytesMut::new();
        frame::encode_head(
            &pld_proto::v1::Header {
                id: 0,
                body: Some(Body::Hello(hello_of(&c, 0))),
                checked: None,
            },
            (64 << 10) + 1,
            &mut head,
        );
        bytes.extend_from_slice(&head);
        fatal(
            &c,
            t,
            false,
            &bytes,
            ErrorCode::FrameTooLarge,
            "frame payload of 65537 bytes exceeds the limit of 65536 bytes",
        )
        .await;
        unchanged(&mut c, &d0, &s0).await;
    }
);
