"""Workload files: streams of DSP tasks in TOML, read and checked like model files.

The format, every refusal and the bounds (:data:`MIN_PERIOD_US`, :data:`MAX_TIME_US`, also for
the last release, and :data:`MAX_TASKS`: a run stays exact in cycles and its memory bounded)
are in docs/workloads.md; a stream may also name an ``op_file`` (a path relative to the
workload file) whose op it runs. Every mistake is one line (:class:`WorkloadError`); what
depends on the model (a backend beyond ``core.count``, a run the op refuses) is checked by
:func:`check_workload`.
"""

from __future__ import annotations

import math
import re
import reprlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from dspsim.arrays import DDR_WINDOW_BYTES, ddr_layout_bytes
from dspsim.config import checked_model, parse_toml
from dspsim.errors import DspsimInputError
from dspsim.host.ucp import ANY, check_priority, parse_backend
from dspsim.host.window import check_fits_window
from dspsim.ops import get_op
from dspsim.paths import read_small_text

MAX_FILE_BYTES = 1 << 20
MAX_TASKS = 1_000_000  # all streams together: ~0.1 KB per task in the run, ~1 KB more in tables
MIN_PERIOD_US = 1e-3  # one nanosecond
MAX_TIME_US = 86_400e6  # 24 h: 8.64e13 cycles at J6's 1,000 MHz, float64 resolves 1/64 cycle


def _digits(x: float) -> str:
    """A float in fixed notation with thousands separators and every digit it has (its
    shortest round-trip form): a time just past a bound never prints equal to it."""
    return f"{Decimal(repr(float(x))):,f}"


# MAX_TIME_US as messages print it: "86,400,000,000 us (24 h)"
_MAX_TIME = f"{_digits(MAX_TIME_US).removesuffix('.0')} us ({MAX_TIME_US / 3.6e9:,g} h)"
TOP_KEYS = ("seed", "stream")
REQUIRED = ("name", "op", "period_us", "count")
OPTIONAL = ("variant", "n", "shape", "priority", "backend", "start_us", "jitter_us",
            "deadline_us", "op_file")
# the syntax of a backend (ASCII digits, no leading zero); the model says which cores exist
_CORE = re.compile(r"core(0|[1-9][0-9]*)", re.ASCII)


class WorkloadError(DspsimInputError):
    """A workload file is missing, malformed, or asks for what the platform cannot do."""


@dataclass(frozen=True)
class Stream:
    """One ``[[stream]]``: an op released ``count`` times, every ``period_us``."""

    name: str
    op: str
    variant: str
    shape: tuple[int, ...]
    period_us: float
    count: int
    priority: int = 0
    backend: str = ANY  # "any" or "core<K>"
    start_us: float = 0.0
    jitter_us: float = 0.0
    deadline_us: float | None = None

    @property
    def core(self) -> int | None:
        """The core asked for, or None for any."""
        return None if self.backend == ANY else int(self.backend.removeprefix("core"))


@dataclass(frozen=True)
class Workload:
    """A workload file's streams and seed (``source``: where it was read)."""

    streams: tuple[Stream, ...]
    seed: int = 0
    source: str = "workload"

    @property
    def tasks(self) -> int:
        return sum(s.count for s in self.streams)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 2, 4, 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 40
_show = _REPR.repr  # a value as an error message quotes it: short, whatever its size or depth


