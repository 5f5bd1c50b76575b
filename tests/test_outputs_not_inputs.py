"""No output is an input: every command refuses, before any work, an output path that is one of
the files it reads (the same path, through ``..``, a symlink or a hard link), in one line with
exit 2, and leaves the input as it was."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.cli_helpers import one_line, run_cli

WORKLOAD = """
[[stream]]
name = "s"
op = "softmax"
n = 1000
period_us = 100
count = 3
"""
MODEL = 'base = "j6"\n[ddr]\nlatency_cycles = 300\n'


def _alias(tmp_path, target, how: str):
    """Another name for ``target``: itself, through .., a symlink or a hard link."""
    if how == "same":
        return target
    if how == "dotdot":
        (tmp_path / "sub").mkdir(exist_ok=True)
        return tmp_path / "sub" / ".." / target.name
    alias = tmp_path / f"alias{target.suffix}"
    if how == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    return alias


def _cases(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.ones(2000, np.float32))
    wl = tmp_path / "w.csv"  # a workload file need not be called .toml
    wl.write_text(WORKLOAD)
    model = tmp_path / "m.csv"  # nor a model file
    model.write_text(MODEL)
    base = tmp_path / "b.toml"
    base.write_text('base = "j6"\n')
    child = tmp_path / "child.toml"
    child.write_text(f'base = "{base.name}"\n')
    spec = tmp_path / "spec.csv"
    spec.write_text('[param]\n"ddr.latency_cycles" = [50, 60]\n')
    return {
        "run --output is --input": (x, lambda o: ["run", "--input", x, "--output", o]),
        "run --tiles is --model": (model, lambda o: ["run", "--n", "2000", "--model", model,
                                                     "--tiles", o]),
        "workload --out is FILE": (wl, lambda o: ["workload", wl, "--out", o]),
        "workload --out is --model": (model, lambda o: ["workload", wl, "--model", model,
                                                        "--out", o]),
        "sweep --out is --model": (model, lambda o: [
            "sweep", "--param", "ddr.latency_cycles=50,60", "--n", "2000", "--model", model,
            "--out", o]),
        "sweep --out is --spec": (spec, lambda o: ["sweep", "--spec", spec, "--n", "2000",
                                                   "--out", o]),
        "optimize --out is a --models entry": (model, lambda o: [
            "optimize", "--n", "2000", "--models", f"j6,{model}", "--out", o]),
        "calibrate --out is --model": (child, lambda o: [
            "calibrate", "--model", child, "--measured", "pingpong=5154293", "--free",
            "ddr.latency_cycles", "--out", o]),
        "calibrate --out is --model's base": (base, lambda o: [
            "calibrate", "--model", child, "--measured", "pingpong=5154293", "--free",
            "ddr.latency_cycles", "--out", o]),
    }


NAMES = [
    "run --output is --input", "run --tiles is --model", "workload --out is FILE",
    "workload --out is --model", "sweep --out is --model", "sweep --out is --spec",
    "optimize --out is a --models entry", "calibrate --out is --model",
    "calibrate --out is --model's base"]


@pytest.mark.parametrize("how", ["same", "dotdot", "symlink", "hardlink"])
@pytest.mark.parametrize("case", NAMES)
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, capsys, case, how):
    """Before: `workload FILE --out FILE` replaced the workload file with the task table."""
    target, argv = _cases(tmp_path)[case]
    if target.suffix not in (".csv", ".npy", ".toml"):
        pytest.skip("not an output extension")
    before = target.read_bytes()
    listing = sorted(os.listdir(tmp_path))
    out = _alias(tmp_path, target, how)
    code, stdout, err = run_cli(capsys, *argv(out))
    assert code == 2 and one_line(err) and "an input" in err, err
    assert stdout == ""
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        set(listing) | {p.name for p in (out,) if p.parent == tmp_path} | (
            {"sub"} if how == "dotdot" else set()))


def test_plot_sweep_refuses_a_figure_that_is_its_table(tmp_path, capsys):
    table = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--param", "ddr.latency_cycles=50,60", "--n",
                           "2000", "--out", table)
    assert code == 0, err
    before = table.read_bytes()
    fig = tmp_path / "fig.png"
    fig.symlink_to(table)
    code, _, err = run_cli(capsys, "plot", "sweep", table, "--x", "ddr.latency_cycles",
                           "--out", fig)
    assert code == 2 and one_line(err) and "an input" in err
    assert table.read_bytes() == before
