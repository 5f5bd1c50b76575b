"""Writing a calibration back: the input model file with the fitted values.

``--out`` writes the input model file back with the fitted values, each with a comment saying
what it was fitted to and when; every other line and comment is kept.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from pathlib import Path
from typing import Any

from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write_text
from dspsim.study.calibrate.measure import is_int_key
from dspsim.study.calibrate.report import Calibration, reading

_LINE = re.compile(
    r"^(?P<lead>\s*(?P<name>[A-Za-z0-9_]+)\s*=\s*)(?P<value>[^#\r\n]*?)"
    r"(?P<gap>\s*)(?P<comment>#.*)?$"
)
_SECTION = re.compile(r"^\s*\[(?P<name>[A-Za-z0-9_.]+)\]\s*(#.*)?$")


def _toml_value(key: str, v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if is_int_key(key):
        return str(int(round(v)))
    return repr(float(f"{float(v):.6g}"))


def write_model_file(cal: Calibration, path: str | Path, date: _dt.date | None = None) -> Path:
    """Write the input model file with the fitted values (and any --set overrides) replaced."""
    src = Path(cal.model.source)
    try:
        text = src.read_text(encoding="utf-8")
    except OSError as e:
        raise DspsimInputError(
            f"--out: cannot read the input model file {str(src)!r} to copy it: "
            f"{e.__class__.__name__}"
        ) from None
    day = (date or _dt.date.today()).isoformat()
    targets = [m.spec(with_op=True) for m in cal.measurements]  # the op named: read alone
    what = (
        ", ".join(targets)
        if len(targets) <= 4
        else (f"{len(targets)} measurements ({', '.join(targets[:3])}, ...)")
    )
    others = [p.key for p in cal.free]
    replace: dict[str, tuple[Any, str]] = {}
    for k, v in cal.model.overrides:
        replace[k] = (v, f"set with --set on {day}")
    for p in cal.free:
        v = cal.values[p.key]
        with_ = [o for o in others if o != p.key]
        comment = (
            f"fitted by `dspsim calibrate` on {day} to {what}"
            + (f" (with {', '.join(with_)})" if with_ else "")
            + f", {cal.fidelity} fidelity"
        )
        r = reading(p.key, v, cal.fitted)
        if r:
            comment += f"; {r}"
        iv = next((iv for iv in cal.intervals if iv.key == p.key), None)
        if not cal.fitted_within_tolerance:
            comment += (
                f"; NOT within {cal.tolerance_pct:g} % of every measurement (worst "
                f"{100 * cal.best.worst:.3g} %)"
            )
        elif iv is not None:
            comment += (
                f"; all measurements within {cal.tolerance_pct:g} % for {iv.lo:.4g} .. "
                f"{iv.hi:.4g}" + ("" if iv.determined else " (NOT determined)")
            )
        replace[p.key] = (int(round(v)) if p.integer else v, comment)
    lines = text.splitlines(keepends=True)
    section = None
    done = set()
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        sec = _SECTION.match(body)
        if sec:
            section = sec.group("name")
            continue
        mt = _LINE.match(body)
        if not mt or section is None:
            continue
        key = f"{section}.{mt.group('name')}"
        if key not in replace:
            continue
        value, comment = replace[key]
        lead = mt.group("lead") + _toml_value(key, value)
        old_col = len(body) - len(mt.group("comment") or "") if mt.group("comment") else 0
        pad = max(1, old_col - len(lead)) if old_col else 2
        lines[i] = f"{lead}{' ' * pad}# {comment}{ending}"
        done.add(key)
    missing = set(replace) - done
    if missing:
        raise DspsimInputError(
            f"--out: {sorted(missing)[0]} has no `name = value` line under its [section] in "
            f"{src}; cannot write the fitted value back"
        )
    out = Path(path)
    atomic_write_text(out, "".join(lines), "--out")  # an earlier file survives a failed write
    check = load_model(out)
    for key, (value, _) in replace.items():
        got = check.get(key)
        ok = (
            got == value
            if isinstance(value, (str, int))
            else math.isclose(got, value, rel_tol=1e-5)
        )
        if not ok:
            raise DspsimInputError(f"--out {out}: {key} reads back as {got!r}, not {value!r}")
    return out
