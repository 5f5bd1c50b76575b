"""Save a run to a file and load it back: one JSON document (``.json``, or gzip-compressed
``.json.gz``) tagged ``dspsim-run``, whose fields ``docs/reference.md`` lists ("Saved runs").

It holds what the timeline, the Perfetto export and the report need (not the output array), so
``dspsim plot timeline RUN`` and ``dspsim report RUN`` need no simulation. Older files load: one
written before the platform had several memories (no ``memories``, ``dcache`` nor
``port_logs``) ran on one memory without a cache, and gets them from its ``bytes``,
``busy_cycles`` and ``ddr_contention_cycles``; version 1 (one op on a core named ``core``, its
channels ``idma0``; ``mode`` and ``n``) loads as version 2 with today's names (``core0.idma0``),
the model's one op table, the variant its mode and the shape ``(n,)``.

:func:`save_run` writes atomically; :func:`load_run` trusts nothing: it reads at most
:data:`MAX_RUN_BYTES` decompressed, rebuilds the model as a model file's tables are checked and
checks every other field (:mod:`dspsim.results_check`). It never imports an analysis.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspsim.config import HardwareModel, build_model, model_key
from dspsim.errors import DspsimInputError
from dspsim.ops.base import summary_from_json
from dspsim.paths import BOM, atomic_write, path_problem, suffix_of, writable_file
from dspsim.probes import COLUMNS, PORT_LOG_FIELDS, PortLog, TraceTable
from dspsim.results_check import CUT_FIELDS, MEMORY_KIND, _is_int, _MalformedError, check_document
from dspsim.schema import OP_SCHEMAS

if TYPE_CHECKING:
    from dspsim.run import Result

FORMAT = "dspsim-run"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
SAVE_SUFFIXES = (".json", ".json.gz")
# a saved run (decompressed) larger than this is refused: a gzip bomb stops here
MAX_RUN_BYTES = 512 << 20


def check_save_path(path: str | Path) -> Path:
    """``path`` if a run can be saved there (``.json`` or ``.json.gz``), else one line."""
    return writable_file(path, "saved-run file", SAVE_SUFFIXES)


def run_document(result: Any) -> dict[str, Any]:
    """The saved form of a run (needs its trace; the port log is saved when present)."""
    if result.trace is None:
        raise DspsimInputError("cannot save a run without its trace: simulate with trace=True")
    model: HardwareModel = result.model
    trace = result.trace_table
    saved_model = {"name": model.name, "source": model.source,
                   "overrides": [list(kv) for kv in model.overrides],
                   "sections": model.as_dict(),
                   "ranges": {k: list(r) for k, r in model.ranges.items()}}
    doc: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                           "result": result.to_json(), "model": saved_model,
                           "origin_cycle": float(result.origin_cycle),
                           "trace": {c: trace[c].tolist() for c in COLUMNS}, "port_log": None}
    dropped = trace.rows_dropped
    if dropped:  # a trace cut by a row limit says so
        doc["trace_rows_dropped"] = dropped
    for k in CUT_FIELDS:
        if getattr(result, k, None) is not None:
            doc[k] = float(getattr(result, k))
    if result.port_log is not None:
        doc["port_log"] = _log_columns(result.port_log)
    host = model.host.memory
    others = {m: log for m, log in (getattr(result, "port_logs", None) or {}).items()
              if m != host}
    if others:  # every other memory's log (null: none kept), and where a limit cut it
        doc["port_logs"] = {m: None if log is None else _log_columns(log)
                            for m, log in others.items()}
        cuts = {m: float(log.cut_cycle) - float(result.origin_cycle)
                for m, log in others.items() if getattr(log, "cut_cycle", None) is not None}
        if cuts:
            doc["port_log_cut_cycles"] = cuts
    return doc


def _log_columns(log: Any) -> dict[str, list]:
    cols = PortLog.of(log).columns()
    return {f: cols[f].tolist() for f in PORT_LOG_FIELDS}


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
    return DspsimInputError(f"{str(p)!r} is not a dspsim result ({why}); expected a file "
                            "written by `dspsim run --save FILE.json`")


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
    """Read a saved run back as a :class:`dspsim.run.Result` (with trace, port logs, model);
    every field checked, anything amiss a one-line :class:`DspsimInputError`."""
    from dspsim.run import JSON_FIELDS, Result

    p = Path(path)
    doc, version = _read_document(p)
    try:
        model = _model(doc["model"], p, version)
        if version == 1:
            _upgrade_v1(doc, model)
        _one_memory_fields(doc, model)
        check_document(doc, model)
        trace = TraceTable(doc["trace"], doc.get("trace_rows_dropped", 0))
        origin = float(doc["origin_cycle"])
        port_log, port_logs = _port_logs(doc, model, origin)
        r = doc["result"]
        init = {f.name for f in dataclasses.fields(Result) if f.init}
        values = {k: r[k] for k in JSON_FIELDS if k in init and k in r}
        values["shape"] = tuple(int(d) for d in values["shape"])
        values["output"] = summary_from_json(values.get("output"))
        cuts = {k: None if doc.get(k) is None else float(doc[k]) for k in CUT_FIELDS}
        return Result(**values, trace_table=trace, port_log=port_log, port_logs=port_logs,
                      model=model, origin_cycle=origin, **cuts)
    except DspsimInputError:
        raise
    except _MalformedError as e:
        raise _not_a_run(p, str(e)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise _not_a_run(p, f"missing or malformed field: {e}") from None


def _read_document(p: Path) -> tuple[dict[str, Any], int]:
    """The saved run's JSON document and its format version: a regular file of at most
    ``MAX_RUN_BYTES``, JSON, tagged as a saved run, of a version this dspsim reads."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise DspsimInputError(f"result file {str(p)!r} not found") from None
    except (OSError, ValueError) as e:  # a loop of links, a NUL byte, no permission
        raise DspsimInputError(f"result file {str(p)!r} unreadable: {path_problem(e)}") from None
    if not stat.S_ISREG(mode):
        raise DspsimInputError(f"result file {str(p)!r} is not a regular file")
    try:
        doc = json.loads(_read_capped(p, MAX_RUN_BYTES).decode("utf-8").removeprefix(BOM))
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
        raise DspsimInputError(f"{str(p)!r}: saved-run format version {version!r}; this dspsim "
                               f"reads versions {readable}")
    return doc, version


