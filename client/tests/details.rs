//! Errors a client can match on: each kind of daemon error arrives with a
//! `google.rpc.ErrorInfo` (reason and metadata) that the Rust client
//! exposes as [`pld_client::Detail`].

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::{Client, ClientOptions, Cmp, Code, Dtype, Error};
use pld_tests::{GrpcCluster, run};
use std::time::Duration;

fn detail(e: &Error) -> &pld_client::Detail {
    e.detail()
        .unwrap_or_else(|| panic!("no structured detail in {e}"))
}

#[test]
fn each_kind_of_error_carries_its_reason_and_values() {
    run(Duration::from_secs(120), async {
        let mut c = GrpcCluster::start(pld_server::TransportKind::Tcp, 2, &[]);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let (data, signal) = (cl.window("data").unwrap(), cl.window("signal").unwrap());
        let size = 16u64 << 20;

        // A range outside the window.
        let e = cl.put(1, data, size - 2, &[1, 2, 3]).await.unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        let d = detail(&e);
        assert_eq!(d.reason, "OUT_OF_BOUNDS");
        assert_eq!(
            (d.get("op"), d.get("rank"), d.get("window")),
            (Some("put"), Some("1"), Some("data"))
        );
        assert_eq!(
            (d.number("offset"), d.number("len"), d.number("size")),
            (Some(size - 2), Some(3), Some(size))
        );

        // A rank the cluster does not have.
        let e = cl.put(7, data, 0, &[1]).await.unwrap_err();
        let d = detail(&e);
        assert_eq!(d.reason, "NO_SUCH_RANK");
        assert_eq!((d.number("rank"), d.number("nranks")), (Some(7), Some(2)));

        // A malformed request: the field at fault, too.
        let e = cl
            .atomic_add(1, data, 2, Dtype::Fp32, &[0; 8])
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let d = detail(&e);
        assert_eq!(d.reason, "INVALID_GEOMETRY");
        assert_eq!(
            (d.get("call"), d.field.as_deref()),
            (Some("AtomicAdd"), Some("offset"))
        );

        // A single-cell atomic of a dtype it does not take.
        let e = cl.fetch_add(1, data, 0, Dtype::Fp32, 1).await.unwrap_err();
        let d = detail(&e);
        assert_eq!(d.reason, "UNSUPPORTED_DTYPE");
        assert_eq!(d.get("op"), Some("fetch_add"));

        // A wait that times out: the cell, the expected and last values.
        let e = cl
            .wait_within(signal, 8, Cmp::Eq, 5, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded);
        let d = detail(&e);
        assert_eq!(d.reason, "WAIT_TIMEOUT");
        assert_eq!(
            (
                d.get("window"),
                d.number("offset"),
                d.get("expected"),
                d.get("last")
            ),
            (Some("signal"), Some(8), Some("5"), Some("0"))
        );
        assert_eq!(d.get("cmp"), Some("CMP_EQ"));

        // A barrier nobody else enters: its epoch and the missing rank.
        let e = cl
            .barrier_within(Duration::from_millis(500))
            .await
            .unwrap_err();
        let d = detail(&e);
        assert_eq!(d.reason, "BARRIER_TIMEOUT");
        assert_eq!(d.number("epoch"), Some(1));
        assert_eq!(d.ranks("missing"), vec![1]);

        // A peer that is gone.
        c.daemon(1).kill();
        let e = cl.put(1, data, 0, b"gone").await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable);
        let d = detail(&e);
        // Over TCP the dead rank's connection is reset at once.
        assert_eq!(d.reason, "PEER_LOST", "{d:?}");
        assert_eq!(d.number("rank"), Some(1));
    });
}

#[test]
fn limits_and_credentials_carry_theirs() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            1,
            &["--client-token", "s3cret"],
        );
        // No token.
        let e = Client::connect_with(
            &c.grpc[0],
            ClientOptions {
                wait_ready: Duration::ZERO,
                ..ClientOptions::default()
            },
        )
        .await
        .map(|_| ())
        .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        assert_eq!(e.reason(), Some("UNAUTHENTICATED"));
        // Over the message limit (a raw call: the client itself streams).
        use tonic_types::StatusExt;
        let mut raw = pld_grpc::pld_client::PldClient::new(
            tonic::transport::Channel::from_shared(format!("http://{}", c.grpc[0]))
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
        let mut req = tonic::Request::new(pld_proto::v1::GetRequest {
            rank: 0,
            window: "data".into(),
            offset: 0,
            len: (4 << 20) + 1,
            region: None,
        });
        req.metadata_mut()
            .insert("authorization", "Bearer s3cret".parse().unwrap());
        let s = raw.get(req).await.unwrap_err();
        assert_eq!(s.code(), Code::ResourceExhausted);
        let info = s.get_details_error_info().expect("an ErrorInfo");
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("TOO_LARGE", "pld.v1")
        );
        assert_eq!(
            info.metadata.get("max").map(String::as_str),
            Some("4194304")
        );
    });
}
