"""The LayerNorm kernels (vecsumsq_dev, vecnorm): accuracy of the row chain against float64,
exact loop emulation, batch = 1-D bit for bit, loop shapes' cycle counts and the registry."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.kernels import get_kernel
from dspsim.kernels.layernorm import (
    VECNORM,
    VECSUMSQ_DEV,
    layernorm_mean_hi,
    layernorm_rows,
    layernorm_rstd,
    vecnorm,
    vecsumsq_dev,
)
from dspsim.kernels.numerics import vecsum
from dspsim.kernels.toolkit import fma_f32 as _fma_f32

F32 = np.float32
EPS = 1e-5


def reference(x: np.ndarray, eps: float = EPS) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) per row in float64 (numpy's biased var)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def worst_ratio(y: np.ndarray, x: np.ndarray) -> float:
    """max over elements of |y - ref| / max(1e-5 |ref|, 1e-6): <= 1 is within tolerance."""
    ref = reference(x)
    tol = np.maximum(1e-5 * np.abs(ref), 1e-6)
    return float(np.max(np.abs(y.astype(np.float64) - ref) / tol))


def assert_accurate(x: np.ndarray, lanes: int = 32) -> None:
    y = layernorm_rows(x, EPS, lanes)
    assert y.dtype == F32 and y.shape == x.shape
    assert np.all(np.isfinite(y))
    assert worst_ratio(y, x) <= 1.0


def bits(a) -> np.ndarray:
    return np.asarray(a, F32).view(np.uint32)


# ----------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("cols", [1, 2, 31, 33, 256, 1000])
@pytest.mark.parametrize("offset", [0.0, 1000.0, 1e5])
@pytest.mark.parametrize("sigma", [1.0, 10.0])
def test_normal_rows_with_and_without_a_large_offset(sigma, offset, cols):
    rng = np.random.default_rng(int(sigma * 7 + offset) + cols)
    x = (offset + sigma * rng.standard_normal((4, cols))).astype(F32)
    assert_accurate(x)


@pytest.mark.parametrize("cols", [1, 2, 31, 33, 256, 1000])
def test_uniform_rows(cols):
    x = np.random.default_rng(cols).random((4, cols)).astype(F32)
    assert_accurate(x)


@pytest.mark.parametrize("lanes", [1, 4, 16, 32])
def test_accuracy_does_not_depend_on_the_lane_count(lanes):
    x = (1e5 + np.random.default_rng(lanes).standard_normal((3, 300))).astype(F32)
    assert_accurate(x, lanes)


@pytest.mark.parametrize("value", [0.0, 1.0, -3.5, 0.1, 1000.1, 1e5 + 0.3, -7e6, 1e-30, 3e20])
@pytest.mark.parametrize("cols", [1, 2, 33, 1000])
def test_constant_rows_normalise_to_zero(value, cols):
    x = np.full((2, cols), value, F32)
    y = layernorm_rows(x, EPS, 32)
    assert not np.any(np.isnan(y))
    assert np.max(np.abs(y)) <= 1e-6


def test_rows_with_one_outlier():
    rng = np.random.default_rng(5)
    rows = []
    for cols, pos in [(33, 0), (256, 100), (1000, 999)]:
        base = [
            np.zeros(cols),
            rng.standard_normal(cols),
            1e5 + rng.standard_normal(cols),
            rng.random(cols),
        ]
        for b, spike in zip(base, [1e4, 1e3, 100.0, -50.0]):
            row = b.copy()
            row[pos] += spike
            rows.append(row.astype(F32))
    for row in rows:
        assert_accurate(row[None, :])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    log_sigma=st.integers(-3, 3),
    offset=st.sampled_from([0.0, 1.0, -100.0, 1000.0, -3e4, 1e5]),
    lanes=st.sampled_from([1, 2, 4, 8, 16, 32]),
)
def test_accuracy_property(rows, cols, seed, log_sigma, offset, lanes):
    rng = np.random.default_rng(seed)
    x = (offset + 10.0**log_sigma * rng.standard_normal((rows, cols))).astype(F32)
    assert_accurate(x, lanes)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        F32,
        st.tuples(st.integers(1, 3), st.integers(1, 200)),
        elements=st.floats(-1e3, 1e3, width=32),
    )
)
def test_accuracy_property_on_arbitrary_values(x):
    assert_accurate(x, 8)


def test_the_checks_catch_a_one_pass_variance_and_a_missing_correction():
    """The tolerance is tight enough to reject the two shortcuts the kernels avoid: the float32
    one-pass variance E[x^2] - mean^2, and dropping the correction r of a float32 mean."""
    x = (1e5 + np.random.default_rng(3).standard_normal((4, 1000))).astype(F32)
    assert worst_ratio(layernorm_rows(x, EPS, 32), x) <= 1.0

    mean = (x.sum(axis=1, dtype=F32) / F32(1000)).astype(F32)
    var = np.maximum((x * x).sum(axis=1, dtype=F32) / F32(1000) - mean * mean, F32(0))
    one_pass = (x - mean[:, None]) / np.sqrt(var + F32(EPS))[:, None]
    assert worst_ratio(one_pass, x) > 100

    mean_hi = layernorm_mean_hi(vecsum(x, 32), 1000)
    sum_d, sum_d2 = vecsumsq_dev(x, 32, mean_hi)
    r, rstd = layernorm_rstd(sum_d, sum_d2, 1000, EPS)
    assert np.all(r != 0)
    assert worst_ratio(vecnorm(x, mean_hi, 0.0 * r, rstd), x) > 10


# ----------------------------------------------------------------------------- exact numerics
def vecsumsq_dev_loops(x: np.ndarray, lanes: int, mean: float) -> tuple[F32, F32]:
    """The kernel with scalar float32 operations, for small arrays: per-lane SUB, ADD, fused
    MULA into two accumulators each (the tail's lanes map the same way), then the two RADDs."""
    mean = F32(mean)
    s = [[F32(0.0)] * lanes for _ in range(2)]
    q = [[F32(0.0)] * lanes for _ in range(2)]
    for i, xi in enumerate(x):
        a, lane = (i // lanes) % 2, i % lanes
        d = F32(xi - mean)
        s[a][lane] = F32(s[a][lane] + d)
        q[a][lane] = _fma_f32(np.array([d]), d, q[a][lane])[0]

    def radd(acc):
        v = [F32(acc[0][k] + acc[1][k]) for k in range(lanes)]
        while len(v) > 1:
            h = len(v) // 2
            v = [F32(v[k] + v[k + h]) for k in range(h)]
        return v[0]

    return radd(s), radd(q)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 32, 33, 64, 65, 100])
