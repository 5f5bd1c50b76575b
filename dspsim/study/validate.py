"""Predictions beside measurements: every measurement the project ships, run on its platform.

A measurements file (``validation/*.toml``; ``--measurements FILE`` adds one) is a list of
``[[measurement]]`` tables (fields in :data:`_FIELDS`, ``docs/reference.md`` explains each;
``platform`` and ``source`` may be given once at the top). A model is of a ``platform`` when it
is that file, inherits from it (``base``) or carries its ``[model] name``. ``role`` is
``calibration`` (a value was fitted to it: the model must reproduce it within
:data:`CALIBRATION_TOLERANCE_PCT`) or ``check`` (nothing was fitted to it). :func:`validate`
runs each under every model of its platform (data path off) with its interval; :func:`suggest`
(``--suggest``) names the run that would narrow the widest interval most."""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from dspsim.config import HardwareModel, load_model, model_chain, model_key, models_dir, parse_toml
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.ops import default_op, get_op
from dspsim.paths import read_small_text
from dspsim.study.interval import Interval, op_interval
from dspsim.study.sweep.spec import _flat
from dspsim.study.sweep.values import format_value
from dspsim.text import cell, column_width

ROLES = ("calibration", "check")
CALIBRATION_TOLERANCE_PCT = 1.0
MAX_FILE_BYTES = 1 << 20
MAX_MEASUREMENTS = 10_000
_FIELDS = ("name", "source", "platform", "op", "op_file", "variant", "n", "shape", "settings",
           "cycles", "role", "note")
_FILE_FIELDS = ("platform", "source", "measurement")


def validation_dir() -> Path:
    """The packaged measurements (wheel) or the repository's ``validation/``."""
    packaged = resources.files("dspsim") / "validation"
    return (Path(str(packaged)) if packaged.is_dir()
            else Path(__file__).resolve().parents[2] / "validation")


def shipped_files() -> list[Path]:
    return sorted(validation_dir().glob("*.toml"))


@dataclass(frozen=True)
class Measurement:
    """One board run of a measurements file."""

    name: str
    source: str
    platform: str
    op: str
    variant: str
    shape: tuple[int, ...]
    cycles: int
    role: str
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    file: str = ""

    def spec(self) -> str:
        """The measurement in ``dspsim calibrate --measured`` syntax."""
        size = (f"n={self.shape[0]}" if len(self.shape) == 1
                else "shape=" + "x".join(map(str, self.shape)))
        extra = "".join(f",{k}={format_value(v)}" for k, v in self.settings.items())
        return f"{self.op}:{self.variant},{size}{extra}={self.cycles}"


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# every field's type, checked in one place before any field is used: (test, what is allowed)
_TYPES: dict[str, tuple[Any, str]] = {
    **{k: (lambda v: isinstance(v, str), "a string")
       for k in ("name", "source", "platform", "op", "op_file", "variant", "role", "note")},
    "n": (_whole, "a whole number"),
    "shape": (lambda v: isinstance(v, list) and all(_whole(d) for d in v),
              "a list of whole numbers, e.g. [1024, 256]"),
    "settings": (lambda v: isinstance(v, dict), 'a table of model keys, e.g. '
                 '{ "copy.src" = "sram" }'),
    "cycles": (_whole, "a whole number of cycles"),
}


def _check_types(fields: dict[str, Any], where: str) -> None:
    """Refuse, in one line, the first field whose value is of a type it cannot have."""
    for key, value in fields.items():
        test, allowed = _TYPES.get(key, (lambda v: True, ""))
        if not test(value):
            raise DspsimInputError(f"{where}: {key} = {cell(repr(value), 60)} "
                                   f"({type(value).__name__}); allowed: {allowed}")


def _str(entry: dict, key: str, where: str) -> str:
    v = entry.get(key)  # a string if given (its type checked first)
    if not (v or "").strip():
        raise DspsimInputError(f"{where}: {key} must be a non-empty string"
                               + ("" if key in entry else " (missing)"))
    return v


