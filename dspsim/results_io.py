"""Save a run to a file and load it back; write what ``dspsim run`` was asked for.

A saved run is one JSON document (``.json``, or gzip-compressed ``.json.gz``)::

    {"format": "dspsim-run", "format_version": 1,
     "result": {...Result.to_json()...},
     "model": {"name", "source", "overrides", "sections": {core: {...}, ddr: {...}, ...}},
     "origin_cycle": ...,                  # absolute cycle of the op's timer start
     "trace": {column: [values]},          # trace rows, times relative to the op's timer
     "port_log": {field: [values]}}        # DDR requests, absolute cycles as in Result

It holds everything the timeline, the Perfetto export and the report need, so ``dspsim plot
timeline RUN`` and ``dspsim report RUN`` work without simulating again. The output array
(the softmax values) is not saved.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from dspsim.config import SECTIONS, HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.paths import suffix_of, writable_file
from dspsim.probes import COLUMNS, PORT_LOG_FIELDS

if TYPE_CHECKING:
    from dspsim.sim import Result

FORMAT = "dspsim-run"
FORMAT_VERSION = 1
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
    """Read a saved run back as a :class:`dspsim.sim.Result` (with trace, port log, model)."""
    from dspsim.sim import JSON_FIELDS, Result

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
    if doc.get("format_version") != FORMAT_VERSION:
        raise DspsimInputError(
            f"{str(p)!r}: saved-run format version {doc.get('format_version')!r}; this dspsim "
            f"reads version {FORMAT_VERSION}"
        )
    try:
        m = doc["model"]
        model = HardwareModel(
            **{s: cls(**m["sections"][s]) for s, cls in SECTIONS.items()},
            name=m["name"],
            source=m["source"],
            overrides=tuple(tuple(kv) for kv in m["overrides"]),
        )
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
        return Result(
            **{k: r[k] for k in JSON_FIELDS},
            trace=trace,
            port_log=port_log,
            model=model,
            origin_cycle=float(doc["origin_cycle"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise _not_a_run(p, f"missing or malformed field: {e}") from None


def json_default(o: Any) -> Any:
    """``json`` fallback for numpy scalars and arrays."""
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ------------------------------------------------------------------------------ run outputs
@dataclass(frozen=True)
class RunOutputs:
    """What ``dspsim run`` was asked to write besides its summary, checked before simulating."""

    timeline: Path | None = None
    window: tuple[float, float] | None = None
    trace: Path | None = None
    trace_limit: int = 0
    tiles: Path | None = None
    save: Path | None = None
    json: bool = False

    @property
    def needs_trace(self) -> bool:
        return self.json or any((self.timeline, self.trace, self.tiles, self.save))

    @property
    def needs_port_log(self) -> bool:
        return any((self.timeline, self.trace, self.save))

    def write(self, result: Any) -> list[str]:
        """Write every requested file; return one line per file written."""
        from dspsim.timeline import check_window

        check_window(self.window, result.cycles)  # before writing anything
        done = []
        if self.save:
            save_run(result, self.save)
            done.append(f"saved run to {self.save}")
        if self.tiles:
            write_tiles_csv(result, self.tiles)
            done.append(f"wrote tile table to {self.tiles}")
        if self.trace:
            from dspsim.perfetto import write_trace

            write_trace(result, self.trace, self.trace_limit)
            done.append(f"wrote Perfetto trace to {self.trace} (open in ui.perfetto.dev)")
        if self.timeline:
            from dspsim.timeline import plot_timeline

            plot_timeline(result, self.timeline, self.window)
            done.append(f"wrote timeline to {self.timeline}")
        return done


def check_tiles_path(path: str | Path) -> Path:
    return writable_file(path, "tiles file", (".csv",))


def write_tiles_csv(result: Any, path: str | Path) -> Path:
    """One row per tile per pass (see :func:`dspsim.stalls.tile_table`) as CSV."""
    from dspsim.stalls import require_trace, tile_table

    p = check_tiles_path(path)
    table = tile_table(require_trace(result), result.passes)
    try:
        table.to_csv(p, index=False, float_format="%.3f")
    except OSError as e:
        raise DspsimInputError(f"cannot write {str(p)!r}: {e.strerror or e}") from None
    return p


def run_outputs(args: Any) -> RunOutputs:
    """Check the output options of ``dspsim run`` (paths, extensions, window syntax)."""
    from dspsim.perfetto import DEFAULT_EVENT_LIMIT, check_limit, check_trace_path
    from dspsim.timeline import check_figure_path, parse_window

    timeline = getattr(args, "timeline", None)
    window = getattr(args, "window", None)
    trace = getattr(args, "trace", None)
    tiles = getattr(args, "tiles", None)
    save = getattr(args, "save", None)
    limit = getattr(args, "trace_limit", None)
    if window is not None and timeline is None:
        raise DspsimInputError("--window zooms the timeline: give --timeline FILE.png|.svg too")
    if limit is not None and trace is None:
        raise DspsimInputError("--trace-limit limits the trace: give --trace FILE.json too")
    named = [(opt, Path(v).resolve()) for opt, v in (
        ("--timeline", timeline), ("--trace", trace), ("--tiles", tiles), ("--save", save),
        ("--output", getattr(args, "output", None))) if v]
    for i, (opt, path) in enumerate(named):
        for other, other_path in named[:i]:
            if path == other_path:
                raise DspsimInputError(f"{other} and {opt} name the same file {str(path)!r}")
    return RunOutputs(
        timeline=check_figure_path(timeline) if timeline else None,
        window=parse_window(window) if window is not None else None,
        trace=check_trace_path(trace) if trace else None,
        trace_limit=check_limit(limit if limit is not None else DEFAULT_EVENT_LIMIT),
        tiles=check_tiles_path(tiles) if tiles else None,
        save=check_save_path(save) if save else None,
        json=bool(getattr(args, "json", False)),
    )
