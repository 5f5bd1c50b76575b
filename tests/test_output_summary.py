"""The output summary tells the worst: an infinite error is ``inf`` (``"inf"`` in JSON, which
stays valid JSON), ``None`` / "n/a" only when nothing was compared, every element compared
(NaN against NaN is right, anything else against NaN wrong), and the text says how many
elements are wrong."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dspsim.config import load_model
from dspsim.ops.base import error_summary, summary_from_json, summary_json
from dspsim.results import load_run, save_run
from dspsim.run import simulate
from tests.cli_helpers import run_cli

N = 4099
ALL_NEGATIVE = np.full(N, -100.5, np.float32)  # the seed's max 0: exp(x) is 2e-44, 1/sum inf


def strict_json(text: str):
    """JSON as the standard has it: no NaN or Infinity."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_an_infinite_error_is_inf_not_none():
    s = error_summary(np.full(N, np.inf, np.float32), np.full(N, 1.0 / N))
    assert s["max_rel_err"] == math.inf and s["max_abs_err"] == math.inf
    assert s["wrong_count"] == N


def test_nothing_compared_is_none():
    s = error_summary(np.zeros(0, np.float32), np.zeros(0))
    assert s["max_rel_err"] is None and s["max_abs_err"] is None and s["wrong_count"] == 0


def test_every_element_is_compared_against_a_nan_reference():
    """4,098 zeros and one NaN against an all-NaN reference: 4,098 wrong (before: 0)."""
    out = np.zeros(N, np.float32)
    out[7] = np.nan
    s = error_summary(out, np.full(N, np.nan))
    assert s["wrong_count"] == N - 1
    assert s["max_rel_err"] == math.inf and s["max_abs_err"] == math.inf


def test_nan_against_nan_and_inf_against_inf_are_right():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    s = error_summary(ref.astype(np.float32), ref)
    assert s["wrong_count"] == 0 and s["max_rel_err"] == 0.0 and s["max_abs_err"] == 0.0
    s = error_summary(np.array([np.nan, -np.inf, np.inf, 1.0], np.float32), ref)
    assert s["wrong_count"] == 2 and s["max_abs_err"] == math.inf


def test_nan_against_a_reference_below_the_floor_is_wrong():
    s = error_summary(np.array([np.nan, 1.0], np.float32), np.array([0.0, 1.0]))
    assert s["wrong_count"] == 1 and s["max_rel_err"] == math.inf


def test_summary_json_round_trips_non_finite_numbers():
    s = {"sum": math.nan, "max_rel_err": math.inf, "max_abs_err": -math.inf, "wrong_count": 3}
    text = json.dumps(summary_json(s))
    assert strict_json(text) == {"sum": "nan", "max_rel_err": "inf", "max_abs_err": "-inf",
                                 "wrong_count": 3}
    back = summary_from_json(json.loads(text))
    assert math.isnan(back["sum"]) and back["max_rel_err"] == math.inf
    assert back["max_abs_err"] == -math.inf and back["wrong_count"] == 3


def test_the_issues_inputs_through_simulate():
    model = load_model()
    r = simulate(model, "softmax", "pingpong", x=ALL_NEGATIVE)
    assert r.output["inf_count"] == N and r.output["max_rel_err"] == math.inf
    assert r.output["wrong_count"] == N
    x = np.zeros(N, np.float32)
    x[5] = np.inf  # float64's softmax is NaN everywhere; the output 4,098 zeros and a NaN
    r = simulate(model, "softmax", "pingpong", x=x)
    assert r.output["nan_count"] == 1 and r.output["wrong_count"] == N - 1


@pytest.fixture
def all_negative(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, ALL_NEGATIVE)
    return path


def test_run_text_shows_inf_and_the_wrong_count(all_negative, capsys):
    code, out, err = run_cli(capsys, "run", "--input", all_negative)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("output:"))
    assert "max relative error vs float64 inf" in line and "n/a" not in line
    assert f"{N:,} wrong" in line


def test_run_text_says_nothing_of_wrong_when_none_is(capsys):
    code, out, err = run_cli(capsys, "run", "--n", "3000")
    assert code == 0, err
    assert " wrong" not in next(ln for ln in out.splitlines() if "output:" in ln)


def test_run_json_is_valid_and_says_inf(all_negative, capsys):
    code, out, err = run_cli(capsys, "run", "--input", all_negative, "--json")
    assert code == 0, err
    o = strict_json(out)["output"]
    assert o["max_rel_err"] == "inf" and o["sum"] == "inf" and o["wrong_count"] == N


def test_a_saved_run_with_a_nan_sum_loads(tmp_path):
    x = np.full(3000, np.nan, np.float32)
    r = simulate(load_model(), "softmax", "pingpong", x=x, trace=True)
    path = save_run(r, tmp_path / "r.json")
    strict_json(path.read_text())
    back = load_run(path)
    assert math.isnan(back.output["sum"]) and back.output["wrong_count"] == 0
    assert back.output["max_rel_err"] == 0.0  # NaN where float64 is NaN: right


def test_an_element_within_the_absolute_floor_is_not_wrong():
    """LayerNorm's outputs near 0 (the docs' standard-normal rows) are off by 3e-7, inside its
    tolerance's absolute 1e-6 but over 1e-3 relative: they were counted wrong beside
    ``within_tolerance`` true. An element is wrong when off by more than both."""
    ref = np.array([1e-4, -2e-4, 1.0, 0.0, 0.0])
    out = (ref + np.array([3e-7, -3e-7, 0.0, 5e-7, 0.5])).astype(np.float32)
    s = error_summary(out, ref, floor=1e-6, tolerance=1e-5)
    assert s["wrong_count"] == 1  # 0.5 against 0: wrong, though no relative error exists
    assert not s["within_tolerance"]
    s = error_summary(out[:4], ref[:4], floor=1e-6, tolerance=1e-5)
    assert s["within_tolerance"] and s["wrong_count"] == 0
