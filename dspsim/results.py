"""Save a run to a file and load it back.

A saved run is one JSON document (``.json``, or gzip-compressed ``.json.gz``)::

    {"format": "dspsim-run", "format_version": 2,
     "result": {...Result.to_json()...},   # op, variant, shape, core, engines, rpc_cycles, ...
     "model": {"name", "source", "overrides",
               "sections": {table: {...}}},  # hardware and op tables (HardwareModel.as_dict)
     "origin_cycle": ...,                  # absolute cycle of the op's timer start
     "trace": {column: [values]},          # trace rows, times relative to the op's timer
     "port_log": {field: [values]}}        # DDR requests, absolute cycles as in Result

It holds everything the timeline, the Perfetto export and the report need, so ``dspsim plot
timeline RUN`` and ``dspsim report RUN`` work without simulating again. The output array
(the op's output values) is not saved.

Version 1 (the release before operators plugged in) ran its one op on one core and named that
core ``core`` and the core's channels and DataRAMs without it (``idma0``, ``dram0``); its
result had ``mode`` and ``n``. :func:`load_run` reads it as version 2: the op is the one op table
of its model, the variant its mode, the shape ``(n,)``, ``core.count = 1``, and every engine and
memory takes the name today's platform gives it (``core0``, ``core0.idma0``, ``core0.dram0``).

:func:`save_run` writes atomically (:mod:`dspsim.paths`). :func:`load_run` trusts nothing in the
file: it reads at most :data:`MAX_RUN_BYTES` (decompressed: a gzip bomb stops there), rebuilds the
model through :func:`dspsim.config.build_model` (as a model file's tables are checked) and checks
every other field (types, ranges, finite numbers, engine names among the run's ``engines``, a
non-empty trace); anything else is one line. A trace cut by ``--trace-limit`` is saved with
``trace_rows_dropped`` and loaded with ``trace.attrs["rows_dropped"]``.

This module sits below :mod:`dspsim.analysis`: it never imports an analysis.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspsim.config import HardwareModel, build_model, model_key
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write, suffix_of, writable_file
from dspsim.probes import COLUMNS, PORT_LOG_FIELDS, TRACE_KINDS, PortLog, TraceTable
from dspsim.schema import OP_SCHEMAS

if TYPE_CHECKING:
    from dspsim.run import Result

FORMAT = "dspsim-run"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
DOCUMENT_KEYS = {"format", "format_version", "result", "model", "origin_cycle", "trace",
                 "port_log", "trace_rows_dropped", "trace_cut_cycle", "port_log_cut_cycle"}
CUT_FIELDS = ("trace_cut_cycle", "port_log_cut_cycle")  # where --trace-limit cut each log
# every count and cycle in a run is below this: float64 holds each such integer exactly
MAX_MAGNITUDE = 2**53
SAVE_SUFFIXES = (".json", ".json.gz")
# a saved run (decompressed) larger than this is refused: a gzip bomb stops here
MAX_RUN_BYTES = 512 << 20
ENGINE_KINDS = ("core", "idma", "ddr")


def check_save_path(path: str | Path) -> Path:
    return writable_file(path, "saved-run file", tuple(SAVE_SUFFIXES))


def run_document(result: Any) -> dict[str, Any]:
    """The saved form of a run (needs its trace; the port log is saved when present)."""
    if result.trace is None:
        raise DspsimInputError("cannot save a run without its trace: simulate with trace=True")
    model: HardwareModel = result.model
    trace = result.trace_table
    doc: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "result": result.to_json(),
        "model": {
            "name": model.name,
            "source": model.source,
            "overrides": [list(kv) for kv in model.overrides],
            "sections": model.as_dict(),
        },
        "origin_cycle": float(result.origin_cycle),
        "trace": {c: trace[c].tolist() for c in COLUMNS},
        "port_log": None,
    }
    dropped = trace.rows_dropped
    if dropped:  # a trace cut by a row limit says so
        doc["trace_rows_dropped"] = dropped
    for k in CUT_FIELDS:
        if getattr(result, k, None) is not None:
            doc[k] = float(getattr(result, k))
    if result.port_log is not None:
        cols = PortLog.of(result.port_log).columns()
        doc["port_log"] = {f: cols[f].tolist() for f in PORT_LOG_FIELDS}
    return doc


def save_run(result: Any, path: str | Path) -> Path:
    """Write ``result`` to ``path`` (``.json`` or ``.json.gz``), atomically: on any failure an
    earlier file at ``path`` is left as it was."""
    p = check_save_path(path)
    data = json.dumps(run_document(result), separators=(",", ":"), default=json_default).encode()

    def write(f) -> None:
        if suffix_of(p, SAVE_SUFFIXES) == ".json.gz":
            with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6) as g:
                g.write(data)
        else:
            f.write(data)

    atomic_write(p, write, "saved-run file")
    return p


def _not_a_run(p: Path, why: str) -> DspsimInputError:
    return DspsimInputError(
        f"{str(p)!r} is not a dspsim result ({why}); expected a file written by "
        "`dspsim run --save FILE.json`"
    )


def _read_capped(p: Path, limit: int) -> bytes:
    """The file's bytes, gunzipped when it is gzip; more than ``limit`` bytes (once
    decompressed) is refused without reading further."""
    with open(p, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        src = gzip.GzipFile(fileobj=f, mode="rb") if gz else f
        chunks, total = [], 0
        while chunk := src.read(1 << 20):
            total += len(chunk)
            if total > limit:
                what = "decompresses to" if gz else "is"
                raise _not_a_run(p, f"{what} more than {limit:,} bytes")
            chunks.append(chunk)
    return b"".join(chunks)


def load_run(path: str | Path) -> Result:
    """Read a saved run back as a :class:`dspsim.run.Result` (with trace, port log, model).

    Version-1 files are migrated (see the module docstring); other versions are refused. Every
    field is checked (types, ranges, engine names, the model as a model file's tables are):
    anything else is a one-line :class:`DspsimInputError`.
    """
    from dspsim.run import JSON_FIELDS, Result

    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except OSError:
        raise DspsimInputError(f"result file {str(p)!r} not found") from None
    if not stat.S_ISREG(mode):
        raise DspsimInputError(f"result file {str(p)!r} is not a regular file")
    try:
        doc = json.loads(_read_capped(p, MAX_RUN_BYTES).decode("utf-8"))
    except DspsimInputError:
        raise
    except (OSError, EOFError, UnicodeDecodeError, ValueError, gzip.BadGzipFile):
        raise _not_a_run(p, "not JSON") from None
    except RecursionError:
        raise _not_a_run(p, "nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _not_a_run(p, "no dspsim-run format tag")
    version = doc.get("format_version")
    if not _is_int(version) or version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise DspsimInputError(
            f"{str(p)!r}: saved-run format version {version!r}; this dspsim reads versions "
            f"{readable}"
        )
    try:
        model = _model(doc["model"], p, version)
        if version == 1:
            _upgrade_v1(doc, model)
        check_document(doc)
        trace = TraceTable(doc["trace"], doc.get("trace_rows_dropped", 0))
        port = doc["port_log"]
        port_log = None if port is None else PortLog.from_columns(port)
        r = doc["result"]
        init = {f.name for f in dataclasses.fields(Result) if f.init}
        values = {k: r[k] for k in JSON_FIELDS if k in init and k in r}
        values["shape"] = tuple(int(d) for d in values["shape"])
        return Result(
            **values,
            trace_table=trace,
            port_log=port_log,
            model=model,
            origin_cycle=float(doc["origin_cycle"]),
            **{k: None if doc.get(k) is None else float(doc[k]) for k in CUT_FIELDS},
        )
    except DspsimInputError:
        raise
    except _MalformedError as e:
        raise _not_a_run(p, str(e)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise _not_a_run(p, f"missing or malformed field: {e}") from None


def _model(m: dict[str, Any], p: Path, version: int) -> HardwareModel:
    """The saved model, rebuilt and checked as a model file's tables are."""
    if not isinstance(m, dict):
        raise _MalformedError("model is not a table")
    sections = m["sections"]
    if not isinstance(sections, dict) or not all(isinstance(t, dict) for t in sections.values()):
        raise _MalformedError("model sections are not a table of tables")
    for k in ("name", "source"):
        if not isinstance(m[k], str):
            raise _MalformedError(f"model {k} = {m[k]!r}: expected a string")
    overrides = m["overrides"]
    if not isinstance(overrides, list) or not all(
        isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in overrides
    ):
        raise _MalformedError("model overrides: expected a list of [key, value] pairs")
    if version == 1:  # one core, before the key existed
        count = model_key("core.count")
        sections[count.section] = {count.short: 1, **sections.get(count.section, {})}
    try:
        model = build_model(sections, m["source"])
    except DspsimInputError as e:
        raise DspsimInputError(f"{str(p)!r}: its model does not load here: {e}") from None
    return dataclasses.replace(
        model, name=m["name"], overrides=tuple(tuple(kv) for kv in overrides)
    )


def _upgrade_v1(doc: dict[str, Any], model: HardwareModel) -> None:
    """Rewrite a version-1 document as version 2, in place (see the module docstring)."""
    ops = [s for s in doc["model"]["sections"] if s in OP_SCHEMAS]
    if len(ops) != 1:
        raise KeyError(f"version 1 holds one op table; found {len(ops)}")
    names, engines, core = _v1_names(model)
    r = doc["result"]
    r.update(
        op=ops[0],
        variant=r.pop("mode"),
        shape=[int(r.pop("n"))],
        core=core,
        engines=engines,
        rpc_cycles=0,  # not measured in version 1
    )
    r["busy_cycles"] = {names.get(k, k): v for k, v in r["busy_cycles"].items()}
    for h in r.get("hazards") or []:  # "engine what" pairs
        h["memory"] = names.get(h["memory"], h["memory"])
        pairs = (x.split(" ", 1) for x in h["engines"])
        h["engines"] = [" ".join((names.get(e, e), *rest)) for e, *rest in pairs]
    doc["trace"]["engine"] = [names.get(e, e) for e in doc["trace"]["engine"]]
    port = doc["port_log"]
    if port is not None:
        port["requester"] = [names.get(e, e) for e in port["requester"]]
    doc["format_version"] = 2


def _v1_names(model: HardwareModel) -> tuple[dict[str, str], dict[str, str], str]:
    """Version-1 names -> today's, and today's engines and core, for a run of ``model``.

    Today's names are the platform's own; version 1 named the core by its kind and the core's
    channels and DataRAMs without the core's prefix.
    """
    import simpy

    from dspsim.platform import Platform

    platform = Platform(simpy.Environment(), model, data=False)  # one core: core.count = 1
    dsp = platform.dsps[0]
    engines = platform.engines
    names = {engines[dsp.name]: dsp.name}
    for name in [*engines, *(m.name for m in dsp.tm.banks), platform.ddr.name]:
        names.setdefault(name.removeprefix(f"{dsp.name}."), name)
    return names, engines, dsp.name


def json_default(o: Any) -> Any:
    """``json`` fallback for numpy scalars and arrays."""
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ------------------------------------------------------------------ checking a saved run
class _MalformedError(ValueError):
    """A field of a saved run is missing, of the wrong type or out of range."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    """A finite number float64 holds (an int beyond it would overflow on conversion)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return abs(v) <= MAX_MAGNITUDE if isinstance(v, int) else math.isfinite(v)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(v: Any, where: str, lo: int = 0) -> int:
    if not _is_int(v) or not lo <= v <= MAX_MAGNITUDE:
        raise _MalformedError(
            f"{where} = {_short(v)}: expected an integer from {lo} to 2**53")
    return v


def _num(v: Any, where: str, lo: float | None = 0.0) -> float:
    if not _is_num(v) or (lo is not None and v < lo) or abs(v) > MAX_MAGNITUDE:
        floor = f"{lo:g} to" if lo is not None else "at most"
        raise _MalformedError(f"{where} = {_short(v)}: expected a finite number, {floor} 2**53")
    return float(v)


def _typed(v: Any, t: type, where: str) -> Any:
    if not isinstance(v, t):
        raise _MalformedError(f"{where}: expected {'a table' if t is dict else f'a {t.__name__}'}")
    return v


def _column(values: Any, where: str, kind: str, allowed: set[str] | None = None,
            allowed_name: str = "the run's engines") -> None:
    """A whole column at once: ``kind`` int (>= -1), num (finite), nonneg (finite >= 0), str,
    bool; ``allowed``: the strings it may hold."""
    import numpy as np

    if kind == "str":
        if not all(type(x) is str for x in values):
            raise _MalformedError(f"{where}: expected text in every row")
        if allowed is not None and not set(values) <= allowed:
            bad = sorted(set(values) - allowed)[0]
            raise _MalformedError(
                f"{where}: {_short(bad)} is not one of {allowed_name} {sorted(allowed)}"
            )
        return
    if kind == "bool":
        if not all(type(x) is bool for x in values):
            raise _MalformedError(f"{where}: expected true or false in every row")
        return
    if any(type(x) is bool for x in values):
        raise _MalformedError(f"{where}: expected numbers, found true/false")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError):
        arr = np.asarray([None])
    if arr.ndim != 1 or arr.dtype.kind not in ("i" if kind == "int" else "if"):
        raise _MalformedError(f"{where}: expected {'integers' if kind == 'int' else 'numbers'}")
    if kind == "int" and len(arr) and arr.min() < -1:
        raise _MalformedError(f"{where}: {int(arr.min())} is below -1")
    if kind in ("num", "nonneg") and not np.isfinite(arr.astype(float)).all():
        raise _MalformedError(f"{where}: NaN or infinite values")
    if len(arr) and np.abs(arr.astype(float)).max() > MAX_MAGNITUDE:
        raise _MalformedError(f"{where}: values beyond 2**53")
    if kind == "nonneg" and len(arr) and arr.min() < 0:
        raise _MalformedError(f"{where}: negative values")


