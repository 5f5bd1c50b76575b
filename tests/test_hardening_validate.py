"""Measurements files as a hostile user writes them: every field of a measurement of a wrong
type is one line naming the file, the measurement, the field and what it allows; names are
printed escaped and cut, one table row per measurement, whatever they hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.errors import DspsimInputError
from dspsim.study.validate import _TYPES, read_measurements
from tests.cli_helpers import one_line, run_cli

GOOD = {"name": "softmax direct", "source": "a bench", "platform": "j6", "op": "softmax",
        "variant": "direct", "n": 1000, "settings": {"ddr.latency_cycles": 100},
        "cycles": 20000, "role": "check", "note": "a note"}


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        # a TOML basic string: JSON's escapes are TOML's, DEL escaped too
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return "{" + ", ".join(f"{_toml(k)} = {_toml(x)}" for k, x in v.items()) + "}"


def _file(path, rows: list[dict]) -> str:
    text = "".join("[[measurement]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in r.items())
                   for r in rows)
    path.write_text(text, encoding="utf-8")
    return str(path)


SCALARS = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=4))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.sampled_from(["a", "tcm.banks"]), SCALARS, max_size=2))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(field=st.sampled_from(sorted(_TYPES)), value=VALUES)
def test_a_field_of_a_wrong_type_is_one_line_naming_it(tmp_path, field, value):
    test, allowed = _TYPES[field]
    if test(value):
        return  # the right type: other tests hold its values
    row = {**GOOD, field: value}
    if field == "shape":
        row.pop("n")
    path = _file(tmp_path / "m.toml", [row])
    with pytest.raises(DspsimInputError) as e:
        read_measurements(path)
    text = str(e.value)
    assert "\n" not in text and "m.toml measurement 1" in text, text
    assert f": {field} = " in text and f"allowed: {allowed}" in text, text


@pytest.mark.parametrize("field, value", [("variant", ["direct"]), ("variant", {"a": 1}),
                                          ("op", ["softmax"]), ("shape", [[1, 2]]),
                                          ("n", "1000")])
def test_the_cli_refuses_a_wrong_type_in_one_line(tmp_path, capsys, field, value):
    row = {**GOOD, field: value}
    path = _file(tmp_path / "m.toml", [row])
    code, out, err = run_cli(capsys, "validate", "--only", "--measurements", path)
    assert code == 2 and one_line(err) and f"{field} = " in err and out == "", err


@pytest.mark.parametrize("text, message", [
    ("[[measurement]\n", "is not valid TOML: Expected ']]'"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "is nested too deeply"),  # was a traceback
    ("[[measurement]]\nnote = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
     "is nested too deeply"),
])
def test_a_file_that_is_not_toml_is_one_line_as_a_model_file_is(tmp_path, capsys, text,
                                                                message):
    path = tmp_path / "m.toml"
    path.write_text(text)
    code, out, err = run_cli(capsys, "validate", "--only", "--measurements", str(path))
    assert code == 2 and one_line(err) and out == "", err
    assert f"measurements file {str(path)!r} {message}" in err, err


def test_names_are_escaped_and_cut_one_row_per_measurement(tmp_path, capsys):
    names = ["clear\x1b[2J screen", "forged\r\nj6  fake row", "x" * 100_000, "plain"]
    rows = [{**GOOD, "name": n} for n in names]
    path = _file(tmp_path / "m.toml", rows)
    code, out, err = run_cli(capsys, "validate", "--only", "--measurements", path)
    assert code == 0, err
    assert "\x1b" not in out and "\r" not in out
    lines = out.splitlines()
    table = lines[2:2 + len(names)]
    assert len(table) == len(names) and all(line.startswith("j6 ") for line in table), lines
    assert lines[2 + len(names)] == ""  # the table ends after one row per measurement
    assert max(len(line) for line in lines) < 200 and len(out) < 2000
    assert "clear\\x1b[2J screen" in table[0] and "forged\\r\\nj6  fake row" in table[1]
    assert "xxx..." in table[2]


def test_a_workload_stream_name_is_escaped_and_cut_in_its_summary(tmp_path, capsys):
    names = ["cam\x1b[2J", "forged\r\nrow", "y" * 10_000]
    wl = tmp_path / "w.toml"
    wl.write_text("".join(f'[[stream]]\nname = {json.dumps(n)}\nop = "softmax"\nn = 1000\n'
                          'period_us = 1000\ncount = 2\n' for n in names), encoding="utf-8")
    code, out, err = run_cli(capsys, "workload", wl)
    assert code == 0, err
    assert "\x1b" not in out and "\r" not in out and max(map(len, out.splitlines())) < 300
    assert "cam\\x1b[2J" in out and "forged\\r\\nrow" in out and "yyy..." in out
