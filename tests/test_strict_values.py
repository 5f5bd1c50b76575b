"""Values are read strictly (``300#5`` is not 300), and every text file a user gives may start
with a UTF-8 byte-order mark, as a spreadsheet or an editor's "UTF-8 with BOM" writes it."""

import json

import pytest

from dspsim.config import load_model, parse_value
from dspsim.errors import ConfigError
from dspsim.schema import parse_number
from tests.cli_helpers import one_line, run_cli

BOM = "\ufeff"

# not exactly one number: a comment, a second value, a list, junk after or before, a word
NOT_A_NUMBER = ["300#5", "300 #5", "300 400", "300,400", "[300]", "300]", "1e2x", "x300",
                "300_", "_300", "3__00", "0x", "1e", "true", "", "   ", "'300'", "300 # ]",
                "300\t5", "1.2.3", "--300", "3 00"]


@pytest.mark.parametrize("text", NOT_A_NUMBER)
def test_a_number_key_takes_one_number_and_nothing_else(text, capsys):
    """Before: ``--set ddr.latency_cycles=300#5`` set 300 (the rest read as a TOML comment)."""
    for key in ("ddr.latency_cycles", "idma.burst_bytes"):
        with pytest.raises(ConfigError) as e:
            parse_value(key, text)
        assert "\n" not in str(e.value)
    code, _, err = run_cli(capsys, "keys", "--set", f"ddr.latency_cycles={text}")
    assert code == 2 and one_line(err), err


@pytest.mark.parametrize("text, value", [
    ("300", 300), (" 300 ", 300), ("+300", 300), ("3e2", 300.0), ("1_000", 1000),
    ("0x40", 64), ("0o100", 64), ("0b1000000", 64), ("300.5", 300.5), ("-0.0", 0.0),
])
def test_numbers_as_toml_writes_them_still_read(text, value):
    got = parse_number(text)
    assert got == value and type(got) is type(value)
    if value > 0:  # the key's range: > 0
        model = load_model(overrides=[f"ddr.latency_cycles={text}"])
        assert model.ddr.latency_cycles == float(value)


@pytest.mark.parametrize("text", ["true#", "true false", "yes", "1", "True", "'true'"])
def test_a_bool_key_takes_true_or_false_alone(text):
    with pytest.raises(ConfigError, match="expected true or false"):
        parse_value("softmax.guard_shifted_input", text)
    assert parse_value("softmax.guard_shifted_input", " true ") is True


def test_a_text_key_drops_one_pair_of_quotes_only():
    assert parse_value("softmax.max_init", '"-inf"') == "-inf"
    assert parse_value("softmax.max_init", "'zero'") == "zero"
    for text in ('"zero', "zero'", '"zero"#x', "'zero\""):
        with pytest.raises(ConfigError, match="allowed values"):
            load_model(overrides=[f"softmax.max_init={text}"])


def test_sweep_values_are_as_strict(tmp_path, capsys):
    for param in ("ddr.latency_cycles=300#5,400", "ddr.latency_cycles=100:300#5:100",
                  "idma.burst_bytes=64 128"):
        code, _, err = run_cli(capsys, "sweep", "--param", param, "--out", tmp_path / "s.csv")
        assert code == 2 and one_line(err) and not (tmp_path / "s.csv").exists(), err
    code, _, err = run_cli(capsys, "sweep", "--set", "ddr.latency_cycles=300#5", "--out",
                           tmp_path / "s.csv")
    assert code == 2 and one_line(err), err


def test_a_measurement_setting_is_as_strict(tmp_path, capsys):
    m = tmp_path / "m.csv"
    m.write_text("variant,cycles,ddr.latency_cycles\npingpong,5154293,300#5\n")
    code, _, err = run_cli(capsys, "calibrate", "--measured-csv", m, "--free",
                           "ddr.bytes_per_cycle")
    assert code == 2 and one_line(err) and "300#5" in err, err


# ------------------------------------------------------------------------ byte-order marks
def test_a_model_file_and_its_base_may_start_with_a_bom(tmp_path, capsys):
    """Before: a BOM made a model file "not valid TOML" without naming it."""
    base = tmp_path / "base.toml"
    base.write_text(BOM + 'base = "j6"\n[ddr]\nlatency_cycles = 200.0  # guess\n',
                    encoding="utf-8")
    m = tmp_path / "m.toml"
    m.write_text(BOM + 'base = "base.toml"\n[ddr]\nbytes_per_cycle = 2.0  # guess\n',
                 encoding="utf-8")
    model = load_model(m)
    assert (model.ddr.latency_cycles, model.ddr.bytes_per_cycle) == (200.0, 2.0)
    code, out, err = run_cli(capsys, "keys", "--model", m)
    assert code == 0 and "guess" in out, err


def test_spec_workload_and_measurement_files_may_start_with_a_bom(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(BOM + 'n = 2048\nvariant = "pingpong"\n[params]\n'
                    '"ddr.latency_cycles" = [100, 200]\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--out", tmp_path / "s.csv")
    assert code == 0, err
    w = tmp_path / "w.toml"
    w.write_text(BOM + '[[stream]]\nname = "s"\nop = "softmax"\nvariant = "pingpong"\n'
                 "n = 1000\nperiod_us = 100\ncount = 2\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "workload", w, "--json")
    assert code == 0 and json.loads(out), err
    m = tmp_path / "m.csv"
    m.write_text(BOM + "variant,cycles\npingpong,5154293\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "calibrate", "--measured-csv", m, "--free",
                           "ddr.latency_cycles", "--json")
    assert code in (0, 1) and "error" not in err, err


def test_a_saved_run_and_a_sweep_table_may_start_with_a_bom(tmp_path, capsys):
    run = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "run", "--n", "2048", "--no-data", "--save", run)
    assert code == 0, err
    run.write_text(BOM + run.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = run_cli(capsys, "report", run)
    assert code == 0 and out, err
    table = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", "2048", "--variant", "pingpong,direct",
                           "--param", "ddr.latency_cycles=100,200", "--out", table)
    assert code == 0, err
    rows = table.read_text(encoding="utf-8")
    table.write_text(BOM + rows, encoding="utf-8")
    code, _, err = run_cli(capsys, "plot", "sweep", table, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "s.png")
    assert code == 0, err
    # the resume reads the journal's header through the BOM: nothing is computed again
    code, out, err = run_cli(capsys, "sweep", "--n", "2048", "--variant", "pingpong,direct",
                             "--param", "ddr.latency_cycles=100,200", "--out", table)
    assert code == 0 and "0 computed" in out, (out, err)
    side = tmp_path / "s.csv.sweep.json"
    side.write_text(BOM + side.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = run_cli(capsys, "sweep", "--n", "2048", "--variant", "pingpong,direct",
                             "--param", "ddr.latency_cycles=100,200", "--out", table)
    assert code == 0 and "0 computed" in out, (out, err)
