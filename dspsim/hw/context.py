"""What every engine of one run shares, attached to the platform once.

Observers (the trace recorder, the access log, the warnings) and the run's switches (move
values, elide events, the fidelity, the port logs) live in one :class:`RunContext` that the
platform builds and hands to each engine it wires, the way ns.py attaches a monitor to a port,
instead of threading each through every constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from dspsim.probes import AccessLog, Labels, Recorder


@dataclass(eq=False)
class RunContext:
    env: simpy.Environment
    data: bool = True  # move values (the data path)
    elide: bool = True  # skip the events nothing else can observe (hw.clock)
    fidelity: str = "burst"  # burst | tile: the name asked for (one engine runs both)
    port_log: bool = False  # every memory port logs its requests (probes.PortLog)
    log_limit: int | None = None  # keep at most this many trace rows / port requests each
    recorder: Recorder = field(default_factory=lambda: Recorder(False))
    accesses: AccessLog = field(default_factory=AccessLog)
    warn: Callable[..., None] = lambda *args, **kwargs: None
    _labels: dict[str, Labels] = field(default_factory=dict)

    def labels(self, core: str) -> Labels:
        """The trace labels (pass, tile, buffer) of the op running on ``core``: the op sets
        them through its DSP, the core's engines stamp them on what they record."""
        return self._labels.setdefault(core, Labels())

    def describe(self) -> dict[str, Any]:
        return {"data": self.data, "elide": self.elide, "fidelity": self.fidelity}
