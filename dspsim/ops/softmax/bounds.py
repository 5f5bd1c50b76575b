"""Closed-form bounds and estimates for both versions of the seed's softmax.


``bounds(model, mode, n)`` returns, without simulating, what the model's parameters alone imply
for one run: the traffic, three lower bounds on the op's cycles and a closed-form estimate.

Symbols, for the memory the host allocates from (``host.memory``; J6: ``ddr``), each request
priced by its policy (:mod:`dspsim.hw.policy`): ``L`` = ``ddr.latency_cycles`` (a write's:
``ddr.write_latency_cycles``, where given), ``B`` = ``ddr.bytes_per_cycle``, ``b`` =
``idma.burst_bytes``, ``k`` =
``idma.max_outstanding`` (per channel), ``m`` = ``ddr.max_outstanding`` (port), ``S`` =
``idma.setup_cycles``. When the core reaches that memory through its data cache, the direct
version's traffic, bounds and estimate are per line (:mod:`dspsim.kernels.cached`); the rest
of this text is the uncached case.

Lower bounds (no run of the model can beat any of them):

- **DMA-bound** ``dma_bound_cycles`` = bytes that must cross the port before the op stops its
  timer / ``B``: the port's data path moves one request at a time.
- **Latency-bound** ``latency_bound_cycles`` = requests x ``L`` / outstanding: every request
  holds a slot for at least ``L``. Ping-pong: all iDMA bursts, outstanding ``min(m, channels x
  k)`` per pass (one channel carries the max pass under the 'split' schedule). Direct: the
  core's vector loads, which stall the core, so one is outstanding at a time.
- **Compute-bound** ``compute_bound_cycles`` = the core's own issue cycles: each kernel's
  :meth:`~dspsim.kernels.shapes.LoopShape.tcm_cycles` (per tile in ping-pong) plus ``S`` per
  iDMA descriptor it programs.

``lower_bound_cycles`` is the largest of the three, named by ``binding_bound``.

The "must cross before the timer stops" matters: the ping-pong frame waits only for the last
output copy of a pass, so at the end of the op the other channel's last output copy may still be
in flight (the simulation warns ``unwaited_copy``); the direct version leaves its last posted
store in the write buffer. Those bytes and requests are left out of the bounds (they are still
counted in ``ddr_read_bytes`` / ``ddr_write_bytes``, which match the simulation exactly).

Estimates (``estimate_cycles``):

- **Direct**: each kernel call is :func:`dspsim.kernels.shapes.ddr_call` (the core walks the
  loop; every vector load stalls it for ``L + bytes / B``, plus the data-path time of the store
  posted just before it, plus ``L`` more when ``m = 1``, plus the loop's issue cycles), plus the
  hand-over between calls: vecexpf_max's last posted store still holds the path (and with
  ``m = 1`` the slot) when vecsum's first load issues. The core is the port's only requester,
  so this is exact up to rounding: the direct version is always in its uncontended regime.
- **Ping-pong**, per pass of ``T`` tiles (:func:`dspsim.ops.pingpong_bounds.ping_pong_pass_cycles`,
  shared with the row-wise ops), the larger of two forms. *Path*: the pass's bytes at
  the two channels' joint throughput ``X2 = min(B, min(m, 2k) b / (L + b/B))`` (or one
  channel's share at its own ``X1``, if that takes longer), plus a round trip, the descriptor
  setups and the last tile's compute. *Staged*: the first tile's copy, then for each next tile
  the largest of the core's work on the previous one (kernels and setups), half a buffer's
  round trip (compute, output copy, prefetch into it: the two buffers alternate) and, under
  'split', one channel carrying every input (output) copy; then the last tile's compute and
  output copy. A copy alone on a channel takes :func:`dspsim.hw.policy.transfer_cycles` with
  ``min(k, m)`` bursts in flight. Every tile but the last is full, so each sum over a pass's
  tiles is the full tiles' term times their count plus the last tile's: no work per tile. The
  estimate is within 5 % of the simulation (``tests/test_analytic.py``) in two uncontended
  regimes: (a) a single tile per pass (everything is serial) and (b) at least
  ``UNCONTENDED_MIN_TILES`` (10) tiles per pass with one pacing resource ahead of every other
  by ``UNCONTENDED_MARGIN`` (3x); see :func:`regime`. Elsewhere the two channels and the core
  interleave in ways a closed form does not follow: use the simulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dspsim.config import Core, HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.kernels.cached import direct_bounds
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM
from dspsim.ops.pingpong_bounds import Tiling, ping_pong_pass_cycles
from dspsim.schema import check_n

MODES = ("pingpong", "direct")
# Where the ping-pong estimate is trusted (see :func:`regime`): tiles per pass, and how far the
# pacing resource must be ahead of every other.
UNCONTENDED_MIN_TILES = 10
UNCONTENDED_MARGIN = 3.0


def bounds(model: HardwareModel, mode: str, n: int, rows: int = 1) -> dict[str, Any]:
    """Traffic, lower bounds and closed-form estimate of one run (units in the key names);
    ``rows`` > 1 only for the direct version through the data cache (its rows share lines)."""
    if mode not in MODES:
        raise DspsimInputError(f"mode {mode!r}: allowed {', '.join(MODES)}")
    n = check_n(n)
    out = _pingpong(model, n) if mode == "pingpong" else _direct(model, n, rows)
    named = {
        "dma": out["dma_bound_cycles"],
        "latency": out["latency_bound_cycles"],
        "compute": out["compute_bound_cycles"],
    }
    binding = max(named, key=named.get)
    out["lower_bound_cycles"] = named[binding]
    out["binding_bound"] = binding
    out["regime"] = regime(model, mode, n)
    order = (
        "ddr_read_bytes",
        "ddr_write_bytes",
        "ddr_requests",
        "dma_bound_cycles",
        "latency_bound_cycles",
        "compute_bound_cycles",
        "lower_bound_cycles",
        "binding_bound",
        "estimate_cycles",
        "regime",
    )
    return {k: out[k] for k in order} | {k: v for k, v in out.items() if k not in order}


# --------------------------------------------------------------------------------- direct
_DIRECT_CALLS = ((VECMAXF, "x", None), (VECEXPF_MAX, "x", "y"), (VECSUM, "y", None),
                 (VECMUL, "y", "y"))
"""dsp_softmax's calls in order: (shape, the array it loads, the array it stores)."""


