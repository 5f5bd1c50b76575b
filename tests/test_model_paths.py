"""Model paths and names: every way a model file or its ``base`` chain cannot be read is one line
from every command that loads models; a user's file is named after itself."""

import os

import pytest

from dspsim.analysis.timeline import run_title
from dspsim.config import MAX_BASE_DEPTH, load_model, packaged_models
from dspsim.errors import ConfigError
from dspsim.run import simulate
from tests.cli_helpers import one_line, run_cli

WORKLOAD = ('[[stream]]\nname = "s"\nop = "softmax"\nvariant = "pingpong"\nn = 1000\n'
            'period_us = 100\ncount = 2\n')


def _nul(d):
    (d / "m.toml").write_text('base = "j6\\u0000"\n')
    return d / "m.toml", "NUL byte"


def _symlink_loop(d):
    os.symlink("loop2.toml", d / "loop1.toml")
    os.symlink("loop1.toml", d / "loop2.toml")
    (d / "m.toml").write_text('base = "loop1.toml"\n')
    return d / "m.toml", "loop of symbolic links"


def _the_file_a_symlink_loop(d):
    os.symlink("m.toml", d / "m.toml")
    return d / "m.toml", "loop of symbolic links"


def _name_too_long(d):
    (d / "m.toml").write_text(f'base = "{"x" * 300}.toml"\n')
    return d / "m.toml", "name is too long"


def _deep_chain(d):  # 16 files and j6: one more than the limit, and no loop
    for i in range(MAX_BASE_DEPTH + 1):
        nxt = f"c{i + 1}.toml" if i < MAX_BASE_DEPTH else "j6"
        (d / f"c{i}.toml").write_text(f'base = "{nxt}"\n')
    return d / "c0.toml", f"too deep: more than {MAX_BASE_DEPTH} files"


def _loop_through_a_link(d):  # a -> b -> (a link to a): one file twice
    (d / "a.toml").write_text('base = "b.toml"\n')
    (d / "b.toml").write_text('base = "alias.toml"\n')
    os.symlink("a.toml", d / "alias.toml")
    return d / "a.toml", "loop of model files"


BAD = [_nul, _symlink_loop, _the_file_a_symlink_loop, _name_too_long, _deep_chain,
       _loop_through_a_link]
COMMANDS = {
    "run": lambda m, d: ["run", "--no-data", "--model", m],
    "run --models": lambda m, d: ["run", "--no-data", "--models", f"j6,{m}"],
    "keys": lambda m, d: ["keys", "--model", m],
    "workload": lambda m, d: ["workload", d / "w.toml", "--model", m],
    "sweep": lambda m, d: ["sweep", "--model", m, "--out", d / "s.csv"],
    "sweep --models": lambda m, d: ["sweep", "--models", f"j6,{m}", "--out", d / "s.csv"],
    "optimize": lambda m, d: ["optimize", "--model", m],
    "optimize --models": lambda m, d: ["optimize", "--models", f"j6,{m}"],
    "calibrate": lambda m, d: ["calibrate", "--model", m, "--measured", "pingpong=5154293",
                               "--free", "ddr.latency_cycles"],
    "reproduce": lambda m, d: ["reproduce", "--no-data", "--model", m],
    "reproduce --models": lambda m, d: ["reproduce", "--no-data", "--models", f"j6,{m}"],
}


@pytest.mark.parametrize("make", BAD, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("command", COMMANDS)
def test_a_model_that_cannot_be_read_is_one_line_in_every_command(tmp_path, capsys, make,
                                                                  command):
    """Before: a NUL byte (ValueError) and a symbolic-link loop (RuntimeError from resolve())
    were a 32-line traceback; a chain of 17 files was called a loop."""
    (tmp_path / "w.toml").write_text(WORKLOAD)
    model, cause = make(tmp_path)
    code, _, err = run_cli(capsys, *COMMANDS[command](model, tmp_path))
    assert code == 2 and one_line(err) and cause in err, err
    assert not (tmp_path / "s.csv").exists()


def test_a_sweep_spec_naming_a_nul_model_is_one_line(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('model = "j6\\u0000"\n')
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--out", tmp_path / "s.csv")
    assert code == 2 and one_line(err) and "NUL byte" in err, err


def test_a_chain_at_the_limit_loads_and_a_real_loop_is_called_one(tmp_path):
    for i in range(MAX_BASE_DEPTH - 1):  # and j6: 16 files
        nxt = f"c{i + 1}.toml" if i < MAX_BASE_DEPTH - 2 else "j6"
        (tmp_path / f"c{i}.toml").write_text(f'base = "{nxt}"\n')
    assert load_model(tmp_path / "c0.toml").ddr == load_model().ddr
    (tmp_path / "x.toml").write_text('base = "y.toml"\n')
    (tmp_path / "y.toml").write_text('base = "x.toml"\n')
    with pytest.raises(ConfigError, match="loop of model files"):
        load_model(tmp_path / "x.toml")


# ------------------------------------------------------------------------ names
def test_a_partial_file_is_named_after_its_file(tmp_path, capsys):
    """Before: a partial file (base = "j6") called itself j6 in reproduce and figure titles."""
    m = tmp_path / "my_board.toml"
    m.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 2.0  # guess\n')
    model = load_model(m)
    assert model.name == "my_board"
    code, out, err = run_cli(capsys, "reproduce", "--no-data", "--model", m)
    assert code == 0 and f"on my_board ({m})" in out and "on j6" not in out, err
    r = simulate(model, "softmax", "pingpong", n=2048, data=False, trace=True)
    assert run_title(r, 0, r.cycles).startswith("my_board softmax")
    # its own [model] name wins; a base's [model] name is not inherited by a file that bases
    # on it
    named = tmp_path / "named.toml"
    named.write_text('base = "my_board.toml"\n[model]\nname = "board_v2"\n')
    child = tmp_path / "child.toml"
    child.write_text('base = "named.toml"\n')
    assert load_model(named).name == "board_v2" and load_model(child).name == "child"
    assert load_model("j6_outstanding_bound").name == "j6_outstanding_bound"


def test_forgetting_base_says_what_is_needed(tmp_path, capsys):
    m = tmp_path / "m.toml"
    m.write_text("[ddr]\nlatency_cycles = 100.0\n")
    code, _, err = run_cli(capsys, "run", "--no-data", "--model", m)
    assert code == 2 and one_line(err)
    assert "missing key core.count" in err and 'needs base = "j6"' in err, err


def test_an_unknown_model_name_lists_the_packaged_ones(capsys, tmp_path):
    names = packaged_models()
    assert "j6" in names and "j6_outstanding_bound" in names
    code, _, err = run_cli(capsys, "run", "--no-data", "--model", "nosuch")
    assert code == 2 and one_line(err) and all(n in err for n in names), err
    (tmp_path / "m.toml").write_text('base = "nosuch"\n')
    code, _, err = run_cli(capsys, "run", "--no-data", "--model", tmp_path / "m.toml")
    assert code == 2 and one_line(err) and all(n in err for n in names), err
