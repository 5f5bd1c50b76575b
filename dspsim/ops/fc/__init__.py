"""The int8 fully connected layer (RPC command 0x8004): ``y = requant(W x + b)`` as the HiFi
NN library's ``xa_nn_fully_connected_sym8sxasym8s_asym8s`` computes it.

``--shape OUT,IN``: weights ``[OUT, IN]`` int8, input ``[IN]`` int8, bias ``[OUT]`` int32,
output ``[OUT]`` int8, checked bit for bit against TFLite's integer reference
(``reference.py``, with the host buffer's layout). Values from a fixed seed, or ``--input
F.npz`` (``weights``, ``input``, ``bias``). ``program.py`` is the example's C; the kernel is
:mod:`dspsim.kernels.fc_s8`. The ``[fc]`` table's defaults are the AmebaLite SDK example's
(fact): ``input_zero_bias = 0``, ``out_multiplier = 1776441054``, ``out_shift = -9``,
``out_zero_bias = -128``, chunks of 128 rows; the weights in the host's memory (the example's
PSRAM).

The closed forms (:func:`fc_bounds`): ``K(r)`` the kernel on ``r`` rows in TCM; for the
weights' memory (its request policy, :mod:`dspsim.hw.policy`) ``L`` its latency, ``B`` its bytes
per cycle. ``pingpong``: the example's loop on chunk fetches and kernels (exact when the channel
is alone on the port). ``direct``: ``K(OUT)`` from TCM; through the data cache, line by line (a
prefetched line past the end may fill after the timer stops); from an uncached memory the
walk's closed form. Traffic (``traffic_bytes``, keyed as a run's ``bytes``) is exact.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any

import numpy as np

from dspsim.arrays import ddr_window_bytes
from dspsim.errors import DspsimInputError
from dspsim.hw.policy import engine_paced_cycles
from dspsim.kernels.fc_s8 import FC_S8, groups, padded_bytes
from dspsim.kernels.shapes import ddr_call_sequence
from dspsim.ops.base import (  # noqa: I001
    HOST,
    NO_BOUND,
    TCM,
    Bounds,
    Op,
    Proc,
    check_memory_key,
    memory_name,
    memory_of,
)
from dspsim.ops.fc import reference as fc_ref
from dspsim.ops.fc.program import FC_CMD, hb_dsp_fc, hbDSPFcParam
from dspsim.ops.fc.reference import WEIGHTS_OFFSET
from dspsim.ops.registry import register_op
from dspsim.schema import Key, OpSchema

PARAMS = OpSchema(
    "fc",
    (
        Key("fc.input_zero_bias", int, "added to every input before the multiply (TFLite's "
            "input_offset, minus the input zero point)", default=0, lo=-127, hi=128),
        Key("fc.out_multiplier", int, "requantization multiplier (Q31)", default=1776441054,
            lo=0, hi=(1 << 31) - 1),
        Key("fc.out_shift", int, "requantization shift: > 0 left before the multiply, < 0 a "
            "rounding right shift after it", default=-9, lo=-31, hi=30),
        Key("fc.out_zero_bias", int, "added to the requantized value before the clamp to int8 "
            "(the output zero point)", default=-128, lo=-128, hi=127),
        Key("fc.tile_rows", int, "pingpong: rows of weights fetched per chunk (each chunk's "
            "buffer must fit a DataRAM)", default=128, lo=1, hi=1 << 20, unit="rows"),
        Key("fc.weights", str, "where the weights live: host (the host's memory, host.memory), "
            "a memory of the model, or tcm (direct only: a DataRAM)", default=HOST),
    ),
    check=lambda p, model: check_memory_key("fc.weights", p.weights, model),
)



def _check_chunks_fit(tile: int, in_depth: int, size: str, free: int, small: int) -> None:
    """Refuse chunks of ``tile`` rows (read in groups of 4) that do not fit a DataRAM's free
    space each, or the DataRAMs both with the input, bias and output (``small`` bytes)."""
    buf = padded_bytes(tile, in_depth)
    # largest chunk: one DataRAM's free space, and 2 (chunk + 128) + small <= 2 free
    rows = max(0, min(free, (2 * free - small) // 2 - 128)) // (4 * in_depth) * 4
    read = f"{tile} rows" if tile % 4 == 0 else f"{tile} rows (read as {buf // in_depth})"
    allowed = f"allowed: fc.tile_rows up to {rows}" if rows else \
        "allowed: a smaller IN (a group of 4 rows must fit beside the input, bias and output)"
    if buf > free:
        raise DspsimInputError(
            f"fc pingpong on {size}: a chunk of {read} x {in_depth} int8 ({buf:,} bytes) "
            f"does not fit a DataRAM's free space ({free:,} bytes); {allowed}")
    if 2 * (buf + 128) + small > 2 * free:
        raise DspsimInputError(
            f"fc pingpong on {size}: the chunks of {read} and the input, bias and output "
            f"({2 * (buf + 128) + small:,} bytes with their 128-byte alignment) do not fit "
            f"the DataRAMs ({2 * free:,} bytes); {allowed}")

class FullyConnected(Op):
    name = "fc"
    doc = "int8 fully connected y = requant(W x + b), TFLite integer semantics; --shape OUT,IN"
    cmd = FC_CMD
    variants = {
        "pingpong": "the SDK example: chunks of fc.tile_rows rows fetched by one iDMA channel in "
                    "ring mode into two DataRAMs, the first alone, then fetch-next / "
                    "compute-current",
        "direct": "one kernel call over all rows, the weights read from their memory (through "
                  "the data cache where it is cached)",
    }
    default_variant = "pingpong"
    params = PARAMS
    ndim = 2
    default_shape = (512, 768)
    size_unit = "weights"

    # ------------------------------------------------------------------ values
    def input_bytes(self, shape: tuple[int, ...]) -> int:
        return fc_ref.layout(shape)["bytes"]

    def output_bytes(self, shape: tuple[int, ...]) -> int:
        return -(-int(shape[0]) // 4) * 4

    def window_bytes(self, shape: tuple[int, ...]) -> int:
        """The host's input buffer (weights, input, bias) and its int8 output, each on the
        host's 4096-byte boundary, and the parameter block."""
        block = ddr_window_bytes(0)  # the parameter block
        arrays = (self.input_bytes(shape), self.output_bytes(shape))
        return sum((ddr_window_bytes(nbytes) - block) // 2 for nbytes in arrays) + block

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return fc_ref.pack(fc_ref.default_values(tuple(shape)))

    def check_input(self, x: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        """``x``: a mapping of ``weights``, ``input``, ``bias`` (checked), or a buffer packed
        by :func:`dspsim.ops.fc.reference.pack`."""
        if isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 1 and x.size >= 8:
            x = fc_ref.unpack(x)
        values = fc_ref.check_values(x)
        return fc_ref.pack(values), tuple(values["weights"].shape)

    def read_input_file(self, path: str) -> dict[str, np.ndarray]:
        return fc_ref.read_npz(path)

    def write_input(self, memory: Any, ptr: Any, x: np.ndarray, shape: tuple[int, ...]) -> None:
        memory.write(ptr.addr, x)

    def host_array(self, memory: Any, ptr: Any, shape: tuple[int, ...], output: bool
                   ) -> np.ndarray:
        if output:
            return memory.read(ptr.addr, int(shape[0])).view(np.int8)
        return memory.read(ptr.addr, self.input_bytes(shape))

    # ------------------------------------------------------------------ the run
    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 1, "banks": 2} if variant == "pingpong" else {"channels": 0, "banks": 1}

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        out_depth, in_depth = shape
        p = model.fc
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        size = f"{out_depth}x{in_depth}"
        small = 4 * out_depth + 2 * (-(-max(in_depth, out_depth) // 128) * 128) + 3 * 128
        weights = padded_bytes(out_depth, in_depth)
        if variant == "pingpong":
            if p.weights == TCM:
                raise DspsimInputError("fc pingpong fetches the weights from a memory: "
                                       "fc.weights = tcm is for the direct variant")
            _check_chunks_fit(min(p.tile_rows, out_depth), in_depth, size, free, small)
        else:
            need = small + (weights if p.weights == TCM else 0)
            if need > free * model.tcm.banks:
                raise DspsimInputError(
                    f"fc direct on {size}: {'the weights, ' if p.weights == TCM else ''}the "
                    f"input, bias and output ({need:,} bytes) do not fit the DataRAMs")
            if p.weights == TCM and weights > free:
                raise DspsimInputError(
                    f"fc direct on {size} with fc.weights = tcm: the weights "
                    f"({weights:,} bytes) do not fit a DataRAM ({free:,} bytes)")
        if p.weights not in (HOST, TCM):
            mem = model.memories[p.weights]
            if weights > mem.size_bytes:
                raise DspsimInputError(f"fc on {size}: the weights do not fit {p.weights} "
                                       f"({mem.size_bytes:,} bytes)")

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        return hbDSPFcParam(int(shape[0]), int(shape[1]), input_addr, int(variant == "pingpong"))

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        return hb_dsp_fc(dsp, input, output, tm)

    # ------------------------------------------------------------------ checks
    def reference(self, x: Any, params: Any) -> np.ndarray:
        values = fc_ref.unpack(x) if isinstance(x, np.ndarray) else fc_ref.check_values(x)
        return fc_ref.reference_of(values, params)

    def output_summary(self, out: np.ndarray, x: Any, params: Any) -> dict[str, Any]:
        """Against TFLite's integer reference, element by element: how many differ (0: bit
        for bit), and a digest of the output (equal digests: equal outputs)."""
        ref = self.reference(x, params)
        out = np.asarray(out)
        if out.shape != ref.shape or out.dtype != np.int8:  # not an output of this input
            return {"elements": int(ref.size), "mismatch_count": int(ref.size),
                    "exact": False, "sum": None, "sha256": None}
        wrong = int(np.count_nonzero(out != ref))
        return {"elements": int(ref.size), "mismatch_count": wrong, "exact": wrong == 0,
                "sum": int(out.sum(dtype=np.int64)),
                "sha256": hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()}

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> Bounds:
        d = fc_bounds(model, self.check_variant(variant), self.shape_of(shape=shape))
        # the traffic: every memory's together (each memory's in traffic_bytes); the
        # weights' memory bound (direct) is the study's port bound
        total = {way: sum(v for k, v in d["traffic_bytes"].items() if k.endswith(way))
                 for way in ("_read", "_write")}
        return Bounds.of({**NO_BOUND, "dma_bound_cycles": d.get("memory_bound_cycles", 0.0),
                          **d, "ddr_read_bytes": total["_read"],
                          "ddr_write_bytes": total["_write"]})


# ----------------------------------------------------------------------------- closed forms
def kernel_cycles(model: Any, rows: int, in_depth: int) -> int:
    """``K(rows)``: the kernel's cycles on ``rows`` rows of ``in_depth`` in TCM."""
    return groups(rows) * FC_S8.tcm_cycles(in_depth, model.core)


def fc_bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
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


FC = register_op(FullyConnected())
