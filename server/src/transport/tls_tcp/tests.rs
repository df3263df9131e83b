//! Our record layer against itself and against rustls's own, over loopback
//! sockets: the bytes of a stream arrive whole and in order across key
//! updates, a changed or cut record delivers nothing, close_notify ends a
//! stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::{TlsReader, TlsWriter, accept, connect};
use crate::config::Progress;
use crate::tls::{self, ClusterCa, Security};
use crate::transport::Raw;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn configs() -> (rustls::ServerConfig, rustls::ClientConfig) {
    let ids = ClusterCa::throwaway(2).unwrap();
    let (Security::Tls(_), Security::Tls(_)) = (&ids[0], &ids[1]) else {
        panic!("throwaway identities are TLS")
    };
    let mut server = tls::server_config(1, &ids[1]).unwrap();
    server.enable_secret_extraction = true;
    let mut client = tls::client_config(&ids[0]).unwrap();
    client.enable_secret_extraction = true;
    (server, client)
}

fn name() -> ServerName<'static> {
    ServerName::try_from(tls::server_name(1)).unwrap()
}

/// A stream of `n` bytes that no two offsets of a short run share.
fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

/// Sends `data` in pieces of assorted sizes, from slices and from raw
/// memory, flushing now and then.
async fn send(w: &mut TlsWriter, data: &[u8]) {
    let sizes = [1usize, 7, 300, 16 * 1024, 16 * 1024 + 1, 70_000, 5, 200_000];
    let (mut at, mut i) = (0, 0);
    while at < data.len() {
        let n = sizes[i % sizes.len()].min(data.len() - at);
        if i % 3 == 2 {
            let raw = Raw {
                ptr: data[at..].as_ptr().cast_mut(),
                len: n,
            };
            w.write_raw_all(raw).await.unwrap();
        } else {
            w.write_all(&data[at..at + n]).await.unwrap();
            if i % 2 == 0 {
                w.flush().await.unwrap();
            }
        }
        at += n;
        i += 1;
    }
    w.flush().await.unwrap();
}

/// Receives exactly `n` bytes, through both read paths.
async fn receive(r: &mut TlsReader, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let mut at = 0;
    while at < n {
        let want = (n - at).min(50_000);
        let k = if at % 2 == 0 {
            r.read(&mut out[at..at + want]).await.unwrap()
        } else {
            let raw = Raw {
                ptr: out[at..].as_mut_ptr(),
                len: want,
            };
            r.read_raw(raw).await.unwrap()
        };
        assert!(k > 0, "the stream ended {} bytes early", n - at);
        at += k;
    }
    out
}

async fn pair(progress: Progress) -> ((TlsReader, TlsWriter), (TlsReader, TlsWriter)) {
    let (server, client) = configs();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (c, s) = tokio::join!(
        async {
            let s = TcpStream::connect(addr).await.unwrap();
            connect(s, Arc::new(client), name(), progress)
                .await
                .unwrap()
        },
        async {
            let (s, _) = l.accept().await.unwrap();
            accept(s, Arc::new(server), progress).await.unwrap()
        }
    );
    assert!(
        c.2.is_some() && s.2.is_some(),
        "both sides saw a certificate"
    );
    ((c.0, c.1), (s.0, s.1))
}

