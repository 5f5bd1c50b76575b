"""The copy op's figures against what its ports can move, and its refusals.

Its lower bound holds on every configuration (iDMA: a descriptor's last request is partial;
memcpy: the stores still posted drain inside the span), its throughput never exceeds the
port's, a copy within one memory reads and writes through that memory's port, a copy between
two external memories runs where the platform allows it, and a DataRAM too small for a ring
is one line.
"""

import functools
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dspsim import load_model, simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from tests.cli_helpers import one_line, run_cli
from tests.two_memories import SRAM  # J6 and an SRAM

MODELS = {"j6": load_model(), "ameba_hifi5": load_model("ameba_hifi5")}
# cycles are reported whole (rounded); a bound met exactly may sit up to half a cycle above
ROUNDING = 0.5


@functools.cache
def j6_sram_model():
    """J6 with an SRAM as well (idma.tcm_end_required is false: iDMA copies DDR <-> SRAM)."""
    path = Path(tempfile.mkdtemp(prefix="dspsim-models-")) / "j6_sram.toml"
    path.write_text(SRAM)
    return load_model(path)


@pytest.fixture(scope="module")
def j6_sram():
    return j6_sram_model()


def below_bound(model, variant, n, **kw):
    """(cycles, lower bound) of a run."""
    r = simulate(model, "copy", variant, n=n, **kw)
    return r, get_op("copy").bounds(model, variant, (n,))["lower_bound_cycles"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from([*sorted(MODELS), "j6_sram"]),
       variant=st.sampled_from(["idma", "memcpy"]),
       n=st.one_of(st.integers(1, 600), st.integers(1, 40_000)),
       descriptor=st.sampled_from([0, 4, 64, 136, 256, 1000, 4096]),
       src=st.integers(0, 9), dst=st.integers(0, 9),
       window=st.sampled_from([None, 1, 2]), entries=st.sampled_from([None, 1, 1024]),
       timed_prologue=st.booleans(), fidelity=st.sampled_from(["burst", "tile"]))
def test_no_copy_beats_its_lower_bound(model, variant, n, descriptor, src, dst, window,
                                       entries, timed_prologue, fidelity):
    base = j6_sram_model() if model == "j6_sram" else MODELS[model]
    places = ["host", "tcm", *base.memories]
    settings_ = {"copy.src": places[src % len(places)], "copy.dst": places[dst % len(places)],
                 "copy.descriptor_bytes": descriptor, "copy.timed_prologue": timed_prologue}
    if window:
        settings_["idma.max_outstanding"] = window
    if entries and model != "ameba_hifi5":
        settings_["core.write_buffer_entries"] = entries
    m = base.with_overrides(settings_)
    try:
        r, bound = below_bound(m, variant, n, data=False, fidelity=fidelity)
    except DspsimInputError:
        assume(False)  # a configuration the op refuses in one line
    assert r.cycles >= bound - ROUNDING


def test_an_idma_descriptor_of_one_partial_request_beats_no_bound():
    """136 bytes from PSRAM in 128-byte requests, one slot: a full request and an 8-byte one,
    each holding the slot its latency and its own path cycles (the PSRAM's policy: a
    transactions memory's latency is 0, a request its transaction's command, data, hold and
    refresh clocks): the outstanding bound is 2 L + path(128) + path(8), not 2 (L +
    path(128))."""
    m = MODELS["ameba_hifi5"].with_overrides({"copy.src": "psram",
                                              "copy.timed_prologue": False})
    psram = m.memories["psram"]
    assert m.idma.burst_bytes == 128 and psram.max_outstanding == 1
    r, bound = below_bound(m, "idma", 136)
    b = get_op("copy").bounds(m, "idma", (136,))
    policy = psram.policy
    assert b["outstanding_bound_cycles"] == pytest.approx(
        2 * policy.latency(False) + policy.path_cycles(128, False) + policy.path_cycles(8, False))
    assert b["outstanding_bound_cycles"] < 2 * policy.path_cycles(128, False)
    assert r.cycles >= bound - ROUNDING


def test_a_memcpy_to_an_uncached_memory_is_bounded_by_all_its_bytes(j6):
    """One memcpy of 498 bytes from TCM to DDR (the descriptor size cuts nothing: the
    destination holds it all): all 500 stored bytes cross inside the span."""
    m = j6.with_overrides({"copy.src": "tcm", "copy.dst": "host",
                           "copy.descriptor_bytes": 256})
    r, bound = below_bound(m, "memcpy", 498)
    policy = j6.ddr.policy  # the values the port runs on, quantized to ticks
    assert bound >= policy.latency(True) + 498 * policy.cycles_per_byte
    assert r.cycles >= bound - ROUNDING
    assert r.memories["ddr"]["write_bytes"] == 500


