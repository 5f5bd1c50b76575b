"""Checking a saved run (:mod:`dspsim.results`) field by field, trusting nothing in the file:
types, ranges, finite numbers, engines, a non-empty trace in which no engine does two things at
once, the memories' and the data cache's counters and logs. The first bad field is named in one
line (``_MalformedError``; :func:`dspsim.results.load_run` makes it a ``DspsimInputError``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dspsim.errors import DspsimInputError
from dspsim.probes import COLUMNS, PORT_LOG_FIELDS, TRACE_KINDS

if TYPE_CHECKING:
    from dspsim.config import HardwareModel

DOCUMENT_KEYS = {"format", "format_version", "result", "model", "origin_cycle", "trace",
                 "port_log", "port_logs", "port_log_cut_cycles", "trace_rows_dropped",
                 "trace_cut_cycle", "port_log_cut_cycle"}
CUT_FIELDS = ("trace_cut_cycle", "port_log_cut_cycle")  # where --trace-limit cut each log
# every count and cycle in a run is below this: float64 holds each such integer exactly
MAX_MAGNITUDE = 2**53
ENGINE_KINDS = ("core", "idma", "ddr")
MEMORY_KIND = "ddr"  # the kind of every memory's port among a run's engines
MEMORY_COUNTERS = ("read_bytes", "write_bytes", "busy_cycles", "contention_cycles")
# what the data cache counts (dspsim.hw.dcache.DataCache.stats)
DCACHE_COUNTERS = ("hits", "misses", "prefetches", "writebacks", "fill_bytes", "dirty_lines")
CORE_WAITS = ("idma_in", "idma_out")  # stall_cycles' keys besides the memories' names


class _MalformedError(ValueError):
    """A field of a saved run is missing, of the wrong type or out of range."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _short(v: Any) -> str:
    """``repr(v)`` cut to 40 characters."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(v: Any, where: str, lo: int = 0) -> int:
    if not _is_int(v) or not lo <= v <= MAX_MAGNITUDE:
        raise _MalformedError(f"{where} = {_short(v)}: expected an integer from {lo} to 2**53")
    return v


def _num(v: Any, where: str, lo: float | None = 0.0) -> float:
    """``v`` if it is a finite number of at most 2**53 (an int beyond would overflow float64)
    and at least ``lo``."""
    finite = _is_int(v) or (isinstance(v, float) and math.isfinite(v))
    if not finite or (lo is not None and v < lo) or abs(v) > MAX_MAGNITUDE:
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

    if kind in ("str", "bool"):
        if not all(type(x) is (str if kind == "str" else bool) for x in values):
            words = "text" if kind == "str" else "true or false"
            raise _MalformedError(f"{where}: expected {words} in every row")
        if allowed is not None and not set(values) <= allowed:
            bad = sorted(set(values) - allowed)[0]
            raise _MalformedError(f"{where}: {_short(bad)} is not one of {allowed_name} "
                                  f"{sorted(allowed)}")
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


def check_document(doc: dict[str, Any], model: HardwareModel) -> None:
    """Check a (version 2) saved run field by field; ``_MalformedError`` names the first bad
    one. ``model`` (the document's, checked by its loading) checks what depends on it."""
    r = _check_fields(doc)
    engines, memories = _check_engines(r, model)
    names = set(engines)
    _check_op(r, engines)
    _check_counts(r, memories, names)
    _check_memories(r, memories)
    _check_dcache(r, model)
    _check_passes(r)
    _check_origin(doc, r)
    _check_trace(doc, names)
    _check_logs(doc, model, memories, names)


def _check_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The document's and its result's fields are known ones; the result."""
    from dspsim.run import JSON_FIELDS

    unknown = sorted(set(doc) - DOCUMENT_KEYS)
    if unknown:
        raise _MalformedError(f"unknown field {unknown[0]!r} (a saved run has "
                              f"{', '.join(sorted(DOCUMENT_KEYS))})")
    r = _typed(doc["result"], dict, "result")
    unknown = sorted(set(r) - set(JSON_FIELDS))
    if unknown:
        raise _MalformedError(f"unknown field result.{unknown[0]!r}")
    return r


def _check_engines(r: dict[str, Any], model: HardwareModel) -> tuple[dict[str, str], list[str]]:
    """The run's engines (each of a known kind) and its memories (the model's)."""
    engines = _typed(r["engines"], dict, "result.engines")
    if not engines:
        raise _MalformedError("result.engines is empty")
    for name, kind in engines.items():
        if kind not in ENGINE_KINDS:
            raise _MalformedError(f"engine {name!r} of kind {kind!r}: expected {ENGINE_KINDS}")
    memories = [n for n, kind in engines.items() if kind == MEMORY_KIND]
    if memories != list(model.memories):
        raise _MalformedError(f"result.engines: memories {memories} are not the model's "
                              f"{list(model.memories)}")
    return engines, memories


def _check_op(r: dict[str, Any], engines: dict[str, str]) -> None:
    """The op, its variant, its shape (and the older mode and n, when given) and its core."""
    from dspsim.ops import get_op

    try:  # the op's own refusals, as a malformed field
        op = get_op(_typed(r["op"], str, "result.op"))
        op.check_variant(_typed(r["variant"], str, "result.variant"))
        if "mode" in r and r["mode"] != r["variant"]:
            raise _MalformedError(f"result.mode {r['mode']!r} is not its variant "
                                  f"{r['variant']!r}")
        shape = _typed(r["shape"], list, "result.shape")
        if not shape or not all(_is_int(d) and d > 0 for d in shape):
            raise _MalformedError(f"result.shape = {shape!r}: expected positive integers")
        op.shape_of(shape=tuple(shape))
    except DspsimInputError as e:
        raise _MalformedError(str(e)) from None
    if "n" in r and r["n"] != math.prod(shape):
        raise _MalformedError(f"result.n = {r['n']!r} is not the product of its shape {shape}")
    if engines.get(r["core"]) != "core":
        raise _MalformedError(f"result.core = {r['core']!r} is not a core among its engines")


def _check_counts(r: dict[str, Any], memories: list[str], names: set[str]) -> None:
    """The run's counts and times, and its bytes, stall and busy cycles per memory or engine."""
    for k in ("cycles", "events", "ddr_contention_cycles"):
        _int(r[k], f"result.{k}")
    _int(r.get("rpc_cycles", 0), "result.rpc_cycles")
    for k in ("time_us", "wall_s"):
        _num(r[k], f"result.{k}")
    per_way = [f"{m}_{way}" for m in memories for way in ("read", "write")]
    for k, need, allowed, what in (
            ("bytes", per_way, set(per_way), "<memory>_read or <memory>_write of its memories"),
            ("stall_cycles", (), {*memories, *CORE_WAITS}, "one of its memories or idma_in, "
             "idma_out"),
            ("busy_cycles", (), names, "one of its engines")):
        table = _typed(r[k], dict, f"result.{k}")
        for key in need:
            if key not in table:
                raise _MalformedError(f"result.{k}.{key} is missing")
        for name, v in table.items():
            if name not in allowed:
                raise _MalformedError(f"result.{k}: {name!r} is not {what}")
            _int(v, f"result.{k}.{name}")


