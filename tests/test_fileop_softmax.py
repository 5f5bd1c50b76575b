"""An op file of the seed's softmax (examples/ops/softmax.toml) against the Python op: the
same cycles (the brief asks 1 %: the kernels and frames are the same, so they are equal) and
the same values, over sizes, tiles and both variants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dspsim import simulate
from dspsim.ops import get_op
from dspsim.ops.fileop import load_op_file, unload_op_file

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ops" / "softmax.toml"


@pytest.fixture(scope="module")
def name():
    yield load_op_file(EXAMPLE)
    unload_op_file(EXAMPLE)  # other tests see the registered ops only


def _pair(j6, name, variant, n, tile, data, fidelity="burst"):
    m = j6.with_overrides({f"{name}.tile_bytes": tile, "softmax.tile_bytes": tile})
    a = simulate(m, name, variant, n=n, data=data, fidelity=fidelity)
    b = simulate(m, "softmax", variant, n=n, data=data, fidelity=fidelity)
    return a, b


@pytest.mark.parametrize("variant", ["pingpong", "direct"])
@pytest.mark.parametrize("n", [10**3, 10**4, 10**5, 10**6])
@pytest.mark.parametrize("tile", [1000, 1024, 32768, 245760])  # any multiple of 4 that fits
def test_cycles_within_one_percent_of_the_python_op(j6, name, variant, n, tile):
    a, b = _pair(j6, name, variant, n, tile, data=False)
    assert abs(a.cycles - b.cycles) <= 0.01 * b.cycles
    assert a.cycles == b.cycles  # the same kernels through the same frame
    assert a.bytes == b.bytes


def test_the_smallest_tile_gives_the_python_ops_cycles(j6, name):
    a, b = _pair(j6, name, "pingpong", 1000, 4, data=False, fidelity="tile")
    assert a.cycles == b.cycles


@pytest.mark.parametrize("variant", ["pingpong", "direct"])
@pytest.mark.parametrize("n", [10**3, 10**4])
def test_values_are_the_python_ops(j6, name, variant, n):
    a, b = _pair(j6, name, variant, n, 4096, data=True)
    assert np.array_equal(a.output_array, b.output_array)
    assert a.output["max_rel_err"] == b.output["max_rel_err"] < 1e-6


@pytest.mark.parametrize("variant", ["pingpong", "direct"])
def test_bounds_are_the_python_ops(j6, name, variant):
    mine = get_op(name).bounds(j6, variant, (100_000,))
    seed = get_op("softmax").bounds(j6, variant, (100_000,))
    for k in ("lower_bound_cycles", "dma_bound_cycles", "compute_bound_cycles",
              "ddr_read_bytes", "ddr_write_bytes"):
        assert mine[k] == pytest.approx(seed[k], rel=1e-9), k
    assert mine["estimate_cycles"] == pytest.approx(seed["estimate_cycles"], rel=1e-3)


def test_loading_again_returns_the_same_op(name):
    assert load_op_file(EXAMPLE) == name == "softmax_file"
