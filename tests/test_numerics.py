"""The kernels' float32 numerics against float64 references, exact emulations and invariants."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dspsim.errors import DspsimInputError
from dspsim.kernels.numerics import (
    EXPFTBLF_BITS,
    INVLN2_Q30,
    _mul_q30_via_16bit_halves,
    expf_input_flags,
    expf_overflow_threshold,
    vecexpf_max,
    vecmaxf,
    vecmul,
    vecsum,
)
from dspsim.kernels.toolkit import fma_f32 as _fma_f32

F32 = np.float32
SUBNORMAL_ULP = 2.0**-149
SMALLEST_NORMAL = 2.0**-126


def softmax_direct(x: np.ndarray, lanes: int = 32, guard_shifted_input: bool = False):
    """The seed's direct version: max, exp(x - max), sum, multiply by 1/sum (all float32)."""
    m = vecmaxf(x, lanes)
    e = vecexpf_max(x, m, guard_shifted_input)
    s = vecsum(e, lanes)
    with np.errstate(divide="ignore"):
        div = F32(1.0) / F32(s)
    return vecmul(e, div)


def max_rel_err(y: np.ndarray, x: np.ndarray, floor: float = 1e-30) -> float:
    ref = scipy.special.softmax(x.astype(np.float64))
    keep = ref > floor
    return float(np.max(np.abs(y[keep].astype(np.float64) - ref[keep]) / ref[keep]))


def f32_range(lo: float, hi: float) -> np.ndarray:
    """Every float32 in [lo, hi) for 0 <= lo < hi (consecutive bit patterns)."""
    a, b = np.array([lo, hi], F32).view(np.uint32)
    return np.arange(a, b, dtype=np.uint32).view(F32)


# ----------------------------------------------------------------------------- constants
def test_constants_match_their_definitions():
    assert INVLN2_Q30 == round(2**30 / math.log(2))
    assert float(expf_overflow_threshold()) == pytest.approx(88.722839, abs=1e-5)
    coeffs = np.array(EXPFTBLF_BITS, np.uint32).view(F32).astype(np.float64)
    # the polynomial is 2^f on [0, 1): 1 at 0, 2 at 1, ln 2 as the linear term
    assert coeffs[-1] == 1.0
    assert coeffs.sum() == pytest.approx(2.0, abs=1e-7)
    assert coeffs[-2] == pytest.approx(math.log(2), rel=1e-6)


def test_16x32_multiply_pair_is_the_full_32x32_product():
    t = np.array([-(2**31), -(2**31) + 1, -1, 0, 1, 12345678, 2**31 - 1], np.int64)
    assert np.array_equal(_mul_q30_via_16bit_halves(t, INVLN2_Q30), t * INVLN2_Q30)


def test_fma_is_correctly_rounded_where_float64_double_rounds():
    # a*b + c = 2^30 + 2^7 + 2^6 - 2^-40: just below the float32 midpoint; rounding to float64
    # first lands exactly on the midpoint, which ties to even (2^30 + 2^8), the wrong way.
    a, b, c = F32(8 + 2.0**-20), F32(8 - 2.0**-20), F32(2.0**30 + 2.0**7)
    naive = F32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == F32(2.0**30 + 2.0**8)
    assert _fma_f32(np.array([a]), b, c)[0] == F32(2.0**30 + 2.0**7)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e4, 1e4, width=32),
    st.floats(-1e4, 1e4, width=32),
    st.floats(-1e8, 1e8, width=32),
)
def test_fma_matches_exact_rational_rounding(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    r = _fma_f32(np.array([a], F32), F32(b), F32(c))[0]
    lo, hi = np.nextafter(r, F32(-np.inf)), np.nextafter(r, F32(np.inf))
    err = abs(Fraction(float(r)) - exact)
    assert err <= abs(Fraction(float(lo)) - exact)
    assert err <= abs(Fraction(float(hi)) - exact)


# ----------------------------------------------------------------------------- vecexpf_max
def test_vecexpf_accuracy_over_the_seed_range():
    """exp over [-103, 88] with max_value = 0 against float64 np.exp.

    Normal results (>= 2^-126): relative error <= 3e-7. Subnormal results: absolute error
    <= 2 subnormal ULPs (2 * 2^-149). The bound for subnormals: the last multiply by the second
    exponent-half scale rounds once (<= 0.5 ULP) and the polynomial's relative error (< 2e-7)
    is worth < 2^-126 * 2e-7 < 1.4 ULPs of 2^-149.
    """
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            np.linspace(-103.0, 88.0, 400_001),
            rng.uniform(-103.0, 88.0, 100_000),
            np.arange(-148, 128) * math.log(2),  # integer/fraction boundaries
            [0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1e-8, 88.0, -103.0],
        ]
    ).astype(F32)
    y = vecexpf_max(x, 0.0)
    assert y.dtype == F32 and y.shape == x.shape
    ref = np.exp(x.astype(np.float64))
    normal = ref >= SMALLEST_NORMAL
    rel = np.abs(y[normal] - ref[normal]) / ref[normal]
    assert rel.max() <= 3e-7
    sub = ~normal
    assert sub.sum() > 1000
    assert np.max(np.abs(y[sub] - ref[sub])) <= 2 * SUBNORMAL_ULP


