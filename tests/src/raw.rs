//! A raw peer: speaks frames (or garbage) to a rank directly, without the
//! rank engine's checks, to test what a daemon does with bad input.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::WINDOWS;
use bytes::BytesMut;
use pld_proto::Frame;
use pld_proto::PROTOCOL_VERSION;
use pld_proto::frame::{self, Decoder, PREAMBLE};
use pld_proto::v1::{ErrorCode, Header, Hello, WindowSpec, header::Body};
use pld_server::TransportKind;
use pld_server::transport::{Endpoint, PeerReader, PeerWriter, TransportSettings};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Hello a well-behaved rank `rank` of `nranks` with the test windows sends.
pub fn hello(rank: u32, nranks: u32, cluster_id: &str) -> Hello {
    let mut windows: Vec<WindowSpec> = WINDOWS
        .iter()
        .map(|w| {
            let c: pld_server::WindowConfig = w.parse().expect("window");
            WindowSpec {
                name: c.name,
                size: c.size,
            }
        })
        .collect();
    windows.sort_by(|a, b| a.name.cmp(&b.name));
    Hello {
        protocol_version: PROTOCOL_VERSION,
        cluster_id: cluster_id.into(),
        rank,
        nranks,
        windows,
        max_payload: frame::DEFAULT_MAX_PAYLOAD as u64,
        epoch: 1,
        barrier_epoch: 1,
        listen: String::new(),
        checked: false,
    }
}

/// The Hello embedded rank `rank` of `c` sends, its run's epoch included:
/// a raw peer that joins with it is one more connection of that rank, not
/// a second instance of it (which the cluster refuses).
pub fn hello_of(c: &crate::Cluster, rank: u32) -> Hello {
    let mut h = hello(rank, c.n(), "pld");
    h.epoch = c.rank(rank).epoch();
    h
}

/// A connection to a rank that the test drives byte by byte.
#[derive(Debug)]
pub struct RawPeer {
    reader: PeerReader,
    writer: PeerWriter,
    buf: BytesMut,
    decoder: Decoder,
    _endpoint: Endpoint,
    _quic: Option<pld_server::transport::QuicConnection>,
}

impl RawPeer {
    /// Opens a connection to rank `target` at `addr` with rank 0's
    /// certificate of the test CA ([`crate::tls_dir`]); sends nothing yet.
    pub async fn connect(transport: TransportKind, addr: &str, target: u32) -> RawPeer {
        Self::connect_with(transport, addr, target, crate::security(0))
            .await
            .expect("dial")
    }

    /// Opens a connection to rank `target` at `addr` under `security`
    /// (the TLS handshake may fail: the error says why).
    pub async fn connect_with(
        transport: TransportKind,
        addr: &str,
        target: u32,
        security: pld_server::Security,
    ) -> std::io::Result<RawPeer> {
        let sock: std::net::SocketAddr = addr.parse().expect("addr");
        let settings = TransportSettings::default().with_security(security);
        let endpoint = match transport {
            TransportKind::Quic => Endpoint::quic_client(&settings).expect("quic client"),
            TransportKind::Tcp => Endpoint::bind(
                TransportKind::Tcp,
                "127.0.0.1:0".parse().expect("addr"),
                0,
                &settings,
            )
            .await
            .expect("tcp endpoint"),
        };
        let conn = endpoint.dial(sock, target).await?;
        Ok(RawPeer {
            reader: conn.reader,
            writer: conn.writer,
            buf: BytesMut::new(),
            decoder: Decoder::new(64 << 20),
            _endpoint: endpoint,
            _quic: conn.quic,
        })
    }

    /// Connects and completes a handshake as `hello`; panics unless accepted.
    pub async fn join(transport: TransportKind, addr: &str, target: u32, hello: Hello) -> RawPeer {
        let mut p = RawPeer::connect(transport, addr, target).await;
        let reply = p.handshake(hello).await.expect("a reply to the hello");
        assert!(
            matches!(reply.header.body, Some(Body::Hello(_))),
            "handshake refused: {reply:?}"
        );
        p
    }

