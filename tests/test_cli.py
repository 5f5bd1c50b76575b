"""The command line contract."""

import json
import subprocess
import sys

import pytest

from dspsim.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_has_the_contracted_fields(capsys):
    code, out, _ = run_cli(capsys, "run", "--mode", "direct", "--n", "5000", "--json")
    assert code == 0
    obj = json.loads(out)
    for key in ("mode", "n", "cycles", "time_us", "bytes", "busy_cycles", "passes", "events",
                "wall_s", "manifest"):
        assert key in obj
    assert obj["mode"] == "direct" and obj["n"] == 5000 and isinstance(obj["cycles"], int)
    assert set(obj["bytes"]) >= {"ddr_read", "ddr_write"}
    assert set(obj["busy_cycles"]) >= {"core", "idma0", "idma1"}
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
        (["run", "--mode", "fast"], "invalid choice"),
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
