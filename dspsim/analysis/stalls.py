"""Where the core's time goes, per pass, and how busy each engine is (from a run's trace; cycles
from the op's timer start). Per pass the core's span (first to last core row) splits exactly
into ``compute_cycles`` (kernels, minus their stalls), ``idma_setup_cycles`` (``IDMA_COPY``),
``wait_in_cycles`` / ``wait_out_cycles`` (``IDMA_WAIT`` on an input / output copy),
``wait_ddr_cycles`` (kernels stalled on any external memory: the trace does not split a stall,
the run's ``stall_cycles`` does, :func:`memory_stalls`) and ``other_cycles`` (no core row).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.analysis.engines import RunEngines
from dspsim.errors import DspsimInputError

if TYPE_CHECKING:
    import pandas as pd

CORE_PARTS = ("compute_cycles", "idma_setup_cycles", "wait_in_cycles", "wait_out_cycles",
              "wait_ddr_cycles", "other_cycles")
OUTSIDE_PASSES = "(outside passes)"
_NUMBERS = ("start_cycle", "end_cycle", "ddr_stall_cycles")


def require_trace(result: Any) -> pd.DataFrame:
    """The run's trace, or one clear error when it kept none."""
    trace = getattr(result, "trace", None)
    if trace is None:
        raise DspsimInputError(
            "this run has no trace: simulate it with trace=True (the CLI does so for --json, "
            "--timeline, --trace, --tiles and --save)")
    return trace


def _columns(result: Any) -> Any:
    """The run's trace columns (its numpy table when it has one: no DataFrame built)."""
    table = getattr(result, "trace_table", None)
    return table if table is not None else require_trace(result)


def _arrays(trace: Any, mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The columns the breakdown reads, as numpy arrays (of the rows ``mask`` keeps)."""
    out = {c: np.asarray(trace[c], dtype=np.float64) for c in _NUMBERS}
    out |= {c: np.asarray(trace[c], dtype=object) for c in ("engine", "kind", "pass")}
    return out if mask is None else {c: a[mask] for c, a in out.items()}


def pass_names(trace: Any, passes: list[dict[str, Any]] | None) -> list[str]:
    """Pass names in run order, each once (a run of many rows repeats its passes' names: one
    breakdown per name): the run's pass list first, then any the trace adds."""
    names = dict.fromkeys(p["name"] for p in passes or [])
    for name in dict.fromkeys(np.asarray(trace["pass"], dtype=object)):
        names.setdefault(name or OUTSIDE_PASSES)
    return list(names)


def core_breakdown(trace: Any, passes: list[dict[str, Any]] | None = None,
                   engines: RunEngines | None = None) -> list[dict[str, Any]]:
    """Per pass: the core's span and its parts (module docstring), in cycles, from a DataFrame
    or a TraceTable (``engines``: the run's, default read off the trace)."""
    engines = engines or RunEngines.from_trace(trace)
    core = _arrays(trace, engines.core_mask(trace))
    dur = core["end_cycle"] - core["start_cycle"]
    stall = core["ddr_stall_cycles"]
    kind = core["kind"]
    label = np.where(core["pass"] != "", core["pass"], OUTSIDE_PASSES)
    rows = []
    for name in pass_names(trace, passes):
        sel = label == name
        if not sel.any():
            continue
        k, d, s = kind[sel], dur[sel], stall[sel]
        start = float(core["start_cycle"][sel].min())
        end = float(core["end_cycle"][sel].max())
        parts = {
            "compute_cycles": float((d - s)[k == "compute"].sum()),
            "idma_setup_cycles": float(d[k == "setup"].sum()),
            "wait_in_cycles": float(d[k == "wait_in"].sum()),
            "wait_out_cycles": float(d[k == "wait_out"].sum()),
            "wait_ddr_cycles": float(s[k == "compute"].sum()),
        }
        parts["other_cycles"] = (end - start) - float(d.sum())
        rows.append({"pass": name, "start_cycle": start, "end_cycle": end,
                     "span_cycles": end - start} | parts)
    return rows


def _clipped_busy(cols: dict[str, np.ndarray], rows: np.ndarray, end_cycle: float) -> float:
    """The cycles of the rows ``rows`` selects inside [0, end_cycle]."""
    start = np.clip(cols["start_cycle"][rows], 0.0, end_cycle)
    end = np.clip(cols["end_cycle"][rows], 0.0, end_cycle)
    return float((end - start).sum())


def memory_stalls(result: Any) -> dict[str, int]:
    """Cycles the core stalled on each memory in the run's order (its ``stall_cycles``)."""
    stalls = getattr(result, "stall_cycles", None) or {}
    return {m: stalls[m] for m in RunEngines.of(result).ports if m in stalls}


def stalled_memories(result: Any) -> list[str]:
    """The memories the core stalled on in this run (in the run's order)."""
    return [m for m, v in memory_stalls(result).items() if v > 0]


def engine_utilisation(result: Any) -> dict[str, dict[str, float]]:
    """Busy cycles and utilisation (% of the op's cycles) of every engine, in the run's order:
    the core computing or programming descriptors (not waiting or stalled), a channel with a
    descriptor in progress, a memory's port moving bytes (and its bytes per cycle of the op)."""
    trace = _columns(result)
    engines = RunEngines.of(result)
    cols = _arrays(trace)
    total = float(result.cycles)
    out: dict[str, dict[str, float]] = {}
    if engines.core is not None:
        rows = engines.core_mask(trace) & np.isin(cols["kind"], ("compute", "setup"))
        busy = _clipped_busy(cols, rows, total) - float(cols["ddr_stall_cycles"][rows].sum())
        out[engines.core] = {"busy_cycles": busy}
    for ch in engines.channels:
        out[ch] = {"busy_cycles": _clipped_busy(cols, cols["engine"] == ch, total)}
    for port in engines.ports:
        moved = float(result.bytes.get(f"{port}_read", 0) + result.bytes.get(f"{port}_write", 0))
        busy = float(result.busy_cycles.get(port, 0))
        # the bytes inside the span: the traffic's share of data-path time there (copies before
        # the timer or after it, unwaited, are not the op's; exact where time is bytes x rate)
        whole = float((getattr(result, "memories", None) or {}).get(port, {}).get(
            "busy_cycles", busy))
        inside = moved * min(1.0, busy / whole) if whole else moved
        out[port] = {"busy_cycles": busy,
                     "achieved_bytes_per_cycle": inside / total if total else 0.0}
    for entry in out.values():
        entry["utilisation_pct"] = 100.0 * entry["busy_cycles"] / total if total else 0.0
    return out


def stall_summary(result: Any) -> dict[str, Any]:
    """The ``stalls`` object of ``dspsim run --json``: per pass, totals, per engine, and the
    cycles the core stalled on each memory (``on_memory``: ``{"ddr": ...}``)."""
    per_pass = core_breakdown(_columns(result), result.passes, RunEngines.of(result))
    total = {"span_cycles": sum(p["span_cycles"] for p in per_pass)}
    total |= {k: sum(p[k] for p in per_pass) for k in CORE_PARTS}
    return {"per_pass": per_pass, "total": total, "engines": engine_utilisation(result),
            "on_memory": memory_stalls(result)}
