"""The int8 fully connected layer (RPC command 0x8004): ``y = requant(W x + b)`` as the HiFi
NN library's ``xa_nn_fully_connected_sym8sxasym8s_asym8s`` computes it.

``--shape OUT,IN``: weights ``[OUT, IN]`` int8, input ``[IN]`` int8, bias ``[OUT]`` int32,
output ``[OUT]`` int8, checked bit for bit against TFLite's integer reference
(``reference.py``, with the host buffer's layout). Values from a fixed seed, or ``--input
F.npz`` (``weights``, ``input``, ``bias``). ``program.py`` is the example's C, ``bounds.py``
the closed forms; the kernel is :mod:`dspsim.kernels.fc_s8`. The ``[fc]`` table's defaults are
the AmebaLite SDK example's (fact): ``input_zero_bias = 0``, ``out_multiplier = 1776441054``,
``out_shift = -9``, ``out_zero_bias = -128``, chunks of 128 rows; the weights in the host's
memory (the example's PSRAM).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dspsim.arrays import ddr_window_bytes
from dspsim.errors import DspsimInputError
from dspsim.kernels.fc_s8 import padded_bytes
from dspsim.ops.base import HOST, NO_BOUND, TCM, Bounds, Op, Proc, check_memory_key  # noqa: I001
from dspsim.ops.fc import bounds as _bounds
from dspsim.ops.fc import reference as fc_ref
from dspsim.ops.fc.program import FC_CMD, hb_dsp_fc, hbDSPFcParam
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
        d = _bounds.bounds(model, self.check_variant(variant), self.shape_of(shape=shape))
        # the traffic: every memory's together (each memory's in traffic_bytes); the
        # weights' memory bound (direct) is the study's port bound
        total = {way: sum(v for k, v in d["traffic_bytes"].items() if k.endswith(way))
                 for way in ("_read", "_write")}
        return Bounds.of({**NO_BOUND, "dma_bound_cycles": d.get("memory_bound_cycles", 0.0),
                          **d, "ddr_read_bytes": total["_read"],
                          "ddr_write_bytes": total["_write"]})


FC = register_op(FullyConnected())
