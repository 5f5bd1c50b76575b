"""Ops declared in a TOML file (docs/reference.md, "Op files"): "how many cycles will MY kernel
and tiling take?" without a Python package. :func:`load_op_file` reads and checks the file
(``spec.py``, expressions ``expr.py``), registers and checks the kernels it declares and its
:class:`FileOp`; then every command knows the op by name. Worker processes load the files their
parent loaded (``DSPSIM_OP_FILES``).

:class:`FileOp` gives everything a Python op gives, from the file: its table
(``<op>.tile_bytes``, ``<op>.buffers`` with ``nbuffer``, the file's ``[params]``), variants
(its schedules), refusals, the handler (passes, 2-D blocks and declared kernels:
``program.py``), the float64 reference (``[reference]``, else the passes' values in float64),
bounds and search space (``bounds.py``).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import KERNELS
from dspsim.ops.base import Bounds, Op, Proc, check_tile_bytes
from dspsim.ops.fileop import bounds as fbounds
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.fileop.program import (
    VARIANT_CODES,
    check_kernels_agree,
    hb_dsp_fileop,
    hbDSPFileOpParam,
    register_pass_kernel,
)
from dspsim.ops.fileop.spec import OpSpec, Range, read_spec, read_text
from dspsim.ops.registry import OPS, register_op
from dspsim.ops.rowwise import ramp_input
from dspsim.ops.softmax.reference import seed_input
from dspsim.schema import OP_KEY_IDLE, OP_SCHEMAS, Key, OpSchema, Params
from dspsim.text import one_line

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

__all__ = ["FileOp", "OpSpec", "load_op_file", "load_op_files", "loaded_op_files",
           "op_file_digest", "unload_op_file"]

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


# resolved path -> (the file's text, the op's name, whether python was allowed)
_LOADED: dict[str, tuple[str, str, bool]] = {}
ENV_VAR = "DSPSIM_OP_FILES"  # the files a command loaded, for the processes it starts


def load_op_file(path: str | Path, allow_python: bool = False) -> str:
    """Load and register the op of the op file at ``path``; return its name (the same again
    for the same file). ``allow_python``: let a ``[reference] python`` the file allows be
    imported. A bad file raises a one-line :class:`~dspsim.errors.DspsimInputError`."""
    if not isinstance(path, str | Path):
        raise DspsimInputError(f"op file {path!r}: expected a path")
    text = read_text(path)  # first: a bad path (a NUL byte) is its one line
    key = os.path.realpath(path)
    seen = _LOADED.get(key)
    if seen is not None and seen[0] == text and seen[2] >= allow_python:
        return seen[1]
    taken = {n: o for n, o in OPS.items() if seen is None or n != seen[1]}
    spec = read_spec(path, taken, text)
    if seen is not None:  # the file changed since, or python is newly allowed
        raise DspsimInputError(f"op file {path}: op {seen[1]!r} is already loaded from it "
                               "in this process (a changed file needs a new process)")
    register_op(build_op(spec, allow_python))
    _LOADED[key] = (text, spec.name, allow_python)
    _publish()
    return spec.name


def build_op(spec: OpSpec, allow_python: bool = False) -> FileOp:
    """The op of a checked spec, its declared kernels registered and its values checked
    against the kernels it names (not registered itself: :func:`load_op_file` does that)."""
    op = FileOp(spec, allow_python)
    for p in spec.passes:
        if p.loop is not None:
            register_pass_kernel(spec.name, p, spec.params)
    check_kernels_agree(op)
    return op


def _publish() -> None:
    os.environ[ENV_VAR] = os.pathsep.join(("!" if allowed else "") + path
                                          for path, (_, _, allowed) in _LOADED.items())


def op_file_digest(names: Iterable[str]) -> str | None:
    """A digest of what the op files declaring any of ``names`` declare (their TOML, comments
    and layout aside); None when none is a file's op."""
    names = set(names)
    decl = sorted((name, tomllib.loads(text)) for text, name, _ in _LOADED.values()
                  if name in names)
    return (hashlib.sha256(json.dumps(decl, sort_keys=True).encode()).hexdigest()[:12]
            if decl else None)


def loaded_op_files() -> list[str]:
    """The op files this process loaded (resolved paths), in order."""
    return list(_LOADED)


def load_op_files(paths: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Load op files (default: those a parent process listed in ``DSPSIM_OP_FILES``); return
    their ops' names."""
    if paths is None:  # "!" before a path: its python reference was allowed
        names = []
        for p in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
            seen = _LOADED.get(os.path.realpath(p.lstrip("!")))  # a forked worker has them
            names.append(seen[1] if seen else load_op_file(p.lstrip("!"), p.startswith("!")))
        return names
    return [load_op_file(p) for p in paths]


def unload_op_file(path: str | Path) -> None:
    """Forget the op loaded from ``path`` (its op, table and kernels), if any: for tests and
    notebooks that load a file again after editing it."""
    seen = _LOADED.pop(os.path.realpath(path), None)
    if seen is None:
        return
    name = seen[1]
    op = OPS.pop(name, None)
    OP_SCHEMAS.pop(name, None)
    OP_KEY_IDLE.pop(name, None)
    for p in op.spec.passes if op is not None else ():
        KERNELS.pop(f"{name}.{p.name}", None)
    _publish()
