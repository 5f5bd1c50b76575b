"""A run's engines as the analyses see them: the op's core, its iDMA channels (numbered by
position, ``iDMA ch0``, as the op's C and its waits, ``ch1 #7``, number them), the memories'
ports, and their labels, named by the run (``Result.engines``) or read off its trace alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

CORE_KINDS = ("compute", "setup", "wait_in", "wait_out")  # what the core's trace rows do
COPY_KINDS = ("copy_in", "copy_out")  # what a channel's trace rows do
CHANNEL_KIND = "idma"
PORT_KIND = "ddr"


def _natural(name: str) -> list[Any]:
    """Sort key: digit runs compare as numbers (``x2`` before ``x10``)."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", name) if t]


@dataclass(frozen=True)
class RunEngines:
    """The engines of one run by role."""

    core: str | None  # the op's core; None: whatever engine the core's rows name
    channels: tuple[str, ...] = ()  # iDMA channels; a channel's number is its position
    ports: tuple[str, ...] = ()  # every memory's port (J6: ddr), named as its memory
    core_label: str = ""  # the core's lane and thread label (its kind)

    @classmethod
    def of(cls, result: Any) -> RunEngines:
        """The run's own names (a result without them: read off its trace)."""
        engines = getattr(result, "engines", None) or {}
        if result.core not in engines:
            trace = getattr(result, "trace_table", None)
            if trace is None:
                trace = getattr(result, "trace", None)
            return cls.from_trace(trace if trace is not None else {"engine": [], "kind": []})
        return cls(core=result.core, core_label=engines[result.core],
                   channels=tuple(n for n, k in engines.items() if k == CHANNEL_KIND),
                   ports=tuple(n for n, k in engines.items() if k == PORT_KIND))

    @classmethod
    def from_trace(cls, trace: Any) -> RunEngines:
        """Roles read off a trace alone (a DataFrame or a TraceTable); channels numbered in
        name order."""
        engine = np.asarray(trace["engine"], dtype=object)
        kind = np.asarray(trace["kind"], dtype=object)
        cores = list(dict.fromkeys(engine[np.isin(kind, CORE_KINDS)]))
        copiers = set(engine[np.isin(kind, COPY_KINDS)]) - set(cores)
        return cls(core=cores[0] if len(cores) == 1 else None,
                   channels=tuple(sorted(copiers, key=_natural)))

    def core_mask(self, trace: Any) -> np.ndarray:
        """Which rows of a trace (DataFrame or TraceTable) are the op's core's."""
        if self.core is None:
            return np.isin(np.asarray(trace["kind"], dtype=object), CORE_KINDS)
        return np.asarray(trace["engine"], dtype=object) == self.core

    def number(self, channel: str) -> int:
        """A channel's number: its position among the run's channels."""
        return self.channels.index(channel)

    def label(self, engine: str) -> str:
        """How a lane or a trace thread names an engine."""
        if engine == self.core:
            return self.core_label or engine
        if engine in self.channels:
            return f"iDMA ch{self.number(engine)}"
        return engine


def memory_label(name: str) -> str:
    """How figures and texts name a memory: its name in capitals (``ddr`` -> ``DDR``)."""
    return name.upper()


def shape_text(shape: Any) -> str:
    """``n = 100,000`` for a vector, ``shape 64x1,024`` for more dimensions."""
    dims = [f"{int(d):,}" for d in shape]
    return f"n = {dims[0]}" if len(dims) == 1 else "shape " + "x".join(dims)