@pytest.mark.parametrize("entries", [8, 1024])
def test_a_memcpy_never_moves_more_bytes_per_cycle_than_its_port(j6, entries):
    """The copy ends with MEMW: the stores still in the write buffer complete inside the span,
    as a benchmark's timer sees them; the wait is a stall on DDR."""
    m = j6.with_overrides({"copy.src": "tcm", "copy.dst": "ddr",
                           "core.write_buffer_entries": entries})
    r = simulate(m, "copy", "memcpy", n=65536, data=False)
    assert get_op("copy").run_report(r)["bytes_per_cycle"] <= j6.ddr.bytes_per_cycle
    assert r.stall_cycles["ddr"] > 0


@pytest.mark.parametrize("n", [256, 65536])
def test_a_write_through_destination_drains_inside_the_span(n):
    """Through a write-through cache the stores are posted as uncached ones: the last is done
    L after its data, inside the span."""
    m = MODELS["ameba_hifi5"].with_overrides({"copy.src": "tcm", "copy.dst": "sram",
                                              "dcache.write_policy": "write_through",
                                              "copy.timed_prologue": False})
    sram = m.memories["sram"]
    r = simulate(m, "copy", "memcpy", n=n, data=False)
    assert n / r.cycles <= sram.bytes_per_cycle
    assert r.cycles >= sram.latency_cycles + n / sram.bytes_per_cycle


@pytest.mark.parametrize("fidelity", ["burst", "tile"])
def test_an_idma_copy_within_one_memory_reads_and_writes_it(j6, fidelity):
    """DDR -> DDR, 1 MiB: the port reads n and writes n, and its data path carries both."""
    n = 1 << 20
    m = j6.with_overrides({"copy.src": "ddr", "copy.dst": "host"})
    r = simulate(m, "copy", "idma", n=n, fidelity=fidelity)
    assert r.memories["ddr"]["read_bytes"] == r.memories["ddr"]["write_bytes"] == n
    assert r.output["exact"]
    assert r.cycles >= j6.ddr.latency_cycles + 2 * n / j6.ddr.bytes_per_cycle
    assert get_op("copy").bounds(m, "idma", (n,))["bandwidth_bound_cycles"] == pytest.approx(
        2 * n / j6.ddr.bytes_per_cycle)


def test_an_idma_copy_between_two_memories_runs_where_no_tcm_end_is_required(j6_sram):
    n = 65536
    assert not j6_sram.idma.tcm_end_required
    m = j6_sram.with_overrides({"copy.src": "ddr", "copy.dst": "sram"})
    r, bound = below_bound(m, "idma", n)
    mem = r.memories
    assert mem["ddr"]["read_bytes"] == mem["sram"]["write_bytes"] == n
    assert mem["ddr"]["write_bytes"] == mem["sram"]["read_bytes"] == 0
    assert r.output["exact"] and r.cycles >= bound - ROUNDING
    slow = max(j6_sram.memories.values(), key=lambda x: 1 / x.bytes_per_cycle)
    assert r.cycles >= slow.latency_cycles + n / slow.bytes_per_cycle


def test_an_idma_copy_between_two_memories_is_one_line_where_a_tcm_end_is_required(capsys):
    m = MODELS["ameba_hifi5"].with_overrides({"copy.src": "psram", "copy.dst": "sram"})
    with pytest.raises(DspsimInputError, match="tcm_end_required") as e:
        simulate(m, "copy", "idma", n=4096)
    assert "\n" not in str(e.value)
    code, _, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "copy",
                           "--set", "copy.src=psram", "--set", "copy.dst=sram", "--n", "4096")
    assert code == 2 and one_line(err) and "tcm_end_required" in err


def test_a_ring_in_a_dataram_too_small_is_one_line(capsys):
    """100 free DataRAM bytes cannot hold a ring (two 64-byte slots, 128-byte aligned)."""
    m = MODELS["ameba_hifi5"].with_overrides({"tcm.bank_bytes": 100})
    with pytest.raises(DspsimInputError, match="at least 128 free bytes") as e:
        simulate(m, "copy", "idma", n=1000)
    assert "\n" not in str(e.value) and "has 100" in str(e.value)
    code, _, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "copy", "--n",
                           "1000", "--set", "tcm.bank_bytes=100")
    assert code == 2 and one_line(err) and "has 100" in err
    r = simulate(m, "copy", "idma", n=100)  # what fits the DataRAM is one piece
    assert r.output["exact"] and r.output["bytes"] == 100


