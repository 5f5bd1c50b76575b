"""The command line contract."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dspsim.cli import main
from tests.cli_helpers import one_line, run_cli


def test_run_json_has_the_contracted_fields(capsys):
    code, out, _ = run_cli(capsys, "run", "--mode", "direct", "--n", "5000", "--json")
    assert code == 0
    obj = json.loads(out)
    for key in ("op", "variant", "mode", "shape", "n", "cycles", "time_us", "bytes",
                "busy_cycles", "passes", "events", "wall_s", "manifest", "engines", "bounds"):
        assert key in obj
    assert obj["op"] == "softmax" and obj["variant"] == obj["mode"] == "direct"
    assert obj["n"] == 5000 and obj["shape"] == [5000] and isinstance(obj["cycles"], int)
    assert set(obj["bytes"]) >= {"ddr_read", "ddr_write"}
    assert set(obj["busy_cycles"]) == set(obj["engines"])
    assert sorted(obj["engines"].values()) == ["core", "ddr", "idma", "idma"]
    assert {"name", "start_cycle", "end_cycle"} <= set(obj["passes"][0])
    assert obj["manifest"]["dspsim_version"] and obj["manifest"]["model"].endswith("j6.toml")
    assert obj["events"] > 0


def test_run_set_changes_the_result(capsys):
    _, a, _ = run_cli(capsys, "run", "--n", "4096", "--json")
    _, b, _ = run_cli(capsys, "run", "--n", "4096", "--json", "--set", "ddr.latency_cycles=500")
    a, b = json.loads(a), json.loads(b)
    assert b["cycles"] > a["cycles"]
    assert b["manifest"]["overrides"] == {"ddr.latency_cycles": 500}


def test_reproduce_json(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--json")
    obj = json.loads(out)
    assert code == 0 and set(obj) >= {"pingpong", "direct", "ratio"}
    assert obj["ratio"] == pytest.approx(obj["direct"]["cycles"] / obj["pingpong"]["cycles"])


def test_reproduce_table(capsys):
    code, out, _ = run_cli(capsys, "reproduce")
    assert code == 0
    assert "5,154,293" in out and "7,648,254" in out and "ratio" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--n", "0"], "positive integer"),
        (["run", "--n", "-3"], "positive integer"),
        (["run", "--n", "many"], "positive integer"),
        (["run", "--set", "ddr.nope=1"], "unknown model key"),
        (["run", "--set", "ddr.latency_cycles=abc"], "expected a number"),
        (["run", "--set", "ddr.latency_cycles=0"], "greater than 0"),
        (["run", "--set", "softmax.tile_bytes=1048576"], "larger than a DataRAM"),
        (["run", "--model", "/no/such/model.toml"], "not found"),
        (["run", "--mode", "fast"], "no variant 'fast'"),
        (["run", "--op", "fft"], "unknown op 'fft'"),
        (["run", "--op", "softmax", "--variant", "fft"], "allowed: pingpong, direct"),
        (["run", "--variant", "direct", "--mode", "pingpong"], "disagree"),
        (["run", "--op", "layernorm", "--shape", "4,0"], "positive integers"),
        (["run", "--op", "layernorm", "--shape", "4,x"], "positive integers"),
        (["run", "--op", "layernorm", "--shape", "4"], "two positive integers"),
        (["run", "--op", "layernorm", "--shape", "4,5,6"], "two positive integers"),
        (["run", "--op", "layernorm", "--n", "1000"], "ROWS,COLS"),
        (["run", "--op", "softmax", "--shape", "4,5,6"], "softmax shape"),
        (["run", "--set", "idma.channels=1"], "needs 2 iDMA channels"),
        (["run", "--op", "layernorm", "--set", "tcm.banks=1"], "needs 2 DataRAM banks"),
        (["run", "--op", "layernorm", "--shape", "2,100000"], "larger than a DataRAM"),
        (["run", "--core", "1"], "cores 0 to 0"),
        (["run", "--set", "core.count=5"], "allowed range"),
        (["run", "--set", "layernorm.eps=-1"], "allowed range"),
        (["reproduce", "--set", "tcm.bank_bytes=0"], "allowed range"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_malformed_model_file(capsys, tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text("[ddr]\nlatency_cycles = = 3\n")
    code, _, err = run_cli(capsys, "run", "--model", str(bad))
    assert code == 2 and "not valid TOML" in err and err.count("\n") == 1


def test_console_script_exit_code_without_traceback():
    p = subprocess.run([sys.executable, "-m", "dspsim.cli", "run", "--n", "0"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.startswith("dspsim: error:") and "Traceback" not in p.stderr


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("dspsim ")


def test_run_help_says_what_input_and_n_are_for_every_op(capsys):
    """Before: "--input X.npy  1-D float32 input" and "--n N  float32 elements", though
    LayerNorm reads a 2-D .npy, fc an .npz and copy's n is bytes."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1-D float32 input" not in text
    assert "(1-D or 2-D), an .npz for --op fc" in text and "(bytes for copy;" in text