def _entry(entry: Any, defaults: dict[str, Any], where: str, file: str) -> Measurement:
    if not isinstance(entry, dict):
        raise DspsimInputError(f"{where}: expected a [[measurement]] table")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise DspsimInputError(f"{where}: unknown field {unknown[0]!r}; allowed: "
                               f"{', '.join(_FIELDS)}")
    entry = {**defaults, **entry}
    _check_types(entry, where)
    name = _str(entry, "name", where)
    where = f"{where} ({cell(name)})"
    source = _str(entry, "source", where)
    platform = _str(entry, "platform", where)
    try:
        if "op_file" in entry:  # an op declared in a file, relative to this one
            from dspsim.ops.fileop import load_op_file

            file_op = load_op_file(Path(file).parent / entry["op_file"])
            if entry.setdefault("op", file_op) != file_op:
                raise DspsimInputError(f"op = {entry['op']!r} but op_file declares op "
                                       f"{file_op!r}; give op_file alone (or op = its op)")
        op = get_op(entry.get("op", default_op()))
        variant = op.check_variant(entry.get("variant", op.default_variant))
        shape = entry.get("shape")  # as a tuple: a refusal quotes it
        shape = op.shape_of(n=entry.get("n"), shape=None if shape is None else tuple(shape))
    except DspsimInputError as e:
        raise DspsimInputError(f"{where}: {e}") from None
    cycles = entry.get("cycles")  # its type checked above
    if cycles is None or not 0 < cycles <= 2**53:
        raise DspsimInputError(f"{where}: cycles = {cycles!r}: expected a whole number of "
                               "cycles from 1 to 2**53")
    role = entry.get("role")
    if role not in ROLES:
        raise DspsimInputError(f"{where}: role = {role!r}: allowed {', '.join(ROLES)}")
    # a dotted key in settings, unquoted, is a nested table (as a sweep spec's [set] reads it)
    flat = _flat(where, "settings", entry.get("settings", {}))
    try:
        settings = {k: model_key(k).coerce(v) for k, v in flat.items()}
    except ConfigError as e:
        raise DspsimInputError(f"{where}: settings: {e}") from None
    return Measurement(name, source, platform, op.name, variant, shape, cycles, role, settings,
                       entry.get("note", ""), file)


def read_measurements(path: str | Path) -> list[Measurement]:
    """The measurements of one file, every field checked (one-line errors naming the file
    and the measurement)."""
    p = Path(path)
    what = f"measurements file {str(p)!r}"
    raw = parse_toml(read_small_text(p, what, MAX_FILE_BYTES), what)
    unknown = sorted(set(raw) - set(_FILE_FIELDS))
    if unknown:
        raise DspsimInputError(f"{what}: unknown top-level key {unknown[0]!r}; allowed: "
                               f"{', '.join(_FILE_FIELDS)} ([[measurement]] tables)")
    entries = raw.get("measurement")
    if not isinstance(entries, list) or not entries:
        raise DspsimInputError(f"{what}: no [[measurement]] tables")
    if len(entries) > MAX_MEASUREMENTS:
        raise DspsimInputError(f"{what}: {len(entries):,} measurements; at most "
                               f"{MAX_MEASUREMENTS:,}")
    defaults = {k: raw[k] for k in ("platform", "source") if k in raw}
    _check_types(defaults, what)
    return [_entry(e, defaults, f"{cell(p.name)} measurement {i + 1}", str(p))
            for i, e in enumerate(entries)]


def platform_names(path: Path) -> set[str]:
    """What a model file is a model of: its own stem and ``[model] name``, and those of every
    file of its ``base`` chain."""
    names: set[str] = set()
    for p, raw, _ in model_chain(path):
        names.add(p.stem)
        meta = raw.get("model")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            names.add(meta["name"])
    return names


