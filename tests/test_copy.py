"""The copy microbenchmark against its closed forms, its bytes, and its refusals."""

import math

import numpy as np
import pytest
import simpy

from dspsim import load_model, simulate
from dspsim.errors import DspsimInputError
from dspsim.hw.memory import Ptr
from dspsim.hw.port import transfer_cycles
from dspsim.ops import get_op
from dspsim.platform import Platform
from tests.cli_helpers import one_line, run_cli


@pytest.fixture(scope="module")
def ameba():
    return load_model("ameba_hifi5")


def test_a_lone_copy_is_setup_plus_latency_plus_bytes_over_bandwidth(j6):
    """One descriptor with enough requests in flight: S + L + n / B, exactly."""
    for n in (4096, 65536, 100_000):
        r = simulate(j6, "copy", "idma", n=n)
        want = j6.idma.setup_cycles + j6.ddr.latency_cycles + n / j6.ddr.bytes_per_cycle
        assert r.cycles == round(want)
        assert r.output["exact"] and r.output["bytes"] == n
        b = get_op("copy").bounds(j6, "idma", (n,))
        assert b["estimate_cycles"] == pytest.approx(want) and b["descriptors"] == 1


def test_a_bandwidth_bound_stream_pays_the_latency_once_per_descriptor(j6):
    """Descriptors of d bytes, one after another on one channel: each is all back before the
    next starts, so n / B + k L + S (the core programs the next one meanwhile)."""
    n, d = 65536, 8192
    m = j6.with_overrides({"copy.descriptor_bytes": d})
    r = simulate(m, "copy", "idma", n=n)
    k = n // d
    want = j6.idma.setup_cycles + k * j6.ddr.latency_cycles + n / j6.ddr.bytes_per_cycle
    assert r.cycles == round(want)
    assert r.output["exact"]
    assert r.busy_cycles["core0"] == k * j6.idma.setup_cycles


@pytest.mark.parametrize("window", [1, 2, 4])
def test_an_outstanding_bound_stream_moves_requests_times_bytes_per_round_trip(j6, window):
    """With few requests in flight each holds its slot a round trip L + b / B: the stream
    moves window x b bytes per round trip (the first wave's data steps aside)."""
    b, n = 256, 65536
    m = j6.with_overrides({"idma.max_outstanding": window, "idma.burst_bytes": b,
                           "ddr.bytes_per_cycle": 64.0})
    r = simulate(m, "copy", "idma", n=n)
    lat, cpb = m.ddr.latency_cycles, 1 / m.ddr.bytes_per_cycle
    requests = n // b
    round_trip = lat + b * cpb
    exact = m.idma.setup_cycles + transfer_cycles(n, b, window, lat, cpb)
    assert r.cycles == round(exact)
    rate = window * b / round_trip
    assert r.cycles == pytest.approx(m.idma.setup_cycles + n / rate, abs=2 * round_trip)
    assert r.cycles >= m.idma.setup_cycles + requests / window * round_trip


def test_a_cached_copy_pays_per_line_missed(ameba):
    """memcpy PSRAM -> DTCM through the data cache, blocking misses: one miss per 128-byte
    line, each its line's transaction F and the demand miss's own cost M, plus the loop's
    issue: c0 + lines (F + M) + n / 16."""
    m = ameba.with_overrides({"dcache.prefetch_next_line": False, "copy.prologue_cycles": 0.0})
    line = m.dcache.line_bytes
    F, M = m.psram.policy.request_cycles(line, False), m.dcache.miss_cycles
    for n in (4096, 65536):
        r = simulate(m, "copy", "memcpy", n=n)
        lines = n // line
        assert r.dcache["misses"] == lines and r.dcache["prefetches"] == 0
        assert r.dcache["hits"] == n // m.core.vector_bytes - lines
        want = m.core.call_overhead_cycles + lines * (F + M) + n // m.core.vector_bytes
        assert r.cycles == round(want)
        assert r.output["exact"]