def _port_logs(doc: dict[str, Any], model: HardwareModel,
               origin: float) -> tuple[PortLog | None, dict[str, PortLog | None]]:
    """The host memory's port log, and every memory's log (None where none was saved), each
    with the cycle its ``--trace-limit`` cut it at."""
    port = doc["port_log"]
    port_log = None if port is None else PortLog.from_columns(port)
    if port_log is not None and doc.get("port_log_cut_cycle") is not None:
        port_log.cut_cycle = float(doc["port_log_cut_cycle"]) + origin
    port_logs = {m: None for m, k in doc["result"]["engines"].items() if k == MEMORY_KIND}
    port_logs[model.host.memory] = port_log
    cuts = doc.get("port_log_cut_cycles") or {}
    for m, columns in (doc.get("port_logs") or {}).items():
        if columns is not None:
            log = port_logs[m] = PortLog.from_columns(columns)
            log.cut_cycle = None if m not in cuts else float(cuts[m]) + origin
    return port_log, port_logs


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
            isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in overrides):
        raise _MalformedError("model overrides: expected a list of [key, value] pairs")
    if version == 1:  # one core, before the key existed
        count = model_key("core.count")
        sections[count.section] = {count.short: 1, **sections.get(count.section, {})}
    try:
        model = build_model(sections, m["source"])
    except DspsimInputError as e:
        hint = " (an op declared in a file needs its --op-file)" if str(e).split(
            ": ", 1)[-1].startswith("unknown table") else ""
        raise DspsimInputError(f"{str(p)!r}: its model does not load here{hint}: {e}") from None
    return dataclasses.replace(model, name=m["name"], overrides=tuple(map(tuple, overrides)),
                               ranges=_saved_ranges(m.get("ranges", {}), model))


def _saved_ranges(ranges: Any, model: HardwareModel) -> dict[str, tuple[Any, Any]]:
    """The model's ranges as saved (a run saved before ranges existed has none), each a key
    of the model with its value inside."""
    if not isinstance(ranges, dict):
        raise _MalformedError("model ranges: expected a table of key -> [low, high]")
    out = {}
    for key, r in ranges.items():
        if key not in model.keys() or not (
                isinstance(r, list) and len(r) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in r)
                and r[0] <= model.get(key) <= r[1]):
            raise _MalformedError(f"model ranges: {key} = {r!r}: expected [low, high] around "
                                  "the key's value")
        out[key] = (r[0], r[1])
    return out


def _upgrade_v1(doc: dict[str, Any], model: HardwareModel) -> None:
    """Rewrite a version-1 document as version 2, in place (see the module docstring)."""
    import simpy

    from dspsim.platform import Platform

    ops = [s for s in doc["model"]["sections"] if s in OP_SCHEMAS]
    if len(ops) != 1:
        raise KeyError(f"version 1 holds one op table; found {len(ops)}")
    # version-1 names -> today's (the platform's own; version 1 named the core by its kind and
    # its channels and DataRAMs without its prefix)
    platform = Platform(simpy.Environment(), model, data=False)  # one core: core.count = 1
    dsp = platform.dsps[0]
    engines = platform.engines
    names = {engines[dsp.name]: dsp.name}
    for name in [*engines, *(m.name for m in dsp.tm.banks), platform.ddr.name]:
        names.setdefault(name.removeprefix(f"{dsp.name}."), name)
    r = doc["result"]
    r.update(op=ops[0], variant=r.pop("mode"), shape=[int(r.pop("n"))], core=dsp.name,
             engines=engines, rpc_cycles=0)  # rpc_cycles: not measured in version 1
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


def _one_memory_fields(doc: dict[str, Any], model: HardwareModel) -> None:
    """A file from before several memories has no ``memories`` and no ``dcache``: its run had
    one memory and no cache, so they are made from what it has, in place (others: checked)."""
    r = doc["result"]
    if not isinstance(r, dict) or "memories" in r or "dcache" in r:
        return
    if len(model.memories) != 1 or model.dcache.capacity_bytes:
        return  # the check names what is missing
    (m,) = model.memories
    count = r.get("bytes", {}), r.get("busy_cycles", {})
    if not all(isinstance(t, dict) for t in count):
        return
    r["memories"] = {m: {"read_bytes": count[0].get(f"{m}_read"),
                         "write_bytes": count[0].get(f"{m}_write"),
                         "busy_cycles": count[1].get(m),
                         "contention_cycles": r.get("ddr_contention_cycles")}}
    r["dcache"] = None


def json_default(o: Any) -> Any:
    """``json`` fallback for numpy scalars and arrays."""
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
