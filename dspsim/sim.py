"""Wire a HardwareModel into a SimPy environment and run the seed's host program on it.

``simulate(model, mode, n)`` builds a fresh DSP subsystem (nothing is shared between two
simulations in one process), runs ``test_softmax_op``'s steps for one version, and returns a
:class:`Result`.
"""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import simpy

from dspsim import __version__
from dspsim.arrays import check_input_array
from dspsim.config import HardwareModel
from dspsim.errors import DeadlockError, DspsimInputError
from dspsim.host.ucp import Ucp
from dspsim.hw.core import Core
from dspsim.hw.ddr import DdrPort
from dspsim.hw.idma import IdmaChannel
from dspsim.hw.memory import Memory, Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.registry import firmware_registry
from dspsim.ops.softmax import SOFTMAX_CMD, hbDSPSoftmaxParam
from dspsim.probes import AccessLog, Recorder

MODES = ("pingpong", "direct")
FIDELITIES = ("burst", "tile")
# The DSP's 32-bit window onto DDR (hbDSPAddrMap addresses).
DDR_BASE = 0x8000_0000
DDR_WINDOW_BYTES = 0x8000_0000


class Dsp:
    """The DSP subsystem: core, iDMA channels, DDR port, DataRAMs, and what the op's C reaches
    through globals (TILE_SIZE, the timer, the quirk log)."""

    def __init__(
        self,
        env: simpy.Environment,
        model: HardwareModel,
        data: bool,
        trace: bool,
        port_log: bool = False,
        fidelity: str = "burst",
    ):
        self.env = env
        self.model = model
        self.recorder = Recorder(trace)
        self.warnings: dict[str, dict[str, Any]] = {}
        self.port = DdrPort(env, model.ddr, log=port_log)
        self.ddr = Memory("ddr", "ddr", DDR_BASE, DDR_WINDOW_BYTES, data)
        self.tm = TileManager(model.tcm, data)
        self.accesses = AccessLog()
        tile = fidelity == "tile"
        self.idma = [
            IdmaChannel(env, ch, model.idma, self.port, self.recorder, data, self.accesses, tile)
            for ch in range(model.idma.channels)
        ]
        self.core = Core(
            env, model.core, self.port, self.idma, self.recorder, self.warn, data, self.accesses,
            tile, model.softmax.guard_shifted_input,
        )
        self.TILE_SIZE = model.softmax.tile_bytes
        self.IVP_2N = model.core.vector_bytes
        self.cycles_start = 0.0
        self.self_cycles: float | None = None
        self.passes: list[dict[str, Any]] = []

    # what the op's C gets from the platform
    def TIME_STAMP(self) -> float:  # noqa: N802
        return self.env.now

    def PROF(self, cycles_start: float, cycles_stop: float) -> None:  # noqa: N802
        """The op's profile: its cycle count, and what was still in flight when it stopped."""
        self.cycles_start = cycles_start
        self.self_cycles = cycles_stop - cycles_start
        for ch in self.idma:
            if ch.current is not None or ch.fifo.items:
                self.warn(
                    "unwaited_copy",
                    f"{ch.name} was still copying when the op stopped its timer: the ping-pong "
                    "frame waits only for the last output copy, not for the other channel's",
                )

    def check_running_max(self, max_value: float, src: Ptr, length: int) -> None:
        """Report the seed's running max that starts at 0.0f when it changed the result."""
        if not self.ddr.data or self.model.softmax.max_init != "zero" or max_value != 0.0:
            return
        with np.errstate(invalid="ignore"):
            true_max = float(np.nanmax(self.ddr.f32(src, length))) if length else 0.0
        if true_max < 0.0:
            effect = ("every exp(x - 0) underflows to 0: the sum is 0 and the output inf/NaN"
                      if true_max < -103.0 else "exp(x - 0) is used instead of exp(x - max)")
            self.warn(
                "max_init_zero",
                f"the ping-pong running max starts at 0.0f and every input is below 0 (true "
                f"max {true_max:.6g}), so the max used is 0.0: {effect}; "
                'softmax.max_init = "-inf" corrects it',
            )

    def hb_dsp_mem_map(self, phy_addr: int, size_bytes: int) -> Ptr:
        return Ptr(self.ddr, phy_addr)

    def channel_for(self, channel: int, kind: str) -> int:
        """The channel a copy goes to: the seed's, or inputs on 0 and outputs on 1 ('split')."""
        if self.model.softmax.schedule == "split":
            return 0 if kind == "copy_in" else 1
        return channel

    def softmax_max_init(self) -> np.float32:
        return np.float32(0.0 if self.model.softmax.max_init == "zero" else -np.inf)

    def begin_pass(self, name: str) -> None:
        self.end_pass()
        self.passes.append({"name": name, "start_cycle": self.env.now, "end_cycle": None})
        self.core.pass_name = name

    def end_pass(self) -> None:
        if self.passes and self.passes[-1]["end_cycle"] is None:
            self.passes[-1]["end_cycle"] = self.env.now
        self.core.pass_name = ""

    def warn(self, code: str, message: str, count: int = 1) -> None:
        entry = self.warnings.setdefault(code, {"code": code, "message": message, "count": 0})
        entry["count"] += int(count)

    def waiting(self) -> list[str]:
        stuck = [self.core.waiting_for] + [ch.describe_waiting() for ch in self.idma]
        return [s for s in stuck if s] or ["host (waiting for a task that never finished)"]


