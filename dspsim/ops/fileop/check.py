"""Whether a pass's ``value`` agrees with the registered kernels it names: both run in float32
on a probe input (the op's default input of a small shape), pass after pass; a value the
kernels do not compute (within 1e-3 relative) is refused in one line. A pass costed by
``loop`` or ``cycles_per_element`` computes its value itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.fileop.program import F32, pass_calls

if TYPE_CHECKING:
    from dspsim.ops.fileop.op import FileOp
    from dspsim.ops.fileop.spec import PassSpec

PROBE_LANES = 16  # the probe's vector of float32 (the check's tolerance covers any order of sums)
PROBE_SHAPES = {1: (1000,), 2: (3, 100)}
AGREE_REL = 1e-3


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


def columns(env: dict[str, Any], rows_2d: bool) -> dict[str, Any]:
    """``env`` with each per-row scalar (one value per row of a batch) as a column, to be
    read beside a ``(rows, n)`` array."""
    if not rows_2d:
        return env
    return {k: np.asarray(v)[:, None] if np.ndim(v) == 1 else v for k, v in env.items()}


def _probe_pass(op: FileOp, p: PassSpec, arrays: dict[str, np.ndarray], env: dict[str, Any]
                ) -> Any:
    """One pass on the probe: its kernels' result (and output), checked against its value."""
    src = arrays[p.reads].copy()
    dst = arrays[op.spec.output]
    cur, result = src, None
    for k, kw in pass_calls(op.spec, p, env):
        with np.errstate(all="ignore"):
            out = k.compute(cur, dst if k.writes else None, PROBE_LANES, **kw)
        if k.writes:
            cur = dst
        if k.results:
            result = out
    if p.reduce_op and p.kernels:  # tiles combine their kernels' results by reduce.op
        h = src.shape[-1] // 2
        halves = [_result(op, p, part, env) for part in (src[..., :h], src[..., h:])]
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


def _result(op: FileOp, p: PassSpec, src: np.ndarray, env: dict[str, Any]) -> Any:
    """What the pass's kernels return for ``src`` (their output kept apart)."""
    cur, dst, result = src.copy(), np.zeros_like(src), None
    for k, kw in pass_calls(op.spec, p, env):
        with np.errstate(all="ignore"):
            out = k.compute(cur, dst if k.writes else None, PROBE_LANES, **kw)
        cur, result = (dst if k.writes else cur), (out if k.results else result)
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
