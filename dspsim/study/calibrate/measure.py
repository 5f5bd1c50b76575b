"""Measurements: what was run on the board and the cycles it took. On the command line::

    [OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE ...]=CYCLES

``OP`` defaults to :data:`DEFAULT_OP`; ``n`` (a 1-D op's length) or ``shape`` (``ROWSxCOLS``)
to the op's default shape, checked to fit the DSP's DDR window; every other ``KEY=VALUE`` is a
model key set for that measurement only (e.g. ``softmax.tile_bytes=8192``). Everything after
the **last** ``=`` is the cycle count (``_`` allowed), so nothing is ambiguous. A CSV file
(``--measured-csv``) has columns ``cycles`` and ``variant`` (or ``mode``), optionally ``op``,
``n``, ``shape`` and model keys (an empty cell leaves the key alone). The documents' figures
(:func:`seed_measurements`) are every op's ``document["cycles"]`` at ``document["shape"]``.
The free keys a calibration fits (``--free KEY[=LO:HI]``) are searched by default a factor of
100 either side of their value, within the key's allowed range."""

from __future__ import annotations

import csv
import inspect
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from dspsim.config import HardwareModel, key_type, model_key, parse_value
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.host.window import check_fits_window, largest_first_dim
from dspsim.ops import Op, get_op, op_names
from dspsim.paths import read_small_text
from dspsim.run import simulate
from dspsim.study.interval import trend
from dspsim.study.sweep.values import check_on_model, shape_text

# A measurement that names no op is of the op a run that names none is of.
DEFAULT_OP: str = inspect.signature(simulate).parameters["op"].default

# The default op's document figures {variant: cycles}, read-only (the calibration itself reads
# every op's document, see seed_measurements).
SEED_MEASUREMENTS_CYCLES = MappingProxyType(
    dict((get_op(DEFAULT_OP).document or {}).get("cycles", {})))

# The CSV columns that are not model keys.
_CSV_FIELDS = ("op", "variant", "mode", "n", "shape", "cycles")
# A measurements file is small: each row is a board run (and a simulation per fit step).
MAX_CSV_BYTES = 1 << 20
MAX_CSV_ROWS = 10_000


def _size_text(shape: tuple[int, ...]) -> str:
    return f"n={shape[0]}" if len(shape) == 1 else f"shape={shape_text(shape)}"


@dataclass(frozen=True)
class Measurement:
    """One measured run: the op's variant, its input shape (an int: a 1-D op's length; None:
    the op's default), the model keys it was taken with, the cycles."""

    variant: str
    cycles: float
    shape: tuple[int, ...] = None  # type: ignore[assignment]  # None: the op's default shape
    settings: dict[str, Any] = field(default_factory=dict)
    op: str = DEFAULT_OP

    def __post_init__(self) -> None:
        op = get_op(self.op)
        op.check_variant(self.variant)
        n = isinstance(self.shape, int | np.integer) and not isinstance(self.shape, bool)
        object.__setattr__(self, "shape", op.shape_of(n=int(self.shape)) if n
                           else op.shape_of(shape=self.shape))

    @property
    def mode(self) -> str:
        """The variant's older name."""
        return self.variant

    @property
    def n(self) -> int:
        """Elements in the input."""
        return int(np.prod(self.shape))

    def label(self, with_op: bool = False) -> str:
        """``[OP:]VARIANT,n=N|shape=RxC[,KEY=VALUE...]``: the measurement without its cycles
        (the op is named when it is not :data:`DEFAULT_OP`, or with ``with_op``)."""
        named = with_op or self.op != DEFAULT_OP
        head = f"{self.op}:{self.variant}" if named else self.variant
        return ",".join([head, _size_text(self.shape)]
                        + [f"{k}={v}" for k, v in self.settings.items()])

    def spec(self, with_op: bool = False) -> str:
        """The measurement in the ``--measured`` syntax."""
        return f"{self.label(with_op)}={self.cycles:.0f}"

    def run_fields(self, older_names: bool = False) -> dict[str, Any]:
        """What run this is, for JSON: op, variant, shape (with ``older_names``, also ``mode``
        and ``n``: the variant's older name and the element count) and settings."""
        older = {"mode": self.mode, "n": self.n} if older_names else {}
        return {"op": self.op, "variant": self.variant, "shape": list(self.shape), **older,
                "settings": self.settings}