# what a run reports in JSON, in this order
JSON_FIELDS = (
    "mode", "n", "cycles", "time_us", "bytes", "busy_cycles", "stall_cycles",
    "ddr_contention_cycles", "passes", "events", "wall_s", "warnings", "hazards", "output",
    "manifest",
)


@dataclass
class Result:
    mode: str
    n: int
    cycles: int
    time_us: float
    bytes: dict[str, int]
    busy_cycles: dict[str, int]
    passes: list[dict[str, Any]]
    events: int
    wall_s: float
    manifest: dict[str, Any]
    warnings: list[dict[str, Any]]
    stall_cycles: dict[str, int]
    ddr_contention_cycles: int  # requests queued for the data path behind another engine's
    hazards: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] | None = None  # summary of the output array (data path on)
    output_array: np.ndarray | None = field(default=None, repr=False)
    trace: pd.DataFrame | None = field(default=None, repr=False)
    port_log: list[tuple] | None = field(default=None, repr=False)
    model: HardwareModel | None = field(default=None, repr=False)
    origin_cycle: float = 0.0  # absolute cycle of the op's timer start (port_log is absolute)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in JSON_FIELDS}


def run_to_completion(env: simpy.Environment, dsp: Dsp, main: simpy.Process) -> None:
    """Run until no event is left; if ``main`` has not finished, name who is still waiting."""
    env.run()
    if not main.triggered:
        raise DeadlockError(dsp.waiting())


def _relative(df: pd.DataFrame, origin: float) -> pd.DataFrame:
    """Trace times counted from the op's timer start, as the pass spans are."""
    df["start_cycle"] -= origin
    df["end_cycle"] -= origin
    return df


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax in float64, shifted by the max (NaN where the input makes it undefined)."""
    x64 = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x64 - np.max(x64))
        return e / e.sum()


def output_summary(out: np.ndarray, x: np.ndarray) -> dict[str, Any]:
    """Sum, non-finite counts, and the max relative error against a float64 softmax over the
    elements whose reference exceeds 1e-30 (``None`` when there are none)."""
    ref = reference_softmax(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        mask = np.isfinite(ref) & (ref > 1e-30)
        rel = np.abs(out[mask].astype(np.float64) - ref[mask]) / ref[mask]
    rel = np.where(np.isnan(rel), np.inf, rel)
    max_rel = float(rel.max()) if rel.size else None
    return {
        "sum": float(np.sum(out, dtype=np.float64)),
        "nan_count": int(np.isnan(out).sum()),
        "inf_count": int(np.isinf(out).sum()),
        "max_rel_err": max_rel if max_rel is None or np.isfinite(max_rel) else None,
        "wrong_count": int(np.count_nonzero(rel > 1e-3)),
    }


def seed_input(n: int) -> np.ndarray:
    """The seed's data: ``x[i] = 1 + i / n`` in float32."""
    return (1 + np.arange(n, dtype=np.float32) / np.float32(n)).astype(np.float32)


