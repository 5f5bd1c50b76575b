"""Softmax of a row holding +inf: faithful to the C, and said so.

vecexpf_max passes a +inf input through its polynomial unchanged, so that element's exponential
is +inf whatever the max; every other element's exp(x - inf) is 0: the sum is +inf, 1/sum is
0, and the row's output is NaN at each +inf (inf x 0) and 0 elsewhere. A float64 softmax gives
a NaN row. The run reports it (``inf_input``, counting the +inf elements).
"""

from __future__ import annotations

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.ops.registry import get_op
from dspsim.ops.softmax.reference import reference_softmax

VARIANTS = ["pingpong", "direct", "online", "resident", "multibuffer", "rows"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_row_with_inf_is_nan_there_and_zero_elsewhere_and_says_so(variant):
    x = np.linspace(-3.0, 3.0, 1000, dtype=np.float32).reshape(10, 100)
    x[2, 7] = x[2, 50] = x[6, 0] = np.inf
    r = simulate(load_model(), "softmax", variant, x=x)
    y = r.output_array.reshape(10, 100)
    inf = np.isinf(x)
    for row in (2, 6):
        assert np.isnan(y[row][inf[row]]).all() and (y[row][~inf[row]] == 0).all()
    clean = [r_ for r_ in range(10) if r_ not in (2, 6)]  # ordinary softmax rows
    assert np.allclose(y[clean].sum(axis=1), 1.0, atol=1e-5)
    # the float64 reference: a NaN row
    ref = reference_softmax(x[2].astype(np.float64))
    assert np.isnan(ref).all()
    warnings = {w["code"]: w for w in r.warnings}
    assert warnings["inf_input"]["count"] == 3, warnings
    assert "NaN" in warnings["inf_input"]["message"]
    assert "inf_input" in get_op("softmax").warning_codes


def test_no_inf_no_warning():
    r = simulate(load_model(), "softmax", "direct", x=np.linspace(-3, 3, 256, dtype=np.float32))
    assert "inf_input" not in {w["code"] for w in r.warnings}
