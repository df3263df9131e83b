"""``pypto.runtime``: the run configuration. Every documented field of
PyPTO's ``RunConfig`` is accepted; on pld only ``platform`` (the device
profile) and ``distributed_config`` (the ranks) change what runs — the
code-generation, profiling and ring-sizing fields have no code generator
or NPU runtime to act on, and are kept as given."""

import warnings
from dataclasses import dataclass, field

from pld_pypto.worker import (  # noqa: F401
    DeviceTensor, DistributedWorker, RegistrationHandle, RunHandle, StackedDeviceTensor,
)


@dataclass
class RunConfig:
    """``RunConfig(platform=..., distributed_config=DistributedConfig(...), ...)``."""

    platform: str = "a2a3sim"
    device_id: int = 0
    rtol: float = 1e-5
    atol: float = 1e-5
    strategy: object = None
    backend_type: object = None
    dump_passes: object = False
    save_kernels: bool = False
    save_kernels_dir: object = None
    codegen_only: bool = False
    enable_chip_swimlane: object = 0
    enable_dump_args: int = 0
    enable_pmu: int = 0
    enable_dep_gen: bool = False
    enable_scope_stats: bool = False
    compile_profiling: bool = False
    diagnostic_phase: object = None
    disabled_diagnostics: object = None
    golden_data_dir: object = None
    aicpu_thread_num: object = None
    ring_task_window: object = None
    ring_heap: object = None
    ring_dep_pool: object = None
    distributed_config: object = None
    analyze_auto_scopes_for_deps: bool = False
    memory_planner: object = None
    dump_ptoas_passes: bool = False
    # The former spelling of enable_chip_swimlane.
    enable_l2_swimlane: object = None

    def __post_init__(self):
        if self.enable_l2_swimlane is not None:
            warnings.warn("enable_l2_swimlane is deprecated; use enable_chip_swimlane", DeprecationWarning, stacklevel=3)
            self.enable_chip_swimlane = self.enable_l2_swimlane
