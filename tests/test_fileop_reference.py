"""docs/reference.md, Op files: the complete example loads and runs in every variant within
its tolerance, uses every key the tables list, and the tables are the loader's keys."""

from __future__ import annotations

import tomllib

import pytest

from dspsim import simulate
from dspsim.ops.fileop import load_op_file, spec, unload_op_file
from tests.test_reference import _required, example, names

TABLES = {"op-file": spec.TOP_KEYS, "op-file-op": spec.OP_KEYS,
          "op-file-array": spec.ARRAY_KEYS, "op-file-pass": spec.PASS_KEYS,
          "op-file-loop": spec.LOOP_KEYS, "op-file-schedules": spec.SCHEDULE_KEYS,
          "op-file-reference": spec.REFERENCE_KEYS}


@pytest.fixture
def relu_norm(tmp_path):
    path = tmp_path / "relu_norm.toml"
    path.write_text(example("op-file"), encoding="utf-8")
    yield load_op_file(path)
    unload_op_file(path)


@pytest.mark.parametrize("variant", ["pingpong", "direct", "nbuffer"])
def test_the_example_runs_within_its_tolerance(j6, relu_norm, variant):
    r = simulate(j6.with_overrides({"relu_norm.t": 0.5}), relu_norm, variant, n=3000)
    assert r.output["within_tolerance"] and r.output["wrong_count"] == 0
    assert r.cycles > 0 and [p["name"] for p in r.passes][:3] == ["peak", "relu", "scale"]


def test_the_example_uses_every_key():
    raw = tomllib.loads(example("op-file"))
    assert set(raw) == set(names("op-file"))
    assert set(raw["op"]) == set(names("op-file-op"))
    assert set().union(*raw["array"]) == set(names("op-file-array"))
    assert set().union(*raw["pass"]) == set(names("op-file-pass"))
    assert set(raw["pass"][1]["loop"]) == set(names("op-file-loop"))
    # block_cols is a 2-D op's (test_fileop_blocks.py loads examples/ops/col_filter.toml)
    assert set(raw["schedules"]) == set(names("op-file-schedules")) - {"block_cols"}
    # python and allow_python exclude value: a test of their own holds them (test_fileop.py)
    assert set(raw["reference"]) == set(names("op-file-reference")) - {"python",
                                                                        "allow_python"}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_the_tables_are_the_loaders_keys(table):
    assert names(table) == list(TABLES[table])


def test_the_required_keys_are_the_loaders():
    assert _required("op-file", 2) == {"op", "array", "pass"}
    assert _required("op-file-op", 3) == {"name", "ndim"}
    assert _required("op-file-array", 3) == {"name", "shape", "role"}
    assert _required("op-file-pass", 3) == {"name", "reads"}
    assert _required("op-file-loop", 3) == {"alu"}