def _no_prologue(model, src, dst, **kw):
    return model.with_overrides({"copy.src": src, "copy.dst": dst,
                                 "copy.timed_prologue": False, **kw})


@pytest.mark.parametrize("fidelity", ["burst", "tile"])
@pytest.mark.parametrize("src, dst", [("ddr", "sram"), ("sram", "ddr"), ("ddr", "host"),
                                      ("sram", "sram")])
def test_one_burst_between_external_ends_is_written_once_read(j6_sram, src, dst, fidelity):
    """One burst: the channel cannot write what it has not read, so the descriptor takes
    S + L_src + b / B_src + L_dst + b / B_dst (S: idma.setup_cycles, the only cycle the op
    charges besides the transfer with no prologue and no interrupt)."""
    m = _no_prologue(j6_sram, src, dst)
    b = m.idma.burst_bytes
    a, z = (m.memories[w if w != "host" else "ddr"] for w in (src, dst))
    want = (m.idma.setup_cycles + a.latency_cycles + b / a.bytes_per_cycle
            + z.latency_cycles + b / z.bytes_per_cycle)
    r = simulate(m, "copy", "idma", n=b, fidelity=fidelity)
    assert r.cycles == round(want) and r.output["exact"]
    bound = get_op("copy").bounds(m, "idma", (b,))["lower_bound_cycles"]
    assert bound == pytest.approx(want - m.idma.setup_cycles)


@pytest.mark.parametrize("window", [1, 3, 32])
def test_within_one_memory_each_write_is_issued_once_its_read_is_done(j6, window):
    """DDR -> DDR through one port: in the port's request log the k-th write of the channel
    is issued no earlier than the k-th read completes, and at most idma.max_outstanding
    bursts are between a read's issue and its write's completion."""
    m = _no_prologue(j6, "ddr", "host", **{"idma.max_outstanding": window})
    n = 40 * m.idma.burst_bytes + 12
    r = simulate(m, "copy", "idma", n=n, port_log=True)
    log = [e for e in r.port_log if "idma" in e[6]]
    reads = [e for e in log if not e[5]]
    writes = [e for e in log if e[5]]
    assert len(reads) == len(writes) == math.ceil(n / m.idma.burst_bytes)
    for rd, wr in zip(reads, writes):
        assert wr[4] == rd[4] and wr[0] >= rd[3]
    for k, rd in enumerate(reads):  # bursts k - window .. k - 1 have completed their writes
        assert k < window or writes[k - window][3] <= rd[0]
    assert r.output["exact"]


@pytest.mark.parametrize("window", [2, 8])
def test_a_long_copy_between_two_memories_keeps_to_both_paths_and_its_window(j6_sram, window):
    """DDR -> SRAM, 64 KiB: at least each port's data-path time and the window's bound (each
    burst holds its slot from its read's issue to its write's completion), the lower bound
    true, and burst and tile fidelity agree to the cycle."""
    m = _no_prologue(j6_sram, "ddr", "sram", **{"idma.max_outstanding": window})
    n, b = 65536, m.idma.burst_bytes
    ddr, sram = m.memories["ddr"], m.memories["sram"]
    burst, tile = (simulate(m, "copy", "idma", n=n, fidelity=f, data=False)
                   for f in ("burst", "tile"))
    assert burst.cycles == tile.cycles
    assert burst.cycles >= n / ddr.bytes_per_cycle + sram.latency_cycles
    assert burst.cycles >= n / sram.bytes_per_cycle + ddr.latency_cycles
    held = (n // b) * (ddr.latency_cycles + sram.latency_cycles + b / ddr.bytes_per_cycle
                       + b / sram.bytes_per_cycle)
    assert burst.cycles >= held / window - ROUNDING
    bounds = get_op("copy").bounds(m, "idma", (n,))
    assert bounds["outstanding_bound_cycles"] == pytest.approx(held / window)
    assert burst.cycles >= bounds["lower_bound_cycles"] - ROUNDING


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from([*sorted(MODELS), "j6_sram"]), rows=st.integers(2, 24),
       words=st.integers(1, 175), src_pad=st.sampled_from([0, 4, 100]),
       dst_pad=st.sampled_from([0, 12, 64]), piece_rows=st.sampled_from([0, 1, 3]),
       src=st.integers(0, 9), dst=st.integers(0, 9), burst=st.sampled_from([None, 16, 64]),
       window=st.sampled_from([None, 1, 2]), fidelity=st.sampled_from(["burst", "tile"]))
