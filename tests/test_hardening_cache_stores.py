"""Stalls through the data cache are booked to the memory that held the core.

On ``ameba_hifi5`` (PSRAM and SRAM behind the cache), random ops, variants, sizes, cache
geometries and write policies: the cycles the core stalled on each memory sum to the stalls
of its kernel calls (the trace's ``ddr_stall_cycles``), a memory with no traffic has no stall,
and each memory is booked exactly the waits for its own lines (the cache's ``access`` returns,
recorded per memory); with ``write_through`` the rest (waits for the write buffer) lands on a
memory that was written.
"""

from __future__ import annotations

from collections import defaultdict
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim import DspsimInputError, load_model, simulate
from dspsim.hw.dcache import DataCache
from dspsim.ticks import cycles

MEMORIES = ("host", "psram", "sram", "tcm")


@st.composite
def cache_runs(draw: st.DrawFn) -> tuple[str, str, dict, dict]:
    over = {"dcache.write_policy": draw(st.sampled_from(["write_back", "write_through"])),
            "dcache.prefetch_next_line": draw(st.booleans()),
            "dcache.capacity_bytes": draw(st.sampled_from([1024, 4096, 32768])),
            "dcache.ways": draw(st.sampled_from([1, 2, 4]))}
    if over["dcache.write_policy"] == "write_through":  # else no store is posted
        over["core.write_buffer_entries"] = draw(st.sampled_from([1, 8, 32]))
    op = draw(st.sampled_from(["copy", "softmax", "layernorm", "rmsnorm", "fc"]))
    if op == "copy":
        src = draw(st.sampled_from(MEMORIES))
        dst = draw(st.sampled_from([m for m in MEMORIES if not m == src == "tcm"]))
        over.update({"copy.src": src, "copy.dst": dst, "copy.timed_prologue": False})
        return op, draw(st.sampled_from(["memcpy", "idma"])), over, {
            "n": draw(st.integers(4, 6000))}
    if op == "softmax":
        return op, "direct", over, {"n": draw(st.integers(1, 3000))}
    if op == "fc":
        over["fc.weights"] = draw(st.sampled_from(["host", "sram"]))
        return op, draw(st.sampled_from(["direct", "pingpong"])), over, {
            "shape": (draw(st.integers(1, 40)), draw(st.integers(1, 160)))}
    # (the row-wise ping-pong needs two channels: not this platform's)
    return op, "direct", over, {"shape": (draw(st.integers(1, 8)), draw(st.integers(1, 200)))}


def _run_recording_cache_waits(model, op, variant, kw):
    """The run, and per memory the cycles the core waited for that memory's lines (the cache
    takes and returns ticks: summed in ticks, reported in cycles). The reference engine: every
    access goes through the cache (the elided one books runs of them, equal to it)."""
    waits: dict[str, int] = defaultdict(int)
    access = DataCache.access

    def recorded(self, now, mem, addr, nbytes, write, requester):
        ready = access(self, now, mem, addr, nbytes, write, requester)
        waits[mem.name] += max(0, ready - now)
        return ready

    with mock.patch.object(DataCache, "access", recorded):
        r = simulate(model, op, variant, trace=True, data=False, elide=False, **kw)
    return r, defaultdict(float, {m: cycles(w) for m, w in waits.items()})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cache_runs())
def test_each_stall_lands_on_the_memory_that_held_the_core(case):
    op, variant, over, kw = case
    model = load_model("ameba_hifi5").with_overrides(over)
    try:  # the model's keys are right: only the run's shape or copy may be refused
        r, waits = _run_recording_cache_waits(model, op, variant, kw)
    except DspsimInputError:  # a shape or copy the platform refuses
        return
    t = r.trace_table
    total = float(t["ddr_stall_cycles"][t["kind"] == "compute"].sum())
    booked = {m: r.stall_cycles[m] for m in r.memories}
    # each booked figure is rounded to a whole cycle on its own
    assert sum(booked.values()) == pytest.approx(total, abs=len(booked))
    for m, s in booked.items():
        p = r.memories[m]
        if p["read_bytes"] + p["write_bytes"] == 0:
            assert s == 0, (m, booked)
        assert s >= round(waits[m]) - 1, (m, booked, dict(waits))
        if over["dcache.write_policy"] == "write_back" or p["write_bytes"] == 0:
            assert s == pytest.approx(waits[m], abs=1), (m, booked, dict(waits))


@pytest.mark.parametrize("src, dst", [("tcm", "sram"), ("tcm", "host"), ("sram", "host"),
                                      ("host", "sram")])
def test_a_store_miss_is_the_stores_memorys_stall(src, dst):
    """memcpy through a write-back cache: the store misses fetch the destination's lines, so
    the destination's memory holds the core for them (from TCM: every stall is its)."""
    model = load_model("ameba_hifi5").with_overrides(
        {"copy.src": src, "copy.dst": dst, "copy.timed_prologue": False,
         "dcache.prefetch_next_line": False})
    r, waits = _run_recording_cache_waits(model, "copy", "memcpy", {"n": 8192})
    name = {"host": "psram"}.get(dst, dst)
    assert waits[name] > 0
    assert r.stall_cycles[name] == round(waits[name])
    if src == "tcm":
        assert sum(r.stall_cycles[m] for m in r.memories) == r.stall_cycles[name]
