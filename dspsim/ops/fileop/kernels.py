"""The kernels an op file declares by their cost, registered as ``<op>.<pass>``: a
:class:`~dspsim.kernels.shapes.LoopShape` from the declared loop, and numerics that evaluate
the pass's ``value`` in float32 (then a float32 ``max``, ``min`` or ``sum`` per row).

A ``loop``: each iteration loads ``loads`` vectors of the input, ``table_loads`` of local
tables, stores ``stores`` and issues ``alu`` vector ALU operations; the last iteration is
predicated. After it, ``tail_ops`` dependent ALU operations (default: a reduction's tree,
``1 + log2(lanes)``, or none). ``lanes`` and ``call_overhead_cycles`` default to the core's
(:meth:`LoopShape.on`: the core as the loop sees it, in the run and the bounds alike).

``cycles_per_element = c``: a measured cost: one vector load (and store) per ``lanes``
elements, padded with one-ALU-op iterations to ``ceil(n c)``, each of II 1 on any core: a
call of ``n`` in TCM takes ``core.call_overhead_cycles + ceil(n c)`` cycles; against DDR each
vector load still stalls for its round trip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dspsim.kernels.registry import KERNELS, Kernel, register
from dspsim.kernels.shapes import LoopShape
from dspsim.kernels.toolkit import F32, Segment, log2_lanes
from dspsim.ops.fileop.check import columns
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.fileop.spec import LoopCost, PassSpec


def loop_shape(name: str, cost: LoopCost, reduces: bool) -> LoopShape:
    """The loop shape of a declared loop (a reduction adds its tree after it)."""

    def segments(n: int, lanes: int) -> list[Segment]:
        vb = 4 * lanes
        per = cost.loads * lanes
        full, rest = divmod(n, per)
        segs: list[Segment] = [(full, (vb,) * cost.loads, (vb,) * cost.stores)]
        if rest:
            tail = tuple(max(0, min(vb, 4 * rest - i * vb)) for i in range(cost.loads))
            segs.append((1, tail, tail[:cost.stores]))
        if cost.cpe:
            pad = math.ceil(n * cost.cpe) - full - (1 if rest else 0)
            if pad > 0:
                segs.append((pad, (), ()))
        return segs

    def reduction_ops(lanes: int) -> int:
        if cost.tail_ops is not None:
            return cost.tail_ops
        return 1 + log2_lanes(lanes) if reduces else 0

    return LoopShape(name, data_loads=cost.loads, table_loads=cost.table_loads,
                     stores=cost.stores, alu_ops=cost.alu, segments=segments,
                     reduction_ops=reduction_ops, priming_loads=1, lanes=cost.lanes,
                     call_overhead_cycles=cost.call_overhead_cycles, ii=1 if cost.cpe else 0)


def pass_numerics(p: PassSpec) -> Callable[..., Any]:
    """``compute(src, dst, lanes, **scalars)``: the pass's value in float32, written to
    ``dst`` and/or reduced (a scalar for a 1-D call, one per row for a batch)."""
    value = p.value
    assert value is not None

    def compute(src: np.ndarray, dst: np.ndarray | None, lanes: int, **scalars: Any) -> Any:
        env = {**columns(scalars, src.ndim == 2), p.reads: np.asarray(src, F32)}
        vals = np.broadcast_to(value.evaluate(env, F32), src.shape)
        if dst is not None and p.writes:
            dst[...] = vals
        if p.reduce_op:  # float32 in, float32 sums
            with np.errstate(all="ignore"):
                r = ROW_REDUCTIONS[p.reduce_op](vals, axis=-1)
            return F32(r) if np.ndim(r) == 0 else r.astype(F32)
        return None

    return compute


def register_pass_kernel(op_name: str, p: PassSpec, params: dict[str, float]) -> None:
    """Register the kernel of a pass declared by its cost; its name ``<op>.<pass>``. As a
    microbenchmark (``--op kernel``) its scalars are the op's params' defaults, and 1 for
    the scalars earlier passes reduce into."""
    assert p.loop is not None and p.value is not None  # a cost needs a value (spec._cost)
    name = f"{op_name}.{p.name}"
    if name in KERNELS:
        return
    example = {k: F32(params.get(k, 1.0)) for k in p.value.names if k != p.reads}
    elementwise = bool(p.writes) and not p.reduce_op and not (p.value.shifts or p.value.halo)
    register(Kernel(name, loop_shape(name, p.loop, bool(p.reduce_op)), pass_numerics(p),
                    writes=bool(p.writes), results=1 if p.reduce_op else 0,
                    elementwise=elementwise,
                    example_args=lambda size: {**example, "cols": F32(size[-1])}
                    if "cols" in example else example))
