"""The grid of a sweep: the cartesian product of ordered (key, values) axes, the first
outermost, over a base model at one fidelity (default ``tile``), and the columns of its table.
``op`` (default: a run's), the variant (``variant`` or ``mode``, its older name; default: the
op's studied variants) and the input size (``n`` for a 1-D op, ``shape`` for a 2-D one) are
always swept: given with ``--param`` they take their place among the keys, else they come last.
A memory's result columns are named by it (``ddr_read_bytes``): a sweep cannot add a memory.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.config import HardwareModel, checked_model, load_model, load_models, parse_value
from dspsim.errors import DspsimInputError
from dspsim.host.window import check_fits_window
from dspsim.ops import Op, get_op
from dspsim.ops.base import refuse_idle_keys
from dspsim.platform import check_fidelity
from dspsim.run import simulate
from dspsim.study.sweep.spec import load_spec
from dspsim.study.sweep.values import (
    MODEL_KEY,
    SIZE_KEYS,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    _checked,
    check_on_model,
    check_value,
    format_value,
    parse_param,
    parse_shape,
    shape_text,
    spec_values,
)

# the op a sweep (like a run) is of when none is given
DEFAULT_OP: str = inspect.signature(simulate).parameters["op"].default
DEFAULT_N = int(math.prod(get_op(DEFAULT_OP).default_shape))  # its default length
DEFAULT_FIDELITY = "tile"
# a memory's result columns, each ``<memory>_<what>``, and the columns before and after them
MEMORY_COLUMNS = ("read_bytes", "write_bytes", "busy_cycles", "stall_cycles")
TIME_COLUMNS = ("cycles", "time_us")
WAIT_COLUMNS = ("idma_in_stall_cycles", "idma_out_stall_cycles")
CHECK_COLUMNS = ("warnings", "hazards")  # warning codes (";"-separated), hazard count
TAIL_COLUMNS = ("wall_s", "error")
MAX_POINTS = 10_000_000


@dataclass(frozen=True)
class Sweep:
    """A grid of points. A sweep of several models has a ``model`` axis (outermost) whose values
    are the labels of ``models``; ``model`` is then the first of them."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    model: HardwareModel
    fidelity: str
    models: tuple[tuple[str, HardwareModel], ...] = ()  # (label, model) of a --models sweep

    @property
    def keys(self) -> list[str]:
        """The parameter columns: ``model`` (a sweep of several), ``op``, the variant column,
        the size column, then the other swept keys in the grid's order."""
        grid = [k for k, _ in self.axes]
        first = [k for k in (MODEL_KEY, *SPECIAL_KEYS) if k in grid]
        return first + [k for k in grid if k not in first]

    def model_of(self, point: Mapping[str, Any]) -> HardwareModel:
        """The model a point runs on (before its swept keys are applied)."""
        if MODEL_KEY in point:
            return dict(self.models)[point[MODEL_KEY]]
        return self.model

    @property
    def variant_key(self) -> str:
        """``variant``, or ``mode`` when the sweep was given its older name."""
        return "mode" if "mode" in dict(self.axes) else "variant"

    @property
    def size_key(self) -> str:
        """``n`` (1-D ops) or ``shape``."""
        return "shape" if "shape" in dict(self.axes) else "n"

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict(self.axes).get("op", (DEFAULT_OP,)))

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.axes)

    def points(self) -> Iterator[dict[str, Any]]:
        """Every point, the first axis outermost."""
        grid = [k for k, _ in self.axes]
        for combo in itertools.product(*(v for _, v in self.axes)):
            yield dict(zip(grid, combo))

    def identity(self, point: Mapping[str, Any]) -> tuple[str, ...]:
        """A point's parameter cells, in :attr:`keys` order, as canonical text."""
        return tuple(format_value(point[k]) for k in self.keys)

    @functools.cached_property
    def _radix(self) -> list[tuple[int, dict[str, int], int]]:
        """Per axis: its cell in an identity, its values' positions by text, its stride."""
        out = []
        stride = self.size
        for key, values in self.axes:
            stride //= len(values)
            positions = {format_value(v): j for j, v in enumerate(values)}
            out.append((self.keys.index(key), positions, stride))
        return out

    def index_of(self, ident: Sequence[str]) -> int | None:
        """The position in :meth:`points` of the point whose identity (cells in :attr:`keys`
        order, canonical text) is ``ident``; None when it is not a point of this grid."""
        index = 0
        for cell, positions, stride in self._radix:
            j = positions.get(ident[cell])
            if j is None:
                return None
            index += j * stride
        return index

    def check_columns(self, path: Path, columns: list[str]) -> None:
        """Refuse a file of this sweep's whose ``columns`` are another sweep's."""
        if columns != self.columns:
            raise DspsimInputError(
                f"{path} was written by a different sweep (columns {','.join(columns)}; this "
                f"sweep has {','.join(self.columns)}); choose another --out or delete it")

    @property
    def columns(self) -> list[str]:
        """The table's columns: :attr:`keys`, then the results (``docs/reference.md``): every
        memory of the sweep's models, busy columns for the most iDMA channels any point has."""
        models = [m for _, m in self.models] or [self.model]
        memories = list(dict.fromkeys(name for m in models for name in m.memories))

        def per_memory(*what: str) -> list[str]:
            return [f"{m}_{w}" for m in memories for w in what]

        channels = max(dict(self.axes).get("idma.channels", [m.idma.channels for m in models]))
        busy = ["core_busy_cycles"] + [f"idma{c}_busy_cycles" for c in range(channels)]
        return [
            *self.keys, *TIME_COLUMNS, *per_memory("read_bytes", "write_bytes"), *busy,
            *per_memory("busy_cycles"), *per_memory("stall_cycles"), *WAIT_COLUMNS,
            *CHECK_COLUMNS, *TAIL_COLUMNS,
        ]


