"""Closed forms of the fully connected op.

``K(r)`` = the kernel on ``r`` rows in TCM: ``ceil(r / 4) x (call overhead + iterations x II +
epilogue)`` (:meth:`dspsim.kernels.shapes.LoopShape.tcm_cycles` per group of four rows).
For the weights' memory: ``L`` = ``latency_cycles``, ``B`` = ``bytes_per_cycle``; the channel:
``S`` = ``idma.setup_cycles``, ``D(r)`` = ``transfer_cycles`` of a chunk of ``r`` rows (alone
on the port).

- ``pingpong``: ``estimate_cycles`` follows the example's loop on these durations (the first
  chunk alone, then per pair the fetch of the next chunk beside the kernel on this one; a
  wait ends when both are done); exact when the channel is alone on the port. Bounds: every
  chunk's fetch (``dma_bound_cycles = chunks x S + sum D``), every kernel
  (``compute_bound_cycles``).
- ``direct``: from TCM, ``K(OUT)``; through the data cache, each line of weights is fetched
  once: ``memory_bound_cycles = lines x line / B``; the estimate adds the kernel's cycles and,
  without a next-line prefetch, each line's round trip (blocking misses); with it, the larger
  of the kernel and the lines' fills. From an uncached memory (J6's DDR), the walk's closed
  form (:func:`dspsim.kernels.shapes.ddr_call_sequence`: every vector load stalls).
"""

from __future__ import annotations

import math
from typing import Any

from dspsim.hw.port import transfer_cycles
from dspsim.kernels.fc_s8 import FC_S8, groups, padded_bytes
from dspsim.kernels.shapes import ddr_call_sequence
from dspsim.ops.fc.params import HOST, TCM


def kernel_cycles(model: Any, rows: int, in_depth: int) -> int:
    return groups(rows) * FC_S8.tcm_cycles(in_depth, model.core)


def bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
    out_depth, in_depth = shape
    p = model.fc
    where = p.weights
    mem = None if where == TCM else model.memories[model.host.memory if where == HOST
                                                   else where]
    compute = kernel_cycles(model, out_depth, in_depth)
    out: dict[str, Any] = {"weights_bytes": out_depth * in_depth, "compute_bound_cycles": compute,
                           "macs": out_depth * in_depth}
    if variant == "pingpong" and mem is not None:
        lat, cpb = mem.latency_cycles, 1.0 / mem.bytes_per_cycle
        idma = model.idma
        window = min(idma.max_outstanding, mem.max_outstanding)
        tile = min(p.tile_rows, out_depth)
        chunks = math.ceil(out_depth / tile)
        rows = [min(tile, out_depth - i * tile) for i in range(chunks)]
        setup = idma.setup_cycles
        dma = [setup + transfer_cycles(r * in_depth, idma.burst_bytes, window, lat, cpb)
               for r in rows]
        ker = [kernel_cycles(model, r, in_depth) for r in rows]
        t = dma[0]  # the first chunk alone
        for i in range(0, chunks, 2):
            # fetch i + 1 (the core programs it), kernel i, wait until the channel is idle
            fetch_done, core = t, t
            if i + 1 < chunks:
                fetch_done, core = t + dma[i + 1], t + setup
            t = max(core + ker[i], fetch_done)
            # fetch i + 2 unless this is the last pair, kernel i + 1
            fetch_done, core = t, t
            if i + 2 < chunks:
                fetch_done, core = t + dma[i + 2], t + setup
            t = core + ker[i + 1] if i + 1 < chunks else core
            t = max(t, fetch_done)  # the next pair waits until the channel is idle
        out.update({"chunks": chunks, "dma_bound_cycles": sum(dma), "estimate_cycles": t})
        named = {"dma": out["dma_bound_cycles"], "compute": compute}
    elif mem is None:
        out["estimate_cycles"] = compute
        named = {"compute": compute}
    else:
        lat, cpb = mem.latency_cycles, 1.0 / mem.bytes_per_cycle
        if mem.cached and model.dcache.capacity_bytes:
            line = model.dcache.line_bytes
            lines = math.ceil(padded_bytes(out_depth, in_depth) / line)
            fills = lines * (lat + line * cpb)
            out["lines"] = lines
            out["memory_bound_cycles"] = lines * line * cpb
            out["estimate_cycles"] = (max(compute, fills) if model.dcache.prefetch_next_line
                                      else compute + fills)
        else:
            walk = ddr_call_sequence(((FC_S8, False),), in_depth, model.core, lat, cpb,
                                     mem.max_outstanding, repeat=groups(out_depth))
            out["memory_bound_cycles"] = walk.read_bytes * cpb
            out["estimate_cycles"] = walk.cycles
        named = {"memory": out["memory_bound_cycles"], "compute": compute}
    binding = max(named, key=named.get)
    out["binding_bound"] = binding
    out["lower_bound_cycles"] = named[binding]
    out["estimate_cycles"] = max(out["estimate_cycles"], named[binding])
    return out