#[tokio::test]
async fn a_stream_arrives_whole_both_ways_across_key_updates() {
    for progress in [
        Progress::Sleep,
        Progress::spin(Duration::from_millis(20)),
        Progress::Spin {
            idle: Duration::from_millis(20),
            oversubscribed: true,
        },
    ] {
        let ((mut cr, mut cw), (mut sr, mut sw)) = pair(progress).await;
        // A new key every three records, in both directions.
        cw.set_update_at(3);
        sw.set_update_at(3);
        let up = pattern(1, 3 << 20);
        let down = pattern(2, 1 << 20);
        let (_, got_up, _, got_down) = tokio::join!(
            send(&mut cw, &up),
            receive(&mut sr, up.len()),
            send(&mut sw, &down),
            receive(&mut cr, down.len()),
        );
        assert!(got_up == up, "client to server: the bytes differ");
        assert!(got_down == down, "server to client: the bytes differ");
        // Each key sealed at most three records before it was replaced.
        assert!(
            cw.tx.seq() <= 3 && sw.tx.seq() <= 3,
            "{:?} {:?}",
            cw.tx,
            sw.tx
        );
        assert!(sr.rx.seq() <= 3 && cr.rx.seq() <= 3);

        // close_notify ends the stream: a read returns 0, not an error.
        cw.shutdown().await.unwrap();
        assert_eq!(sr.read(&mut [0u8; 16]).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn rustls_reads_our_records_and_we_read_its_with_its_key_updates() {
    let (server, client) = configs();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    // rustls's own server (which sends session tickets), our client.
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let (ours, theirs) = tokio::join!(
        async {
            let s = TcpStream::connect(addr).await.unwrap();
            connect(s, Arc::new(client), name(), Progress::Sleep)
                .await
                .unwrap()
        },
        async {
            let (s, _) = l.accept().await.unwrap();
            acceptor.accept(s).await.unwrap()
        }
    );
    let (mut r, mut w, _) = ours;
    w.set_update_at(2);
    let (mut tr, mut tw) = tokio::io::split(theirs);
    let up = pattern(3, 1 << 20);
    let down = pattern(4, 600_000);
    let (_, got_up, _, got_down) = tokio::join!(
        send(&mut w, &up),
        async {
            let mut got = vec![0u8; up.len()];
            tr.read_exact(&mut got).await.unwrap();
            got
        },
        async {
            // rustls asks for a key update half way.
            tw.write_all(&down[..300_000]).await.unwrap();
            tw.flush().await.unwrap();
            tw.write_all(&down[300_000..]).await.unwrap();
            tw.flush().await.unwrap();
        },
        receive(&mut r, down.len()),
    );
    assert!(got_up == up && got_down == down, "the bytes differ");

    let mut theirs = tr.unsplit(tw);
    theirs.get_mut().1.refresh_traffic_keys().unwrap();
    theirs.write_all(b"after the update").await.unwrap();
    theirs.flush().await.unwrap();
    assert_eq!(receive(&mut r, 16).await, b"after the update");
    // It asked for ours to change too: our next record announces it.
    w.write_all(b"answered").await.unwrap();
    w.flush().await.unwrap();
    let mut got = [0u8; 8];
    theirs.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"answered");

    w.shutdown().await.unwrap();
    let mut rest = Vec::new();
    theirs.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "a clean end after close_notify");
    theirs.shutdown().await.unwrap();
    assert_eq!(r.read(&mut [0u8; 4]).await.unwrap(), 0);
}

/// Our two sides through a relay that lets the test change the bytes of
/// the traffic after the handshake.
async fn relayed(
    damage: impl FnOnce(Vec<u8>) -> Vec<u8> + Send + 'static,
) -> ((TlsReader, TlsWriter), (TlsReader, TlsWriter)) {
    let (server, client) = configs();
    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let back = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (fa, ba) = (front.local_addr().unwrap(), back.local_addr().unwrap());
    let (armed_tx, armed_rx) = tokio::sync::oneshot::channel::<usize>();
    tokio::spawn(async move {
        let (mut from, _) = front.accept().await.unwrap();
        let mut to = TcpStream::connect(ba).await.unwrap();
        let (mut fr, mut fw) = from.split();
        let (mut tr, mut tw) = to.split();
        // Server to client: as it is.
        let down = tokio::io::copy(&mut tr, &mut fw);
        let up = async {
            // The handshake as it is, then `len` bytes of traffic changed.
            let mut armed = armed_rx;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                tokio::select! {
                    n = fr.read(&mut buf) => {
                        let n = n.unwrap();
                        if n == 0 { return; }
                        tw.write_all(&buf[..n]).await.unwrap();
                    }
                    len = &mut armed => {
                        let mut traffic = vec![0u8; len.unwrap()];
                        fr.read_exact(&mut traffic).await.unwrap();
                        tw.write_all(&damage(traffic)).await.unwrap();
                        let _ = tw.shutdown().await;
                        return;
                    }
                }
            }
        };
        let _ = tokio::join!(down, up);
    });
    let (c, s) = tokio::join!(
        async {
            let s = TcpStream::connect(fa).await.unwrap();
            connect(s, Arc::new(client), name(), Progress::Sleep)
                .await
                .unwrap()
        },
        async {
            let (s, _) = back.accept().await.unwrap();
            accept(s, Arc::new(server), Progress::Sleep).await.unwrap()
        }
    );
    // One record of 1000 bytes follows: 5 + 1000 + 1 + 16 on the wire.
    armed_tx.send(1022).unwrap();
    ((c.0, c.1), (s.0, s.1))
}

