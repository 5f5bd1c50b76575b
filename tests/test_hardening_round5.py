"""Hostile inputs near the ones already refused: each is one line (exit 2), never a traceback."""

from __future__ import annotations

import io
import json
import signal
import time
import zipfile

import numpy as np
import pytest

from tests.cli_helpers import one_line, run_cli


def _with_header(arr: np.ndarray, header: bytes) -> bytes:
    """``arr`` as a .npy file whose header dictionary is replaced by ``header`` (padded to the
    same length, so the data stays where it was)."""
    f = io.BytesIO()
    np.save(f, arr)
    raw = f.getvalue()
    old = raw[10:].split(b"\n")[0]
    assert len(header) <= len(old)
    return raw[:10] + header.ljust(len(old)) + raw[10 + len(old):]


# numpy tokenizes a header before it parses it: an open bracket at its end raised
# tokenize.TokenError, which no caller expected
OPEN_BRACKETS = [b"{'descr': '<f4', 'fortran_order': False, 'shape': (((",
                 b"__import__('os').system(", b"[[[["]


@pytest.mark.parametrize("header", OPEN_BRACKETS)
def test_an_npy_header_ending_in_an_open_bracket_is_one_line(tmp_path, capsys, header):
    path = tmp_path / "x.npy"
    path.write_bytes(_with_header(np.ones(8, np.float32), header))
    code, _, err = run_cli(capsys, "run", "--input", path)
    assert code == 2 and one_line(err), err
    assert "not a readable .npy header" in err


def test_an_npz_member_header_ending_in_an_open_bracket_is_one_line_with_fc_hint(tmp_path,
                                                                                  capsys):
    """The hint is the fc archive's (numpy.savez of three int8/int32 arrays), not a float32
    .npy's."""
    path = tmp_path / "fc.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("weights.npy", _with_header(np.ones((4, 8), np.int8), OPEN_BRACKETS[0]))
        for name, a in (("input", np.ones(8, np.int8)), ("bias", np.zeros(4, np.int32))):
            f = io.BytesIO()
            np.save(f, a)
            zf.writestr(f"{name}.npy", f.getvalue())
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", path)
    assert code == 2 and one_line(err), err
    assert "weights: not a readable .npy header" in err and "numpy.savez" in err
    assert "float32" not in err


