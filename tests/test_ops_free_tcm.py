"""Every op's handler leaves the core's DataRAMs as it found them: what it allocates from the
tile manager it frees before it returns. A platform runs task after task on a core while
another core keeps it busy (a workload's episode), so a buffer left behind fills the DataRAMs
until a later task cannot allocate."""

from __future__ import annotations

import pytest

from dspsim import load_model
from dspsim.hw import tcm
from dspsim.ops import get_op, op_names
from dspsim.run import simulate
from dspsim.study.workload import run_workload
from tests.workload_helpers import stream_spec, workload

RUNS = [(op, v) for op in op_names() for v in get_op(op).variants]


def _size(op: str) -> dict:
    return {"n": 2000} if get_op(op).ndim == 1 else {"shape": (4, 64)}


@pytest.mark.parametrize("op, variant", RUNS, ids=[f"{o}-{v}" for o, v in RUNS])
def test_every_op_frees_what_it_allocates(op, variant, monkeypatch):
    live: dict[tuple[int, int], int] = {}
    allocate, free = tcm.TileManager.allocate, tcm.TileManager.free

    def allocating(self, size_bytes, colour, alignment):
        ptr = allocate(self, size_bytes, colour, alignment)
        live[(id(ptr.mem), ptr.addr)] = size_bytes
        return ptr

    def freeing(self, ptr):
        free(self, ptr)
        del live[(id(ptr.mem), ptr.addr)]

    monkeypatch.setattr(tcm.TileManager, "allocate", allocating)
    monkeypatch.setattr(tcm.TileManager, "free", freeing)
    simulate(load_model(), op, variant, data=True, **_size(op))
    assert not live, f"{op} {variant} left {sorted(live.values())} bytes allocated"


@pytest.mark.parametrize("op, variant, shape", [
    ("kernel", "vecsum", [1, 6000]), ("fc", "pingpong", [512, 768]), ("copy", "idma", [65536]),
    ("copy", "memcpy", [65536])])
def test_many_tasks_on_a_core_while_another_keeps_the_platform_busy(op, variant, shape):
    # 40 tasks on core1 in one episode (core0's long op): 40 x the op's buffers > a DataRAM
    model = load_model().with_overrides({"core.count": 2})
    wl = workload(stream_spec("long", (400_000, 10_000.0, 1), backend="core0"),
                  stream_spec("s", (0, 1.0, 40), op=op, variant=variant, shape=shape,
                              backend="core1"))
    run = run_workload(wl, model)
    assert (run.tasks.core_end_cycle > 0).all() and run.episodes < 40


@pytest.mark.parametrize("model_name, overrides, op, variant", [
    ("ameba_hifi5", {"copy.src": "psram", "copy.dst": "tcm"}, "copy", "idma"),
    ("ameba_hifi5", {"copy.src": "sram", "copy.dst": "psram"}, "copy", "memcpy"),
    ("ameba_hifi5", {"fc.weights": "sram"}, "fc", "direct"),
    ("ameba_hifi5", {"fc.weights": "psram"}, "fc", "pingpong"),
    ("j6", {"copy.src": "ddr", "copy.dst": "ddr"}, "copy", "idma")])
def test_ops_free_the_blocks_they_place_in_a_memory(model_name, overrides, op, variant,
                                                    monkeypatch):
    from dspsim.hw.memory import Memory

    live: set[tuple[int, int]] = set()
    add, free = Memory.add_block, Memory.free_block

    def adding(self, size_bytes, alignment=128, what="buffer"):
        ptr = add(self, size_bytes, alignment, what)
        if what in ("copy source", "copy destination", "fc weights"):
            live.add((id(self), ptr.addr))
        return ptr

    def freeing(self, ptr):
        free(self, ptr)
        live.remove((id(self), ptr.addr))

    monkeypatch.setattr(Memory, "add_block", adding)
    monkeypatch.setattr(Memory, "free_block", freeing)
    model = load_model(model_name).with_overrides(overrides)
    simulate(model, op, variant, data=True, **({"n": 4096} if op == "copy" else
                                                 {"shape": (16, 64)}))
    assert not live
