"""An op file's kernels: those it declares by their cost, registered as ``<op>.<pass>``, and
the check that a pass's ``value`` agrees with the registered kernels it names.

A declared kernel is a :class:`~dspsim.kernels.shapes.LoopShape` from the pass's cost and
numerics that evaluate its ``value`` in float32 (then a float32 ``max``, ``min`` or ``sum``
per row). A ``loop``: each iteration loads ``loads`` vectors of the input, ``table_loads`` of
local tables, stores ``stores`` and issues ``alu`` vector ALU operations; the last iteration is
predicated. After it, ``tail_ops`` dependent ALU operations (default: a reduction's tree,
``1 + log2(lanes)``, or none). ``lanes`` and ``call_overhead_cycles`` default to the core's
(:meth:`LoopShape.on`: the core as the loop sees it, in the run and the bounds alike).
``cycles_per_element = c``: a measured cost: one vector load (and store) per ``lanes``
elements, padded with one-ALU-op iterations to ``ceil(n c)``, each of II 1 on any core: a
call of ``n`` in TCM takes ``core.call_overhead_cycles + ceil(n c)`` cycles; against DDR each
vector load still stalls for its round trip.

The check: the kernels and the values run in float32 on a probe input (the op's default input
of a small shape), pass after pass; a value the kernels do not compute (within 1e-3 relative)
is refused in one line. A pass costed by ``loop`` or ``cycles_per_element`` computes its value
itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import KERNELS, Kernel, register
from dspsim.kernels.shapes import LoopShape
from dspsim.kernels.toolkit import F32, Segment, log2_lanes
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.fileop.program import pass_calls
from dspsim.ops.fileop.spec import LoopCost, PassSpec

if TYPE_CHECKING:
    from dspsim.ops.fileop.op import FileOp

PROBE_LANES = 16  # the probe's vector of float32 (the check's tolerance covers any order of sums)
PROBE_SHAPES = {1: (1000,), 2: (3, 100)}
AGREE_REL = 1e-3


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


def columns(env: dict[str, Any], rows_2d: bool) -> dict[str, Any]:
    """``env`` with each per-row scalar (one value per row of a batch) as a column, to be
    read beside a ``(rows, n)`` array."""
    if not rows_2d:
        return env
    return {k: np.asarray(v)[:, None] if np.ndim(v) == 1 else v for k, v in env.items()}


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


# ----------------------------------------------------------------------------- the check
def _disagree(op: FileOp, p: PassSpec, got: np.ndarray, want: np.ndarray, what: str) -> None:
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.nanmax(np.abs(want64))) if want64.size else 0.0, 1e-30)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isclose(got64, want64, rtol=AGREE_REL, atol=AGREE_REL * 1e-3 * scale)
                | (np.isnan(got64) & np.isnan(want64)))
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        names = ", ".join(u.name for u in p.kernels)
        raise DspsimInputError(
            f"op file {op.spec.path}: {p.label}: value {p.value.text!r} disagrees with its "
            f"kernels ({names}) on a probe input: {what} {i} is {got64.reshape(-1)[i]:.6g} by "
            f"the kernels, {want64.reshape(-1)[i]:.6g} by the value; allowed: the value the "
            "kernels compute, or no value")


def _call_kernels(op: FileOp, p: PassSpec, src: np.ndarray, dst: np.ndarray,
                  env: dict[str, Any]) -> Any:
    """The pass's kernels on ``src`` (writing ``dst``), as the run calls them; what the
    reducing one returns."""
    cur, result = src, None
    for k, kw in pass_calls(op.spec, p, env):
        with np.errstate(all="ignore"):
            out = k.compute(cur, dst if k.writes else None, PROBE_LANES, **kw)
        cur, result = (dst if k.writes else cur), (out if k.results else result)
    return result


def _probe_pass(op: FileOp, p: PassSpec, arrays: dict[str, np.ndarray], env: dict[str, Any]
                ) -> Any:
    """One pass on the probe: its kernels' result (and output), checked against its value."""
    src = arrays[p.reads].copy()
    dst = arrays[op.spec.output]
    result = _call_kernels(op, p, src, dst, env)
    if p.reduce_op and p.kernels:  # tiles combine their kernels' results by reduce.op
        h = src.shape[-1] // 2
        halves = [_call_kernels(op, p, part.copy(), np.zeros_like(part), env)
                  for part in (src[..., :h], src[..., h:])]
        whole = ROW_REDUCTIONS[p.reduce_op](np.stack(halves, axis=-1), axis=-1)
        if not np.allclose(np.asarray(result, np.float64), whole, rtol=AGREE_REL):
            names = ", ".join(u.name for u in p.kernels)
            raise DspsimInputError(
                f"op file {op.spec.path}: {p.label}: reduce.op = {p.reduce_op!r}, but what its "
                f"kernels ({names}) return for a row is not the {p.reduce_op} of what they "
                "return for its halves (a probe input), so the variants would differ; allowed: "
                "the reduction its kernels compute (max, min or sum)")
    if p.loop is None and p.value is not None:
        seen = {**columns(env, src.ndim == 2), p.reads: src}
        want = np.broadcast_to(p.value.evaluate(seen), src.shape)
        if p.writes:
            _disagree(op, p, dst, want, "element")
        if p.reduce_op:
            _disagree(op, p, result, ROW_REDUCTIONS[p.reduce_op](want, axis=-1), "row")
    return result


def check_kernels_agree(op: FileOp) -> None:
    """Run the passes on the probe input; refuse a value its kernels do not compute, and a
    pass the probe cannot run (one line)."""
    spec = op.spec
    x = op.default_input(PROBE_SHAPES[spec.ndim])
    arrays = {spec.input: x, spec.output: np.zeros_like(x)}
    env: dict[str, Any] = {"cols": F32(x.shape[-1]), **{k: F32(v) for k, v in
                                                         spec.params.items()}}
    for p in spec.passes:
        try:
            result = _probe_pass(op, p, arrays, env)
        except (ValueError, TypeError, ArithmeticError) as e:
            if isinstance(e, DspsimInputError):
                raise
            raise DspsimInputError(
                f"op file {spec.path}: {p.label}: the pass fails on a probe input "
                f"({type(e).__name__}: {' '.join(str(e).split())[:200]}); allowed: values "
                "and kernel arguments of the shapes the pass reads") from None
        if p.into:
            env[p.into] = result
