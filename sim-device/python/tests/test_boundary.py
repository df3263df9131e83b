"""The Python-Rust boundary: every name Python passes for one of pld's
enums is parsed by the Rust parser of that enum, and an unknown name is
refused naming it (never taken for a default)."""

import pytest

from pld_pypto import PldError, _native


@pytest.fixture
def rank0():
    c = _native.Cluster(2)
    try:
        r0 = c.ranks()[0]
        r0.alloc_window_buffer("b", 256)
        yield r0
    finally:
        c.close()


SIGNAL = (0, [1, 8], "int32")


@pytest.mark.parametrize(
    "call, kind, name",
    [
        (lambda r: r.check_view((0, [1, 8], "float32")), "dtype", "float32"),
        (lambda r: r.tile_from(b"", [1, 8], [1, 8], "f32"), "dtype", "f32"),
        (lambda r: r.wait(SIGNAL, [0, 0], 1, "Equal"), "WaitCmp", "Equal"),
        (lambda r: r.defer_wait(SIGNAL, [0, 0], 1, "ge"), "WaitCmp", "ge"),
        (lambda r: r.notify(SIGNAL, 1, [0, 0], 1, "Add"), "NotifyOp", "Add"),
        (lambda r: r.collective("allreduce", SIGNAL, SIGNAL, op="Avg"), "ReduceOp", "Avg"),
        (lambda r: r.collective("allreduce", SIGNAL, SIGNAL, mode="tree"), "collective mode", "tree"),
        (lambda r: r.collective("all_reduce", SIGNAL, SIGNAL), "collective", "all_reduce"),
    ],
)
def test_an_unknown_name_is_refused_by_name(rank0, call, kind, name):
    with pytest.raises(ValueError) as e:
        call(rank0)
    assert f'unknown {kind} "{name}": expected one of ' in str(e.value), str(e.value)


def test_the_names_offered_are_the_rust_enums_names(rank0):
    with pytest.raises(ValueError) as e:
        rank0.wait(SIGNAL, [0, 0], 1, "Equal")
    assert str(e.value).endswith("expected one of Eq, Ne, Gt, Ge, Lt, Le"), str(e.value)
    with pytest.raises(ValueError) as e:
        rank0.check_view((0, [1, 8], "float32"))
    assert "fp32, fp16, bf16, int32, int16, int8, int64, fp64" in str(e.value), str(e.value)


def test_bf16_views_move_as_bf16(rank0):
    # bf16 is a dtype the device moves: the view keeps it (no int64 or
    # float32 stand-in).
    assert list(rank0.check_view((0, [1, 16], "bf16"))) == [1, 16]
    # As a signal: the device's own dtype error, naming bf16.
    with pytest.raises(PldError) as e:
        rank0.defer_wait((0, [1, 8], "bf16"), [0, 0], 1, "Ge")
    assert "'b' is bf16, but int32 is required" in str(e.value), str(e.value)
