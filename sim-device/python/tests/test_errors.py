"""Each kind of device error reaches Python as its own exception class —
``pld_pypto.errors.<Kind>`` (``pld.errors.<Kind>`` in a program), a
subclass of ``PldError`` — one test per kind, each provoking its error
through the native calls the shim makes; and a failed kernel fails its
run with the same class, its message naming the rank and the line."""

import signal
import textwrap
import threading

import pytest

from conftest import pause, run, running_daemons
from pld_pypto import PldError, _native, errors

F32 = "fp32"
VIEW = (0, [16, 64], F32)  # buffer 0, 4 KiB
SIG = (0, [2, 1], "int32")  # a barrier signal of two ranks


@pytest.fixture
def cluster():
    c = _native.Cluster(2, timeout_s=0.5)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def ranks(cluster):
    r0, r1 = cluster.ranks()
    for r in (r0, r1):
        r.alloc_window_buffer("b", 4096)
    return r0, r1


def row(n=64):
    return (b"\0" * (4 * n), [1, n])


def test_every_kind_is_a_pld_error_subclass_with_a_test_here():
    separate = {"SignalInUse", "Race", "Races", "OpTimeout", "PeerLost", "QuietTimeout", "Rma"}
    assert set(errors.ERROR_KINDS) == set(KINDS) | separate
    for name in errors.ERROR_KINDS:
        cls = getattr(errors, name)
        assert issubclass(cls, PldError) and cls is not PldError, name
        assert cls.__name__ == name and cls.__module__ == "pld_pypto.errors"


