//! The client plane over TLS (`pld-daemon --grpc-tls`): clients verify the
//! daemon against the cluster CA and the name they dial.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, ClientOptions};
use pld_tests::{GrpcCluster, run, tls_dir};
use std::process::Command;
use std::time::Duration;

#[test]
fn grpc_over_tls_is_verified_against_the_cluster_ca_and_the_name() {
    run(Duration::from_secs(90), async {
        let metrics = pld_tests::loopback_peers(1).remove(0);
        let mut c = GrpcCluster::plan(
            pld_server::TransportKind::Quic,
            2,
            &[&["--grpc-tls"], &pld_tests::SMALL_WINDOWS[..]].concat(),
        );
        c.spawn_with(0, &["--metrics", metrics.as_str()]);
        c.spawn(1);
        for r in 0..2 {
            c.daemon(r).wait_ready(Duration::from_secs(30));
        }
        let handshakes_failed = || {
            let metrics = metrics.clone();
            async move {
                let body = common::scrape(&metrics).await;
                common::metric(&body, "pld_grpc_handshakes_failed_total{rank=\"0\"}")
            }
        };
        let ca = std::fs::read(tls_dir().join("ca.pem")).unwrap();
        let with = |tls_ca: Option<Vec<u8>>, domain: Option<&str>| ClientOptions {
            tls_ca,
            tls_domain: domain.map(String::from),
            wait_ready: Duration::ZERO,
            ..Default::default()
        };
        // Trusting the cluster CA, by address (127.0.0.1 is in grpc.pem)
        // and by name.
        let cl = Client::connect_with(&c.grpc[0], with(Some(ca.clone()), None))
            .await
            .unwrap();
        let data = cl.window("data").unwrap();
        cl.put(1, data, 0, b"over tls").await.unwrap();
        assert_eq!(&cl.get(1, data, 0, 8).await.unwrap()[..], b"over tls");
        let port = c.grpc[1].rsplit(':').next().unwrap();
        let by_name =
            Client::connect_with(&format!("localhost:{port}"), with(Some(ca.clone()), None))
                .await
                .unwrap();
        assert_eq!(by_name.rank(), 1);

        // Plaintext to a TLS port, another CA, another name: refused.
        let failed0 = handshakes_failed().await;
        let plain = Client::connect_with(&c.grpc[0], with(None, None)).await;
        let e = plain.map(|_| ()).expect_err("plaintext must not work");
        // The daemon closes it at the TLS handshake (it counts it so), and
        // the client sees its connection fail — as a transport, HTTP/2 or
        // cancelled-call error depending on when the close lands, which
        // tonic decides — never as a daemon's answer: no ErrorInfo.
        assert!(e.detail().is_none(), "a daemon's answer: {e}");
        assert!(
            matches!(
                e.code(),
                pld_client::Code::Unknown
                    | pld_client::Code::Unavailable
                    | pld_client::Code::Cancelled
                    | pld_client::Code::Internal
            ),
            "{e}"
        );
        assert!(
            handshakes_failed().await > failed0,
            "the daemon refused it at the handshake"
        );
        assert!(e.to_string().contains(&c.grpc[0]), "{e}");
        let foreign = pld_server::tls::TempTlsDir::new(1).unwrap();
        let other_ca = std::fs::read(foreign.path().join("ca.pem")).unwrap();
        let e = Client::connect_with(&c.grpc[0], with(Some(other_ca), None))
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains(&c.grpc[0]), "{e}");
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");
        let e = Client::connect_with(&c.grpc[0], with(Some(ca), Some("rank-9.elsewhere")))
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains(&c.grpc[0]), "{e}");
        assert!(
            e.to_string()
                .contains("certificate not valid for name \"rank-9.elsewhere\""),
            "{e}"
        );

        // The CLI.
        let out = Command::new(env!("CARGO_BIN_EXE_pld"))
            .args(["--daemon", &c.grpc[1], "--tls-ca"])
            .arg(tls_dir().join("ca.pem"))
            .args(["get", "--rank", "1", "--len", "8"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, b"over tls");
    });
}
