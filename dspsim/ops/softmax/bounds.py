"""Closed-form traffic, lower bounds and estimates of softmax, priced by the host memory's
request policy (:mod:`dspsim.hw.policy`): ``L`` latency, ``B`` bytes per cycle, ``m`` its
slots; ``b``, ``k``, ``S`` the iDMA's burst, outstanding requests per channel and setup.

:func:`bounds` is the seed's on one row (``bounds(model, mode, n)``): the bytes nothing waits
for before the timer stops (a pass's other output copy, the direct version's last posted store)
are left out of the bounds, not of the traffic, which matches the simulation exactly. The
ping-pong estimate is trusted to 5 % where :func:`regime` says ``uncontended``; through a data
cache the direct version counts per line (:mod:`dspsim.kernels.cached`).

:func:`variant_bounds` covers any shape and variant: the new schedules, which wait for every
copy they program (every byte and request counts; traffic is exact), and the seed's two on a
``[rows, cols]`` input. A streamed pass's estimate is the larger of its *path* form (its bytes
at the channels' joint throughput, a round trip, the last tile) and its *core* form (the first
copy, the kernels and descriptors, the last output copy); a ``[rows, cols]`` input runs row
after row (``rows`` excepted).
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
from dspsim.ops.rowwise import rows_per_tile
from dspsim.ops.softmax.layout import (
    STREAM_BUFFERS,
    channels_used,
    resident_layout,
    stream_channels,
    tile_elems,
)
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


# ----------------------------------------------------------------- any shape, any variant
_ADDITIVE = ("ddr_read_bytes", "ddr_write_bytes", "ddr_requests", "dma_bound_cycles",
             "latency_bound_cycles", "compute_bound_cycles", "estimate_cycles")


class _Cost(PortCosts):
    """The model's constants and the per-call costs every variant is built from."""

    def __init__(self, model: Any):
        super().__init__(model)
        self.model, self.core = model, model.core
        self.lat_write = self.policy.latency(True)
        self.channels = model.idma.channels

    def tcm(self, shape: Any, n: int) -> int:
        return shape.tcm_cycles(n, self.core)

    def throughput(self, channels: int, paced: bool = True) -> float:
        """Bytes per cycle of ``channels`` together: the port's path and request windows, and
        (``paced``) each channel's engine."""
        window = min(self.m, max(1, channels) * self.k)
        return min(1.0 / self.cpb, max(1, channels) * self.rate if paced else float("inf"),
                   window * self.burst / self.policy.request_cycles(self.burst, False))

    def pass1(self, s: int) -> int:  # online pass 1, one tile: max, exp, sum, rescale
        return (self.tcm(VECMAXF, s) + self.tcm(VECEXPF_MAX, s) + self.tcm(VECSUM, s)
                + self.tcm(VECEXPF_MAX, 1))

    def pass2(self, s: int) -> int:  # online pass 2, one tile: exp, multiply
        return self.tcm(VECEXPF_MAX, s) + self.tcm(VECMUL, s)

    def row(self, cols: int) -> int:  # rows: the four kernels on one row
        return (self.tcm(VECMAXF, cols) + self.tcm(VECEXPF_MAX, cols) + self.tcm(VECSUM, cols)
                + self.tcm(VECMUL, cols))