def is_int_key(key: str) -> bool:
    """Whether a model key takes integer values."""
    return key_type(key) is int


def value_text(key: str, v: float, digits: int = 4) -> str:
    """A key's value to read: an integer key's whole number, else ``digits`` significant
    digits."""
    return f"{int(round(v))}" if is_int_key(key) else f"{v:.{digits}g}"


def int_value(key: str, value: float) -> int:
    """The nearest value an integer key takes (a multiple of its ``multiple``, if it has one)."""
    step = model_key(key).multiple or 1
    return int(round(value / step)) * step


_DIGITS = r"[0-9](?:_?[0-9])*"  # digits, single underscores between them (1_234_567)
MAX_CYCLES = 2**53  # a cycle count float64 holds exactly


def _parse_cycles(text: str, where: str) -> float:
    """A measured cycle count: a whole positive number (a ``TIME_STAMP`` difference), written
    ``1234567``, ``1_234_567`` or ``5.154293e6``; never rounded silently."""
    t = text.strip()
    exact = None
    if re.fullmatch(rf"{_DIGITS}(\.(?:{_DIGITS})?)?([eE][+-]?{_DIGITS})?", t):
        try:
            exact = Decimal(t.replace("_", ""))  # exact: nothing rounds before the checks
        except (InvalidOperation, ValueError):
            exact = None
    if exact is None or not exact.is_finite() or exact <= 0:
        hint = " (write 1234567 or 1_234_567, no commas)" if "," in text else ""
        raise DspsimInputError(f"{where}: cycles {text.strip()!r} is not a positive number{hint}")
    if exact != exact.to_integral_value() or exact > MAX_CYCLES:
        raise DspsimInputError(
            f"{where}: cycles {text.strip()!r}: expected a whole number of cycles from 1 to "
            "2**53 (a TIME_STAMP difference is a count)")
    return float(exact)


# the largest n of the default op whose arrays fit the DSP's DDR window
MAX_N = (largest_first_dim(get_op(DEFAULT_OP), (1,)) if get_op(DEFAULT_OP).ndim == 1 else 0)


# ------------------------------------------------------------------ parsing
def _op_variant(op_text: str | None, text: str, where: str) -> tuple[Op, str]:
    """The op named (``None``: :data:`DEFAULT_OP`) and its variant ``text``, checked."""
    try:
        op = get_op((DEFAULT_OP if op_text is None else op_text).strip())
    except DspsimInputError as e:
        raise DspsimInputError(f"{where}: {e}") from None
    variant = text.strip()
    if variant in op.variants:
        return op, variant
    hint = ""
    if op_text is None and variant in op_names():  # an op given without its variant
        v = get_op(variant).variants
        hint = f" ({variant!r} is an op: write {variant}:VARIANT, VARIANT one of {', '.join(v)})"
    raise DspsimInputError(f"{where}: version {variant!r} unknown; allowed for {op.name}: "
                           f"{', '.join(op.variants)}{hint}")


def _parse_shape(op: Op, n: str | None, shape: str | None, where: str) -> tuple[int, ...]:
    """The input shape from the ``n`` and ``shape`` texts (``None``: not given), checked
    against the op and the DSP's DDR window."""
    if n is not None and shape is not None:
        raise DspsimInputError(f"{where}: give n or shape, not both")
    if n is not None:
        if op.ndim != 1:
            raise DspsimInputError(
                f"{where}: {op.name} takes a {op.ndim}-D shape, not n; write "
                f"shape={'x'.join(['ROWS', 'COLS'] if op.ndim == 2 else ['D'] * op.ndim)}, e.g. "
                f"shape={shape_text(op.default_shape)}")
        if not re.fullmatch(_DIGITS, n.strip()) or int(n.strip().replace("_", "")) <= 0:
            raise DspsimInputError(f"{where}: n = {n.strip()!r} must be a positive integer")
        dims: tuple[int, ...] = (int(n.strip().replace("_", "")),)
    elif shape is not None:
        parts = [p.strip() for p in shape.strip().lower().split("x")]
        parts = [p.replace("_", "") if re.fullmatch(_DIGITS, p) else "-" for p in parts]
        want = ("one positive length (or n=N)" if op.ndim == 1
                else f"{op.ndim} positive integers joined by 'x'")
        if len(parts) != op.ndim or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise DspsimInputError(f"{where}: shape = {shape.strip()!r}: {op.name} takes {want}, "
                                   f"e.g. shape={shape_text(op.default_shape)}")
        dims = tuple(int(p) for p in parts)
    else:
        dims = tuple(op.default_shape)
    check_fits_window(op, dims, f"{where}: ")
    return dims


