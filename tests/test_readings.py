"""Readings of the J6 figures: the classification, the shipped model files, a small explore."""

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from itertools import combinations

import pytest

from dspsim.cli import main
from dspsim.config import load_model, models_dir
from dspsim.run import simulate
from dspsim.study.calibrate import Measurement, classify, explore, seed_measurements
from dspsim.study.calibrate.explore import (
    Space,
    explore_space,
    log_grid,
    reading_name,
    reading_of,
    thin,
)
from dspsim.study.calibrate.problem import run_key
from dspsim.study.calibrate.readings import explore_candidates

READINGS = sorted(p.stem for p in models_dir().glob("j6*.toml"))
EXPECTED = {
    "j6": ("port", "port"),
    "j6_outstanding_bound": ("outstanding", "outstanding"),
    "j6_descriptor_bound": ("descriptor", "outstanding"),
}
# what `dspsim calibrate --explore` proposes on the document's figures
SEPARATING = Measurement("pingpong", float("nan"), 64, {"softmax.tile_bytes": 256})


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_reading_is_shipped():
    assert set(EXPECTED) <= set(READINGS)


@pytest.mark.parametrize("name", READINGS)
def test_each_reading_reproduces_the_document_within_1_pct(name):
    model = load_model(name)  # a packaged name resolves like j6
    assert model.name == name
    for m in seed_measurements():
        cycles = simulate(model, m.op, m.variant, shape=m.shape, data=False).cycles
        assert abs(cycles / m.cycles - 1) <= 0.01, (name, m.label(), cycles)


@pytest.mark.parametrize("name", [n for n in READINGS if n != "j6"])
def test_reading_files_are_partial_and_every_key_is_labelled(name):
    text = (models_dir() / f"{name}.toml").read_text()
    assert re.search(r'^base = "j6"$', text, re.M)
    assert "reading of the same two figures" in " ".join(text.split())
    for line in text.splitlines():
        if re.match(r"^\s*[a-z_]+\s*=", line) and not line.startswith(("base", "name")):
            assert re.search(r"#\s*(fitted|inferred|guess|fact|derived)", line), line
    assert "fitted (reading:" in text and "dspsim calibrate --explore" in text
    j6 = load_model("j6").flat()
    differ = {k for k, v in load_model(name).flat().items() if v != j6[k]}
    keys = {f"{s}.{k}" for s, k in re.findall(r"^\[(\w+)\][^\[]*?^(\w+)\s*=", text, re.M | re.S)}
    assert differ and keys <= differ | {"model.name"}  # only the keys that differ


def test_the_separating_measurement_tells_the_readings_apart_by_10_pct():
    cycles = {
        name: simulate(load_model(name).with_overrides(SEPARATING.settings), "softmax",
                       "pingpong", n=SEPARATING.n, data=False, fidelity="tile").cycles
        for name in READINGS
    }
    for a, b in combinations(READINGS, 2):
        assert abs(cycles[a] / cycles[b] - 1) > 0.10, (a, b, cycles)


@pytest.mark.parametrize("name, reading", sorted(EXPECTED.items()))
def test_classification_of_the_shipped_readings(name, reading):
    model = load_model(name)
    bindings = classify(model, {}, seed_measurements())
    assert reading_of(bindings) == reading
    for b in bindings:  # the binding bound is the largest of port, outstanding and core
        core = b.bounds["descriptor"] + b.bounds["compute"]
        top = max(b.bounds["port"], b.bounds["outstanding"], core)
        assert b.margin >= 1 and 0 < b.share <= 1.0001
        assert top == pytest.approx(b.share * [m for m in seed_measurements()
                                               if m.label() == b.measurement][0].cycles)


def test_classification_compute_and_names():
    # a free port and a fast DRAM leave the core's kernels: compute-bound
    values = {"ddr.bytes_per_cycle": 1000.0, "ddr.latency_cycles": 1.0,
              "idma.setup_cycles": 0.0}
    bindings = classify(load_model(), values, seed_measurements())
    assert reading_of(bindings) == ("compute", "compute")
    assert reading_name(("port", "port"), ["a", "b"]) == "port-bandwidth-bound"
    assert reading_name(("descriptor", "outstanding"), ["a", "b"]) == (
        "descriptor-overhead-bound (a), outstanding-requests-bound (b)")


