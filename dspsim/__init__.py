"""dspsim: a discrete-event timing and float32 functional model of a vision-DSP subsystem.

The public API::

    import dspsim
    model = dspsim.load_model()                       # the packaged J6 model
    r = dspsim.simulate(model, op="softmax", variant="pingpong", n=100_000)
    r.cycles, r.busy_cycles, r.output
    dspsim.ops.get_op("layernorm").variants
    name = dspsim.load_op_file("my_op.toml")          # an op declared in TOML
    dspsim.simulate(model, op=name, variant="pingpong", n=65536)
"""

# the command line: Ctrl-C during the imports below is one line and exit 130 (dspsim.entry)
from dspsim.entry import stop_on_interrupt_while_starting

stop_on_interrupt_while_starting()

from dspsim import ops  # noqa: E402  (registers every operator)
from dspsim.config import HardwareModel, load_model  # noqa: E402
from dspsim.errors import (  # noqa: E402
    AllocationError,
    ConfigError,
    DeadlockError,
    DspsimInputError,
)
from dspsim.ops.fileop import load_op_file  # noqa: E402
from dspsim.run import Result, simulate  # noqa: E402
from dspsim.version import __version__  # noqa: E402

__all__ = [
    "AllocationError",
    "ConfigError",
    "DeadlockError",
    "DspsimInputError",
    "HardwareModel",
    "Result",
    "__version__",
    "load_model",
    "load_op_file",
    "ops",
    "simulate",
]