def test_vecexpf_every_float32_in_a_window():
    """Exhaustive over every float32 in +-[0.5, 0.53125) and +-[1, 1.0625) (2^20 inputs):
    relative error <= 3e-7."""
    x = np.concatenate([s * f32_range(lo, lo * 1.0625) for s in (-1, 1) for lo in (0.5, 1.0)])
    y = vecexpf_max(x, 0.0)
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(y - ref) / ref) <= 3e-7


def test_vecexpf_shift_by_max_is_exp_of_the_difference():
    x = np.linspace(-20.0, 20.0, 1001).astype(F32)
    y = vecexpf_max(x, 20.0)
    ref = np.exp((x - F32(20.0)).astype(np.float64))  # the kernel subtracts in float32
    assert np.max(np.abs(y - ref) / ref) <= 3e-7


def test_vecexpf_monotone_across_exponent_boundaries():
    """Around each k*ln2, where the integer part steps and the fraction wraps to 0, adjacent
    float32 inputs give non-decreasing outputs (the polynomial at f -> 1 does not exceed 2)."""
    centres = (np.arange(-115, 128) * math.log(2)).astype(F32).view(np.int32)
    offsets = np.arange(-2048, 2048, dtype=np.int32)
    bits = centres[:, None] + np.where(centres[:, None] < 0, -offsets, offsets)
    x = bits.reshape(-1).view(F32)
    x = np.sort(x[(x > -80) & (x < 80)])
    y = vecexpf_max(x, 0.0)
    assert np.all(np.diff(y) >= 0)


@settings(max_examples=100, deadline=None)
@given(
    hnp.arrays(
        F32,
        st.integers(2, 200),
        elements=st.floats(-80, 80, width=32, allow_subnormal=True),
    )
)
def test_vecexpf_monotone_property(x):
    x = np.sort(x)
    y = vecexpf_max(x, 0.0)
    assert np.all(np.diff(y) >= 0)


def test_vecexpf_special_values():
    thr = expf_overflow_threshold()
    below = np.nextafter(thr, F32(0))
    x = np.array([np.inf, np.nan, -np.inf, thr, below, -200.0, 0.0], F32)
    y = vecexpf_max(x, 0.0)
    assert y[0] == np.inf  # +inf passes through the polynomial
    assert np.isnan(y[1])  # NaN passes through
    assert y[2] == 0.0  # clamped at -128 -> 2^-184.7 -> 0
    assert y[3] == np.inf  # the overflow guard fires at the threshold itself
    assert np.isfinite(y[4])
    assert y[4] == pytest.approx(math.exp(float(below)), rel=3e-7)
    assert y[5] == 0.0
    assert y[6] == 1.0


def test_vecexpf_empty_and_input_untouched():
    assert vecexpf_max(np.array([], F32), 0.0).shape == (0,)
    x = np.array([1.0, 2.0, 3.0], F32)
    keep = x.copy()
    vecexpf_max(x, 3.0)
    assert np.array_equal(x, keep)


