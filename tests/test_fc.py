"""The int8 fully connected op: TFLite's integer semantics bit for bit (three transcriptions
held equal, on ties and saturation as well as random values), both variants agreeing, the
kernel's closed form, and its refusals."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import load_model, simulate
from dspsim.kernels.fc_s8 import FC_S8, fully_connected, requantize
from dspsim.ops import get_op
from dspsim.ops.fc.reference import (
    default_values,
    fully_connected_reference,
    multiply_by_quantized_multiplier,
)
from tests.cli_helpers import one_line, run_cli

EXAMPLE = (0, 1776441054, -9, -128)  # input_zero_bias, out_multiplier, out_shift, out_zero_bias


@pytest.fixture(scope="module")
def ameba():
    return load_model("ameba_hifi5")


def mbqm_int(x: int, m: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier on Python integers, from its definition in words: times
    2^max(shift, 0) (saturated to int32), the doubling high multiply (64-bit product plus
    2^30, or 1 - 2^30 when negative, divided by 2^31 toward zero), then divided by
    2^max(-shift, 0) rounding half away from zero."""
    x = max(-(2**31), min(2**31 - 1, x * 2 ** max(shift, 0)))
    p = x * m
    t = p + (2**30 if p >= 0 else 1 - 2**30)
    q = abs(t) // 2**31 * (1 if t >= 0 else -1)
    r = max(-shift, 0)
    if r:
        q = (abs(q) * 2 + 2**r) // 2 ** (r + 1) * (1 if q >= 0 else -1)
    return q


def requant_int(acc: int, m: int, shift: int, zero: int) -> int:
    return max(-128, min(127, mbqm_int(acc, m, shift) + zero))


def test_the_example_requantization_agrees_on_every_accumulator_of_a_range():
    """Every accumulator in -2^18 .. 2^18 (with the example's multiplier and shift every
    rounding case occurs, exact halves among them): kernel == TFLite transcription."""
    acc = np.arange(-(1 << 18), 1 << 18, dtype=np.int64)
    _, m, shift, zero = EXAMPLE
    ref = np.clip(multiply_by_quantized_multiplier(acc, m, shift) + zero, -128, 127)
    assert np.array_equal(requantize(acc, m, shift, zero), ref.astype(np.int8))
    # the intermediate before the right shift lands on exact halves many times
    p = acc * m
    t = p + np.where(p >= 0, 1 << 30, 1 - (1 << 30))
    q = np.sign(t) * (np.abs(t) >> 31)
    assert np.count_nonzero((np.abs(q) & 511) == 256) > 100


@pytest.mark.parametrize("shift", [-31, -17, -9, -1, 0, 1, 5, 30])
def test_exact_halves_round_away_from_zero(shift):
    """Accumulators whose doubling high product is k + 1/2 units of the right shift, both
    signs: the rounding goes away from zero, in every transcription."""
    m = 1 << 30  # the doubling high multiply by 2^30 halves: q = round(x / 2)
    r = max(-shift, 0)
    ks = np.arange(-40, 40, dtype=np.int64)
    # x / 2 = (k + 1/2) 2^r  -> x = (2k + 1) 2^r, and the neighbours either side
    xs = np.concatenate([(2 * ks + 1) << r, ((2 * ks + 1) << r) + 1, ((2 * ks + 1) << r) - 1])
    xs = xs[np.abs(xs) < 2**31]
    got = multiply_by_quantized_multiplier(xs, m, shift)
    want = np.array([mbqm_int(int(x), m, shift) for x in xs])
    assert np.array_equal(got, want)
    assert np.array_equal(requantize(xs, m, shift, 0),
                          np.clip(want, -128, 127).astype(np.int8))


@settings(max_examples=300, deadline=None)
@given(acc=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=20),
       m=st.integers(0, 2**31 - 1), shift=st.integers(-31, 30), zero=st.integers(-128, 127))
def test_three_transcriptions_agree_on_any_int32(acc, m, shift, zero):
    a = np.array(acc, np.int64)
    ref = np.clip(multiply_by_quantized_multiplier(a, m, shift) + zero, -128, 127)
    assert np.array_equal(requantize(a, m, shift, zero), ref.astype(np.int8))
    assert [requant_int(x, m, shift, zero) for x in acc] == ref.tolist()


