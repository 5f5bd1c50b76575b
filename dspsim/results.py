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

This module sits below :mod:`dspsim.analysis`: it never imports an analysis.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from dspsim.config import HARDWARE, HardwareModel, build_model, model_key
from dspsim.errors import DspsimInputError
from dspsim.paths import suffix_of, writable_file
from dspsim.probes import COLUMNS, PORT_LOG_FIELDS

if TYPE_CHECKING:
    from dspsim.run import Result

FORMAT = "dspsim-run"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
SAVE_SUFFIXES = (".json", ".json.gz")


def check_save_path(path: str | Path) -> Path:
    return writable_file(path, "saved-run file", tuple(SAVE_SUFFIXES))


def run_document(result: Any) -> dict[str, Any]:
    """The saved form of a run (needs its trace; the port log is saved when present)."""
    if result.trace is None:
        raise DspsimInputError("cannot save a run without its trace: simulate with trace=True")
    model: HardwareModel = result.model
    trace = result.trace
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
    if result.port_log is not None:
        cols = list(zip(*result.port_log)) if result.port_log else [()] * len(PORT_LOG_FIELDS)
        doc["port_log"] = {f: list(cols[i]) for i, f in enumerate(PORT_LOG_FIELDS)}
    return doc


def save_run(result: Any, path: str | Path) -> Path:
    """Write ``result`` to ``path`` (``.json`` or ``.json.gz``)."""
    p = check_save_path(path)
    text = json.dumps(run_document(result), separators=(",", ":"), default=json_default)
    try:
        if suffix_of(p, SAVE_SUFFIXES) == ".json.gz":
            with gzip.open(p, "wt", encoding="utf-8", compresslevel=6) as f:
                f.write(text)
        else:
            p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise DspsimInputError(f"cannot write {str(p)!r}: {e.strerror or e}") from None
    return p


def _not_a_run(p: Path, why: str) -> DspsimInputError:
    return DspsimInputError(
        f"{str(p)!r} is not a dspsim result ({why}); expected a file written by "
        "`dspsim run --save FILE.json`"
    )


def load_run(path: str | Path) -> Result:
    """Read a saved run back as a :class:`dspsim.run.Result` (with trace, port log, model).

    Version-1 files are migrated (see the module docstring); other versions are refused.
    """
    from dspsim.run import JSON_FIELDS, Result

    p = Path(path)
    if not p.is_file():
        raise DspsimInputError(f"result file {str(p)!r} not found")
    try:
        with open(p, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError):
        raise _not_a_run(p, "not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _not_a_run(p, "no dspsim-run format tag")
    version = doc.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise DspsimInputError(
            f"{str(p)!r}: saved-run format version {version!r}; this dspsim reads versions "
            f"{readable}"
        )
    try:
        model = _model(doc["model"], p, version)
        if version == 1:
            _upgrade_v1(doc, model)
        trace = pd.DataFrame({c: doc["trace"][c] for c in COLUMNS}, columns=COLUMNS)
        trace = trace.astype(
            {
                "start_cycle": float,
                "end_cycle": float,
                "bytes": "int64",
                "tile": "int64",
                "buffer": "int64",
                "ddr_stall_cycles": float,
            }
        )
        port = doc["port_log"]
        port_log = None if port is None else list(zip(*(port[f] for f in PORT_LOG_FIELDS)))
        r = doc["result"]
        init = {f.name for f in dataclasses.fields(Result) if f.init}
        values = {k: r[k] for k in JSON_FIELDS if k in init}
        values["shape"] = tuple(int(d) for d in values["shape"])
        return Result(
            **values,
            trace=trace,
            port_log=port_log,
            model=model,
            origin_cycle=float(doc["origin_cycle"]),
        )
    except DspsimInputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise _not_a_run(p, f"missing or malformed field: {e}") from None


def _model(m: dict[str, Any], p: Path, version: int) -> HardwareModel:
    """The saved model, rebuilt and checked as a model file's tables are."""
    sections = m["sections"]
    if not isinstance(sections, dict):
        raise TypeError("model sections are not a table of tables")
    if version == 1:  # one core, before the key existed
        count = model_key("core.count")
        sections[count.section] = {count.short: 1, **sections[count.section]}
    try:
        model = build_model(sections, str(m["source"]))
    except DspsimInputError as e:
        raise DspsimInputError(f"{str(p)!r}: its model does not load here: {e}") from None
    return dataclasses.replace(
        model, name=m["name"], overrides=tuple(tuple(kv) for kv in m["overrides"])
    )


def _upgrade_v1(doc: dict[str, Any], model: HardwareModel) -> None:
    """Rewrite a version-1 document as version 2, in place (see the module docstring)."""
    ops = [s for s in doc["model"]["sections"] if s not in HARDWARE]
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