def test_explore_space_is_generic_and_respects_measurements():
    model = load_model()
    space = explore_space(model, seed_measurements())
    # the op key comes from the op's search space, the model's own values are on the grid
    assert 32768 in space.grid["softmax.tile_bytes"] and 1024 in space.grid["softmax.tile_bytes"]
    assert 32 in space.grid["idma.max_outstanding"] and 1 in space.grid["idma.max_outstanding"]
    assert [p.key for p in space.cont] == [
        "ddr.latency_cycles", "ddr.bytes_per_cycle", "idma.setup_cycles"]
    assert space.anchors[0] == {"idma.setup_cycles": 30.0} and space.pin_grid_key == (
        "ddr.bytes_per_cycle")
    # a key a measurement sets is not explored; --free adds an integer key to the grid
    fixed = [Measurement("pingpong", 5154293, 100_000, {"softmax.tile_bytes": 32768}),
             Measurement("direct", 7648254, 100_000)]
    space = explore_space(model, fixed, free=["core.write_buffer_entries=2:32"])
    assert "softmax.tile_bytes" not in space.grid
    assert space.grid["core.write_buffer_entries"] == (2, 8, 32)  # factor 4, the own 8
    assert log_grid(1, 64, 4, integer=True) == [1, 4, 16, 64]
    assert thin([1024 << k for k in range(8)], 4, keep=[32768]) == [
        1024, 4096, 16384, 32768, 65536, 131072]


def test_explore_candidates_tell_runs_apart_by_op_as_well():
    """The runs proposed one grid step below the smallest tile: a run already measured or
    proposed is not proposed again (run_key), and a run of another op with the same variant,
    shape and settings does not hide one (layernorm and rmsnorm share their variants)."""
    j6 = load_model()
    rms = Measurement("pingpong", 1e6, (64, 256), {}, "rmsnorm")
    space = Space((), {"rmsnorm.tile_bytes": (1024, 4096)}, ({},), None)
    below = [c for c in explore_candidates(j6, space, [rms], [])
             if "rmsnorm.tile_bytes" in c.settings]
    assert below and {c.settings["rmsnorm.tile_bytes"] for c in below} == {256}
    assert len({run_key(c) for c in below}) == len(below)
    first = below[0]
    other_op = Measurement(first.variant, 1e6, first.shape, dict(first.settings), "layernorm")
    kept = explore_candidates(j6, space, [rms, other_op], [])
    assert run_key(first) in {run_key(c) for c in kept}
    measured = Measurement(first.variant, 1e6, first.shape, dict(first.settings), "rmsnorm")
    again = explore_candidates(j6, space, [rms, measured], [])
    assert run_key(first) not in {run_key(c) for c in again}


def test_a_small_explore_finds_the_three_readings_and_separates_them():
    """Two grid points, the model's own and one outstanding request per channel, hold all three
    readings (a second tile size found nothing more and doubled the time)."""
    ex = explore(load_model(), jobs=1, grid={
        "softmax.tile_bytes": [32768], "idma.max_outstanding": [1, 32],
        "ddr.max_outstanding": [64]})
    assert {f.reading for f in ex.families} == set(EXPECTED.values())
    assert ex.families[0].reading == ("port", "port")  # the model's own reading first
    assert ex.families[0].representative.values["ddr.bytes_per_cycle"] == pytest.approx(
        0.38814, rel=1e-3)
    for f in ex.families:
        assert max(abs(r) for r in f.final_residuals) <= 1.0  # finalists at burst fidelity
        assert f.physical and f.prediction is not None
    assert ex.proposal is not None and ex.proposal.family_gap_pct > 10
    doc = json.loads(json.dumps(ex.to_json()))
    assert len(doc["families"]) == 3 and doc["separating_measurement"]["spec"]
    assert "reading 1: port-bandwidth-bound" in ex.text()


@pytest.mark.parametrize("args, message", [
    (["--out", "x.toml"], "--out writes one fit"),
    (["--jobs", "0"], "--jobs: '0': allowed 1 to 256"),
    (["--tolerance-pct", "0"], "tolerance"),
])
def test_explore_refuses_bad_options_in_one_line(args, message):
    code, out, err = cli("calibrate", "--explore", *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_readings_no_candidate_separates_are_said_so(monkeypatch):
    """Two readings and no proposal (every candidate predicted the same cycles with each: such
    a candidate is no longer proposed, 'differing by at least 0.0 %'): the text says none
    separates them rather than ending silently."""
    from types import SimpleNamespace as Ns

    from dspsim.study.calibrate.readings import Exploration

    monkeypatch.setattr(Exploration, "_reading_lines", lambda self, i, f: [])
    space = Ns(grid={}, cont=[], pin_grid_key=None, anchors=[{}], size=1)
    ex = Exploration(load_model(), seed_measurements(), Ns(space=space, fits=[], fidelity="tile"),
                     [Ns(), Ns()], None, 1.0, "burst", 0, 0.0)
    assert "separating measurement: none found" in ex.text()
    ex.families = ex.families[:1]  # one reading: nothing to separate, nothing said
    assert "separating measurement" not in ex.text()
