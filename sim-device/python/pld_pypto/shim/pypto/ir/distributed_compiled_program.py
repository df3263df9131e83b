"""``pypto.ir.distributed_compiled_program``: the distributed config, and
the compiled program's class (``ir.compile``'s result)."""

from dataclasses import dataclass, field

from pld_pypto.program import Compiled as DistributedCompiledProgram  # noqa: F401


@dataclass
class DistributedConfig:
    """``DistributedConfig(device_ids=[...], num_sub_workers=0, runtime=...,
    aicpu_thread_num=0)``: one pld rank per device id, in order. The
    runtime and thread fields name the NPU runtime's knobs; pld keeps them
    as given."""

    device_ids: list = field(default_factory=lambda: [0])
    num_sub_workers: int = 0
    runtime: str = "tensormap_and_ringbuffer"
    aicpu_thread_num: int = 0

    def __post_init__(self):
        ids = list(self.device_ids)
        if not ids:
            raise ValueError("DistributedConfig: device_ids must name at least one device")
        if len(set(ids)) != len(ids):
            raise ValueError(f"DistributedConfig: device_ids lists a device twice: {ids}")
        if self.num_sub_workers < 0 or self.aicpu_thread_num < 0:
            raise ValueError("DistributedConfig: num_sub_workers and aicpu_thread_num are counts (>= 0)")
        self.device_ids = ids