def _setting(key: str, value: str, where: str) -> Any:
    try:
        return parse_value(key, value)
    except ConfigError as e:
        raise DspsimInputError(f"{where}: {e}") from None


def _examples() -> str:
    """One example measurement per registered op (its default variant and shape)."""
    return " or ".join(f"{op.name}:{op.default_variant},{_size_text(tuple(op.default_shape))}"
                       "=CYCLES" for op in map(get_op, op_names()))


def parse_measurement(text: str) -> Measurement:
    """Parse ``[OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE...]=CYCLES`` (the last ``=``
    separates the cycles)."""
    where = f"measurement {text!r}"
    spec, eq, cycles_text = text.rpartition("=")
    if not eq or not spec.strip():
        raise DspsimInputError(f"{where}: expected MODE[,n=N][,shape=RxC][,KEY=VALUE...]=CYCLES, "
                               f"MODE being [OP:]VARIANT; e.g. {_examples()}")
    cycles = _parse_cycles(cycles_text, where)
    head, *rest = spec.split(",")
    op_text, colon, variant_text = head.rpartition(":")
    op, variant = _op_variant(op_text if colon else None, variant_text, where)
    size: dict[str, str] = {}
    raw: dict[str, str] = {}
    for item in rest:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise DspsimInputError(f"{where}: field {item!r} is not KEY=VALUE (n=N, shape=RxC or "
                                   "a model key such as ddr.latency_cycles=120)")
        if key in size or key in raw:
            raise DspsimInputError(f"{where}: {key} is given twice; give each key once")
        (size if key in ("n", "shape") else raw)[key] = value
    shape = _parse_shape(op, size.get("n"), size.get("shape"), where)
    settings = {key: _setting(key, value, where) for key, value in raw.items()}
    return Measurement(variant, cycles, shape, settings, op.name)


def _csv_rows(p: Path, text: str) -> list[dict[str, Any]]:
    """The file's rows as the CSV reader reads them: each column named once, at least one row
    and at most ``MAX_CSV_ROWS``."""
    reader = csv.DictReader(text.splitlines())
    try:
        names = [c.strip() for c in reader.fieldnames or []]  # the header, read first
        twice = [c for i, c in enumerate(names) if c in names[:i]]
        if twice:
            raise DspsimInputError(f"{p}: column {twice[0]!r} is given twice; give each column "
                                   "once")
        rows = list(reader)
    except csv.Error as e:
        raise DspsimInputError(f"{p}: not a CSV file ({e})") from None
    if not rows:
        raise DspsimInputError(
            f"{p}: no measurements (expected a header such as op,variant,n,cycles and rows)")
    if len(rows) > MAX_CSV_ROWS:
        raise DspsimInputError(f"{p}: {len(rows):,} measurements; at most {MAX_CSV_ROWS:,}")
    return rows


def _check_columns(p: Path, columns: list[str]) -> str:
    """The columns a measurements file must have, and only known ones (its own or model keys);
    the name of its variant column."""
    layout = ("columns are cycles, variant (or mode), optional op, n, shape (RxC) and model keys "
              "such as ddr.latency_cycles")
    if "cycles" not in columns:
        raise DspsimInputError(f"{p}: missing column 'cycles'; {layout}")
    if "variant" in columns and "mode" in columns:
        raise DspsimInputError(f"{p}: columns 'variant' and 'mode' name the same; give one")
    variant_col = "variant" if "variant" in columns else "mode"
    if variant_col not in columns:
        raise DspsimInputError(f"{p}: missing column 'variant' (or 'mode'); {layout}")
    for c in columns:
        if c not in _CSV_FIELDS:
            try:
                model_key(c)  # unknown key: ConfigError
            except ConfigError as e:
                raise DspsimInputError(f"{p}: column {c!r}: {e}") from None
    return variant_col


