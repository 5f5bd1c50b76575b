"""An op file's loop with its own vector width and call cost (``loop = { ..., lanes = L,
call_overhead_cycles = C }``): one call on TCM is the closed form of
:mod:`dspsim.kernels.shapes` with the loop's values, a run against DDR reads vectors of
``4 L`` bytes, and the bounds and estimate use the same values as the run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.ops.fileop import load_op_file, unload_op_file

OP = """[op]
name = "{name}"
ndim = 1
default_shape = [4096]

[[array]]
name = "x"
shape = ["n"]
role = "input"

[[array]]
name = "y"
shape = ["n"]
role = "output"

[[pass]]
name = "peak"
reads = "x"
reduce = {{ op = "max", into = "m" }}
value = "x"
loop = {{ loads = {loads}, alu = {alu}{peak} }}

[[pass]]
name = "scale"
reads = "x"
writes = "y"
value = "x - m"
loop = {{ loads = 1, stores = 1, alu = 1{scale} }}

[schedules]
variants = ["pingpong", "direct"]
"""


@pytest.fixture
def op_file(tmp_path):
    """Write and load an op file of two loop passes; forget it after."""
    paths: list[Path] = []

    def load(name: str, loads: int = 1, alu: int = 1, peak: str = "", scale: str = "") -> str:
        path = tmp_path / f"{name}.toml"
        path.write_text(OP.format(name=name, loads=loads, alu=alu, peak=peak, scale=scale))
        paths.append(path)
        return load_op_file(path)

    yield load
    for p in paths:
        unload_op_file(p)


def _closed_form(n: int, lanes: int, overhead: int, loads: int, alu: int, core) -> int:
    """shapes.py: call_overhead + iterations x II + reduction ops x ALU latency, the last
    iteration predicated; a max reduction's tree is 1 + log2(lanes) dependent ops."""
    iterations = math.ceil(n / (loads * lanes))
    ii = max(1, math.ceil(loads / core.load_store_units), math.ceil(alu / core.vector_alu_slots))
    return overhead + iterations * ii + (1 + int(math.log2(lanes))) * core.alu_latency_cycles


@pytest.mark.parametrize("lanes, overhead, loads, alu, n", [
    (4, 0, 1, 1, 1000), (8, 7, 2, 5, 1001), (32, 30, 1, 1, 4096), (64, 500, 4, 9, 777),
    (1, 12, 1, 2, 33), (256, 100_000, 2, 1, 5000)])
def test_one_call_on_tcm_is_the_closed_form_of_its_own_lanes_and_overhead(
        j6, op_file, lanes, overhead, loads, alu, n):
    name = op_file(f"lo{lanes}_{overhead}", loads, alu,
                   peak=f", lanes = {lanes}, call_overhead_cycles = {overhead}")
    r = simulate(j6, "kernel", f"{name}.peak", n=n)
    assert r.cycles == _closed_form(n, lanes, overhead, loads, alu, j6.core)


def test_without_the_keys_a_loop_is_the_cores(j6, op_file):
    core = j6.core
    name = op_file("core_loop", 2, 4)
    r = simulate(j6, "kernel", f"{name}.peak", n=3000)
    assert r.cycles == _closed_form(3000, core.lanes_f32, core.call_overhead_cycles, 2, 4, core)


@pytest.mark.parametrize("variant", ["direct", "pingpong"])
def test_the_cores_own_values_given_in_the_file_change_nothing(j6, op_file, variant):
    core = j6.core
    same = f", lanes = {core.lanes_f32}, call_overhead_cycles = {core.call_overhead_cycles}"
    base, given = op_file("plain_op"), op_file("given_op", peak=same, scale=same)
    a = simulate(j6, base, variant, n=5000, data=False)
    b = simulate(j6, given, variant, n=5000, data=False)
    assert a.cycles == b.cycles
    ba, bb = (get_op(o).bounds(j6, variant, (5000,)) for o in (base, given))
    assert ba == bb


