"""``memcpy`` on the core: one vector load and one vector store per iteration.

The loop a vectorising compiler (or a hand-written library memcpy) makes of a copy between
aligned buffers: per iteration one aligned vector load (``IVP_LV2NX8_IP`` on a Vision core,
``AE_L128_IP`` on a HiFi5) and one aligned vector store of the same width, the last iteration
variable-length (``..._XP`` forms with a byte count). No priming load: both buffers are aligned
to the vector. ``II = max(ceil(2 / load_store_units), 1)``.

Against TCM the loop is pipelined (one timeout per call); from an uncached memory every vector
load stalls for its round trip; from a cached one (``[dcache]``, ``cached = true``) the core
pays per line missed, so a copy from PSRAM through the data cache runs at what the line fills
deliver (:mod:`dspsim.hw.dcache`).

The kernel counts in 32-bit words like every kernel of the core (``n`` words = ``4 n``
bytes; ``dspsim run --op kernel --variant memcpy --n WORDS``); the ``copy`` op's memcpy of
``n`` bytes copies :func:`memcpy_words` words. The bytes are copied exactly (as bytes, never
as floats).
"""

from __future__ import annotations

import numpy as np

from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import LoopShape
from dspsim.kernels.toolkit import one_vector_variable_segments

MEMCPY = LoopShape(
    "memcpy", table_loads=0, alu_ops=0,
    data_loads=1,  # one aligned vector load
    stores=1,  # one aligned vector store
    segments=one_vector_variable_segments,
    reduction_ops=lambda lanes: 0,
    priming_loads=0,  # aligned buffers: no alignment register to prime
)


def _memcpy(src: np.ndarray, dst: np.ndarray, lanes: int) -> None:
    dst.view(np.uint8)[...] = src.view(np.uint8)


def memcpy_words(nbytes: int) -> int:
    """The 32-bit words a copy of ``nbytes`` moves: the last one whole (up to 3 bytes past
    ``nbytes`` are read and written; the copy op's buffers are rounded up to a word)."""
    return -(-nbytes // 4)


MEMCPY_KERNEL = register(Kernel("memcpy", MEMCPY, _memcpy, writes=True, elementwise=True,
                                unit="32-bit words"))