# ----------------------------------------------------------------------------- the quirks
def test_raw_input_overflow_guard_makes_softmax_nan_and_the_shifted_guard_fixes_it():
    rng = np.random.default_rng(7)
    x = (88.0 + 2.0 * rng.standard_normal(500)).astype(F32)
    n_over = int(np.sum(x >= expf_overflow_threshold()))
    assert n_over > 0

    m = vecmaxf(x, 32)
    e = vecexpf_max(x, m)
    assert np.array_equal(np.isinf(e), x >= expf_overflow_threshold())
    y = softmax_direct(x)
    assert np.all(np.isnan(y[x >= expf_overflow_threshold()]))
    flags = expf_input_flags(x, m)
    assert flags == {"nan_inputs": 0, "overflow_guard": n_over}

    e_fixed = vecexpf_max(x, m, guard_shifted_input=True)
    assert np.all(np.isfinite(e_fixed))
    y_fixed = softmax_direct(x, guard_shifted_input=True)
    assert np.all(np.isfinite(y_fixed))
    assert max_rel_err(y_fixed, x) <= 1e-5
    assert expf_input_flags(x, m, guard_shifted_input=True) == {
        "nan_inputs": 0,
        "overflow_guard": 0,
    }


def test_nan_inputs_are_counted_and_flow_through():
    x = np.array([1.0, np.nan, 2.0, np.nan, 100.0], F32)
    flags = expf_input_flags(x, 2.0)
    assert flags == {"nan_inputs": 2, "overflow_guard": 1}  # NaN is not counted as overflow
    y = vecexpf_max(x, 2.0)
    assert np.array_equal(np.isnan(y), np.isnan(x))
    assert np.isnan(vecmaxf(x, 16))  # IVP_MAXN_2XF32 taken to propagate NaN
    assert np.isnan(vecsum(x, 16))


# ----------------------------------------------------------------------------- vecmaxf
@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(F32, st.integers(1, 300), elements=st.floats(width=32, allow_nan=False)),
    st.sampled_from([16, 32]),
)
def test_vecmaxf_is_the_max(x, lanes):
    assert vecmaxf(x, lanes) == np.max(x)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 63, 64, 65, 1000])
def test_vecmaxf_finds_the_max_in_every_position(n):
    base = -np.arange(n, dtype=F32) - 1.0
    for pos in range(min(n, 70)):
        x = base.copy()
        x[pos] = 5.0
        assert vecmaxf(x, 32) == F32(5.0)
    assert vecmaxf(np.full(n, -np.inf, F32), 32) == -np.inf


def test_empty_inputs_return_zero_like_the_c():
    assert vecmaxf(np.array([], F32), 32) == 0.0
    assert vecsum(np.array([], F32), 32) == 0.0
    assert vecmul(np.array([], F32), 2.0).shape == (0,)


def test_lanes_must_be_a_power_of_two():
    with pytest.raises(DspsimInputError, match="power of two"):
        vecmaxf(np.ones(8, F32), 24)
    with pytest.raises(DspsimInputError, match="power of two"):
        vecsum(np.ones(8, F32), 0)


