"""The copy's loop variant (``--variant loop``): a core loop of known cost through the memory
system, in closed form.

On the HiFi5 model with integer costs (``psram.latency_cycles = 15``, 1 byte a cycle, one
request at a time, 128-byte lines, no prefetch, no prologue): a line fill or write-back is
``F = 15 + 128 = 143`` cycles, the loop's fixed cost the core's call overhead ``O`` (one loop
call; the MEMW after it waits for nothing when no store is posted)."""

from __future__ import annotations

import pytest

from dspsim import load_model, simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from tests.test_elision import comparable

LINE, LATENCY = 128, 15
FILL = LATENCY + LINE  # L + line / B, B = 1 byte a cycle
# the HiFi5 model with its PSRAM as a pipelined memory (L = 15, 1 byte a cycle: the closed
# forms below are written for one; the packaged PSRAM's transactions are tested in
# tests/test_transactions_cache.py) and no demand-miss cost beyond the fill
HIFI5 = load_model("ameba_hifi5").with_overrides({
    "psram.protocol": "pipelined", "psram.latency_cycles": LATENCY,
    "psram.bytes_per_cycle": 1.0, "dcache.prefetch_next_line": False,
    "dcache.miss_cycles": 0.0, "copy.prologue_cycles": 0.0})
OVERHEAD = HIFI5.core.call_overhead_cycles
CAPACITY_LINES = HIFI5.dcache.capacity_bytes // LINE


def run(model, n, src, dst, k=4, c=1.0, **settings):
    m = model.with_overrides({"copy.src": src, "copy.dst": dst, "copy.access_bytes": k,
                              "copy.loop_cycles_per_iteration": c, **settings})
    return simulate(m, "copy", "loop", n=n, data=False)


@pytest.mark.parametrize("k, c", [(1, 1.0), (4, 3.0), (32, 2.0)])
def test_tcm_to_tcm_is_iterations_times_their_cycles(k, c):
    """No port: ``(n / K) x C`` and the call overhead, nothing else (the copy's bytes land)."""
    n = 4096
    m = HIFI5.with_overrides({"copy.src": "tcm", "copy.dst": "tcm", "copy.access_bytes": k,
                              "copy.loop_cycles_per_iteration": c})
    r = simulate(m, "copy", "loop", n=n)
    assert r.cycles == OVERHEAD + n // k * c
    assert r.output["exact"]
    assert get_op("copy").bounds(m, "loop", (n,))["lower_bound_cycles"] == r.cycles


@pytest.mark.parametrize("k", [4, 32])
def test_a_lone_blocking_read_miss_is_one_iteration_and_one_line_fill(k):
    r = run(HIFI5, k, "psram", "tcm", k=k, c=7.0)
    assert r.cycles == OVERHEAD + 7 + FILL


@pytest.mark.parametrize("k, c", [(4, 1.0), (16, 5.0), (32, 2.0)])
def test_a_stream_of_reads_pays_every_line_fill_in_turn(k, c):
    n = 16384  # half the cache: nothing evicted
    r = run(HIFI5, n, "psram", "tcm", k=k, c=c)
    assert r.cycles == OVERHEAD + n // k * c + n // LINE * FILL
    assert r.bytes["psram_read"] == n


@pytest.mark.parametrize("allocate, read", [(True, 8192), (False, 0)])
def test_write_allocate_reads_the_line_before_the_store_hits(allocate, read):
    """TCM -> PSRAM: with write-allocate every destination line is read first (n bytes read,
    the stores stay in the cache); without, the stores go to the memory as they are."""
    n = 8192
    r = run(HIFI5, n, "tcm", "psram", **{"dcache.write_allocate": allocate})
    assert r.bytes["psram_read"] == read
    assert r.bytes["psram_write"] == (0 if allocate else n)
    assert get_op("copy").bounds(HIFI5.with_overrides({
        "copy.src": "tcm", "copy.dst": "psram", "dcache.write_allocate": allocate}),
        "loop", (n,))["traffic_bytes"] == r.bytes


