"""A sweep's sidecar ``FILE.sweep.json``: what made the file, checked strictly on resume.

The sidecar (:meth:`dspsim.study.sweep.grid.Sweep.meta`) holds exactly these keys:

- ``format``: ``"dspsim-sweep"``; ``format_version``: 3 (format 2, from older versions,
  recorded no grid: such a file cannot be resumed);
- ``columns``: the table's columns; ``fidelity``;
- ``grid``: the swept axes in grid order, ``[[KEY, [VALUE, ...]], ...]`` (values as the table's
  canonical text);
- ``fixed_model``: every model key that is not swept, with its value (its key's type); a key
  with a default may be missing: the file was begun before dspsim had the key, so its rows were
  computed as at the key's default (a resume at that default says so in one line and records
  it; at another value it is another sweep);
- ``model_source``, ``dspsim_version``, ``git_sha`` (or null): provenance.

A sweep of several models (a ``model`` axis) records ``fixed_model`` and ``model_source`` per
model: an object from each model's label to what a single model's sidecar holds.

Anything else (a key missing or unknown, a wrong type, a value out of its key's range, a model
key missing) makes the sidecar *damaged*: the file is refused, since nothing would tell which
sweep wrote its rows. A sidecar of another sweep (other columns, fidelity or fixed values, or a
grid that is not contained in this one) is refused too. A grid that *contains* the recorded one
(same keys, each key's values a superset) extends the file: the new points are computed and the
sidecar records the larger grid (a one-line note says so). Another dspsim version or commit is
reported (one line on stderr) but not refused: the rows stay, since a commit that does not touch
the model would otherwise make every sweep start over; the sidecar keeps the provenance of the
run that began the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from dspsim.config import (
    HARDWARE,
    all_keys,
    check_value,
    is_memory_section,
    key_type,
    memory_keys,
    model_key,
)
from dspsim.errors import DspsimInputError
from dspsim.paths import BOM
from dspsim.platform import FIDELITIES
from dspsim.study.sweep.files import sidecar_path
from dspsim.study.sweep.grid import META_FORMAT, META_TAG, Sweep
from dspsim.study.sweep.values import MODEL_KEY, format_value
from dspsim.tables import MemoryCfg

SIDECAR_KEYS = ("format", "format_version", "columns", "fidelity", "grid", "fixed_model",
                "model_source", "dspsim_version", "git_sha")
MAX_SIDECAR_BYTES = 256 << 20  # a grid of 10,000,000 points needs far less
PROVENANCE = ("dspsim_version", "git_sha")


class _DamagedError(ValueError):
    pass


def _hint(out: Path) -> str:
    return (f"delete {out} and {sidecar_path(out).name} to start afresh, restore the sidecar, "
            "or choose another --out")


def _different(out: Path, what: str) -> DspsimInputError:
    return DspsimInputError(
        f"{out} was written by a different sweep ({what}); choose another --out or delete it "
        f"and {sidecar_path(out).name} to start afresh"
    )


def read_sidecar(out: Path, rows: int) -> dict[str, Any]:
    """The checked sidecar of ``out``, which holds ``rows`` finished rows; one-line errors when
    it is missing or damaged."""
    side = sidecar_path(out)
    try:
        st = os.stat(side)
    except FileNotFoundError:
        raise DspsimInputError(
            f"{out} holds {rows:,} finished rows but its sidecar {side.name} is missing: "
            f"nothing tells which sweep wrote them; {_hint(out)}"
        ) from None
    except OSError as e:
        raise DspsimInputError(f"sidecar {side} unreadable: {type(e).__name__}") from None
    try:
        if not stat.S_ISREG(st.st_mode):
            raise _DamagedError("not a regular file")
        if st.st_size > MAX_SIDECAR_BYTES:
            raise _DamagedError(f"larger than {MAX_SIDECAR_BYTES:,} bytes")
        try:
            with open(side, "rb") as f:
                text = f.read(MAX_SIDECAR_BYTES + 1).decode("utf-8").removeprefix(BOM)
            doc = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            raise _DamagedError("not a JSON file written by dspsim sweep") from None
        check_sidecar(doc)
    except _DamagedError as e:
        raise DspsimInputError(
            f"{out} holds {rows:,} finished rows but its sidecar {side.name} is damaged "
            f"({e}): nothing tells which sweep wrote them; {_hint(out)}"
        ) from None
    return doc


SHA = r"[0-9a-f]{40}([0-9a-f]{24})?"  # a git commit: SHA-1 or SHA-256


def _text(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_sidecar(doc: Any) -> None:
    """Raise ``ValueError`` (a ``_DamagedError``) naming the first thing wrong with a sidecar."""
    if not isinstance(doc, dict):
        raise _DamagedError("not a JSON object")
    if doc.get("format") == 2 or doc.get("format_version") == 2:
        raise _DamagedError("format 2, written by an older dspsim that did not record the grid")
    for k in doc:
        if k not in SIDECAR_KEYS:
            raise _DamagedError(f"unknown key {_text(k)}")
    for k in SIDECAR_KEYS:
        if k not in doc:
            raise _DamagedError(f"no {k}")
    if doc.get("format") != META_TAG:
        raise _DamagedError(f"format {_text(doc.get('format'))}; expected {META_TAG!r}")
    if type(doc.get("format_version")) is not int or doc["format_version"] != META_FORMAT:
        raise _DamagedError(f"format_version {_text(doc.get('format_version'))}; this dspsim reads "
                       f"{META_FORMAT}")
    columns, grid, fixed = doc["columns"], doc["grid"], doc["fixed_model"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) \
            or len(set(columns)) != len(columns) or "cycles" not in columns:
        raise _DamagedError("columns is not a list of distinct column names")
    if doc["fidelity"] not in FIDELITIES:
        raise _DamagedError(f"fidelity {_text(doc['fidelity'])}; allowed {', '.join(FIDELITIES)}")
    if not isinstance(grid, list) or not grid:
        raise _DamagedError("grid is not a list of [KEY, [VALUE, ...]] axes")
    keys = []
    for axis in grid:
        if (not isinstance(axis, list) or len(axis) != 2 or not isinstance(axis[0], str)
                or not isinstance(axis[1], list) or not axis[1]
                or not all(isinstance(v, str) for v in axis[1])
                or len(set(axis[1])) != len(axis[1])):
            raise _DamagedError(
                f"grid axis {_text(axis)} is not [KEY, [VALUE, ...]] (distinct text values)")
        keys.append(axis[0])
    swept = columns[: columns.index("cycles")]
    if len(set(keys)) != len(keys) or set(keys) != set(swept):
        raise _DamagedError(f"grid keys {', '.join(keys)} are not the parameter columns "
                       f"{', '.join(swept)}")
    if MODEL_KEY in swept:  # a sweep of several models: fixed values and source per model
        labels = next(v for k, v in grid if k == MODEL_KEY)
        if not isinstance(fixed, dict) or sorted(fixed) != sorted(labels):
            raise _DamagedError("fixed_model is not an object of the grid's models")
        for label in labels:
            _check_fixed(fixed[label], swept, f"fixed_model of {_text(label)}")
        sources = doc["model_source"]
        if not isinstance(sources, dict) or sorted(sources) != sorted(labels) or not all(
                isinstance(v, str) and len(v) <= 4096 for v in sources.values()):
            raise _DamagedError("model_source is not an object of the grid's models' paths")
    else:
        _check_fixed(fixed, swept, "fixed_model")
        if not isinstance(doc["model_source"], str) or len(doc["model_source"]) > 4096:
            raise _DamagedError(f"model_source {_text(doc['model_source'])} is not a path")
    version = doc["dspsim_version"]
    if not isinstance(version, str) or not re.fullmatch(r"[0-9A-Za-z.+_-]{1,64}", version):
        raise _DamagedError(f"dspsim_version {_text(version)} is not a version")
    sha = doc["git_sha"]
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(SHA, sha)):
        raise _DamagedError(
            f"git_sha {_text(sha)} is neither a commit (40 or 64 hex digits) nor null")


def _check_fixed(fixed: Any, swept: list[str], what: str) -> None:
    """One model's fixed values: every model key that is not swept (one with a default may be
    missing: newer than the file), each of its key's type and in its range."""
    if not isinstance(fixed, dict):
        raise _DamagedError(f"{what} is not an object")
    expect = [k for k in _model_keys(fixed, swept) if k not in swept]
    for k in fixed:
        if k not in expect:
            raise _DamagedError(f"{what} has {'swept' if k in swept else 'unknown'} key "
                                f"{_text(k)}")
    for k in expect:
        if k not in fixed:
            if key_default(k) is None:  # a key with a default may be newer than the file
                raise _DamagedError(f"{what} has no {k} (a key without a default)")
            continue
        _check_model_value(k, fixed[k])


