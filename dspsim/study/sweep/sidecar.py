"""A sweep's sidecar ``FILE.sweep.json`` (``docs/reference.md``, "Sweep tables and their
sidecar"): what the file's rows were computed with, so that each row's key can be made again on
resume. A point's key (:func:`point_key`) hashes everything its result depends on: ``model``
(every hardware key and the point's op's own keys, each as its canonical text), ``op``,
``variant``, ``shape``, ``fidelity`` and ``version``; nothing else (the keys' order, the commit,
another op's keys). A format-3 sidecar (every op's keys) is read with the other ops' keys left
out and rewritten as format 4. A damaged sidecar, or another sweep's, is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
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
from dspsim.run import git_sha
from dspsim.schema import OP_SCHEMAS
from dspsim.study.sweep.files import sidecar_path
from dspsim.study.sweep.grid import Sweep
from dspsim.study.sweep.values import (
    MODEL_KEY,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    format_value,
    parse_shape,
)
from dspsim.tables import MemoryCfg
from dspsim.version import __version__

SIDECAR_KEYS = ("format", "format_version", "columns", "fidelity", "grid", "fixed_model",
                "model_source", "dspsim_version", "git_sha")
META_TAG = "dspsim-sweep"
META_FORMAT = 4
READS = (3, 4)  # format 3 is resumed and rewritten as 4
MAX_SIDECAR_BYTES = 256 << 20
SHA = r"[0-9a-f]{40}([0-9a-f]{24})?"  # a git commit: SHA-1 or SHA-256




def applies(key: str, ops: Iterable[str]) -> bool:
    """Whether model key ``key`` can act on a point of one of ``ops``: a hardware key, or a key
    of one of the ops."""
    section = key.partition(".")[0]
    return section not in OP_SCHEMAS or section in set(ops)


@functools.lru_cache(maxsize=1 << 16, typed=True)  # typed: True is not 1
def canon(key: str, value: Any) -> str:
    """A model key's value as its canonical text (a float key's ``100`` is ``100.0``)."""
    return format_value(float(value) if key_type(key) is float else value)


def key_default(key: str) -> Any:
    """The value a model key takes when a model file does not give it (None: it must)."""
    return model_key(key).default


def key_optional(key: str) -> bool:
    """Whether a model file (and so a sidecar's ``fixed_model``) may leave ``key`` out: a
    hardware key whose default is None, such as a memory's ``write_latency_cycles``."""
    k = model_key(key)
    table = MemoryCfg if is_memory_section(k.section) else HARDWARE.get(k.section)
    return table is not None and any(f.name == k.short and f.default is None
                                     for f in dataclasses.fields(table))


def sweep_values(flat: Mapping[str, Any], swept: Iterable[str], ops: Iterable[str]
                 ) -> dict[str, Any]:
    """The values a sweep of ``ops`` records of one model (``flat``: ``HardwareModel.flat()``):
    the keys that apply to its ops and that it does not sweep."""
    swept, ops = set(swept), tuple(ops)
    return {k: v for k, v in flat.items() if k not in swept and applies(k, ops)}


def sweep_version(ops: Iterable[str]) -> str:
    """The version a sweep of ``ops`` keys its rows by: dspsim's, and after a ``+`` a digest of
    the op files declaring any of ``ops`` (a changed file computes its rows again)."""
    from dspsim.ops.fileop import op_file_digest

    digest = op_file_digest(ops)
    return __version__ if digest is None else f"{__version__}+opfile.{digest}"


def point_key(fixed: Mapping[str, Any], point: Mapping[str, Any], fidelity: str,
              version: str = __version__) -> str:
    """The key of ``point`` (its swept keys' values, ``op``, the variant, ``n`` or ``shape``) on
    a model whose other values are ``fixed`` (canonical text or values), at ``fidelity``."""
    op = str(point["op"])
    values = {**fixed, **{k: v for k, v in point.items()
                          if k not in SPECIAL_KEYS and k != MODEL_KEY}}
    variant = next((point[k] for k in VARIANT_KEYS if k in point), None)
    shape = list(parse_shape(point["shape"])) if "shape" in point else [int(point["n"])]
    doc = {"model": {k: canon(k, v) for k, v in values.items() if applies(k, (op,))},
           "op": op, "variant": variant, "shape": shape, "fidelity": fidelity,
           "version": version}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class _DamagedError(ValueError):
    pass


def sweep_meta(sweep: Sweep) -> dict[str, Any]:
    """The sidecar of ``sweep`` (a sweep of several models: one entry per model)."""
    def per_model(of: Any) -> Any:
        return {label: of(m) for label, m in sweep.models} if sweep.models else of(sweep.model)

    return {
        "format": META_TAG, "format_version": META_FORMAT, "columns": sweep.columns,
        "fidelity": sweep.fidelity,
        "grid": [[k, [format_value(v) for v in values]] for k, values in sweep.axes],
        "fixed_model": per_model(lambda m: sweep_values(m.flat(), sweep.keys, sweep.ops)),
        "model_source": per_model(lambda m: m.source),
        "dspsim_version": sweep_version(sweep.ops), "git_sha": git_sha(),
    }


def _hint(out: Path) -> str:
    return (f"delete {out} and {sidecar_path(out).name} to start afresh, restore the sidecar, "
            "or choose another --out")


def _text(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _load(side: Path) -> Any:
    st = os.stat(side)
    if not stat.S_ISREG(st.st_mode):
        raise _DamagedError("not a regular file")
    if st.st_size > MAX_SIDECAR_BYTES:
        raise _DamagedError(f"larger than {MAX_SIDECAR_BYTES:,} bytes")
    try:
        with open(side, "rb") as f:
            return json.loads(f.read(MAX_SIDECAR_BYTES + 1).decode("utf-8").removeprefix(BOM))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise _DamagedError("not a JSON file written by dspsim sweep") from None


def read_sidecar(out: Path) -> dict[str, Any]:
    """The checked sidecar of ``out`` (which holds rows), its ``fixed_model`` limited to the
    keys that apply to its ops; one line when it is missing or damaged."""
    side = sidecar_path(out)
    what = f"{out} holds finished rows but its sidecar {side.name}"
    try:
        doc = _load(side)
        check_sidecar(doc)
    except FileNotFoundError:
        raise DspsimInputError(f"{what} is missing: nothing tells which sweep wrote them; "
                               f"{_hint(out)}") from None
    except OSError as e:
        raise DspsimInputError(f"sidecar {side} unreadable: {type(e).__name__}") from None
    except _DamagedError as e:
        raise DspsimInputError(f"{what} is damaged ({e}): nothing tells which sweep wrote "
                               f"them; {_hint(out)}") from None
    ops = dict(doc["grid"])["op"]
    kept = {label: {k: v for k, v in fixed.items() if applies(k, ops)}
            for label, fixed in _per_model(doc, doc["fixed_model"]).items()}
    doc["fixed_model"] = kept.pop(None) if None in kept else kept
    return doc


def _per_model(doc: dict[str, Any], value: Any) -> dict[str | None, Any]:
    """A per-model entry of a sidecar by model label (None: a sweep of one model)."""
    return dict(value) if MODEL_KEY in dict(doc["grid"]) else {None: value}


def check_sidecar(doc: Any) -> None:
    """Raise ``ValueError`` (a ``_DamagedError``) naming the first thing wrong with a sidecar."""
    if not isinstance(doc, dict):
        raise _DamagedError("not a JSON object")
    if doc.get("format") == 2 or doc.get("format_version") == 2:
        raise _DamagedError("format 2, written by an older dspsim that did not record the grid")
    for k in [*doc, *SIDECAR_KEYS]:
        if k not in SIDECAR_KEYS or k not in doc:
            raise _DamagedError(f"unknown key {_text(k)}" if k in doc else f"no {k}")
    if doc["format"] != META_TAG:
        raise _DamagedError(f"format {_text(doc['format'])}; expected {META_TAG!r}")
    if type(doc["format_version"]) is not int or doc["format_version"] not in READS:
        raise _DamagedError(f"format_version {_text(doc['format_version'])}; this dspsim reads "
                            f"{' or '.join(map(str, READS))}")
    columns = doc["columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) \
            or len(set(columns)) != len(columns) or "cycles" not in columns:
        raise _DamagedError("columns is not a list of distinct column names")
    if doc["fidelity"] not in FIDELITIES:
        raise _DamagedError(f"fidelity {_text(doc['fidelity'])}; allowed {', '.join(FIDELITIES)}")
    swept = columns[: columns.index("cycles")]
    _check_grid(doc["grid"], swept)
    _check_models(doc, swept)
    version, sha = doc["dspsim_version"], doc["git_sha"]
    if not isinstance(version, str) or not re.fullmatch(r"[0-9A-Za-z.+_-]{1,64}", version):
        raise _DamagedError(f"dspsim_version {_text(version)} is not a version")
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(SHA, sha)):
        raise _DamagedError(
            f"git_sha {_text(sha)} is neither a commit (40 or 64 hex digits) nor null")


def _check_grid(grid: Any, swept: list[str]) -> None:
    if not isinstance(grid, list) or not grid:
        raise _DamagedError("grid is not a list of [KEY, [VALUE, ...]] axes")
    for axis in grid:
        if (not isinstance(axis, list) or len(axis) != 2 or not isinstance(axis[0], str)
                or not isinstance(axis[1], list) or not axis[1]
                or not all(isinstance(v, str) for v in axis[1])
                or len(set(axis[1])) != len(axis[1])):
            raise _DamagedError(
                f"grid axis {_text(axis)} is not [KEY, [VALUE, ...]] (distinct text values)")
    keys = [k for k, _ in grid]
    if len(set(keys)) != len(keys) or set(keys) != set(swept) or "op" not in keys:
        raise _DamagedError(f"grid keys {', '.join(keys)} are not the parameter columns "
                            f"{', '.join(swept)}")


def _check_models(doc: dict[str, Any], swept: list[str]) -> None:
    """``fixed_model`` and ``model_source``: one entry, or one per model of the grid."""
    grid = dict(doc["grid"])
    fixed, sources = doc["fixed_model"], doc["model_source"]
    if MODEL_KEY in grid:
        labels = sorted(grid[MODEL_KEY])
        if not isinstance(fixed, dict) or sorted(fixed) != labels:
            raise _DamagedError("fixed_model is not an object of the grid's models")
        if not isinstance(sources, dict) or sorted(sources) != labels or not all(
                isinstance(v, str) and len(v) <= 4096 for v in sources.values()):
            raise _DamagedError("model_source is not an object of the grid's models' paths")
    elif not isinstance(sources, str) or len(sources) > 4096:
        raise _DamagedError(f"model_source {_text(sources)} is not a path")
    ops = grid["op"]
    every_op = doc["format_version"] == 3  # format 3 recorded every registered op's keys
    for label, values in _per_model(doc, fixed).items():
        what = "fixed_model" + (f" of {_text(label)}" if label is not None else "")
        _check_fixed(values, swept, ops, every_op, what)


def _check_fixed(fixed: Any, swept: list[str], ops: list[str], every_op: bool,
                 what: str) -> None:
    """One model's fixed values: every key that applies and is not swept (but one with a
    default: newer than the file), each of its type and in its range."""
    if not isinstance(fixed, dict):
        raise _DamagedError(f"{what} is not an object")
    memories = dict.fromkeys(k.split(".", 1)[0] for k in [*fixed, *swept]
                             if "." in k and is_memory_section(k.split(".", 1)[0]))
    if not memories:
        raise _DamagedError(f"{what} names no memory (a model has at least one)")
    known = [k for k in all_keys() if not is_memory_section(k.split(".", 1)[0])]
    known += [k for m in memories for k in memory_keys(m)]
    expect = [k for k in known if k not in swept and (every_op or applies(k, ops))]
    for k in fixed:
        if k not in expect:
            raise _DamagedError(f"{what} has {'swept' if k in swept else 'unknown'} key "
                                f"{_text(k)}")
    for k in expect:
        if k in fixed:
            _check_model_value(k, fixed[k])
        elif key_default(k) is None and not key_optional(k):  # a key with a default may be
            # newer than the file; an optional key the model leaves out is left out here too
            raise _DamagedError(f"{what} has no {k} (a key without a default)")


def _check_model_value(key: str, value: Any) -> None:
    t = key_type(key)
    kind = int | float if t is float else t  # an int is a float's value; a bool is only a bool
    if isinstance(value, bool) != (t is bool) or not isinstance(value, kind):
        raise _DamagedError(f"fixed_model {key} = {_text(value)} is not of type {t.__name__}")
    try:
        check_value(key, value)
    except DspsimInputError as e:
        raise _DamagedError(f"fixed_model {e}") from None


def _values(values: list[str]) -> str:
    shown = ",".join(values[:4])
    return shown + (f",... ({len(values):,} values)" if len(values) > 4 else "")


def _different(out: Path, what: str) -> DspsimInputError:
    return DspsimInputError(
        f"{out} was written by a different sweep ({what}); choose another --out or delete it "
        f"and {sidecar_path(out).name} to start afresh")


def compare(out: Path, sweep: Sweep, old: dict[str, Any], rows: int) -> bool:
    """Refuse ``old`` (a checked sidecar of ``out``) when it is another sweep's; a note when the
    sweep extends the grid, a key is newer than the file, or another dspsim version computed
    the rows. Returns whether to rewrite the sidecar."""
    new = sweep_meta(sweep)
    if old["columns"] != new["columns"]:
        raise _different(out, f"columns {','.join(old['columns'])} there, "
                              f"{','.join(new['columns'])} here")
    if old["fidelity"] != new["fidelity"]:
        raise _different(out, f"fidelity {old['fidelity']} there, {new['fidelity']} here")
    newer = _newer_keys(out, old, new)
    grown = _grown(out, old["grid"], new["grid"])
    if newer:
        values = "; ".join(f"{k} = {v}" for k, v in newer.items())
        print(f"dspsim: note: {out} was begun before {', '.join(newer)} existed: its rows are "
              f"resumed as computed at the default ({values}), which its sidecar now records",
              file=sys.stderr)
    if grown:
        print(f"dspsim: note: extending the sweep in {out}: {'; '.join(grown)}", file=sys.stderr)
    if old["dspsim_version"] != new["dspsim_version"]:  # after a "+": the op files' digest
        print(f"dspsim: note: the {rows:,} rows in {out} were computed by dspsim "
              f"{old['dspsim_version']}; this is dspsim {new['dspsim_version']} (a digest after "
              "'+' is of the op files): they are computed again", file=sys.stderr)
    return bool(newer or grown or old["format_version"] != META_FORMAT
                or old["dspsim_version"] != new["dspsim_version"])


def _newer_keys(out: Path, old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    """Keys of this dspsim the file was begun without (at their defaults); a fixed value that
    differs is another sweep."""
    newer: dict[str, str] = {}
    theirs_all = _per_model(old, old["fixed_model"])
    for label, ours in _per_model(new, new["fixed_model"]).items():
        if label not in theirs_all:
            continue  # a model new to the grid
        theirs, which = theirs_all[label], f" (model {label})" if label is not None else ""
        for k, v in ours.items():
            if k in theirs:
                if canon(k, theirs[k]) != canon(k, v):
                    raise _different(out, f"{k} = {canon(k, theirs[k])} there, "
                                          f"{canon(k, v)} here{which}")
            elif key_optional(k):  # an optional key the file left unset
                raise _different(out, f"{k} unset there, {canon(k, v)} here{which}")
            elif key_default(k) is None or canon(k, key_default(k)) != canon(k, v):
                raise _different(out, f"{k} = {v} here{which}; the file was begun before the "
                                      f"key existed, that is at its default {key_default(k)}")
            else:
                newer[k] = format_value(v)
        for k in (k for k in theirs if k not in ours):  # set there, left unset here
            raise _different(out, f"{k} = {canon(k, theirs[k])} there, unset here{which}")
    return newer


def _grown(out: Path, old_grid: list, new_grid: list) -> list[str]:
    """What the new grid adds to the recorded one; another grid is another sweep."""
    ours = dict(new_grid)
    grown = []
    for k, values in old_grid:
        had = set(values)
        if not had.issubset(ours[k]):
            raise _different(out, f"{k} {_values(values)} there, {_values(ours[k])} here; a "
                                  "resume may only add values to the grid")
        added = [v for v in ours[k] if v not in had]
        if added:
            grown.append(f"{k} gains {_values(added)}")
    return grown
