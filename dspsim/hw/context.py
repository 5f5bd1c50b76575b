"""What every engine of one run shares, attached to the platform once.

Observers (trace recorder, access log, warnings) and the run's switches (move values, elide
events, fidelity, port logs) live in one :class:`RunContext` the platform hands each engine it
wires (as ns.py attaches a monitor to a port), not threaded through every constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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

