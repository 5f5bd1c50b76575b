"""Run one operator on a fresh platform: ``simulate(model, op, variant, ...) -> Result``.

The host side is the seed's ``test_softmax_op`` for any op (``hbUCPMalloc``, input into DDR,
parameter block, ``hbDSPRpcV2(cmd)``, submit, wait). The cycles are the op's ``TIME_STAMP``
span (``PROF``); the host's round trip is ``rpc_cycles``.
"""

from __future__ import annotations

import functools
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from dspsim.config import HardwareModel
from dspsim.errors import DeadlockError, DspsimInputError, check_flags
from dspsim.host.program import HostProgram
from dspsim.host.ucp import Task, Ucp
from dspsim.host.window import check_fits_window
from dspsim.hw.clock import events_scheduled
from dspsim.ops.base import summary_json
from dspsim.ops.registry import firmware_registry, get_op
from dspsim.platform import MEMORY_KIND, Platform, check_fidelity
from dspsim.probes import PortLog, TraceTable
from dspsim.schema import check_n
from dspsim.ticks import cycles as in_cycles
from dspsim.version import __version__

if TYPE_CHECKING:
    import pandas as pd

    from dspsim.ops.base import Op

# what a run reports in JSON, in this order
JSON_FIELDS = (
    "op", "variant", "mode", "shape", "n", "core", "cycles", "time_us", "rpc_cycles", "bytes",
    "busy_cycles", "stall_cycles", "ddr_contention_cycles", "passes", "events", "wall_s",
    "warnings", "hazards", "output", "engines", "memories", "dcache", "manifest",
)


@dataclass
class Result:
    """What one run reports: cycles, traffic, per-engine counters, records (``to_json``)."""

    op: str
    variant: str
    shape: tuple[int, ...]
    cycles: int
    time_us: float
    bytes: dict[str, int]
    busy_cycles: dict[str, int]  # per engine (names in ``engines``)
    passes: Sequence[dict[str, Any]]  # a list, or a PassLog read as one (run of rows)
    events: int
    wall_s: float
    manifest: dict[str, Any]
    warnings: list[dict[str, Any]]
    stall_cycles: dict[str, int]
    ddr_contention_cycles: int  # requests queued behind another engine's, on every memory
    engines: dict[str, str] = field(default_factory=dict)  # name -> core | idma | ddr (memory)
    core: str = "core0"  # the core the op ran on
    rpc_cycles: int = 0  # host submit to done, minus the op's own cycles
    hazards: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] | None = None  # summary of the output array (data path on)
    output_array: np.ndarray | None = field(default=None, repr=False)
    trace_table: TraceTable | None = field(default=None, repr=False)  # the trace's columns
    port_log: PortLog | None = field(default=None, repr=False)  # the host memory's requests
    port_logs: dict[str, Any] | None = field(default=None, repr=False)  # every memory's log
    # per memory: read_bytes, write_bytes, busy_cycles, contention_cycles
    memories: dict[str, dict[str, int]] = field(default_factory=dict)
    dcache: dict[str, int] | None = None  # the core's data cache's counters (None: no cache)
    model: HardwareModel | None = field(default=None, repr=False)
    origin_cycle: float = 0.0  # absolute cycle of the op's timer start (port_log is absolute)
    # --trace-limit: the trace / the port log are whole up to this cycle (from the op's timer
    # start) and cut after it; None: whole
    trace_cut_cycle: float | None = None
    port_log_cut_cycle: float | None = None

    @property
    def trace(self) -> pd.DataFrame | None:
        """The trace as a DataFrame (built from ``trace_table`` when first asked for)."""
        return None if self.trace_table is None else self.trace_table.frame()

    @property
    def mode(self) -> str:
        """The variant's older name."""
        return self.variant

    @property
    def n(self) -> int:
        """Elements in the input."""
        return int(np.prod(self.shape))

    def engines_of(self, kind: str) -> list[str]:
        """This run's engines of one kind (``core``, ``idma``, ``ddr``: every memory's port)."""
        return [name for name, k in self.engines.items() if k == kind]

    def to_json(self) -> dict[str, Any]:
        obj = {k: getattr(self, k) for k in JSON_FIELDS}
        obj["passes"] = list(self.passes)
        obj["shape"] = list(self.shape)
        obj["output"] = summary_json(self.output)  # valid JSON: an inf error is "inf"
        return obj


def run_to_completion(env: simpy.Environment, platform: Platform, main: simpy.Event) -> None:
    """Run until no event is left; if ``main`` has not happened, name who is still waiting."""
    env.run()
    if not main.triggered:
        raise DeadlockError(platform.waiting())


