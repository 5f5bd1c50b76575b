"""``memcpy`` on the core: one vector load and one vector store per iteration.

As a vectorising compiler (or a library memcpy) makes it between aligned buffers: per
iteration one aligned vector load (``IVP_LV2NX8_IP`` on a Vision core, ``AE_L128_IP`` on a
HiFi5) and one store of the same width, the last variable-length (``..._XP`` forms); no priming
load; ``II = max(ceil(2 / load_store_units), 1)``. It counts 32-bit words like every kernel
(``dspsim run --op kernel --variant memcpy --n WORDS``; a ``copy`` of ``n`` bytes copies
:func:`memcpy_words`), copying bytes exactly.
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
    """The 32-bit words a copy of ``nbytes`` moves, the last whole (up to 3 bytes past ``nbytes``
    read and written; the copy op's buffers are rounded up to a word)."""
    return -(-nbytes // 4)


register(Kernel("memcpy", MEMCPY, _memcpy, writes=True, elementwise=True, unit="32-bit words"))
