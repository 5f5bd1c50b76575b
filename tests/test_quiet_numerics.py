"""A successful run prints no numpy RuntimeWarning: the NaN, inf and overflow an input makes
where the model (or its float64 reference) expects them are silenced where they are computed,
and what the seed's C does with such input is said by the model's own warnings."""

from __future__ import annotations

import numpy as np
import pytest

from dspsim.config import load_model
from dspsim.ops import get_op
from dspsim.run import simulate
from tests.cli_helpers import run_cli

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

RNG = np.random.default_rng(20)
ALL_NEGATIVE = (-np.abs(RNG.standard_normal(3000)) - 100).astype(np.float32)  # exp(x) underflows
ALL_NAN = np.full(3000, np.nan, np.float32)
NAN_ROW = RNG.standard_normal((4, 700)).astype(np.float32)
NAN_ROW[2] = np.nan
INF_IN_A_ROW = RNG.standard_normal((8, 256)).astype(np.float32)
INF_IN_A_ROW[3, 17] = np.inf
CASES = {  # (op, input, a warning code the pingpong run carries)
    "all negative softmax": ("softmax", ALL_NEGATIVE, "max_init_zero"),
    "all-NaN softmax": ("softmax", ALL_NAN, "nan_input"),
    "softmax with a NaN row": ("softmax", NAN_ROW, "nan_input"),
    "LayerNorm with an inf": ("layernorm", INF_IN_A_ROW, None),
}


def codes(result) -> set[str]:
    return {w["code"] for w in result.warnings}


@pytest.mark.parametrize("case", CASES)
def test_simulate_warns_in_its_own_words_only(case):
    op, x, code = CASES[case]
    model = load_model()
    for variant in get_op(op).variants:
        result = simulate(model, op, variant, x=x)
        if code is not None and variant == "pingpong":
            assert code in codes(result)  # the model's quirk report stays


@pytest.mark.parametrize("case", CASES)
def test_run_input_prints_no_numpy_warning(case, tmp_path, capsys):
    op, x, code = CASES[case]
    path = tmp_path / "x.npy"
    np.save(path, x)
    status, out, err = run_cli(capsys, "run", "--op", op, "--variant", "pingpong",
                               "--input", path)
    assert status == 0, err
    assert "RuntimeWarning" not in err
    if code is not None:
        assert code in out + err


def test_an_output_holding_inf_and_minus_inf_is_summed_quietly():
    """LayerNorm with eps = 0 on a row of denormals: float32's variance underflows to 0, the
    row's outputs are +inf and -inf, and their sum is NaN without a numpy warning (the model
    says what happened: statistics_underflow)."""
    x = np.ones((4, 8), np.float32) * np.arange(8, dtype=np.float32)
    x[0] = np.float32(1e-42) * np.arange(1, 9, dtype=np.float32)
    r = simulate(load_model().with_overrides({"layernorm.eps": 0.0}), "layernorm", "direct",
                 x=x)
    assert np.isposinf(r.output_array[0]).any() and np.isneginf(r.output_array[0]).any()
    assert "statistics_underflow" in codes(r) and np.isnan(r.output["sum"])
