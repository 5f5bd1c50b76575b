"""A data cache in front of a memory served one transaction at a time (``protocol =
"transactions"``), against closed forms: the copy's loop variant (``--variant loop``) through
the cache, with no prefetch and no prologue, on the HiFi5 model.

A transaction of ``b`` bytes holds the memory for ``F(b) = (command_clocks + ceil(b /
bytes_per_clock) + hold) x clock_cycles`` (a read's or a write's hold), chopped at
``page_bytes``. With ``O`` the core's call overhead, ``K`` = ``copy.access_bytes``, ``C`` =
``copy.loop_cycles_per_iteration`` and ``line`` the cache's line:

- a blocking read miss costs one line's read transaction ``F_r`` besides the iteration: a lone
  access is ``O + C + F_r``, a stream of ``n`` bytes ``O + (n / K) C + (n / line) F_r``;
- a store stream into the memory (write-allocate, write-back) fills each line (``F_r``) and,
  once the cache is full, each miss evicts a dirty line whose write-back (``F_w``) goes on the
  port after the fill, draining while the loop spends ``L = (line / K) C`` on the line: the next
  miss waits ``max(0, F_w - L)`` for it. With ``W`` write-backs the total is ``O + (n / K) C +
  (n / line) F_r + (W - 1) max(0, F_w - L)`` (the last drains after the span: the closing
  ``MEMW`` waits for the core's stores, not the cache's write-backs).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import load_model, simulate

ROUND = {"clock_cycles": 2.0, "command_clocks": 9, "bytes_per_clock": 2.0,
         "read_hold_clocks": 2, "write_hold_clocks": 1, "page_bytes": 0}


def model(memory: dict, line: int = 128, capacity: int = 4096, ways: int = 2):
    """The HiFi5 model, its PSRAM a transactions memory with ``memory``'s keys, one
    transaction at a time, behind a small write-back, write-allocate cache without prefetch (no
    refresh collisions, no demand-miss cost beyond the fill: tests/test_hifi5_miss_path.py)."""
    return load_model("ameba_hifi5").with_overrides({
        "psram.protocol": "transactions", "psram.max_outstanding": 1,
        **{f"psram.{k}": v for k, v in memory.items()},
        "dcache.capacity_bytes": capacity, "dcache.line_bytes": line, "dcache.ways": ways,
        "dcache.write_policy": "write_back", "dcache.write_allocate": True,
        "dcache.prefetch_next_line": False, "copy.prologue_cycles": 0.0,
        "psram.refresh_clocks": 0.0, "dcache.miss_cycles": 0.0})


def transaction(memory: dict, nbytes: int, write: bool) -> float:
    """``F(nbytes)``: the closed form, chopped at the page (written out here, not the
    policy's)."""
    hold = memory["write_hold_clocks" if write else "read_hold_clocks"]
    page = memory["page_bytes"] or nbytes
    pieces = [page] * (nbytes // page) + ([nbytes % page] if nbytes % page else [])
    clocks = sum(memory["command_clocks"] + math.ceil(p / memory["bytes_per_clock"]) + hold
                 for p in pieces)
    return clocks * memory["clock_cycles"]


def loop(m, n: int, src: str, dst: str, k: int, c: float):
    return simulate(m.with_overrides({"copy.src": src, "copy.dst": dst,
                                      "copy.access_bytes": k,
                                      "copy.loop_cycles_per_iteration": c}),
                    "copy", "loop", n=n, data=False)


memories = st.fixed_dictionaries({
    "clock_cycles": st.sampled_from([1.0, 2.0, 3.0]),
    "command_clocks": st.integers(0, 20),
    "bytes_per_clock": st.sampled_from([1.0, 2.0, 3.0, 4.0, 8.0]),
    "read_hold_clocks": st.integers(0, 4),
    "write_hold_clocks": st.integers(0, 4),
    "page_bytes": st.sampled_from([0, 32, 48, 64, 1024]),
})


# ------------------------------------------------------------------ (a) a blocking read miss
@pytest.mark.parametrize("k, c", [(4, 7.0), (32, 3.0)])
def test_a_lone_read_miss_is_one_line_transaction_and_the_iteration(k, c):
    m = model(ROUND)
    r = loop(m, k, "psram", "tcm", k, c)
    assert transaction(ROUND, 128, False) == (9 + 64 + 2) * 2 == 150
    assert r.cycles == m.core.call_overhead_cycles + c + 150
    assert r.bytes["psram_read"] == 128 and r.dcache["misses"] == 1


@settings(max_examples=25, deadline=None)
@given(memory=memories, line=st.sampled_from([64, 128]), k=st.sampled_from([4, 16, 32]),
       c=st.sampled_from([1.0, 2.0, 5.0]), lines=st.integers(1, 24))
def test_a_stream_of_read_misses_pays_each_line_transaction_in_turn(memory, line, k, c, lines):
    """Fewer lines than the cache holds: nothing evicted, every line one blocking fill."""
    m = model(memory, line=line)
    n = lines * line
    r = loop(m, n, "psram", "tcm", k, c)
    fill = transaction(memory, line, False)
    assert r.cycles == m.core.call_overhead_cycles + n // k * c + lines * fill
    assert r.bytes["psram_read"] == n and r.dcache["misses"] == lines


# ------------------------------------------------------------------ (b) write-backs drained
def _stores_closed_form(m, memory: dict, n: int, k: int, c: float) -> tuple[float, int]:
    line = m.dcache.line_bytes
    writebacks = n // line - m.dcache.capacity_bytes // line
    drain = transaction(memory, line, True) - line // k * c  # F_w - L
    total = (m.core.call_overhead_cycles + n // k * c + n // line * transaction(memory, line, False)
             + (writebacks - 1) * max(0.0, drain))
    return total, writebacks


@pytest.mark.parametrize("c, stalls", [(5.0, False), (4.0, True), (1.0, True)])
def test_write_backs_behind_a_slower_loop_add_no_stall(c, stalls):
    """Round values: F_w = (9 + 64 + 1) x 2 = 148 cycles; the loop spends 32 x C on a line:
    160 at C = 5 hides every write-back, 128 and 32 leave 20 and 116 cycles a line to wait."""
    m = model(ROUND)
    n = 3 * m.dcache.capacity_bytes
    r = loop(m, n, "tcm", "psram", 4, c)
    total, writebacks = _stores_closed_form(m, ROUND, n, 4, c)
    plain = m.core.call_overhead_cycles + n // 4 * c + n // 128 * 150
    assert writebacks == 64 and r.dcache["writebacks"] == writebacks
    assert r.bytes["psram_write"] == writebacks * 128  # the write-backs use the port
    assert r.cycles == total
    assert (r.cycles > plain) == stalls
    if stalls:
        assert r.cycles == plain + (writebacks - 1) * (148 - 32 * c)


@settings(max_examples=25, deadline=None)
@given(memory=memories, k=st.sampled_from([4, 16, 32]), c=st.sampled_from([1.0, 2.0, 5.0, 9.0]),
       extra=st.integers(1, 40))
def test_write_backs_drained_behind_the_loop_equal_their_closed_form(memory, k, c, extra):
    """Random transactions and loops: a loop slower than the drain pays nothing for the
    write-backs, a faster one waits for each but the last."""
    m = model(memory)
    n = m.dcache.capacity_bytes + extra * 128
    r = loop(m, n, "tcm", "psram", k, c)
    total, writebacks = _stores_closed_form(m, memory, n, k, c)
    assert r.dcache["writebacks"] == writebacks == extra
    assert r.bytes["psram_write"] == extra * 128
    assert r.cycles == total
