"""The DSP firmware's op table: ``hb_dsp_register_fn(cmd, handler, latency)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dspsim.errors import DspsimInputError


@dataclass(frozen=True)
class RegisteredOp:
    cmd: int
    handler: Callable  # handler(dsp, input: Ptr, output: Ptr, tm) -> generator
    latency_us: int  # the op's latency hint, 0 when unknown


class Registry:
    def __init__(self) -> None:
        self._ops: dict[int, RegisteredOp] = {}

    def register_fn(self, cmd: int, handler: Callable, latency: int = 0) -> int:
        if not 0 <= cmd <= 0xFFFF:
            raise DspsimInputError(f"command 0x{cmd:x}: allowed 0x0 to 0xffff")
        self._ops[cmd] = RegisteredOp(cmd, handler, latency)
        return 0

    def lookup(self, cmd: int) -> RegisteredOp:
        if cmd not in self._ops:
            known = ", ".join(f"0x{c:x}" for c in sorted(self._ops)) or "none"
            raise DspsimInputError(f"no op registered for command 0x{cmd:x}; registered: {known}")
        return self._ops[cmd]


def firmware_registry() -> Registry:
    """What the DSP image registers before ``hb_dsp_start``."""
    from dspsim.ops.softmax import SOFTMAX_CMD, hb_dsp_softmax

    registry = Registry()
    registry.register_fn(SOFTMAX_CMD, hb_dsp_softmax, 0)
    return registry
