"""Parameter sweeps: a grid of model keys (plus ``n`` and ``mode``) run point by point into a table.

Command line
------------
``dspsim sweep --param KEY=V1,V2,... --param KEY=START:STOP:STEP [--mode pingpong,direct]
[--n N] [--model PATH] [--set KEY=VALUE] [--spec FILE.toml] --out FILE.csv|FILE.parquet
[--jobs N] [--fidelity tile|burst] [--executor local|dask] [--scheduler ADDRESS] [--retry-failed]``

- ``KEY`` is any model key (``dspsim.config.all_keys()``), ``n`` (float32 elements) or ``mode``.
- ``V1,V2,...`` lists values; ``START:STOP:STEP`` (numeric keys only, STEP > 0, START <= STOP)
  gives ``START, START+STEP, ...`` up to and including STOP when STOP lands on the grid
  (``1:10:4`` is 1, 5, 9; ``0.1:0.5:0.1`` is 0.1 ... 0.5). Values are checked against the key's
  type and range before anything runs.
- The grid is the cartesian product of all keys, the first key outermost. ``--mode`` (default
  both versions) and ``--n`` (default 100,000) are the same as ``--param mode=...`` and
  ``--param n=...``. ``--set`` fixes a model key for every point.
- ``--fidelity`` defaults to ``tile`` (one event per transfer or kernel call).

Spec file
---------
``--spec FILE.toml`` holds the same, in TOML::

    model = "my_model.toml"           # optional, relative to this file; default the J6 model
    fidelity = "tile"                 # optional
    mode = ["pingpong", "direct"]     # or "pingpong,direct"; optional
    n = 100000                        # or a list, or "1024:8192:1024"; optional

    [set]                             # fixed overrides, optional
    "idma.burst_bytes" = 128

    [params]                          # swept keys, in this order
    "ddr.latency_cycles" = [50, 100, 200]     # a list ...
    "idma.max_outstanding" = "1:32:1"         # ... or the command line's text
    softmax = { tile_bytes = "4096,16384" }   # nested tables name dotted keys too

Command-line options override the file's scalars (model, fidelity, mode, n); ``--param`` keys are
added after the file's, and a key given twice is an error.

Output
------
One row per point: a column per swept key, named exactly as given (``mode`` and ``n`` always
present), then ``cycles``, ``time_us``, ``ddr_read_bytes``, ``ddr_write_bytes``,
``core_busy_cycles``, ``idma<k>_busy_cycles`` (one per iDMA channel), ``ddr_busy_cycles``,
``ddr_stall_cycles``, ``idma_in_stall_cycles``, ``idma_out_stall_cycles`` (cycles the core stalled
on DDR loads, on input copies and on output copies), ``wall_s`` (host seconds for the point) and
``error`` (empty when the point succeeded, else the one-line reason; its result cells are empty).
Everything before ``cycles`` is a parameter column.

Never losing work
-----------------
- CSV: the file itself is the journal. The header is written first; every finished point is
  appended as one line and flushed at once (so a killed process, ``kill -9`` included, loses
  nothing written), and fsynced at most every second and at the end (so an OS crash loses at most
  the last second). When the grid is complete the file is rewritten in grid order (to a temporary
  file, then renamed over it).
- Parquet: points go to a CSV journal ``FILE.parquet.journal.csv`` as above; when the grid is
  complete the parquet file is written (temporary file, then rename) with the journal's rows and
  any rows of an earlier parquet file, and the journal is removed. An interrupted parquet sweep
  therefore leaves its finished points readable in the journal. Needs ``pyarrow``
  (``pip install 'dspsim[parquet]'``).
- A sidecar ``FILE.sweep.json`` records how the file was made (columns, fidelity, the fixed model
  values, dspsim version, git commit).
- Rerunning the same command reads what is there, drops a torn last line left by a kill, and
  computes only the missing points (a point is identified by its parameter values). A file made
  by a different sweep (other columns, fidelity or fixed model values) is refused with one line.
  Points that failed count as done; ``--retry-failed`` computes them again.
- Only one sweep may write a file at a time (an advisory lock on it).

Failed points and exit codes
----------------------------
A point that fails (e.g. ``softmax.tile_bytes`` larger than ``tcm.bank_bytes``) is recorded
with its error message and the sweep goes on. Exit codes of ``dspsim sweep``: 0 when every point
of the grid succeeded; 1 when some failed (the count is printed on stderr: "k of N points
failed"); 2 for bad input (nothing was run); 130 when interrupted (finished points are kept).

Executors
---------
``--jobs N`` runs the points in N worker processes; the parent writes each row as its point
completes. A progress bar (points done / total, rate, ETA) is drawn when stderr is a terminal.

``--executor dask`` sends the points to a dask.distributed cluster (``pip install
'dspsim[dask]'``): ``--scheduler ADDRESS`` (e.g. ``tcp://10.0.0.5:8786``) for an existing cluster,
otherwise a LocalCluster of ``--jobs`` single-threaded worker processes. On a real cluster every
worker needs the same dspsim installed (``pip install dspsim[dask]`` on each machine, then
``dask scheduler`` on one and ``dask worker tcp://SCHEDULER:8786`` on the others); the machine
running ``dspsim sweep`` writes the file, so only it needs the output directory.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dspsim import __version__
from dspsim.config import SECTIONS, HardwareModel, all_keys, load_model, parse_value
from dspsim.config import check_value as check_model_value
from dspsim.config import key_type as model_key_type
from dspsim.errors import DspsimInputError
from dspsim.sim import FIDELITIES, MODES, git_sha, simulate

try:  # POSIX advisory locks; elsewhere two sweeps on one file are not guarded against
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SPECIAL_KEYS = ("mode", "n")
EXTENSIONS = (".csv", ".parquet")
EXECUTORS = ("local", "dask")
DEFAULT_N = 100_000
DEFAULT_FIDELITY = "tile"
HEAD_COLUMNS = ("cycles", "time_us", "ddr_read_bytes", "ddr_write_bytes")
STALL_COLUMNS = ("ddr_stall_cycles", "idma_in_stall_cycles", "idma_out_stall_cycles")
TAIL_COLUMNS = ("wall_s", "error")
FLOAT_RESULT_COLUMNS = ("time_us", "wall_s")
MAX_VALUES_PER_KEY = 1_000_000
MAX_POINTS = 10_000_000
FSYNC_INTERVAL_S = 1.0
META_FORMAT = 1


class SweepAbortedError(RuntimeError):
    """The sweep stopped before the grid was complete (a worker died, a cluster timed out);
    every finished point is in the file."""


# ------------------------------------------------------------------------ keys and values
def key_type(key: str) -> type:
    """The Python type of a sweep key's values (``int``, ``float``, ``str`` or ``bool``)."""
    if key == "n":
        return int
    if key == "mode":
        return str
    if "." not in key or key.split(".")[0] not in SECTIONS:
        raise DspsimInputError(
            f"unknown sweep key {key!r}; allowed: mode, n or a model key ({', '.join(all_keys())})"
        )
    return model_key_type(key)


