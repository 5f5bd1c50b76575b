"""Workload files: streams of DSP tasks in TOML, read and checked like model files.

::

    seed = 1                      # optional (default 0): drives the release jitter
    [[stream]]
    name = "cam_softmax"          # unique
    op = "softmax"                # a registered op (``dspsim ops``)
    variant = "pingpong"          # optional: the op's first variant
    n = 100000                    # a 1-D op's length, or shape = [rows, cols]; optional
    priority = 0                  # optional, 0-255 (default 0): higher first
    backend = "any"               # optional: "any" (default) or "core0" .. "core<count-1>"
    period_us = 33333             # one task every period
    count = 30                    # tasks in the stream
    start_us = 0                  # optional: the first release
    jitter_us = 500               # optional (default 0): each release late by U[0, jitter)
    deadline_us = 20000           # optional: a task misses it when submit-to-done exceeds it

Every mistake is one line (:class:`WorkloadError`): unknown or missing keys, wrong types, an
unknown op or variant, a non-positive period, count or deadline, a priority outside 0-255, an
unknown backend, and (:func:`check_workload`, once the model is known) a backend beyond
``core.count`` or a run the op refuses on that platform.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.host.ucp import ANY, check_priority, parse_backend
from dspsim.ops import get_op

MAX_FILE_BYTES = 1 << 20
MAX_TASKS = 1_000_000
TOP_KEYS = ("seed", "stream")
REQUIRED = ("name", "op", "period_us", "count")
OPTIONAL = ("variant", "n", "shape", "priority", "backend", "start_us", "jitter_us",
            "deadline_us")
_CORE = re.compile(r"core\d+")  # the syntax of a backend; the model says which exist


class WorkloadError(DspsimInputError):
    """A workload file is missing, malformed, or asks for what the platform cannot do."""


@dataclass(frozen=True)
class Stream:
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
    streams: tuple[Stream, ...]
    seed: int = 0
    source: str = "workload"

    @property
    def tasks(self) -> int:
        return sum(s.count for s in self.streams)


def _number(where: str, key: str, value: Any, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise WorkloadError(f"{where}: {key} = {value!r}: expected a number")
    if positive and value <= 0:
        raise WorkloadError(f"{where}: {key} = {value!r}: must be positive")
    if value < 0:
        raise WorkloadError(f"{where}: {key} = {value!r}: must not be negative")
    return float(value)


def _stream(source: str, k: int, raw: Any) -> Stream:
    where = f"{source}: stream {k + 1}"
    if not isinstance(raw, dict):
        raise WorkloadError(f"{where}: expected a [[stream]] table")
    if isinstance(raw.get("name"), str):
        where = f"{source}: stream {raw['name']!r}"
    for key in raw:
        if key not in REQUIRED + OPTIONAL:
            raise WorkloadError(
                f"{where}: unknown key {key!r}; allowed: {', '.join(REQUIRED + OPTIONAL)}"
            )
    for key in REQUIRED:
        if key not in raw:
            raise WorkloadError(f"{where}: missing key {key!r}")
    name = raw["name"]
    if not isinstance(name, str) or not name.strip():
        raise WorkloadError(f"{where}: name = {name!r}: expected a non-empty string")
    if not isinstance(raw["op"], str):
        raise WorkloadError(f"{where}: op = {raw['op']!r}: expected an op name")
    try:
        op = get_op(raw["op"])
        variant = raw.get("variant", op.default_variant)
        if not isinstance(variant, str):
            raise WorkloadError(f"variant = {variant!r}: expected a string")
        op.check_variant(variant)
        shape = op.shape_of(n=raw.get("n"), shape=raw.get("shape"))
        priority = check_priority(raw.get("priority", 0))
        backend = raw.get("backend", ANY)
        if not isinstance(backend, str) or not (backend == ANY or _CORE.fullmatch(backend)):
            raise WorkloadError(f"backend {backend!r}: allowed \"any\" or \"core<K>\" "
                                "(core0 to core<core.count - 1>)")
    except DspsimInputError as e:
        raise WorkloadError(f"{where}: {e}") from None
    count = raw["count"]
    if isinstance(count, bool) or not isinstance(count, int):
        raise WorkloadError(f"{where}: count = {count!r}: expected an integer")
    if not 1 <= count <= MAX_TASKS:
        raise WorkloadError(f"{where}: count = {count!r}: allowed 1 to {MAX_TASKS:,}")
    period = _number(where, "period_us", raw["period_us"], positive=True)
    jitter = _number(where, "jitter_us", raw.get("jitter_us", 0))
    if jitter >= period:
        raise WorkloadError(
            f"{where}: jitter_us = {raw['jitter_us']!r}: must be below period_us ({period:g}) "
            "so that releases stay in order"
        )
    deadline = raw.get("deadline_us")
    return Stream(
        name=name, op=op.name, variant=variant, shape=shape, period_us=period, count=count,
        priority=priority, backend=backend,
        start_us=_number(where, "start_us", raw.get("start_us", 0)), jitter_us=jitter,
        deadline_us=None if deadline is None else _number(where, "deadline_us", deadline, True),
    )


def parse_workload(raw: dict[str, Any], source: str = "workload") -> Workload:
    """A workload from the tables of a TOML file (format in the module docstring)."""
    for key in raw:
        if key not in TOP_KEYS:
            hint = " (stream keys go under [[stream]])" if key in REQUIRED + OPTIONAL else ""
            raise WorkloadError(
                f"{source}: unknown key {key!r}{hint}; allowed: seed, [[stream]]"
            )
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorkloadError(f"{source}: seed = {seed!r}: expected a non-negative integer")
    streams = raw.get("stream")
    if streams is None:
        raise WorkloadError(f"{source}: missing [[stream]]: a workload needs at least one")
    if not isinstance(streams, list) or not streams:
        raise WorkloadError(f"{source}: stream must be an array of tables [[stream]]")
    out = tuple(_stream(source, k, s) for k, s in enumerate(streams))
    names = [s.name for s in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise WorkloadError(f"{source}: stream name {dup!r} is used twice; names must be unique")
    if sum(s.count for s in out) > MAX_TASKS:
        raise WorkloadError(f"{source}: {sum(s.count for s in out):,} tasks; at most {MAX_TASKS:,}")
    return Workload(out, seed, source)


def load_workload(path: str | Path) -> Workload:
    """Read and check a workload file."""
    p = Path(path)
    shown = str(p)
    try:
        if not p.is_file():
            raise WorkloadError(f"workload file {shown!r} not found; pass an existing .toml file")
        if p.stat().st_size > MAX_FILE_BYTES:
            raise WorkloadError(f"workload file {shown!r} is larger than {MAX_FILE_BYTES} bytes")
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError(f"workload file {shown!r} unreadable: {e.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"workload file {shown!r} is not valid TOML: {e}") from None
    return parse_workload(raw, shown)


def check_workload(workload: Workload, model: Any) -> None:
    """Refuse, before simulating, what the platform cannot run: a backend beyond
    ``core.count``, a variant needing more channels or DataRAMs, an op's own refusals."""
    cores = model.core.count
    for s in workload.streams:
        where = f"{workload.source}: stream {s.name!r}"
        try:
            parse_backend(s.backend, cores)
            get_op(s.op).check_run(model, s.variant, s.shape)
        except DspsimInputError as e:
            raise WorkloadError(f"{where}: {e}") from None
