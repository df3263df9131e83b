"""``pypto.runtime``: the run configuration."""

from dataclasses import dataclass, field


@dataclass
class RunConfig:
    """``RunConfig(platform=..., distributed_config=DistributedConfig(...))``."""

    platform: str = "a2a3sim"
    distributed_config: object = None
    extra: dict = field(default_factory=dict)
