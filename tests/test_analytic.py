"""Closed-form bounds and estimates (dspsim.ops.softmax.bounds) against the simulation."""

import io
import json
from contextlib import redirect_stdout

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dspsim.hw.policy
import dspsim.kernels.shapes
from dspsim.cli import main
from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.hw.port import transfer_cycles
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM, LoopShape, ddr_call
from dspsim.ops import get_op
from dspsim.ops.pingpong_bounds import Tiling as _Tiling
from dspsim.ops.softmax.bounds import bounds, regime
from dspsim.run import simulate

configs = st.fixed_dictionaries(
    {
        "ddr.latency_cycles": st.floats(5, 800),
        "ddr.bytes_per_cycle": st.floats(0.03, 32),
        "ddr.max_outstanding": st.sampled_from([1, 2, 4, 16, 64]),
        "idma.max_outstanding": st.sampled_from([1, 2, 3, 4, 8, 32]),
        "idma.burst_bytes": st.sampled_from([16, 64, 128]),
        "idma.setup_cycles": st.floats(0, 100),
        "softmax.tile_bytes": st.sampled_from([256, 1024, 4096, 8192, 32768]),
        "softmax.schedule": st.sampled_from(["seed", "split"]),
    }
)


def run(model, mode, n):
    return simulate(model, variant=mode, n=n, data=False)


