"""Ops declared in TOML files (dspsim.ops.fileop): the examples run, give their reference's
values and stay above their own lower bounds; the expression language is a whitelist; a bad
file is one line naming the file and the table, exit 2 from the command line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op, op_names
from dspsim.ops.fileop import load_op_file, unload_op_file
from dspsim.ops.fileop.expr import parse_expr
from tests.fileop_helpers import op_text

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ops"
SCALE_BIAS = EXAMPLES / "scale_bias.toml"
ROW_FILTER = EXAMPLES / "row_filter.toml"


@pytest.fixture
def loaded():
    """Load op files for one test; forget them after."""
    paths: list[Path] = []

    def load(path: Path, **kw) -> str:
        paths.append(path)
        return load_op_file(path, **kw)

    yield load
    for p in paths:
        unload_op_file(p)


def write(tmp_path: Path, text: str, name: str = "op.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ----------------------------------------------------------------------------- examples
@pytest.mark.parametrize("variant", ["pingpong", "direct", "nbuffer"])
def test_scale_bias_is_a_x_plus_b_and_above_its_bound(j6, loaded, variant):
    name = loaded(SCALE_BIAS)
    m = j6.with_overrides({"scale_bias.a": 3.0, "scale_bias.b": -1.0})
    x = (np.arange(1000, dtype=np.float32) / 8).astype(np.float32)
    r = simulate(m, name, variant, x=x)
    assert np.array_equal(r.output_array, np.float32(3.0) * x + np.float32(-1.0))
    b = get_op(name).bounds(m, variant, (1000,))
    assert b["lower_bound_cycles"] <= r.cycles
    # the direct kernel's priming loads read a vector more per call
    assert r.bytes["ddr_read"] == b["ddr_read_bytes"] == (4000 if variant != "direct" else 4128)


def test_a_loop_kernels_cycles_follow_its_declared_loop(j6, loaded):
    """alu = 1, one load and one store on two load/store units: II 1, so a TCM call of n is
    the call overhead + ceil(n / lanes) iterations; direct's estimate is the exact walk."""
    from dspsim.kernels.registry import get_kernel

    name = loaded(SCALE_BIAS)
    shape = get_kernel(f"{name}.scale_bias").shape
    core = j6.core
    assert shape.tcm_cycles(1000, core) == core.call_overhead_cycles + -(-1000 // core.lanes_f32)
    r = simulate(j6, name, "direct", n=1000, data=False)
    estimate = get_op(name).bounds(j6, "direct", (1000,))["estimate_cycles"]
    assert estimate == pytest.approx(r.cycles, abs=1)


@pytest.mark.parametrize("variant", ["pingpong", "direct"])
def test_row_filter_is_its_reference(j6, loaded, variant):
    name = loaded(ROW_FILTER)
    r = simulate(j6, name, variant, shape=(6, 40))
    assert r.output["within_tolerance"] and r.output["wrong_count"] == 0
    x = get_op(name).default_input((6, 40)).astype(np.float64)
    want = 0.5 * x
    want[:, 1:] += 0.25 * x[:, :-1]
    want[:, :-1] += 0.25 * x[:, 1:]
    assert np.allclose(r.output_array, want, rtol=1e-6)
    assert get_op(name).bounds(j6, variant, (6, 40))["lower_bound_cycles"] <= r.cycles


def test_a_tile_that_does_not_fit_a_dataram_is_refused(j6, loaded):
    name = loaded(ROW_FILTER)
    with pytest.raises(DspsimInputError, match="allowed") as e:
        simulate(j6.with_overrides({"row_filter.tile_bytes": 4096}), name, "pingpong",
                 shape=(4, 3000), data=False)
    assert "row of 3000 float32" in str(e.value) and "\n" not in str(e.value)


def test_the_ops_keys_and_search_space(j6, loaded):
    name = loaded(SCALE_BIAS)
    assert name in op_names()
    assert {"scale_bias.tile_bytes", "scale_bias.buffers", "scale_bias.a"} <= set(j6.keys())
    space = get_op(name).search_space(j6, "nbuffer", (100_000,))
    assert space["scale_bias.buffers"] == [2, 3, 4]
    # two of three buffers in one DataRAM: 2 x 128 KiB is more than its 240 KiB free space
    assert space["scale_bias.tile_bytes"] == [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    assert get_op(name).search_space(j6, "direct", (100,)) == {}


# ----------------------------------------------------------------------------- expressions
NAMES = {"x": "array", "m": "scalar"}


@pytest.mark.parametrize("text", [
    "x.__class__", "x[0]", "(lambda: 1)()", "[v for v in x]", "__import__('os')",
    "open('f')", "exp(x, out=x)", "'a'", "x if m else 1", "y + 1", "max(x)", "shift(x, m)",
])
def test_an_expression_outside_the_language_is_one_line(text):
    with pytest.raises(DspsimInputError) as e:
        parse_expr(text, NAMES, "here")
    assert str(e.value).startswith("here: ") and "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["+".join(["x"] * 900), "-" * 900 + "x", "x" * 3000,
                                  "(" * 300 + "x" + ")" * 300])
