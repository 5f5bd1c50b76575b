"""An op file read and checked (the format, key by key: docs/reference.md, "Op files"):
:func:`read_spec` gives an :class:`OpSpec` or raises one line naming the file, the table
(``[[pass]] 2 "exp_sum"``) and what is allowed.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import KERNELS
from dspsim.ops.fileop.expr import Expr, parse_expr

MAX_OP_FILE_BYTES = 1 << 20
SCHEDULES = ("direct", "pingpong", "nbuffer")
REDUCTIONS = ("max", "min", "sum")
BUILTIN = {"cols": "the row's length"}  # names every expression may read
ELEMENT_TYPES = ("float32",)
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# tables of a model file: an op may not take their names
TAKEN_SECTIONS = ("core", "idma", "tcm", "host", "dcache", "model", "base", "ddr")
TOP_KEYS = ("op", "params", "array", "pass", "schedules", "reference")
OP_KEYS = ("name", "doc", "ndim", "default_shape")
ARRAY_KEYS = ("name", "type", "shape", "role", "memory")
PASS_KEYS = ("name", "reads", "writes", "reduce", "value", "kernel", "loop",
             "cycles_per_element")
LOOP_KEYS = ("loads", "stores", "alu", "table_loads", "tail_ops", "lanes",
             "call_overhead_cycles")
# why an op file declares no temporary array, and what it writes instead
NO_TEMPORARIES = ("no temporary arrays: a pass reads one array and writes the output, which in "
                  "TCM is the tile itself (in place, 2-D included), so an intermediate is "
                  "written to the output and read by the next pass, or handed between the "
                  "kernels of one pass (kernel = [...]); what a later pass needs of the input "
                  "is a reduction's scalar or is recomputed from it")
SCHEDULE_KEYS = ("variants", "default", "tile_bytes", "buffers", "block_cols")
RANGE_KEYS = ("default", "min", "max")
REFERENCE_KEYS = ("value", "python", "allow_python", "tolerance")


@dataclass(frozen=True)
class KernelUse:
    """A registered kernel a pass calls, and its scalar arguments (expressions)."""

    name: str
    args: tuple[tuple[str, Expr], ...] = ()


@dataclass(frozen=True)
class LoopCost:
    """A ``loop`` cost (or ``cycles_per_element``, ``cpe`` > 0): the op registers the kernel."""

    loads: int = 1
    stores: int = 0
    alu: int = 1
    table_loads: int = 0
    tail_ops: int | None = None  # dependent ops after the loop (None: a reduction's tree)
    cpe: float = 0.0
    lanes: int | None = None  # float32 elements per vector (None: core.lanes_f32)
    call_overhead_cycles: int | None = None  # the call's fixed cost (None: the core's)


@dataclass(frozen=True)
class PassSpec:
    index: int
    name: str
    reads: str
    writes: str | None
    reduce_op: str | None
    into: str | None
    value: Expr | None
    kernels: tuple[KernelUse, ...]  # registered kernels, in order; empty with a loop cost
    loop: LoopCost | None

    @property
    def label(self) -> str:
        return f'[[pass]] {self.index} "{self.name}"'


@dataclass(frozen=True)
class Range:
    default: int
    lo: int
    hi: int


@dataclass(frozen=True)
class OpSpec:
    path: str
    name: str
    doc: str
    ndim: int
    default_shape: tuple[int, ...]
    params: dict[str, float]
    input: str
    output: str
    passes: tuple[PassSpec, ...]
    variants: tuple[str, ...]
    default_variant: str
    tile: Range
    buffers: Range | None
    reference: Expr | None = None
    python: str | None = None
    tolerance: tuple[float, float] | None = None
    halo: int = 0  # rows above and below a block its shift_rows reach (summed over passes)
    block_cols: Range | None = None  # a 2-D op without reductions: columns per 2-D block
    memories: dict[str, str] = field(default_factory=dict)  # array -> its default memory

    @property
    def shifts(self) -> bool:
        """A pass reads along the row (``shift``): a block must hold whole rows."""
        return any(p.value is not None and p.value.shifts for p in self.passes)


@dataclass(frozen=True)
class _Where:
    """The file's name, for one-line errors: ``FILE: TABLE: what; allowed: ...``."""

    path: str

    def error(self, table: str, what: str) -> DspsimInputError:
        return DspsimInputError(f"op file {self.path}: {table}: {what}")

    def table(self, raw: Any, table: str, allowed: tuple[str, ...],
              required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.error(table, f"expected a table, got {_show(raw)}")
        unknown = [k for k in raw if k not in allowed]
        if unknown:
            raise self.error(table, f"unknown key {unknown[0]!r}; allowed: {', '.join(allowed)}")
        missing = [k for k in required if k not in raw]
        if missing:
            raise self.error(table, f"missing key {missing[0]!r}; required: "
                             f"{', '.join(required)}")
        return raw

    def typed(self, raw: Mapping[str, Any], key: str, table: str, kind: Any, what: str,
              default: Any = None) -> Any:
        """``raw[key]``, refused unless a ``kind`` (a bool is no number); ``default`` if absent."""
        if key not in raw:
            return default
        v = raw[key]
        if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
            raise self.error(table, f"{key} = {_show(v)}: expected {what}")
        return v


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def read_text(path: str | Path) -> str:
    """The op file's text (a regular UTF-8 file of at most :data:`MAX_OP_FILE_BYTES`)."""
    from dspsim.paths import read_small_text

    return read_small_text(path, f"op file {str(path)!r}", MAX_OP_FILE_BYTES)


def read_spec(path: str | Path, taken: Mapping[str, Any], text: str | None = None) -> OpSpec:
    """The op file at ``path`` (its ``text`` if read already), checked; ``taken``: the
    registered ops' names."""
    shown = str(path)
    text = read_text(path) if text is None else text
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else f"not valid TOML ({e})"
        raise DspsimInputError(f"op file {shown}: {why}; see docs/reference.md, Op files"
                               ) from None
    return parse_spec(raw, shown, taken)


def parse_spec(raw: dict[str, Any], shown: str, taken: Mapping[str, Any]) -> OpSpec:
    w = _Where(shown)
    w.table(raw, "the file", TOP_KEYS, ("op", "array", "pass"))
    op = w.table(raw["op"], "[op]", OP_KEYS, ("name", "ndim"))
    name = _op_name(w, op, taken)
    ndim = w.typed(op, "ndim", "[op]", int, "1 or 2")
    if ndim not in (1, 2):
        raise w.error("[op]", f"ndim = {ndim}: allowed 1 (--n) or 2 (--shape ROWS,COLS)")
    shape = _default_shape(w, op, ndim)
    doc = w.typed(op, "doc", "[op]", str, "a one-line string", f"the op of {shown}")
    params = _params(w, raw.get("params", {}))
    inp, out, memories = _arrays(w, raw["array"], ndim)
    if clash := next((k for k in params if k in (inp, out)), None):
        raise w.error("[params]", f"{clash!r} is an array's name; allowed: another name")
    schedules = _schedules(w, raw.get("schedules", {}))
    passes = _passes(w, raw["pass"], inp, out, params, ndim)
    ref = _reference(w, raw.get("reference"), inp, params)
    halo, block_cols = _blocks(w, raw.get("schedules", {}), passes, ndim, schedules[0])
    taken_key = next((k for k in params if k in (f"{inp}_memory", f"{out}_memory")), None)
    if taken_key:
        raise w.error("[params]", f"{taken_key!r} is the key of an array's memory; allowed: "
                      "another name")
    return OpSpec(shown, name, " ".join(doc.split()), ndim, shape, params, inp, out, passes,
                  *schedules, *ref, halo=halo, block_cols=block_cols, memories=memories)


def _blocks(w: _Where, raw: dict[str, Any], passes: tuple[PassSpec, ...], ndim: int,
            variants: tuple[str, ...]) -> tuple[int, Range | None]:
    """The halo of the passes' ``shift_rows`` (their sum: each pass reads, in place, rows of
    the pass before it) and the ``block_cols`` range: 2-D blocks, for a 2-D op whose passes
    do not reduce (a row's reduction would see one block only)."""
    halo = sum(p.value.halo for p in passes if p.value is not None)
    reducing = next((p for p in passes if p.reduce_op), None)
    if halo and reducing is not None:
        raise w.error(reducing.label, "reduces in an op whose values read other rows "
                      "(shift_rows: its tiles are 2-D blocks, and a row's reduction would see "
                      "one block); allowed: no reduce, or no shift_rows")
    if halo and "nbuffer" in variants:
        raise w.error("[schedules]", "variants: nbuffer runs whole-row tiles, and shift_rows "
                      "needs 2-D blocks with a halo; allowed: direct, pingpong")
    if "block_cols" in raw and (ndim != 2 or reducing is not None):
        raise w.error("[schedules]", "block_cols: allowed only for a 2-D op whose passes do "
                      "not reduce (2-D blocks cut its rows)")
    if ndim != 2 or reducing is not None:
        return halo, None
    return halo, _range(w, raw.get("block_cols"), "block_cols", 0, 1 << 20, 0)


def _op_name(w: _Where, op: dict[str, Any], taken: Mapping[str, Any]) -> str:
    name = w.typed(op, "name", "[op]", str, "a name")
    if not NAME.fullmatch(name) or name in TAKEN_SECTIONS:
        raise w.error("[op]", f"name = {_show(name)}: allowed a lower-case letter, then up to "
                      "39 lower-case letters, digits or _, other than a hardware table's name "
                      f"({', '.join(TAKEN_SECTIONS)})")
    if name in taken:
        raise w.error("[op]", f"name = {name!r} is a registered op's; allowed: a name no op "
                      f"holds (registered: {', '.join(taken)})")
    return name


def _default_shape(w: _Where, op: dict[str, Any], ndim: int) -> tuple[int, ...]:
    shape = w.typed(op, "default_shape", "[op]", list, f"a list of {ndim} positive integers",
                    [100_000] if ndim == 1 else [1024, 256])
    if len(shape) != ndim or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0
                                 for d in shape):
        raise w.error("[op]", f"default_shape = {_show(shape)}: expected a list of {ndim} "
                      "positive integers" + (" ([n])" if ndim == 1 else " ([rows, cols])"))
    return tuple(shape)