def _direct(model: HardwareModel, n: int, rows: int = 1) -> dict[str, Any]:
    out = direct_bounds(model, _DIRECT_CALLS, n, rows)
    out["compute_bound_cycles"] = float(out["compute_bound_cycles"])
    return out


# ------------------------------------------------------------------------------ ping-pong
_Tiling = Tiling  # the name the variants' bounds and the tests know it by


def _tile_elems(model: HardwareModel) -> int:
    return max(1, model.softmax.tile_bytes // 4)


def _pingpong(model: HardwareModel, n: int) -> dict[str, Any]:
    ddr, idma = model.host_memory, model.idma
    burst, k, m = idma.burst_bytes, idma.max_outstanding, ddr.max_outstanding
    split = model.softmax.schedule == "split"
    tiles = _Tiling.of(n, _tile_elems(model))
    n_tiles = tiles.count
    # a burst's slot time when the path is free (a read's)
    occupancy = ddr.policy.request_cycles(burst, False)
    read = write = n_req = 0
    compute = dma_cycles = lat_cycles = estimate = 0.0
    passes = _passes(model.core)
    per_pass: dict[str, float] = {}
    for index, (name, cost, write_back) in enumerate(passes):
        in_bytes, out_bytes, pass_compute, pass_requests, dma, latency = _pass_traffic(
            model, n, tiles, cost, write_back, split, last=index == 2)
        read += in_bytes
        write += out_bytes
        compute += pass_compute
        n_req += pass_requests
        dma_cycles += dma
        lat_cycles += latency
        per_pass[name] = ping_pong_pass_cycles(model, tiles, cost, write_back, split,
                                               stops_timer=index == len(passes) - 1)
        estimate += per_pass[name]
    channels = 1 if n_tiles == 1 else 2
    return {
        "ddr_read_bytes": read,
        "ddr_write_bytes": write,
        "ddr_requests": n_req,
        "dma_bound_cycles": dma_cycles,
        "latency_bound_cycles": lat_cycles,
        "compute_bound_cycles": compute,
        "estimate_cycles": estimate,
        "tiles_per_pass": n_tiles,
        "pass_estimate_cycles": per_pass,
        "outstanding_requests": min(m, channels * k),
        "joint_throughput_bytes_per_cycle": min(ddr.policy.bytes_per_cycle,
                                                min(m, channels * k) * burst / occupancy),
    }


def _passes(core: Core) -> tuple[tuple[str, Callable[[int], int], bool], ...]:
    """The ping-pong frame's three passes: name, the core's kernel cycles on a tile in TCM,
    whether each tile is copied out."""
    def c_max(s: int) -> int:
        return VECMAXF.tcm_cycles(s, core)

    def c_sum(s: int) -> int:
        return VECEXPF_MAX.tcm_cycles(s, core) + VECSUM.tcm_cycles(s, core)

    def c_mul(s: int) -> int:
        return VECMUL.tcm_cycles(s, core)

    return (("max", c_max, False), ("exp_sum", c_sum, True), ("mul", c_mul, True))


def _pass_traffic(model: HardwareModel, n: int, tiles: _Tiling, cost: Callable[[int], int],
                  write_back: bool, split: bool, last: bool
                  ) -> tuple[int, int, float, int, float, float]:
    """One pass's bytes read and written, compute cycles (kernels and setups), requests, and
    its data path and latency bounds; ``last``: the pass that may stop the timer with the
    other buffer's last output copy in flight."""
    ddr, idma = model.host_memory, model.idma
    policy = ddr.policy  # what a request costs (dspsim.hw.policy)
    burst, k, m = idma.burst_bytes, idma.max_outstanding, ddr.max_outstanding
    n_tiles = tiles.count

    def requests(nbytes: int) -> int:
        return -(-nbytes // burst)

    in_bytes = 4 * n
    out_bytes = in_bytes if write_back else 0
    # channels in use: one for a single tile, or for the max pass under 'split' (inputs ch0)
    channels = 1 if (n_tiles == 1 or (split and not write_back)) else 2
    total_setups = n_tiles * (1 if write_back else 0) + max(0, n_tiles - 2)
    pass_compute = tiles.total(cost) + (min(2, n_tiles) + total_setups) * idma.setup_cycles
    reads = int(tiles.total(lambda s: requests(4 * s)))
    pass_requests = reads * (2 if write_back else 1)
    unwaited = 4 * tiles.at(n_tiles - 2) if (write_back and last and n_tiles >= 2) else 0
    dma = policy.data_cycles(in_bytes + out_bytes - unwaited)
    writes = pass_requests - reads - requests(unwaited)
    latency = policy.latency_total(reads, writes) / min(m, channels * k)
    return in_bytes, out_bytes, pass_compute, pass_requests, dma, latency


def regime(model: HardwareModel, mode: str, n: int, margin: float = UNCONTENDED_MARGIN) -> str:
    """The regime of one run: ``'uncontended'`` where the closed-form estimate is trusted to 5 %.

    Direct is always uncontended: the core is the port's only requester. Ping-pong is
    uncontended with one tile per pass (everything is serial), or when one pacing resource
    exceeds every other by ``margin`` per tile: the port's data path (``tile bytes / B``), the
    request windows (``tile bytes / X2``), the round trips (``L`` per descriptor, the two
    channels' overlapping) or the core
    (kernel cycles plus descriptor setup; it must also cover one tile's copies in and out).
    Otherwise ``'mixed'``: the channels and the core interleave in ways no closed form follows.
    """
    if mode == "direct":
        return "uncontended"
    tiles = _Tiling.of(n, _tile_elems(model)).count
    if tiles == 1:
        return "uncontended"
    if tiles < UNCONTENDED_MIN_TILES:  # filling and draining the pipeline are not small
        return "mixed"
    core, ddr, idma = model.core, model.host_memory, model.idma
    policy = ddr.policy  # what a request costs (dspsim.hw.policy)
    s = _tile_elems(model)
    window = min(ddr.max_outstanding, 2 * idma.max_outstanding)
    window_rate = window * idma.burst_bytes / policy.request_cycles(idma.burst_bytes, False)
    one = policy.transfer_cycles(
        4 * s, idma.burst_bytes, min(idma.max_outstanding, ddr.max_outstanding), False
    )
    checks = (
        (VECMAXF.tcm_cycles(s, core), 1),
        (VECEXPF_MAX.tcm_cycles(s, core) + VECSUM.tcm_cycles(s, core), 2),
        (VECMUL.tcm_cycles(s, core), 2),
    )
    split = model.softmax.schedule == "split"
    for kernel_cycles, descriptors in checks:
        nbytes = 4 * s * descriptors
        # round trips of the two channels overlap; 'split' carries the max pass on one channel
        channels = 1 if (split and descriptors == 1) else 2
        pace = {
            "path": policy.data_cycles(nbytes),
            "window": nbytes / window_rate,
            "latency": policy.latency_total(1, descriptors - 1) / channels,
            "core": kernel_cycles + descriptors * idma.setup_cycles,
        }
        top, second = sorted(pace.values(), reverse=True)[:2]
        if top < margin * second:
            return "mixed"
        if max(pace, key=pace.get) == "window" and ddr.max_outstanding < 2 * idma.max_outstanding:
            return "mixed"  # the channels share too few port slots: how they split them varies
        if max(pace, key=pace.get) == "core" and pace["core"] < margin * one * descriptors:
            return "mixed"
    return "uncontended"