def check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise DspsimInputError(
            f"n = {n!r}: must be a positive integer (number of float32 elements)"
        )
    return int(n)


def simulate(
    model: HardwareModel,
    mode: str = "pingpong",
    n: int | None = None,
    x: np.ndarray | None = None,
    data: bool = True,
    trace: bool = False,
    port_log: bool = False,
    fidelity: str = "burst",
) -> Result:
    """Run one version of the softmax op and return the result.

    The input is ``x`` (1-D float32, needs ``data``) or the seed's ``x[i] = 1 + i/n`` with ``n``
    elements (default 100,000). ``fidelity``: ``burst`` (every DDR access an event) or ``tile``
    (one event per transfer or kernel call, durations from the same formulas).
    """
    if mode not in MODES:
        raise DspsimInputError(f"mode {mode!r}: allowed {', '.join(MODES)}")
    if fidelity not in FIDELITIES:
        raise DspsimInputError(f"fidelity {fidelity!r}: allowed {', '.join(FIDELITIES)}")
    if x is not None:
        if not data:
            raise DspsimInputError("an input array needs the data path: pass data=True")
        x = check_input_array(x, "x")
        if n is not None and n != len(x):
            raise DspsimInputError(f"n = {n} but the input array has {len(x)} elements")
        n = len(x)
    n = check_n(100_000 if n is None else n)
    wall_start = time.perf_counter()
    env = simpy.Environment()
    dsp = Dsp(env, model, data=data, trace=trace, port_log=port_log, fidelity=fidelity)
    ucp = Ucp(dsp, firmware_registry())

    # test_softmax_op, for one version
    data_size = n * 4
    input_data = ucp.malloc(data_size, "input array")
    if data:
        dsp.ddr.f32(input_data.ptr, n)[:] = seed_input(n) if x is None else x
    output_mem = ucp.malloc(data_size, "output array")
    input_mem = ucp.malloc(64, "parameter block")
    dsp.ddr.store_struct(
        input_mem.ptr, hbDSPSoftmaxParam(data_size, input_data.phy_addr, int(mode == "pingpong"))
    )

    def host():
        task = ucp.rpc(input_mem, output_mem, SOFTMAX_CMD)
        ucp.submit(task, priority=0)
        yield ucp.wait_done(task)

    run_to_completion(env, dsp, env.process(host()))

    wall_s = time.perf_counter() - wall_start
    out = dsp.ddr.f32(output_mem.ptr, n).copy() if data else None
    x_in = dsp.ddr.f32(input_data.ptr, n) if data else None
    cycles = int(round(dsp.self_cycles))
    core = dsp.core
    return Result(
        mode=mode,
        n=n,
        cycles=cycles,
        time_us=cycles / model.core.clock_mhz,
        bytes={"ddr_read": dsp.port.bytes_read, "ddr_write": dsp.port.bytes_written},
        busy_cycles={
            "core": int(round(core.compute_cycles)),
            **{ch.name: int(round(ch.busy_cycles)) for ch in dsp.idma},
            "ddr": int(round(dsp.port.busy_cycles)),
        },
        stall_cycles={
            "ddr": int(round(core.ddr_stall_cycles)),
            "idma_in": int(round(core.idma_wait_cycles["wait_in"])),
            "idma_out": int(round(core.idma_wait_cycles["wait_out"])),
        },
        ddr_contention_cycles=int(round(dsp.port.contention_cycles)),
        passes=[
            {
                "name": p["name"],
                "start_cycle": int(round(p["start_cycle"] - dsp.cycles_start)),
                "end_cycle": int(round(p["end_cycle"] - dsp.cycles_start)),
            }
            for p in dsp.passes
        ],
        events=next(env._eid),  # SimPy's event counter: every event scheduled (and processed)
        wall_s=wall_s,
        manifest=manifest(model),
        warnings=list(dsp.warnings.values()),
        hazards=dsp.accesses.hazards(origin=dsp.cycles_start),
        output=output_summary(out, x_in) if data else None,
        output_array=out if data else None,
        trace=_relative(dsp.recorder.frame(), dsp.cycles_start) if trace else None,
        port_log=dsp.port.log,
        model=model,
        origin_cycle=dsp.cycles_start,
    )


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
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
