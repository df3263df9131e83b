//! Mutual TLS on the peer plane: only ranks with a certificate of the
//! cluster CA that names the rank they claim are served; nothing else
//! changes a window byte.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bytes::Bytes;
use pld_proto::v1::{ErrorCode, header::Body};
use pld_server::tls::{ClusterCa, Identity, TempTlsDir};
use pld_server::{Security, TransportKind};
use pld_tests::raw::{RawPeer, hello};
use pld_tests::{Cluster, Daemon, both, loopback_peers};
use std::sync::Arc;
use std::time::Duration;

async fn cluster(t: TransportKind, n: u32) -> (Cluster, Bytes, Bytes) {
    pld_tests::patterned(t, n, 7).await
}

async fn unchanged(c: &mut Cluster, data: &Bytes, signal: &Bytes) {
    pld_tests::assert_unchanged(c, data, signal).await
}

/// Rank 0's identity as a peer that trusts the cluster's CA but shows a
/// certificate of a CA of its own (`name`): what mutual TLS refuses.
fn forged(name: &str) -> Arc<Identity> {
    let ca_pem = std::fs::read(pld_tests::tls_dir().join("ca.pem")).unwrap();
    let other = ClusterCa::generate(name).unwrap().issue(0).unwrap();
    let id = Identity::from_pem(
        0,
        &ca_pem,
        other.cert_pem.as_bytes(),
        other.key_pem.as_bytes(),
    );
    Arc::new(id.unwrap())
}

/// A put of 0xff bytes over the whole data window, as a frame: what an
/// intruder that got through would send.
fn intrusion(p: &mut RawPeer) -> impl std::future::Future<Output = ()> + '_ {
    use pld_proto::v1::{Header, PeerPut};
    let header = Header {
        id: 1,
        body: Some(Body::Put(PeerPut {
            window: 0,
            offset: 0,
            ..Default::default()
        })),
        checked: None,
    };
    async move {
        let mut buf = bytes::BytesMut::new();
        pld_proto::frame::encode_head(&header, 4096, &mut buf);
        buf.extend_from_slice(&[0xff; 4096]);
        // The rank may have closed the stream already: that is fine too.
        let _ = p.try_send(&buf).await;
    }
}

both!(
    a_rank_with_a_foreign_ca_is_rejected_and_no_window_byte_changes,
    120,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t, 2).await;
        let foreign = TempTlsDir::new(2).unwrap();

        // A whole daemon under another CA, claiming rank 0: it cannot
        // verify rank 1 and gives up, naming it.
        let intruder_peers = vec![loopback_peers(1).remove(0), c.peers[1].clone()];
        let dir = foreign.path().to_str().unwrap().to_string();
        let intruder = Daemon::spawn(
            0,
            &intruder_peers,
            t,
            &["--tls-dir", &dir, "--connect-timeout", "10s"],
        );
        let (ok, err) = intruder.wait_exit(Duration::from_secs(30));
        assert!(!ok, "the intruder must not start");
        assert!(
            err.contains(&format!(
                "rank 1 at {} failed mutual TLS authentication",
                c.peers[1]
            )),
            "{err}"
        );

        // A peer that trusts the cluster's CA (so it gets past verifying
        // rank 1) but shows a certificate of its own CA: rank 1 refuses it.
        let ca_pem = std::fs::read(pld_tests::tls_dir().join("ca.pem")).unwrap();
        let other = ClusterCa::generate("intruders").unwrap().issue(0).unwrap();
        let forged = Identity::from_pem(
            0,
            &ca_pem,
            other.cert_pem.as_bytes(),
            other.key_pem.as_bytes(),
        )
        .unwrap();
        // And a peer with no certificate at all (an --insecure rank).
        for security in [Security::Tls(Arc::new(forged)), Security::Insecure] {
            let label = format!("{security:?}");
            match RawPeer::connect_with(t, &c.peers[1], 1, security).await {
                Err(e) => assert!(
                    pld_server::tls::auth_failure(&e).is_some(),
                    "{label}: the handshake fails on the certificate: {e}"
                ),
                Ok(mut p) => {
                    // TCP: TLS 1.3 lets the client finish before the
                    // server has checked its certificate; the server's
                    // alert then ends the stream.
                    let reply = p.handshake(hello(0, 2, "pld")).await;
                    assert!(reply.is_none(), "{label}: no hello back: {reply:?}");
                    intrusion(&mut p).await;
                }
            }
        }
        unchanged(&mut c, &d0, &s0).await;
        let log = c.daemons.remove(0).kill_and_stderr();
        // The forged and the missing certificate at least (over QUIC the
        // intruder daemon's abort is seen too): each reason once a second.
        assert!(
            log.matches("peer connection failed mutual TLS").count() >= 2,
            "rank 1 logs each kind of refusal: {log}"
        );
        // An --insecure peer shows no certificate over QUIC, and speaks
        // plaintext over TCP.
        let insecure = match t {
            TransportKind::Quic => "peer sent no certificates",
            TransportKind::Tcp => "received corrupt message",
        };
        assert!(log.contains(insecure), "{log}");
    }
);