def _variants(ops: list[Op], column: str, given: list[str] | None) -> list[str]:
    """The variants of a sweep over ``ops``: every given one must be a variant of each op;
    default, the variants all of them have, of those the first op studies by default
    (``Op.study_variants``; every variant of a single op that names none)."""
    first = ops[0].study_variants or tuple(ops[0].variants)
    common = [v for v in first if all(v in o.variants for o in ops[1:])]
    names = ", ".join(o.name for o in ops)
    if given is None:
        if not common:
            raise DspsimInputError(
                f"ops {names} have no variant in common; give --{column} or sweep them separately")
        return common
    for v in given:
        for o in ops:
            if v not in o.variants:
                allowed = ", ".join(common) or "none in common"
                where = o.name if len(ops) == 1 else f"every op of the sweep ({names})"
                raise DspsimInputError(
                    f"{column} {v!r} is not a variant of {o.name}; allowed for {where}: {allowed}")
    return given


def _sizes(ops: list[Op], axes: dict[str, list[Any]]) -> tuple[str, list[Any]]:
    """The size key (``n`` or ``shape``) of ``ops`` and its values, checked against each op."""
    dims = {o.ndim for o in ops}
    if len(dims) > 1:
        kinds = ", ".join(f"{o.name} ({o.ndim}-D)" for o in ops)
        raise DspsimInputError(
            f"ops {kinds} take inputs of different dimensions; sweep them separately")
    key = "n" if dims == {1} else "shape"
    other = "shape" if key == "n" else "n"
    if other in axes:
        want = "n (its length)" if key == "n" else "shape=ROWSxCOLS"
        raise DspsimInputError(
            f"{ops[0].name} takes a {ops[0].ndim}-D input: sweep {want}, not {other}")
    if key not in axes:
        defaults = {tuple(o.default_shape) for o in ops}
        if len(defaults) > 1:
            raise DspsimInputError(
                f"ops {', '.join(o.name for o in ops)} have different default shapes; "
                f"give --{key}")
        default = defaults.pop()
        return key, [int(default[0])] if key == "n" else [shape_text(default)]
    for value in axes[key]:
        for o in ops:
            if key == "n":
                o.shape_of(n=value)
            elif len(parse_shape(value)) != o.ndim:
                raise DspsimInputError(
                    f"{o.name} shape {value}: expected {o.ndim} dimensions written "
                    f"{'x'.join(['N'] * o.ndim) if o.ndim != 2 else 'ROWSxCOLS'}, e.g. "
                    f"{shape_text(o.default_shape)}")
            # refused before anything runs, as ``dspsim run --n`` refuses it
            check_fits_window(o, (value,) if key == "n" else parse_shape(value), f"{o.name}: ")
    return key, axes[key]


