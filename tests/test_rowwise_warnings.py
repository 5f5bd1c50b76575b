"""LayerNorm and RMSNorm keep float32's result where its statistics overflow or its variance
(mean square) underflows, as the C would, and say so: a warning with the rows affected."""

import numpy as np
import pytest

from dspsim import simulate
from dspsim.kernels.layernorm import layernorm_rows
from dspsim.kernels.rmsnorm import rmsnorm_rows
from dspsim.ops import get_op

CHAIN = {"layernorm": layernorm_rows, "rmsnorm": rmsnorm_rows}
VARIANTS = ("pingpong", "direct")
DENORMAL = np.float32(1e-42)


def run(j6, op, variant, x, eps=None):
    model = j6.with_overrides({f"{op}.eps": eps}) if eps is not None else j6
    r = simulate(model, op=op, variant=variant, x=x)
    # the faithful float32 result stays: the kernels' chain, bit for bit
    chain = CHAIN[op](x, model.params(op).eps, model.core.lanes_f32)
    assert r.output_array.tobytes() == chain.tobytes()
    return r, {w["code"]: w for w in r.warnings}


@pytest.mark.parametrize("op", sorted(CHAIN))
@pytest.mark.parametrize("variant", VARIANTS)
def test_overflowing_statistics_are_reported_with_their_rows(j6, op, variant):
    x = np.ones((5, 8), np.float32)
    x[1, 0] = x[3, 2] = 3e19  # its square (or square deviation) overflows float32
    r, warned = run(j6, op, variant, x)
    ref = get_op(op).reference(x, j6.params(op))
    assert np.isfinite(ref).all() and abs(ref[1, 0]) > 1  # float64: 11.3 (LayerNorm)
    assert not r.output["within_tolerance"]
    w = warned["statistics_overflow"]
    assert w["count"] == 2 and w["severity"] == "warning" and "overflow" in w["message"]
    assert "statistics_underflow" not in warned


@pytest.mark.parametrize("op", sorted(CHAIN))
@pytest.mark.parametrize("variant", VARIANTS)
def test_an_underflowing_variance_is_reported_with_its_rows(j6, op, variant):
    x = np.ones((4, 8), np.float32) * np.arange(8, dtype=np.float32)
    x[0] = x[2] = DENORMAL * np.arange(1, 9, dtype=np.float32)  # squares underflow to 0
    r, warned = run(j6, op, variant, x, eps=0.0)
    ref = get_op(op).reference(x, j6.with_overrides({f"{op}.eps": 0.0}).params(op))
    assert np.isfinite(ref).all()
    assert not np.isfinite(r.output_array[0]).all()  # inf or NaN where float64 is finite
    w = warned["statistics_underflow"]
    assert w["count"] == 2 and "underflow" in w["message"]
    assert "statistics_overflow" not in warned


@pytest.mark.parametrize("op", sorted(CHAIN))
def test_rows_float64_cannot_normalise_either_are_not_reported(j6, op):
    """A constant (LayerNorm) or all-zero (RMSNorm) row with eps = 0 is 0/0 in float64 too, a
    row holding inf or NaN is not finite there either, and ordinary rows are left alone."""
    x = np.ones((4, 8), np.float32) * np.arange(8, dtype=np.float32)
    x[0] = 0.0
    x[1, 3] = np.inf
    x[2, 5] = np.nan
    for eps in (0.0, None):
        r, warned = run(j6, op, "pingpong", x, eps=eps)
        assert not {"statistics_overflow", "statistics_underflow"} & set(warned), eps


def test_the_codes_are_the_ops(j6):
    for op in CHAIN:
        assert {"statistics_overflow", "statistics_underflow"} <= set(get_op(op).warning_codes)