def model_platforms(model: HardwareModel) -> set[str]:
    """What a loaded model is a model of: its file's :func:`platform_names`, else its name."""
    return platform_names(Path(model.source)) if model.source else {model.name}


@dataclass(frozen=True)
class Row:
    """A measurement run under one model: its prediction's interval over the model's ranges."""

    measurement: Measurement
    model: str  # the label of the model it ran under
    interval: Interval
    run_model: HardwareModel  # the model it ran under, its settings applied

    @property
    def predicted(self) -> int:
        return self.interval.point_cycles

    @property
    def inside(self) -> bool:
        """Whether the measured cycles are inside the prediction's interval."""
        return self.interval.contains(self.measurement.cycles)

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted / self.measurement.cycles - 1.0)

    @property
    def within(self) -> bool:
        return abs(self.error_pct) <= CALIBRATION_TOLERANCE_PCT

    def to_json(self) -> dict[str, Any]:
        m = self.measurement
        return {"platform": m.platform, "model": self.model, "name": m.name, "op": m.op,
                "variant": m.variant, "shape": list(m.shape), "settings": m.settings,
                "role": m.role, "measured_cycles": m.cycles, "predicted_cycles": self.predicted,
                "error_pct": self.error_pct, "within_1_pct": self.within, "source": m.source,
                "note": m.note, "file": m.file, "spec": m.spec(), **self.interval.to_json(),
                "inside": self.inside}


def _models_of(measurements: list[Measurement], models: dict[str, tuple[HardwareModel, Path]]
               | None, overrides: list[str]) -> dict[str, list[tuple[str, HardwareModel]]]:
    """Each platform's models: those given that are of it, or its own model file."""
    platforms = list(dict.fromkeys(m.platform for m in measurements))
    out: dict[str, list[tuple[str, HardwareModel]]] = {}
    if models is None:
        for platform in platforms:
            try:
                out[platform] = [(platform, load_model(platform, overrides or None))]
            except ConfigError as e:
                raise DspsimInputError(f"platform {platform!r} of a measurement: {e}") from None
        return out
    names = {label: platform_names(path) for label, (_, path) in models.items()}
    for platform in platforms:
        out[platform] = [(label, model) for label, (model, _) in models.items()
                         if platform in names[label]]
    if not any(out.values()):
        raise DspsimInputError(f"no measurement is of the models given: the measurements are "
                               f"of {', '.join(platforms)}; give a model of one of them (or one "
                               "inheriting from it)")
    return out


def validate(models: dict[str, tuple[HardwareModel, Path]] | None = None,
             extra: list[str | Path] = (), shipped: bool = True, overrides: list[str] = ()
             ) -> list[Row]:
    """Every shipped measurement (``shipped``) and those of the files ``extra``, each under
    every model of its platform in ``models`` (label -> (model, its file)), or its platform's
    own model file."""
    measurements: list[Measurement] = []
    read: dict[Path, str] = {}  # each file's real path: a file read twice doubles its rows
    for given in (shipped_files() if shipped else []) + list(extra):
        measurements += read_measurements(Path(given))
        real = Path(given).resolve()
        if real in read:
            raise DspsimInputError(f"--measurements: {cell(str(given))} and {cell(read[real])} "
                                   "name one file (a shipped one runs without --measurements); "
                                   "give each file once")
        read[real] = str(given)
    if not measurements:
        raise DspsimInputError("validate: no measurements")
    by_platform = _models_of(measurements, models, list(overrides))
    rows = []
    for m in measurements:
        for label, model in by_platform.get(m.platform, []):
            run_model = model.with_overrides(m.settings) if m.settings else model
            try:
                iv = op_interval(run_model, m.op, m.variant, m.shape)
            except DspsimInputError as e:
                raise DspsimInputError(f"{cell(Path(m.file).name)} ({cell(m.name)}) under "
                                       f"{cell(label)}: {e}") from None
            rows.append(Row(m, label, iv, run_model))
    return rows