def key_default(key: str) -> Any:
    """The value a model key takes when a model file does not give it (None: it must)."""
    k = model_key(key)
    table = MemoryCfg if is_memory_section(k.section) else HARDWARE.get(k.section)
    if table is not None:
        f = next(f for f in dataclasses.fields(table) if f.name == k.short)
        return None if f.default is dataclasses.MISSING else f.default
    return k.default


def _model_keys(fixed: dict[str, Any], swept: list[str]) -> list[str]:
    """The keys a sweep's model has: every hardware and op key but the memories', then every
    key of each memory the sidecar names (J6: ``ddr``; a model file may declare others, and
    need not have a ``ddr``)."""
    def section(key: str) -> str:
        return key.split(".", 1)[0]

    memories = dict.fromkeys(section(k) for k in [*fixed, *swept]
                             if "." in k and is_memory_section(section(k)))
    if not memories:
        raise _DamagedError("fixed_model names no memory (a model has at least one)")
    keys = [k for k in all_keys() if not is_memory_section(section(k))]
    return keys + [k for m in memories for k in memory_keys(m)]


def _check_model_value(key: str, value: Any) -> None:
    t = key_type(key)
    ok = (isinstance(value, bool) if t is bool
          else isinstance(value, int) and not isinstance(value, bool) if t is int
          else isinstance(value, int | float) and not isinstance(value, bool) if t is float
          else isinstance(value, str))
    if not ok:
        raise _DamagedError(f"fixed_model {key} = {_text(value)} is not of type {t.__name__}")
    try:
        check_value(key, value)
    except DspsimInputError as e:
        raise _DamagedError(f"fixed_model {e}") from None


