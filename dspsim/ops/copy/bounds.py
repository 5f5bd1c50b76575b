"""Closed forms of the copy microbenchmark.

For the external end's memory: ``L`` = ``latency_cycles``, ``B`` = ``bytes_per_cycle``,
``m`` = ``max_outstanding``; the channel's ``b`` = ``idma.burst_bytes``, ``k`` =
``idma.max_outstanding``, ``S`` = ``idma.setup_cycles``; ``P`` = ``copy.prologue_cycles``,
``H`` the interrupt handler's cycles when ``copy.completion_interrupt`` is set.

- **Per descriptor** (``latency_bandwidth_cycles``): the channel finishes a descriptor before it
  starts the next, so each descriptor of ``d`` bytes costs at least ``L + d / B``.
- **Bandwidth** (``bandwidth_bound_cycles``): every byte crosses the port: ``n / B``.
- **Outstanding requests** (``outstanding_bound_cycles``): at most ``w = min(k, m)`` requests
  in flight, each holding its slot for a round trip ``L + b / B``: ``requests / w x (L +
  b / B)``, i.e. a rate of ``w b / (L + b / B)`` bytes per cycle.

``estimate_cycles`` (idma): ``P + S + sum over descriptors of transfer_cycles(d) + H``: exact
when the channel is alone on the port and programming the next descriptor (``S``) takes less
than a descriptor's transfer, since each descriptor then starts on an idle port the moment the
one before it ends. ``lower_bound_cycles`` is the largest of the three bounds (plus ``P``).

memcpy: from TCM to TCM the kernel's ``LoopShape.tcm_cycles``; from an uncached memory
:func:`dspsim.kernels.shapes.ddr_call` (each vector load's round trip); through the data
cache, with blocking misses and no prefetch, one miss per line: ``lines x (L + line / B) +
iterations x II + call overhead`` (an estimate: with ``dcache.prefetch_next_line`` the
line fills overlap and the period per line is ``max(L + line / B, line's issue)``).
"""

from __future__ import annotations

import math
from typing import Any

from dspsim.hw.port import transfer_cycles
from dspsim.kernels.memcpy import MEMCPY, memcpy_words
from dspsim.kernels.shapes import ddr_call, posted_store_bytes
from dspsim.ops.copy.params import HOST, TCM
from dspsim.ops.copy.program import plan


def memory_of(model: Any, where: str) -> Any:
    """The memory table of ``where`` (``host`` -> ``host.memory``); None for TCM."""
    if where == TCM:
        return None
    return model.memories[model.host.memory if where == HOST else where]


def bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
    n = shape[0]
    p = model.copy
    ext = memory_of(model, p.src) or memory_of(model, p.dst)
    out: dict[str, Any] = {"bytes": n}
    prologue = p.prologue_cycles if p.timed_prologue else 0.0
    if ext is None:  # TCM to TCM: the core alone
        words = n // 4
        out["estimate_cycles"] = prologue + MEMCPY.tcm_cycles(words, model.core)
        out["lower_bound_cycles"] = out["estimate_cycles"]
        out["binding_bound"] = "compute"
        return out
    lat, cpb = ext.latency_cycles, 1.0 / ext.bytes_per_cycle
    pl = plan(model, p, n)
    sizes = [pl.size(i) for i in range(pl.pieces)]
    if variant == "idma":
        burst = model.idma.burst_bytes
        window = min(model.idma.max_outstanding, ext.max_outstanding)
        requests = sum(math.ceil(d / burst) for d in sizes)
        handler = p.interrupt_handler_cycles if p.completion_interrupt else 0.0
        named = {
            "latency_bandwidth": sum(lat + d * cpb for d in sizes),
            "bandwidth": n * cpb,
            "outstanding": requests / window * (lat + burst * cpb),
        }
        estimate = prologue + model.idma.setup_cycles + handler + sum(
            transfer_cycles(d, burst, window, lat, cpb) for d in sizes)
        out.update({"descriptors": len(sizes), "descriptor_bytes": pl.piece_bytes,
                    "requests": requests,
                    "outstanding_bytes_per_cycle": window * burst / (lat + burst * cpb)})
    else:
        core = model.core
        words = n // 4
        must_cross = n
        if memory_of(model, p.src) is None and not ext.cached:
            # stores only: the last ones may still be in the write buffer when memcpy returns
            must_cross -= posted_store_bytes(MEMCPY, memcpy_words(sizes[-1]), core.lanes_f32,
                                             core.write_buffer_entries)
        named = {"bandwidth": must_cross * cpb,
                 "latency_bandwidth": (lat + must_cross * cpb) if must_cross > 0 else 0.0}
        if ext.cached and model.dcache.capacity_bytes:
            line = model.dcache.line_bytes
            lines = math.ceil(n / line)
            estimate = (core.call_overhead_cycles * len(sizes) + lines * (lat + line * cpb)
                        + MEMCPY.iterations(words, core.lanes_f32) * MEMCPY.ii_cycles(core))
            out["lines"] = lines
        else:
            load_ext = memory_of(model, p.src) is not None
            store_ext = memory_of(model, p.dst) is not None
            estimate = sum(ddr_call(MEMCPY, d // 4, core, lat, cpb, load_ext, store_ext,
                                    ext.max_outstanding).cycles for d in sizes)
        estimate += prologue
    for k, v in named.items():
        out[f"{k}_bound_cycles"] = v
    binding = max(named, key=named.get)
    out["binding_bound"] = binding
    out["lower_bound_cycles"] = prologue + named[binding]
    out["estimate_cycles"] = max(estimate, out["lower_bound_cycles"])
    return out