def test_saturation_and_negative_accumulators():
    """Extreme int8 values drive the accumulators to both ends (saturating the output) and
    negative; the kernel's numerics equal the reference on them."""
    rng = np.random.default_rng(7)
    out_depth, in_depth = 64, 768
    w = np.full((out_depth, in_depth), -128, np.int8)
    w[1::2] = 127
    x = np.full(in_depth, -128, np.int8)
    bias = rng.integers(-(2**20), 2**20, out_depth).astype(np.int32)
    for izb in (-127, 0, 128):
        for zero in (-128, 0, 127):
            ref = fully_connected_reference(w, x, bias, izb, EXAMPLE[1], EXAMPLE[2], zero)
            got = fully_connected(w, x, bias, izb, EXAMPLE[1], EXAMPLE[2], zero)
            assert np.array_equal(got, ref)
    ref = fully_connected_reference(w, x, bias, 0, EXAMPLE[1], EXAMPLE[2], -128)
    assert set(ref.tolist()) <= {-128, 127} and {-128, 127} <= set(ref.tolist())


def _run(model, variant, shape, **kw):
    return simulate(model, "fc", variant, shape=shape, **kw)


def test_the_example_runs_both_ways_and_both_equal_the_reference(ameba):
    """pingpong and direct on 512 x 768 (the example's shape, seeded values): each output is
    TFLite's integer reference bit for bit, and the two are equal."""
    values = default_values((512, 768))
    p = ameba.fc
    ref = fully_connected_reference(values["weights"], values["input"], values["bias"],
                                    p.input_zero_bias, p.out_multiplier, p.out_shift,
                                    p.out_zero_bias)
    outs = {}
    for variant in ("pingpong", "direct"):
        r = _run(ameba, variant, (512, 768))
        assert r.output["exact"] and r.output["mismatch_count"] == 0
        assert r.output_array.dtype == np.int8 and np.array_equal(r.output_array, ref)
        outs[variant] = r
    assert outs["pingpong"].output["sha256"] == outs["direct"].output["sha256"]
    # what each reads: the weights once from PSRAM (the kernel's interleaved rows are more
    # streams than the prefetcher follows: no line past the end is prefetched), and the input
    # and the bias; what each writes: the output
    arrays = 768 + 4 * 512
    assert outs["pingpong"].bytes["psram_read"] == 512 * 768 + arrays
    assert outs["direct"].bytes["psram_read"] == 512 * 768 + arrays
    assert outs["pingpong"].bytes["psram_write"] == outs["direct"].bytes["psram_write"] == 512


@pytest.mark.parametrize("model_name", ["j6", "ameba_hifi5"])
@pytest.mark.parametrize("shape, tile", [((37, 50), 8), ((5, 3), 2), ((130, 129), 64),
                                         ((1, 1), 1)])
def test_odd_shapes_and_chunks_agree_everywhere(model_name, shape, tile):
    m = load_model(model_name).with_overrides({"fc.tile_rows": tile, "fc.input_zero_bias": 5,
                                               "fc.out_shift": 2, "fc.out_zero_bias": 3,
                                               "fc.out_multiplier": 1 << 29})
    got = [_run(m, v, shape) for v in ("pingpong", "direct")]
    for r in got:
        assert r.output["exact"], (model_name, shape, r.variant)
    assert np.array_equal(got[0].output_array, got[1].output_array)


@pytest.mark.parametrize("model_name", ["j6", "ameba_hifi5"])
def test_the_pingpong_follows_its_closed_form(model_name):
    m = load_model(model_name)
    for shape, tile in (((512, 768), 128), ((300, 256), 64), ((100, 96), 128)):
        mm = m.with_overrides({"fc.tile_rows": tile})
        r = _run(mm, "pingpong", shape, data=False)
        assert r.cycles == round(get_op("fc").bounds(mm, "pingpong", shape)["estimate_cycles"])