def read_measurements_csv(path: str | Path) -> list[Measurement]:
    """Measurements from a CSV file: columns cycles and variant (or mode), optional op, n,
    shape (RxC), and model-key columns."""
    p = Path(path)
    text = read_small_text(p, f"measurements file {str(p)!r}", MAX_CSV_BYTES)
    rows = _csv_rows(p, text)
    columns = [c.strip() for c in rows[0].keys() if c is not None]
    variant_col = _check_columns(p, columns)
    out = []
    for i, raw in enumerate(rows, start=2):
        if None in raw or None in raw.values():  # a short row's missing cells are None
            raise DspsimInputError(f"{p} line {i}: {'more' if None in raw else 'fewer'} cells "
                                   "than columns")
        row = {k.strip(): (v or "").strip() for k, v in raw.items()}
        where = f"{p} line {i}"
        op, variant = _op_variant(row.get("op") or None, row[variant_col], where)
        cycles = _parse_cycles(row["cycles"], where)
        shape = _parse_shape(op, row.get("n") or None, row.get("shape") or None, where)
        settings = {c: _setting(c, row[c], where) for c in columns
                    if c not in _CSV_FIELDS and row.get(c)}
        out.append(Measurement(variant, cycles, shape, settings, op.name))
    return out


# ------------------------------------------------------------------ the documents' figures
def seed_measurements(model: HardwareModel | None = None) -> list[Measurement]:
    """The document figures of every registered op that has a document: its
    ``document["cycles"]`` per variant, at ``document["shape"]``; with ``model``, only those
    measured on its platform (a document naming no platform applies to any)."""
    from dspsim.study.validate import model_platforms

    names = None if model is None else model_platforms(model)
    out = []
    for name in op_names():
        doc = get_op(name).document
        if doc and (names is None or doc.get("platform", next(iter(names))) in names):
            out += [Measurement(v, c, tuple(doc["shape"]), {}, name)
                    for v, c in doc["cycles"].items()]
    return out


# ------------------------------------------------------------------ the free keys
RANGE_FACTOR = 100.0  # default search range: current value / 100 .. x 100

# The J6 fit's free keys: the two DDR values the seed's two figures are fitted with.
SEED_FREE = MappingProxyType(
    {"ddr.latency_cycles": (1.0, 5000.0), "ddr.bytes_per_cycle": (0.01, 64.0)})


@dataclass(frozen=True)
class FreeParam:
    """A model key to fit, its search range and whether it takes integer values."""

    key: str
    lo: float
    hi: float
    integer: bool

    @property
    def log(self) -> bool:
        return self.lo > 0

    def to_u(self, v: float) -> float:
        """The optimiser's coordinate of the value ``v`` (its log where the range is > 0)."""
        return math.log(v) if self.log else v

    def from_u(self, u: float) -> float:
        return math.exp(u) if self.log else u


def default_range(model: HardwareModel, key: str) -> tuple[float, float]:
    """A factor of 100 either side of the current value, clipped to the key's allowed range."""
    v = float(model.get(key))
    lo_allowed, hi_allowed = allowed_range(key)
    if v > 0:
        lo, hi = v / RANGE_FACTOR, v * RANGE_FACTOR
    else:
        lo, hi = lo_allowed, max(hi_allowed, 1.0)
    lo, hi = max(lo, lo_allowed), min(hi, hi_allowed)
    if model_key(key).positive and lo <= 0:
        lo = min(v, hi) / RANGE_FACTOR if v > 0 else 1e-6
    if is_int_key(key):
        lo, hi = math.ceil(lo), math.floor(hi)
    return lo, hi


def allowed_range(key: str) -> tuple[float, float]:
    """The range a model key allows (infinite where it sets no bound)."""
    k = model_key(key)
    return (-math.inf if k.lo is None else k.lo), (math.inf if k.hi is None else k.hi)


