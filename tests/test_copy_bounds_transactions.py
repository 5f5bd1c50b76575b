"""The copy's bounds on a transactions memory (one transaction at a time, each paying its
command, hold and refresh clocks with its data) and on a pipelined one (J6: unchanged)."""

import math

import pytest

from dspsim import load_model, simulate
from dspsim.hw.policy import quantized
from dspsim.ops import get_op
from dspsim.ops.copy.bounds import crossing_bytes, memory_of


@pytest.fixture(scope="module")
def ameba():
    return load_model("ameba_hifi5")


def _transaction_cycles(psram, nbytes: int, write: bool) -> float:
    """One PSRAM transaction of ``nbytes`` (within a page), closed form, to whole ticks (as
    the port books it)."""
    hold = psram.write_hold_clocks if write else psram.read_hold_clocks
    return quantized((psram.command_clocks + math.ceil(nbytes / psram.bytes_per_clock) + hold
                      + psram.refresh_clocks) * psram.clock_cycles)


@pytest.mark.parametrize("refresh", [0.0, 1.602])
@pytest.mark.parametrize("n", [65536, 65536 + 40, 12_800])
def test_idma_from_a_transactions_psram_is_bounded_by_its_transactions(ameba, refresh, n):
    """iDMA PSRAM -> DTCM: every burst of ``idma.burst_bytes`` (each descriptor's last one
    partial) is one read transaction, so the bandwidth bound is their count x a transaction's
    cycles; the lower bound holds the run, and the estimate (setup + the transactions in
    turn) is the run's cycles."""
    m = ameba.with_overrides({"psram.refresh_clocks": refresh})
    psram, burst = m.memories["psram"], m.idma.burst_bytes
    assert memory_of(m, m.copy.src) is psram and memory_of(m, m.copy.dst) is None  # to DTCM
    b = get_op("copy").bounds(m, "idma", (n,))
    d = b["descriptor_bytes"]
    sizes = [min(d, n - i) for i in range(0, n, d)]
    want = sum((s // burst) * _transaction_cycles(psram, burst, False)
               + (_transaction_cycles(psram, s % burst, False) if s % burst else 0.0)
               for s in sizes)
    assert b["bandwidth_bound_cycles"] == pytest.approx(want, rel=1e-12)
    assert want > n / psram.policy.bytes_per_cycle  # the commands and holds count
    r = simulate(m, "copy", "idma", n=n)
    assert b["lower_bound_cycles"] <= r.cycles
    assert abs(b["estimate_cycles"] - r.cycles) <= 1.0


@pytest.mark.parametrize("variant", ["memcpy", "loop"])
def test_a_core_copy_from_a_transactions_psram_pays_a_transaction_a_line(ameba, variant):
    """memcpy and loop PSRAM -> DTCM through the data cache: one read transaction a line, the
    bandwidth bound their count x a line's transaction; it holds the run."""
    n = 65536
    psram, line = ameba.memories["psram"], ameba.dcache.line_bytes
    assert memory_of(ameba, ameba.copy.src) is psram and memory_of(ameba, ameba.copy.dst) is None
    b = get_op("copy").bounds(ameba, variant, (n,))
    want = n // line * _transaction_cycles(psram, line, False)
    assert b["bandwidth_bound_cycles"] == pytest.approx(want, rel=1e-12)
    r = simulate(ameba, "copy", variant, n=n)
    assert b["lower_bound_cycles"] <= r.cycles


@pytest.mark.parametrize("variant", ["idma", "memcpy", "loop"])
@pytest.mark.parametrize("n", [65536, 100_000])
def test_j6_copy_bounds_are_the_pipelined_closed_forms(j6, variant, n):
    """On J6's pipelined DDR the data path is the bytes over its rate, whatever the requests'
    size: the bandwidth bound is max over the ports of bytes / B, and the iDMA's per-descriptor
    bound the sum of L + d / B, to the last bit (L and 1 / B the policy's, quantized to ticks:
    J6's DDR has one latency, and the copy reads it)."""
    b = get_op("copy").bounds(j6, variant, (n,))
    ports = crossing_bytes(j6, variant, n)
    bandwidth = max((nbytes * mem.policy.cycles_per_byte for mem, nbytes in ports.values()
                     if nbytes > 0), default=0.0)
    assert b["bandwidth_bound_cycles"] == bandwidth
    if variant != "idma":
        assert b["latency_bandwidth_bound_cycles"] == max(
            mem.policy.latency(False) + nbytes * mem.policy.cycles_per_byte
            for mem, nbytes in ports.values() if nbytes > 0)
        return
    (mem, _), = ports.values()  # one external end
    d = b["descriptor_bytes"]
    per_descriptor = 0.0
    for i in range(0, n, d):
        per_descriptor += mem.policy.latency(False) + min(d, n - i) * mem.policy.cycles_per_byte
    assert b["latency_bandwidth_bound_cycles"] == per_descriptor


def test_hifi5_memcpy_estimate_is_its_prefetched_stream(ameba):
    """memcpy PSRAM -> DTCM with the next-line prefetch: one demand miss, then each line's
    transaction in turn: the estimate O + lines F + M + 2 x a line's issue is the run's."""
    n = 65536
    b = get_op("copy").bounds(ameba, "memcpy", (n,))
    r = simulate(ameba, "copy", "memcpy", n=n)
    assert abs(b["estimate_cycles"] - r.cycles) <= 1.0


@pytest.mark.parametrize("variant", ["memcpy", "loop"])
def test_esp32s3_core_copy_from_psram_pays_a_transaction_a_line(variant):
    """ESP32-S3 memcpy and loop PSRAM -> SRAM (SRAM on the core's own bus): each 32-byte line
    one read transaction after the loop's own cycles: the bandwidth bound is the lines'
    transactions, below the run, and the estimate is the run's."""
    m = load_model("esp32s3").with_overrides({"copy.src": "psram", "copy.dst": "sram"})
    psram, line, n = m.memories["psram"], m.dcache.line_bytes, 65536
    b = get_op("copy").bounds(m, variant, (n,))
    want = n // line * _transaction_cycles(psram, line, False)
    assert b["bandwidth_bound_cycles"] == pytest.approx(want, rel=1e-12)
    r = simulate(m, "copy", variant, n=n)
    assert b["lower_bound_cycles"] <= r.cycles
    assert abs(b["estimate_cycles"] - r.cycles) <= 1.0


@pytest.mark.parametrize("write_latency", [300.0, 2000.0])
@pytest.mark.parametrize("n", [1000, 4096])
def test_a_write_allocate_destination_is_bounded_by_its_fills_latency(ameba, write_latency, n):
    """memcpy TCM -> SRAM through the HiFi5's write-back, write-allocate cache: what crosses
    the SRAM's port in the span is its line fills, reads. The port bound added the write
    latency to them (1,000 bytes at sram.write_latency_cycles = 2000: a lower bound of 2,267
    against 543 simulated); the last request is a read, its latency the read's."""
    m = ameba.with_overrides({"copy.src": "tcm", "copy.dst": "sram",
                              "sram.write_latency_cycles": write_latency})
    r = simulate(m, "copy", "memcpy", n=n, data=False)
    assert r.bytes["sram_write"] == 0 < r.bytes["sram_read"]
    assert get_op("copy").bounds(m, "memcpy", (n,))["lower_bound_cycles"] <= r.cycles


@pytest.mark.parametrize("src, dst", [("sram", "tcm"), ("tcm", "sram")])
@pytest.mark.parametrize("n", [1000, 4096, 65536])
def test_hifi5_memcpy_estimate_on_a_pipelined_port_keeps_two_lines_in_flight(ameba, src, dst, n):
    """memcpy between the HiFi5's SRAM (several requests in flight) and DTCM: two demand misses,
    then a line's first use prefetches the next, so two lines are in flight per fill and a
    line's issue; the estimate had every line wait a whole fill (76 % high)."""
    m = ameba.with_overrides({"copy.src": src, "copy.dst": dst})
    b = get_op("copy").bounds(m, "memcpy", (n,))
    r = simulate(m, "copy", "memcpy", n=n, data=False)
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.04)


