"""Where the ranks are: set by the ``pld-pypto`` command line (or the
environment) before the program runs."""

import os
from dataclasses import dataclass, field


@dataclass
class Options:
    """How ``compiled(...)`` starts its ranks."""

    transport: str = field(default_factory=lambda: os.environ.get("PLD_TRANSPORT", "quic"))
    daemons: list = field(
        default_factory=lambda: [d for d in os.environ.get("PLD_DAEMONS", "").split(",") if d]
    )
    token: str = field(default_factory=lambda: os.environ.get("PLD_CLIENT_TOKEN") or None)
    timeout_s: float = field(default_factory=lambda: float(os.environ.get("PLD_TIMEOUT_S", "30")))
    checked: str = field(default_factory=lambda: os.environ.get("PLD_CHECKED", "off"))
    # A file for the embedded ranks' timeline (Chrome trace-event JSON).
    trace: str = field(default_factory=lambda: os.environ.get("PLD_TRACE") or None)


OPTIONS = Options()