def build_sweep(params: Sequence[str] | Mapping[str, Any] = (), *,
                op: str | Sequence[str] | None = None,
                variants: str | Sequence[str] | None = None,
                modes: str | Sequence[str] | None = None,
                n: int | str | Sequence[int] | None = None,
                shape: str | Sequence[Any] | None = None, model: str | Path | None = None,
                overrides: Sequence[str] | Mapping[str, Any] | None = None,
                fidelity: str | None = None, spec: str | Path | None = None,
                models: Sequence[str | Path] | None = None) -> Sweep:
    """A sweep of ``--param`` texts (or a key -> values mapping), ops, variants (or modes), n or
    shapes (each a list, the command line's text or one value), a model (or several), fixed
    overrides, a fidelity and a spec file's values."""
    loaded = load_spec(spec) if spec is not None else {"params": {}, "overrides": {}}
    given = {"op": op, "variant": variants, "mode": modes, "n": n, "shape": shape}
    axes = _swept(loaded, params)
    axes = _special_axes(axes, _given(loaded, given, axes))
    fixed = _fixed(loaded["overrides"], overrides, axes)
    column = next(k for k in VARIANT_KEYS if k in axes)  # a key acting at no point: refused
    refuse_idle_keys(fixed, [(get_op(o), v) for o in axes["op"] for v in axes[column]], "--set")
    if models is not None and model is not None:
        raise DspsimInputError("give --model or --models, not both")
    several: tuple[tuple[str, HardwareModel], ...] = ()
    if models is not None:  # checked as run --models checks them
        several = tuple(load_models(list(models), dict(fixed) or None).items())
        for label, _ in several:
            check_value(MODEL_KEY, label)
        base = several[0][1]
        axes = {MODEL_KEY: [label for label, _ in several], **axes}  # outermost
    else:
        base = load_model(model if model is not None else loaded.get("model"), fixed or None)
    fid = fidelity if fidelity is not None else loaded.get("fidelity", DEFAULT_FIDELITY)
    return _grid(axes, base, fid, several)


def _grid(axes: dict[str, list[Any]], base: HardwareModel, fid: str,
          several: tuple[tuple[str, HardwareModel], ...]) -> Sweep:
    """The sweep of ``axes`` (each key one of every model's) on ``base`` at ``fid``, checked."""
    for _, m in several or (("", base),):
        checked_model(m)  # one built or replaced in Python too
        for key in axes:
            if key not in SPECIAL_KEYS and key != MODEL_KEY:
                check_on_model(m, key, f"sweep key {key}")
    check_fidelity(fid)
    sweep = Sweep(tuple((k, tuple(v)) for k, v in axes.items()), base, fid, several)
    if sweep.size > MAX_POINTS:
        raise DspsimInputError(f"the grid has {sweep.size:,} points; at most {MAX_POINTS:,}")
    return sweep


def check_sweep(sweep: Sweep) -> None:
    """Refuse a Sweep (one built in Python) that :func:`build_sweep` would not build: each
    axis's values checked as ``--param``'s, op, variant and size as it gives them, each key one
    of every model's (the labels of ``models`` the ``model`` axis), the fidelity."""
    pairs = sweep.axes
    if not all(isinstance(t, tuple) and all(isinstance(a, tuple) and len(a) == 2 and isinstance(
            a[0], str) for a in t) for t in (pairs, sweep.models)) or any(
            not isinstance(v, tuple) for _, v in pairs):
        raise DspsimInputError(f"sweep axes {pairs!r:.80}: expected a tuple of (key, tuple of "
                               "values) pairs, models one of (label, HardwareModel) pairs")
    axes = {k: _checked(k, v) for k, v in pairs}
    labels = {MODEL_KEY: [label for label, _ in sweep.models]} if sweep.models else {}
    rest = {k: v for k, v in axes.items() if k != MODEL_KEY}
    built = _grid(labels | _special_axes(rest, {}), sweep.model, sweep.fidelity, sweep.models)
    if built.axes != pairs:
        raise DspsimInputError(f"sweep axes {', '.join(k for k, _ in pairs) or 'none'}: "
                               f"build_sweep gives {', '.join(k for k, _ in built.axes)} (op, "
                               "variant and size always, first a model axis of models' labels, "
                               "each value once); build it so")