@pytest.mark.parametrize("src, dst", [("sram", "sram"), ("psram", "sram"), ("sram", "psram"),
                                      ("psram", "psram")])
@pytest.mark.parametrize("n", [1000, 65536])
def test_hifi5_memcpy_between_cached_ends_is_a_demand_miss_a_line(ameba, src, dst, n):
    """memcpy between two cached memories brings two line streams (source, write-allocated
    destination) into a cache whose prefetcher follows one: no prefetch, every line a demand
    miss paying dcache.miss_cycles, during which (and the next source fill on another port) an
    evicted line is written back. The estimate assumed the prefetch (17-27 % low)."""
    m = ameba.with_overrides({"copy.src": src, "copy.dst": dst})
    b = get_op("copy").bounds(m, "memcpy", (n,))
    r = simulate(m, "copy", "memcpy", n=n, data=False)
    assert r.dcache["prefetches"] == 0 and b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.02)


@pytest.mark.parametrize("src, dst", [("sram", "tcm"), ("tcm", "sram"), ("tcm", "psram")])
@pytest.mark.parametrize("n", [64, 128])
def test_hifi5_memcpy_of_one_line_is_a_demand_miss(ameba, src, dst, n):
    """A memcpy within one cache line: its one demand miss starts a stream but prefetches
    nothing, so the line crosses inside the span. The bounds took it for a prefetch past the
    stream's end and left no byte on the port: the estimate was the core's alone (-90 %)."""
    m = ameba.with_overrides({"copy.src": src, "copy.dst": dst})
    b = get_op("copy").bounds(m, "memcpy", (n,))
    r = simulate(m, "copy", "memcpy", n=n, data=False)
    assert r.dcache["prefetches"] == 0 and b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.1)


@pytest.mark.parametrize("src, dst", [("sram", "tcm"), ("tcm", "sram"), ("psram", "tcm")])
@pytest.mark.parametrize("n", [4, 128])
def test_hifi5_loop_of_one_line_pays_its_demand_miss(ameba, src, dst, n):
    """A loop within one cache line: its one miss starts the prefetcher's stream but nothing is
    prefetched ahead of it, so it pays dcache.miss_cycles; the estimate assumed the prefetch
    (20-54 % low)."""
    m = ameba.with_overrides({"copy.src": src, "copy.dst": dst})
    b = get_op("copy").bounds(m, "loop", (n,))
    r = simulate(m, "copy", "loop", n=n, data=False)
    assert r.dcache["prefetches"] == 0 and b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.05)