def _number(where: str, key: str, value: Any, positive: bool = False,
            minimum: float = 0.0) -> float:
    """A time in microseconds: finite, not negative (positive, at least ``minimum``, when
    ``positive``), at most :data:`MAX_TIME_US`."""
    def bad(why: str) -> WorkloadError:
        return WorkloadError(f"{where}: {key} = {_show(value)}: {why}")

    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad("expected a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise bad("expected a finite number")
    if positive and value <= 0:
        raise bad("must be positive")
    if value < 0:
        raise bad("must not be negative")
    allowed = (f"allowed more than 0 and at most {_MAX_TIME}" if positive and minimum <= 0
               else f"allowed {minimum:g} to {_MAX_TIME}")
    if value < minimum:
        raise bad(allowed)
    if value > MAX_TIME_US:
        raise bad(f"{allowed}, so that times stay exact in cycles")
    return float(value)  # an int here is at most MAX_TIME_US: exact


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _op_of_file(source: str, where: str, path: Any) -> str:
    """The op of a stream's ``op_file`` (a path relative to the workload file), loaded."""
    from dspsim.ops.fileop import load_op_file

    if not isinstance(path, str) or not path:
        raise WorkloadError(f"{where}: op_file = {_show(path)}: expected a path (relative to "
                            "the workload file)")
    try:
        return load_op_file(Path(source).parent / path)
    except DspsimInputError as e:
        raise WorkloadError(f"{where}: {e}") from None


def _stream(source: str, k: int, raw: Any) -> Stream:
    where = f"{source}: stream {k + 1}"
    if not isinstance(raw, dict):
        raise WorkloadError(f"{where}: expected a [[stream]] table")
    if isinstance(raw.get("name"), str):
        where = f"{source}: stream {_show(raw['name'])}"
    if "op_file" in raw:  # its op is the stream's: an op given too must be it
        file_op = _op_of_file(source, where, raw["op_file"])
        if raw.get("op", file_op) != file_op:
            raise WorkloadError(f"{where}: op = {_show(raw['op'])} but op_file declares op "
                                f"{file_op!r}; give op_file alone (or op = its op)")
        raw = {**raw, "op": file_op}
    _check_keys(where, raw)
    name = raw["name"]
    if not isinstance(name, str) or not name.strip():
        raise WorkloadError(f"{where}: name = {_show(name)}: expected a non-empty string")
    what, releases, deadline = _what_runs(where, raw), _releases(where, raw), raw.get("deadline_us")
    return Stream(name, **what, **releases, deadline_us=None if deadline is None
                  else _number(where, "deadline_us", deadline, True))


def _check_keys(where: str, raw: dict[str, Any]) -> None:
    """Every key of a stream's table known, every required one given."""
    for key in raw:
        if key not in REQUIRED + OPTIONAL:
            raise WorkloadError(f"{where}: unknown key {_show(key)}; allowed: "
                                f"{', '.join(REQUIRED + OPTIONAL)}")
    for key in REQUIRED:
        if key not in raw:
            raise WorkloadError(f"{where}: missing key {_show(key)}")


def _what_runs(where: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A stream's op, variant, shape (fitting the host's window), priority and backend."""
    if not isinstance(raw["op"], str):
        raise WorkloadError(f"{where}: op = {_show(raw['op'])}: expected an op name")
    try:
        op = get_op(raw["op"])
        variant = raw.get("variant", op.default_variant)
        if not isinstance(variant, str):
            raise WorkloadError(f"variant = {_show(variant)}: expected a string")
        op.check_variant(variant)
        n, shape = raw.get("n"), raw.get("shape")
        if n is not None and not _is_int(n):
            raise WorkloadError(f"shape: n = {_show(n)}: expected a positive integer")
        # a short list of integers, quoted short if not (the op checks the rest)
        if shape is not None and (not isinstance(shape, list) or len(shape) > 8
                                  or not all(_is_int(d) for d in shape)):
            raise WorkloadError(f"shape = {_show(shape)}: expected a list of positive "
                                "integers, e.g. [rows, cols]")
        shape = op.shape_of(n=n, shape=shape)
        check_fits_window(op, shape)  # before anything runs, naming the stream
        priority = check_priority(raw.get("priority", 0))
        backend = raw.get("backend", ANY)
        if not isinstance(backend, str) or not (backend == ANY or _CORE.fullmatch(backend)):
            raise WorkloadError(f"backend {_show(backend)}: allowed \"any\" or \"core<K>\" "
                                "(core0 to core<core.count - 1>, K in ASCII digits without "
                                "a leading zero)")
    except DspsimInputError as e:
        raise WorkloadError(f"{where}: {e}") from None
    return {"op": op.name, "variant": variant, "shape": shape, "priority": priority,
            "backend": backend}


def _releases(where: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A stream's count, period, jitter and start (us), the last release within the times a
    run resolves."""
    count = raw["count"]
    if not _is_int(count):
        raise WorkloadError(f"{where}: count = {_show(count)}: expected an integer")
    if not 1 <= count <= MAX_TASKS:
        raise WorkloadError(f"{where}: count = {_show(count)}: allowed 1 to {MAX_TASKS:,}")
    period = _number(where, "period_us", raw["period_us"], positive=True, minimum=MIN_PERIOD_US)
    jitter = _number(where, "jitter_us", raw.get("jitter_us", 0))
    if jitter >= period:
        raise WorkloadError(f"{where}: jitter_us = {_show(raw['jitter_us'])}: must be below "
                            f"period_us ({period:g}) so that releases stay in order")
    start = _number(where, "start_us", raw.get("start_us", 0))
    last = start + (count - 1) * period + jitter
    if last > MAX_TIME_US:
        raise WorkloadError(f"{where}: the last release, start_us + (count - 1) * period_us + "
                            f"jitter_us = {_digits(last)} us, is past {_MAX_TIME}; allowed at "
                            "most that, so that times stay resolved in cycles")
    return {"count": count, "period_us": period, "jitter_us": jitter, "start_us": start}


def _check_streams_fit_ddr(source: str, streams: tuple[Stream, ...]) -> None:
    """Refuse streams whose buffers do not fit the DSP's DDR window together: each stream's
    input, output and parameter block are allocated once, in stream order, for the whole run."""
    sizes = [get_op(s.op).input_bytes(s.shape) for s in streams]
    for k in range(len(streams)):
        need = ddr_layout_bytes(sizes[: k + 1])
        if need > DDR_WINDOW_BYTES:
            before = ", ".join(repr(s.name) for s in streams[:k])
            raise WorkloadError(f"{source}: stream {streams[k].name!r} does not fit the DSP's "
                                f"{DDR_WINDOW_BYTES:,}-byte DDR window beside stream(s) {before}: "
                                f"together they need {need:,} bytes (each stream's input, output "
                                "and parameter block stay allocated for the whole run); allowed: "
                                "streams whose arrays total at most the window")


def parse_workload(raw: dict[str, Any], source: str = "workload") -> Workload:
    """A workload from the tables of a TOML file (format in the module docstring)."""
    for key in raw:
        if key not in TOP_KEYS:
            hint = " (stream keys go under [[stream]])" if key in REQUIRED + OPTIONAL else ""
            raise WorkloadError(f"{source}: unknown key {_show(key)}{hint}; allowed: seed, "
                                "[[stream]]")
    seed = raw.get("seed", 0)
    if not _is_int(seed) or seed < 0:
        raise WorkloadError(f"{source}: seed = {_show(seed)}: expected a non-negative integer")
    streams = raw.get("stream")
    if streams is None:
        raise WorkloadError(f"{source}: missing [[stream]]: a workload needs at least one")
    if not isinstance(streams, list) or not streams:
        raise WorkloadError(f"{source}: stream must be an array of tables [[stream]]")
    out = tuple(_stream(source, k, s) for k, s in enumerate(streams))
    seen: set[str] = set()
    dup = next((s.name for s in out if s.name in seen or seen.add(s.name)), None)
    if dup is not None:
        raise WorkloadError(f"{source}: stream name {_show(dup)} is used twice; names must be "
                            "unique")
    _check_streams_fit_ddr(source, out)
    workload = Workload(out, seed, source)
    if workload.tasks > MAX_TASKS:
        raise WorkloadError(f"{source}: {workload.tasks:,} tasks in all streams; allowed at most "
                            f"{MAX_TASKS:,} (the memory a run takes grows with its tasks)")
    return workload


def load_workload(path: str | Path) -> Workload:
    """Read and check a workload file."""
    shown = str(Path(path))
    what = f"workload file {shown!r}"
    text = read_small_text(path, what, MAX_FILE_BYTES, hint="; pass a .toml file",
                           error=WorkloadError)
    return parse_workload(parse_toml(text, what, WorkloadError), shown)


def check_workload(workload: Workload, model: Any) -> Workload:
    """``workload`` checked as its file is (each Stream as its ``[[stream]]``, an integer backend
    K as ``"core<K>"``) and returned as read; then refused if the platform cannot run it (a
    backend past ``core.count``, a variant needing more channels or DataRAMs, the op's own)."""
    streams, source = workload.streams, workload.source
    if not isinstance(streams, tuple | list) or not streams or not isinstance(source, str) or any(
            not isinstance(s, Stream) for s in streams):
        raise WorkloadError(f"workload {_show(source)}: streams = {_show(streams)}: expected a "
                            "non-empty tuple of Stream, source a string")
    tables = [{**vars(s), "shape": list(s.shape) if isinstance(s.shape, tuple) else s.shape,
               "backend": f"core{s.backend}" if _is_int(s.backend) and s.backend >= 0
               else s.backend} for s in streams]
    checked = parse_workload({"seed": workload.seed, "stream": tables}, source)
    model = checked_model(model)  # one built or replaced in Python too
    for s in checked.streams:
        try:
            parse_backend(s.backend, model.core.count)
            get_op(s.op).check_run(model, s.variant, s.shape)
        except DspsimInputError as e:
            raise WorkloadError(f"{source}: stream {s.name!r}: {e}") from None
    return checked