def simulate(
    model: HardwareModel,
    op: str = "softmax",
    variant: str | None = None,
    n: int | None = None,
    shape: tuple[int, ...] | list[int] | None = None,
    x: np.ndarray | None = None,
    data: bool = True,
    trace: bool = False,
    fidelity: str = "burst",
    params: dict[str, Any] | None = None,
    *,
    mode: str | None = None,
    port_log: bool = False,
    core: int = 0,
    elide: bool = True,
    trace_limit: int | None = None,
) -> Result:
    """Run one variant of one op and return the result.

    Input: ``x`` (needs ``data``) or the op's default input of ``shape`` (or ``n`` elements).
    ``params``: op parameters (``{"tile_bytes": 8192}`` or dotted keys). ``fidelity``: ``burst``
    or ``tile`` (one engine). ``mode``: older name of ``variant``. ``core``: which core runs it.
    ``elide=False``: the reference engine without event elision (same results).
    ``trace_limit``: at most that many trace rows and port requests each."""
    check_flags(data=data, trace=trace, port_log=port_log, elide=elide)
    req = Request.check(model, op, variant, mode, n, shape, x, data, fidelity, params, core,
                        trace_limit)
    wall_start = time.perf_counter()
    platform = Platform(simpy.Environment(), req.model, data=data, trace=trace,
                        port_log=port_log, fidelity=fidelity, elide=elide,
                        trace_limit=trace_limit)
    ucp = Ucp(platform, firmware_registry())
    program = HostProgram.load(ucp, req.op, req.variant, req.shape, req.x)
    tasks = []

    def host():  # hbUCPSubmitTask, then hbUCPWaitTaskDone
        tasks.append(program.submit(priority=0, backend=core))
        yield ucp.wait_done(tasks[0])

    run_to_completion(platform.env, platform, platform.env.process(host()))
    return collect(platform, program, tasks[0], time.perf_counter() - wall_start)


@dataclass(frozen=True)
class Request:
    """A run's inputs, checked: op, variant, model with the run's parameters, shape, values."""

    op: Op
    variant: str
    model: HardwareModel
    shape: tuple[int, ...]
    x: np.ndarray | None

    @classmethod
    def check(cls, model: HardwareModel, op: str, variant: str | None, mode: str | None,
              n: int | None, shape: Any, x: np.ndarray | None, data: bool, fidelity: str,
              params: dict[str, Any] | None, core: Any, trace_limit: Any) -> Request:
        if not isinstance(model, HardwareModel):  # simulate("j6", ...): the file, not the model
            raise DspsimInputError(f"model {model!r:.80}: expected a model, e.g. "
                                   "dspsim.load_model(\"j6\")")
        if params is not None and (not isinstance(params, Mapping)
                                   or not all(isinstance(k, str) for k in params)):
            raise DspsimInputError(f"params {params!r:.80}: expected a dict of the op's keys, "
                                   "e.g. {\"tile_bytes\": 8192}")
        the_op = get_op(op)
        if mode is not None:
            if variant is not None and variant != mode:
                raise DspsimInputError(f"variant {variant!r} and mode {mode!r} disagree; give one")
            variant = mode
        variant = the_op.check_variant(the_op.default_variant if variant is None else variant)
        check_fidelity(fidelity)
        if params:
            model = model.with_overrides({(k if "." in k else f"{the_op.name}.{k}"): v
                                          for k, v in params.items()})
        if isinstance(core, bool) or not isinstance(core, int) or not 0 <= core < model.core.count:
            raise DspsimInputError(f"core {core!r}: the platform has cores 0 to "
                                   f"{model.core.count - 1} (core.count)")
        if n is not None:
            n = check_n(n)
        if x is not None:
            if not data:
                raise DspsimInputError("an input array needs the data path: pass data=True")
            x, x_shape = the_op.check_input(x)
            x_shape = x_shape or x.shape
            given = (the_op.shape_of(n=n, shape=shape)
                     if (n is not None or shape is not None) else None)
            if given is not None and given != x_shape:
                raise DspsimInputError(f"shape {given} but the input array has shape {x_shape} "
                                       f"(in {the_op.size_unit})")
            shape = x_shape
            n = None
        shape = the_op.shape_of(n=n, shape=shape)
        check_fits_window(the_op, shape)
        the_op.check_run(model, variant, shape)
        if trace_limit is not None and (isinstance(trace_limit, bool)
                                        or not isinstance(trace_limit, int) or trace_limit < 1):
            raise DspsimInputError(f"trace_limit {trace_limit!r}: must be a positive integer")
        return cls(the_op, variant, model, tuple(shape), x)


