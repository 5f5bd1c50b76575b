"""Closed-form traffic, lower bounds and estimate of the seed's softmax on one row (``bounds(model,
mode, n)``), priced by the host memory's request policy (:mod:`dspsim.hw.policy`): ``L``
latency, ``B`` bytes per cycle, ``m`` its slots; ``b``, ``k``, ``S`` the iDMA's burst,
outstanding requests per channel and setup. The bytes nothing waits for before the timer stops
(a pass's other output copy, the direct version's last posted store) are left out of the
bounds, not of the traffic, which matches the simulation exactly. The ping-pong estimate is
trusted to 5 % where :func:`regime` says ``uncontended``; through a data cache the direct
version counts per line (:mod:`dspsim.kernels.cached`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dspsim.config import Core, HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.kernels.cached import direct_bounds
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM
from dspsim.ops.base import bind
from dspsim.ops.pingpong_bounds import PortCosts, Tiling, ping_pong_pass_cycles
from dspsim.ops.softmax.layout import tile_elems
from dspsim.schema import check_n

MODES = ("pingpong", "direct")
# Where the ping-pong estimate is trusted (see :func:`regime`): tiles per pass, and how far the
# pacing resource must be ahead of every other.
UNCONTENDED_MIN_TILES = 10
UNCONTENDED_MARGIN = 3.0
ORDER = (
    "ddr_read_bytes", "ddr_write_bytes", "ddr_requests", "dma_bound_cycles",
    "latency_bound_cycles", "compute_bound_cycles", "lower_bound_cycles", "binding_bound",
    "estimate_cycles",
)  # the fields every softmax bounds mapping starts with, in this order


def ordered(out: dict[str, Any], order: tuple[str, ...] = ORDER) -> dict[str, Any]:
    """``out`` with the keys of ``order`` first, in that order."""
    return {k: out[k] for k in order} | {k: v for k, v in out.items() if k not in order}


def bounds(model: HardwareModel, mode: str, n: int, rows: int = 1) -> dict[str, Any]:
    """Traffic, lower bounds and closed-form estimate of one run (units in the key names);
    ``rows`` > 1 only for the direct version through the data cache (its rows share lines)."""
    if mode not in MODES:
        raise DspsimInputError(f"mode {mode!r}: allowed {', '.join(MODES)}")
    n = check_n(n)
    out = _pingpong(model, n) if mode == "pingpong" else _direct(model, n, rows)
    bind(out, raise_estimate=False)
    out["regime"] = regime(model, mode, n)
    return ordered(out, (*ORDER, "regime"))


_DIRECT_CALLS = ((VECMAXF, "x", None), (VECEXPF_MAX, "x", "y"), (VECSUM, "y", None),
                 (VECMUL, "y", "y"))
"""dsp_softmax's calls in order: (shape, the array it loads, the array it stores)."""


def _direct(model: HardwareModel, n: int, rows: int = 1) -> dict[str, Any]:
    out = direct_bounds(model, _DIRECT_CALLS, n, rows)
    out["compute_bound_cycles"] = float(out["compute_bound_cycles"])
    return out


def _pingpong(model: HardwareModel, n: int) -> dict[str, Any]:
    c, split = PortCosts(model), model.softmax.schedule == "split"
    tiles = Tiling.of(n, tile_elems(model))
    passes = _passes(model.core)
    last = len(passes) - 1  # the pass that stops the timer
    parts = [_pass_traffic(model, n, tiles, cost, write_back, split, last=i == last)
             for i, (_, cost, write_back) in enumerate(passes)]
    read, write, n_req, dma, latency, compute = (sum(column) for column in zip(*parts))
    per_pass = {name: ping_pong_pass_cycles(model, tiles, cost, write_back, split,
                                            stops_timer=i == last)
                for i, (name, cost, write_back) in enumerate(passes)}
    window = min(c.m, (1 if tiles.count == 1 else 2) * c.k)
    occupancy = c.policy.request_cycles(c.burst, False)  # a burst's slot time, path free
    return {
        "ddr_read_bytes": read, "ddr_write_bytes": write, "ddr_requests": n_req,
        "dma_bound_cycles": dma, "latency_bound_cycles": latency,
        "compute_bound_cycles": compute, "estimate_cycles": sum(per_pass.values()),
        "tiles_per_pass": tiles.count, "pass_estimate_cycles": per_pass,
        "outstanding_requests": window,
        "joint_throughput_bytes_per_cycle": min(c.policy.bytes_per_cycle,
                                                window * c.burst / occupancy),
    }