def test_the_kernel_on_a_chunk_in_tcm_is_its_loop_shape(ameba):
    """fc_s8 on 128 x 768 in DTCM: 32 groups of 4 rows, each the call overhead, 48 iterations
    of II = max(ceil(5 / 2), ceil(3 / 2)) = 3 and the 8-op epilogue; the fit to 5,149."""
    c = ameba.core
    assert FC_S8.ii_cycles(c) == 3
    want = 32 * (c.call_overhead_cycles + 48 * 3 + 8 * c.alu_latency_cycles)
    r = simulate(ameba, "kernel", "fc_s8", shape=(128, 768))
    assert r.cycles == want and abs(want / 5149 - 1) < 0.01


def test_direct_on_j6_stalls_on_every_load(j6):
    """No cache: each vector load of the weights is a DDR round trip (the walk's closed form)."""
    r = _run(j6, "direct", (64, 256), data=False)
    b = get_op("fc").bounds(j6, "direct", (64, 256))
    assert r.cycles == round(b["estimate_cycles"]) and r.stall_cycles["ddr"] > 0


def _npz(tmp_path, name="in.npz", **arrays):
    p = tmp_path / name
    np.savez(p, **arrays)
    return p


def test_an_npz_input_runs_and_the_output_file_holds_the_int8_result(tmp_path, capsys,
                                                                     ameba):
    v = default_values((24, 40), seed=3)
    p = _npz(tmp_path, **v)
    out = tmp_path / "y.npy"
    code, stdout, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "fc",
                                "--variant", "direct", "--input", p, "--output", out, "--json")
    assert code == 0, err
    assert json.loads(stdout)["output"]["exact"]
    y = np.load(out)
    a = ameba.fc
    ref = fully_connected_reference(v["weights"], v["input"], v["bias"], a.input_zero_bias,
                                    a.out_multiplier, a.out_shift, a.out_zero_bias)
    assert y.dtype == np.int8 and np.array_equal(y, ref)


@pytest.mark.parametrize("change, message", [
    ({"weights": None}, "missing array 'weights'"),
    ({"bias": None}, "missing array 'bias'"),
    ({"weights": np.zeros((4, 8), np.float32)}, "weights is a 2-D float32"),
    ({"input": np.zeros(8, np.int16)}, "input is a 1-D int16"),
    ({"bias": np.zeros(4, np.int8)}, "bias is a 1-D int8"),
    ({"input": np.zeros(9, np.int8)}, "must agree"),
    ({"bias": np.zeros(5, np.int32)}, "must agree"),
    ({"extra": np.zeros(1)}, "unexpected array 'extra'"),
    ({"weights": np.zeros(8, np.int8)}, "expected 2-D"),
])
def test_a_bad_npz_is_one_line_and_exit_2(tmp_path, capsys, change, message):
    v = {"weights": np.zeros((4, 8), np.int8), "input": np.zeros(8, np.int8),
         "bias": np.zeros(4, np.int32)}
    for k, a in change.items():
        if a is None:
            v.pop(k)
        else:
            v[k] = a
    p = _npz(tmp_path, **v)
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", p)
    assert code == 2 and one_line(err) and message in err, err


def test_a_file_that_is_not_an_npz_is_one_line(tmp_path, capsys):
    p = tmp_path / "x.npz"
    p.write_bytes(b"not a zip")
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", p)
    assert code == 2 and one_line(err) and "not an .npz" in err, err
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", tmp_path / "none.npz")
    assert code == 2 and one_line(err) and "no such file" in err, err


@pytest.mark.parametrize("args, message", [
    (["--model", "ameba_hifi5", "--shape", "512,2048"], "does not fit a DataRAM"),
    (["--model", "ameba_hifi5", "--shape", "512,768", "--set", "fc.tile_rows=256"],
     "fc.tile_rows up to 164"),  # 168 rows fit a DataRAM, not beside the small arrays
    (["--set", "fc.weights=sram"], "no such memory"),
    (["--set", "fc.weights=tcm"], "for the direct variant"),
    (["--model", "ameba_hifi5", "--variant", "direct", "--set", "fc.weights=tcm", "--shape",
      "512,768"], "do not fit"),
    (["--shape", "512"], "expected two positive integers"),
    (["--set", "fc.out_shift=40"], "allowed range"),
])
def test_a_run_that_does_not_fit_is_one_line_and_exit_2(capsys, args, message):
    code, _, err = run_cli(capsys, "run", "--op", "fc", *args)
    assert code == 2 and one_line(err) and message in err, err


