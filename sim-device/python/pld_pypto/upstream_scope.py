"""PyPTO system tests that are out of scope on pld, and why: they assert
on what PyPTO's code generator writes (``compiled.output_dir /
"next_levels" / ...``, generated orchestration sources, DFX swimlane
files), not on what the program computes; or they drive the vendor's NPU
runtime library (``simpler``) by hand rather than run a PyPTO program.
pld runs programs; it generates no code and has no such runtime, so
neither exists. The plugin skips them, naming the reason;
``--pld-run-codegen-tests`` runs them anyway.

Keyed by test file (under ``tests/st/distributed/``) and test function;
``None`` means every test of the file."""

CODEGEN = "asserts on the code generator's output files (compiled.output_dir / ...); pld generates no code"
VENDOR_RUNTIME = (
    "drives the NPU runtime library by hand (simpler.Worker / TaskArgs, simpler_setup.torch_interop, "
    "compile_and_assemble of generated code); pld runs PyPTO programs, not that library"
)

# Tests of the vendor runtime library, by file and test function.
VENDOR = {
    "test_l3_manual.py": None,
    "test_l3_stacked_device_tensor.py": {"test_identity_inherited_source"},
}

OUT_OF_SCOPE = {
    # Each asserts `compiled.output_dir / "next_levels" / "builtin.tensor.<op>__..."` is a
    # directory before checking the results (the results part passes on pld).
    "test_l3_host_tensor_allreduce.py": {
        "test_host_tensor_allreduce", "test_host_tensor_allreduce_signal_reuse", "test_host_tensor_allreduce_max",
        "test_host_tensor_allreduce_fp16_arbitrary_lengths", "test_host_tensor_allreduce_fp16_reduce_ops",
    },
    "test_l3_host_tensor_allreduce_ring.py": {"test_host_tensor_allreduce_ring", "test_host_tensor_allreduce_ring_signal_reuse"},
    # test_host_tensor_allgather also reads the generated orchestration/host_orch.py.
    "test_l3_host_tensor_allgather.py": {"test_host_tensor_allgather", "test_host_tensor_allgather_signal_reuse"},
    "test_l3_host_tensor_all_to_all.py": {"test_host_tensor_all_to_all", "test_host_tensor_all_to_all_signal_reuse"},
    "test_l3_host_tensor_all_to_all_v.py": {"test_host_tensor_all_to_all_v"},
    "test_l3_host_tensor_barrier.py": {"test_host_tensor_barrier", "test_host_tensor_barrier_signal_reuse"},
    "test_l3_host_tensor_broadcast.py": {"test_host_tensor_broadcast", "test_host_tensor_broadcast_signal_reuse"},
    "test_l3_host_tensor_reduce_scatter.py": {
        "test_host_tensor_reduce_scatter", "test_host_tensor_reduce_scatter_signal_reuse",
    },
    # Per-rank DFX artefacts (dfx_outputs/rank{r}/d{k}/chip_swimlane_records.json).
    "test_l3_dfx_per_rank.py": None,
    # The generated per-orchestrator subdirectories.
    "test_l2_multi_orch.py": {"test_codegen_emits_per_orch_subdirs", "test_dispatch_surface"},
}


def reason(path, name):
    """Why the test ``name`` of file ``path`` is out of scope, or None."""
    base = path.rsplit("/", 1)[-1]
    for table, why in ((OUT_OF_SCOPE, CODEGEN), (VENDOR, VENDOR_RUNTIME)):
        if base in table and (table[base] is None or name in table[base]):
            return why
    return None