def test_a_long_or_deep_expression_is_one_line(text):
    """They reached Python's recursion limit (a RecursionError traceback) before."""
    with pytest.raises(DspsimInputError) as e:
        parse_expr(text, NAMES, "here")
    assert "\n" not in str(e.value) and len(str(e.value)) < 600


def test_a_file_nested_too_deeply_is_one_line(tmp_path):
    with pytest.raises(DspsimInputError, match="nested too deeply"):
        load_op_file(write(tmp_path, "x = " + "[" * 5000 + "]" * 5000))


def test_an_expression_evaluates_in_float32_or_float64():
    e = parse_expr("exp(x - m) * 2 + -x ** 2 / (x >= 1)", NAMES, "here")
    x = np.array([1.0, 2.0, 3.0])
    want = np.exp(x - 1) * 2 - x**2 / (x >= 1)
    assert np.allclose(e.evaluate({"x": x, "m": 1.0}), want)
    assert e.evaluate({"x": x.astype(np.float32), "m": 1.0}, np.float32).dtype == np.float32


# ----------------------------------------------------------------------------- bad files
GOOD = SCALE_BIAS.read_text()
BAD = [
    (GOOD.replace('reads = "x"', 'reads = "z"'), '[[pass]] 1 "scale_bias": reads = \'z\''),
    (GOOD.replace('reads = "x"', 'reads = "y"'), "which no earlier pass wrote"),
    (GOOD.replace('value = "a * x + b"', 'value = "a * x.real"'), "attribute is not allowed"),
    (GOOD.replace('writes = "y"\n', 'writes = "y"\nreduce = { op = "sum" }\n'),
     "reduce has no destination"),
    (GOOD.replace('ndim = 1', 'ndim = "1"'), "[op]: ndim = '1': expected 1 or 2"),
    (GOOD.replace('ndim = 1', 'ndims = 1'), "unknown key 'ndims'"),
    (GOOD.replace('name = "scale_bias"\ndoc', 'name = "softmax"\ndoc'),
     "is a registered op's"),
    (GOOD.replace('loop = { loads = 1, stores = 1, alu = 1 }', ''), "no cost"),
    (GOOD.replace('alu = 1 }', 'alu = 1, lanes = 12 }'), "loop.lanes = 12: allowed a power of two"),
    (GOOD.replace('role = "output"', 'role = "input"'), "2 input arrays"),
    (GOOD.replace('min = 64', 'min = 63'), "multiples of 4"),
    (GOOD + '\n[reference]\npython = "os:system"\n', "needs allow_python = true"),
    ("[op\nname=", "not valid TOML"),
    (GOOD.replace("b = 0.5", "b = 0.5\nx = 3.0"), "[params]: 'x' is an array's name"),
]