def test_the_summary_of_an_output_that_is_not_this_inputs_is_a_mismatch():
    op = get_op("fc")
    x = op.default_input((8, 16))
    params = load_model().params("fc")
    s = op.output_summary(np.zeros(9, np.int8), x, params)
    assert s["exact"] is False and s["mismatch_count"] == 8


def test_a_run_on_a_platform_without_ddr_saves_and_reports(tmp_path, capsys):
    """Before: a saved run had to list DDR's bytes, so a PSRAM platform's did not load."""
    p = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "fc", "--shape",
                           "64,128", "--save", p)
    assert code == 0, err
    code, out, err = run_cli(capsys, "report", p)
    assert code == 0 and "equals the reference bit for bit" in out, err


def test_a_run_on_a_platform_without_ddr_draws_its_timeline(tmp_path, capsys):
    """Before: the timeline's port peak was read from a table named ddr (a traceback)."""
    out = tmp_path / "t.png"
    code, _, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "fc", "--shape",
                           "64,128", "--timeline", out)
    assert code == 0 and out.stat().st_size > 0, err


def test_report_tiles_name_what_is_not_a_tile_and_sum_only_tiles():
    """Before: fc ping-pong's report listed its input, bias and output copies (before and after
    the timer) as a row "tile -1, buffer -1" with no pass, and counted them in "all tiles"."""
    from dspsim.analysis.tiles import report_text, tile_table

    r = simulate(load_model(), "fc", "pingpong", data=False, trace=True)
    text = report_text(r).split("\ntiles (")[1]
    assert " -1 " not in text and "(outside passes)" in text
    tiles = tile_table(r.trace, r.passes)
    dma = tiles[tiles["tile"] >= 0]["dma_cycles"].sum()
    assert f"all tiles: {dma:,.0f} DMA cycles" in text
    assert dma < tiles["dma_cycles"].sum()  # the copies outside the tiles are not in it


def test_a_timeline_title_counts_float32_only_for_a_float32_op():
    """Before: fc ping-pong's timeline title said "tile 98,304 bytes (24,576 float32)": its
    tiles are int8 weights."""
    from dspsim.analysis.timeline import run_title

    r = simulate(load_model(), "fc", "pingpong", data=False, trace=True)
    title = run_title(r, 0, r.cycles)
    assert f"tile {128 * 768:,} bytes:" in title and "float32" not in title
    r = simulate(load_model(), "softmax", "pingpong", n=20_000, data=False, trace=True)
    assert "tile 32,768 bytes (8,192 float32)" in run_title(r, 0, r.cycles)


@pytest.mark.parametrize("model_name", ["j6", "ameba_hifi5"])
@pytest.mark.parametrize("settings", [{"idma.engine_bytes_per_cycle": 0.05},
                                      {"idma.descriptor_cycles": 2000.0}])
def test_pingpong_bounds_know_the_engines_pace(model_name, settings):
    """The chunks' fetches at an engine slower than its port (idma.engine_bytes_per_cycle)
    or with a descriptor fetch (idma.descriptor_cycles): the closed form priced the port
    alone (J6, 256 x 768 at 0.05 bytes/cycle: 508,875 for 3,932,266 simulated); now each
    chunk is fetched, then moved at the slower pace: the run's cycles, the bound below them."""
    model = load_model(model_name).with_overrides(settings)
    r = simulate(model, "fc", "pingpong", shape=(256, 768), data=False)
    b = get_op("fc").bounds(model, "pingpong", (256, 768))
    assert b.lower_bound_cycles <= r.cycles
    assert b.estimate_cycles == pytest.approx(r.cycles, abs=1.0)  # to the run's rounding
