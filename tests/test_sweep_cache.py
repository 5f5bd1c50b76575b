"""A sweep is a cache of points: each row is stored under a key of everything its result depends
on, a resume computes exactly the points whose key no row has, the sidecar records only the keys
that apply to the sweep, and files of the previous release (format-3 sidecars) resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.config import load_model
from dspsim.schema import OP_SCHEMAS, Key, OpSchema
from dspsim.study.sweep import build_sweep, executors, read_sweep, run_sweep
from dspsim.study.sweep.sidecar import applies, point_key, sweep_values
from tests.cli_helpers import one_line, run_cli

OLD = Path(__file__).parent / "data" / "sweep_v3"  # made by dspsim 0.2.0 (format-3 sidecars)
OLD_ARGV = ["sweep", "--n", "1000", "--variant", "pingpong,direct", "--param",
            "ddr.latency_cycles=100,200"]
FLAT = load_model().flat()
MINE = sorted(k for k in FLAT if applies(k, ["softmax"]))  # hardware and softmax keys
OTHERS = sorted(k for k in FLAT if not applies(k, ["softmax"]))  # other ops' keys
POINT = {"op": "softmax", "variant": "pingpong", "n": 1000}


def _other(value):
    """A value unlike ``value``, of its type."""
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int | float) else value + "x"


def _key(fixed, point=POINT, fidelity="tile", version="0.2.0"):
    return point_key(fixed, point, fidelity, version)


# ------------------------------------------------------------------ the key
@settings(max_examples=60, deadline=None)
@given(st.permutations(sorted(FLAT)), st.sets(st.sampled_from(MINE), max_size=4))
def test_the_key_ignores_order_and_where_a_value_comes_from(order, swept):
    """Any order of the keys, and a value swept rather than fixed, give the same key."""
    fixed = {k: FLAT[k] for k in order}
    point = {**POINT, **{k: FLAT[k] for k in swept}}
    moved = {k: v for k, v in fixed.items() if k not in swept}
    assert _key(fixed) == _key(moved, point) == _key(dict(sorted(fixed.items())))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(MINE), st.sampled_from(OTHERS))
def test_the_key_changes_with_each_input_it_depends_on_and_no_other(key, other):
    fixed = dict(FLAT)
    base = _key(fixed)
    assert _key({**fixed, key: _other(fixed[key])}) != base  # a hardware or softmax key
    assert _key({**fixed, other: _other(fixed[other])}) == base  # another op's key
    assert _key(fixed, {**POINT, key: _other(fixed[key])}) != base  # swept to another value
    for changed in ({"variant": "direct"}, {"n": 1001}, {"op": "rmsnorm"}):
        assert _key(fixed, {**POINT, **changed}) != base
    assert _key(fixed, fidelity="burst") != base and _key(fixed, version="0.2.1") != base


def test_a_value_keys_as_its_canonical_text():
    """``100`` of a float key is ``100.0``: the same point."""
    fixed = dict(FLAT)
    assert isinstance(fixed["ddr.latency_cycles"], float)
    assert _key({**fixed, "ddr.latency_cycles": 100}) == _key(
        {**fixed, "ddr.latency_cycles": 100.0})


# ------------------------------------------------------------------ resume computes the missing
def _counting(monkeypatch) -> list[dict]:
    """The points simulated from now on (in this process: one job)."""
    seen: list[dict] = []
    real = executors.evaluate_point

    def counted(model, point, fidelity):
        seen.append(dict(point))
        return real(model, point, fidelity)

    monkeypatch.setattr(executors, "evaluate_point", counted)
    return seen


def test_a_resume_simulates_exactly_the_points_missing(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    small = build_sweep({"ddr.latency_cycles": [50, 100, 400]}, n=1000, fidelity="tile")
    seen = _counting(monkeypatch)
    assert run_sweep(small, out).computed == 6 and len(seen) == 6
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:3] + lines[5:]))  # rows 3 and 4 lost
    lost = {tuple(r.split(b",")[:4]) for r in lines[3:5]}
    seen.clear()
    assert run_sweep(small, out).computed == 2
    assert {(p["op"], p["variant"], str(p["n"]), repr(p["ddr.latency_cycles"]))
            for p in seen} == {tuple(c.decode() for c in k) for k in lost}
    seen.clear()
    grown = build_sweep({"ddr.latency_cycles": [50, 100, 400, 800]}, n=1000, fidelity="tile")
    assert run_sweep(grown, out).computed == 2 and len(seen) == 2
    assert {p["ddr.latency_cycles"] for p in seen} == {800.0}
    seen.clear()
    assert run_sweep(grown, out).computed == 0 and seen == [] and len(read_sweep(out)) == 8


# ------------------------------------------------------------------ the sidecar
def test_the_sidecar_does_not_grow_with_the_registered_ops(tmp_path, monkeypatch, capsys):
    """Before: every registered op's keys were in every sidecar."""
    argv = [*OLD_ARGV, "--out"]
    assert run_cli(capsys, *argv, tmp_path / "a.csv")[0] == 0
    dummy = OpSchema("dummyop", (Key("dummyop.tile_bytes", int, default=4096, lo=1),))
    monkeypatch.setitem(OP_SCHEMAS, "dummyop", dummy)
    assert "dummyop.tile_bytes" in load_model().flat()  # the model has the new op's key
    assert run_cli(capsys, *argv, tmp_path / "b.csv")[0] == 0
    side = [(tmp_path / f"{n}.csv.sweep.json").read_bytes() for n in "ab"]
    assert side[0] == side[1]
    fixed = json.loads(side[0])["fixed_model"]
    assert fixed == sweep_values(load_model().flat(), ["ddr.latency_cycles"], ["softmax"])
    assert not any(k.startswith(("layernorm.", "fc.", "copy.")) for k in fixed)