def _check_sequential(trace: dict[str, list]) -> None:
    """An engine does one thing at a time: no two rows of one engine overlap."""
    import numpy as np

    engine = np.asarray(trace["engine"], dtype=object)
    start = np.asarray(trace["start_cycle"], dtype=float)
    end = np.asarray(trace["end_cycle"], dtype=float)
    for name in set(trace["engine"]):
        sel = engine == name
        order = np.argsort(start[sel], kind="stable")
        s, e = start[sel][order], end[sel][order]
        slack = 1e-6 * np.maximum(1.0, np.abs(e[:-1]))
        if (s[1:] < e[:-1] - slack).any():
            raise _MalformedError(f"trace: two rows of engine {name!r} overlap (an engine does "
                                  "one thing at a time)")


def check_document(doc: dict[str, Any]) -> None:
    """Check a (version 2) saved run field by field; raises ``_MalformedError`` naming the first
    bad one. The model is checked by :func:`dspsim.config.build_model` (see ``_model``)."""
    from dspsim.ops import get_op
    from dspsim.run import JSON_FIELDS

    unknown = sorted(set(doc) - DOCUMENT_KEYS)
    if unknown:
        raise _MalformedError(f"unknown field {unknown[0]!r} (a saved run has "
                              f"{', '.join(sorted(DOCUMENT_KEYS))})")
    r = _typed(doc["result"], dict, "result")
    unknown = sorted(set(r) - set(JSON_FIELDS))
    if unknown:
        raise _MalformedError(f"unknown field result.{unknown[0]!r}")
    engines = _typed(r["engines"], dict, "result.engines")
    if not engines:
        raise _MalformedError("result.engines is empty")
    for name, kind in engines.items():
        if kind not in ENGINE_KINDS:
            raise _MalformedError(f"engine {name!r} of kind {kind!r}: expected {ENGINE_KINDS}")
    names = set(engines)
    try:
        op = get_op(_typed(r["op"], str, "result.op"))
        op.check_variant(_typed(r["variant"], str, "result.variant"))
    except DspsimInputError as e:
        raise _MalformedError(str(e)) from None
    if "mode" in r and r["mode"] != r["variant"]:
        raise _MalformedError(f"result.mode {r['mode']!r} is not its variant {r['variant']!r}")
    shape = _typed(r["shape"], list, "result.shape")
    if not shape or not all(_is_int(d) and d > 0 for d in shape):
        raise _MalformedError(f"result.shape = {shape!r}: expected positive integers")
    try:
        op.shape_of(shape=tuple(shape))
    except DspsimInputError as e:
        raise _MalformedError(str(e)) from None
    if "n" in r and r["n"] != math.prod(shape):
        raise _MalformedError(f"result.n = {r['n']!r} is not the product of its shape {shape}")
    if engines.get(r["core"]) != "core":
        raise _MalformedError(f"result.core = {r['core']!r} is not a core among its engines")
    for k in ("cycles", "events", "ddr_contention_cycles"):
        _int(r[k], f"result.{k}")
    _int(r.get("rpc_cycles", 0), "result.rpc_cycles")
    for k in ("time_us", "wall_s"):
        _num(r[k], f"result.{k}")
    # each memory's bytes (a run saved before the memories were listed: DDR's)
    memories = [m for m, kind in engines.items() if kind == "ddr"] or ["ddr"]
    need_bytes = tuple(f"{m}_{way}" for m in memories for way in ("read", "write"))
    for k, lo in (("bytes", need_bytes), ("stall_cycles", ()),
                  ("busy_cycles", ())):
        table = _typed(r[k], dict, f"result.{k}")
        for need in lo:
            table[need]  # noqa: B018 - KeyError names the missing one
        for name, v in table.items():
            if k == "busy_cycles" and name not in names:
                raise _MalformedError(f"result.busy_cycles: {name!r} is not one of its engines")
            _int(v, f"result.{k}.{name}")
    for i, ps in enumerate(_typed(r["passes"], list, "result.passes")):
        ps = _typed(ps, dict, f"result.passes[{i}]")
        _typed(ps["name"], str, f"result.passes[{i}].name")
        a = _num(ps["start_cycle"], f"result.passes[{i}].start_cycle", None)
        if _num(ps["end_cycle"], f"result.passes[{i}].end_cycle", None) < a:
            raise _MalformedError(f"result.passes[{i}] ends before it starts")
    for key in ("warnings", "hazards"):
        for i, w in enumerate(_typed(r.get(key, []), list, f"result.{key}")):
            w = _typed(w, dict, f"result.{key}[{i}]")
            _typed(w["message"], str, f"result.{key}[{i}].message")
            if key == "warnings":
                _typed(w["code"], str, f"result.warnings[{i}].code")
                _int(w.get("count", 1), f"result.warnings[{i}].count")
    out = r.get("output")
    if out is not None:
        for k, v in _typed(out, dict, "result.output").items():  # the op's own summary
            if isinstance(v, bool) or v is None or (isinstance(v, str) and len(v) <= 1000):
                continue
            if not (isinstance(v, int | float) and (
                    abs(v) <= MAX_MAGNITUDE if isinstance(v, int) else not math.isnan(v))):
                raise _MalformedError(
                    f"result.output.{k} = {_short(v)}: expected a number, true/false, a short "
                    "string or null")
    _typed(r["manifest"], dict, "result.manifest")
    _num(doc["origin_cycle"], "origin_cycle")
    _int(doc.get("trace_rows_dropped", 0), "trace_rows_dropped")
    for k in CUT_FIELDS:  # absent or null: that log is whole
        if doc.get(k) is not None and _num(doc[k], k, None) < -doc["origin_cycle"]:
            raise _MalformedError(f"{k} = {_short(doc[k])}: before the run began (the op's "
                                  f"timer started at cycle {doc['origin_cycle']:,.0f})")

    trace = _typed(doc["trace"], dict, "trace")
    if set(trace) != set(COLUMNS):
        extra = sorted(set(trace) - set(COLUMNS))
        raise _MalformedError(f"trace column {extra[0]!r} is not one of {COLUMNS}" if extra
                              else f"trace column {sorted(set(COLUMNS) - set(trace))[0]!r} "
                              "is missing")
    lengths = {len(_typed(trace[c], list, f"trace.{c}")) for c in COLUMNS}
    if len(lengths) != 1:
        raise _MalformedError("trace columns of different lengths")
    if lengths == {0}:
        raise _MalformedError("the trace has no rows")
    kinds = {"engine": "str", "kind": "str", "what": "str", "start_cycle": "num",
             "end_cycle": "num", "bytes": "int", "tile": "int", "pass": "str", "buffer": "int",
             "ddr_stall_cycles": "nonneg"}
    for c in COLUMNS:
        _column(trace[c], f"trace.{c}", kinds[c], names if c == "engine" else None)
    _column(trace["bytes"], "trace.bytes", "nonneg")
    _column(trace["kind"], "trace.kind", "str", set(TRACE_KINDS), "the trace's kinds")
    if any(e < s for s, e in zip(trace["start_cycle"], trace["end_cycle"])):
        raise _MalformedError("trace: a row ends before it starts")
    _check_sequential(trace)

    port = doc["port_log"]
    if port is not None:
        port = _typed(port, dict, "port_log")
        if len({len(_typed(port[f], list, f"port_log.{f}")) for f in PORT_LOG_FIELDS}) != 1:
            raise _MalformedError("port_log columns of different lengths")
        for f in PORT_LOG_FIELDS:
            kind = {"bytes": "nonneg", "is_write": "bool", "requester": "str"}.get(f, "num")
            _column(port[f], f"port_log.{f}", kind, names if f == "requester" else None)
