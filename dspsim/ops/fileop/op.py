""":class:`FileOp`: an :class:`~dspsim.ops.base.Op` made from an op file's :class:`OpSpec`.

Everything a Python op gives, from the file: its table (``<op>.tile_bytes``,
``<op>.buffers`` with ``nbuffer``, and the file's ``[params]``), the variants (its schedules),
``requirements``, the refusals, the handler (:mod:`dspsim.ops.fileop.program`), the float64
reference (``[reference]``, else the passes' values in float64), the bounds
(:mod:`dspsim.ops.fileop.bounds`) and the search space of its tile and buffer keys.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops.base import Bounds, Op, Proc, check_tile_bytes
from dspsim.ops.fileop import bounds as fbounds
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.fileop.program import VARIANT_CODES, hb_dsp_fileop, hbDSPFileOpParam
from dspsim.ops.fileop.spec import OpSpec, Range
from dspsim.ops.rowwise import ramp_input
from dspsim.ops.softmax.reference import seed_input
from dspsim.schema import Key, OpSchema, Params
from dspsim.text import one_line

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

_NEEDS = {"direct": {"channels": 0, "banks": 0}, "pingpong": {"channels": 2, "banks": 2},
          "nbuffer": {"channels": 2, "banks": 1}}
_DESCRIBE = {
    "direct": "every pass's kernels read and write the host memory",
    "pingpong": "the seed's ping-pong frame: two TCM buffers on DataRAMs 0 and 1, two "
                "channels",
    "nbuffer": "the k-buffer frame: {buffers} buffers over the DataRAMs, inputs and outputs on "
               "separate channels",
}


def op_schema(spec: OpSpec) -> OpSchema:
    """The ``[<op>]`` table: the tile (and buffer count), then the file's params."""
    name = spec.name

    def ranged(key: str, r: Range, what: str, unit: str, **more: Any) -> Key:
        return Key(f"{name}.{key}", int, what, default=r.default, lo=r.lo, hi=r.hi, unit=unit,
                   **more)

    holds = ("; a tile holds whole rows" + (" or (pingpong) a 2-D block with its halo rows"
                                             if spec.block_cols is not None else "")
             if spec.ndim == 2 else "")
    keys = [ranged("tile_bytes", spec.tile, "bytes per TCM buffer (multiple of 4)" + holds,
                   "bytes", multiple=4)]
    if spec.buffers is not None:
        keys.append(ranged("buffers", spec.buffers, "nbuffer: TCM buffers of tile_bytes, round "
                           "robin over the DataRAMs", "buffers"))
    if spec.block_cols is not None:
        keys.append(ranged("block_cols", spec.block_cols, "pingpong: columns of a 2-D block, "
                           "moved by 2-D descriptors (0: whole rows)", "columns"))
    keys += [Key(f"{name}.{a}_memory", str, f"where the {role} array {a} lives: host (the "
                 "model's host.memory) or a memory of the model", default=spec.memories[a])
             for a, role in ((spec.input, "input"), (spec.output, "output"))]
    keys += [Key(f"{name}.{k}", float, f"a parameter of {spec.path}", default=v)
             for k, v in spec.params.items()]

    def check(p: Params, model: HardwareModel) -> None:
        check_tile_bytes(f"{name}.tile_bytes", p.tile_bytes, model)

    return OpSchema(name, tuple(keys), check=check)


