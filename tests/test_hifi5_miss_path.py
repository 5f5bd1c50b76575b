"""The HiFi5 model rebuilt from the facts: its PSRAM a transactions memory (a lone 128-byte read
is the vendor's 150 cycles, plus the fitted refresh collisions), its data cache's miss path
(a demand miss's own cost, a prefetcher that follows a limited number of streams), and the
SDK example's two fully connected totals (the ping-pong a check, the direct the calibration
point of the miss path), against closed forms."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import load_model, simulate
from dspsim.ops.registry import get_op
from dspsim.platform import Platform
from dspsim.study.validate import read_measurements, validation_dir
from dspsim.ticks import cycles

HIFI5 = load_model("ameba_hifi5")


def _psram_port(model):
    return Platform(simpy.Environment(), model, data=False).memories["psram"].port


# ------------------------------------------------------------------ the PSRAM's transactions
def test_a_lone_128_byte_psram_read_through_the_port_is_150_cycles():
    """(CMD+ADDR 3 + LC 7 - 1) + 128 / 2 data clocks + 2 hold clocks = 75 clocks of T = 2
    cycles: 150, without refresh collisions; with the model's, 75 + refresh_clocks clocks."""
    quiet = HIFI5.with_overrides({"psram.refresh_clocks": 0.0})
    assert cycles(_psram_port(quiet).request(0, 128, False, "core0")) \
        == (3 + 7 - 1 + 64 + 2) * 2 == 150
    r = HIFI5.psram.refresh_clocks
    assert r > 0
    assert cycles(_psram_port(HIFI5).request(0, 128, False, "core0")) \
        == pytest.approx((75 + r) * 2)


@settings(max_examples=30, deadline=None)
@given(refresh=st.floats(0.0, 14.0), nbytes=st.integers(1, 5000), count=st.integers(1, 6),
       write=st.booleans())
def test_every_transaction_of_a_stream_and_of_a_page_chop_pays_its_refresh_clocks(
        refresh, nbytes, count, write):
    m = HIFI5.with_overrides({"psram.refresh_clocks": refresh})
    page = m.psram.page_bytes
    hold = 1 if write else 2
    full, rest = divmod(nbytes, page)
    clocks = full * (9 + page // 2 + hold + refresh)
    if rest:
        clocks += 9 + -(-rest // 2) + hold + refresh
    port = _psram_port(m)
    done = [cycles(port.request(0, nbytes, write, "a")) for _ in range(count)]
    assert done[-1] == pytest.approx(count * clocks * 2)
    assert port.busy_cycles == pytest.approx(count * clocks * 2)


# ------------------------------------------------------------------ the cache's miss path
def test_a_memcpy_stream_pays_one_demand_miss_cost_and_then_one_transaction_a_line():
    """One stream followed: line 0 misses (its transaction F and the miss's own M), line 1
    misses and confirms the stream (F + M, its prefetch of line 2 behind it), then each line is
    prefetched when the one before is first used, one transaction after another: with M plus a
    line's 8 vector iterations under F, the copy takes O + lines x F + M + 2 x 8."""
    m = HIFI5
    line = m.dcache.line_bytes
    F, M = m.psram.policy.request_cycles(line, False), m.dcache.miss_cycles
    issue = line // m.core.vector_bytes
    assert m.dcache.prefetch_streams == 1 and M + issue < F
    for n in (4096, 65536):
        r = simulate(m, "copy", "memcpy", n=n, data=False)
        lines = n // line
        assert r.dcache["misses"] == 2 and r.dcache["prefetches"] == lines - 1
        assert r.cycles == round(m.core.call_overhead_cycles + lines * F + M + 2 * issue)


def test_the_fc_kernels_interleaved_rows_are_demand_misses_unless_every_stream_is_followed():
    """The direct fc kernel reads its four rows side by side: one stream followed, almost every
    weight line is a demand miss (a group's first row continues the last row of the group
    before it, a stream the prefetcher follows: one line a group prefetched); with four
    followed, each row is prefetched from its third line on. Every line is fetched once."""
    shape = (512, 768)
    lines = 512 * 768 // 128
    one = simulate(HIFI5, "fc", "direct", shape=shape, data=False)
    groups = 512 // 4
    assert one.dcache["prefetches"] == groups - 1
    assert one.dcache["misses"] + one.dcache["prefetches"] == lines
    four = simulate(HIFI5.with_overrides({"dcache.prefetch_streams": 4}), "fc", "direct",
                    shape=shape, data=False)
    assert four.dcache["fill_bytes"] >= lines * 128
    assert four.cycles < 0.75 * one.cycles
    # the bounds replay the same prefetcher: the traffic is the run's to the byte
    b = get_op("fc").bounds(HIFI5, "direct", shape)
    assert b["traffic_bytes"] == one.bytes
    assert abs(b.estimate_cycles / one.cycles - 1) < 0.02


def test_a_demand_miss_cost_of_zero_and_no_stream_limit_leave_the_cache_as_before():
    """miss_cycles 0 and prefetch_streams 0 (every file that does not give them): each miss
    prefetches the next line (the fc kernel's streams too) and costs its fill alone: a row
    misses its first line only, and a group's first row not even that (the last row of the
    group before ran into it)."""
    m = HIFI5.with_overrides({"dcache.miss_cycles": 0.0, "dcache.prefetch_streams": 0})
    r = simulate(m, "fc", "direct", shape=(64, 768), data=False)
    groups = 64 // 4
    assert r.dcache["misses"] == 4 + 3 * (groups - 1)
    assert load_model("j6").dcache.miss_cycles == 0 and load_model("j6").dcache.capacity_bytes == 0


@pytest.mark.parametrize("extra", [10.0, 37.5])
def test_a_blocking_miss_pays_the_demand_miss_cost_on_every_line(extra):
    """No prefetch: every line of a memcpy is a demand miss, each paying M more."""
    m = HIFI5.with_overrides({"dcache.prefetch_next_line": False})
    more = m.with_overrides({"dcache.miss_cycles": m.dcache.miss_cycles + extra})
    n = 8192
    a = simulate(m, "copy", "memcpy", n=n, data=False).cycles
    b = simulate(more, "copy", "memcpy", n=n, data=False).cycles
    assert b - a == pytest.approx(n // 128 * extra, abs=1)


# ------------------------------------------------------------------ the example's totals
def _rows():
    return {m.variant: m for m in read_measurements(validation_dir() / "ameba_hifi5.toml")
            if m.op == "fc"}


def test_the_pingpong_total_is_a_check_within_1_5_percent():
    row = _rows()["pingpong"]
    assert row.role == "check" and row.cycles == 478_885
    r = simulate(HIFI5, "fc", "pingpong", shape=tuple(row.shape), data=False)
    assert abs(r.cycles / row.cycles - 1) < 0.015


def test_the_direct_total_is_the_miss_paths_calibration_within_1_percent():
    row = _rows()["direct"]
    assert row.role == "calibration" and row.cycles == 744_978
    assert "dcache.miss_cycles" in row.note
    r = simulate(HIFI5, "fc", "direct", shape=tuple(row.shape), data=False)
    assert abs(r.cycles / row.cycles - 1) < 0.01
