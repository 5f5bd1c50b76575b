"""The platform: ``core.count`` DSP cores, each with ``idma.channels`` iDMA channels and
``tcm.banks`` DataRAMs, all sharing one DDR port; and what an op's C reaches through globals.

Engines are named here and only here: ``core0``, ``core0.idma1``, ``core0.dram0``, ``ddr``.
Every analysis reads names from the run (``Result.engines``), never literals. Burst or tile
fidelity is chosen when the platform is built (which engine classes it instantiates), not by
``if``s inside the engines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import simpy

from dspsim.config import HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.hw.core import Core, TileCore
from dspsim.hw.ddr import DdrPort
from dspsim.hw.idma import IdmaChannel, TileIdmaChannel
from dspsim.hw.memory import Memory, Ptr
from dspsim.hw.tcm import TileManager
from dspsim.probes import AccessLog, Recorder
from dspsim.schema import Params

FIDELITIES = ("burst", "tile")
# The DSP's 32-bit window onto DDR (hbDSPAddrMap addresses).
DDR_BASE = 0x8000_0000
DDR_WINDOW_BYTES = 0x8000_0000

# the warnings the platform and the run raise for any op (each op lists its own:
# Op.warning_codes): a copy the timer stopped before, a handle waited on before any copy set it,
# hazards beyond those listed
WARNING_CODES = ("unwaited_copy", "unwritten_handle", "hazards_not_listed")


class Dsp:
    """One DSP core as its firmware sees it: the core, its iDMA channels, its tile manager,
    DDR, and what the op's C reaches through globals (the timer, PROF, the log)."""

    def __init__(self, platform: Platform, index: int):
        model, env = platform.model, platform.env
        core_cls, idma_cls = platform.engine_classes
        self.platform = platform
        self.env = env
        self.model = model
        self.index = index
        self.name = f"core{index}"
        self.ddr = platform.ddr
        self.port = platform.port
        self.recorder = platform.recorder
        self.accesses = platform.accesses
        self.warn = platform.warn
        self.idma = [
            idma_cls(env, ch, f"{self.name}.idma{ch}", model.idma, platform.port,
                     platform.recorder, platform.data, platform.accesses, platform.elide)
            for ch in range(model.idma.channels)
        ]
        self.tm = TileManager(model.tcm, platform.data, prefix=f"{self.name}.")
        self.core = core_cls(env, self.name, model.core, platform.port, self.idma,
                             platform.recorder, platform.warn, platform.data, platform.accesses,
                             platform.elide)
        self.IVP_2N = model.core.vector_bytes
        self.params: Params | None = None  # the running op's parameters
        # the running op's channel assignment: (channel the C names, copy kind) -> channel used
        self.channel_map: Callable[[int, str], int] | None = None
        self.cycles_start = 0.0
        self.self_cycles: float | None = None
        self.passes: list[dict[str, Any]] = []
        self._tiles_seen: dict[str, int] = {}  # pass name -> tiles numbered in it so far

    @property
    def move_data(self) -> bool:
        return self.platform.data

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
                    f"{ch.name} was still copying when the op stopped its timer: the cycle "
                    "count misses the end of that copy (the op never waited for it)",
                )

    def hb_dsp_mem_map(self, phy_addr: int, size_bytes: int) -> Ptr:
        return Ptr(self.ddr, phy_addr)

    def begin_pass(self, name: str) -> None:
        self.end_pass()
        self.passes.append({"name": name, "start_cycle": self.env.now, "end_cycle": None})
        self.core.pass_name = name
        # a pass that comes again (per row) numbers its tiles after its earlier ones
        self.core.start_tiles(self._tiles_seen.get(name, 0))

    def end_pass(self) -> None:
        if self.passes and self.passes[-1]["end_cycle"] is None:
            self.passes[-1]["end_cycle"] = self.env.now
            self._tiles_seen[self.core.pass_name] = self.core.tiles_used
        self.core.pass_name = ""

    @contextmanager
    def pass_(self, name: str) -> Iterator[None]:
        """``with dsp.pass_("max"):`` around the lines of one pass: :meth:`begin_pass` before,
        :meth:`end_pass` after (not on an error: the run is abandoned then)."""
        self.begin_pass(name)
        yield
        self.end_pass()


class Platform:
    """Everything one simulation runs on; nothing is shared between two simulations."""

    def __init__(
        self,
        env: simpy.Environment,
        model: HardwareModel,
        data: bool = True,
        trace: bool = False,
        port_log: bool = False,
        fidelity: str = "burst",
        elide: bool = True,
    ):
        """``elide``: skip the events nothing else can observe (exact; :mod:`dspsim.hw.clock`);
        off gives the reference engine with one event per DDR access."""
        if fidelity not in FIDELITIES:
            raise DspsimInputError(f"fidelity {fidelity!r}: allowed {', '.join(FIDELITIES)}")
        self.env = env
        self.model = model
        self.data = data
        self.fidelity = fidelity
        self.elide = elide
        self.engine_classes = (Core, IdmaChannel) if fidelity == "burst" else (
            TileCore, TileIdmaChannel)
        self.recorder = Recorder(trace)
        self.accesses = AccessLog()
        self.warnings: dict[str, dict[str, Any]] = {}
        self.port = DdrPort(env, model.ddr, log=port_log)
        self.ddr = Memory("ddr", "ddr", DDR_BASE, DDR_WINDOW_BYTES, data)
        self.dsps = [Dsp(self, i) for i in range(model.core.count)]

    def warn(self, code: str, message: str, count: int = 1, severity: str = "warning") -> None:
        """Report a quirk that fired. ``severity``: ``warning`` when it changes the result (the
        cycles or the values), ``info`` when the model notes it but nothing depends on it."""
        entry = self.warnings.setdefault(
            code, {"code": code, "message": message, "count": 0, "severity": severity}
        )
        entry["count"] += int(count)

    @property
    def engines(self) -> dict[str, str]:
        """Every engine's name and kind (``core``, ``idma``, ``ddr``), in lane order."""
        out: dict[str, str] = {}
        for dsp in self.dsps:
            out[dsp.name] = "core"
            out.update({ch.name: "idma" for ch in dsp.idma})
        out["ddr"] = "ddr"
        return out

    def waiting(self) -> list[str]:
        """Who is stuck, for a deadlock report."""
        stuck = []
        for dsp in self.dsps:
            stuck += [dsp.core.waiting_for] + [ch.describe_waiting() for ch in dsp.idma]
        return [s for s in stuck if s] or ["host (waiting for a task that never finished)"]
