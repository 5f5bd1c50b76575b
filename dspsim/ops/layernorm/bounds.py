"""Closed-form traffic and lower bounds of LayerNorm's two variants.

``L`` = ``ddr.latency_cycles``, ``B`` = ``ddr.bytes_per_cycle``, ``b`` = ``idma.burst_bytes``,
``k`` = ``idma.max_outstanding``, ``m`` = ``ddr.max_outstanding``, ``S`` = ``idma.setup_cycles``.

- **DMA-bound**: the bytes that must cross the port before the op stops its timer / ``B``.
- **Latency-bound**: every request holds a port slot for at least ``L``. Direct: the core's
  vector loads are dependent (it stalls on each), one at a time. Ping-pong: the iDMA bursts, at
  most ``min(m, 2k)`` in flight.
- **Compute-bound**: the kernels' issue cycles in TCM (``LoopShape.tcm_cycles`` per row) plus
  ``S`` per descriptor the core programs.

``lower_bound_cycles`` is the largest; ``estimate_cycles`` adds to it what no overlap can hide:
direct, the sum of the kernels' closed-form DDR walks (exact for the core alone on the port up
to the hand-over of posted stores between calls); ping-pong, the first tile's input copy and
the last tile's compute and output copy around the binding resource.
"""

from __future__ import annotations

from typing import Any

from dspsim.hw.port import transfer_cycles
from dspsim.kernels.layernorm import VECNORM, VECSUMSQ_DEV
from dspsim.kernels.shapes import VECSUM, ddr_call_sequence
from dspsim.ops.layernorm.program import rows_per_tile

# each row: (shape, stores to DDR in the direct variant)
_ROW_CALLS = ((VECSUM, False), (VECSUMSQ_DEV, False), (VECNORM, True))


def _row_compute(model: Any, cols: int) -> float:
    return sum(shape.tcm_cycles(cols, model.core) for shape, _ in _ROW_CALLS)


def bounds(model: Any, variant: str, shape: tuple[int, int]) -> dict[str, Any]:
    rows, cols = shape
    core, ddr, idma = model.core, model.ddr, model.idma
    lat, cpb = ddr.latency_cycles, 1.0 / ddr.bytes_per_cycle
    tensor = 4 * rows * cols
    kernels = rows * _row_compute(model, cols)
    if variant == "direct":
        walk = ddr_call_sequence(_ROW_CALLS, cols, core, lat, cpb, ddr.max_outstanding, rows)
        out = {
            "ddr_read_bytes": walk.read_bytes,
            "ddr_write_bytes": walk.write_bytes,
            "dma_bound_cycles": walk.must_cross_bytes * cpb,
            "latency_bound_cycles": walk.loads * lat,  # dependent loads, one at a time
            "compute_bound_cycles": kernels,
        }
        estimate = walk.cycles
    else:
        per_tile = rows_per_tile(model.layernorm.tile_bytes, cols)
        tiles = -(-rows // per_tile) if per_tile else 0
        last_rows = rows - (tiles - 1) * per_tile if tiles else 0
        burst = idma.burst_bytes
        requests = 2 * -(-4 * per_tile * cols // burst) * (tiles - 1) \
            + 2 * -(-4 * last_rows * cols // burst)
        # the frame waits for the last output only: the other buffer's may still be in flight
        unwaited = 4 * per_tile * cols if tiles >= 2 else 0
        descriptors = 2 * tiles
        window = min(ddr.max_outstanding, (1 if tiles == 1 else 2) * idma.max_outstanding)
        out = {
            "ddr_read_bytes": tensor,
            "ddr_write_bytes": tensor,
            "dma_bound_cycles": (2 * tensor - unwaited) * cpb,
            "latency_bound_cycles": (requests - -(-unwaited // burst)) * lat / window,
            "compute_bound_cycles": kernels + descriptors * idma.setup_cycles,
            "tiles": tiles,
            "rows_per_tile": per_tile,
        }
        one = min(idma.max_outstanding, ddr.max_outstanding)
        first_in = transfer_cycles(4 * per_tile * cols, burst, one, lat, cpb)
        last_out = transfer_cycles(4 * last_rows * cols, burst, one, lat, cpb)
        last_compute = last_rows * _row_compute(model, cols)
        steady = max(out["dma_bound_cycles"], out["latency_bound_cycles"],
                     out["compute_bound_cycles"])
        estimate = steady + (first_in + last_compute + last_out if tiles > 1 else
                             first_in + last_compute + last_out - steady + kernels)
    named = {k: out[f"{k}_bound_cycles"] for k in ("dma", "latency", "compute")}
    binding = max(named, key=named.get)
    out["lower_bound_cycles"] = named[binding]
    out["binding_bound"] = binding
    out["estimate_cycles"] = max(estimate, named[binding])
    return out
