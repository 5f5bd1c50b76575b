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


def test_every_fitted_key_is_printed_with_its_unit():
    """Before: the HiFi5's fitted psram.refresh_clocks printed "1.60065" with no unit and its
    interval ended "(-37.5 % .. +37.4 %) : determined": calibrate guessed units from a few name
    endings; a key the guess missed takes the unit the model's schema gives it."""
    from dspsim.study.calibrate.fitting import unit
    assert unit("psram.refresh_clocks") == "clocks"
    assert unit("sram.bytes_per_clock") == "bytes/clock"
    assert unit("core.load_store_units") == "ops/cycle"
    assert unit("ddr.latency_cycles") == "cycles" and unit("ddr.bytes_per_cycle") == "B/cycle"
