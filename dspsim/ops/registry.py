"""The op registry (every operator dspsim can run) and the DSP firmware's command table
(``hb_dsp_register_fn(cmd, handler, latency)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dspsim.errors import DspsimInputError
from dspsim.ops.base import REQUIRED_ATTRIBUTES, REQUIRED_METHODS, Op
from dspsim.schema import register_op_params

OPS: dict[str, Op] = {}
CUSTOM_CMD_FIRST = 0x8001  # custom commands from here (0x1400-0x1405 are the built-in ones)
_DEFAULT: list[str] = []  # the op commands run when none is named


def register_op(op: Op, default: bool = False) -> Op:
    """Make an operator runnable: its parameter table, its command, its name; ``default``: the
    op commands run when none is named. An op whose ``cmd`` is None is allotted the first free
    custom command; a command another op holds is refused."""
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(op, a)] + [
        m for m in REQUIRED_METHODS if getattr(type(op), m) is getattr(Op, m)]
    if missing:
        raise ValueError(f"op {getattr(op, 'name', op)!r} does not give {', '.join(missing)} "
                         "(what every op must give: dspsim.ops.base.REQUIRED)")
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    if op.cmd is None:  # the firmware's next free custom command
        op.cmd = next(c for c in range(CUSTOM_CMD_FIRST, 0x10000)
                      if all(o.cmd != c for o in OPS.values()))
    if type(op.cmd) is not int or not 0 <= op.cmd <= 0xFFFF:  # the firmware's table's range
        raise ValueError(f"op {op.name!r}: command {op.cmd!r}; allowed: an integer 0x0 to "
                         "0xffff, or cmd = None and the registry allots a free one")
    taken = [o.name for o in OPS.values() if o.cmd == op.cmd]
    if taken:
        raise ValueError(f"op {op.name!r}: command 0x{op.cmd:x} is taken by {taken[0]!r}; "
                         "leave cmd = None and the registry allots a free one")
    register_op_params(op.params, op.idle_key)
    OPS[op.name] = op
    if default:
        _DEFAULT[:] = [op.name]
    return op


def get_op(name: str) -> Op:
    try:
        return OPS[name]
    except (KeyError, TypeError):
        raise DspsimInputError(f"unknown op {name!r}; allowed: {', '.join(OPS)}") from None


def op_names() -> list[str]:
    return list(OPS)


def default_op() -> str:
    """The op a command runs when none is named (the seed's), else the first registered."""
    return _DEFAULT[0] if _DEFAULT else next(iter(OPS))


@dataclass(frozen=True)
class RegisteredOp:
    """A command of the firmware's table."""

    cmd: int
    handler: Callable  # handler(dsp, input: Ptr, output: Ptr, tm) -> generator
    latency_us: int  # the op's latency hint, 0 when unknown


class Registry(dict[int, RegisteredOp]):
    """The firmware's command table: ``hb_dsp_register_fn`` fills it (with the commands
    :func:`register_op` checked), the RPC looks a command up."""

    def register_fn(self, cmd: int, handler: Callable, latency: int = 0) -> int:
        self[cmd] = RegisteredOp(cmd, handler, latency)
        return 0

    def lookup(self, cmd: int) -> RegisteredOp:
        if cmd not in self:
            known = ", ".join(f"0x{c:x}" for c in sorted(self)) or "none"
            raise DspsimInputError(f"no op registered for command 0x{cmd:x}; registered: {known}")
        return self[cmd]


def _entry(op: Op) -> Callable:
    """The handler the firmware calls: the op's C, with its parameters as its globals."""

    def handler(dsp, input, output, tm):
        dsp.params = dsp.model.params(op.name)
        dsp.channel_map = None
        return (yield from op.handler(dsp, input, output, tm))

    return handler


def firmware_registry() -> Registry:
    """What the DSP image registers before ``hb_dsp_start``: every registered op."""
    registry = Registry()
    for op in OPS.values():
        registry.register_fn(op.cmd, _entry(op), op.latency_us)
    return registry