def _check_passes(r: dict[str, Any]) -> None:
    """The passes (named, none ending before it starts), the warnings and hazards, and the
    op's summary of its output."""
    for i, ps in enumerate(_typed(r["passes"], list, "result.passes")):
        ps = _typed(ps, dict, f"result.passes[{i}]")
        _typed(ps["name"], str, f"result.passes[{i}].name")
        a = _num(ps["start_cycle"], f"result.passes[{i}].start_cycle", None)
        if _num(ps["end_cycle"], f"result.passes[{i}].end_cycle", None) < a:
            raise _MalformedError(f"result.passes[{i}] ends before it starts")
    for key in ("warnings", "hazards"):
        for i, w in enumerate(_typed(r.get(key, []), list, f"result.{key}")):
            where = f"result.{key}[{i}]"
            _typed(_typed(w, dict, where)["message"], str, f"{where}.message")
            if key == "warnings":
                _typed(w["code"], str, f"{where}.code")
                _int(w.get("count", 1), f"{where}.count")
    out = r.get("output")
    if out is not None:
        for k, v in _typed(out, dict, "result.output").items():  # the op's own summary
            if isinstance(v, bool) or v is None or (isinstance(v, str) and len(v) <= 1000):
                continue
            # a float may be NaN or infinite (a NaN sum), as files before "nan" wrote it
            if not (isinstance(v, float) or (isinstance(v, int) and abs(v) <= MAX_MAGNITUDE)):
                raise _MalformedError(
                    f"result.output.{k} = {_short(v)}: expected a number, true/false, a short "
                    "string or null")


def _check_origin(doc: dict[str, Any], r: dict[str, Any]) -> None:
    """The manifest, the op's timer start, and where each log was cut (never before the run)."""
    _typed(r["manifest"], dict, "result.manifest")
    _num(doc["origin_cycle"], "origin_cycle")
    _int(doc.get("trace_rows_dropped", 0), "trace_rows_dropped")
    for k in CUT_FIELDS:  # absent or null: that log is whole
        if doc.get(k) is not None and _num(doc[k], k, None) < -doc["origin_cycle"]:
            raise _MalformedError(f"{k} = {_short(doc[k])}: before the run began (the op's "
                                  f"timer started at cycle {doc['origin_cycle']:,.0f})")


