"""Operators: each a package under ``ops/`` owning everything about itself; registered here.

Adding an operator is one package (``ops/<name>/``) and one line below.
"""

from __future__ import annotations

from dspsim.ops.base import Op
from dspsim.ops.registry import OPS, default_op, get_op, op_names, register_op

__all__ = ["OPS", "Op", "default_op", "get_op", "op_names", "register_op"]

# The registrations: one line per op.
# isort: off
from dspsim.ops import softmax  # noqa: E402, F401
from dspsim.ops import layernorm  # noqa: E402, F401
from dspsim.ops import rmsnorm  # noqa: E402, F401
from dspsim.ops import copy  # noqa: E402, F401
from dspsim.ops import kernel  # noqa: E402, F401
from dspsim.ops import fc  # noqa: E402, F401
# isort: on
