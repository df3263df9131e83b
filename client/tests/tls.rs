//! The client plane over TLS (`pld-daemon --grpc-tls`): clients verify the
//! daemon against the cluster CA and the name they dial.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::{Client, ClientOptions};
use pld_tests::{GrpcCluster, run, tls_dir};
use std::process::Command;
use std::time::Duration;

#[test]
fn grpc_over_tls_is_verified_against_the_cluster_ca_and_the_name() {
    run(Duration::from_secs(90), async {
        let c = GrpcCluster::start(
            pld_server::TransportKind::Quic,
            2,
            &[&["--grpc-tls"], &pld_tests::SMALL_WINDOWS[..]].concat(),
        );
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
        let plain = Client::connect_with(&c.grpc[0], with(None, None)).await;
        let e = plain.map(|_| ()).expect_err("plaintext must not work");
        // The daemon closes it at the TLS handshake: the client sees the
        // connection fail, as a transport, HTTP/2 or cancelled-call error
        // depending on when the close lands; never as a daemon's answer.
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