def calibration_ok(rows: list[Row]) -> bool:
    """Whether every calibration measurement is reproduced within the tolerance."""
    return all(r.within for r in rows if r.measurement.role == "calibration")


def table(rows: list[Row]) -> str:
    """The rows as a text table, platform by platform."""
    # names are the files' own text: escaped and cut to a bounded column (dspsim.text)
    width = column_width([r.measurement.name for r in rows], "measurement")
    label = max(22, column_width([r.model for r in rows], "model"))
    header = (f"{'model':<{label}} {'measurement':<{width}} {'role':<11} {'measured':>12} "
              f"{'predicted':>12} {'error_pct':>9}  interval [low, high] cycles")
    lines = [header, "-" * (len(header) + 2)]
    for r in rows:
        m, iv = r.measurement, r.interval
        flag = "" if m.role == "check" or r.within else "  OUTSIDE 1 %"
        span = f"[{iv.low_cycles:,}, {iv.high_cycles:,}]" + ("" if r.inside else " out")
        lines.append(f"{cell(r.model):<{label}} {cell(m.name, width):<{width}} {m.role:<11} "
                     f"{m.cycles:>12,} {r.predicted:>12,} {r.error_pct:>+9.2f}  "
                     f"{span:<29}{flag}".rstrip())
    cal = [r for r in rows if r.measurement.role == "calibration"]
    checks = [r for r in rows if r.measurement.role == "check"]
    worst = max((abs(r.error_pct) for r in cal), default=math.nan)
    lines += ["", f"{len(cal)} calibration measurement(s): "
              + ("every one within 1 %" if calibration_ok(rows) else "SOME OUTSIDE 1 %")
              + (f" (worst {worst:.2f} %)" if cal else "")]
    if checks:
        mean = sum(abs(r.error_pct) for r in checks) / len(checks)
        lines.append(f"{len(checks)} check(s), nothing fitted to them: mean |error| "
                     f"{mean:.2f} %, worst {max(abs(r.error_pct) for r in checks):.2f} %; "
                     f"{sum(r.inside for r in checks)} of {len(checks)} inside their "
                     "intervals")
    return "\n".join(lines)


# ------------------------------------------------------------------ --suggest
# A run pins a ranged key as far as that key alone explains the run's own interval. The
# candidates are runs not yet measured of each op the platform is measured with (every variant
# at the measurement's size and at half of it, with its settings), each scored by the share of
# its interval its dominant key explains times what pinning that key takes off the widest
# interval (relative to its prediction).
@dataclass(frozen=True)
class Candidate:
    """A run to measure: an op's variant at a shape, with a measurement's settings."""

    op: str
    variant: str
    shape: tuple[int, ...]
    settings: dict[str, Any]
    interval: Interval