#[tokio::test]
async fn a_changed_record_fails_and_delivers_nothing() {
    let ((_, mut cw), (mut sr, _)) = relayed(|mut t| {
        t[500] ^= 1;
        t
    })
    .await;
    cw.write_all(&[0x42; 1000]).await.unwrap();
    cw.flush().await.unwrap();
    let mut got = [0u8; 1000];
    let e = sr.read(&mut got).await.unwrap_err();
    assert!(e.to_string().contains("cannot decrypt"), "{e}");
    assert!(got.iter().all(|b| *b == 0), "nothing of it was delivered");
}

#[tokio::test]
async fn a_stream_cut_inside_a_record_is_an_error() {
    let ((_, mut cw), (mut sr, _)) = relayed(|mut t| {
        t.truncate(600);
        t
    })
    .await;
    cw.write_all(&[0x42; 1000]).await.unwrap();
    cw.flush().await.unwrap();
    let e = sr.read(&mut [0u8; 1000]).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
}

#[tokio::test]
async fn plaintext_after_the_handshake_is_refused() {
    let ((_, mut cw), (mut sr, _)) = relayed(|t| {
        // What an attacker would inject: an unprotected record.
        let mut fake = vec![22, 3, 3, 0x03, 0xf9];
        fake.resize(t.len(), 0);
        fake
    })
    .await;
    cw.write_all(&[0x42; 1000]).await.unwrap();
    cw.flush().await.unwrap();
    let e = sr.read(&mut [0u8; 1000]).await.unwrap_err();
    assert!(e.to_string().contains("not a protected record"), "{e}");
}

/// A ClientHello, as a rustls client sends it first.
fn client_hello(client: &rustls::ClientConfig) -> Vec<u8> {
    let mut c = rustls::ClientConnection::new(Arc::new(client.clone()), name()).unwrap();
    let mut out = Vec::new();
    c.write_tls(&mut out).unwrap();
    out
}

/// Bytes of assorted shapes: random, record-like, cut.
fn junk(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let len = (next() % 2000) as usize;
    let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
    if seed % 3 == 0 && v.len() >= 5 {
        // A plausible record header in front of the noise.
        let body = (v.len() - 5) as u16;
        v[..5].copy_from_slice(&[[22u8, 23, 21][(seed / 3 % 3) as usize], 3, 3, 0, 0]);
        v[3..5].copy_from_slice(&body.to_be_bytes());
    }
    v
}

#[tokio::test]
async fn junk_at_any_point_of_the_handshake_fails_it_without_a_panic() {
    let (server, client) = configs();
    let (server, hello) = (Arc::new(server), client_hello(&client));
    let client = Arc::new(client);
    for seed in 0..60u64 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // Our server, fed junk (after a real ClientHello for odd seeds).
        let serving = {
            let server = server.clone();
            tokio::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                accept(s, server, Progress::Sleep).await.map(|_| ())
            })
        };
        let mut s = TcpStream::connect(addr).await.unwrap();
        if seed % 2 == 1 {
            s.write_all(&hello).await.unwrap();
        }
        let _ = s.write_all(&junk(seed)).await;
        let _ = s.shutdown().await;
        let r = tokio::time::timeout(Duration::from_secs(10), serving).await;
        let r = r.expect("the handshake ends").expect("no panic");
        assert!(r.is_err(), "seed {seed}: junk made a connection");

        // Our client, answered with junk.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let dialing = {
            let client = client.clone();
            tokio::spawn(async move {
                let s = TcpStream::connect(addr).await.unwrap();
                connect(s, client, name(), Progress::Sleep)
                    .await
                    .map(|_| ())
            })
        };
        let (mut s, _) = l.accept().await.unwrap();
        let mut first = vec![0u8; 4096];
        let _ = s.read(&mut first).await;
        let _ = s.write_all(&junk(seed + 1000)).await;
        let _ = s.shutdown().await;
        let r = tokio::time::timeout(Duration::from_secs(10), dialing).await;
        let r = r.expect("the handshake ends").expect("no panic");
        assert!(r.is_err(), "seed {seed}: junk made a connection");
    }
}
