"""The LayerNorm operator through the simulator: values, traffic, bounds, hazards, refusals."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import DspsimInputError, simulate
from dspsim.ops import get_op

VARIANTS = ("pingpong", "direct")
LN = get_op("layernorm")


def reference(x, eps=1e-5):
    x64 = x.astype(np.float64)
    return (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + eps)


def within_tolerance(y, ref):
    return np.all(np.abs(y.astype(np.float64) - ref) <= np.maximum(1e-5 * np.abs(ref), 1e-6))


RNG = np.random.default_rng(7)
INPUTS = {
    "normal": RNG.normal(0, 1, (24, 256)),
    "normal_sigma10": RNG.normal(0, 10, (24, 100)),
    "large_offset": 1000 + RNG.normal(0, 1, (24, 256)),
    "huge_offset": 1e5 + RNG.normal(0, 3, (8, 300)),
    "uniform": RNG.uniform(0, 1, (24, 33)),
    "constant_rows": np.full((5, 256), 3.3),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_output_is_within_tolerance_of_float64(j6, variant, name):
    x = INPUTS[name].astype(np.float32)
    r = simulate(j6, op="layernorm", variant=variant, x=x, fidelity="tile")
    assert r.output_array.shape == x.shape
    assert within_tolerance(r.output_array, reference(x))
    assert r.output["within_tolerance"] and r.output["nan_count"] == 0
    if name == "constant_rows":
        assert np.all(np.abs(r.output_array) <= 1e-6)


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 130), offset=st.sampled_from([0.0, 50.0, -3e3]),
       sigma=st.sampled_from([1e-2, 1.0, 10.0]), seed=st.integers(0, 2**16))
def test_any_shape_any_tiling_is_accurate(j6, rows, cols, offset, sigma, seed):
    x = (offset + np.random.default_rng(seed).normal(0, sigma, (rows, cols))).astype(np.float32)
    tile = 4 * cols * int(np.random.default_rng(seed).integers(1, 4))  # 1 to 3 rows per tile
    r = simulate(j6, op="layernorm", x=x, params={"tile_bytes": tile}, fidelity="tile")
    assert within_tolerance(r.output_array, reference(x))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fidelity", ["burst", "tile"])
def test_traffic_matches_the_closed_form_and_no_run_beats_its_bound(j6, variant, fidelity):
    shape = (37, 200)
    model = j6.with_overrides({"layernorm.tile_bytes": 8 * 800 + 100})  # 8 rows a tile
    r = simulate(model, op="layernorm", variant=variant, shape=shape, fidelity=fidelity)
    b = LN.bounds(model, variant, shape)
    assert (r.bytes["ddr_read"], r.bytes["ddr_write"]) == (b["ddr_read_bytes"],
                                                          b["ddr_write_bytes"])
    tensor = 4 * 37 * 200
    if variant == "pingpong":
        assert r.bytes["ddr_read"] == r.bytes["ddr_write"] == tensor
        assert b["tiles"] == 5
    else:  # three reads of every row (plus the kernels' priming loads), one write
        assert r.bytes["ddr_write"] == tensor and r.bytes["ddr_read"] >= 3 * tensor
    assert r.cycles >= b["lower_bound_cycles"] * (1 - 1e-9)
    assert not r.hazards


def test_pingpong_is_near_its_dma_bound_at_the_default_shape(j6):
    r = simulate(j6, op="layernorm", data=False)
    b = LN.bounds(j6, "pingpong", r.shape)
    assert r.shape == (1024, 256) and b["binding_bound"] == "dma"
    assert b["lower_bound_cycles"] <= r.cycles <= 1.05 * b["lower_bound_cycles"]


def test_direct_matches_its_closed_form_walk(j6):
    r = simulate(j6, op="layernorm", variant="direct", shape=(16, 96), data=False)
    est = LN.bounds(j6, "direct", (16, 96))["estimate_cycles"]
    assert r.cycles == pytest.approx(est, rel=0.03)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(x=np.zeros(10, np.float32)), "expected a 2-D array"),
        (dict(n=1000), "ROWS,COLS"),
        (dict(shape=(4, 0)), "two positive integers"),
        (dict(shape=(2, 100_000)), "larger than a DataRAM.s free space"),
        (dict(shape=(2, 10_000)), "must hold a row"),
        (dict(variant="online"), "allowed: pingpong, direct"),
        (dict(params={"eps": -1.0}), "allowed range"),
    ],
)
def test_bad_input_is_one_line(j6, kwargs, message):
    with pytest.raises(DspsimInputError, match=message) as e:
        simulate(j6, op="layernorm", **kwargs)
    assert "\n" not in str(e.value)


def test_a_row_too_long_for_a_tile_runs_direct(j6):
    r = simulate(j6, op="layernorm", variant="direct", shape=(2, 100_000), data=False,
                 fidelity="tile")
    assert r.cycles > 0 and r.bytes["ddr_write"] == 4 * 2 * 100_000