# ------------------------------------------------------------------ files of 0.2.0
@pytest.fixture
def old(tmp_path):
    for f in OLD.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_an_old_csv_resumes_and_its_sidecar_is_carried_over(old, capsys, monkeypatch):
    out = old / "old.csv"
    before = out.read_bytes()
    seen = _counting(monkeypatch)
    code, stdout, err = run_cli(capsys, *OLD_ARGV, "--out", out)
    # the hardware keys added since 0.2.0 (dcache.write_allocate, and more since: the
    # ESP32-S3's core.scalar_access_bytes, ...) resume at their defaults, noted in one line
    newer = f"dspsim: note: {out} was begun before "
    assert code == 0 and "(0 computed, 4 already" in stdout, err
    assert err == "" or (err.startswith(newer) and "dcache.write_allocate = true" in err
                         and "core.scalar_access_bytes = 0" in err
                         and err.count("\n") == 1), err
    assert seen == [] and out.read_bytes() == before
    doc = json.loads((old / "old.csv.sweep.json").read_text())
    assert doc["format_version"] == 4
    assert not any(k.startswith("layernorm.") for k in doc["fixed_model"])
    code, stdout, err = run_cli(capsys, *OLD_ARGV, "--out", out)  # and again, as format 4
    assert code == 0 and "(0 computed, 4 already" in stdout and err == "", err


def test_an_old_parquet_table_resumes_and_extends(old, capsys, monkeypatch):
    pytest.importorskip("pyarrow")
    seen = _counting(monkeypatch)
    code, stdout, err = run_cli(capsys, "sweep", "--n", "1000", "--variant", "pingpong",
                                "--param", "ddr.latency_cycles=100,200,300",
                                "--out", old / "old.parquet")
    assert code == 0 and "(1 computed, 2 already" in stdout and "extending" in err, err
    assert [p["ddr.latency_cycles"] for p in seen] == [300.0]
    assert list(read_sweep(old / "old.parquet")["ddr.latency_cycles"]) == [100.0, 200.0, 300.0]


@pytest.mark.parametrize("damage, says", [
    (lambda d: d["fixed_model"].pop("core.count"), "core.count"),
    (lambda d: d["fixed_model"].update({"layernorm.tile_bytes": "big"}), "layernorm.tile_bytes"),
    (lambda d: d.update(format_version=5), "format_version 5"),
])
def test_a_damaged_old_sidecar_is_refused_in_one_line(old, capsys, damage, says):
    side = old / "old.csv.sweep.json"
    doc = json.loads(side.read_text())
    damage(doc)
    side.write_text(json.dumps(doc))
    before = (old / "old.csv").read_bytes()
    code, _, err = run_cli(capsys, *OLD_ARGV, "--out", old / "old.csv")
    assert code == 2 and one_line(err) and "damaged" in err and says in err, err
    assert (old / "old.csv").read_bytes() == before


def test_a_torn_old_sidecar_is_refused_in_one_line(old, capsys):
    side = old / "old.csv.sweep.json"
    side.write_bytes(side.read_bytes()[:500])
    code, _, err = run_cli(capsys, *OLD_ARGV, "--out", old / "old.csv")
    assert code == 2 and one_line(err) and "damaged" in err and "afresh" in err, err