def parse_free(text: str, model: HardwareModel) -> FreeParam:
    """Parse ``KEY`` or ``KEY=LO:HI`` into a :class:`FreeParam` checked against the key."""
    key, eq, rng = text.partition("=")
    key = key.strip()
    try:
        model_key(key)
    except ConfigError as e:
        raise DspsimInputError(f"--free {text!r}: {e}") from None
    check_on_model(model, key, f"--free {text!r}")
    if model.get(key) is None:  # an optional key left unset: no value to start the fit from
        try:
            model.with_overrides({key: 1})  # one that cannot act here says why
        except ConfigError as e:
            raise DspsimInputError(f"--free {text!r}: {e}") from None
        raise DspsimInputError(f"--free {text!r}: model {model.name} leaves {key} unset; give "
                               f"the fit a value to start from: --set {key}=VALUE")
    if key_type(key) in (str, bool):
        kind = "text" if key_type(key) is str else "true/false"
        raise DspsimInputError(
            f"--free {text!r}: {key} takes {kind} values; only numeric keys can be fitted")
    integer = is_int_key(key)
    lo, hi = _given_range(text, key, rng, integer) if eq else default_range(model, key)
    if lo <= 0 and trend(key) == -1:  # cycles fall as it rises, so its 0 is not the slowest
        raise DspsimInputError(
            f"--free {text!r}: {key} = 0 means no limit (the fastest, not the slowest), so a "
            f"search from 0 cannot find it; allowed: a range above 0, {key}=LO:HI with LO > 0")
    if not lo < hi:
        if integer and eq and lo == hi:
            raise DspsimInputError(f"--free {text!r}: the range holds one value {key} takes "
                                   f"({lo:g}); give a range with two or more")
        raise DspsimInputError(f"--free {text!r}: the range must have LO < HI (got {lo:g}:{hi:g})")
    return FreeParam(key, float(lo), float(hi), integer)


def _given_range(text: str, key: str, rng: str, integer: bool) -> tuple[float, float]:
    """The ``LO:HI`` of ``--free KEY=LO:HI``, within what the key allows (an integer key's:
    on the multiples it takes)."""
    f = model_key(key)
    a, colon, b = rng.partition(":")
    try:
        lo, hi = float(a.replace("_", "")), float(b.replace("_", ""))
    except ValueError:
        lo = hi = math.nan
    if not colon or not (math.isfinite(lo) and math.isfinite(hi)):
        raise DspsimInputError(f"--free {text!r}: expected KEY=LO:HI with two numbers, e.g. "
                               "ddr.latency_cycles=50:400")
    lo_allowed, hi_allowed = allowed_range(key)  # (infinite where the key sets no bound)
    if lo < lo_allowed or hi > hi_allowed:
        raise DspsimInputError(
            f"--free {text!r}: {key} allows {lo_allowed:g} to {hi_allowed:g}")
    if f.positive and lo <= 0:
        raise DspsimInputError(f"--free {text!r}: {key} must stay greater than 0")
    if integer:
        step = f.multiple or 1  # the values the key takes
        lo, hi = math.ceil(lo / step) * step, math.floor(hi / step) * step
        if lo > hi:
            raise DspsimInputError(
                f"--free {text!r}: {key} takes multiples of {step}; the range holds none")
    return lo, hi


def as_free(model: HardwareModel, free: Any) -> list[FreeParam]:
    """Free keys given as :class:`FreeParam`, ``KEY[=LO:HI]`` texts or a key -> (lo, hi) map."""
    if isinstance(free, Mapping):
        return [parse_free(f"{k}={lo}:{hi}", model) for k, (lo, hi) in free.items()]
    return [parse_free(f"{f.key}={f.lo!r}:{f.hi!r}" if isinstance(f, FreeParam) else f, model)
            for f in free]  # a FreeParam built in Python checked as its text is


def parse_options(model: HardwareModel, measured: Iterable[str],
                  measured_csv: Iterable[str | Path], free: Iterable[str]
                  ) -> tuple[list[Measurement], list[FreeParam]]:
    """The ``--measured`` specs and ``--measured-csv`` files' measurements, the ``--free``
    keys."""
    measurements = [parse_measurement(t) for t in measured]
    for path in measured_csv:
        measurements.extend(read_measurements_csv(path))
    return measurements, [parse_free(t, model) for t in free]
