"""The platform: ``core.count`` DSP cores (each with iDMA channels, DataRAMs and optionally a
data cache) sharing the model's memories (J6: ``ddr``), each behind its own port; and what an
op's C reaches through globals.

Requests go to a memory by address, as gem5's crossbar routes (:class:`AddressMap`). Observers
and switches live in one :class:`~dspsim.probes.RunContext` every engine is built with.
Engines are named here only (``core0``, ``core0.idma1``, ``ddr``). ``tile`` fidelity is kept as
a name (sweeps, workloads, calibrations ask for it) and runs the burst engine, whose repeat
finders made its old closed forms no faster.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import simpy

from dspsim.config import HardwareModel
from dspsim.errors import AllocationError, DspsimInputError
from dspsim.hw.core import Core
from dspsim.hw.dcache import DataCache
from dspsim.hw.finder import Finder, row_loop
from dspsim.hw.idma import IdmaChannel
from dspsim.hw.memory import Memory, Ptr
from dspsim.hw.port import MemoryPort
from dspsim.hw.tcm import TileManager
from dspsim.probes import AccessLog, PassLog, Recorder, RunContext
from dspsim.schema import Params
from dspsim.ticks import cycles

FIDELITIES = ("burst", "tile")  # one engine: "tile" is kept as a name (module doc)


def check_fidelity(fidelity: str) -> None:
    """Refuse a fidelity the simulation does not have (allowed ones named)."""
    if fidelity not in FIDELITIES:
        raise DspsimInputError(f"fidelity {fidelity!r}: allowed {', '.join(FIDELITIES)}")
# the kind of a memory's engine (its port) in ``Platform.engines`` and ``Result.engines``,
# whatever the memory: the name is the one-memory platform's, which saved runs and scripts read
MEMORY_KIND = "ddr"
# the warnings any op's run may raise (each op lists its own: Op.warning_codes)
WARNING_CODES = ("unwaited_copy", "unwritten_handle", "hazards_not_listed")


class AddressMap:
    """The external memories by address range: ``memory_at(addr)`` is the one holding it."""

    def __init__(self, memories: list[Memory]):
        self._memories = sorted(memories, key=lambda m: m.base)
        self._bases = [m.base for m in self._memories]

    def memory_at(self, addr: int) -> Memory:
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0:
            mem = self._memories[i]
            if addr < mem.base + mem.size_bytes:
                return mem
        ranges = ", ".join(f"{m.name} {m.base:#x}-{m.base + m.size_bytes:#x}"
                           for m in self._memories)
        raise AllocationError(f"address {addr:#x} is in no memory of the platform ({ranges})")


class Dsp:
    """One DSP core as its firmware sees it: the core, its iDMA channels, its tile manager,
    the memories, and what the op's C reaches through globals (the timer, PROF, the log)."""

    def __init__(self, platform: Platform, index: int):
        model, ctx = platform.model, platform.ctx
        self.platform = platform
        self.env = ctx.env
        self.model = model
        self.index = index
        self.name = f"core{index}"
        self.warn = platform.warn
        self.labels = ctx.labels(self.name)  # pass, tile, buffer: what the trace stamps
        self.idma = [IdmaChannel(ctx, ch, f"{self.name}.idma{ch}", model.idma)
                     for ch in range(model.idma.channels)]
        self.tm = TileManager(model.tcm, ctx.data, prefix=f"{self.name}.")
        dcache = DataCache(model.dcache) if model.dcache.capacity_bytes else None
        self.core = Core(ctx, self.name, model.core, self.idma, dcache)
        self.IVP_2N = model.core.vector_bytes
        self.params: Params | None = None  # the running op's parameters
        # the running op's channel assignment: (channel the C names, copy kind) -> channel used
        self.channel_map: Callable[[int, str], int] | None = None
        self.cycles_start = 0.0
        self.self_cycles: float | None = None
        self.stats_at_stop: dict[str, Any] | None = None  # the engines' stats when PROF ran
        self.passes = PassLog()  # a run of identical rows books its passes as one block
        self.tiles_seen: dict[str, int] = {}  # pass name -> tiles numbered in it so far

    @property
    def move_data(self) -> bool:
        return self.platform.ctx.data

    @property
    def ddr(self) -> Memory:
        """The host's memory (``host.memory``; J6: DDR), where the op's buffers are."""
        return self.platform.host_memory

    @property
    def port(self) -> MemoryPort:
        return self.platform.host_memory.port

    # what the op's C gets from the platform
    def TIME_STAMP(self) -> int:  # noqa: N802
        """The timer (ticks; :meth:`PROF` reports cycles)."""
        return self.env.now

    def PROF(self, cycles_start: int, cycles_stop: int) -> None:  # noqa: N802
        """The op's profile: its cycle count, and what was still in flight when it stopped."""
        self.cycles_start = cycles(cycles_start)
        self.self_cycles = cycles(cycles_stop - cycles_start)
        self.stats_at_stop = self.platform.busy_until(self.env.now)
        for ch in self.idma:
            if ch.current is not None or ch.fifo.items:
                self.warn("unwaited_copy", f"{ch.name} was still copying when the op stopped its "
                          "timer: the cycle count misses the end of that copy (the op never "
                          "waited for it)")

    def hb_dsp_mem_map(self, phy_addr: int, size_bytes: int) -> Ptr:
        """A physical address as a pointer into the memory that holds it (by address)."""
        return Ptr(self.platform.address_map.memory_at(phy_addr), phy_addr)

    def memory(self, name: str) -> Memory:
        """An external memory by name (for an op that places a buffer there)."""
        return self.platform.memory(name)

    def begin_pass(self, name: str) -> None:
        if not self.core.timed:  # the values of rows already timed (row_loop): no pass
            return
        self.end_pass()
        self.passes.append({"name": name, "start_tick": self.env.now, "end_tick": None})
        self.labels.pass_name = name
        # a pass that comes again (per row) numbers its tiles after its earlier ones
        self.labels.start_tiles(self.tiles_seen.get(name, 0))

    def end_pass(self) -> None:
        if not self.core.timed:
            return
        if self.passes and self.passes[-1]["end_tick"] is None:
            self.passes[-1]["end_tick"] = self.env.now
            self.tiles_seen[self.labels.pass_name] = self.labels.tile_next
        self.labels.pass_name = ""

    def stats(self) -> dict[str, Any]:
        """This core's engines' counters: the core, each channel."""
        return {self.name: self.core.stats(), **{ch.name: ch.stats() for ch in self.idma}}

    def row_loop(self, rows: int, row: Callable[[int], Any],
                 values: Callable[[int, int], Any] | None = None, row_elements: int = 1
                 ) -> Any:
        """``for (r = 0; r < rows; r++) row(r);`` with rows alike booked at once
        (:func:`dspsim.hw.finder.row_loop`)."""
        return row_loop(self, rows, row, values, row_elements)

    def alike_iterations(self, period: int) -> Finder:
        """A loop whose iterations, ``period`` apart, run alike while iDMA streams:
        ``skip(alike, carried)`` books a run of them at once (:mod:`dspsim.hw.finder`)."""
        return Finder(self, period)

    @contextmanager
    def untimed(self) -> Iterator[None]:
        """Kernel calls inside compute values only: no time, no pass."""
        self.core.timed = False
        try:
            yield
        finally:
            self.core.timed = True

    @contextmanager
    def pass_(self, name: str) -> Iterator[None]:
        """``with dsp.pass_("max"):``: :meth:`begin_pass`, the lines, :meth:`end_pass` (not on an
        error: the run is abandoned)."""
        self.begin_pass(name)
        yield
        self.end_pass()


