"""Values of a swept key that did not move the answer, as ``dspsim sweep`` and ``dspsim plot
sweep`` print them: per swept model key and setting of the other parameter columns, the values
whose points gave identical cycles form a group (one note for a group at several settings), with
the op's reason when it gives one (:meth:`dspsim.ops.base.Op.same_cycles_reason`, from each
value's model, which the sidecar gives).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.study.sweep.grid import DEFAULT_OP
from dspsim.study.sweep.sidecar import read_sidecar
from dspsim.study.sweep.table import key_columns, ok_rows, read_sweep
from dspsim.study.sweep.values import (
    MODEL_KEY,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    format_value,
    parse_shape,
)

MAX_NOTES = 5  # note lines printed; the rest are counted in one more line
# (a point's setting, the swept key, one of its values) -> the model of that run, or None
ModelAt = Callable[[Mapping[str, Any], str, Any], Any]


def _groups(ok: pd.DataFrame, key: str, others: list[str]
            ) -> dict[tuple, list[tuple[dict[str, Any], int]]]:
    """(values with identical cycles) -> [(the other columns' setting, the cycles)]."""
    found: dict[tuple, list[tuple[dict[str, Any], int]]] = {}
    parts = ok.groupby(others, sort=False, dropna=False) if others else [((), ok)]
    for name, part in parts:
        setting = dict(zip(others, name if isinstance(name, tuple) else (name,)))
        by_cycles: dict[int, list[Any]] = {}
        for value, cycles in zip(part[key], part["cycles"]):
            by_cycles.setdefault(int(cycles), []).append(value)
        for cycles, values in by_cycles.items():
            distinct = sorted(set(values))
            if len(distinct) > 1:
                found.setdefault(tuple(distinct), []).append((setting, cycles))
    return found


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


@functools.lru_cache(maxsize=64)
def _model(source: str, overrides: tuple[tuple[str, Any], ...]) -> Any:
    return load_model(source).with_overrides(dict(overrides))


def sidecar_models(path: str | Path) -> ModelAt | None:
    """The model of each point of a sweep file, from its sidecar (the model file, the keys it
    held fixed) and the point's parameter cells; None without a readable sidecar."""
    try:
        doc = read_sidecar(Path(path))
    except (DspsimInputError, OSError):
        return None

    def model_at(setting: Mapping[str, Any], key: str, value: Any) -> Any:
        label = setting.get(MODEL_KEY)
        source = doc["model_source"] if label is None else doc["model_source"][str(label)]
        fixed = doc["fixed_model"] if label is None else doc["fixed_model"][str(label)]
        cells = {k: _plain(v) for k, v in setting.items()
                 if k not in SPECIAL_KEYS and k != MODEL_KEY}
        return _model(source, tuple(sorted({**fixed, **cells, key: _plain(value)}.items())))

    return model_at


def _reason(setting: Mapping[str, Any], key: str, values: tuple,
            model_at: ModelAt | None = None) -> str | None:
    """The op's reason for the group at ``setting`` (its op, variant and size), if any."""
    op = get_op(str(setting.get("op", DEFAULT_OP)))
    variant = next((str(setting[k]) for k in VARIANT_KEYS if k in setting), op.default_variant)
    if "n" in setting:
        shape: tuple[int, ...] = (int(setting["n"]),)
    elif "shape" in setting:
        shape = parse_shape(str(setting["shape"]))
    else:
        shape = tuple(op.default_shape)
    try:
        models = [model_at(setting, key, v) for v in values] if model_at is not None else None
    except (DspsimInputError, KeyError, TypeError):  # a model that no longer loads: no reason
        models = None
    try:
        return op.same_cycles_reason(variant, shape, key, list(values), models)
    except (ValueError, TypeError):
        return None


def _lines(key: str, values: tuple, where: list[tuple[dict[str, Any], int]],
           model_at: ModelAt | None = None) -> list[str]:
    """A group's notes: one per reason the op gives at its settings' ops, variants and sizes
    (a key that does not act in direct may be port-bound in another variant)."""
    reasons: dict[tuple, str | None] = {}  # asked once per run: its op, variant and size
    by_reason: dict[str | None, list[tuple[dict[str, Any], int]]] = {}
    for setting, cycles in where:
        run = tuple(setting.get(k) for k in ("op", *VARIANT_KEYS, "n", "shape"))
        if run not in reasons:
            reasons[run] = _reason(setting, key, values, model_at)
        by_reason.setdefault(reasons[run], []).append((setting, cycles))
    return [_line(key, values, part, reason) for reason, part in by_reason.items()]


def _line(key: str, values: tuple, where: list[tuple[dict[str, Any], int]],
          reason: str | None) -> str:
    setting, cycles = where[0]
    shown = {k: v for k, v in setting.items() if k != "op" or setting.get("op") != DEFAULT_OP}
    at = ", ".join(f"{k}={format_value(v)}" for k, v in shown.items())
    rest = len(where) - 1
    more = f" and {rest} other setting{'s' if rest > 1 else ''}" if rest else ""
    text = (f"note: {key} = {', '.join(format_value(v) for v in values)} gave identical cycles "
            f"({cycles:,}{' at ' + at if at else ''}{more})")
    return f"{text}: {reason}" if reason else text


def identical_cycles_notes(df: pd.DataFrame, limit: int = MAX_NOTES,
                           model_at: ModelAt | None = None) -> list[str]:
    """The note lines of a sweep table: groups' notes until ``limit`` lines (a group whole),
    then one counting the groups left; ``model_at`` (:func:`sidecar_models`): each run's model."""
    if "cycles" not in df.columns:
        return []
    ok = ok_rows(df)
    ok = ok[ok["cycles"].notna()]
    keys = key_columns(df)
    groups = []
    for key in keys:
        if key in SPECIAL_KEYS or key == MODEL_KEY or ok[key].nunique() < 2:
            continue
        others = [k for k in keys if k != key]
        groups += [(key, values, where) for values, where in _groups(ok, key, others).items()]
    lines: list[str] = []
    shown = 0
    for group in groups:
        if len(lines) >= limit:
            break
        lines += _lines(*group, model_at)
        shown += 1
    if shown < len(groups):
        lines.append(f"note: {len(groups) - shown} more groups of values gave identical cycles "
                     "(see the table)")
    return lines


def identical_cycles_notes_of(path: Any) -> list[str]:
    """:func:`identical_cycles_notes` of a sweep file; none when it cannot be read back whole."""
    try:
        return identical_cycles_notes(read_sweep(path), model_at=sidecar_models(path))
    except DspsimInputError:
        return []
