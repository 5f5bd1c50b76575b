"""A saved run keeps its model's ranges, so a loaded run's model is the model it ran on."""

from __future__ import annotations

import json

import pytest

import dspsim
from dspsim.errors import DspsimInputError
from dspsim.results import load_run, save_run


def test_a_saved_run_keeps_the_models_ranges(tmp_path):
    model = dspsim.load_model("j6")
    assert model.ranges  # J6's guessed and fitted keys carry ranges
    r = dspsim.simulate(model, op="softmax", variant="direct", n=1000, data=False, trace=True)
    path = tmp_path / "run.json"
    save_run(r, path)
    assert load_run(path).model.ranges == model.ranges


def test_a_saved_range_outside_its_value_is_refused(tmp_path):
    model = dspsim.load_model("j6")
    r = dspsim.simulate(model, op="softmax", variant="direct", n=1000, data=False, trace=True)
    path = tmp_path / "run.json"
    save_run(r, path)
    doc = json.loads(path.read_text())
    doc["model"]["ranges"]["ddr.latency_cycles"] = [1.0, 2.0]
    path.write_text(json.dumps(doc))
    with pytest.raises(DspsimInputError, match="ddr.latency_cycles"):
        load_run(path)
    del doc["model"]["ranges"]  # a run saved before ranges existed: none
    path.write_text(json.dumps(doc))
    assert load_run(path).model.ranges == {}
