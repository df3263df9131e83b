"""``pypto.ir.distributed_compiled_program``: the distributed config."""

from dataclasses import dataclass, field


@dataclass
class DistributedConfig:
    """``DistributedConfig(device_ids=[...], num_sub_workers=0)``: one rank
    per device id, in order."""

    device_ids: list = field(default_factory=lambda: [0, 1])
    num_sub_workers: int = 0