def _check_trace(doc: dict[str, Any], names: set[str]) -> None:
    """The trace: its columns, of one length, each of its type, engines among the run's, no
    engine doing two things at once."""
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


def _check_logs(doc: dict[str, Any], model: HardwareModel, memories: list[str],
                names: set[str]) -> None:
    """The host memory's port log, the other memories' logs, and where each was cut."""
    if doc["port_log"] is not None:
        _check_log(doc["port_log"], "port_log", names)
    host = model.host.memory
    logs = _typed(doc.get("port_logs", {}), dict, "port_logs")
    for m, log in logs.items():
        if m not in memories or m == host:
            raise _MalformedError(f"port_logs: {m!r} is not one of the run's memories other "
                                  f"than the host's {host!r} (whose log is port_log)")
        if log is not None:
            _check_log(log, f"port_logs.{m}", names)
    cuts = _typed(doc.get("port_log_cut_cycles", {}), dict, "port_log_cut_cycles")
    for m, cut in cuts.items():
        if logs.get(m) is None:
            raise _MalformedError(f"port_log_cut_cycles: {m!r} has no log in port_logs")
        if _num(cut, f"port_log_cut_cycles.{m}", None) < -doc["origin_cycle"]:
            raise _MalformedError(f"port_log_cut_cycles.{m} = {_short(cut)}: before the run "
                                  "began")


def _check_log(port: Any, where: str, names: set[str]) -> None:
    """A port log's columns: of one length, each of its type, requesters among the engines."""
    port = _typed(port, dict, where)
    if set(port) != set(PORT_LOG_FIELDS):
        odd = sorted(set(port) ^ set(PORT_LOG_FIELDS))[0]
        raise _MalformedError(f"{where}: column {odd!r} is not one of (or is missing from) "
                              f"{PORT_LOG_FIELDS}")
    if len({len(_typed(port[f], list, f"{where}.{f}")) for f in PORT_LOG_FIELDS}) != 1:
        raise _MalformedError(f"{where} columns of different lengths")
    for f in PORT_LOG_FIELDS:
        kind = {"bytes": "nonneg", "is_write": "bool", "requester": "str"}.get(f, "num")
        _column(port[f], f"{where}.{f}", kind, names if f == "requester" else None)


def _check_memories(r: dict[str, Any], memories: list[str]) -> None:
    """``result.memories``: exactly the run's memories, each its four counters (integers),
    its bytes and busy cycles those of ``bytes`` and ``busy_cycles``."""
    if "memories" not in r:
        raise _MalformedError("result.memories is missing (a run of several memories or with a "
                              "data cache has it)")
    table = _typed(r["memories"], dict, "result.memories")
    if list(table) != memories:
        raise _MalformedError(f"result.memories: {list(table)} are not its memories "
                              f"{memories}")
    for m, counters in table.items():
        counters = _counters(counters, MEMORY_COUNTERS, f"result.memories.{m}")
        for way in ("read", "write"):
            v, other = counters[f"{way}_bytes"], r["bytes"][f"{m}_{way}"]
            if v != other:
                raise _MalformedError(f"result.memories.{m} = {v} is not result.bytes.{m}_{way} "
                                      f"= {other}")
        # the whole traffic's busy cycles: at least those within the op's span
        if counters["busy_cycles"] < r["busy_cycles"].get(m, 0):
            raise _MalformedError(f"result.memories.{m}.busy_cycles = {counters['busy_cycles']} "
                                  f"is below result.busy_cycles.{m} = {r['busy_cycles'][m]}")


def _check_dcache(r: dict[str, Any], model: HardwareModel) -> None:
    """``result.dcache``: null without a data cache, else exactly its counters (integers)."""
    if "dcache" not in r:
        raise _MalformedError("result.dcache is missing (null when the core has no cache)")
    if r["dcache"] is None and model.dcache.capacity_bytes:
        raise _MalformedError("result.dcache is null but the model has a data cache "
                              "(dcache.capacity_bytes)")
    if r["dcache"] is not None and not model.dcache.capacity_bytes:
        raise _MalformedError("result.dcache: the model has no data cache "
                              "(dcache.capacity_bytes = 0)")
    if r["dcache"] is not None:
        _counters(r["dcache"], DCACHE_COUNTERS, "result.dcache")


def _counters(table: Any, names: tuple[str, ...], where: str) -> dict[str, int]:
    """``table``: exactly the counters ``names``, each an integer."""
    table = _typed(table, dict, where)
    if set(table) != set(names):
        raise _MalformedError(f"{where}: expected exactly {', '.join(names)}")
    for k in names:
        _int(table[k], f"{where}.{k}")
    return table