def check_value(key: str, value: Any) -> Any:
    """Check one value of a sweep key on its own (type, range, choices); return it coerced."""
    if key == "mode":
        if value not in MODES:
            raise DspsimInputError(f"mode {value!r}: allowed {', '.join(MODES)}")
        return value
    if key == "n":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise DspsimInputError(
                f"n = {value!r}: must be a positive integer (number of float32 elements)"
            )
        return value
    return check_model_value(key, value)  # unknown key, wrong type or range -> one-line error


def format_value(value: Any) -> str:
    """Canonical text of a value in the table: ints plain, floats round-trip exact."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _canon_text(key: str, text: str) -> str:
    """Canonical text of a parameter cell read back from a file (``100`` of a float key is
    ``100.0``)."""
    t = key_type(key)
    if t is str:
        return text
    if t is bool:
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} value {text!r} is not true or false")
        return text.strip().lower()
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{key} value {text!r} is not a number") from None
    if t is int:
        if not number.is_integer():
            raise ValueError(f"{key} value {text!r} is not an integer")
        return str(int(number))
    return repr(number)


def _parse_number(key: str, text: str, what: str = "value") -> int | float:
    try:
        v = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        v = None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DspsimInputError(f"{key}: {what} {text.strip()!r} is not a number")
    if not math.isfinite(v):
        raise DspsimInputError(f"{key}: {what} {text.strip()!r} is not a finite number")
    return v


def _range_values(key: str, text: str) -> list[Any]:
    t = key_type(key)
    parts = text.split(":")
    if t in (str, bool):
        raise DspsimInputError(
            f"{key}={text}: START:STOP:STEP ranges need a numeric key; list values as V1,V2,..."
        )
    if len(parts) != 3:
        raise DspsimInputError(f"{key}={text}: malformed range; expected START:STOP:STEP")
    start, stop, step = (_parse_number(key, p, w) for p, w in zip(parts, ("START", "STOP", "STEP")))
    if step <= 0:
        raise DspsimInputError(f"{key}={text}: STEP must be greater than 0")
    if start > stop:
        raise DspsimInputError(f"{key}={text}: START is greater than STOP (ranges go upwards)")
    if t is int:
        if not all(float(v).is_integer() for v in (start, stop, step)):
            raise DspsimInputError(f"{key}={text}: {key} takes integers")
        start, stop, step = int(start), int(stop), int(step)
        count = (stop - start) // step + 1
    else:
        # STOP is included when it lands on the grid up to rounding (0.1:0.3:0.1 gives 3 values)
        count = math.floor((stop - start) / step * (1 + 1e-12) + 1e-9) + 1
    if count > MAX_VALUES_PER_KEY:
        raise DspsimInputError(
            f"{key}={text}: {count:,} values; at most {MAX_VALUES_PER_KEY:,} per key"
        )
    if t is int:
        return list(range(start, start + count * step, step))
    # 12 significant digits: 0.1 + 2 * 0.1 is 0.3, not 0.30000000000000004
    return [float(f"{start + i * step:.12g}") for i in range(count)]


def parse_values(key: str, text: str) -> list[Any]:
    """Values of ``KEY=TEXT``: ``V1,V2,...`` or ``START:STOP:STEP``, checked and coerced."""
    t = key_type(key)
    text = text.strip()
    if not text:
        raise DspsimInputError(f"{key}: no values; give V1,V2,... or START:STOP:STEP")
    if ":" in text:
        raw: list[Any] = _range_values(key, text)
    else:
        items = [s.strip() for s in text.split(",")]
        if any(not s for s in items):
            raise DspsimInputError(f"{key}={text}: empty value in the list")
        if t is str:
            raw = [s.strip("'\"") for s in items]
        elif t is bool:
            raw = [parse_value(key, s) for s in items]  # TOML true/false
        else:
            raw = [_parse_number(key, s) for s in items]
    return _checked(key, raw)


def _checked(key: str, raw: Iterable[Any]) -> list[Any]:
    values = [check_value(key, v) for v in raw]
    if not values:
        raise DspsimInputError(f"{key}: no values; give V1,V2,... or START:STOP:STEP")
    seen: set[str] = set()
    for v in values:
        if format_value(v) in seen:
            raise DspsimInputError(f"{key}: value {format_value(v)} is given twice")
        seen.add(format_value(v))
    return values


def parse_param(item: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` or ``KEY=START:STOP:STEP`` -> (key, values)."""
    key, eq, text = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise DspsimInputError(
            f"--param {item!r}: expected KEY=V1,V2,... or KEY=START:STOP:STEP, "
            "e.g. ddr.latency_cycles=50:400:50"
        )
    return key, parse_values(key, text)