def test_a_prefetched_stream_on_a_one_request_memory_is_a_round_trip_per_line(ameba):
    """With the next-line prefetch on every miss (no stream detection) and one transaction
    at a time on PSRAM, each line costs its transaction F; the loop's issue and the first
    demand miss's own cost hide behind the next fill (the last line's issue shows)."""
    m = ameba.with_overrides({"copy.prologue_cycles": 0.0, "dcache.prefetch_streams": 0})
    line = m.dcache.line_bytes
    F = m.psram.policy.request_cycles(line, False)
    assert m.dcache.miss_cycles + line // m.core.vector_bytes < F
    n = 65536
    r = simulate(m, "copy", "memcpy", n=n)
    lines = n // line
    issue = line // m.core.vector_bytes
    assert r.dcache["misses"] == 1 and r.dcache["prefetches"] == lines
    assert r.cycles == round(m.core.call_overhead_cycles + lines * F + issue)


def test_the_prologue_and_the_interrupt_handler_add_to_the_span(ameba):
    base = simulate(ameba.with_overrides({"copy.timed_prologue": False}), "copy", "idma",
                    n=8192, data=False).cycles
    timed = simulate(ameba, "copy", "idma", n=8192, data=False).cycles
    irq = simulate(ameba.with_overrides({"copy.completion_interrupt": True}), "copy", "idma",
                   n=8192, data=False).cycles
    assert timed - base == round(ameba.copy.prologue_cycles)
    assert irq - timed == pytest.approx(ameba.copy.interrupt_handler_cycles, abs=1)


@pytest.mark.parametrize("n", [1, 3, 4, 1001, 300_001])
@pytest.mark.parametrize("variant", ["idma", "memcpy"])
def test_every_byte_lands_whatever_the_size_and_the_ring(j6, n, variant):
    """A destination smaller than the copy is a ring: each piece is gathered before its slot
    is reused, so the output is the input, byte for byte."""
    r = simulate(j6, "copy", variant, n=n)
    assert r.output == {"bytes": n, "mismatch_count": 0, "exact": True}
    assert np.array_equal(r.output_array, get_default(n))


def get_default(n):
    return get_op("copy").default_input((n,))


def test_a_tcm_ring_cuts_the_copy_into_descriptors_two_of_which_fit_a_dataram(j6):
    n = 600_000
    b = get_op("copy").bounds(j6, "idma", (n,))
    free = j6.tcm.bank_bytes - j6.tcm.reserved_bytes
    assert b["descriptor_bytes"] == 65536 and 2 * 65536 <= free < 4 * 65536
    assert b["descriptors"] == math.ceil(n / 65536)
    r = simulate(j6, "copy", "idma", n=n)
    assert r.cycles == round(b["estimate_cycles"]) and r.output["exact"]


@pytest.mark.parametrize("src, dst, variant", [
    ("tcm", "host", "idma"), ("tcm", "sram", "memcpy"), ("psram", "sram", "memcpy"),
    ("sram", "tcm", "idma"), ("tcm", "tcm", "memcpy"), ("host", "psram", "memcpy"),
])
def test_any_two_ends_the_platform_allows(ameba, src, dst, variant):
    m = ameba.with_overrides({"copy.src": src, "copy.dst": dst})
    r = simulate(m, "copy", variant, n=20_000)
    assert r.output["exact"]
    moved = {k: v for k, v in r.bytes.items() if v}
    if src == dst == "tcm":
        assert not moved
    else:
        assert moved


def test_one_end_must_be_tcm_where_the_platform_says_so(j6):
    """J6's iDMA may copy within DDR; with idma.tcm_end_required it may not (refused before
    the run, and by the channel itself)."""
    same = j6.with_overrides({"copy.src": "ddr", "copy.dst": "ddr"})
    assert simulate(same, "copy", "idma", n=8192).output["exact"]
    strict = same.with_overrides({"idma.tcm_end_required": True})
    with pytest.raises(DspsimInputError, match="must be TCM"):
        simulate(strict, "copy", "idma", n=8192)
    env = simpy.Environment()
    platform = Platform(env, strict.with_overrides({"copy.src": "host"}))
    ddr = platform.memory("ddr")
    a, b = ddr.add_block(4096), ddr.add_block(4096)
    with pytest.raises(DspsimInputError, match="idma.tcm_end_required"):
        platform.dsps[0].idma[0].submit(Ptr(ddr, a.addr), Ptr(ddr, b.addr), 4096)