class FileOp(Op):
    """An op declared in a TOML file (docs/reference.md, "Op files")."""

    def __init__(self, spec: OpSpec, allow_python: bool = False):
        self.spec = spec
        self.name = spec.name
        self.doc = spec.doc
        self.ndim = spec.ndim
        self.default_shape = spec.default_shape
        self.variants = {v: _DESCRIBE[v].format(buffers=f"{spec.name}.buffers")  # default first
                         for v in sorted(spec.variants, key=lambda v: v != spec.default_variant)}
        self.default_variant = spec.default_variant
        self.params = op_schema(spec)
        self.tile_key = f"{spec.name}.tile_bytes"
        self.tolerance = spec.tolerance
        self.reference_halo_rows = max(spec.halo, spec.reference.halo if spec.reference else 0)
        self._python = _python_reference(spec, allow_python)

    # ------------------------------------------------------------------ firmware
    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int
                    ) -> hbDSPFileOpParam:
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape
        return hbDSPFileOpParam(rows, cols, input_addr, VARIANT_CODES[variant])

    def handler(self, dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
        return hb_dsp_fileop(dsp, input, output, tm, self.spec)

    def requirements(self, variant: str) -> dict[str, int]:
        return dict(_NEEDS[variant])

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return ramp_input(shape) if len(shape) == 2 else seed_input(shape[0])

    # ------------------------------------------------------------------ refusals
    def checks_params(self, variant: str) -> bool:
        return variant != "direct"

    def key_variants(self, key: str) -> tuple[str, ...]:
        only = {f"{self.name}.buffers": ("nbuffer",), f"{self.name}.block_cols": ("pingpong",)}
        return only.get(key) or super().key_variants(key)

    def check_run(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        for a in (self.spec.input, self.spec.output):
            where = getattr(model.params(self.name), f"{a}_memory")
            if where != "host" and where not in model.memories:
                raise DspsimInputError(
                    f"{self.name}.{a}_memory = {where!r}: the model has no such memory; "
                    f"allowed: host, {', '.join(model.memories)}")
        why = variant != "direct" and fbounds.tile_refusal(self, model, variant, shape)
        if why:
            raise DspsimInputError(why)

    # ------------------------------------------------------------------ math
    def reference(self, x: np.ndarray, params: Params) -> np.ndarray:
        spec = self.spec
        x64 = np.asarray(x, np.float64)
        if self._python is not None:  # the file author's code: what it raises is one line
            given = x64.reshape(-1) if spec.ndim == 1 else x64  # a 1-D op's [n], not [1, n]
            try:
                out = np.asarray(self._python(given, params), np.float64)
            except Exception as e:  # noqa: BLE001 - any error of code dspsim did not write
                out = e
            if isinstance(out, Exception) or out.shape != given.shape:
                why = (f"{type(out).__name__}: {one_line(out)}" if isinstance(out, Exception)
                       else f"returned shape {out.shape}, expected {given.shape}")
                raise DspsimInputError(f"op file {spec.path}: [reference] python = "
                                       f"{spec.python!r}(x, params) failed: {why}")
            return out.reshape(x64.shape)
        env: dict[str, Any] = {spec.input: x64, "cols": float(x64.shape[-1])}
        env.update({k: float(getattr(params, k)) for k in spec.params})
        if spec.reference is not None:
            return np.broadcast_to(spec.reference.evaluate(env), x64.shape)
        for p in spec.passes:
            vals = np.broadcast_to(p.value.evaluate(env), env[p.reads].shape)
            if p.writes:
                env[p.writes] = vals
            if p.into:
                env[p.into] = ROW_REDUCTIONS[p.reduce_op](vals, axis=-1, keepdims=True)
        return env[spec.output]

    def has_reference(self) -> bool:
        return (self._python is not None or self.spec.reference is not None
                or all(p.value is not None for p in self.spec.passes))

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Params) -> dict[str, Any]:
        if self.has_reference():
            return super().output_summary(out, x, params)
        with np.errstate(invalid="ignore", over="ignore"):
            total = float(np.sum(out, dtype=np.float64))
        return {"sum": total, "nan_count": int(np.isnan(out).sum()),
                "inf_count": int(np.isinf(out).sum()), "max_rel_err": None,
                "max_abs_err": None, "wrong_count": 0}

    # ------------------------------------------------------------------ studies
    def bounds(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
        return fbounds.bounds(self, model, self.check_variant(variant),
                              self.shape_of(shape=shape))

    def search_space(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
                     ) -> dict[str, list]:
        return fbounds.search_space(self, model, self.check_variant(variant), tuple(shape))


def _python_reference(spec: OpSpec, allow: bool) -> Any:
    """The ``[reference] python`` function, imported only when the loader allows it."""
    if spec.python is None:
        return None
    if not allow:
        raise DspsimInputError(
            f"op file {spec.path}: [reference]: python = {spec.python!r} runs code from the "
            "file's author; allowed only with --allow-python (allow_python=True), else a "
            "value = \"...\" expression")
    module, _, func = spec.python.partition(":")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as e:
        raise DspsimInputError(f"op file {spec.path}: [reference]: python = {spec.python!r}: "
                               f"cannot import it ({type(e).__name__}: {e})") from None
    if not callable(fn):
        raise DspsimInputError(f"op file {spec.path}: [reference]: {spec.python!r} is not a "
                               "function")
    return fn