def _values(values: list[str]) -> str:
    shown = ",".join(values[:4])
    return shown + (f",... ({len(values):,} values)" if len(values) > 4 else "")


def check_same_sweep(out: Path, sweep: Sweep, rows: int) -> dict[str, Any] | None:
    """Refuse a file whose sidecar is missing, damaged or of another sweep; return the sidecar
    to write when ``sweep`` extends the recorded grid (None when it is the same sweep), and
    print a one-line note when the rows were computed by other code."""
    import sys

    old = read_sidecar(out, rows)
    new = sweep.meta()
    if old["columns"] != new["columns"]:
        raise _different(out, f"columns {','.join(old['columns'])} there, "
                              f"{','.join(new['columns'])} here")
    if old["fidelity"] != new["fidelity"]:
        raise _different(out, f"fidelity {old['fidelity']} there, {new['fidelity']} here")
    newer: dict[str, str] = {}  # keys added to dspsim since the file was begun: default there
    if sweep.models:  # per model of both (a model only here is new to the grid)
        pairs = [(old["fixed_model"][label], fixed, f" (model {label})")
                 for label, fixed in new["fixed_model"].items() if label in old["fixed_model"]]
    else:
        pairs = [(old["fixed_model"], new["fixed_model"], "")]
    for theirs_fixed, ours_fixed, which in pairs:
        for k, v in ours_fixed.items():
            if k not in theirs_fixed:
                if key_default(k) != v:
                    raise _different(out, f"{k} = {v} here{which}; the file was begun before "
                                          f"the key existed, that is at its default "
                                          f"{key_default(k)}")
                newer[k] = format_value(v)
            elif theirs_fixed[k] != v:
                raise _different(out, f"{k} = {theirs_fixed[k]} there, {v} here{which}")
    theirs = dict((k, v) for k, v in old["grid"])
    ours = dict((k, v) for k, v in new["grid"])
    grown = []
    for k, values in theirs.items():
        here = set(ours[k])
        if not here.issuperset(values):
            raise _different(
                out, f"{k} {_values(values)} there, {_values(ours[k])} here; a resume may only "
                "add values to the grid"
            )
        added = [v for v in ours[k] if v not in set(values)]
        if added:
            grown.append(f"{k} gains {_values(added)}")
    _note_provenance(out, old, new, rows, sys.stderr)
    if newer:
        keys = ", ".join(newer)
        values = "; ".join(f"{k} = {v}" for k, v in newer.items())
        print(f"dspsim: note: {out} was begun before {keys} existed: its rows are resumed as "
              f"computed at the default ({values}), which its sidecar now records",
              file=sys.stderr)
    if not grown and not newer:
        return None
    if grown:
        print(f"dspsim: note: extending the sweep in {out}: {'; '.join(grown)}", file=sys.stderr)
    return {**new, **{k: old[k] for k in PROVENANCE}}


def _note_provenance(out: Path, old: dict, new: dict, rows: int, stream) -> None:
    def who(meta: dict) -> str:
        sha = meta["git_sha"]
        return f"dspsim {meta['dspsim_version']}" + (f" (commit {sha[:12]})" if sha else "")

    changed = old["dspsim_version"] != new["dspsim_version"] or (
        old["git_sha"] and new["git_sha"] and old["git_sha"] != new["git_sha"])
    if changed:
        print(f"dspsim: note: the {rows:,} rows in {out} were begun by {who(old)}; this is "
              f"{who(new)}: they are kept; delete {out} and {sidecar_path(out).name} to compute "
              "them all again", file=stream)