def _params(w: _Where, raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise w.error("[params]", f"expected a table of numbers, got {_show(raw)}")
    out = {}
    for k in raw:
        if not NAME.fullmatch(k) or k in ("tile_bytes", "buffers", "block_cols", *BUILTIN):
            raise w.error("[params]", f"{k!r}: allowed a lower-case name other than "
                          "tile_bytes, buffers and block_cols (the schedules' keys) and cols "
                          "(the row's length)")
        out[k] = float(w.typed(raw, k, "[params]", int | float, "a number (its default)"))
    return out


def _arrays(w: _Where, raw: Any, ndim: int) -> tuple[str, str, dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise w.error("[[array]]", "expected [[array]] tables: one input and one output")
    dims = ["n"] if ndim == 1 else ["rows", "cols"]
    roles: dict[str, list[str]] = {"input": [], "output": []}
    memories: dict[str, str] = {}
    for i, a in enumerate(raw, 1):
        table = f"[[array]] {i}"
        a = w.table(a, table, ARRAY_KEYS, ("name", "shape", "role"))
        name = w.typed(a, "name", table, str, "a name")
        table = f'[[array]] {i} "{name}"'
        if not NAME.fullmatch(name) or name in BUILTIN:
            raise w.error(table, "name: allowed a lower-case letter, then letters, digits, _ "
                          "(not cols: the row's length)")
        kind = w.typed(a, "type", table, str, "an element type", "float32")
        if kind not in ELEMENT_TYPES:
            raise w.error(table, f"type = {kind!r}: allowed {', '.join(ELEMENT_TYPES)}")
        if w.typed(a, "shape", table, list, "a list of dimension names") != dims:
            raise w.error(table, f"shape = {_show(a['shape'])}: allowed {dims} (the op's "
                          f"{'n' if ndim == 1 else 'rows, cols'}: ndim = {ndim})")
        role = w.typed(a, "role", table, str, "input or output")
        if role not in roles:
            raise w.error(table, f"role = {_show(role)}: allowed input, output ({NO_TEMPORARIES})")
        memory = w.typed(a, "memory", table, str, "a memory name", "host")
        if memory == "tcm":
            raise w.error(table, "memory = 'tcm': allowed host or a memory of the model (the "
                          "whole array's home; pingpong and nbuffer stage its tiles in TCM, "
                          f"<op>.tile_bytes each; {NO_TEMPORARIES})")
        if memory != "host" and not NAME.fullmatch(memory):
            raise w.error(table, f"memory = {_show(memory)}: allowed host (the model's "
                          "host.memory) or a memory's name (ddr, psram, sram, ...)")
        memories[name] = memory
        if name in roles["input"] + roles["output"]:
            raise w.error(table, "a second array of that name; allowed: distinct names")
        roles[role].append(name)
    for role, names in roles.items():
        if len(names) != 1:
            raise w.error("[[array]]", f"{len(names)} {role} arrays; allowed: exactly one "
                          "input and one output (the host's two buffers)")
    return roles["input"][0], roles["output"][0], memories


def _range(w: _Where, raw: Any, key: str, lo: int, hi: int, default: int) -> Range:
    table = f"[schedules] {key}"
    if raw is None:
        return Range(default, lo, hi)
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"default": raw}
    raw = w.table(raw, table, RANGE_KEYS)
    vals = [w.typed(raw, k, table, int, "a whole number", d)
            for k, d in (("default", default), ("min", lo), ("max", hi))]
    if not lo <= vals[1] <= vals[0] <= vals[2] <= hi:
        raise w.error(table, f"min {vals[1]}, default {vals[0]}, max {vals[2]}: allowed "
                      f"{lo} <= min <= default <= max <= {hi}")
    if key == "tile_bytes" and any(v % 4 for v in vals):
        raise w.error(table, "allowed multiples of 4 (float32)")
    return Range(*vals)


def _schedules(w: _Where, raw: Any) -> tuple[tuple[str, ...], str, Range, Range | None]:
    raw = w.table(raw, "[schedules]", SCHEDULE_KEYS)
    variants = w.typed(raw, "variants", "[schedules]", list, "a list of schedule names",
                       ["direct", "pingpong"])
    if not variants or any(v not in SCHEDULES for v in variants) \
            or len(set(variants)) != len(variants):
        raise w.error("[schedules]", f"variants = {_show(variants)}: allowed distinct names "
                      f"of {', '.join(SCHEDULES)}")
    default = w.typed(raw, "default", "[schedules]", str, "a variant", variants[-1]
                      if "pingpong" not in variants else "pingpong")
    if default not in variants:
        raise w.error("[schedules]", f"default = {default!r}: allowed {', '.join(variants)}")
    tile = _range(w, raw.get("tile_bytes"), "tile_bytes", 4, 1 << 30, 32768)
    buffers = (_range(w, raw.get("buffers"), "buffers", 2, 8, 3) if "nbuffer" in variants
               else None)
    if "buffers" in raw and buffers is None:
        raise w.error("[schedules]", "buffers: allowed only with the nbuffer variant")
    return tuple(variants), default, tile, buffers


def _passes(w: _Where, raw: Any, inp: str, out: str, params: dict[str, float], ndim: int
            ) -> tuple[PassSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise w.error("[[pass]]", "expected at least one [[pass]] table")
    passes: list[PassSpec] = []
    scalars: list[str] = []
    written: set[str] = set()
    holds = inp  # what a tile holds in place (2-D: every pass on the same whole-row tile)
    for i, p in enumerate(raw, 1):
        spec = _pass(w, i, p, inp, out, params, scalars, written, ndim)
        if ndim == 2 and spec.reads != holds:
            raise w.error(spec.label, f"reads {spec.reads}, which the tile no longer holds (an "
                          f"earlier pass wrote {holds} in place); allowed: reads = {holds!r}")
        if spec.writes:
            written.add(spec.writes)
            holds = spec.writes
        if spec.into:
            scalars.append(spec.into)
        if any(q.name == spec.name for q in passes):
            raise w.error(spec.label, "a second pass of that name; allowed: distinct names")
        passes.append(spec)
    if out not in written:
        raise w.error("[[pass]]", f"no pass writes the output array {out!r}; allowed: a pass "
                      f"with writes = {out!r}")
    return tuple(passes)


def _pass(w: _Where, i: int, p: Any, inp: str, out: str, params: dict[str, float],
          scalars: list[str], written: set[str], ndim: int) -> PassSpec:
    table = f"[[pass]] {i}"
    p = w.table(p, table, PASS_KEYS, ("name", "reads"))
    name = w.typed(p, "name", table, str, "a name")
    table = f'[[pass]] {i} "{name}"'
    if not NAME.fullmatch(name):
        raise w.error(table, "name: allowed a lower-case letter, then letters, digits or _")
    reads = w.typed(p, "reads", table, str, "an array name")
    if reads not in (inp, out):
        raise w.error(table, f"reads = {reads!r}: no such array; allowed: {inp}, {out}")
    if reads == out and out not in written:
        raise w.error(table, f"reads {out!r}, which no earlier pass wrote; allowed: {inp!r}, "
                      f"or {out!r} after a pass with writes = {out!r}")
    writes = w.typed(p, "writes", table, str, "an array name")
    if writes is not None and writes != out:
        raise w.error(table, f"writes = {writes!r}: allowed {out!r} (the output array; "
                      f"the input is the host's; {NO_TEMPORARIES})")
    reduce_op, into = _reduce(w, table, p.get("reduce"), scalars, params, inp, out)
    if writes is None and reduce_op is None:
        raise w.error(table, "neither writes nor reduce: the pass does nothing; allowed: "
                      f"writes = {out!r}, reduce = {{ op = \"max\", into = \"m\" }}, or both")
    scalar_names = {**{s: "scalar" for s in scalars}, **{k: "param" for k in params}, **BUILTIN}
    value = (parse_expr(p["value"], {reads: "array", **scalar_names},
                        f"op file {w.path}: {table}: value") if "value" in p else None)
    if value is not None and (value.shifts or value.halo) and ndim != 2:
        raise w.error(table, "value: shift() and shift_rows() need a 2-D op (rows in a tile); "
                      "allowed with ndim = 2")
    kernels, loop = _cost(w, table, p, writes, reduce_op, value, scalar_names)
    return PassSpec(i, name, reads, writes, reduce_op, into, value, kernels, loop)


def _reduce(w: _Where, table: str, raw: Any, scalars: list[str], params: dict[str, float],
            inp: str, out: str) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    raw = w.table(raw, f"{table}: reduce", ("op", "into"))
    op = w.typed(raw, "op", f"{table}: reduce", str, "a reduction")
    if op not in REDUCTIONS:
        raise w.error(table, f"reduce.op = {_show(op)}: allowed {', '.join(REDUCTIONS)}")
    into = w.typed(raw, "into", f"{table}: reduce", str, "a scalar name")
    if into is None:
        raise w.error(table, "reduce has no destination; allowed: reduce = { op = "
                      f"\"{op}\", into = \"NAME\" }} (a scalar per row for later passes)")
    if not NAME.fullmatch(into) or into in (*scalars, *params, inp, out, *BUILTIN):
        raise w.error(table, f"reduce.into = {_show(into)}: allowed a new lower-case name (not "
                      "an array, param or earlier scalar)")
    return op, into


def _cost(w: _Where, table: str, p: dict[str, Any], writes: str | None, reduce_op: str | None,
          value: Expr | None, names: dict[str, str]
          ) -> tuple[tuple[KernelUse, ...], LoopCost | None]:
    given = [k for k in ("kernel", "loop", "cycles_per_element") if k in p]
    if len(given) != 1:
        raise w.error(table, f"{'no cost' if not given else 'costs ' + ', '.join(given)}; "
                      "allowed: exactly one of kernel = \"NAME\" (or a list), loop = { loads, "
                      "stores, alu }, cycles_per_element = X")
    if given[0] == "kernel":
        return _kernels(w, table, p["kernel"], writes, reduce_op, names), None
    if value is None:
        raise w.error(table, f"{given[0]} needs value = \"...\" (the element-wise expression "
                      "the registered kernel computes)")
    if given[0] == "cycles_per_element":
        cpe = p["cycles_per_element"]
        if isinstance(cpe, bool) or not isinstance(cpe, int | float) or not 0 < cpe <= 1e4:
            raise w.error(table, f"cycles_per_element = {_show(cpe)}: allowed a number above "
                          "0 and at most 10000 (measured core cycles per element in TCM)")
        return (), LoopCost(stores=1 if writes else 0, cpe=float(cpe))
    return (), _loop(w, table, p["loop"], writes)


def _loop(w: _Where, table: str, raw: Any, writes: str | None) -> LoopCost:
    where = f"{table}: loop"
    raw = w.table(raw, where, LOOP_KEYS, ("alu",))
    vals = {}
    for k, lo, hi, d in (("loads", 1, 8, 1), ("stores", 0, 8, 0), ("alu", 0, 256, 1),
                         ("table_loads", 0, 64, 0), ("tail_ops", 0, 4096, None),
                         ("lanes", 1, 256, None), ("call_overhead_cycles", 0, 100_000, None)):
        v = w.typed(raw, k, where, int, "a whole number", d)
        if v is not None and not lo <= v <= hi:
            raise w.error(table, f"loop.{k} = {v}: allowed {lo} to {hi}")
        vals[k] = v
    lanes = vals["lanes"]
    if lanes is not None and lanes & (lanes - 1):
        raise w.error(table, f"loop.lanes = {lanes}: allowed a power of two from 1 to 256 "
                      "(float32 elements per vector; default core.lanes_f32)")
    want = vals["loads"] if writes else 0
    if vals["stores"] != want:
        raise w.error(table, f"loop.stores = {vals['stores']}: allowed {want} ("
                      + ("a vector out per vector in" if writes else "the pass writes nothing")
                      + ")")
    return LoopCost(**vals)


def _kernels(w: _Where, table: str, raw: Any, writes: str | None, reduce_op: str | None,
             names: dict[str, str]) -> tuple[KernelUse, ...]:
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise w.error(table, "kernel = []: allowed a kernel name, or a list of them")
    uses, returns, stores = [], 0, 0
    for item in items:
        if isinstance(item, str):
            item = {"name": item}
        item = w.table(item, f"{table}: kernel", ("name", "args"), ("name",))
        kname = w.typed(item, "name", f"{table}: kernel", str, "a kernel name")
        if kname not in KERNELS:
            raise w.error(table, f"kernel {kname!r} is not registered; allowed: "
                          f"{', '.join(sorted(KERNELS))}")
        k = KERNELS[kname]
        args = w.typed(item, "args", f"{table}: kernel {kname}", dict, "a table of "
                       "argument = expression", {})
        uses.append(KernelUse(kname, _kernel_args(w, table, k, args, names)))
        returns += bool(k.results)
        stores += k.writes
    if stores and not writes or writes and not stores:
        raise w.error(table, "writes = " + (repr(writes) if writes else "nothing")
                      + f" but {stores} of its kernels write; allowed: writes with a kernel "
                      "that writes (vecmul, vecexpf_max, ...), or neither")
    if returns != (1 if reduce_op else 0):
        raise w.error(table, f"{returns} of its kernels return a value and the pass "
                      + ("reduces" if reduce_op else "has no reduce")
                      + "; allowed: a reduce with exactly one kernel that returns one "
                      "(vecmaxf, vecsum, ...), or neither")
    return tuple(uses)


def _kernel_args(w: _Where, table: str, kernel: Any, args: dict[str, Any],
                 names: dict[str, str]) -> tuple[tuple[str, Expr], ...]:
    sig = inspect.signature(kernel.compute).parameters
    takes = list(sig)[3:]  # after (src, dst, lanes)
    need = [a for a in takes if sig[a].default is inspect.Parameter.empty]
    for a in args:
        if a not in takes:
            raise w.error(table, f"kernel {kernel.name}: no argument {a!r}; allowed: "
                          f"{', '.join(takes) or 'none'}")
    missing = [a for a in need if a not in args]
    if missing:
        raise w.error(table, f"kernel {kernel.name} needs args = {{ {missing[0]} = \"...\" }} "
                      f"(an expression over scalars and params; its arguments: "
                      f"{', '.join(takes)})")
    return tuple((a, parse_expr(v, names, f"op file {w.path}: {table}: kernel "
                                f"{kernel.name}: args.{a}")) for a, v in args.items())


def _reference(w: _Where, raw: Any, inp: str, params: dict[str, float]
               ) -> tuple[Expr | None, str | None, tuple[float, float] | None]:
    if raw is None:
        return None, None, None
    raw = w.table(raw, "[reference]", REFERENCE_KEYS)
    python = w.typed(raw, "python", "[reference]", str, '"package.module:function"')
    allow = w.typed(raw, "allow_python", "[reference]", bool, "true or false", False)
    if python is not None and not allow:
        raise w.error("[reference]", "python = ... needs allow_python = true in the file (and "
                      "--allow-python / allow_python=True when loading it)")
    if python is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", python):
        raise w.error("[reference]", f"python = {python!r}: allowed \"package.module:function\"")
    value = None
    if "value" in raw:
        names = {inp: "array", **{k: "param" for k in params}, **BUILTIN}
        value = parse_expr(raw["value"], names, f"op file {w.path}: [reference]: value",
                           reductions=True)
    if (value is None) == (python is None):
        raise w.error("[reference]", "allowed: exactly one of value = \"...\" (a float64 "
                      "expression) or python = \"package.module:function\"")
    tol = w.typed(raw, "tolerance", "[reference]", list, "[relative, absolute]")
    if tol is not None and (len(tol) != 2 or any(
            isinstance(t, bool) or not isinstance(t, int | float) or not t >= 0 for t in tol)):
        raise w.error("[reference]", f"tolerance = {_show(tol)}: allowed [relative, "
                      "absolute], two numbers >= 0")
    return value, python, (float(tol[0]), float(tol[1])) if tol else None