@pytest.mark.parametrize("text, match", BAD)
def test_a_bad_file_is_one_line_naming_the_file_and_table(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(DspsimInputError) as e:
        load_op_file(path)
    msg = str(e.value)
    assert match in msg and str(path) in msg and "\n" not in msg


def test_a_value_the_kernels_do_not_compute_is_refused(tmp_path):
    text = (EXAMPLES / "softmax.toml").read_text().replace('value = "exp(x - m)"',
                                                         'value = "exp(x)"')
    with pytest.raises(DspsimInputError, match=r'\[\[pass\]\] 2 "exp_sum": value .* disagrees'):
        load_op_file(write(tmp_path, text))


def test_a_python_reference_runs_only_when_the_loader_allows_it(tmp_path, loaded):
    text = GOOD.replace('name = "scale_bias"\n', 'name = "sb_python"\n') + (
        '\n[reference]\npython = "numpy:positive"\nallow_python = true\n')
    path = write(tmp_path, text)
    with pytest.raises(DspsimInputError, match="allowed only with --allow-python"):
        load_op_file(path)
    assert loaded(path, allow_python=True) == "sb_python"


def test_a_reduce_op_its_kernel_does_not_compute_is_refused(tmp_path):
    """reduce max with vecsum: direct took the row's sum, pingpong the max of its tiles' sums
    (1,499.5 against 194.95 for 1,000 elements in 100-element tiles)."""
    peak = ('[[pass]]\nname = "peak"\nreads = "x"\nreduce = { op = "max", into = "m" }\n'
            'kernel = "vecsum"\n\n[[pass]]\nname = "scale_bias"')
    text = GOOD.replace('[[pass]]\nname = "scale_bias"', peak).replace("a * x + b", "x / m")
    with pytest.raises(DspsimInputError, match=r"reduce.op = 'max', but what its kernels "
                       r"\(vecsum\) return") as e:
        load_op_file(write(tmp_path, text))
    assert "\n" not in str(e.value)
    assert loaded_name(tmp_path, text.replace('op = "max"', 'op = "sum"'))


def loaded_name(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text, "ok.toml")
    try:
        return load_op_file(path)
    finally:
        unload_op_file(path)


def test_a_1d_ops_python_reference_is_called_with_a_vector(j6, tmp_path, loaded, monkeypatch):
    """f(x, params) of a 1-D op gets the input's shape [n] (it got [1, n]: numpy.convolve,
    which takes vectors only, failed)."""
    (tmp_path / "sb_ref_1d.py").write_text(
        "import numpy as np\n\ndef ref(x, params):\n"
        "    return np.convolve(x, [params.a], 'same') + params.b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = GOOD.replace('name = "scale_bias"\n', 'name = "sb_conv"\n') + (
        '\n[reference]\npython = "sb_ref_1d:ref"\nallow_python = true\n')
    name = loaded(write(tmp_path, text), allow_python=True)
    r = simulate(j6, name, "direct", x=np.linspace(0.5, 1.0, 64, dtype=np.float32))
    assert r.output["max_rel_err"] < 1e-6 and r.output["wrong_count"] == 0


def test_the_command_line_exits_2_on_a_bad_file(tmp_path, capsys):
    from dspsim.cli import main

    path = write(tmp_path, GOOD.replace('reads = "x"', 'reads = "z"'))
    assert main(["run", "--op-file", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "allowed: x, y" in err


def test_the_command_line_runs_a_files_op(tmp_path, capsys, loaded):
    from dspsim.cli import main

    loaded(SCALE_BIAS)  # forgotten after the test
    assert main(["run", "--op-file", str(SCALE_BIAS), "--n", "1000", "--no-data"]) == 0
    assert capsys.readouterr().out.startswith("scale_bias pingpong on core0: shape 1,000")


def test_a_file_with_every_key_round_trips_through_toml():
    raw = tomllib.loads(GOOD)
    assert raw["pass"][0]["loop"] == {"loads": 1, "stores": 1, "alu": 1}


def test_an_array_lives_in_the_memory_its_key_names(loaded):
    """On the HiFi5 (host memory psram), x and y in sram: the kernels read and write sram
    only, the values are the same; j6 has no sram: one line naming its memories."""
    from dspsim.config import load_model

    name = loaded(SCALE_BIAS)
    hifi = load_model("ameba_hifi5").with_overrides({"scale_bias.x_memory": "sram",
                                                     "scale_bias.y_memory": "sram"})
    x = (np.arange(2000, dtype=np.float32) / 16).astype(np.float32)
    r = simulate(hifi, name, "direct", x=x)
    assert np.array_equal(r.output_array, np.float32(2.0) * x + np.float32(0.5))
    assert r.bytes["psram_read"] == r.bytes["psram_write"] == 0 < r.bytes["sram_read"]
    b = get_op(name).bounds(hifi, "direct", (2000,))
    assert b["lower_bound_cycles"] <= r.cycles
    with pytest.raises(DspsimInputError, match=r"x_memory = 'sram'.*allowed: host, ddr"):
        simulate(load_model("j6").with_overrides({"scale_bias.x_memory": "sram"}), name, "direct",
                 n=100, data=False)


def test_a_declared_kernel_runs_as_a_microbenchmark(j6, loaded):
    """--op kernel takes every registered kernel as a variant: a loop kernel's scalars are
    its op's params' defaults (it read none before: KeyError 'a')."""
    from dspsim.kernels.registry import get_kernel

    loaded(SCALE_BIAS)
    r = simulate(j6, "kernel", "scale_bias.scale_bias", n=1000)
    assert r.cycles == get_kernel("scale_bias.scale_bias").shape.tcm_cycles(1000, j6.core)


RMS = op_text("rms_file", """[[pass]]
name = "sumsq"
reads = "x"
reduce = { op = "sum", into = "ss" }
value = "x * x"
loop = { loads = 2, alu = 2 }
[[pass]]
name = "scale"
reads = "x"
writes = "y"
value = "x * (1 / sqrt(ss / cols + eps))"
kernel = { name = "vecmul", args = { scalar = "1 / sqrt(ss / cols + eps)" } }
[reference]
value = "x / sqrt(mean(x * x) + eps)"
tolerance = [1e-5, 1e-6]
""", default_shape=(64, 256), params={"eps": 1e-6})


def test_a_rows_scalar_feeds_a_later_pass_as_rmsnorm_does(j6, tmp_path, loaded):
    """A per-row reduction read by the next pass's value (a column beside the rows: the load
    check failed on it with a broadcasting traceback) and cols, the row's length: RMSNorm
    from a file, within the Python op's tolerance, its ping-pong the Python op's cycles."""
    name = loaded(write(tmp_path, RMS))
    for variant in ("pingpong", "direct"):
        r = simulate(j6, name, variant, shape=(64, 256))
        assert r.output["within_tolerance"] and r.output["wrong_count"] == 0
    mine = simulate(j6, name, "pingpong", shape=(64, 256), data=False)
    seed = simulate(j6, "rmsnorm", "pingpong", shape=(64, 256), data=False)
    assert mine.cycles == seed.cycles
