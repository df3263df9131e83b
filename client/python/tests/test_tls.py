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


def test_plaintext_and_a_wrong_name_are_refused(tls_cluster):
    with pytest.raises(PldError):
        Client(tls_cluster.grpc[0], wait_ready=0)
    with pytest.raises(PldError):
        Client(tls_cluster.grpc[0], wait_ready=0, tls_ca=ca_of(tls_cluster),
               tls_domain="rank-9.elsewhere")