def test_a_narrow_costly_loop_against_ddr_reads_its_own_vectors(j6, op_file):
    """direct, every load from DDR: each call's priming load reads one vector of the loop
    (4 x lanes bytes), so the two calls read 2 x 4 n + 2 x 4 lanes; each call's overhead adds
    to the run; the estimate (the closed-form walk) is the run's cycles and its lower bound is
    below them, with the loop's values as the run has them."""
    core, n, lanes, extra = j6.core, 5000, 8, 250
    override = f", lanes = {lanes}, call_overhead_cycles = {core.call_overhead_cycles + extra}"
    base, narrow = op_file("wide_op"), op_file("narrow_op", peak=override, scale=override)
    costly = op_file("costly_op", peak=f", call_overhead_cycles = "
                     f"{core.call_overhead_cycles + extra}")
    a = simulate(j6, base, "direct", n=n, data=False)
    b = simulate(j6, narrow, "direct", n=n, data=False)
    c = simulate(j6, costly, "direct", n=n, data=False)
    assert a.bytes["ddr_read"] == 2 * 4 * n + 2 * core.vector_bytes
    assert b.bytes["ddr_read"] == 2 * 4 * n + 2 * 4 * lanes
    assert c.cycles == a.cycles + extra
    for op, r in ((narrow, b), (costly, c)):
        bounds = get_op(op).bounds(j6, "direct", (n,))
        assert bounds["ddr_read_bytes"] == r.bytes["ddr_read"]
        assert bounds["estimate_cycles"] == pytest.approx(r.cycles, abs=1)
        assert bounds["lower_bound_cycles"] <= r.cycles


def test_a_pingpong_run_pays_the_loops_overhead_per_call(j6, op_file):
    """pingpong with the whole input in one tile: one call per pass, so the scale pass's
    overhead adds to the run once (the port idle meanwhile)."""
    core, extra = j6.core, 1000
    base = op_file("pp_base")
    costly = op_file("pp_costly", scale=f", call_overhead_cycles = "
                     f"{core.call_overhead_cycles + extra}")
    a = simulate(j6, base, "pingpong", n=4096, data=False)
    b = simulate(j6, costly, "pingpong", n=4096, data=False)
    assert 4 * 4096 <= j6.get("pp_costly.tile_bytes")
    assert b.cycles - a.cycles == extra
    assert get_op(costly).bounds(j6, "pingpong", (4096,))["lower_bound_cycles"] <= b.cycles


@pytest.mark.parametrize("key, match", [
    ("lanes = 12", "loop.lanes = 12: allowed a power of two"),
    ("lanes = 0", "loop.lanes = 0: allowed 1 to 256"),
    ("lanes = 512", "loop.lanes = 512: allowed 1 to 256"),
    ("call_overhead_cycles = -1", "loop.call_overhead_cycles = -1: allowed 0 to 100000"),
    ("lanes = 4.0", "lanes"),
])
def test_a_bad_lanes_or_overhead_is_one_line(op_file, key, match):
    with pytest.raises(DspsimInputError, match=match) as e:
        op_file("bad_loop", peak=", " + key)
    assert "\n" not in str(e.value)


def test_tile_fidelitys_closed_form_call_uses_the_loops_values(j6, op_file):
    """At tile fidelity an uncached call alone on the port is one event, its length the
    closed-form walk: with the loop's lanes and overhead it is the burst walk's cycles."""
    override = ", lanes = 8, call_overhead_cycles = 280"
    name = op_file("tile_op", peak=override, scale=override)
    burst = simulate(j6, name, "direct", n=50_000, data=False, fidelity="burst")
    tile = simulate(j6, name, "direct", n=50_000, data=False, fidelity="tile")
    assert tile.cycles == burst.cycles
    assert tile.bytes["ddr_read"] == burst.bytes["ddr_read"] == 2 * 4 * 50_000 + 2 * 32


@pytest.mark.parametrize("units", [1, 2, 3])
@pytest.mark.parametrize("c, n", [(0.37, 1001), (2.5, 77), (0.125, 4096), (1.0, 1)])
def test_a_measured_cost_is_its_cycles_per_element_on_any_core(j6, tmp_path, units, c, n):
    """cycles_per_element = c: one call on TCM takes call_overhead + ceil(n c) cycles, whatever
    the core's load/store units (one vector load and store an iteration does not set the II)."""
    path = tmp_path / "measured.toml"
    path.write_text(OP.split("[[pass]]")[0].format(name="measured")
                    + '[[pass]]\nname = "scale"\nreads = "x"\nwrites = "y"\nvalue = "x * 2"\n'
                    f"cycles_per_element = {c}\n")
    name = load_op_file(path)
    try:
        m = j6.with_overrides({"core.load_store_units": units})
        r = simulate(m, "kernel", f"{name}.scale", n=n)
    finally:
        unload_op_file(path)
    assert r.cycles == m.core.call_overhead_cycles + math.ceil(n * c)
