"""Closed forms of the fully connected op: ``K(r)`` the kernel on ``r`` rows in TCM; for the
weights' memory (its request policy, :mod:`dspsim.hw.policy`) ``L`` its latency, ``B`` its
bytes per cycle. ``pingpong``: the example's loop on chunk fetches and kernels (exact when the
channel is alone on the port). ``direct``: ``K(OUT)`` from TCM; through the data cache, line
by line (a prefetched line past the end may fill after the timer stops); from an uncached
memory the walk's closed form. Traffic (``traffic_bytes``, keyed as a run's ``bytes``) is exact.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dspsim.hw.policy import engine_paced_cycles
from dspsim.kernels.fc_s8 import FC_S8, groups, padded_bytes
from dspsim.kernels.shapes import ddr_call_sequence
from dspsim.ops.base import HOST, memory_name, memory_of
from dspsim.ops.fc.reference import WEIGHTS_OFFSET


def kernel_cycles(model: Any, rows: int, in_depth: int) -> int:
    """``K(rows)``: the kernel's cycles on ``rows`` rows of ``in_depth`` in TCM."""
    return groups(rows) * FC_S8.tcm_cycles(in_depth, model.core)


def bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """Traffic, lower bounds and estimate of ``variant`` on ``shape`` (OUT, IN)."""
    out_depth, in_depth = shape
    mem = memory_of(model, model.fc.weights)
    if mem is not None and mem.core_local and variant != "pingpong":
        mem = None  # on the core's own bus, as TCM: the kernel's loop cycles, no request
    compute = kernel_cycles(model, out_depth, in_depth)
    out: dict[str, Any] = {"weights_bytes": out_depth * in_depth, "compute_bound_cycles": compute,
                           "macs": out_depth * in_depth}
    if variant == "pingpong" and mem is not None:
        out.update(_pingpong(model, mem, shape))
        named = {"dma": out["dma_bound_cycles"], "compute": compute}
    elif mem is None:
        out["estimate_cycles"] = compute
        named = {"compute": compute}
    else:
        out.update(_direct(model, mem, shape, compute))
        named = {"memory": out["memory_bound_cycles"], "compute": compute}
    binding = max(named, key=named.get)
    out["binding_bound"] = binding
    out["lower_bound_cycles"] = named[binding]
    out["estimate_cycles"] = max(out["estimate_cycles"], named[binding])
    out["traffic_bytes"] = traffic(model, variant, shape)
    return out


