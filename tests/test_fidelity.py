"""Tile fidelity against burst fidelity, and its closed forms against the burst-level walk."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.hw.ddr import transfer_cycles
from dspsim.kernels.shapes import KERNELS
from dspsim.run import simulate
from tests.test_engine import make_dsp, reference_copy_cycles, run_proc

GRID = [
    *(("pingpong", tile, lat, k, bw, 64) for tile, lat, k, bw in itertools.product(
        [4096, 16384, 65536], [20.0, 114.0, 600.0], [1, 4, 32], [0.388, 4.0, 32.0])),
    *(("direct", 32768, lat, 32, bw, 64) for lat, bw in itertools.product(
        [20.0, 114.0, 600.0], [0.388, 4.0, 32.0])),
    # the port's own request slots: shared by both channels, and by loads and posted stores
    *((mode, 16384, lat, 32, bw, slots) for mode, lat, bw, slots in itertools.product(
        ["pingpong", "direct"], [20.0, 600.0], [0.388, 32.0], [1, 2, 8])),
]
UNCONTENDED = 0.02  # the burst run's DDR contention below 2 % of its cycles


@pytest.fixture(scope="module")
def agreement(j6):
    rows = []
    for mode, tile, lat, k, bw, slots in GRID:
        m = j6.with_overrides({"softmax.tile_bytes": tile, "ddr.latency_cycles": lat,
                               "idma.max_outstanding": k, "ddr.bytes_per_cycle": bw,
                               "ddr.max_outstanding": slots})
        burst = simulate(m, variant=mode, n=20_000, data=False, elide=False)
        tile_run = simulate(m, variant=mode, n=20_000, data=False, fidelity="tile")
        rows.append({
            "point": (mode, tile, lat, k, bw, slots),
            "error": tile_run.cycles / burst.cycles - 1.0,
            "contention": burst.ddr_contention_cycles / burst.cycles,
            "events": (burst.events, tile_run.events),
            "bytes_equal": burst.bytes == tile_run.bytes,
        })
    return rows


def test_tile_agrees_with_burst_where_the_port_is_not_contended(agreement):
    quiet = [r for r in agreement if r["contention"] < UNCONTENDED]
    assert len(quiet) >= 30  # the grid really covers uncontended points of both versions
    assert {r["point"][0] for r in quiet} == {"pingpong", "direct"}
    worst = max(quiet, key=lambda r: abs(r["error"]))
    assert abs(worst["error"]) <= 0.02, worst


def test_worst_contended_disagreement_is_reported_and_bounded(agreement):
    contended = [r for r in agreement if r["contention"] >= UNCONTENDED]
    worst = max(contended, key=lambda r: abs(r["error"]))
    print(f"\nworst contended point {worst['point']}: tile - burst = {worst['error']:+.1%} "
          f"(contention {worst['contention']:.0%} of cycles)")
    assert abs(worst["error"]) <= 0.15, worst


def test_tile_moves_the_same_bytes_in_far_fewer_events(agreement):
    assert all(r["bytes_equal"] for r in agreement)
    for r in agreement:
        burst_events, tile_events = r["events"]
        assert tile_events * 5 < burst_events, r


@settings(max_examples=200, deadline=None)
@given(nbytes=st.integers(1, 200_000), burst=st.sampled_from([16, 64, 128, 256, 4096]),
       window=st.integers(1, 64), latency=st.floats(1, 2000), bw=st.floats(0.01, 128))
def test_transfer_closed_form_equals_the_burst_recursion(nbytes, burst, window, latency, bw):
    expected = reference_copy_cycles(nbytes, burst, window, latency, bw, window)
    assert transfer_cycles(nbytes, burst, window, latency, 1 / bw) == pytest.approx(
        expected, rel=1e-9)


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("n", [1, 31, 64, 1000, 4097])
def test_direct_kernel_closed_form_equals_the_walk(j6, name, n):
    """A kernel alone on the port: one timeout at tile fidelity, the burst walk otherwise."""
    cycles = {}
    for fidelity in ("burst", "tile"):
        env, dsp = make_dsp(j6, fidelity=fidelity)
        x = dsp.ddr.add_block(4 * n + 256, 4096)
        z = dsp.ddr.add_block(4 * n + 256, 4096)
        if name in ("vecmaxf", "vecsum"):
            gen = dsp.core.call(name, n, x)
        elif name == "vecexpf_max":
            gen = dsp.core.call(name, n, x, z, max_value=0.0)
        else:
            gen = dsp.core.call(name, n, x, z, scalar=0.5)
        cycles[fidelity] = run_proc(env, dsp, gen)["cycles"]
    assert cycles["tile"] == pytest.approx(cycles["burst"], rel=1e-9, abs=1e-6)