    /// Sends the preamble and `hello`; returns the reply.
    /// `None` if the rank closed the connection instead (or before it
    /// could be sent).
    pub async fn handshake(&mut self, hello: Hello) -> Option<Frame> {
        let h = Header {
            id: 0,
            body: Some(Body::Hello(hello)),
            checked: None,
        };
        let mut bytes = PREAMBLE.to_vec();
        bytes.extend_from_slice(&frame::encode(&h, &[]));
        self.try_send(&bytes).await.ok()?;
        self.read_frame().await
    }

    /// Writes raw bytes; panics if they cannot be written.
    pub async fn send(&mut self, bytes: &[u8]) {
        self.try_send(bytes).await.expect("write");
    }

    /// Writes raw bytes (and flushes: TLS may hold the last record).
    pub async fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes).await?;
        self.writer.flush().await
    }

    /// Sends one frame and returns the next frame received.
    pub async fn request(&mut self, body: Body, id: u64, payload: &[u8]) -> Frame {
        let h = Header {
            id,
            body: Some(body),
            checked: None,
        };
        self.send(&frame::encode(&h, payload)).await;
        self.read_frame().await.expect("a reply")
    }

    /// Reads (and drops) whatever arrives until the rank closes the
    /// connection: how long that took, or `None` if it stayed open for
    /// `within`.
    pub async fn closed_within(&mut self, within: Duration) -> Option<Duration> {
        let t0 = std::time::Instant::now();
        tokio::time::timeout(within, async {
            let mut buf = [0u8; 4096];
            loop {
                match self.reader.read(&mut buf).await {
                    Ok(0) | Err(_) => return t0.elapsed(),
                    Ok(_) => {}
                }
            }
        })
        .await
        .ok()
    }

    /// The next frame; `None` once the rank closed the connection.
    pub async fn read_frame(&mut self) -> Option<Frame> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Some(f) = self
                    .decoder
                    .decode(&mut self.buf)
                    .expect("the rank sends valid frames")
                {
                    return Some(f);
                }
                self.buf.reserve(64 * 1024);
                match self.reader.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("the rank answers or closes within 10 s")
    }
}

/// A fake rank on TCP: answers every handshake as rank `me` and hands the
/// test each connection, with the bytes already read after the hello;
/// it stops listening when the test drops the receiver.
pub async fn fake_rank(
    listener: tokio::net::TcpListener,
    me: u32,
    nranks: u32,
) -> tokio::sync::mpsc::Receiver<(u32, tokio::net::TcpStream, bytes::BytesMut)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        loop {
            // The test dropping its receiver closes the listener at once.
            let (mut s, _) = tokio::select! {
                _ = tx.closed() => return,
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(_) => return,
                },
            };
            let mut buf = bytes::BytesMut::new();
            let mut dec = Decoder::expecting_preamble(1 << 20);
            // A dial the rank gave up on (closed, reset) is no reason to
            // stop accepting its next one.
            let their = loop {
                if let Some(f) = dec.decode(&mut buf).expect("a valid hello") {
                    break Some(f);
                }
                match s.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break None,
                    Ok(_) => {}
                }
            };
            let Some(Body::Hello(h)) = their.and_then(|f| f.header.body) else {
                continue;
            };
            if tx.is_closed() {
                return;
            }
            let reply = Header {
                id: 0,
                body: Some(Body::Hello(hello(me, nranks, "pld"))),
                checked: None,
            };
            if s.write_all(&frame::encode(&reply, &[])).await.is_err() {
                continue;
            }
            if tx.send((h.rank, s, buf)).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// Rank 0 here, linked to a fake rank 1 (plain TCP) that the test drives
/// frame by frame.
#[allow(missing_debug_implementations)]
pub struct Faked {
    /// The real rank 0.
    pub rank: pld_server::Rank,
    /// The fake rank 1's end of rank 0's link.
    pub end: FakeEnd,
}