def _pingpong(model: Any, mem: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    """The ping-pong variant's chunks of weight rows, its iDMA bound and its estimate."""
    out_depth, in_depth = shape
    policy = mem.policy  # what a request costs (dspsim.hw.policy)
    idma = model.idma
    window = min(idma.max_outstanding, mem.max_outstanding)
    tile = min(model.fc.tile_rows, out_depth)
    chunks = math.ceil(out_depth / tile)
    rows = [min(tile, out_depth - i * tile) for i in range(chunks)]
    setup, burst = idma.setup_cycles, idma.burst_bytes

    def moved(b: int) -> float:  # fetched, then at the slower of the port and the engine's pace
        return engine_paced_cycles(idma, b, b, policy.transfer_cycles(b, burst, window, False),
                                   lambda last: policy.request_cycles(last, False))

    dma = [setup + moved(r * in_depth) for r in rows]
    ker = [kernel_cycles(model, r, in_depth) for r in rows]
    t = dma[0]  # the first chunk alone
    for i in range(chunks):
        if i + 1 < chunks:  # the core programs the next fetch, then runs the kernel on this one
            t = max(t + setup + ker[i], t + dma[i + 1])
        else:
            t += ker[i]
    return {"chunks": chunks, "dma_bound_cycles": sum(dma), "estimate_cycles": t}


def _direct(model: Any, mem: Any, shape: tuple[int, ...], compute: float) -> dict[str, Any]:
    """The direct variant on the weights' memory: through the data cache, line by line, or
    the uncached walk."""
    out: dict[str, Any] = {}
    policy = mem.policy  # what a request costs (dspsim.hw.policy)
    if mem.cached and model.dcache.capacity_bytes:
        line = model.dcache.line_bytes
        lines = weight_lines(model, shape)
        fills = lines * policy.request_cycles(line, False)
        out["lines"] = lines
        # the line prefetched past the weights' end may still be filling when the timer stops
        out["memory_bound_cycles"] = policy.data_cycles(demand_lines(model, shape) * line)
        miss = model.dcache.miss_cycles  # what each demand miss adds to its fill
        if not model.dcache.prefetch_next_line:
            out["estimate_cycles"] = compute + lines * miss + fills
        elif model.dcache.prefetch_streams:  # the core waits for each demand miss
            demand, _ = _stream_replay(model, shape)
            out["estimate_cycles"] = compute + demand * (
                policy.request_cycles(line, False) + miss)
        else:
            out["estimate_cycles"] = max(compute, fills) + miss
    else:
        walk = _walk(model, mem, shape)
        out["memory_bound_cycles"] = policy.data_cycles(walk.read_bytes)
        out["estimate_cycles"] = walk.cycles
    return out


def weight_lines(model: Any, shape: tuple[int, ...]) -> int:
    """Lines of weights the cache fills in the direct variant (cold): every line the kernel
    touches and, when prefetched, the line after the last if the memory has one there (in the
    host's buffer the input follows; another memory's block starts at the memory's start)."""
    line = model.dcache.line_bytes
    where = model.fc.weights
    lines = demand_lines(model, shape)
    if model.dcache.prefetch_next_line and (not model.dcache.prefetch_streams
                                            or _stream_replay(model, shape)[1]):
        lines += int(where == HOST or (lines + 1) * line <= model.memories[where].size_bytes)
    return lines


def _first_touches(line: int, lanes: int, host: bool, shape: tuple[int, ...]) -> np.ndarray:
    """The weights' lines (numbered from the first) in the order the direct kernel first
    touches each: per group of four rows, per iteration, rows 0 .. 3 side by side
    (``FC_S8.interleaved_rows``), each load's lines in address order."""
    out_depth, in_depth = shape
    first = WEIGHTS_OFFSET % line if host else 0
    vb = 4 * lanes
    full, rest = divmod(in_depth, vb)
    cols = np.arange(full + bool(rest)) * vb
    sizes = np.where(np.arange(len(cols)) < full, vb, rest)
    k = FC_S8.interleaved_rows
    # [group, iteration, row] -> the load's first and last byte
    starts = (first + np.arange(groups(out_depth))[:, None, None] * k * in_depth
              + cols[None, :, None] + np.arange(k)[None, None, :] * in_depth)
    ends = starts + sizes[None, :, None] - 1
    touched = np.stack([starts // line, ends // line], axis=-1).reshape(-1)
    lines, order = np.unique(touched, return_index=True)
    return lines[np.argsort(order)]


def _stream_replay(model: Any, shape: tuple[int, ...]) -> tuple[int, bool]:
    """The direct kernel's weights through a prefetcher following ``dcache.prefetch_streams``
    streams (:class:`dspsim.hw.dcache.DataCache`), lines in first-touch order (a later touch
    hits): the demand misses, and whether the line after the weights' last is prefetched."""
    return _replay(model.dcache.line_bytes, model.core.lanes_f32, model.fc.weights == HOST,
                   model.dcache.prefetch_streams, demand_lines(model, shape), shape)


@functools.lru_cache(maxsize=256)
def _replay(line: int, lanes: int, host: bool, entries: int, end: int,
            shape: tuple[int, ...]) -> tuple[int, bool]:
    streams: dict[int, None] = {}
    present: set[int] = set()
    unused: set[int] = set()  # prefetched, not yet used
    demand = 0
    for k in _first_touches(line, lanes, host, shape).tolist():
        prefetched = k in unused  # its first use: on while its stream (expecting k + 1) is
        if prefetched:
            unused.discard(k)
        else:
            demand += 1
            present.add(k)
        expected = k + 1 if prefetched else k
        if expected in streams:  # continues a followed stream
            del streams[expected]
            streams[k + 2] = None
            if k + 1 not in present:  # prefetched
                present.add(k + 1)
                unused.add(k + 1)
        elif not prefetched:  # a new stream, in the oldest's place when every entry is taken
            if len(streams) >= entries:
                del streams[next(iter(streams))]
            streams[k + 1] = None
    return demand, end in present


def demand_lines(model: Any, shape: tuple[int, ...]) -> int:
    """Lines the kernel's stream of weights touches (the core waits for each)."""
    line = model.dcache.line_bytes
    first = WEIGHTS_OFFSET % line if model.fc.weights == HOST else 0
    return -(-(first + padded_bytes(*shape)) // line)


def _walk(model: Any, mem: Any, shape: tuple[int, ...]) -> Any:
    """The direct kernel's walk on an uncached memory, in closed form."""
    out_depth, in_depth = shape
    return ddr_call_sequence(((FC_S8, False),), in_depth, model.core, mem.policy,
                             mem.max_outstanding, repeat=groups(out_depth))


def traffic(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, int]:
    """The bytes each memory's port carries in the run, keyed as the run's ``bytes``
    (``<memory>_read``, ``<memory>_write``), exactly as simulated: the weights as the variant
    reads them (rows, lines or vector loads), the input, bias and output at the host's buffer."""
    out_depth, in_depth = shape
    counts = {f"{m}_{way}": 0 for m in model.memories for way in ("read", "write")}
    host = model.host.memory
    counts[f"{host}_read"] += in_depth + 4 * out_depth
    counts[f"{host}_write"] += out_depth
    name = memory_name(model, model.fc.weights)
    if name is None:
        return counts
    mem = model.memories[name]
    if variant == "pingpong":
        weights = out_depth * in_depth
    elif mem.core_local:  # the core's own bus: no request
        weights = 0
    elif mem.cached and model.dcache.capacity_bytes:
        weights = weight_lines(model, shape) * model.dcache.line_bytes
    else:
        weights = _walk(model, mem, shape).read_bytes
    counts[f"{name}_read"] += weights
    return counts