def test_write_backs_drained_behind_the_loop_add_no_stall():
    """Twice the cache's lines stored: every line past the cache's evicts a dirty one, whose
    write-back (F) drains on the port while the loop spends ``line / K x C = 32 x 5 = 160 > F``
    cycles on the next line: only the write-allocate fills stall the loop."""
    n = 2 * HIFI5.dcache.capacity_bytes
    r = run(HIFI5, n, "tcm", "psram", k=4, c=5.0)
    assert r.cycles == OVERHEAD + n // 4 * 5 + n // LINE * FILL
    assert r.bytes["psram_write"] == (n // LINE - CAPACITY_LINES) * LINE
    # a loop faster than the write-backs waits for them behind its fills
    assert run(HIFI5, n, "tcm", "psram", k=4, c=4.0).cycles > OVERHEAD + n + n // LINE * FILL


@pytest.mark.parametrize("variant", ["loop", "memcpy"])
@pytest.mark.parametrize("n", [8192, 65536])
def test_flushing_the_destination_adds_its_dirty_lines_write_backs(variant, n):
    """copy.flush_destination: the dirty lines still in the cache (all the destination's up to
    the cache's lines) written back one after another inside the span, F each."""
    settings = {"copy.src": "tcm", "copy.dst": "psram", "copy.loop_cycles_per_iteration": 5.0}
    if variant == "memcpy":
        settings = {"copy.src": "tcm", "copy.dst": "psram"}
        n = min(n, 8192)  # the kernel outruns its write-backs: the cache never evicts here
    m = HIFI5.with_overrides(settings)
    kept = simulate(m, "copy", variant, n=n, data=False)
    flushed = simulate(m.with_overrides({"copy.flush_destination": True}), "copy", variant,
                       n=n, data=False)
    dirty = min(n // LINE, CAPACITY_LINES)
    assert flushed.cycles - kept.cycles == dirty * FILL
    assert flushed.bytes["psram_write"] - kept.bytes["psram_write"] == dirty * LINE
    assert flushed.dcache["dirty_lines"] == 0 and kept.dcache["dirty_lines"] == dirty


@pytest.mark.parametrize("src, dst, settings", [
    ("psram", "sram", {}), ("sram", "psram", {"dcache.write_allocate": False}),
    ("tcm", "psram", {"dcache.prefetch_next_line": True, "copy.flush_destination": True}),
    ("psram", "tcm", {"dcache.capacity_bytes": 4096, "dcache.ways": 1})])
def test_burst_and_tile_fidelity_and_elision_agree(src, dst, settings):
    m = HIFI5.with_overrides({"copy.src": src, "copy.dst": dst, "copy.access_bytes": 32,
                              "copy.loop_cycles_per_iteration": 3.0, **settings})
    runs = [simulate(m, "copy", "loop", n=40_000 // 32 * 32, fidelity=f, elide=e, trace=True,
                     port_log=True)
            for f, e in (("burst", False), ("burst", True), ("tile", True), ("tile", False))]
    assert runs[0].output["exact"]
    assert all(comparable(r) == comparable(runs[0]) for r in runs[1:])


def test_an_uncached_memory_takes_a_request_per_access():
    """J6's DDR, uncached: every load a blocking round trip of K bytes; the stores of a copy
    back into DDR posted, the bytes exact each way."""
    j6 = load_model()
    r = run(j6, 4096, "ddr", "tcm", k=8, c=2.0)
    per_load = j6.memories["ddr"].policy.request_cycles(8, False)
    assert r.bytes["ddr_read"] == 4096
    assert r.cycles == pytest.approx(OVERHEAD_J6(j6) + 512 * (2.0 + per_load), abs=0.5)


def OVERHEAD_J6(model):  # noqa: N802 - read as a constant
    return model.core.call_overhead_cycles


@pytest.mark.parametrize("settings, words", [
    ({"copy.access_bytes": 8}, "n must be a whole number"),
    ({"copy.access_bytes": 32, "core.lanes_f32": 2}, "copy.access_bytes = 32"),
])
def test_a_loop_the_core_cannot_run_is_one_line(settings, words):
    m = HIFI5.with_overrides({"copy.src": "tcm", "copy.dst": "tcm", **settings})
    with pytest.raises(DspsimInputError, match=words):
        simulate(m, "copy", "loop", n=100, data=False)


@pytest.mark.parametrize("key, value", [("copy.access_bytes", 8),
                                        ("copy.loop_cycles_per_iteration", 2.0)])
def test_the_loop_keys_act_in_the_loop_variant_only(key, value):
    m = HIFI5.with_overrides({key: value})
    with pytest.raises(DspsimInputError, match="does not act in copy memcpy"):
        simulate(m, "copy", "memcpy", n=256, data=False)


@pytest.mark.parametrize("allocate, read", [(True, 8192), (False, 0)])
def test_a_memcpy_store_miss_without_write_allocate_goes_to_the_memory(allocate, read):
    """The memcpy kernel's stores as the loop's: without write-allocate nothing is read from
    the destination's memory and every byte is written to it (through the write buffer)."""
    m = HIFI5.with_overrides({"copy.src": "tcm", "copy.dst": "psram",
                              "dcache.write_allocate": allocate})
    r = simulate(m, "copy", "memcpy", n=8192, data=False)
    assert (r.bytes["psram_read"], r.bytes["psram_write"]) == (read, 8192 - read)
    assert r.dcache["dirty_lines"] == read // LINE


def test_write_allocate_behind_a_write_through_cache_is_refused():
    with pytest.raises(ValueError, match="dcache.write_allocate cannot act"):
        HIFI5.with_overrides({"dcache.write_policy": "write_through",
                              "dcache.write_allocate": False})


@pytest.mark.parametrize("k, settings", [(1, {}), (4, {"ddr.write_latency_cycles": 600.0}),
                                         (16, {"core.write_buffer_entries": 1})])
def test_stores_to_an_uncached_port_pace_the_loop_at_the_write_buffers_drain(k, settings):
    """TCM -> J6's DDR: each store holds a write-buffer entry its round trip, so a loop that
    stores faster than E entries drain runs at (L + K / B) / E a store: the estimate is that
    (it was the bytes' path time alone, 82 % low for a byte loop), the lower bound below it."""
    m = load_model().with_overrides({"copy.src": "tcm", "copy.dst": "host",
                                     "copy.access_bytes": k, **settings})
    n = 4096
    r = simulate(m, "copy", "loop", n=n, data=False)
    b = get_op("copy").bounds(m, "loop", (n,))
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.02)


@pytest.mark.parametrize("src, dst", [("sram", "sram"), ("psram", "sram"), ("psram", "psram")])
@pytest.mark.parametrize("n", [1000, 4096])
def test_two_cached_ends_are_more_streams_than_the_prefetcher_follows(src, dst, n):
    """The HiFi5 follows one stream (dcache.prefetch_streams = 1): a loop bringing source and
    write-allocated destination lines in is two, so every line is a demand miss paying
    dcache.miss_cycles; the estimate says so (it assumed the prefetch: 60-70 % low)."""
    m = load_model("ameba_hifi5").with_overrides({"copy.src": src, "copy.dst": dst})
    r = simulate(m, "copy", "loop", n=n, data=False)
    b = get_op("copy").bounds(m, "loop", (n,))
    assert r.dcache["prefetches"] == 0 and b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.02)