class _Work:
    """What one row (or the whole tensor, for ``rows``) costs: sums of the four resources."""

    def __init__(self) -> None:
        self.read = self.write = self.requests = self.descriptors = 0
        self.write_requests = 0  # of the requests
        self.kernels = 0.0
        self.channels = 1
        self.estimate = 0.0

    def add_traffic(self, other: _Work) -> None:
        """Add ``other``'s bytes, requests and descriptors; the channels are the larger."""
        self.read += other.read
        self.write += other.write
        self.requests += other.requests
        self.write_requests += other.write_requests
        self.descriptors += other.descriptors
        self.channels = max(self.channels, other.channels)

    def stream_pass(self, c: _Cost, tiles: Tiling, cost: Any, write_back: bool, policy: str,
                    buffers: int = STREAM_BUFFERS) -> None:
        """One pass of :func:`~dspsim.ops.stream.hb_dsp_stream_frame`."""
        if not tiles.count:
            return
        nbytes = 4 * tiles.elems
        copies = 2 if write_back else 1
        self.read += nbytes
        self.write += nbytes if write_back else 0
        reads = int(tiles.total(lambda s: c.requests(4 * s)))
        self.requests += copies * reads
        self.write_requests += reads if write_back else 0
        self.descriptors += copies * tiles.count
        kernels = tiles.total(cost)
        self.kernels += kernels
        # copies in flight: one per channel and one per buffer (its input or its output)
        used = min(channels_used(policy, c.channels, write_back, tiles.count), buffers)
        self.channels = max(self.channels, used)
        ins, outs = stream_channels(policy, c.channels, write_back)
        # each channel's (bytes, descriptors): the engine fetches each descriptor in turn
        if policy == "pingpong":  # tile i's input and output on channel i % 2
            lanes = [_lane(tiles, j, 2, copies) for j in range(2)]
        else:  # tile i's input on ins[i % len(ins)], its output on outs[i % len(outs)]
            lanes = [_lane(tiles, j, len(ins)) for j in range(len(ins))]
            if write_back:
                lanes += [_lane(tiles, j, len(outs)) for j in range(len(outs))]
        last = tiles.at(tiles.count - 1)
        out = 4 * last if write_back else 0  # the last output: after the last tile's kernels
        # the port, shared (each engine paces its own channel's lane: the last output overlaps
        # the other channels' copies), or a lane but the last output (priced by last_out)
        fetch = c.idma.descriptor_cycles
        transfer = max((copies * nbytes - out) / c.throughput(used, paced=False),
                       max(b / c.throughput(1) + k * fetch for b, k in lanes)
                       - out / c.throughput(1) - (fetch if write_back else 0.0))
        if policy == "split" and write_back:  # inputs and outputs each on their own channels
            # (the outputs' channels idle until the first tile is in and computed)
            transfer = max(transfer, nbytes / c.throughput(min(len(ins), buffers)),
                           c.single(4 * tiles.at(0)) + cost(tiles.at(0))
                           + (nbytes - out) / c.throughput(min(len(outs), buffers)))
        last_out = c.single(out, True) if write_back else 0.0
        path = (c.setup + transfer + (c.lat_write if write_back else c.lat)
                + cost(last) + (c.setup + last_out if write_back else 0.0))
        core = c.single(4 * tiles.at(0)) + kernels + copies * tiles.count * c.setup + last_out
        if policy == "split" and write_back and buffers == 2:
            # a buffer is refilled only once the core has computed the other one: every input
            # copy is exposed
            core += tiles.total(lambda s: c.single(4 * s)) - c.single(4 * tiles.at(0))
        self.estimate += core if tiles.count == 1 else max(path, core)  # one tile: serial