@dataclass(frozen=True)
class Suggestion:
    """The widest row, the run to measure, the key it pins and the interval after."""

    widest: Row
    measure: Candidate
    key: str  # the key that run pins
    share: float  # of the measured run's interval, what the key alone explains
    narrowed: Interval  # the widest row's interval with the key pinned

    def to_json(self) -> dict[str, Any]:
        w, m, iv = self.widest, self.measure, self.widest.interval
        return {
            "widest": {"model": w.model, "name": w.measurement.name,
                       "low_cycles": iv.low_cycles, "high_cycles": iv.high_cycles},
            "measure": {"op": m.op, "variant": m.variant, "shape": list(m.shape),
                        "settings": m.settings, "low_cycles": m.interval.low_cycles,
                        "high_cycles": m.interval.high_cycles},
            "key": self.key, "key_share": self.share,
            "narrowed": {"low_cycles": self.narrowed.low_cycles,
                         "high_cycles": self.narrowed.high_cycles},
            "narrowed_by_pct": 100.0 * (1 - self.narrowed.width_cycles / max(1, iv.width_cycles)),
        }

    def text(self) -> str:
        j = self.to_json()
        w, m, narrowed = j["widest"], j["measure"], j["narrowed"]
        size = "x".join(map(str, m["shape"]))
        sets = "".join(f" --set {k}={format_value(v)}" for k, v in m["settings"].items())
        shown = (f"n = {m['shape'][0]:,}" if len(m["shape"]) == 1 else f"shape {size}")
        source = Path(self.widest.run_model.source)  # a packaged model by its name
        model = source.stem if source.parent == models_dir() else shlex.quote(str(source))
        return (f"widest interval: {w['name']} under {w['model']}, [{w['low_cycles']:,}, "
                f"{w['high_cycles']:,}] cycles. Measure {m['op']} {m['variant']} at {shown}"
                f"{sets} (`dspsim run --model {model} --op {m['op']} --variant {m['variant']} "
                f"{'--n' if len(m['shape']) == 1 else '--shape'} {size.replace('x', ',')}"
                f"{sets} --interval`): {self.key} alone explains {100 * self.share:.0f} % of "
                f"its interval; pinning {self.key} narrows the widest to "
                f"[{narrowed['low_cycles']:,}, {narrowed['high_cycles']:,}] "
                f"({j['narrowed_by_pct']:.0f} % narrower)")


def _share(iv: Interval) -> float:
    """What the dominant key alone explains of an interval's width."""
    if iv.dominant_key is None or iv.width_cycles == 0:
        return 0.0
    lo, hi = iv.alone[iv.dominant_key]
    return (hi - lo) / iv.width_cycles


def candidates(rows: list[Row], label: str) -> list[Candidate]:
    """The runs not yet measured of the ops measured under model ``label``: every variant at
    each measurement's size and at half its first dimension."""
    mine = [r for r in rows if r.model == label]
    seen = {(r.measurement.op, r.measurement.variant, r.measurement.shape,
             tuple(sorted(r.measurement.settings.items()))) for r in mine}
    out = []
    for r in mine:
        m = r.measurement
        half = (max(1, m.shape[0] // 2), *m.shape[1:])
        for variant in get_op(m.op).variants:
            for shape in dict.fromkeys((tuple(m.shape), half)):
                ident = (m.op, variant, shape, tuple(sorted(m.settings.items())))
                if ident in seen:
                    continue
                seen.add(ident)
                try:
                    iv = op_interval(r.run_model, m.op, variant, shape)
                except DspsimInputError:  # a run this platform refuses
                    continue
                out.append(Candidate(m.op, variant, shape, m.settings, iv))
    return out


def suggest(rows: list[Row]) -> Suggestion | None:
    """For the widest interval of ``rows``, the measurement that would narrow it most; None
    when no interval has a width."""
    ranged = [r for r in rows if r.interval.width_cycles > 0]
    if not ranged:
        return None
    widest = max(ranged, key=lambda r: r.interval.width_cycles / max(1, r.predicted))
    m = widest.measurement
    pinned: dict[str, Interval] = {}  # the widest row's interval with a key's range removed
    best: tuple[float, Candidate] | None = None
    for c in candidates(rows, widest.model):
        key = c.interval.dominant_key
        if key not in widest.run_model.ranges:
            continue
        if key not in pinned:
            ranges = {k: r for k, r in widest.run_model.ranges.items() if k != key}
            pinned[key] = op_interval(dataclasses.replace(widest.run_model, ranges=ranges),
                                      m.op, m.variant, m.shape)
        gain = (widest.interval.width_cycles - pinned[key].width_cycles) * _share(c.interval)
        if best is None or gain > best[0]:
            best = (gain, c)
    if best is None:
        return None
    c = best[1]
    return Suggestion(widest, c, c.interval.dominant_key, _share(c.interval),
                      pinned[c.interval.dominant_key])
