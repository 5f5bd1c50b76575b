"""``calibrate --out`` writes a complete model file that loads on its own, checked before it
replaces anything: whatever the input file spells out (a partial file, inline tables, a
relative base) and whatever ``--set`` adds."""

import json
import os
import tomllib

import pytest

import dspsim.study.calibrate.fitting as fitting
from dspsim.config import load_model
from tests.cli_helpers import one_line, run_cli

MEASURED = "pingpong,n=2048=150000"  # one quick fit of ddr.latency_cycles (about 6,000)


def calibrate_out(capsys, model, out, *extra, free="ddr.latency_cycles"):
    code, stdout, err = run_cli(capsys, "calibrate", "--model", model, "--measured", MEASURED,
                                "--free", free, "--out", out, "--json", *extra)
    assert code == 0, err
    return json.loads(stdout)["fit"]


def assert_is_the_fit(out, model, fit, overrides=()):
    """``out`` loads, on its own, to ``model`` with ``overrides`` and the fitted values."""
    got = load_model(out)
    want = load_model(model, list(overrides) or None)
    for key, f in fit.items():
        assert got.get(key) == pytest.approx(f["value"], rel=1e-5)
    fitted = {k: 0 for k in fit}
    assert got.flat() | fitted == want.flat() | fitted
    assert "base" not in tomllib.loads(out.read_text())  # complete: nothing to resolve
    assert got.name == out.stem


def test_a_partial_file_whose_fitted_key_is_inherited(tmp_path, capsys):
    """Before: "ddr.latency_cycles has no `name = value` line" after the whole fit."""
    m = tmp_path / "board.toml"
    m.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 0.5  # measured\n'
                 "[idma]\nsetup_cycles = 45.0\n")
    out = tmp_path / "fit.toml"
    fit = calibrate_out(capsys, m, out)
    assert_is_the_fit(out, m, fit)
    lines = out.read_text().splitlines()
    assert any(ln.startswith("bytes_per_cycle = 0.5 ") and ln.endswith("# measured")
               for ln in lines)
    # a key the file gives without a comment does not take the base's comment on j6's value
    assert "setup_cycles = 45.0" in lines


def test_a_set_key_the_file_does_not_spell_out(tmp_path, capsys):
    m = tmp_path / "board.toml"
    m.write_text('base = "j6"\n')
    out = tmp_path / "fit.toml"
    fit = calibrate_out(capsys, m, out, "--set", "idma.setup_cycles=40", "--set",
                        "softmax.tile_bytes=8192")
    assert_is_the_fit(out, m, fit, ["idma.setup_cycles=40", "softmax.tile_bytes=8192"])
    lines = out.read_text().splitlines()
    assert any(ln.startswith("setup_cycles = 40.0") and "set with --set" in ln for ln in lines)


def test_inline_tables(tmp_path, capsys):
    m = tmp_path / "board.toml"
    m.write_text('base = "j6"\nddr = { latency_cycles = 200.0, bytes_per_cycle = 0.5 }\n'
                 "softmax = { tile_bytes = 16384 }\n")
    out = tmp_path / "fit.toml"
    fit = calibrate_out(capsys, m, out)
    assert_is_the_fit(out, m, fit)
    assert load_model(out).softmax.tile_bytes == 16384


def test_a_relative_base_written_to_another_folder_over_an_existing_file(tmp_path, capsys):
    """Before: the relative base was copied verbatim, so the file in the other folder did not
    load, and it had already replaced the existing --out."""
    (tmp_path / "boards").mkdir()
    (tmp_path / "fits").mkdir()
    (tmp_path / "boards" / "family.toml").write_text(
        'base = "j6"\n[ddr]\nbytes_per_cycle = 0.5  # measured\n')
    m = tmp_path / "boards" / "board.toml"
    m.write_text('base = "family.toml"\n[idma]\nsetup_cycles = 45.0  # measured\n')
    out = tmp_path / "fits" / "fit.toml"
    out.write_text("# an earlier fit\n")
    fit = calibrate_out(capsys, m, out)
    assert_is_the_fit(out, m, fit)
    os.chdir(tmp_path / "fits")  # loads wherever it is read from
    assert load_model("fit.toml").idma.setup_cycles == 45.0


def test_a_complete_input_names_the_output_after_itself(tmp_path, capsys):
    out = tmp_path / "my_fit.toml"
    fit = calibrate_out(capsys, "j6", out)
    assert_is_the_fit(out, "j6", fit)
    assert 'name = "j6"' not in out.read_text()


def test_a_file_that_would_not_load_replaces_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "fit.toml"
    out.write_text("# an earlier fit\n")
    real = fitting.model_file_text
    for broken in (lambda *a: real(*a).replace("[ddr]", "[ddr]\nlatency_cycles = 1.0"),
                   lambda *a: real(*a).replace("latency_cycles = ", "latency_cycles = 2 * "),
                   lambda *a: real(*a).replace("channels = 2", "channels = 1")):
        monkeypatch.setattr(fitting, "model_file_text", broken)
        code, _, err = run_cli(capsys, "calibrate", "--measured", MEASURED, "--free",
                               "ddr.latency_cycles", "--out", out)
        assert code == 2 and one_line(err) and "nothing was written" in err, err
        assert out.read_text() == "# an earlier fit\n"
        assert [p.name for p in tmp_path.iterdir()] == ["fit.toml"]