# kind: what provokes it, given (rank 0, rank 1, the cluster).
KINDS = {
    "NotDistributed": lambda r0, r1, c: r0.need_distributed("get_comm_ctx", row(), "x"),
    "OutOfBounds": lambda r0, r1, c: r0.load(VIEW, [16, 0], [1, 64]),
    "DtypeMismatch": lambda r0, r1, c: r0.defer_wait(VIEW, [0, 0], 1, "Ge"),
    "ShapeMismatch": lambda r0, r1, c: r0.collective("all_to_all", VIEW, SIG, data=row()[0], shape=[1, 64]),
    "TileOverCapacity": lambda r0, r1, c: r0.tile_from(b"", [64, 1024], [64, 1024], F32),
    "MisalignedTile": lambda r0, r1, c: r0.tile_from(b"", [1, 10], [1, 10], F32),
    "PipelineWithoutChunks": lambda r0, r1, c: r0.put(VIEW, 1, *row(), pipeline=True),
    "ChunkSizeAlone": lambda r0, r1, c: r0.put(VIEW, 1, *row(), chunk_rows=1),
    "OffsetsWithoutShape": lambda r0, r1, c: r0.put(VIEW, 1, *row(), region=([0, 0], None, None)),
    "TooLargeForRemoteStore": lambda r0, r1, c: r0.remote_store(
        (b"\0" * (4 * 64 * 1024), [64, 1024]), VIEW, 1, [0, 0], False),
    "WindowFull": lambda r0, r1, c: r0.alloc_window_buffer("big", 1 << 40),
    "PeerOutOfRange": lambda r0, r1, c: r0.remote_load(VIEW, 5, [0, 0], [1, 64]),
    "SignalShape": lambda r0, r1, c: r0.barrier((0, [1, 1], "int32")),
    "AsymmetricAlloc": lambda r0, r1, c: (r0.alloc_window_buffer("c", 256), r1.alloc_window_buffer("c", 512)),
    "MissingAlloc": lambda r0, r1, c: (r0.alloc_window_buffer("c", 256), c.check_symmetric()),
    "ViewTooLarge": lambda r0, r1, c: r0.check_view((0, [64, 64], F32)),
    "NotRectangular": lambda r0, r1, c: r0.load_nd((0, [2, 8, 64], F32), [0, 1, 0], [2, 2, 64]),
    "MisalignedRemoteStore": lambda r0, r1, c: r0.remote_store((b"\0" * 40, [1, 10]), VIEW, 1, [0, 0], False),
    "TooLarge": lambda r0, r1, c: r0.tile_from(b"", [1 << 62, 1 << 62], [1, 1], F32),
    "Usage": lambda r0, r1, c: r0.tile_from(b"\0" * 4, [1, 8], [1, 8], F32),
    "WaitTimeout": lambda r0, r1, c: r0.wait((0, [1, 8], "int32"), [0, 0], 1, "Eq"),
    "BarrierTimeout": lambda r0, r1, c: r0.barrier(SIG),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_error_is_raised_as_its_kind(cluster, ranks, kind):
    with pytest.raises(getattr(errors, kind)) as e:
        KINDS[kind](*ranks, cluster)
    assert isinstance(e.value, PldError)
    # Only the kind's own class matches it.
    others = [k for k in errors.ERROR_KINDS if k != kind and isinstance(e.value, getattr(errors, k))]
    assert not others, (kind, others, str(e.value))


def test_a_signal_in_use_by_a_concurrent_collective_is_its_own_kind(cluster, ranks):
    r0, _ = ranks
    raised = []

    def barrier():
        try:
            r0.barrier(SIG)
        except PldError as e:
            raised.append(type(e).__name__)

    threads = [threading.Thread(target=barrier) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Rank 1 never arrives: one call holds the signal until its deadline,
    # the other is refused at once.
    assert sorted(raised) == ["BarrierTimeout", "SignalInUse"], raised


def test_a_racing_access_in_strict_checked_mode_is_a_race():
    c = _native.Cluster(2, timeout_s=2.0, checked="strict")
    try:
        r0, r1 = c.ranks()
        for r in (r0, r1):
            r.alloc_window_buffer("b", 4096)
        t = r1.tile_from(row()[0], [1, 64], [1, 64], F32)
        r1.remote_store(t, VIEW, 0, [0, 0], False)
        # Rank 0 reads what rank 1 wrote, with no barrier between.
        with pytest.raises(errors.Race):
            r0.load(VIEW, [0, 0], [1, 64])
    finally:
        c.close()


@pytest.fixture
def tcp_daemons():
    """Two daemons over TCP with a 1 s op timeout and a client token."""
    with running_daemons(2, "--transport", "tcp", "--op-timeout", "1s", "--client-token", "s3cret") as d:
        yield d


def client_cluster(grpc, token="s3cret"):
    c = _native.Cluster(2, daemons=grpc, token=token)
    r0 = c.ranks()[0]
    r0.alloc_window_buffer("b", 4096)
    return c, r0


def test_a_peer_that_does_not_answer_is_an_op_timeout(tcp_daemons):
    procs, grpc = tcp_daemons
    c, r0 = client_cluster(grpc)
    try:
        pause(procs[1])
        try:
            with pytest.raises(errors.OpTimeout):
                r0.remote_load(VIEW, 1, [0, 0], [1, 64])
        finally:
            procs[1].send_signal(signal.SIGCONT)
    finally:
        c.close()


def test_a_quiet_that_an_unanswered_op_outlives_is_a_quiet_timeout(tcp_daemons):
    procs, grpc = tcp_daemons
    c, r0 = client_cluster(grpc)
    pause(procs[1])
    try:
        # What the load raised, seen here: an exception in a thread is not
        # the test's, so the thread records it.
        raised = []

        def unanswered_load():
            try:
                r0.remote_load(VIEW, 1, [0, 0], [1, 64])
                raised.append("returned")
            except PldError as e:
                raised.append(type(e).__name__)

        load = threading.Thread(target=unanswered_load)
        load.start()
        # Until the load is out (then for its 1 s), a short quiet waits for it.
        caught = None
        while caught is None and load.is_alive():
            try:
                r0.quiet(timeout_s=0.1)
            except errors.QuietTimeout as e:
                caught = e
        load.join()
        assert raised == ["OpTimeout"], raised
        assert caught is not None, "no quiet saw the unanswered load"
        assert "get" in str(caught), str(caught)
    finally:
        procs[1].send_signal(signal.SIGCONT)
        c.close()


def test_a_peer_that_died_is_peer_lost(tcp_daemons):
    procs, grpc = tcp_daemons
    c, r0 = client_cluster(grpc)
    try:
        procs[1].kill()
        procs[1].wait()
        with pytest.raises(errors.PeerLost):
            r0.remote_load(VIEW, 1, [0, 0], [1, 64])
    finally:
        c.close()


def test_any_other_failure_of_the_rank_is_rma(tcp_daemons):
    _, grpc = tcp_daemons
    # The daemons want a client token; this cluster has none.
    with pytest.raises(errors.Rma) as e:
        _native.Cluster(2, daemons=grpc)
    message = str(e.value)
    assert "[UNAUTHENTICATED]" in message, message
    assert "the call carries no client token" in message, message


PROGRAM = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto.ir.distributed_compiled_program import DistributedConfig
    from pypto.runtime import RunConfig


    @pl.jit.incore
    def kernel(data, signal):
        ctx = pld.get_comm_ctx(data)
        {body}


    @pl.jit.host
    def host():
        data_buf = pld.alloc_window_buffer([8, 64], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([2, 8], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [8, 64], dtype=pl.FP32)
            signal = pld.window(signal_buf, [2, 8], dtype=pl.INT32)
            kernel(data, signal, device=r)


    cfg = RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
    try:
        host.compile(config=cfg)(config=cfg)
    except pld.errors.{kind} as e:
        print("caught", type(e).__name__, "|", e)
''')


def test_a_program_catches_a_failed_run_by_its_kind_and_the_message_names_rank_and_line(tmp_path):
    body = "if pld.rank(ctx) == 0:\n        pld.wait(signal, [0, 0], 1, pld.WaitCmp.Eq)"
    script = tmp_path / "wait.py"
    script.write_text(PROGRAM.format(body=body, kind="WaitTimeout"))
    r = run(script, "--timeout", "0.5")
    assert r.returncode == 0, r.stderr
    assert "caught WaitTimeout | rank 0 failed at " in r.stdout, r.stdout
    assert "wait.py" in r.stdout and "pld.wait(signal" in r.stdout, r.stdout


def test_races_found_in_checked_mode_are_caught_as_races(tmp_path):
    # Both ranks store into rank 0's first row; nothing orders them.
    body = ("t = pl.load(data, [0, 0], [1, 64])\n"
            "    pld.tile.remote_store(t, data, peer=0, offsets=[0, 0])")
    script = tmp_path / "race.py"
    script.write_text(PROGRAM.format(body=body, kind="Races"))
    r = run(script, "--checked")
    assert r.returncode == 0, r.stderr
    assert "caught Races | checked: " in r.stdout, r.stdout