# ----------------------------------------------------------------------------- vecsum
def vecsum_loops(x: np.ndarray, lanes: int) -> np.float32:
    """The seed's vecsum written out with scalar float32 adds, for small arrays only."""
    acc = [[F32(0.0)] * lanes for _ in range(2)]
    full = len(x) // (2 * lanes) * (2 * lanes)
    for i in range(full):
        a, lane = (i // lanes) % 2, i % lanes
        acc[a][lane] = F32(acc[a][lane] + x[i])
    for j in range(len(x) - full):  # the predicated tail
        a, lane = j // lanes, j % lanes
        acc[a][lane] = F32(acc[a][lane] + x[full + j])
    v = [F32(acc[0][k] + acc[1][k]) for k in range(lanes)]
    while len(v) > 1:  # IVP_RADDN_2XF32 as a tree of halves
        h = len(v) // 2
        v = [F32(v[k] + v[k + h]) for k in range(h)]
    return v[0]


def test_vecsum_order_is_the_kernels_not_numpys():
    """Lane 0 of accumulator 0 sees 2^25, then 1.0 (lost: ulp of 2^25 is 4), then -2^25.

    The kernel's per-lane sequential order loses every 1.0 in that lane; a different order
    (numpy's, or the exact sum) keeps some of them.
    """
    lanes = 16
    x = np.zeros(5 * 2 * lanes + 7, F32)
    lane0 = np.arange(5) * 2 * lanes  # element indices of accumulator 0, lane 0
    x[lane0] = [2.0**25, 1.0, 1.0, 1.0, -(2.0**25)]
    x[lane0[1:4] + 1] = 1.0  # and 1.0 in lane 1, where they are kept
    got = vecsum(x, lanes)
    assert got == vecsum_loops(x, lanes) == F32(3.0)
    assert math.fsum(x.astype(np.float64)) == 6.0
    assert np.sum(x, dtype=F32) != got
    assert np.sum(x[::-1], dtype=F32) != got


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 64, 65, 97, 200])
@pytest.mark.parametrize("lanes", [4, 16])
def test_vecsum_matches_the_loop_emulation_bit_for_bit(n, lanes):
    rng = np.random.default_rng(n * 31 + lanes)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(F32)
    assert vecsum(x, lanes).tobytes() == vecsum_loops(x, lanes).tobytes()


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(F32, st.integers(1, 600), elements=st.floats(-1e6, 1e6, width=32)),
    st.sampled_from([16, 32]),
)
def test_vecsum_within_the_summation_error_bound(x, lanes):
    """|vecsum - exact| <= gamma_d * sum|x|, d = the most adds on any element's path."""
    depth = -(-len(x) // (2 * lanes)) + 1 + int(math.log2(lanes))
    u = 2.0**-24
    gamma = depth * u / (1 - depth * u)
    exact = math.fsum(x.astype(np.float64))
    bound = gamma * math.fsum(np.abs(x.astype(np.float64)))
    assert abs(float(vecsum(x, lanes)) - exact) <= bound


# ----------------------------------------------------------------------------- vecmul
def test_vecmul_rounds_each_product_once():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(F32)
    s = F32(1.0 / 3.0)
    assert np.array_equal(vecmul(x, s), (x.astype(np.float64) * float(s)).astype(F32))


# ----------------------------------------------------------------------------- softmax
def test_softmax_on_the_seed_input():
    n = 100_000
    x = (1.0 + np.arange(n) / n).astype(F32)
    y = softmax_direct(x, lanes=32)
    assert y.dtype == F32
    assert max_rel_err(y, x) <= 1e-6
    assert abs(math.fsum(y.astype(np.float64)) - 1.0) <= 1e-5


@pytest.mark.parametrize("n", [1, 31, 33, 1000, 4097])
def test_softmax_on_random_inputs(n):
    x = (np.random.default_rng(n).standard_normal(n) * 10.0).astype(F32)
    y = softmax_direct(x, lanes=32)
    assert np.all(np.isfinite(y))
    assert max_rel_err(y, x) <= 1e-5
    if n == 1:
        assert y[0] == 1.0


# ----------------------------------------------------------------------------- batches (2-D)
LANES = st.sampled_from([1, 2, 4, 8, 16, 32])
SPECIAL = st.sampled_from(
    [
        0.0,
        -0.0,
        math.nan,
        -math.nan,
        math.inf,
        -math.inf,
        2.0**-149,
        -(2.0**-149),
        1e-40,
        -1e-40,
        3.4e38,
        -3.4e38,
        88.75,
        -88.75,
        1.0,
        -1.0,
    ]
)
ELEMENT = st.one_of(SPECIAL, st.floats(width=32, allow_nan=True, allow_subnormal=True))


@st.composite
def batches(draw, max_rows: int = 6, max_n: int = 150):
    """A (rows, n) float32 batch rich in NaN/inf/-0.0/subnormals, and one float32 per row."""
    rows = draw(st.integers(1, max_rows))
    n = draw(st.integers(0, max_n))
    x = draw(hnp.arrays(F32, (rows, n), elements=ELEMENT))
    per_row = draw(hnp.arrays(F32, (rows,), elements=ELEMENT))
    return x, per_row


def bits(a) -> np.ndarray:
    return np.asarray(a, F32).view(np.uint32)


@settings(max_examples=150, deadline=None)
@given(batches(), LANES)
def test_batched_reductions_are_the_1d_calls_bit_for_bit(batch, lanes):
    x, _ = batch
    for fn in (vecmaxf, vecsum):
        got = fn(x, lanes)
        assert isinstance(got, np.ndarray) and got.dtype == F32 and got.shape == (len(x),)
        for i, row in enumerate(x):
            one = fn(row, lanes)
            assert isinstance(one, np.float32)
            assert bits(got[i]) == bits(one), (fn.__name__, i)


@settings(max_examples=150, deadline=None)
@given(batches(), st.booleans(), st.booleans())
def test_batched_elementwise_are_the_1d_calls_bit_for_bit(batch, per_row, guard):
    x, scalars = batch
    arg = scalars if per_row else scalars[0]
    row_arg = (lambda i: scalars[i]) if per_row else (lambda i: scalars[0])
    e = vecexpf_max(x, arg, guard)
    m = vecmul(x, arg)
    flags = expf_input_flags(x, arg, guard)
    for out in (e, m):
        assert out.dtype == F32 and out.shape == x.shape
    for key in ("nan_inputs", "overflow_guard"):
        assert flags[key].shape == (len(x),)
    for i, row in enumerate(x):
        assert np.array_equal(bits(e[i]), bits(vecexpf_max(row, row_arg(i), guard)))
        assert np.array_equal(bits(m[i]), bits(vecmul(row, row_arg(i))))
        one = expf_input_flags(row, row_arg(i), guard)
        assert {k: int(v[i]) for k, v in flags.items()} == one
        assert all(type(v) is int for v in one.values())


def test_batched_empty_rows_and_shapes():
    x = np.empty((3, 0), F32)
    assert np.array_equal(vecmaxf(x, 32), np.zeros(3, F32))
    assert np.array_equal(vecsum(x, 32), np.zeros(3, F32))
    assert vecexpf_max(x, np.zeros(3, F32)).shape == (3, 0)
    assert vecmul(x, 2.0).shape == (3, 0)
    assert vecsum(np.empty((0, 5), F32), 4).shape == (0,)
    with pytest.raises(DspsimInputError, match="2-D"):
        vecsum(np.ones((2, 2, 2), F32), 4)
    with pytest.raises(DspsimInputError, match="one value per row"):
        vecmul(np.ones((2, 4), F32), np.ones(3, F32))
    with pytest.raises(DspsimInputError, match="one value per row"):
        vecexpf_max(np.ones(4, F32), np.ones(4, F32))


def test_batched_softmax_rows_match_the_1d_softmax():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((5, 333)) * 10.0).astype(F32)
    m = vecmaxf(x, 32)
    e = vecexpf_max(x, m)
    s = vecsum(e, 32)
    y = vecmul(e, F32(1.0) / s)
    for i in range(len(x)):
        assert np.array_equal(bits(y[i]), bits(softmax_direct(x[i])))


def test_vecmaxf_is_the_ieee_maximum_on_zeros_and_nan():
    """-0.0 < +0.0 wherever they sit, and NaN is the default quiet NaN whatever its payload."""
    for lanes in (1, 4, 32):
        for n in (2, 9, 70):
            for pos in (0, n // 2, n - 1):
                x = np.full(n, -0.0, F32)
                assert bits(vecmaxf(x, lanes)) == bits(F32(-0.0))
                x[pos] = 0.0
                assert bits(vecmaxf(x, lanes)) == bits(F32(0.0))
                x[pos] = np.array([0xFFC01234], np.uint32).view(F32)[0]  # a negative NaN
                assert bits(vecmaxf(x, lanes)) == 0x7FC00000
