"""The client plane over TLS: a ``--grpc-tls`` daemon, verified against the
cluster's CA."""

import os

import pytest

from conftest import Cluster
from pld_client import Client, PldError


@pytest.fixture(scope="module")
def tls_cluster():
    c = Cluster(2, extra=("--grpc-tls",))
    yield c
    c.stop()


def ca_of(cluster) -> bytes:
    with open(os.path.join(cluster.tls_dir, "ca.pem"), "rb") as f:
        return f.read()


def test_a_client_that_trusts_the_cluster_ca_works_over_tls(tls_cluster):
    c = Client(tls_cluster.grpc[0], tls_ca=ca_of(tls_cluster))
    c.put(1, 0, b"over tls")
    assert c.get(1, 0, 8) == b"over tls"
    c.close()


def test_plaintext_a_foreign_ca_and_a_wrong_name_are_refused_each_for_its_reason(tls_cluster, tmp_path):
    import grpc
    import subprocess

    from conftest import daemon_bin

    # Plaintext to a TLS port: the daemon closes it at the handshake.
    with pytest.raises(PldError) as e:
        Client(tls_cluster.grpc[0], wait_ready=0)
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert "Socket closed" in e.value.message or "Connection reset" in e.value.message, e.value.message
    # A CA of another cluster: the daemon's certificate does not verify.
    subprocess.run([daemon_bin(), "certs", "--ranks", "1", "--out", str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    foreign = (tmp_path / "ca.pem").read_bytes()
    with pytest.raises(PldError) as e:
        Client(tls_cluster.grpc[0], wait_ready=0, tls_ca=foreign)
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert "Tls handshake failed" in e.value.message and "certificate" in e.value.message, e.value.message
    # The right CA, a name the certificate does not carry.
    with pytest.raises(PldError) as e:
        Client(tls_cluster.grpc[0], wait_ready=0, tls_ca=ca_of(tls_cluster), tls_domain="rank-9.elsewhere")
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert "Hostname Verification Check failed" in e.value.message, e.value.message