both!(
    a_peer_whose_certificate_names_another_rank_is_refused,
    60,
    |t: TransportKind| async move {
        let (mut c, d0, s0) = cluster(t, 3).await;
        // Rank 0's certificate, claiming to be rank 2.
        let mut p = RawPeer::connect(t, &c.peers[1], 1).await;
        let reply = p.handshake(hello(2, 3, "pld")).await.expect("a refusal");
        let Some(Body::Error(e)) = reply.header.body else {
            panic!("expected an error, got {:?}", reply.header)
        };
        assert_eq!(e.code(), ErrorCode::HandshakeRefused);
        assert!(
            e.message
                .contains("claims rank 2 but its certificate does not name rank-2.pld"),
            "{}",
            e.message
        );
        assert!(p.read_frame().await.is_none(), "the connection is closed");
        unchanged(&mut c, &d0, &s0).await;
    }
);

/// Runs `pld-daemon ARGS` to its end; returns success, stdout, stderr.
fn daemon(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(pld_tests::daemon_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run pld-daemon");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_daemon_without_tls_material_refuses_to_start_unless_insecure() {
    let peers = loopback_peers(2).join(",");
    let (ok, _, err) = daemon(&["--rank", "0", "--peers", &peers]);
    assert!(!ok);
    assert!(
        err.contains("no TLS material: give --tls-dir DIR") && err.contains("--insecure"),
        "{err}"
    );

    // --insecure: the two ranks form a cluster, each warning loudly.
    let p: Vec<String> = peers.split(',').map(String::from).collect();
    let mut a = Daemon::spawn(0, &p, TransportKind::Quic, &["--insecure"]);
    let mut b = Daemon::spawn(1, &p, TransportKind::Quic, &["--insecure"]);
    a.wait_ready(Duration::from_secs(30));
    b.wait_ready(Duration::from_secs(30));
    for log in [a.kill_and_stderr(), b.kill_and_stderr()] {
        assert!(
            log.contains("runs with --insecure: peers are NOT authenticated"),
            "{log}"
        );
    }
}

#[test]
fn certs_makes_a_ca_and_one_certificate_per_rank_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("pld-certs-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let (ok, stdout, err) = daemon(&["certs", "--ranks", "3", "--out", out]);
    assert!(ok, "{err}");
    assert!(stdout.contains("ranks 0..3 (9 files)"), "{stdout}");
    assert!(dir.join("grpc.pem").exists() && dir.join("grpc.key").exists());
    for r in 0..3u32 {
        let key = dir.join(format!("rank-{r}.key"));
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is private", key.display());
        let id = Security::from_dir(&dir, r).unwrap();
        assert!(id.is_tls());
    }
    // A certificate installed under the wrong rank is caught at load.
    std::fs::copy(dir.join("rank-1.pem"), dir.join("rank-0.pem")).unwrap();
    std::fs::copy(dir.join("rank-1.key"), dir.join("rank-0.key")).unwrap();
    let e = Security::from_dir(&dir, 0).unwrap_err().to_string();
    assert!(e.contains("does not name rank 0 (rank-0.pld)"), "{e}");
    // So is a missing directory, by name.
    let e = Security::from_dir(&dir.join("nope"), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope/ca.pem"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

both!(
    a_flood_of_failed_handshakes_is_logged_once_a_second_with_a_count,
    60,
    |t: TransportKind| async move {
        let (mut c, _, _) = cluster(t, 2).await;
        let forged = forged("flood");
        let attempt = || async {
            if let Ok(mut p) =
                RawPeer::connect_with(t, &c.peers[1], 1, Security::Tls(forged.clone())).await
            {
                let _ = p.handshake(hello(0, 2, "pld")).await;
            }
        };
        let t0 = std::time::Instant::now();
        for _ in 0..30 {
            attempt().await;
        }
        // The rate limit is a second: the first attempt after it reports
        // the ones left out. Keep attempting until that report shows.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut counted = false;
        while !counted && std::time::Instant::now() < deadline {
            attempt().await;
            counted = c.daemons[0].wait_log(
                "more like it since the last report",
                Duration::from_millis(250),
            );
        }
        let log = c.daemons.remove(0).kill_and_stderr();
        assert!(counted, "the left-out ones are counted:\n{log}");
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("peer connection failed mutual TLS"))
            .collect();
        // At most one line a second: as many as seconds the attempts
        // began in (measured, not assumed: a loaded machine is slower).
        let most = t0.elapsed().as_secs() as usize + 1;
        assert!(
            (1..=most).contains(&lines.len()),
            "failed handshakes over {:?}: {} lines\n{log}",
            t0.elapsed(),
            lines.len()
        );
    }
);

// `Stats::auth_refused` (and /metrics' pld_auth_refused_total) counts each
// peer connection refused at mutual TLS — here three with a certificate of
// another CA — and nothing else.
both!(
    each_connection_refused_at_mutual_tls_counts_once_in_auth_refused,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[]).await;
        assert_eq!(c.rank(1).stats().auth_refused, 0);
        let forged = forged("counted");
        for _ in 0..3 {
            if let Ok(mut p) =
                RawPeer::connect_with(t, &c.peers[1], 1, Security::Tls(forged.clone())).await
            {
                let _ = p.handshake(hello(0, 2, "pld")).await;
            }
        }
        // The refusals are counted as the server side finishes each
        // handshake: wait for the count, then check it is exactly three.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while c.rank(1).stats().auth_refused < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{}",
                c.rank(1).stats().auth_refused
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(c.rank(1).stats().auth_refused, 3);
        // A real rank's connections count nothing.
        let data = c.window("data");
        c.rank(0).put(1, data, 0, b"ok").await.unwrap();
        assert_eq!(c.rank(1).stats().auth_refused, 3);
    }
);