def collect(platform: Platform, program: HostProgram, task: Task, wall_s: float) -> Result:
    """The run's Result, from what each engine reports of itself (``stats()``)."""
    model, ctx = platform.model, platform.ctx
    dsp = platform.dsps[task.core]
    origin, cycles = task.op_start_cycle, int(round(task.op_cycles))
    stats = platform.stats()
    core = stats[dsp.name]
    ports = {name: stats[name] for name in platform.memories}
    hazards = _listed_hazards(platform, origin)
    out = program.array(program.output).copy() if ctx.data else None
    logs = platform.port_logs()
    host_log = logs[platform.host_memory.name]
    return Result(
        op=program.op.name,
        variant=program.variant,
        shape=program.shape,
        cycles=cycles,
        time_us=cycles / model.core.clock_mhz,
        **_engine_counts(dsp, core, ports),
        passes=dsp.passes.view(FromOrigin(origin)),
        events=events_scheduled(platform.env),
        wall_s=wall_s,
        manifest=manifest(model),
        warnings=list(platform.warnings.values()),
        core=dsp.name,
        rpc_cycles=int(round(task.finished_cycle - task.submitted_cycle - task.op_cycles)),
        hazards=hazards,
        output=(program.op.output_summary(out, program.array(program.input),
                                          model.params(program.op.name))
                if ctx.data else None),
        output_array=out,
        trace_table=ctx.recorder.table().shifted(origin) if ctx.recorder.enabled else None,
        port_log=host_log,
        port_logs=logs,
        dcache=core.get("dcache"),
        model=model,
        origin_cycle=origin,
        trace_cut_cycle=_relative(ctx.recorder.cut_cycle, origin),
        port_log_cut_cycle=_relative(getattr(host_log, "cut_cycle", None), origin),
    )


def _listed_hazards(platform: Platform, origin: float) -> list[dict[str, Any]]:
    """The data hazards from the op's timer start, with a warning counting those not listed."""
    accesses = platform.ctx.accesses
    hazards = accesses.hazards(origin=origin)
    if accesses.dropped:
        platform.warn("hazards_not_listed",
                      f"{accesses.dropped:,} more data hazards than the {len(hazards):,} listed "
                      "(the earliest are kept; the count is the number not listed)",
                      accesses.dropped, severity="info")
    return hazards


def _engine_counts(dsp: Any, core: dict[str, Any],
                   ports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The Result's per-engine fields: bytes, busy and stall cycles, kinds, memory counters."""
    busy = dsp.stats_at_stop  # every engine's busy cycles when the op stopped its timer
    return dict(
        bytes={f"{m}_{way}": p[f"{way}_bytes"] for m, p in ports.items()
               for way in ("read", "write")},
        # busy within the op's timer span (PROF): traffic still crossing after it (a copy
        # the op never waited for) counts in ``bytes``, not here
        busy_cycles={e: int(round(busy[e])) for e in (dsp.name, *(ch.name for ch in dsp.idma),
                                                      *ports)},
        stall_cycles={
            **{m: int(round(core["stall_cycles"].get(m, 0.0))) for m in ports},
            "idma_in": int(round(core["idma_wait_cycles"]["wait_in"])),
            "idma_out": int(round(core["idma_wait_cycles"]["wait_out"])),
        },
        ddr_contention_cycles=int(round(sum(p["contention_cycles"] for p in ports.values()))),
        engines={dsp.name: "core", **{ch.name: "idma" for ch in dsp.idma},
                 **{m: MEMORY_KIND for m in ports}},
        memories={m: {k: int(round(v)) for k, v in p.items()} for m, p in ports.items()},
    )


@dataclass(frozen=True)
class FromOrigin:
    """A pass's span from the op's timer start, whole cycles (a class: it must pickle)."""

    origin: float

    def __call__(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"name": p["name"],
                "start_cycle": int(round(in_cycles(p["start_tick"]) - self.origin)),
                "end_cycle": int(round(in_cycles(p["end_tick"]) - self.origin))}


def _relative(cycle: float | None, origin: float) -> float | None:
    return None if cycle is None else cycle - origin


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def manifest(model: HardwareModel) -> dict[str, Any]:
    return {
        "model": model.source,
        "overrides": {k: v for k, v in model.overrides},
        "dspsim_version": __version__,
        "git_sha": git_sha(),
    }