def _spec_values(key: str, value: Any) -> list[Any]:
    """Values of a key in a spec file: a list, the command line's text, or one scalar."""
    if isinstance(value, str):
        return parse_values(key, value)
    if isinstance(value, list):
        return _checked(key, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _checked(key, [value])
    raise DspsimInputError(f"{key} = {value!r}: expected a list, a string or a number")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in table.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read a sweep spec file (format in the module docstring) into ``build_sweep`` arguments."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DspsimInputError(f"spec file {str(p)!r} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DspsimInputError(f"spec file {str(p)!r} unreadable: {e.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as e:
        raise DspsimInputError(f"spec file {str(p)!r} is not valid TOML: {e}") from None
    allowed = ("model", "fidelity", "mode", "n", "set", "params")
    for k in raw:
        if k not in allowed:
            raise DspsimInputError(
                f"spec file {str(p)!r}: unknown entry {k!r}; allowed: {', '.join(allowed)}"
            )
    out: dict[str, Any] = {}
    if "model" in raw:
        model = raw["model"]
        if not isinstance(model, str):
            raise DspsimInputError(f"spec file {str(p)!r}: model must be a path string")
        out["model"] = str(p.parent / model) if not Path(model).is_absolute() else model
    if "fidelity" in raw:
        out["fidelity"] = raw["fidelity"]
    for k in ("mode", "n"):
        if k in raw:
            out[k] = _spec_values(k, raw[k])
    for k in ("set", "params"):
        if k in raw and not isinstance(raw[k], dict):
            raise DspsimInputError(f"spec file {str(p)!r}: [{k}] must be a table")
    out["overrides"] = dict(_flatten(raw.get("set", {})))
    out["params"] = {k: _spec_values(k, v) for k, v in _flatten(raw.get("params", {}))}
    return out


# ------------------------------------------------------------------------------ the grid
@dataclass(frozen=True)
class Sweep:
    """A grid of points: ordered (key, values) axes over a base model, at one fidelity."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    model: HardwareModel
    fidelity: str

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.axes]

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.axes)

    def points(self) -> Iterator[dict[str, Any]]:
        """Every point, the first key outermost."""
        keys = self.keys
        for combo in itertools.product(*(v for _, v in self.axes)):
            yield dict(zip(keys, combo))

    def identity(self, point: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(format_value(point[k]) for k in self.keys)

    @property
    def channels(self) -> int:
        """iDMA channels to give busy columns to: the most any point has."""
        counts = dict(self.axes).get("idma.channels", (self.model.idma.channels,))
        return max(counts)

    @property
    def columns(self) -> list[str]:
        busy = (
            ["core_busy_cycles"]
            + [f"idma{c}_busy_cycles" for c in range(self.channels)]
            + ["ddr_busy_cycles"]
        )
        return [*self.keys, *HEAD_COLUMNS, *busy, *STALL_COLUMNS, *TAIL_COLUMNS]

    def meta(self) -> dict[str, Any]:
        """What makes two files the same sweep (columns, fidelity, fixed model values), plus
        provenance."""
        swept = set(self.keys)
        return {
            "format": META_FORMAT,
            "columns": self.columns,
            "fidelity": self.fidelity,
            "fixed_model": {k: v for k, v in self.model.flat().items() if k not in swept},
            "model_source": self.model.source,
            "dspsim_version": __version__,
            "git_sha": git_sha(),
        }


def build_sweep(
    params: Sequence[str] | Mapping[str, Any] = (),
    *,
    modes: str | Sequence[str] | None = None,
    n: int | str | Sequence[int] | None = None,
    model: str | Path | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    fidelity: str | None = None,
    spec: str | Path | None = None,
) -> Sweep:
    """Build a sweep from ``--param`` texts (or a key -> values mapping), modes, n, a model file,
    fixed overrides, a fidelity and an optional spec file (whose scalars these override)."""
    loaded = load_spec(spec) if spec is not None else {"params": {}, "overrides": {}}
    axes: dict[str, list[Any]] = dict(loaded["params"])

    def add(key: str, values: list[Any]) -> None:
        if key in axes:
            raise DspsimInputError(f"sweep key {key!r} is given twice")
        axes[key] = values

    if isinstance(params, Mapping):
        for key, value in params.items():
            add(key, _spec_values(key, value))
    else:
        for item in params:
            add(*parse_param(item))
    # --mode / --n replace the spec file's scalars; a swept key given again is an error
    for key, value, default in (("mode", modes, list(MODES)), ("n", n, [DEFAULT_N])):
        if value is not None:
            if key in axes:
                raise DspsimInputError(f"sweep key {key!r} is given twice (--{key} and --param)")
            given = list(value) if isinstance(value, (list, tuple)) else value
            axes[key] = _spec_values(key, given)
        elif key not in axes:
            axes[key] = loaded.get(key, default)

    fixed: dict[str, Any] = dict(loaded["overrides"])
    if overrides:
        if isinstance(overrides, Mapping):
            fixed.update(overrides)
        else:
            for item in overrides:
                k, eq, v = item.partition("=")
                if not eq or not k.strip():
                    raise DspsimInputError(
                        f"--set {item!r}: expected KEY=VALUE, e.g. ddr.latency_cycles=300"
                    )
                fixed[k.strip()] = parse_value(k.strip(), v)
    for k in fixed:
        if k in axes:
            raise DspsimInputError(f"{k} is both fixed (--set) and swept (--param)")
    base = load_model(model if model is not None else loaded.get("model"), dict(fixed) or None)
    fid = fidelity if fidelity is not None else loaded.get("fidelity", DEFAULT_FIDELITY)
    if fid not in FIDELITIES:
        raise DspsimInputError(f"fidelity {fid!r}: allowed {', '.join(FIDELITIES)}")
    sweep = Sweep(tuple((k, tuple(v)) for k, v in axes.items()), base, fid)
    if sweep.size > MAX_POINTS:
        raise DspsimInputError(f"the grid has {sweep.size:,} points; at most {MAX_POINTS:,}")
    return sweep


# ------------------------------------------------------------------------- one point
def evaluate_point(model: HardwareModel, point: Mapping[str, Any], fidelity: str) -> dict[str, Any]:
    """Run one point; never raises for the point's own failure: the reason goes in ``error``."""
    start = time.perf_counter()
    try:
        overrides = {k: v for k, v in point.items() if k not in SPECIAL_KEYS}
        m = model.with_overrides(overrides) if overrides else model
        r = simulate(m, point["mode"], point["n"], data=False, fidelity=fidelity)
    except Exception as e:  # noqa: BLE001 - every failure of a point is recorded, not fatal
        msg = " ".join(str(e).split()) or "no message"
        return {"wall_s": time.perf_counter() - start, "error": f"{type(e).__name__}: {msg}"}
    row: dict[str, Any] = {
        "cycles": r.cycles,
        "time_us": float(r.time_us),
        "ddr_read_bytes": r.bytes["ddr_read"],
        "ddr_write_bytes": r.bytes["ddr_write"],
    }
    row.update({f"{k}_busy_cycles": v for k, v in r.busy_cycles.items()})
    row.update({f"{k}_stall_cycles": v for k, v in r.stall_cycles.items()})
    row["wall_s"] = time.perf_counter() - start
    row["error"] = ""
    return row


def _row_texts(sweep: Sweep, point: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    out = []
    for c in sweep.columns:
        if c in point:
            out.append(format_value(point[c]))
        elif c == "wall_s":
            out.append(f"{result.get(c, 0.0):.6f}")
        elif c in result:
            out.append(format_value(result[c]))
        else:
            out.append("")
    return out


# ------------------------------------------------------------------------------ executors
def _worker_init(parent_pid: int) -> None:
    # Ctrl-C reaches the whole process group: only the parent acts on it (it stops handing out
    # points and keeps what finished); workers finish their point quietly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed with -9 cannot shut the pool down, and forked workers share the queue's
    # pipe so they would never see it close: they leave on their own once orphaned.
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)


def _local_results(
    sweep: Sweep, todo: list[dict[str, Any]], jobs: int, started
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    if jobs <= 1 or len(todo) <= 1:
        started()
        for p in todo:
            yield p, evaluate_point(sweep.model, p, sweep.fidelity)
        return
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(todo)), initializer=_worker_init, initargs=(os.getpid(),)
    )
    try:
        # workers are forked before the progress bar starts its thread
        pool.submit(int).result()
        started()
        window = 4 * jobs  # bounded in flight: a huge grid is not all queued at once
        it = iter(todo)
        pending: dict[Any, dict[str, Any]] = {}

        def fill() -> None:
            for p in itertools.islice(it, max(0, window - len(pending))):
                pending[pool.submit(evaluate_point, sweep.model, p, sweep.fidelity)] = p

        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                p = pending.pop(f)
                try:
                    result = f.result()
                except Exception as e:
                    raise SweepAbortedError(
                        f"a worker process failed ({type(e).__name__}: {e})"
                    ) from None
                yield p, result
            fill()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _dask_import():
    try:
        import distributed
    except ImportError:
        raise DspsimInputError(
            "--executor dask needs dask.distributed; install it with: pip install 'dspsim[dask]'"
        ) from None
    return distributed


def _dask_results(
    sweep: Sweep,
    todo: list[dict[str, Any]],
    jobs: int,
    started,
    scheduler: str | None,
    processes: bool,
    timeout_s: float | None,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    import logging

    distributed = _dask_import()
    cluster = None
    try:
        if scheduler:
            client = distributed.Client(scheduler, timeout=timeout_s or 30)
        else:
            cluster = distributed.LocalCluster(
                n_workers=max(1, jobs),
                threads_per_worker=1,
                processes=processes,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            client = distributed.Client(cluster, timeout=timeout_s or 30)
    except OSError as e:
        raise SweepAbortedError(f"cannot reach the dask scheduler {scheduler!r}: {e}") from None
    try:
        started()
        window = 4 * max(1, sum(client.nthreads().values()))
        it = iter(todo)
        pending: dict[str, dict[str, Any]] = {}
        ac = distributed.as_completed(timeout=timeout_s)

        def fill() -> None:
            for p in itertools.islice(it, max(0, window - len(pending))):
                f = client.submit(evaluate_point, sweep.model, p, sweep.fidelity, pure=False)
                pending[f.key] = p
                ac.add(f)

        fill()
        try:
            for f in ac:
                p = pending.pop(f.key)
                try:
                    result = f.result()
                except Exception as e:
                    msg = f"a dask task failed ({type(e).__name__}: {e})"
                    raise SweepAbortedError(msg) from None
                yield p, result
                fill()
        except TimeoutError:
            msg = f"the dask cluster did not finish within {timeout_s} s"
            raise SweepAbortedError(msg) from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ------------------------------------------------------------------------------ the file
def sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".sweep.json")


def journal_path(out: Path) -> Path:
    """Where finished points are appended: the CSV itself, or a CSV beside a parquet file."""
    return out if out.suffix == ".csv" else out.with_name(out.name + ".journal.csv")


def check_out(out: str | Path) -> Path:
    p = Path(out)
    if p.suffix not in EXTENSIONS:
        raise DspsimInputError(
            f"output {str(p)!r}: unknown extension {p.suffix or '(none)'!r}; "
            f"allowed {', '.join(EXTENSIONS)}"
        )
    if p.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise DspsimInputError(
                "writing .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
            ) from None
    return p


def _read_csv_rows(path: Path, columns: list[str] | None) -> tuple[list[str], list[list[str]], int]:
    """(header, rows, good_bytes) of a journal; a torn last line (no newline) is left out."""
    data = path.read_bytes()
    good = data.rfind(b"\n") + 1
    try:
        text = data[:good].decode("utf-8")
    except UnicodeDecodeError:
        raise DspsimInputError(f"{path}: not a UTF-8 CSV file written by dspsim sweep") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return [], [], good
    header, body = rows[0], rows[1:]
    if columns is not None and header != columns:
        raise DspsimInputError(
            f"{path} was written by a different sweep (columns {','.join(header)}; this sweep "
            f"has {','.join(columns)}); choose another --out or delete it"
        )
    for i, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise DspsimInputError(
                f"{path} line {i}: {len(r)} fields, expected {len(header)}; the file is damaged"
            )
    return header, body, good


def _parquet_rows(path: Path, sweep: Sweep) -> list[list[str]]:
    df = pd.read_parquet(path)
    if list(df.columns) != sweep.columns:
        raise DspsimInputError(
            f"{path} was written by a different sweep (columns {','.join(map(str, df.columns))}; "
            f"this sweep has {','.join(sweep.columns)}); choose another --out or delete it"
        )
    rows = []
    for rec in df.itertuples(index=False):
        rows.append(
            [
                ""
                if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
                else format_value(v.item() if hasattr(v, "item") else v)
                for v in rec
            ]
        )
    return rows


def _check_meta(out: Path, sweep: Sweep) -> None:
    side = sidecar_path(out)
    if not side.exists():
        return
    try:
        old = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # a damaged sidecar is rewritten; the header check still guards the columns
    new = sweep.meta()
    for k in ("columns", "fidelity"):
        if old.get(k) != new[k]:
            raise DspsimInputError(
                f"{out} was written by a different sweep ({k} {old.get(k)} there, {new[k]} "
                "here); choose another --out or delete it"
            )
    for k, v in new["fixed_model"].items():
        if k in old.get("fixed_model", {}) and old["fixed_model"][k] != v:
            raise DspsimInputError(
                f"{out} was written by a different sweep ({k} = {old['fixed_model'][k]} there, "
                f"{v} here); choose another --out or delete it"
            )


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _csv_bytes(header: list[str], rows: Iterable[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _typed_frame(sweep: Sweep, rows: list[list[str]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=sweep.columns)
    for c in sweep.columns:
        if c in sweep.keys:
            t = key_type(c)
            if t is not str:
                df[c] = df[c].astype("int64" if t is int else "float64")
        elif c in FLOAT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
        elif c != "error":
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df


@dataclass
class SweepSummary:
    out: Path
    points: int  # in the grid
    computed: int  # by this run
    resumed: int  # found already in the file
    failed: int  # grid points whose row has an error
    wall_s: float

    def line(self) -> str:
        return (
            f"sweep: {self.points:,} points ({self.computed:,} computed, {self.resumed:,} already "
            f"in the file), {self.failed:,} failed, {self.wall_s:.1f} s -> {self.out}"
        )


def _busy(path: Path) -> DspsimInputError:
    return DspsimInputError(
        f"{path} is being written by another sweep; wait for it or choose another --out"
    )


def _check_unlocked(path: Path) -> None:
    """Refuse early, before reading or rewriting anything, when another sweep holds the file."""
    if fcntl is None or not path.exists():
        return
    with open(path, "rb") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise _busy(path) from None


class _Journal:
    """Append-only CSV: one line per finished point, flushed at once, fsynced every second."""

    def __init__(self, path: Path, header: list[str], good_bytes: int, fresh: bool):
        self.path = path
        self.f = open(path, "a+b")  # noqa: SIM115 - closed in close()
        if fcntl is not None:
            try:
                fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.f.close()
                raise _busy(path) from None
        if fresh:
            self.f.truncate(0)
            self._write(_csv_bytes(header, []))
        elif self.f.seek(0, os.SEEK_END) != good_bytes:
            self.f.truncate(good_bytes)  # drop a line torn by a kill
        self.f.seek(0, os.SEEK_END)
        self.fsync()

    def _write(self, data: bytes) -> None:
        self.f.write(data)
        self.f.flush()

    def append(self, row: list[str]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(row)
        self._write(buf.getvalue().encode("utf-8"))  # one line, one write
        if time.monotonic() - self.synced >= FSYNC_INTERVAL_S:
            self.fsync()

    def fsync(self) -> None:
        os.fsync(self.f.fileno())
        self.synced = time.monotonic()

    def close(self) -> None:
        if not self.f.closed:
            self.fsync()
            self.f.close()


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    progress: bool | None = None,
    retry_failed: bool = False,
    fresh: bool = False,
    dask_processes: bool = True,
    timeout_s: float | None = None,
) -> SweepSummary:
    """Run every point of ``sweep`` not yet in ``out`` and write each row as it completes.

    ``progress``: draw a progress bar (default: when stderr is a terminal). ``fresh``: discard an
    existing file first. ``dask_processes``: LocalCluster workers as processes (else threads).
    ``timeout_s``: give up on a dask cluster after this long (the file keeps what finished).
    """
    t0 = time.perf_counter()
    out = check_out(out)
    if executor not in EXECUTORS:
        raise DspsimInputError(f"executor {executor!r}: allowed {', '.join(EXECUTORS)}")
    if executor == "dask":
        _dask_import()
    elif scheduler:
        raise DspsimInputError("--scheduler needs --executor dask")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DspsimInputError(f"jobs = {jobs!r}: must be a positive integer")
    if not out.parent.is_dir():
        raise DspsimInputError(f"output directory {str(out.parent)!r} does not exist")
    journal = journal_path(out)
    _check_unlocked(journal)
    if fresh:
        for p in (out, journal, sidecar_path(out)):
            p.unlink(missing_ok=True)

    columns = sweep.columns
    existing: list[list[str]] = []
    good = 0
    header: list[str] = []
    if journal.exists():
        header, existing, good = _read_csv_rows(journal, columns)
    if out.suffix == ".parquet" and out.exists():
        existing = _parquet_rows(out, sweep) + existing
    if existing:
        _check_meta(out, sweep)

    nkeys = len(sweep.keys)
    done: dict[tuple[str, ...], list[str]] = {}
    for r in existing:
        try:
            ident = tuple(_canon_text(k, v) for k, v in zip(sweep.keys, r[:nkeys]))
        except ValueError as e:
            raise DspsimInputError(f"{journal}: {e}; the file is damaged") from None
        done.setdefault(ident, r)
    grid_ids = {sweep.identity(p) for p in sweep.points()}
    if retry_failed:
        failed_ids = {i for i, r in done.items() if r[-1] and i in grid_ids}
        if failed_ids:
            for i in failed_ids:
                del done[i]
            # rewrite without them so the file never holds two rows for a point
            _atomic_write(journal, lambda f: f.write(_csv_bytes(columns, done.values())))
            header, _, good = _read_csv_rows(journal, columns)
    todo = [p for p in sweep.points() if sweep.identity(p) not in done]
    resumed = sweep.size - len(todo)

    side = sidecar_path(out)
    if not existing or not side.exists():
        _atomic_write(side, lambda f: f.write(json.dumps(sweep.meta(), indent=2).encode()))

    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    computed = 0
    writer = _Journal(journal, columns, good, fresh=not header)
    try:

        def started() -> None:
            nonlocal bar
            if show:
                from tqdm import tqdm

                bar = tqdm(
                    total=sweep.size,
                    initial=resumed,
                    unit="pt",
                    desc="sweep",
                    file=sys.stderr,
                    dynamic_ncols=True,
                    smoothing=0.05,
                )

        if todo:
            if executor == "dask":
                results = _dask_results(
                    sweep, todo, jobs, started, scheduler, dask_processes, timeout_s
                )
            else:
                results = _local_results(sweep, todo, jobs, started)
            for point, result in results:
                row = _row_texts(sweep, point, result)
                writer.append(row)
                done[sweep.identity(point)] = row
                computed += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        writer.close()

    order = [sweep.identity(p) for p in sweep.points()]
    extra = [i for i in done if i not in grid_ids]  # rows of earlier, other grids: kept
    rows = [done[i] for i in order] + [done[i] for i in extra]
    if out.suffix == ".csv":
        if rows != existing:  # grid order once complete; untouched if already so
            _atomic_write(out, lambda f: f.write(_csv_bytes(columns, rows)))
    else:
        df = _typed_frame(sweep, rows)
        _atomic_write(out, lambda f: df.to_parquet(f, index=False))
        journal.unlink(missing_ok=True)
    failed = sum(1 for i in order if done[i][-1])
    return SweepSummary(out, sweep.size, computed, resumed, failed, time.perf_counter() - t0)


def read_sweep(path: str | Path) -> pd.DataFrame:
    """A sweep file as a DataFrame: CSV (a torn last line left out), or parquet plus its journal
    when an interrupted run left one."""
    p = Path(path)
    if p.suffix not in EXTENSIONS:
        raise DspsimInputError(
            f"sweep file {str(p)!r}: unknown extension {p.suffix or '(none)'!r}; "
            f"allowed {', '.join(EXTENSIONS)}"
        )
    frames = []
    if p.suffix == ".parquet" and p.exists():
        try:
            frames.append(pd.read_parquet(p))
        except ImportError:
            raise DspsimInputError(
                "reading .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
            ) from None
    j = journal_path(p)
    if j.exists():
        data = j.read_bytes()
        text = data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace")
        if text.strip():
            try:
                frames.append(pd.read_csv(io.StringIO(text), dtype={"error": str}))
            except (pd.errors.ParserError, ValueError) as e:
                raise DspsimInputError(f"{j}: not a sweep table ({e})") from None
    if not frames:
        raise DspsimInputError(f"sweep file {str(p)!r} not found or empty")
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "cycles" not in df.columns or "error" not in df.columns:
        raise DspsimInputError(f"{p}: not a dspsim sweep table (no cycles or error column)")
    df["error"] = df["error"].fillna("").astype(str)
    keys = key_columns(df)
    # the same dtypes from CSV as from parquet: counts stay integers next to failed points' gaps
    for c in df.columns[len(keys) :]:
        if c in FLOAT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
        elif c != "error":
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    if len(frames) > 1 and keys:
        df = df.drop_duplicates(subset=keys, keep="last", ignore_index=True)
    return df


def key_columns(df: pd.DataFrame) -> list[str]:
    """The parameter columns of a sweep table: everything before ``cycles``."""
    cols = list(df.columns)
    return cols[: cols.index("cycles")] if "cycles" in cols else []


# ---------------------------------------------------------------------------- helpers
def bench_sweep(
    points: int = 1000, jobs: int = 2, n: int = DEFAULT_N, fidelity: str = "tile"
) -> dict[str, float]:
    """Time a ``points``-point sweep (both versions x DDR latencies from 20 to 2,000 cycles) into a
    temporary file with ``jobs`` worker processes."""
    if points < 2:
        raise DspsimInputError(f"points = {points}: at least 2 (both versions)")
    count = points // 2
    latencies = sorted({float(f"{20 + 1980 * i / max(1, count - 1):.6g}") for i in range(count)})
    sweep = build_sweep({"ddr.latency_cycles": latencies}, n=n, fidelity=fidelity)
    with tempfile.TemporaryDirectory() as d:
        summary = run_sweep(sweep, Path(d) / "bench.csv", jobs=jobs, progress=False)
    return {
        "points": summary.points,
        "wall_s": summary.wall_s,
        "points_per_s": summary.points / summary.wall_s,
    }


# --------------------------------------------------------------------------- experiments
def experiment_parser(description: str) -> argparse.ArgumentParser:
    """Options shared by the scripts in ``experiments/``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument(
        "--fidelity", choices=FIDELITIES, default="burst",
        help="default: burst, the reference (an experiment's grid is small); tile is the fast "
        "approximation for large sweeps, exact where the port is not contended",
    )
    p.add_argument("--out-dir", metavar="DIR", help="where to write (default: results/)")
    return p


def run_experiment(
    name: str, args: argparse.Namespace, default_dir: Path, **sweep_args: Any
) -> tuple[pd.DataFrame, Path]:
    """Run an experiment's sweep afresh into ``<dir>/<name>.csv``; return its table and the
    directory. ``sweep_args`` go to :func:`build_sweep`."""
    out_dir = Path(args.out_dir) if args.out_dir else default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    fidelity = args.fidelity
    sweep = build_sweep(fidelity=fidelity, **sweep_args)
    csv_path = out_dir / f"{name}.csv"
    summary = run_sweep(sweep, csv_path, jobs=args.jobs, fresh=True)
    print(f"{summary.line()} [{fidelity} fidelity]", file=sys.stderr)
    df = read_sweep(csv_path)
    if summary.failed:
        print(f"{name}: {summary.failed} points failed; see {csv_path}", file=sys.stderr)
    return df[df["error"] == ""].reset_index(drop=True), out_dir


def script_main(main) -> None:
    """Run an experiment's ``main()``: bad input is one line on stderr and exit 2."""
    try:
        main()
    except DspsimInputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


# ------------------------------------------------------------------------- command line
def add_arguments(sub) -> None:
    """Declare ``dspsim sweep`` on the CLI's subparsers."""
    from dspsim.cli.common import add_model_args  # the CLI imports this module lazily: no cycle

    p = sub.add_parser(
        "sweep",
        help="run a grid of model keys, n and mode into a CSV or parquet table (resumable)",
        description="Each finished point is written at once; rerunning the same command "
        "computes only the missing points. Exit codes: 0 all points succeeded, 1 some failed "
        "(count on stderr), 2 bad input, 130 interrupted (finished points are kept).",
    )
    p.add_argument(
        "--param",
        metavar="KEY=VALUES",
        action="append",
        default=[],
        help="swept key: KEY=V1,V2,... or KEY=START:STOP:STEP (STOP included when on the grid); "
        "any model key, n or mode (repeatable)",
    )
    p.add_argument("--mode", help="versions, e.g. pingpong,direct (default both)")
    p.add_argument("--n", help="float32 elements (default 100000); a list or range sweeps it")
    add_model_args(p, set_help="fix a model key for every point (repeatable)")
    p.add_argument("--spec", metavar="FILE.toml", help="sweep spec file (see dspsim.sweep)")
    p.add_argument("--out", required=True, metavar="FILE", help="output .csv or .parquet")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--fidelity", choices=FIDELITIES, help="simulation fidelity (default tile)")
    p.add_argument("--executor", choices=EXECUTORS, default="local")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler, e.g. tcp://host:8786")
    p.add_argument(
        "--retry-failed", action="store_true", help="compute again the points that failed before"
    )


def cli_main(args: argparse.Namespace) -> int:
    """Run ``dspsim sweep``; returns the exit code (see ``add_arguments``)."""
    if args.jobs < 1:
        raise DspsimInputError(f"--jobs {args.jobs}: must be a positive integer")
    out = check_out(args.out)
    if args.executor == "dask":
        _dask_import()
    sweep = build_sweep(
        args.param,
        modes=args.mode,
        n=args.n,
        model=args.model,
        overrides=args.overrides,
        fidelity=args.fidelity,
        spec=args.spec,
    )
    try:
        summary = run_sweep(
            sweep,
            out,
            jobs=args.jobs,
            executor=args.executor,
            scheduler=args.scheduler,
            retry_failed=args.retry_failed,
        )
    except KeyboardInterrupt:
        print(
            f"dspsim: interrupted; finished points are in {journal_path(out)}; "
            "rerun the same command to finish",
            file=sys.stderr,
        )
        return 130
    except SweepAbortedError as e:
        print(
            f"dspsim: error: {e}; finished points are in {journal_path(out)}; "
            "rerun the same command to finish",
            file=sys.stderr,
        )
        return 1
    print(summary.line())
    if summary.failed:
        print(
            f"dspsim: {summary.failed} of {summary.points} points failed; see the error column "
            f"of {out}",
            file=sys.stderr,
        )
        return 1
    return 0