/// The fake rank 1's end of rank 0's link: reads rank 0's frames, writes
/// replies. Dropping it cuts the link.
#[allow(missing_debug_implementations)]
pub struct FakeEnd {
    stream: tokio::net::TcpStream,
    buf: BytesMut,
    decoder: Decoder,
}

impl Faked {
    /// Starts rank 0 with op timeout `op_timeout` against a fake rank 1.
    pub async fn start(op_timeout: Duration) -> Faked {
        let peers = crate::loopback_peers(2);
        let listener = tokio::net::TcpListener::bind(&peers[1]).await.unwrap();
        let mut conns = fake_rank(listener, 1, 2).await;
        let mut c = crate::rank_config(0, &peers, TransportKind::Tcp);
        c.op_timeout = op_timeout;
        c.security = pld_server::Security::Insecure;
        let rank = pld_server::Rank::start(c).await.unwrap();
        let (_, stream, buf) = conns.recv().await.expect("rank 0 dialed the fake");
        Faked {
            rank,
            end: FakeEnd::new(stream, buf),
        }
    }

    /// Asserts that `e` is the refusal [`FakeEnd::refuse_one`] sent put
    /// `id`, with `message`.
    pub fn assert_refused_put(e: &pld_server::Error, id: u64, message: &str) {
        match e {
            pld_server::Error::Rejected {
                rank: 1,
                op: pld_proto::OpKind::Put,
                id: got,
                code: ErrorCode::OutOfRange,
                message: m,
            } if *got == id && m == message => {}
            other => panic!("expected the refusal of put #{id} ({message}), got {other}"),
        }
    }
}

impl FakeEnd {
    /// A fake rank's end of a connection [`fake_rank`] accepted, with the
    /// bytes it read after the hello.
    pub fn new(stream: tokio::net::TcpStream, buf: BytesMut) -> FakeEnd {
        FakeEnd {
            stream,
            buf,
            decoder: Decoder::new(8 << 20),
        }
    }

    /// Whether the real rank has sent anything on this connection that
    /// the test has not read (without waiting; what arrived is kept for
    /// [`FakeEnd::next`]).
    pub fn has_unread(&mut self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        self.buf.reserve(4096);
        matches!(self.stream.try_read_buf(&mut self.buf), Ok(n) if n > 0)
    }

    /// The next frame rank 0 sent.
    pub async fn next(&mut self) -> Frame {
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).unwrap() {
                return f;
            }
            let n = self.stream.read_buf(&mut self.buf).await.unwrap();
            assert!(n > 0, "rank 0 closed the connection");
        }
    }

    /// The ids of the next `n` frames rank 0 sent.
    pub async fn ids(&mut self, n: usize) -> Vec<u64> {
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(self.next().await.header.id);
        }
        ids
    }

    /// Answers the ops `ids` (consecutive) in one write: a cumulative ack
    /// of those before `ids[bad]`, an OutOfRange refusal of it saying
    /// `message`, and a cumulative ack of those after it.
    pub async fn refuse_one(&mut self, ids: &[u64], bad: usize, message: &str) {
        let ack = |r: &[u64]| frame::encode(&frame::ack_header(r[r.len() - 1], r[0]), &[]);
        let mut replies = ack(&ids[..bad]);
        let refusal = frame::error_header(ids[bad], ErrorCode::OutOfRange, message.into());
        replies.extend_from_slice(&frame::encode(&refusal, &[]));
        replies.extend_from_slice(&ack(&ids[bad + 1..]));
        self.stream.write_all(&replies).await.unwrap();
    }

    /// Sends rank 0 a reply frame.
    pub async fn reply(&mut self, header: Header) {
        self.reply_with(header, &[]).await;
    }

    /// Sends rank 0 a reply frame carrying `payload`.
    pub async fn reply_with(&mut self, header: Header, payload: &[u8]) {
        self.stream
            .write_all(&frame::encode(&header, payload))
            .await
            .unwrap();
    }
}