def _passes(core: Core) -> tuple[tuple[str, Callable[[int], int], bool], ...]:
    """The ping-pong frame's three passes: name, the core's kernel cycles on a tile in TCM,
    whether each tile is copied out."""
    return (("max", lambda s: VECMAXF.tcm_cycles(s, core), False),
            ("exp_sum", lambda s: VECEXPF_MAX.tcm_cycles(s, core) + VECSUM.tcm_cycles(s, core),
             True),
            ("mul", lambda s: VECMUL.tcm_cycles(s, core), True))


def _pass_traffic(model: HardwareModel, n: int, tiles: Tiling, cost: Callable[[int], int],
                  write_back: bool, split: bool, last: bool
                  ) -> tuple[int, int, int, float, float, float]:
    """One pass's bytes read and written, requests, data path and latency bounds and compute
    cycles (kernels and setups); ``last``: the pass that may stop the timer with the other
    buffer's last output copy in flight."""
    c, count = PortCosts(model), tiles.count
    in_bytes = 4 * n
    out_bytes = in_bytes if write_back else 0
    # channels in use: one for a single tile, or for the max pass under 'split' (inputs ch0)
    channels = 1 if (count == 1 or (split and not write_back)) else 2
    setups = min(2, count) + count * (1 if write_back else 0) + max(0, count - 2)
    compute = tiles.total(cost) + setups * c.setup
    reads = int(tiles.total(lambda s: c.requests(4 * s)))
    requests = reads * (2 if write_back else 1)
    unwaited = 4 * tiles.at(count - 2) if (write_back and last and count >= 2) else 0
    dma = c.policy.data_cycles(in_bytes + out_bytes - unwaited)
    writes = requests - reads - c.requests(unwaited)
    latency = c.policy.latency_total(reads, writes) / min(c.m, channels * c.k)
    return in_bytes, out_bytes, requests, dma, latency, compute


def regime(model: HardwareModel, mode: str, n: int) -> str:
    """``'uncontended'`` where the closed-form estimate is trusted to 5 %, else ``'mixed'``.

    Direct always is (the core is the port's only requester); ping-pong with one tile per pass,
    or when one pacing resource exceeds every other by :data:`UNCONTENDED_MARGIN` per tile: the
    port's data path, the request windows, the round trips or the core (which must also cover
    one tile's copies in and out)."""
    if mode == "direct":
        return "uncontended"
    tiles = Tiling.of(n, tile_elems(model)).count
    if tiles == 1:
        return "uncontended"
    if tiles < UNCONTENDED_MIN_TILES:  # filling and draining the pipeline are not small
        return "mixed"
    c, s = PortCosts(model), tile_elems(model)
    window_rate = min(c.m, 2 * c.k) * c.burst / c.policy.request_cycles(c.burst, False)
    one = c.single(4 * s)
    split = model.softmax.schedule == "split"
    for _, cost, write_back in _passes(model.core):
        descriptors = 2 if write_back else 1
        nbytes = 4 * s * descriptors
        # round trips of the two channels overlap; 'split' carries the max pass on one channel
        channels = 1 if (split and descriptors == 1) else 2
        pace = {
            "path": c.policy.data_cycles(nbytes),
            "window": nbytes / window_rate,
            "latency": c.policy.latency_total(1, descriptors - 1) / channels,
            "core": cost(s) + descriptors * c.setup,
        }
        top, second = sorted(pace.values(), reverse=True)[:2]
        pacing = max(pace, key=pace.get)
        if top < UNCONTENDED_MARGIN * second:
            return "mixed"
        if pacing == "window" and c.m < 2 * c.k:
            return "mixed"  # the channels share too few port slots: how they split them varies
        if pacing == "core" and pace["core"] < UNCONTENDED_MARGIN * one * descriptors:
            return "mixed"
    return "uncontended"