def _lane(tiles: Tiling, j: int, lanes: int, copies: int = 1) -> tuple[int, int]:
    """Bytes and descriptors of ``copies`` copies of the tiles ``i`` with ``i % lanes == j``."""
    return copies * 4 * tiles.parity_elems(j, lanes), copies * ((tiles.count - j + lanes - 1)
                                                                // lanes)


def _online(c: _Cost, cols: int, policy: str) -> _Work:
    w = _Work()
    tiles = Tiling.of(cols, tile_elems(c.model))
    buffers = c.model.softmax.buffers if policy == "split" else STREAM_BUFFERS
    w.stream_pass(c, tiles, c.pass1, False, policy, buffers)
    rescale = c.tcm(VECEXPF_MAX, 1)  # the sum to the row's max, between the passes
    w.kernels += rescale
    w.estimate += rescale
    w.stream_pass(c, tiles, c.pass2, True, policy, buffers)
    return w


def _resident(c: _Cost, cols: int) -> tuple[_Work, Any]:
    lay = resident_layout(c.model, cols)
    w = _Work()
    sizes = [size for _, _, _, size in lay.chunks]
    resident = 4 * lay.resident
    w.read += resident
    w.write += resident
    reads = sum(c.requests(4 * s) for s in sizes)
    w.requests += 2 * reads
    w.write_requests += reads
    w.descriptors += 2 * len(sizes)
    w.channels = min(len(sizes), c.channels) if sizes else 1
    maxes = sum(c.tcm(VECMAXF, s) for s in sizes)
    muls = sum(c.tcm(VECMUL, s) for s in sizes)
    exp_sum = sum(c.tcm(VECEXPF_MAX, e) + c.tcm(VECSUM, e) for e in lay.per_bank if e)
    # chunk j on channel j % C: the busiest channel alone, or all of them at their joint rate
    lanes = [4 * sum(sizes[j::c.channels]) for j in range(c.channels)]
    transfer = max(resident / c.throughput(w.channels), max(lanes) / c.throughput(1))
    load = 0.0
    if sizes:
        load = max(c.setup + transfer + c.lat + c.tcm(VECMAXF, sizes[-1]),
                   len(sizes) * c.setup + c.single(4 * sizes[0]) + maxes)
    stream = _Work()
    pass2 = 0.0
    if lay.streamed:
        tiles = Tiling.of(lay.streamed, tile_elems(c.model))
        stream.stream_pass(c, tiles, c.pass1, False, "pingpong")
        pass1 = stream.estimate
        stream.stream_pass(c, tiles, c.pass2, True, "pingpong")
        pass2 = stream.estimate - pass1
        exp_sum += c.tcm(VECEXPF_MAX, 1)
        w.add_traffic(stream)
        load += pass1
    out = pass2
    if sizes:
        stream_out = 2 * 4 * lay.streamed
        transfer = max(transfer, (resident + stream_out) / c.throughput(w.channels))
        out = max(c.tcm(VECMUL, sizes[0]) + c.setup + transfer + c.lat_write,
                  muls + len(sizes) * c.setup + max(c.single(4 * sizes[-1], True), pass2))
    w.kernels += maxes + muls + exp_sum + stream.kernels
    w.estimate = load + exp_sum + out
    return w, lay


def _fields(c: _Cost, w: _Work, rows: int) -> dict[str, Any]:
    """The bounds of ``rows`` repetitions of ``w`` (``rows`` = 1: ``w`` is the whole run)."""
    window = min(c.m, w.channels * c.k)
    return {
        "ddr_read_bytes": rows * w.read,
        "ddr_write_bytes": rows * w.write,
        "ddr_requests": rows * w.requests,
        "dma_bound_cycles": rows * (w.read + w.write) * c.cpb,
        "latency_bound_cycles": c.policy.latency_total(rows * (w.requests - w.write_requests),
                                                       rows * w.write_requests) / window,
        "compute_bound_cycles": rows * (w.kernels + w.descriptors * c.setup),
        "estimate_cycles": rows * w.estimate,
        "outstanding_requests": window,
        "channels_used": w.channels,
    }


def _seed_rows(model: Any, variant: str, rows: int, cols: int) -> dict[str, Any]:
    """The seed's variants on ``rows`` rows: one row's bounds, ``rows`` times (each row's
    lower bounds count only what that row must do, so their sum is still a lower bound)."""
    mem = model.host_memory
    if variant == "direct" and rows > 1 and mem.cached and model.dcache.capacity_bytes:
        # through the data cache, short rows share lines: the rows in one closed form
        out = bounds(model, variant, cols, rows)
        out["rows"] = rows
        return out
    one = bounds(model, variant, cols)
    if rows == 1:
        return one
    out = {k: rows * one[k] for k in _ADDITIVE}
    out.update({k: v for k, v in one.items() if k not in ORDER and k != "regime"})
    out["rows"] = rows
    return out


def _new_variant(model: Any, variant: str, rows: int, cols: int) -> dict[str, Any]:
    """A new schedule's fields on ``rows`` rows of ``cols``, before the binding bound."""
    c = _Cost(model)
    if variant in ("online", "multibuffer"):
        w = _online(c, cols, "split" if variant == "multibuffer" else "pingpong")
        return _fields(c, w, rows) | {"tiles_per_pass": Tiling.of(cols, tile_elems(model)).count}
    if variant == "resident":
        w, lay = _resident(c, cols)
        return _fields(c, w, rows) | {"resident_bytes": rows * 4 * lay.resident,
                                      "streamed_bytes": rows * 4 * lay.streamed}
    if variant != "rows":
        raise ValueError(f"softmax has no variant {variant!r}")
    per_tile = rows_per_tile(model.softmax.tile_bytes, cols)
    if not per_tile:
        return _fields(c, _online(c, cols, "pingpong"), rows) | {"rows_per_tile": per_tile}
    w = _Work()
    tiles = Tiling.of(rows * cols, per_tile * cols)
    w.stream_pass(c, tiles, lambda s: (s // cols) * c.row(cols), True, "pingpong")
    return _fields(c, w, 1) | {"tiles": tiles.count, "rows_per_tile": per_tile}


def variant_bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """Traffic, lower bounds and estimate of ``variant`` on ``shape`` (``(n,)`` or
    ``(rows, cols)``), in closed form."""
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape
    if variant in ("pingpong", "direct"):
        out = _seed_rows(model, variant, rows, cols)
        if rows == 1:
            return out
    else:
        out = _new_variant(model, variant, rows, cols)
    bind(out)
    return ordered(out)
