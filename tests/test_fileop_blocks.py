"""2-D blocks of an op file (dspsim.ops.fileop.program): a vertical filter's blocks carry
their halo rows through 2-D iDMA descriptors, give the float64 reference's values, read
exactly the bytes the blocks cover, stay above their lower bound, and refuse in one line what
cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.ops.fileop import load_op_file, unload_op_file
from dspsim.study.optimize import optimize
from tests.fileop_helpers import op_text

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ops"
COL_FILTER = EXAMPLES / "col_filter.toml"


@pytest.fixture(scope="module")
def name():
    yield load_op_file(COL_FILTER)
    unload_op_file(COL_FILTER)


def vertical(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    y = 0.5 * x
    y[1:] += 0.25 * x[:-1]
    y[:-1] += 0.25 * x[1:]
    return y


@pytest.mark.parametrize("block_cols, tile", [(0, 32768), (64, 4096), (48, 1024), (100, 2400)])
@pytest.mark.parametrize("variant", ["pingpong", "direct"])
def test_the_blocks_give_the_filters_values(j6, name, variant, block_cols, tile):
    m = j6.with_overrides({"col_filter.block_cols": block_cols, "col_filter.tile_bytes": tile})
    x = np.random.default_rng(3).standard_normal((20, 100)).astype(np.float32)
    r = simulate(m, name, variant, x=x)
    assert np.allclose(r.output_array, vertical(x), rtol=1e-6, atol=1e-6)
    assert r.output["within_tolerance"]
    assert get_op(name).bounds(m, variant, (20, 100))["lower_bound_cycles"] <= r.cycles


def test_the_blocks_read_their_halo_rows_once_more(j6, name):
    """64 columns in 4 KiB: 16 rows a buffer, 14 output rows and one halo row either side;
    rows 0:14 read 0:15, rows 14:20 read 13:20, in two column blocks: 22 of 20 rows read."""
    m = j6.with_overrides({"col_filter.block_cols": 64, "col_filter.tile_bytes": 4096})
    r = simulate(m, name, "pingpong", shape=(20, 100), data=False)
    b = get_op(name).bounds(m, "pingpong", (20, 100))
    assert r.bytes["ddr_read"] == b["ddr_read_bytes"] == 4 * 100 * (15 + 7)
    assert r.bytes["ddr_write"] == 4 * 20 * 100
    assert (b["blocks"], b["block_rows"], b["halo_rows"]) == (4, 14, 1)


def test_narrower_blocks_read_less_halo(j6, name):
    whole = simulate(j6.with_overrides({"col_filter.block_cols": 0}), name, "pingpong",
                     shape=(96, 1920), data=False, fidelity="tile")
    narrow = simulate(j6.with_overrides({"col_filter.block_cols": 64}), name, "pingpong",
                      shape=(96, 1920), data=False, fidelity="tile")
    assert narrow.bytes["ddr_read"] < whole.bytes["ddr_read"]
    assert narrow.cycles < whole.cycles


def test_a_tile_that_holds_no_block_is_refused(j6, name):
    m = j6.with_overrides({"col_filter.block_cols": 512, "col_filter.tile_bytes": 4096})
    with pytest.raises(DspsimInputError, match=r"col_filter.tile_bytes >= 6144") as e:
        simulate(m, name, "pingpong", shape=(10, 1000), data=False)
    assert "\n" not in str(e.value)


def test_shift_rows_with_a_reduction_or_nbuffer_is_refused(tmp_path):
    text = COL_FILTER.read_text().replace('name = "col_filter"', 'name = "cf_bad"')
    base, tail = text.split("[schedules]")
    cases = [
        (base + '[[pass]]\nname = "m"\nreads = "out"\nreduce = { op = "max", into = "m" }\n'
         'kernel = "vecmaxf"\n\n[schedules]' + tail.replace(
             'block_cols = { default = 512, min = 0, max = 8192 }\n', ''),
         "reduces in an op whose values read other rows"),
        (text.replace('variants = ["pingpong", "direct"]',
                      'variants = ["pingpong", "nbuffer"]'), "nbuffer runs whole-row tiles"),
        (text.replace('ndim = 2', 'ndim = 1').replace('["rows", "cols"]', '["n"]')
         .replace('default_shape = [480, 1920]', 'default_shape = [100]')
         .replace('block_cols = { default = 512, min = 0, max = 8192 }\n', ''),
         "need a 2-D op"),
    ]
    for i, (bad, match) in enumerate(cases):
        path = tmp_path / f"bad{i}.toml"
        path.write_text(bad)
        with pytest.raises(DspsimInputError, match=match) as e:
            load_op_file(path)
        assert str(path) in str(e.value) and "\n" not in str(e.value)


SQUARE = op_text("square2d", """[[pass]]
name = "sq"
reads = "x"
writes = "y"
value = "x * x"
loop = { loads = 1, stores = 1, alu = 1 }
[schedules]
variants = ["pingpong", "direct", "nbuffer"]
tile_bytes = 8192
""")


def test_rows_longer_than_a_tile_run_in_column_blocks(j6, tmp_path):
    path = tmp_path / "sq.toml"
    path.write_text(SQUARE)
    name = load_op_file(path)
    try:
        with pytest.raises(DspsimInputError, match=r"square2d.block_cols > 0 \(2-D blocks"):
            simulate(j6, name, "pingpong", shape=(8, 3000), data=False)
        m = j6.with_overrides({"square2d.block_cols": 500})
        x = np.random.default_rng(5).standard_normal((8, 3000)).astype(np.float32)
        r = simulate(m, name, "pingpong", x=x)
        assert np.array_equal(r.output_array, x * x)
        assert r.bytes["ddr_read"] == r.bytes["ddr_write"] == 4 * 8 * 3000  # no halo
        with pytest.raises(DspsimInputError, match="nbuffer runs whole-row tiles"):
            simulate(m, name, "nbuffer", x=x)
    finally:
        unload_op_file(path)


TWO_SHIFTS = op_text("down_twice", """[[pass]]
name = "a"
reads = "x"
writes = "y"
value = "shift_rows(x, 1) + x"
loop = { loads = 1, stores = 1, alu = 1, table_loads = 1 }
[[pass]]
name = "b"
reads = "y"
writes = "y"
value = "shift_rows(y, 1) + y"
loop = { loads = 1, stores = 1, alu = 1, table_loads = 1 }
[schedules]
variants = ["pingpong", "direct"]
tile_bytes = 2048
""")


def test_chained_shift_rows_passes_get_the_halo_of_both(j6, tmp_path):
    """Pass b reads pass a's rows one further down, in place in the block: a block's middle
    rows need 1 + 1 rows of halo, not the larger of the two (which left 1,216 of 40 x 64
    wrong)."""
    path = tmp_path / "twice.toml"
    path.write_text(TWO_SHIFTS)
    name = load_op_file(path)
    try:
        x = np.random.default_rng(7).standard_normal((40, 64)).astype(np.float64)
        a = x.copy()
        a[:-1] += x[1:]
        want = a.copy()
        want[:-1] += a[1:]
        for variant in ("pingpong", "direct"):
            r = simulate(j6, name, variant, x=x.astype(np.float32))
            assert np.allclose(r.output_array, want, rtol=1e-5, atol=1e-5), variant
        assert get_op(name).bounds(j6, "pingpong", (40, 64))["halo_rows"] == 2
    finally:
        unload_op_file(path)


def test_a_long_images_reference_is_built_with_its_halo_rows(j6, name):
    """The reference is built a block of rows at a time (2^18 elements): each block carries the
    rows shift_rows reads beside it, so the exact answer of a 4 x 70,000 image (280,000
    elements) has no error (it had 17,856 'wrong' at the second block's edge)."""
    x = np.random.default_rng(11).standard_normal((4, 70_000)).astype(np.float32)
    op = get_op(name)
    params = j6.params(name)
    exact = vertical(x).astype(np.float32)
    summary = op.output_summary(exact, x, params)
    assert summary["wrong_count"] == 0 and summary["max_rel_err"] < 1e-6


def test_optimize_searches_the_tiles_of_blocks_narrower_than_a_row(j6, name):
    """A row of 70,000 float32 fits no DataRAM, but blocks narrower than a row run in any tile
    that holds one with its halo: optimize searches those tiles (it searched none)."""
    space = get_op(name).search_space(j6, "pingpong", (4, 70_000))
    narrowest = min(w for w in space["col_filter.block_cols"] if w)  # 3 rows of it in a tile
    assert min(space["col_filter.tile_bytes"]) >= 4 * narrowest * 3
    assert {8192, 32768} <= set(space["col_filter.tile_bytes"])


def test_optimize_searches_block_cols(j6, name):
    """pingpong's 2-D blocks: whole rows (0), the powers of two from a burst's 16 columns below
    the row, and the model's 512, within col_filter's declared 0..8192 (it searched none)."""
    op = get_op(name)
    assert op.search_space(j6, "pingpong", (480, 1920))["col_filter.block_cols"] == [
        0, 16, 32, 64, 128, 256, 512, 1024]
    assert op.search_space(j6, "pingpong", (4, 70_000))["col_filter.block_cols"][-1] == 8192
    assert "col_filter.block_cols" not in op.search_space(j6, "direct", (480, 1920))
    found = optimize(name, shape=(24, 96), variants="pingpong", model=j6, top=1,
                     check_numerics=False, progress=False)
    widths = {c.params["col_filter.block_cols"] for c in found.screened}
    assert {0, 16, 32, 64} <= widths and all(c.cycles for c in found.screened)


def test_nested_shift_rows_reach_the_sum_of_their_shifts(j6, tmp_path):
    """shift_rows(shift_rows(x, 1), 1) reads two rows down: its blocks need a halo of 2 (it
    had 1, and 808 of 70 x 101 elements were wrong)."""
    path = tmp_path / "nested.toml"
    path.write_text(TWO_SHIFTS.replace('name = "down_twice"', 'name = "down_nested"').replace(
        'value = "shift_rows(x, 1) + x"', 'value = "shift_rows(shift_rows(x, 1), 1)"'))
    name = load_op_file(path)
    try:
        x = np.random.default_rng(9).standard_normal((40, 64)).astype(np.float32)
        r = simulate(j6, name, "pingpong", x=x)
        a = np.zeros_like(x)
        a[:-2] = x[2:]
        want = a.copy()
        want[:-1] += a[1:]
        assert np.allclose(r.output_array, want, rtol=1e-6, atol=1e-6)
        assert r.output["wrong_count"] == 0
    finally:
        unload_op_file(path)


def test_the_tile_key_says_a_tile_may_hold_a_block(name):
    """col_filter's tiles hold 2-D blocks narrower than a row: its tile key said whole rows."""
    key = next(k for k in get_op(name).params.keys if k.name == "col_filter.tile_bytes")
    assert "2-D block" in key.doc


FAST = {"ddr.bytes_per_cycle": 16.0}


@pytest.mark.parametrize("extra", [{}, {"idma.engine_bytes_per_cycle": 1.0},
                                   FAST | {"idma.engine_bytes_per_cycle": 1.0},
                                   FAST | {"idma.engine_bytes_per_cycle": 0.25,
                                           "idma.descriptor_cycles": 200.0}])
def test_the_block_estimate_follows_the_engines_pace(j6, name, extra):
    """An iDMA engine slower than the port paces every block's copies: the estimate ignored it
    (64 x 640 in 128-column blocks: 22,132 cycles estimated, 721,728 simulated)."""
    m = j6.with_overrides({"col_filter.block_cols": 128, "col_filter.tile_bytes": 8192, **extra})
    r = simulate(m, name, "pingpong", shape=(64, 640), data=False)
    b = get_op(name).bounds(m, "pingpong", (64, 640))
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.02)


def test_the_engines_descriptor_fetches_raise_the_port_bound_estimate(j6, name):
    """Two blocks on a fast port: the run waits for the engine's fetch of the first input's and
    the last output's descriptors, 2 x 500 cycles more; the estimate did not move."""
    runs, estimates = [], []
    for fetch in (0.0, 500.0):
        m = j6.with_overrides({"col_filter.block_cols": 512, "ddr.bytes_per_cycle": 16.0,
                               "idma.descriptor_cycles": fetch})
        runs.append(simulate(m, name, "pingpong", shape=(40, 300), data=False).cycles)
        estimates.append(get_op(name).bounds(m, "pingpong", (40, 300))["estimate_cycles"])
    assert runs[1] - runs[0] == estimates[1] - estimates[0] == 1000