def _swept(loaded: Mapping[str, Any], params: Sequence[str] | Mapping[str, Any]
           ) -> dict[str, list[Any]]:
    """The spec file's swept keys, then ``params``'; a key given twice is an error."""
    axes: dict[str, list[Any]] = dict(loaded["params"])
    pairs = ([(k, spec_values(k, v)) for k, v in params.items()] if isinstance(params, Mapping)
             else [parse_param(item) for item in params])
    for key, values in pairs:
        if key in axes:
            raise DspsimInputError(f"sweep key {key!r} is given twice")
        axes[key] = values
    if MODEL_KEY in axes:
        raise DspsimInputError("sweep several models with --models A,B (one table, a model "
                               "column), not as a swept key")
    return axes


def _given(loaded: Mapping[str, Any], given: Mapping[str, Any], axes: Mapping[str, Any]
           ) -> dict[str, list[Any]]:
    """The special keys the options give (they replace the spec file's: ``--mode`` its variant
    too); one also swept is an error."""
    extra: dict[str, list[Any]] = {}
    for key in SPECIAL_KEYS:
        value = given[key]
        group = VARIANT_KEYS if key in VARIANT_KEYS else SIZE_KEYS if key in SIZE_KEYS else ()
        if value is not None:
            if key in axes:
                raise DspsimInputError(f"sweep key {key!r} is given twice (--{key} and --param)")
            value = list(value) if isinstance(value, list | tuple) else value
            extra[key] = spec_values(key, value)
        elif key not in axes and key in loaded and all(given[k] is None for k in group):
            extra[key] = loaded[key]
    return extra


def _special_axes(axes: dict[str, list[Any]], extra: dict[str, list[Any]]
                  ) -> dict[str, list[Any]]:
    """``axes`` with op, variant and size: swept keys keep their place, the others come last."""
    axes.setdefault("op", extra.pop("op", [DEFAULT_OP]))
    ops = [get_op(name) for name in axes["op"]]
    for key in VARIANT_KEYS:
        if key in extra:
            axes[key] = extra.pop(key)
    if all(k in axes for k in VARIANT_KEYS):
        raise DspsimInputError(
            "give variant or mode, not both (mode is the older name of variant)")
    column = next((k for k in VARIANT_KEYS if k in axes), "variant")
    axes[column] = _variants(ops, column, axes.get(column))
    axes.update(extra)  # n or shape
    size_key, sizes = _sizes(ops, axes)
    axes[size_key] = sizes
    return axes


def _fixed(spec: Mapping[str, Any], overrides: Sequence[str] | Mapping[str, Any] | None,
           axes: Mapping[str, Any]) -> dict[str, Any]:
    """The fixed model values: the spec file's ``[set]`` and ``--set``'s, each in one place."""
    fixed: dict[str, Any] = dict(spec)
    given: dict[str, Any] = {}
    if isinstance(overrides, Mapping):
        given = dict(overrides)
    else:
        for item in overrides or ():
            k, eq, v = item.partition("=")
            if not eq or not k.strip():
                raise DspsimInputError(
                    f"--set {item!r}: expected KEY=VALUE, e.g. ddr.latency_cycles=300")
            if k.strip() in given:
                raise DspsimInputError(f"--set {k.strip()} is given twice; give each once")
            given[k.strip()] = parse_value(k.strip(), v)
    both = sorted(set(given) & set(fixed))
    if both:
        raise DspsimInputError(
            f"{both[0]} is set by the spec's [set] and by --set; give it in one place")
    fixed.update(given)
    for k in fixed:
        if k in SPECIAL_KEYS:
            raise DspsimInputError(f"--set {k}: {k} is not a model key; sweep it (--{k})")
        if k in axes:
            raise DspsimInputError(f"{k} is both fixed (--set) and swept (--param)")
    return fixed