@pytest.mark.parametrize("args, message", [
    (["--model", "ameba_hifi5", "--set", "copy.src=psram", "--set", "copy.dst=sram"],
     "must be TCM"),
    (["--set", "copy.dst=sram"], "no such memory"),
    (["--model", "ameba_hifi5", "--set", "copy.src=ddr"], "no such memory"),
    (["--set", "copy.src=tcm", "--set", "copy.dst=tcm"], "not modelled"),
    (["--variant", "memcpy", "--set", "copy.completion_interrupt=true"], "no completion"),
    (["--model", "ameba_hifi5", "--set", "copy.descriptor_bytes=262144"], "fit one DataRAM"),
])
def test_bad_copies_are_one_line_and_exit_2(capsys, args, message):
    code, _, err = run_cli(capsys, "run", "--op", "copy", "--n", "300000", *args)
    assert code == 2 and one_line(err) and message in err, err


def test_a_source_in_tcm_must_fit_a_dataram(capsys):
    code, _, err = run_cli(capsys, "run", "--op", "copy", "--n", "300000", "--set",
                           "copy.src=tcm", "--set", "copy.dst=ddr", "--variant", "memcpy")
    assert code == 2 and one_line(err) and "fit one DataRAM" in err, err


def test_run_reports_bytes_per_cycle(capsys):
    import json

    code, out, _ = run_cli(capsys, "run", "--op", "copy", "--n", "65536", "--json",
                           "--no-data")
    obj = json.loads(out)
    assert code == 0 and obj["bytes_per_cycle"] == pytest.approx(65536 / obj["cycles"])
    assert obj["mb_per_s"] == pytest.approx(65536 / obj["time_us"])
    code, out, _ = run_cli(capsys, "run", "--op", "copy", "--n", "65536", "--no-data")
    assert code == 0 and "bytes_per_cycle" in out and "(65,536 bytes)" in out


def test_the_sweeps_of_the_brief_run(tmp_path, capsys):
    """The HiFi5 size sweep of both variants, and a burst x outstanding grid on J6 (before:
    every point of a platform without a memory named ddr failed)."""
    import pandas as pd

    out = tmp_path / "sizes.csv"
    code, _, err = run_cli(capsys, "sweep", "--op", "copy", "--model", "ameba_hifi5",
                           "--param", "n=8192,16384,32768,65536,131072", "--variant",
                           "idma,memcpy", "--out", out)
    df = pd.read_csv(out)
    assert code == 0, err
    assert len(df) == 10 and (df["error"].isna()).all()
    read = df[[c for c in df.columns if c.endswith("_read_bytes")]].sum(axis=1)
    assert (read >= df["n"]).all()  # every memory's reads (the platform has no DDR)
    out = tmp_path / "grid.csv"
    code, _, err = run_cli(capsys, "sweep", "--op", "copy", "--n", "65536", "--variant",
                           "idma", "--param", "idma.burst_bytes=32,64,256", "--param",
                           "idma.max_outstanding=1,4,32", "--out", out)
    df = pd.read_csv(out)
    assert code == 0 and len(df) == 9 and df["error"].isna().all(), err
    # more requests in flight never hurt a lone stream
    for _, g in df.groupby("idma.burst_bytes"):
        assert g.sort_values("idma.max_outstanding")["cycles"].is_monotonic_decreasing


@pytest.mark.parametrize("name, n", [("memcpy", 1000), ("memcpy", 4096), ("vecsum", 777)])
def test_a_kernel_on_tcm_is_its_loop_shape(j6, name, n):
    """One call on TCM: call overhead + iterations x II + reduction, the kernel op's figure."""
    from dspsim.kernels import get_kernel

    shape = get_kernel(name).shape
    r = simulate(j6, "kernel", name, n=n)
    assert r.cycles == shape.tcm_cycles(n, j6.core)
    assert r.cycles == get_op("kernel").bounds(j6, name, (n,))["estimate_cycles"]
    rows = simulate(j6, "kernel", name, shape=(3, n))
    assert rows.cycles == 3 * r.cycles


def test_a_kernel_whose_buffers_do_not_fit_is_one_line(capsys):
    code, _, err = run_cli(capsys, "run", "--op", "kernel", "--variant", "memcpy", "--n",
                           "100000")
    assert code == 2 and one_line(err) and "do not fit a DataRAM" in err, err
    code, _, err = run_cli(capsys, "run", "--op", "kernel", "--variant", "fc_s8", "--n", "64")
    assert code == 2 and one_line(err) and "OUT,IN" in err, err