@pytest.mark.parametrize("lanes", [1, 4, 16])
def test_vecsumsq_dev_matches_the_loop_emulation_bit_for_bit(n, lanes):
    rng = np.random.default_rng(n * 17 + lanes)
    x = (3.0 + rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(F32)
    mean = F32(x.astype(np.float64).mean() + 0.01)
    got = vecsumsq_dev(x, lanes, mean)
    assert all(isinstance(v, np.float32) for v in got)
    want = vecsumsq_dev_loops(x, lanes, mean)
    assert bits(got[0]) == bits(want[0]) and bits(got[1]) == bits(want[1])


def test_vecsumsq_dev_squares_are_fused():
    """Over many random rows the separately rounded d*d then add gives a different square sum
    somewhere, so the emulation above does pin the fused multiply-add down."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((50, 40)) * 3.0 + 1.0).astype(F32)
    _, q = vecsumsq_dev(x, 4, 1.0)
    d = (x - F32(1.0)).astype(F32)
    unfused = [vecsum((d[i] * d[i]).astype(F32), 4) for i in range(len(x))]
    assert np.any(bits(q) != bits(np.array(unfused, F32)))


def test_vecsumsq_dev_sum_part_is_vecsum_of_the_deviations():
    x = np.random.default_rng(2).standard_normal((3, 517)).astype(F32)
    mean = np.array([0.5, -1.0, 0.0], F32)
    sum_d, _ = vecsumsq_dev(x, 32, mean)
    assert np.array_equal(bits(sum_d), bits(vecsum((x - mean[:, None]).astype(F32), 32)))


def test_vecnorm_rounds_each_step():
    x = np.random.default_rng(4).standard_normal(1000).astype(F32) + F32(7.0)
    m, r, s = F32(7.1), F32(-0.013), F32(1.0 / 3.0)
    want = ((((x - m).astype(F32)) - r).astype(F32) * s).astype(F32)
    assert np.array_equal(bits(vecnorm(x, m, r, s)), bits(want))
    # not the same as one rounding of the exact expression somewhere
    once = ((x.astype(np.float64) - float(m) - float(r)) * float(s)).astype(F32)
    assert np.any(bits(once) != bits(want))


def test_empty_and_special_rows():
    assert vecsumsq_dev(np.array([], F32), 32, 1.0) == (0.0, 0.0)
    s, q = vecsumsq_dev(np.empty((2, 0), F32), 32, 1.0)
    assert s.shape == q.shape == (2,)
    assert layernorm_rows(np.empty((2, 0), F32), EPS, 32).shape == (2, 0)
    x = np.ones((3, 40), F32)
    x[1, 5] = np.nan
    x[2] = np.arange(40)
    y = layernorm_rows(x, EPS, 16)
    assert np.all(np.isnan(y[1]))  # a NaN poisons its own row only
    assert np.all(y[0] == 0) and np.all(np.isfinite(y[2]))
    with pytest.raises(DspsimInputError, match="one value per row"):
        vecnorm(x, np.zeros(2, F32), 0.0, 1.0)


# ----------------------------------------------------------------------------- batch = 1-D
SPECIAL = st.sampled_from(
    [0.0, -0.0, math.nan, math.inf, -math.inf, 2.0**-149, -(2.0**-149), 1e-40, 3e38, -1.0]
)
ELEMENT = st.one_of(SPECIAL, st.floats(width=32, allow_nan=True, allow_subnormal=True))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda rows: st.tuples(
            hnp.arrays(F32, st.tuples(st.just(rows), st.integers(0, 140)), elements=ELEMENT),
            hnp.arrays(F32, (3, rows), elements=ELEMENT),
        )
    ),
    st.sampled_from([1, 2, 4, 8, 16, 32]),
    st.booleans(),
)
def test_batch_rows_are_the_1d_calls_bit_for_bit(data, lanes, per_row):
    x, scalars = data
    args = scalars if per_row else scalars[:, 0]
    row_args = (lambda i: scalars[:, i]) if per_row else (lambda i: scalars[:, 0])
    sum_d, sum_d2 = vecsumsq_dev(x, lanes, args[0])
    z = vecnorm(x, *args)
    assert sum_d.shape == sum_d2.shape == (len(x),) and z.shape == x.shape
    for i, row in enumerate(x):
        m, r, s = row_args(i)
        one = vecsumsq_dev(row, lanes, m)
        assert bits(sum_d[i]) == bits(one[0]) and bits(sum_d2[i]) == bits(one[1])
        assert np.array_equal(bits(z[i]), bits(vecnorm(row, m, r, s)))


def test_layernorm_rows_batch_is_each_row_alone():
    x = (1e3 + np.random.default_rng(8).standard_normal((6, 77)) * 5).astype(F32)
    y = layernorm_rows(x, EPS, 32)
    for i in range(len(x)):
        assert np.array_equal(bits(y[i]), bits(layernorm_rows(x[i], EPS, 32)))


# ----------------------------------------------------------------------------- cost and registry
def test_loop_shapes_cycle_counts():
    core = dataclasses.replace(
        load_model().core,
        lanes_f32=32,
        load_store_units=2,
        vector_alu_slots=3,
        alu_latency_cycles=2,
        call_overhead_cycles=30,
    )
    n = 1000
    # vecsumsq_dev: II = max(ceil(2 loads / 2 LSU), ceil(6 ALU / 3 slots)) = 2;
    # 1000 // 64 = 15 iterations + 1 predicated tail = 16; reduction 2 * (1 + log2 32) = 12 ops
    assert VECSUMSQ_DEV.ii_cycles(core) == 2
    assert VECSUMSQ_DEV.tcm_cycles(n, core) == 30 + 16 * 2 + 12 * 2 == 86
    # vecnorm: II = max(ceil(1 load + 1 store / 2), ceil(3 / 3)) = 1; ceil(1000 / 32) = 32
    assert VECNORM.ii_cycles(core) == 1
    assert VECNORM.tcm_cycles(n, core) == 30 + 32 * 1 == 62

    model_core = load_model().core
    lanes = model_core.lanes_f32
    ii = max(
        1, math.ceil(2 / model_core.load_store_units), math.ceil(6 / model_core.vector_alu_slots)
    )
    log2 = int(math.log2(lanes))
    want = (
        model_core.call_overhead_cycles
        + (n // (2 * lanes) + 1) * ii
        + 2 * (1 + log2) * model_core.alu_latency_cycles
    )
    assert VECSUMSQ_DEV.tcm_cycles(n, model_core) == want


def test_segments_touch_exactly_the_array():
    for shape, per_elem_loads in ((VECSUMSQ_DEV, 4), (VECNORM, 4)):
        for n in (1, 31, 32, 33, 64, 65, 1000):
            segs = shape.segments(n, 32)
            assert sum(c * sum(ld) for c, ld, _ in segs) == per_elem_loads * n
    assert sum(c * sum(st) for c, _, st in VECNORM.segments(1000, 32)) == 4 * 1000
    assert not any(st for _, _, st in VECSUMSQ_DEV.segments(1000, 32))


def test_registered_kernels_follow_the_compute_contract():
    k = get_kernel("vecsumsq_dev")
    assert k.shape is VECSUMSQ_DEV and k.reads and not k.writes
    x = np.random.default_rng(1).standard_normal((3, 50)).astype(F32)
    mean = np.array([0.1, 0.2, 0.3], F32)
    got = k.compute(x, None, 16, mean=mean)
    want = vecsumsq_dev(x, 16, mean)
    assert np.array_equal(bits(got[0]), bits(want[0]))
    assert np.array_equal(bits(got[1]), bits(want[1]))

    k = get_kernel("vecnorm")
    assert k.shape is VECNORM and k.reads and k.writes
    dst = np.zeros_like(x)
    assert k.compute(x, dst, 16, mean=mean, r=F32(0.01), rstd=np.ones(3, F32)) is None
    assert np.array_equal(bits(dst), bits(vecnorm(x, mean, F32(0.01), np.ones(3, F32))))
    with pytest.raises(DspsimInputError):
        k.compute(x, None, 16, mean=0.0, r=0.0, rstd=1.0)
