"""The client plane's replies never wait for a timer.

Two defects once made a remote op wait ~44 ms (issue 12): the gRPC port's
accepted sockets kept Nagle's algorithm on, so the last small write of a
reply waited for the client's delayed ACK; and over QUIC, MTU probes larger
than an IPv4 datagram were lost and held the congestion window until their
probe timeout. 200 sequential remote calls take ~0.1 s without them and
over 8 s with them: the bound below sits between, with room for a slow
machine.
"""

import pytest

from conftest import Cluster
from pld_client.bench import measure

ROUNDS = 200
#: The median call may take this long. A timer stall makes nearly every
#: call wait ~44 ms, so the median is at least that; load makes some calls
#: slow but not the median (a loaded two-core machine answers most calls
#: in a few ms), so the bound has a wide margin on both sides.
MEDIAN_BOUND_US = 20_000


@pytest.mark.parametrize("transport", ["quic", "tcp"])
def test_remote_calls_are_answered_without_waiting_for_a_timer(transport):
    c = Cluster(2, transport=transport)
    try:
        samples = measure(c.grpc[0], own=0, remote=1, rounds=ROUNDS)
    finally:
        c.stop()
    for call in ("check", "put_own", "put_remote", "get_own", "get_remote"):
        s = samples[call]
        assert len(s) == ROUNDS
        median = sorted(s)[len(s) // 2]
        assert median < MEDIAN_BOUND_US, (
            f"{ROUNDS} {call} calls over {transport}: median {median:.0f} us "
            f"(max {max(s):.0f} us): a reply waited for a timer"
        )
