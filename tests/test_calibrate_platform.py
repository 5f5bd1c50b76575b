"""calibrate's default measurements are the document figures of the model's own platform."""

from __future__ import annotations

import dspsim
from dspsim.study.calibrate.measure import seed_measurements
from tests.cli_helpers import one_line, run_cli


def test_the_default_measurements_follow_the_models_platform(tmp_path):
    j6 = dspsim.load_model("j6")
    assert {(m.op, m.variant) for m in seed_measurements(j6)} == {
        ("softmax", "pingpong"), ("softmax", "direct")}
    mine = tmp_path / "mine.toml"
    mine.write_text('base = "j6"\n')
    assert len(seed_measurements(dspsim.load_model(str(mine)))) == 2  # a model of j6
    assert seed_measurements(dspsim.load_model("ameba_hifi5")) == []
    assert len(seed_measurements()) == 2  # no model: every document


def test_explore_on_a_platform_without_figures_is_one_line(capsys):
    code, out, err = run_cli(capsys, "calibrate", "--explore", "--model", "ameba_hifi5")
    assert code == 2 and one_line(err) and out == "", err
    assert "no document figures were measured on this model's platform (ameba_hifi5)" in err
    assert "--measured SPEC=CYCLES" in err