def test_no_2d_copy_beats_its_lower_bound(model, rows, words, src_pad, dst_pad, piece_rows,
                                          src, dst, burst, window, fidelity):
    """2-D blocks (copy.rows): every descriptor's bursts cut at its row ends, its requests
    counted as such in the outstanding bound; the estimate is the run's cycles to rounding
    where the copy has a TCM end and one descriptor (alone on its port)."""
    base = j6_sram_model() if model == "j6_sram" else MODELS[model]
    places = ["host", "tcm", *base.memories]
    row = 4 * words  # rows of whole words (copy.descriptor_bytes is a multiple of 4)
    settings_ = {"copy.src": places[src % len(places)], "copy.dst": places[dst % len(places)],
                 "copy.rows": rows, "copy.src_pitch_bytes": row + src_pad if src_pad else 0,
                 "copy.dst_pitch_bytes": row + dst_pad if dst_pad else 0,
                 "copy.descriptor_bytes": piece_rows * row, "copy.prologue_cycles": 0.0}
    settings_.update({k: v for k, v in (("idma.max_outstanding", window),
                                        ("idma.burst_bytes", burst)) if v})
    m = base.with_overrides(settings_)
    n = rows * row
    try:
        r, bound = below_bound(m, "idma", n, data=False, fidelity=fidelity)
    except DspsimInputError:
        assume(False)  # a configuration the op refuses in one line
    assert r.cycles >= bound - ROUNDING
    b = get_op("copy").bounds(m, "idma", (n,))
    assert b["requests"] == sum(-(-row // m.idma.burst_bytes) * k
                                for k in _piece_rows(rows, piece_rows))
    # exact where the external end's requests are priced linearly (a transactions memory,
    # the HiFi5's PSRAM, pays each request's command and hold, which the 2-D estimate's
    # rows_transfer_cycles does not price: a lower estimate, the bound above still holds)
    ext = [m.memories[p] for p in (m.copy.src, m.copy.dst) if p in m.memories] + (
        [m.host_memory] if "host" in (m.copy.src, m.copy.dst) else [])
    if "tcm" in (m.copy.src, m.copy.dst) and not piece_rows and all(
            e.policy.linear for e in ext):
        assert r.cycles == pytest.approx(b["estimate_cycles"], abs=ROUNDING)


def _piece_rows(rows, per):
    """Rows of each descriptor of a 2-D copy cut ``per`` rows a descriptor (0: one)."""
    per = per or rows
    return [min(per, rows - i) for i in range(0, rows, per)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from([*sorted(MODELS), "j6_sram"]),
       k=st.sampled_from([1, 4, 16, 32]), c=st.sampled_from([0.5, 1.0, 3.0]),
       iterations=st.one_of(st.integers(1, 64), st.integers(1, 2500)),
       descriptor=st.sampled_from([0, 256, 4096]), src=st.integers(0, 9), dst=st.integers(0, 9),
       allocate=st.booleans(), flush=st.booleans(), timed_prologue=st.booleans(),
       fidelity=st.sampled_from(["burst", "tile"]))
def test_no_copy_loop_beats_its_lower_bound(model, k, c, iterations, descriptor, src, dst,
                                            allocate, flush, timed_prologue, fidelity):
    """The loop variant: its compute ((n / K) x C and the call overheads) and every byte that
    must cross a port (a flushed or unallocated destination's too) bound it from below."""
    base = j6_sram_model() if model == "j6_sram" else MODELS[model]
    places = ["host", "tcm", *base.memories]
    settings_ = {"copy.src": places[src % len(places)], "copy.dst": places[dst % len(places)],
                 "copy.descriptor_bytes": descriptor, "copy.timed_prologue": timed_prologue,
                 "copy.access_bytes": k, "copy.loop_cycles_per_iteration": c,
                 "copy.flush_destination": flush}
    if base.dcache.capacity_bytes:
        settings_["dcache.write_allocate"] = allocate
    try:
        m = base.with_overrides(settings_)
        r, bound = below_bound(m, "loop", k * iterations, data=False, fidelity=fidelity)
    except (DspsimInputError, ValueError):
        assume(False)  # a configuration the op refuses in one line
    assert r.cycles >= bound - ROUNDING