class Platform:
    """Everything one simulation runs on; nothing is shared between two simulations."""

    def __init__(self, env: simpy.Environment, model: HardwareModel, data: bool = True,
                 trace: bool = False, port_log: bool = False, fidelity: str = "burst",
                 elide: bool = True, trace_limit: int | None = None):
        """``elide``: skip the events nothing else can observe (exact; off: the reference
        engine). ``trace_limit``: keep at most that many trace rows and port requests each."""
        check_fidelity(fidelity)
        self.model = model
        self.warnings: dict[str, dict[str, Any]] = {}
        self.ctx = RunContext(env, data=data, elide=elide, fidelity=fidelity,
                              port_log=port_log, log_limit=trace_limit,
                              recorder=Recorder(trace, trace_limit), accesses=AccessLog(),
                              warn=self.warn)
        self.memories: dict[str, Memory] = {}
        for name, cfg in model.memories.items():
            mem = Memory(name, MEMORY_KIND, cfg.base_address, cfg.size_bytes, data)
            mem.port = MemoryPort(self.ctx, name, cfg)
            mem.cached = cfg.cached
            mem.core_local = cfg.core_local
            self.memories[name] = mem
        self.address_map = AddressMap(list(self.memories.values()))
        self.host_memory = self.memories[model.host.memory]
        self.dsps = [Dsp(self, i) for i in range(model.core.count)]

    @property
    def env(self) -> simpy.Environment:
        return self.ctx.env

    @property
    def data(self) -> bool:
        return self.ctx.data

    @property
    def accesses(self) -> AccessLog:
        return self.ctx.accesses

    @property
    def ddr(self) -> Memory:
        """The host's memory (J6: DDR)."""
        return self.host_memory

    @property
    def port(self) -> MemoryPort:
        return self.host_memory.port

    def memory(self, name: str) -> Memory:
        if name not in self.memories:
            raise DspsimInputError(f"memory {name!r}: the platform's memories are "
                                   f"{', '.join(self.memories)}")
        return self.memories[name]

    def warn(self, code: str, message: str, count: int = 1, severity: str = "warning") -> None:
        """Report a quirk that fired. ``severity``: ``warning`` when it changes the cycles or
        the values, ``info`` when nothing depends on it."""
        entry = self.warnings.setdefault(code, {"code": code, "message": message, "count": 0,
                                                "severity": severity})
        entry["count"] += int(count)

    @property
    def engines(self) -> dict[str, str]:
        """Every engine's name and kind (``core``, ``idma``, ``ddr``), in lane order."""
        out: dict[str, str] = {}
        for dsp in self.dsps:
            out[dsp.name] = "core"
            out.update({ch.name: "idma" for ch in dsp.idma})
        out.update({name: MEMORY_KIND for name in self.memories})
        return out

    def stats(self) -> dict[str, Any]:
        """Every engine's counters by name (each engine's own ``stats()``)."""
        out: dict[str, Any] = {}
        for dsp in self.dsps:
            out.update(dsp.stats())
        out.update({name: mem.port.stats() for name, mem in self.memories.items()})
        return out

    def busy_until(self, t: int) -> dict[str, float]:
        """Every engine's busy cycles up to ``t`` (the present, ticks)."""
        out: dict[str, int] = {}
        for dsp in self.dsps:
            out[dsp.name] = dsp.core.compute_ticks
            out.update({ch.name: ch.busy_until(t) for ch in dsp.idma})
        out.update({name: mem.port.busy_until(t) for name, mem in self.memories.items()})
        return {name: cycles(busy) for name, busy in out.items()}

    def port_logs(self) -> dict[str, Any]:
        """Each memory's port log (None where no log is kept)."""
        return {name: mem.port.log for name, mem in self.memories.items()}

    def waiting(self) -> list[str]:
        """Who is stuck, for a deadlock report."""
        stuck = []
        for dsp in self.dsps:
            stuck += [dsp.core.waiting_for] + [ch.describe_waiting() for ch in dsp.idma]
        return [s for s in stuck if s] or ["host (waiting for a task that never finished)"]