def test_ops_lists_every_op_variant_and_parameter(capsys):
    code, out, _ = run_cli(capsys, "ops", "--json")
    ops = {o["op"]: o for o in json.loads(out)}
    assert code == 0 and {"softmax", "layernorm"} <= set(ops)
    assert [v["variant"] for v in ops["softmax"]["variants"]][:2] == ["pingpong", "direct"]
    keys = {k["key"]: k for k in ops["layernorm"]["params"]}
    assert keys["layernorm.eps"]["default"] == 1e-5
    assert keys["layernorm.tile_bytes"]["unit"] == "bytes" and keys["layernorm.tile_bytes"]["doc"]
    code, text, _ = run_cli(capsys, "ops")
    assert code == 0 and "softmax.tile_bytes" in text and "layernorm" in text


def test_keys_list_values_units_and_sources(capsys):
    code, out, _ = run_cli(capsys, "keys", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 0
    assert rows["ddr.latency_cycles"]["label"] == "fitted"
    assert rows["core.count"]["value"] == 1 and rows["core.count"]["label"] == "fact"
    assert rows["ddr.bytes_per_cycle"]["unit"] == "bytes/cycle"
    assert rows["layernorm.eps"]["source"] == "op default"


def test_layernorm_runs_from_the_cli(capsys, tmp_path):
    x = np.random.default_rng(0).normal(5, 2, (6, 40)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, _ = run_cli(capsys, "run", "--op", "layernorm", "--variant", "pingpong",
                           "--input", str(tmp_path / "x.npy"), "--output",
                           str(tmp_path / "y.npy"), "--json")
    obj = json.loads(out)
    assert code == 0 and obj["shape"] == [6, 40] and obj["output"]["within_tolerance"]
    y = np.load(tmp_path / "y.npy")
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.astype(np.float64).var(-1, keepdims=True)
                                                    + 1e-5)
    assert y.shape == (6, 40) and np.allclose(y, ref, rtol=1e-5, atol=1e-6)
    np.save(tmp_path / "flat.npy", x.ravel())
    code, _, err = run_cli(capsys, "run", "--op", "layernorm", "--input",
                           str(tmp_path / "flat.npy"))
    assert code == 2 and "expected a 2-D array" in err and err.count("\n") == 1


def test_partial_model_file_inherits_from_its_base(capsys, tmp_path):
    partial = tmp_path / "slow.toml"
    partial.write_text('base = "j6"\n[ddr]\nlatency_cycles = 500.0  # guess: a slower DDR\n')
    code, a, _ = run_cli(capsys, "run", "--n", "4096", "--json", "--no-data")
    code2, b, _ = run_cli(capsys, "run", "--n", "4096", "--json", "--no-data", "--model",
                          str(partial))
    assert code == code2 == 0 and json.loads(b)["cycles"] > json.loads(a)["cycles"]
    _, out, _ = run_cli(capsys, "keys", "--json", "--model", str(partial))
    rows = {r["key"]: r for r in json.loads(out)}
    assert rows["ddr.latency_cycles"]["value"] == 500.0
    assert rows["ddr.latency_cycles"]["label"] == "guess"
    assert rows["ddr.bytes_per_cycle"]["label"] == "fitted"  # inherited with its comment


def test_second_core_runs_an_op(capsys):
    code, out, _ = run_cli(capsys, "run", "--n", "4096", "--json", "--no-data", "--set",
                           "core.count=2", "--core", "1")
    obj = json.loads(out)
    assert code == 0 and obj["core"] == "core1" and "core1.idma0" in obj["busy_cycles"]


# ------------------------------------------------------------------------------ hostile input
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
CLI = [sys.executable, "-m", "dspsim.cli"]


def cli(*argv, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    return subprocess.run([*CLI, *map(str, argv)], timeout=timeout, text=True, env=ENV, **kw)


def test_a_full_stdout_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        p = cli("run", "--n", "2000", "--json", stdout=full, stderr=subprocess.PIPE,
                capture_output=False)
    assert p.returncode == 2 and one_line(p.stderr) and "No space left" in p.stderr, p.stderr


def test_a_closed_stdout_is_one_line_and_exit_2():
    p = subprocess.run(" ".join([*CLI, "run", "--n", "2000", "--json"]) + " >&-", shell=True,
                       capture_output=False, stderr=subprocess.PIPE, text=True, env=ENV,
                       timeout=60)
    assert p.returncode == 2 and one_line(p.stderr) and "closed" in p.stderr, p.stderr


def test_a_broken_pipe_is_quiet():
    p = subprocess.run(" ".join([*CLI, "ops", "--json"]) + " | head -c 1", shell=True,
                       capture_output=True, text=True, env=ENV, timeout=60,
                       executable="/bin/bash")
    assert p.stdout == "[" and p.stderr == ""


def test_a_set_value_with_a_newline_is_refused(capsys):
    code, _, err = run_cli(capsys, "run", "--n", "2000", "--set", "ddr.latency_cycles=1\nfoo=2")
    assert code == 2 and "one line" in err and err.count("\n") == 1


HEAVY = ("pandas", "matplotlib", "scipy", "pyarrow", "distributed")


def heavy_modules_after(code: str) -> str:
    """Run ``code`` in a fresh interpreter; what it printed (the heavy modules it loaded)."""
    code += f"\nimport sys; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_the_command_line_imports_no_heavy_module_to_parse():
    """``import dspsim`` and declaring every command (what each call of ``dspsim`` pays before
    it runs) import no pandas, matplotlib, scipy, pyarrow or dask."""
    assert heavy_modules_after(
        "import dspsim, dspsim.cli; dspsim.cli.build_parser().parse_args(['run', '--n', '5'])"
    ) == "[]"


@pytest.mark.parametrize("argv", [
    ["run", "--json", "--n", "4096"],
    ["run", "--json", "--op", "layernorm", "--shape", "8,256"],
    ["run", "--json", "--variant", "direct", "--n", "4096", "--fidelity", "tile"],
    ["reproduce", "--json", "--no-data"],
])
def test_a_json_summary_imports_no_heavy_module(argv):
    """``run --json`` reports the stall breakdown from the trace's numpy columns: no pandas
    (about half the old start-up), no plotting, no fitting."""
    assert heavy_modules_after(
        "import contextlib, io, dspsim.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = dspsim.cli.main({argv!r})\n"
        "assert code == 0 and '\"busy_cycles\"' in out.getvalue(), code"
    ) == "[]"


def test_models_report_the_same_run_under_each_model(capsys, tmp_path):
    fast = tmp_path / "fast.toml"
    fast.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 2.0  # guess: a faster port\n')
    code, out, _ = run_cli(capsys, "run", "--variant", "direct", "--n", "4096", "--no-data",
                           "--json", "--models", f"j6,{fast}")
    runs = json.loads(out)["models"]
    assert code == 0 and set(runs) == {"j6", "fast"}
    assert runs["fast"]["cycles"] < runs["j6"]["cycles"]
    assert runs["fast"]["bytes"] == runs["j6"]["bytes"]
    code, out, _ = run_cli(capsys, "reproduce", "--no-data", "--json", "--models", f"j6,{fast}")
    assert code == 0 and set(json.loads(out)["models"]) == {"j6", "fast"}
    code, _, err = run_cli(capsys, "run", "--models", "j6", "--model", "j6")
    assert code == 2 and err.count("\n") == 1
    code, out, _ = run_cli(capsys, "sweep", "--models", f"j6,{fast}", "--param",
                           "ddr.latency_cycles=100,200", "--out", str(tmp_path / "s.csv"))
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert code == 0 and [r["model"] for r in rows] == ["j6"] * 4 + ["fast"] * 4


@pytest.mark.parametrize("argv, words", [
    (["--set", "layernorm.eps=0.5"], "it is a key of layernorm"),
    (["--variant", "direct", "--set", "softmax.tile_bytes=16384"],
     "does nothing in softmax direct: it acts in softmax pingpong"),
    (["--op", "copy", "--set", "fc.tile_rows=4"], "in a copy run"),
    # an iDMA key in a variant of no channel (a sweep's note said so; the run took it silently)
    (["--variant", "direct", "--set", "idma.max_outstanding=8"],
     "does nothing in softmax direct: it acts in softmax pingpong"),
    (["--op", "kernel", "--set", "idma.burst_bytes=64"], "it acts in no kernel variant"),
    # a TCM key in a variant of no DataRAM (the same cycles at any tcm.banks, bank_bytes)
    (["--op", "layernorm", "--variant", "direct", "--set", "tcm.reserved_bytes=0"],
     "does nothing in layernorm direct: it acts in layernorm pingpong"),
])
def test_a_set_key_that_cannot_act_in_the_run_is_refused(capsys, argv, words):
    """Every key does something or is refused: another op's key, or a key the variant does not
    use, changed nothing in the run and said nothing."""
    code, _, err = run_cli(capsys, "run", "--no-data", *argv)
    assert code == 2 and one_line(err) and words in err, err


def test_a_set_key_of_the_run_acts(capsys):
    """The check lets through what acts: the op's own key in a variant that uses it and a
    hardware key (both move the cycles)."""
    cycles = []
    for sets in ([], ["--set", "softmax.tile_bytes=65536"], ["--set", "ddr.latency_cycles=120"]):
        code, out, _ = run_cli(capsys, "run", "--no-data", "--json", *sets)
        assert code == 0
        cycles.append(json.loads(out)["cycles"])
    assert cycles[1] != cycles[0] and cycles[2] != cycles[0]


def test_every_option_of_every_command_has_help():
    """`dspsim sweep --help` listed --executor without a word of what it does."""
    import argparse

    from dspsim.cli import build_parser

    def bare(p, name):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    yield from bare(sp, f"{name} {sub}")
            elif not a.help:
                yield f"{name} {'/'.join(a.option_strings) or a.dest}"

    assert list(bare(build_parser(), "dspsim")) == []


def test_a_negative_window_is_refused_by_the_window_check(capsys, tmp_path):
    """``--window -100:500`` was argparse's "expected one argument"; now the window's own
    line says what is allowed, as ``--window=-100:500`` did."""
    for window in (["--window", "-100:500"], ["--window=-100:500"]):
        code, _, err = run_cli(capsys, "run", "--no-data", "--n", "4096", "--timeline",
                               str(tmp_path / "t.png"), *window)
        assert code == 2 and one_line(err) and "window -100:500 is outside the run" in err
    assert not (tmp_path / "t.png").exists()