@settings(max_examples=60, deadline=None)
@given(kv=configs, mode=st.sampled_from(["pingpong", "direct"]), n=st.integers(1, 12_000))
def test_a_run_never_beats_its_lower_bound_and_traffic_is_exact(j6, kv, mode, n):
    model = j6.with_overrides(kv)
    r = run(model, mode, n)
    b = bounds(model, mode, n)
    assert r.bytes == {"ddr_read": b["ddr_read_bytes"], "ddr_write": b["ddr_write_bytes"]}
    for name in ("dma_bound_cycles", "latency_bound_cycles", "compute_bound_cycles"):
        assert r.cycles >= b[name] - 1, name  # simulated cycles are rounded to an integer
    assert b["lower_bound_cycles"] == max(
        b["dma_bound_cycles"], b["latency_bound_cycles"], b["compute_bound_cycles"]
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(kv=configs, tiles=st.integers(10, 40), extra=st.integers(0, 8191))
def test_pingpong_estimate_within_5_percent_when_uncontended(j6, kv, tiles, extra):
    """Uncontended ping-pong with many tiles per pass: one resource paces the pipeline."""
    model = j6.with_overrides(kv)
    n = tiles * (model.softmax.tile_bytes // 4) + extra % (model.softmax.tile_bytes // 4)
    assume(regime(model, "pingpong", n) == "uncontended")
    est = bounds(model, "pingpong", n)["estimate_cycles"]
    assert est == pytest.approx(run(model, "pingpong", n).cycles, rel=0.05)


@settings(max_examples=15, deadline=None)
@given(kv=configs, n=st.integers(1, 8192))
def test_pingpong_estimate_within_5_percent_for_one_tile_per_pass(j6, kv, n):
    """One tile per pass: copy in, compute, copy out, all serial on channel 0."""
    model = j6.with_overrides(kv)
    n = min(n, model.softmax.tile_bytes // 4)
    assert regime(model, "pingpong", n) == "uncontended"
    est = bounds(model, "pingpong", n)["estimate_cycles"]
    assert est == pytest.approx(run(model, "pingpong", n).cycles, rel=0.05)


@settings(max_examples=25, deadline=None)
@given(
    kv=st.fixed_dictionaries(
        {
            "ddr.latency_cycles": st.floats(1, 800),
            "ddr.bytes_per_cycle": st.floats(0.03, 32),
            "ddr.max_outstanding": st.sampled_from([1, 2, 64]),
            "core.write_buffer_entries": st.sampled_from([1, 2, 8]),
            "core.call_overhead_cycles": st.integers(0, 100),
            "core.lanes_f32": st.sampled_from([8, 16, 32, 64]),
        }
    ),
    n=st.integers(1, 6_000),
)
def test_direct_estimate_follows_the_core_to_the_cycle(j6, kv, n):
    """The core is the port's only requester: the direct version is always uncontended, and its
    closed form (ddr_call per kernel, plus the store handed over between calls) is exact."""
    model = j6.with_overrides(kv)
    assert regime(model, "direct", n) == "uncontended"
    est = bounds(model, "direct", n)["estimate_cycles"]
    cycles = run(model, "direct", n).cycles  # rounded to an integer: allow one cycle
    assert abs(est - cycles) <= 1


def test_the_estimates_are_built_from_the_simulators_closed_forms(j6, monkeypatch):
    """Direct: one ddr_call per kernel (nothing else when a long call overhead hides the store
    handed over between calls). Ping-pong, one tile per pass: every copy is transfer_cycles."""
    calls, copies = [], []

    def recorded_call(*args, **kwargs):
        calls.append(ddr_call(*args, **kwargs))
        return calls[-1]

    def recorded_copy(*args, **kwargs):
        copies.append(transfer_cycles(*args, **kwargs))
        return copies[-1]

    # the direct calls go through ddr_call_sequence, which calls ddr_call once per kernel
    monkeypatch.setattr(dspsim.kernels.shapes, "ddr_call", recorded_call)
    # every copy's closed form comes from the memory's request policy
    monkeypatch.setattr(dspsim.hw.policy, "transfer_cycles", recorded_copy)
    model = j6.with_overrides({"core.call_overhead_cycles": 10_000})
    est = bounds(model, "direct", 3000)["estimate_cycles"]
    assert len(calls) == 4 and est == pytest.approx(sum(c.cycles for c in calls), rel=1e-12)

    n, core, ddr, idma = 1000, j6.core, j6.ddr, j6.idma
    copy = transfer_cycles(  # at the values the port runs on: the policy's, quantized to ticks
        4 * n, idma.burst_bytes, min(idma.max_outstanding, ddr.max_outstanding),
        ddr.policy.latency(False), ddr.policy.cycles_per_byte,
    )
    serial = sum(
        idma.setup_cycles + copy + kernels + (idma.setup_cycles + copy if write_back else 0)
        for kernels, write_back in (
            (VECMAXF.tcm_cycles(n, core), False),
            (VECEXPF_MAX.tcm_cycles(n, core) + VECSUM.tcm_cycles(n, core), True),
            (VECMUL.tcm_cycles(n, core), True),
        )
    )
    copies.clear()
    assert bounds(j6, "pingpong", n)["estimate_cycles"] == pytest.approx(serial, rel=1e-12)
    assert copies and set(copies) == {copy}


def test_pingpong_work_does_not_grow_with_the_tiles(j6, monkeypatch):
    """Full tiles are counted once, plus the last partial one: a billion elements cost what a
    few tiles cost (kernel-cost evaluations are counted, not timed)."""
    evaluations = []
    tcm_cycles = LoopShape.tcm_cycles

    def counted(self, n, core):
        evaluations.append(n)
        return tcm_cycles(self, n, core)

    monkeypatch.setattr(LoopShape, "tcm_cycles", counted)
    per_tile = j6.softmax.tile_bytes // 4
    counts = []
    for n in (12 * per_tile + 5, 10**9):
        evaluations.clear()
        b = bounds(j6, "pingpong", n)
        counts.append(len(evaluations))
        assert b["tiles_per_pass"] == -(-n // per_tile)
        assert (b["ddr_read_bytes"], b["ddr_write_bytes"]) == (12 * n, 8 * n)
    assert counts[0] == counts[1] < 100


@given(n=st.integers(1, 5000), size=st.integers(1, 700))
def test_tiling_sums_match_the_tile_list(n, size):
    tiles = [size] * (n // size) + ([n % size] if n % size else [])
    t = _Tiling.of(n, size)
    assert t.count == len(tiles)
    assert [t.at(i) for i in range(t.count)] == tiles
    assert t.total(lambda s: s * s + 1) == sum(s * s + 1 for s in tiles)
    assert (t.parity_elems(0), t.parity_elems(1)) == (sum(tiles[0::2]), sum(tiles[1::2]))


@pytest.mark.parametrize("mode", ["pingpong", "direct"])
def test_j6_headline_is_uncontended_and_estimated_closely(j6, mode):
    b = bounds(j6, mode, 100_000)
    assert get_op("softmax").bounds(j6, mode, (100_000,)) == b  # the op-generic access
    r = run(j6, mode, 100_000)
    assert b["regime"] == "uncontended"
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.01)
    assert b["binding_bound"] == "dma"  # both versions are port-bandwidth-bound in the J6 fit


def test_j6_pingpong_sits_on_its_port_bandwidth(j6):
    """Every byte crosses the port at ddr.bytes_per_cycle; ping-pong adds only the pipeline
    fill and drain of its three passes (a few round trips and kernel calls)."""
    b = bounds(j6, "pingpong", 100_000)
    all_bytes_cycles = (b["ddr_read_bytes"] + b["ddr_write_bytes"]) / j6.ddr.bytes_per_cycle
    cycles = run(j6, "pingpong", 100_000).cycles
    assert (
        all_bytes_cycles
        <= cycles
        <= all_bytes_cycles + 3 * (2 * j6.ddr.latency_cycles + 4 * j6.idma.setup_cycles + 3_000)
    )


def test_more_latency_only_raises_the_latency_bound(j6):
    a = bounds(j6, "pingpong", 50_000)
    b = bounds(
        j6.with_overrides({"ddr.latency_cycles": 2 * j6.ddr.latency_cycles}), "pingpong", 50_000
    )
    assert b["latency_bound_cycles"] == pytest.approx(2 * a["latency_bound_cycles"])
    assert b["dma_bound_cycles"] == a["dma_bound_cycles"]
    assert b["compute_bound_cycles"] == a["compute_bound_cycles"]


@pytest.mark.parametrize(
    "mode, n, match",
    [
        ("turbo", 10, "mode"),
        ("direct", 0, "n = 0"),
        ("direct", 2.5, "n = 2.5"),
    ],
)
def test_bad_input_is_rejected(j6, mode, n, match):
    with pytest.raises(DspsimInputError, match=match):
        bounds(j6, mode, n)


def test_run_json_carries_the_bounds():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["run", "--json", "--n", "3000", "--mode", "direct"]) == 0
    obj = json.loads(buf.getvalue())
    b = obj["bounds"]
    assert b["lower_bound_cycles"] <= obj["cycles"]
    assert b["ddr_read_bytes"] == obj["bytes"]["ddr_read"]
    assert b["regime"] == "uncontended"


@pytest.mark.parametrize("settings", [{"idma.engine_bytes_per_cycle": 0.05},
                                      {"idma.engine_bytes_per_cycle": 0.1,
                                       "ddr.write_latency_cycles": 400.0},
                                      {"idma.descriptor_cycles": 2000.0}])
@pytest.mark.parametrize("op, variant, size", [
    ("softmax", "pingpong", {"n": 50000}), ("softmax", "pingpong", {"n": 3000}),
    ("softmax", "online", {"n": 50000}), ("softmax", "resident", {"n": 500000})])
def test_the_pingpong_estimates_know_the_engines_pace(j6, settings, op, variant, size):
    """An iDMA slower than its port (idma.engine_bytes_per_cycle, per channel) and its
    descriptor fetches (idma.descriptor_cycles) set a ping-pong's copies' time; the closed
    forms priced the port alone (softmax pingpong at 0.05 bytes/cycle: 2,577,453 for
    10,160,172 simulated). Each copy and the channels' joint rate now know both: within 1 %."""
    model = j6.with_overrides(settings)
    r = simulate(model, op, variant, data=False, **size)
    b = get_op(op).bounds(model, variant, r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


@pytest.mark.parametrize("settings", [{"idma.engine_bytes_per_cycle": 0.05},
                                      {"idma.engine_bytes_per_cycle": 0.2,
                                       "idma.descriptor_cycles": 100.0}])
@pytest.mark.parametrize("variant", ["online", "multibuffer"])
def test_a_one_tile_row_under_a_slow_engine_is_its_copies_in_turn(j6, settings, variant):
    """Rows of one tile (softmax online, multibuffer on 1024 x 256): each pass is serial, its
    input copy, kernels and output copy; the path form priced the input at the engine's rate and
    took the output back out at the port's, so counted it twice (+34 % at 0.05 bytes/cycle)."""
    model = j6.with_overrides(settings)
    r = simulate(model, "softmax", variant, shape=(1024, 256), data=False)
    b = get_op("softmax").bounds(model, variant, r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)



@pytest.mark.parametrize("settings", [{"idma.engine_bytes_per_cycle": 0.05},
                                      {"idma.engine_bytes_per_cycle": 0.2,
                                       "idma.descriptor_cycles": 100.0}])
def test_the_seeds_last_gap_waits_for_no_round_trip(j6, settings):
    """softmax pingpong on rows of two tiles (16 x 16384) under a slow engine: both inputs
    cross side by side, then each output on its own channel. The staged form charged the last
    gap half of tile 0's buffer round trip, though no tile 2 waits for that buffer (+20 %)."""
    model = j6.with_overrides(settings)
    r = simulate(model, "softmax", "pingpong", shape=(16, 16384), data=False)
    b = get_op("softmax").bounds(model, "pingpong", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


def test_a_two_tile_rows_last_output_overlaps_the_other_channel(j6):
    """softmax online on rows of two tiles (16 x 16384) at 0.05 bytes/cycle a channel: the
    port is idle enough that each engine paces its own channel, so the last output crosses
    beside the other channel's output. The path form took the other copies at the two
    engines' joint rate then the last output alone after them (+16.5 %)."""
    model = j6.with_overrides({"idma.engine_bytes_per_cycle": 0.05})
    r = simulate(model, "softmax", "online", shape=(16, 16384), data=False)
    b = get_op("softmax").bounds(model, "online", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


@pytest.mark.parametrize("shape", [(100000,), (1024, 256)])
def test_each_channel_fetches_its_own_descriptors(j6, shape):
    """softmax online under an engine that fetches each descriptor in 20,000 cycles: a channel's
    copies take its bytes at its engine's pace plus a fetch per descriptor on it; the lanes
    term priced the bytes alone (6.5 % low on 100,000)."""
    model = j6.with_overrides({"idma.engine_bytes_per_cycle": 0.1,
                               "idma.descriptor_cycles": 20000.0})
    r = simulate(model, "softmax", "online", shape=shape, data=False)
    b = get_op("softmax").bounds(model, "online", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


@pytest.mark.parametrize("op, variant, size", [("softmax", "pingpong", {"n": 100000}),
                                               ("layernorm", "pingpong", {"shape": (1024, 256)})])
def test_the_seeds_channels_fetch_their_own_descriptors(j6, op, variant, size):
    """The seed's ping-pong under an engine that fetches each descriptor in 20,000 cycles: a
    channel carries its copies' bytes at its engine's pace and a fetch per copy; the path form
    priced the bytes alone (softmax 4.4 % low)."""
    model = j6.with_overrides({"idma.engine_bytes_per_cycle": 0.1,
                               "idma.descriptor_cycles": 20000.0})
    r = simulate(model, op, variant, data=False, **size)
    b = get_op(op).bounds(model, variant, r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


@pytest.mark.parametrize("settings", [{}, {"idma.engine_bytes_per_cycle": 0.5,
                                           "idma.descriptor_cycles": 100.0}])
@pytest.mark.parametrize("shape", [(33, 256), (9, 1024)])
def test_a_last_pass_of_two_tiles_waits_for_its_last_output_only(j6, settings, shape):
    """layernorm pingpong on a tile and a row: the frame waits for the last output only, and no
    third tile refills tile 0's buffer, so nothing waits for tile 0's output; the staged form
    charged half of its round trip (+38 % on 33 x 256)."""
    model = j6.with_overrides(settings)
    r = simulate(model, "layernorm", "pingpong", shape=shape, data=False)
    b = get_op("layernorm").bounds(model, "pingpong", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.04)


def test_the_prefetch_is_programmed_while_the_output_crosses():
    """The descriptor-bound J6 (2,583 setup cycles a descriptor) under a 0.2 bytes/cycle engine:
    a buffer's round trip is tile j's kernels, its output's descriptor, then its output copy
    while the core programs tile j + 2's input, then that input. The staged form charged both
    descriptors before the output (softmax pingpong +14.6 %)."""
    model = load_model("j6_descriptor_bound").with_overrides(
        {"idma.engine_bytes_per_cycle": 0.2, "idma.descriptor_cycles": 100.0})
    r = simulate(model, "softmax", "pingpong", n=50000, data=False)
    b = get_op("softmax").bounds(model, "pingpong", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)


@pytest.mark.parametrize("n", [20000, 50000])
def test_the_output_channel_waits_for_the_first_tile(j6, n):
    """softmax multibuffer (inputs on channel 0, outputs on channel 1) at 0.05 bytes/cycle a
    channel: the output channel carries its copies only after the first tile is in and
    computed. The path form let it start at once (11 % low on 20,000)."""
    model = j6.with_overrides({"idma.engine_bytes_per_cycle": 0.05})
    r = simulate(model, "softmax", "multibuffer", n=n, data=False)
    b = get_op("softmax").bounds(model, "multibuffer", r.shape)
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=0.01)
