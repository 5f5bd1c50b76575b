"""A run that uses two memories at once, for the analyses' tests: J6 plus an SRAM, and an op
whose handler copies a block from SRAM into TCM on iDMA channel 0 while the core reads its
input from DDR directly (stalling on DDR), then reads a block of SRAM directly (stalling on
SRAM) and waits for the copy.

``registered()`` makes the op runnable for the duration of a ``with`` (and removes it after);
a model that knows its parameters must be loaded inside it.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from dspsim import load_model
from dspsim.ops import OPS, register_op
from dspsim.ops.softmax import PARAMS, Softmax
from dspsim.schema import OP_SCHEMAS, OpSchema

SRAM = """base = "j6"
[sram]
base_address = 0x20000000
size_bytes = 0x00400000
latency_cycles = 20.0
bytes_per_cycle = 8.0
max_outstanding = 16
"""

NAME = "twomem"
COPY_BYTES = 16384  # SRAM -> TCM on channel 0
SRAM_READ_ELEMENTS = 2048  # the core's direct read of SRAM


class TwoMemories(Softmax):
    name = NAME
    doc = "test op: an SRAM -> TCM copy while the core reads DDR, then SRAM, directly"
    cmd = 0x7FF2
    document = None
    params = OpSchema(NAME, tuple(dataclasses.replace(k, name=f"{NAME}.{k.short}")
                                  for k in PARAMS.keys))

    def handler(self, dsp, input, output, tm):
        ptr = dsp.ddr.load_struct(input)
        n = ptr.data_size >> 2
        src = dsp.hb_dsp_mem_map(ptr.input, ptr.data_size)
        sram = dsp.memory("sram")
        block = sram.add_block(COPY_BYTES)
        dst = tm.allocate(COPY_BYTES, 0, 128)
        start = dsp.TIME_STAMP()
        with dsp.pass_("mixed"):
            copy = yield from dsp.core.idma_copy(0, block, dst, COPY_BYTES, "copy_in")
            yield from dsp.core.call("vecmaxf", n, src)
            yield from dsp.core.call("vecmaxf", SRAM_READ_ELEMENTS, block)
            yield from dsp.core.idma_wait(copy, "wait_in")
        dsp.PROF(start, dsp.TIME_STAMP())

    def output_summary(self, out, x, params):
        return {}

    def bounds(self, model, variant, shape):
        return {}


def model(tmp_path):
    p = tmp_path / "j6_sram.toml"
    p.write_text(SRAM)
    return load_model(p)


@contextlib.contextmanager
def registered():
    """The op registered inside the ``with`` (already registered: left so)."""
    if NAME in OPS:
        yield OPS[NAME]
        return
    op = register_op(TwoMemories())
    try:
        yield op
    finally:
        OPS.pop(op.name, None)
        OP_SCHEMAS.pop(op.name, None)


N = 20_000


@pytest.fixture(scope="module")
def two_memories_run(tmp_path_factory):
    """(model file, model, the two-memory run) with the two-memory op registered: the run the
    test_memories_* files share."""
    from dspsim.run import simulate

    d = tmp_path_factory.mktemp("two")
    with registered():
        m = model(d)
        r = simulate(m, op=NAME, variant="direct", n=N, data=False, trace=True, port_log=True)
        yield d / "j6_sram.toml", m, r