class _FinalizerThatGetsTheSignal:
    """Its ``__del__`` is where the SIGINT lands: Python cannot raise from there ("Exception
    ignored in ...")."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next check of pending signals
            pass


def test_an_interrupt_swallowed_in_a_finalizer_still_stops_the_command(capsys):
    """Before: the KeyboardInterrupt died in the finalizer (printed as 'Exception ignored') and
    the command ran on to exit 0."""
    from dspsim.cli.common import interrupts_handled

    naps = 0
    with pytest.raises(KeyboardInterrupt):
        with interrupts_handled():
            _FinalizerThatGetsTheSignal()  # dropped at once: its __del__ runs here
            while naps < 6_000:  # hang guard: a minute
                time.sleep(0.01)  # the interrupt is delivered again while the command runs
                naps += 1
    assert naps < 6_000
    assert "Exception ignored" not in capsys.readouterr().err


def test_an_interrupt_swallowed_as_the_command_ends_gives_exit_130(capsys, monkeypatch):
    """The command returns before the interrupt is delivered again: main still says
    'interrupted' and exits 130, not 0."""
    import dspsim.cli as cli

    def ops_then_swallow(args):
        _FinalizerThatGetsTheSignal()
        return 0

    monkeypatch.setitem(cli.COMMANDS, "ops", (cli.COMMANDS["ops"][0], ops_then_swallow))
    code = cli.main(["ops"])
    err = capsys.readouterr().err
    assert code == 130 and err == "dspsim: interrupted\n", err


EVIL_NAME = "evil\x1b[31mRED\r\nforged row 1"


def _evil(tmp_path, base: str):
    path = tmp_path / f"evil_{base}.toml"
    path.write_text(f'base = "{base}"\n[model]\nname = "evil\\u001b[31mRED\\r\\nforged row 1"\n')
    return path


@pytest.fixture
def evil_model(tmp_path):
    return _evil(tmp_path, "j6")


def _no_raw_name(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\nforged" not in text, text
    assert "evil\\x1b[31mRED\\r\\nforged row 1" in text, text


def test_workload_prints_the_model_name_escaped(tmp_path, capsys, evil_model):
    wl = tmp_path / "w.toml"
    wl.write_text('[[stream]]\nname = "s"\nop = "softmax"\nn = 256\nperiod_us = 100\ncount = 1\n')
    code, out, err = run_cli(capsys, "workload", wl, "--model", evil_model)
    assert code == 0, err
    _no_raw_name(out)


def test_calibrate_prints_the_model_name_escaped(capsys, evil_model):
    code, out, err = run_cli(capsys, "calibrate", "--model", evil_model, "--measured",
                             "pingpong,n=2000=100000", "--free", "ddr.latency_cycles")
    assert code in (0, 1) and "Traceback" not in err, err  # 1: the fit misses the figure
    _no_raw_name(out)


def test_calibrate_explore_names_the_platform_escaped(tmp_path, capsys):
    """A platform with no document figures: the refusal names the model."""
    code, _, err = run_cli(capsys, "calibrate", "--explore", "--model",
                           _evil(tmp_path, "ameba_hifi5"))
    assert code == 2 and one_line(err), err
    _no_raw_name(err)


@pytest.mark.parametrize("model_name", ["j6", "ameba_hifi5"])
@pytest.mark.parametrize("in_depth", [64, 768, 1000, 4096, 20000])
def test_fc_tile_rows_refusal_names_the_largest_that_runs(model_name, in_depth):
    """Before: J6 512 x 768 refused 400 rows naming 'up to 320', and 320 was refused too (the
    chunks and the small arrays together); the HiFi5 named 168, also refused."""
    import re

    from dspsim import load_model
    from dspsim.errors import DspsimInputError
    from dspsim.ops import get_op

    fc, shape = get_op("fc"), (8192, in_depth)
    base = load_model(model_name)
    with pytest.raises(DspsimInputError) as e:
        fc.check_run(base.with_overrides({"fc.tile_rows": 8192}), "pingpong", shape)
    named = re.search(r"fc\.tile_rows up to (\d+)$", str(e.value))
    assert named, str(e.value)
    rows = int(named.group(1))
    fc.check_run(base.with_overrides({"fc.tile_rows": rows}), "pingpong", shape)
    with pytest.raises(DspsimInputError):
        fc.check_run(base.with_overrides({"fc.tile_rows": rows + 1}), "pingpong", shape)


def _sweep_table(tmp_path, names: list[str]):
    """A sweep table as dspsim writes it: a model column with ``names`` and a memory column
    named after a 400-character memory."""
    import pandas as pd

    long_mem = "m" + "x" * 399
    rows = [{"model": m, "op": "softmax", "variant": v, "n": n, "cycles": 1000 * n + i,
             f"{long_mem}_stall_cycles": n + i}
            for i, m in enumerate(names) for v in ("direct", "pingpong") for n in (1024, 2048)]
    path = tmp_path / "s.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path, f"{long_mem}_stall_cycles"


def _texts(fig) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text)]


def test_a_sweep_figure_names_cjk_models_and_long_columns_as_other_figures_do(tmp_path):
    """Before: a CJK model name warned once per missing glyph, and a column named after a
    400-character memory ran across the whole figure as its title and axis label."""
    import warnings

    import pandas as pd

    from dspsim.study.sweep_plot import heatmap, line_plot

    path, column = _sweep_table(tmp_path, ["j6", "模型"])
    df = pd.read_csv(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is a UserWarning at draw time
        for fig in (line_plot(df, "n", column, hue="model"),
                    heatmap(df, "n", "model", column)):
            fig.canvas.draw()
            texts = _texts(fig)
            assert all(len(t) < 200 for t in texts), max(texts, key=len)
            assert not any("模" in t for t in texts)


def test_a_tolerance_range_down_to_the_smallest_float_prints(capsys):
    """A fit whose key may go down to 0 within the tolerance (before: ZeroDivisionError
    rounding 5e-324 to 6 digits): the low end is now the value the walk went down to, the
    fitted latency x REL_PRECISION, not the smallest positive float."""
    from dspsim.study.interval import REL_PRECISION

    code, out, err = run_cli(capsys, "calibrate", "--measured", "pingpong,n=4096=215000",
                             "--free", "ddr.latency_cycles", "--json")
    assert code in (0, 1) and "Traceback" not in err, err
    obj = json.loads(out)
    lo, _ = obj["tolerance_ranges"]["ddr.latency_cycles"]
    assert lo == pytest.approx(obj["fit"]["ddr.latency_cycles"]["value"] * REL_PRECISION)


def test_two_memories_whose_names_differ_only_in_case_are_refused(tmp_path):
    """Before: J6 with a memory [DDR] beside its [ddr] loaded, and the run's report printed
    'DDR bytes read' for each, a timeline two lanes named DDR."""
    from dspsim import load_model
    from dspsim.errors import ConfigError

    path = tmp_path / "m.toml"
    path.write_text('base = "j6"\n[DDR]\nbase_address = 0x20000000\nsize_bytes = 0x00400000\n'
                    "latency_cycles = 20.0\nbytes_per_cycle = 8.0\nmax_outstanding = 16\n")
    with pytest.raises(ConfigError, match=r"\[ddr\] and \[DDR\]: their names differ only in case"):
        load_model(path)


@pytest.mark.parametrize("members", [30_000, 70_000])
def test_an_npz_with_a_huge_zip_directory_is_refused_before_it_is_parsed(tmp_path, capsys,
                                                                         members):
    """zipfile turns every directory entry into an object (8 bytes of memory per byte of
    directory): a 2 GiB archive of empty members took some 16 GB before any check. The end
    record gives the directory's size; 70,000 members is the zip64 form (65,535 or more)."""
    path = tmp_path / "many.npz"
    f = io.BytesIO()
    np.save(f, np.ones((4, 8), np.int8))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("weights.npy", f.getvalue())
        for i in range(members):
            zf.writestr(f"m{i}", b"")
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", path)
    assert code == 2 and one_line(err), err
    assert "its zip directory holds" in err and "entries" in err


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("shape", [(1, 4), (4, 36), (16, 36), (17, 36), (64, 128)])
def test_fc_direct_through_the_cache_never_beats_its_lower_bound(policy, shape):
    """The HiFi5 as shipped (weights in cached PSRAM, a next-line prefetch): before, the
    memory bound counted the line prefetched past the weights' end, which may fill after the
    timer stops: 4 x 36 ran in 307 cycles against a 384-cycle 'lower bound'."""
    from dspsim import load_model, simulate
    from dspsim.ops import get_op

    m = load_model("ameba_hifi5").with_overrides({"dcache.write_policy": policy})
    r = simulate(m, "fc", "direct", shape=shape, data=False)
    assert r.cycles >= get_op("fc").bounds(m, "direct", shape)["lower_bound_cycles"] - 0.5


@pytest.mark.parametrize("key, values", [("copy.ring_descriptors", "2,4"),
                                         ("copy.interrupt_handler_cycles", "0,100")])
def test_a_sweep_says_why_an_idma_only_copy_key_left_memcpy_unchanged(tmp_path, capsys, key,
                                                                       values):
    """Before: the note named the identical cycles without the reason (the key was taken to
    act in every variant)."""
    code, out, err = run_cli(capsys, "sweep", "--op", "copy", "--variant", "memcpy", "--n",
                             "4096", "--param", f"{key}={values}", "--out", tmp_path / "s.csv")
    assert code == 0, err
    note = next(line for line in (out + err).splitlines() if "identical cycles" in line)
    assert note.endswith(f"{key} does not act in copy memcpy"), note
