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


def _live_blocks(monkeypatch, cls, allocate: str, free: str, counts=lambda a, kw: True
                 ) -> dict[tuple[int, int], int]:
    """The blocks ``cls.<allocate>`` has handed out and ``cls.<free>`` not taken back, by
    (memory, address): their sizes (those ``counts(args, kwargs)`` picks)."""
    live: dict[tuple[int, int], int] = {}
    give, take = getattr(cls, allocate), getattr(cls, free)

    def giving(self, size_bytes, *args, **kw):
        ptr = give(self, size_bytes, *args, **kw)
        if counts(args, kw):
            live[(id(ptr.mem), ptr.addr)] = size_bytes
        return ptr

    def taking(self, ptr):
        take(self, ptr)
        live.pop((id(ptr.mem), ptr.addr), None)

    monkeypatch.setattr(cls, allocate, giving)
    monkeypatch.setattr(cls, free, taking)
    return live


@pytest.mark.parametrize("op, variant", RUNS, ids=[f"{o}-{v}" for o, v in RUNS])
def test_every_op_frees_what_it_allocates(op, variant, monkeypatch):
    live = _live_blocks(monkeypatch, tcm.TileManager, "allocate", "free")
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

    def placed_by_an_op(args, kw):
        what = kw.get("what", args[1] if len(args) > 1 else "buffer")
        return what in ("copy source", "copy destination", "fc weights")

    live = _live_blocks(monkeypatch, Memory, "add_block", "free_block", placed_by_an_op)
    model = load_model(model_name).with_overrides(overrides)
    simulate(model, op, variant, data=True, **({"n": 4096} if op == "copy" else
                                                 {"shape": (16, 64)}))
    assert not live
