"""What the help and the documents promise is what the commands do: a default sweep runs the
variants ``sweep --help`` names, ``calibrate --explore`` reports progress off a terminal, and
the validation report recommends the board run the readings document does."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from dspsim.ops import get_op, op_names
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]


def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        run_cli(capsys, *argv, "--help")
    return " ".join(capsys.readouterr().out.split())


def test_sweep_help_names_the_variants_a_default_sweep_runs(capsys, tmp_path):
    text = help_text(capsys, "sweep")
    assert "(default: every variant of the op)" not in text
    for name in op_names():
        op = get_op(name)
        if op.study_variants:
            assert f"{name}: {','.join(op.study_variants)}" in text
    out = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", "1000", "--out", out)
    assert code == 0, err
    ran = list(dict.fromkeys(pd.read_csv(out)["variant"]))
    assert ran == list(get_op("softmax").study_variants)


def test_sweep_mode_help_names_the_column_it_writes(capsys, tmp_path):
    assert "the table's column is then mode" in help_text(capsys, "sweep")
    out = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--mode", "direct", "--n", "1000", "--out", out)
    assert code == 0, err
    assert "mode" in pd.read_csv(out).columns


def test_explore_reports_progress_off_a_terminal(capsys):
    """Before: off a terminal only the first line, then minutes of silence."""
    from dspsim.cli.calibrate import LOG_EVERY_S, LogLines

    now = [0.0]
    lines = LogLines(clock=lambda: now[0])
    for i in range(10):
        lines(f"explore: {i}/90 grid points")
        now[0] += LOG_EVERY_S / 3
    err = capsys.readouterr().err.splitlines()
    assert err == ["explore: 0/90 grid points", "explore: 3/90 grid points",
                   "explore: 6/90 grid points", "explore: 9/90 grid points"]


def test_the_validation_report_recommends_the_readings_board_run():
    """docs/validation.md recommended ping-pong on 16,384 values with 64 KiB tiles, which the
    README and docs/readings.md say cannot separate the third reading."""
    readings = (ROOT / "docs" / "readings.md").read_text()
    assert "`--explore` proposes **ping-pong on n = 64 with a 256-byte tile**" in readings
    validation = (ROOT / "docs" / "validation.md").read_text()
    advice = re.findall(r"Measuring .* on a J6 board \((\w+), n = ([\d,]+), "
                        r"`softmax.tile_bytes` = (\d+)\)", validation)
    assert advice == [("pingpong", "64", "256")]
    assert "separates the readings." in validation.split("Measuring")[-1]


def test_the_validation_scripts_advice_is_computed_from_the_readings(monkeypatch):
    import importlib.util
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(ROOT / "experiments"))  # its _results

    spec = importlib.util.spec_from_file_location("validation",
                                                  ROOT / "experiments" / "validation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    proposal = SimpleNamespace(variant="pingpong", n=16384,
                               settings={"softmax.tile_bytes": 65536})
    text = "\n".join(mod.readings_section(proposal))
    assert "Section 1.2's proposal leaves two readings within 7.5 %" in text
    assert ("Measuring `--explore`'s proposal on a J6 board (pingpong, n = 64, "
            "`softmax.tile_bytes` = 256)") in text


def test_readme_says_what_each_direct_load_stalls():
    """Before: "each of 12,504 vector loads stalls ~444 cycles": the run makes 12,505 (its
    1,600,640 bytes), and those of the passes that store (exp, mul) stall ~773, their round
    trip behind a store's bytes on the one port."""
    from dspsim import load_model, simulate

    r = simulate(load_model(), "softmax", "direct", data=False, trace=True)
    loads = r.bytes["ddr_read"] // 128  # one 32-lane float32 vector a load
    core = r.trace[r.trace["engine"] == "core0"]
    stall = core.groupby("pass")["ddr_stall_cycles"].sum() / (loads / 4)
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"each of {loads:,} vector loads stalls" in text
    for passes, cycles in ((("max", "sum"), 444), (("exp", "mul"), 773)):
        assert [stall[p] for p in passes] == [pytest.approx(cycles, abs=1)] * 2
    assert "~444 cycles" in text and "~773 in exp and mul" in text
