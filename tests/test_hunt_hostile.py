"""A hostile user's inputs the earlier hardening missed: each was a traceback, a silent
fallback or nonsense accepted; each is now one line on stderr and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import one_line, run_cli

SCALE_BIAS = Path(__file__).resolve().parent.parent / "examples" / "ops" / "scale_bias.toml"


@pytest.mark.parametrize("args", [
    ["run", "--n", "64", "--output", ""],
    ["run", "--n", "64", "--save", ""],
    ["run", "--n", "64", "--trace", ""],
    ["run", "--n", "64", "--timeline", ""],
    ["run", "--n", "64", "--tiles", ""],
    ["run", "--n", "64", "--input", ""],
    ["run", "--n", "64", "--variant", ""],
    ["optimize", "--n", "64", "--out", ""],
    ["report", ""],
    ["plot", "timeline", ""],
], ids=["output", "save", "trace", "timeline", "tiles", "input", "variant", "optimize-out",
        "report", "plot-timeline"])
def test_an_empty_value_is_refused_not_read_as_left_out(tmp_path, monkeypatch, capsys, args):
    """Before: ``--output ""`` (an unset shell variable) ran with no output written and exit 0,
    ``--variant ""`` ran the default variant, and ``plot timeline ""`` was a ValueError
    traceback."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and one_line(err) and "an empty value" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["plot", "timeline", "/"], ["plot", "timeline", "."],
                                  ["plot", "sweep", "/", "--x", "n"],
                                  ["plot", "sweep", ".", "--x", "n"]])
def test_plot_of_a_folder_without_a_name_is_one_line(tmp_path, monkeypatch, capsys, args):
    """Before: the default figure name was derived from '/' before the file was checked:
    ``ValueError: PosixPath('.') has an empty name``, a traceback."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and one_line(err), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tolerance", ["[nan, 0]", "[0, nan]"])
def test_an_op_file_tolerance_of_nan_is_refused(tmp_path, capsys, tolerance):
    """Before: ``tolerance = [nan, 0]`` passed the ``>= 0`` check (NaN compares false), and a
    run whose output equals its reference said ``within_tolerance: false``."""
    name = "tol_nan_" + str(["[nan, 0]", "[0, nan]"].index(tolerance))
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[op]\nname = "{name}"\nndim = 1\n'
        '[[array]]\nname = "x"\nshape = ["n"]\nrole = "input"\n'
        '[[array]]\nname = "y"\nshape = ["n"]\nrole = "output"\n'
        '[[pass]]\nname = "p"\nreads = "x"\nwrites = "y"\nvalue = "x"\n'
        'loop = { loads = 1, stores = 1, alu = 1 }\n'
        f'[reference]\nvalue = "x"\ntolerance = {tolerance}\n')
    code, _, err = run_cli(capsys, "run", "--op-file", path, "--n", "64")
    assert code == 2 and one_line(err) and "tolerance" in err and ">= 0" in err, err


@pytest.mark.parametrize("name", ['""', '"   "'])
def test_an_empty_model_name_is_refused(tmp_path, capsys, name):
    """Before: ``[model] name = ""`` loaded, titles read "softmax ... on  (m.toml)", and only
    ``sweep --models`` refused the empty label, late and naming no file."""
    path = tmp_path / "m.toml"
    path.write_text(f'base = "j6"\n[model]\nname = {name}\n')
    code, _, err = run_cli(capsys, "run", "--model", path, "--n", "64", "--no-data")
    assert code == 2 and one_line(err) and "model.name" in err and "m.toml" in err, err


def test_validate_takes_two_model_files_of_one_name(tmp_path, capsys):
    """Before: ``validate --models d1/a.toml,d2/a.toml`` (two readings in two folders) was
    refused as "'d2/a.toml' is given twice", since validate labelled a model by its file's stem;
    ``run --models`` takes them, labelled by their paths. One file given twice is still refused."""
    for d, latency in (("d1", 150.0), ("d2", 200.0)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "a.toml").write_text(f'base = "j6"\n[ddr]\nlatency_cycles = {latency}\n')
    a1, a2 = tmp_path / "d1" / "a.toml", tmp_path / "d2" / "a.toml"
    mine = tmp_path / "m.toml"
    mine.write_text('platform = "j6"\nsource = "s"\n[[measurement]]\nname = "d"\n'
                    'variant = "direct"\nn = 1024\ncycles = 100000\nrole = "check"\n')
    code, out, err = run_cli(capsys, "validate", "--models", f"{a1},{a2}", "--measurements",
                             mine, "--only", "--json")
    assert code == 0 and err == "", err
    rows = json.loads(out)["rows"]
    assert [r["model"] for r in rows] == [str(a1), str(a2)]
    assert rows[0]["predicted_cycles"] < rows[1]["predicted_cycles"]  # each its own latency
    code, _, err = run_cli(capsys, "validate", "--models", f"{a1},{tmp_path}/d1/../d1/a.toml")
    assert code == 2 and one_line(err) and "name one file" in err, err


def test_validate_reads_a_measurements_file_once(tmp_path, monkeypatch, capsys):
    """Before: ``--measurements m.toml --measurements ./m.toml`` (or a shipped file without
    --only) ran every row twice and counted it twice in the summary."""
    from dspsim.study.validate import shipped_files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.toml").write_text(
        'platform = "j6"\nsource = "s"\n[[measurement]]\nname = "d"\nvariant = "direct"\n'
        'n = 1024\ncycles = 100000\nrole = "check"\n')
    for args in (["m.toml", "--measurements", "./m.toml", "--only"], [shipped_files()[0]]):
        code, out, err = run_cli(capsys, "validate", "--measurements", *args)
        assert code == 2 and one_line(err) and "name one file" in err and out == "", err


@pytest.mark.parametrize("extra, message", [
    (["--window", "0:100"], "--window"),
    (["--trace-limit", "5"], "--trace-limit"),
    (["--input", "x.npy", "--no-data"], "drop --no-data"),
])
def test_run_models_refuses_what_it_would_ignore(tmp_path, monkeypatch, capsys, extra, message):
    """Before: ``run --models A,B --window 0:100`` and ``--trace-limit 5`` printed the table and
    exit 0, the options ignored (one --model refuses them without --timeline or --trace), and
    ``--input X --no-data`` said "pass data=True", the API's words, not the command's."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.ones(64, np.float32))
    code, out, err = run_cli(capsys, "run", "--models", "j6,j6_descriptor_bound", "--n", "64",
                             *extra)
    assert code == 2 and one_line(err) and message in err and out == "", err


@pytest.mark.parametrize("args, message", [
    (["keys", "--markdown", "--model", "ameba_hifi5"], "drop --model"),
    (["keys", "--markdown", "--json"], "drop --json"),
    (["keys", "--markdown", "--set", "ddr.latency_cycles=5"], "drop --set"),
    (["calibrate", "--measured", "direct,n=1024=100000", "--free", "ddr.latency_cycles",
      "--jobs", "2"], "--explore"),
], ids=["markdown-model", "markdown-json", "markdown-set", "calibrate-jobs"])
def test_options_a_command_would_ignore_are_refused(capsys, args, message):
    """Before: ``keys --markdown`` printed the same Markdown whatever --model, --set or --json
    said (--json printed no JSON), and ``calibrate --jobs 2`` without --explore ran its fit in
    one process, all with exit 0."""
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and one_line(err) and message in err and out == "", err


def test_the_kernel_op_refuses_an_output_file(tmp_path, capsys):
    """Before: ``run --op kernel --output k.npy`` wrote a one-element array of 0.0 (the host's
    parameter-block word, not a result) and exit 0; the op takes no --input either."""
    out = tmp_path / "k.npy"
    code, _, err = run_cli(capsys, "run", "--op", "kernel", "--variant", "vecmaxf",
                           "--output", out)
    assert code == 2 and one_line(err) and "no output array" in err, err
    assert not out.exists()


def test_a_saved_run_that_cannot_be_read_says_why(tmp_path, capsys):
    """Before: a loop of symbolic links was reported as "not found", and load_run of a path
    holding a NUL byte raised ``ValueError: embedded null byte`` from os.stat, not
    a DspsimInputError."""
    from dspsim.errors import DspsimInputError
    from dspsim.results import load_run

    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    code, _, err = run_cli(capsys, "report", loop)
    assert code == 2 and one_line(err) and "loop of symbolic links" in err, err
    with pytest.raises(DspsimInputError, match="NUL byte"):
        load_run(str(tmp_path / "a\0b.json"))


def test_the_api_refuses_wrong_kinds_of_arguments_as_input_errors(tmp_path):
    """Before: ``simulate("j6", ...)`` (a name for the model) and ``params="..."`` raised
    AttributeError, ``with_overrides({5: 1})`` and ``(["..."] with a non-text item)``
    AttributeError, and ``load_op_file`` of a path with a NUL byte a bare ValueError: none was
    the documented DspsimInputError (a ValueError subclass) naming the argument."""
    import dspsim
    from dspsim.errors import DspsimInputError

    model = dspsim.load_model()
    with pytest.raises(DspsimInputError, match="expected a model"):
        dspsim.simulate("j6", n=64)
    for params in ("tile_bytes=4096", {1: 2}):
        with pytest.raises(DspsimInputError, match="params"):
            dspsim.simulate(model, n=64, params=params)
    for overrides in ({5: 1}, [5], "ddr.latency_cycles=5"):
        with pytest.raises(DspsimInputError, match="overrides"):
            model.with_overrides(overrides)
    with pytest.raises(DspsimInputError, match="NUL byte"):
        dspsim.load_op_file(str(tmp_path / "a\0b.toml"))


def test_numpy_numbers_are_model_values():
    """Before: ``with_overrides({"core.count": numpy.int64(2)})`` said "expected an integer"
    (numpy's integers are not Python ints), as a value from ``numpy.arange`` would be."""
    import numpy as np

    import dspsim
    from dspsim.errors import DspsimInputError

    model = dspsim.load_model()
    assert model.with_overrides({"core.count": np.int64(2)}).core.count == 2
    assert model.with_overrides({"ddr.latency_cycles": np.float32(150)}).memories[
        "ddr"].latency_cycles == 150.0
    assert model.with_overrides({"softmax.tile_bytes": np.float64(4096)}).ops[
        "softmax"].tile_bytes == 4096
    with pytest.raises(DspsimInputError, match="expected an integer"):
        model.with_overrides({"core.count": np.float32(2.5)})  # never truncated to 2
    with pytest.raises(DspsimInputError, match="expected"):
        model.with_overrides({"core.count": np.bool_(True)})


@pytest.mark.parametrize("op", ["softmax", "layernorm", "rmsnorm", "copy", "kernel", "fc"])
@pytest.mark.parametrize("shape", [(0, 5), (0,), (4, 64, 2), (4.5, 64), "abc"])
def test_bounds_refuse_a_shape_the_op_does_not_take(op, shape):
    """Before: ``get_op("layernorm").bounds(model, "pingpong", (0, 5))`` (README's call) gave
    bounds of 0 cycles, ``(4,)`` an IndexError, fc ``(0, 0)`` a ZeroDivisionError, copy
    ``(0,)`` a ZeroDivisionError and kernel ``(4.5, 64)`` bounds of a fractional call: only
    softmax checked its shape."""
    import dspsim
    from dspsim.errors import DspsimInputError

    the_op = dspsim.ops.get_op(op)
    with pytest.raises(DspsimInputError, match="shape|size"):
        the_op.bounds(dspsim.load_model(), the_op.default_variant, shape)


def test_a_short_row_of_a_measured_csv_is_refused(tmp_path, capsys):
    """Before: a row with fewer cells than the header (``pingpong,213473`` under
    ``variant,cycles,n``) was read with its missing n as the op's default size, while a row
    with more cells was refused."""
    m = tmp_path / "m.csv"
    m.write_text("variant,cycles,n\npingpong,213473\n")
    code, out, err = run_cli(capsys, "calibrate", "--measured-csv", m, "--free",
                             "ddr.latency_cycles")
    assert code == 2 and one_line(err) and "line 2: fewer cells than columns" in err, err


def test_a_changed_op_file_computes_its_sweep_rows_again(tmp_path, capsys):
    """Before: a sweep of an op file, resumed after the file's loop changed (alu 1 -> 40),
    kept the old rows and computed only the new points with the new loop: one table of two
    ops under one name, silently. The sidecar's version now carries a digest of the op
    files, so the old rows are noted and computed again; a comment's change is no change."""
    import shutil

    from dspsim.ops.fileop import unload_op_file

    src = tmp_path / "sb.toml"
    shutil.copy(SCALE_BIAS, src)
    out = tmp_path / "sb.csv"
    args = ("sweep", "--op-file", src, "--n", "4096", "--variant", "direct", "--out", out)

    def cycles(values):
        code, _, err = run_cli(capsys, *args, "--param", f"scale_bias.a={values}")
        assert code == 0, err
        unload_op_file(src)  # the next run reads the file again, as a new process would
        return [int(line.split(",")[4]) for line in out.read_text().splitlines()[1:]], err

    before, _ = cycles("1,2")
    src.write_text("# a new comment\n" + src.read_text())
    same, err = cycles("1,2")
    assert same == before and "computed again" not in err, err
    src.write_text(src.read_text().replace("alu = 1 }", "alu = 40 }"))
    after, err = cycles("1,2,3")
    assert "computed again" in err and len(set(after)) == 1 and after[0] > before[0], err


def test_an_op_files_run_and_table_without_the_file_name_the_option(tmp_path, capsys):
    """Before: ``report`` of a run saved from an op file, without --op-file, said only
    "unknown table [scale_bias]; allowed: core, ..." and ``plot sweep`` of its table "not a
    sweep key ... or a model key": neither named --op-file, what the reader lacks."""
    run = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "run", "--op-file", SCALE_BIAS, "--n",
                           "4096", "--save", run)
    assert code == 0, err
    from dspsim.ops.fileop import unload_op_file

    unload_op_file(SCALE_BIAS)  # as a new process: the op is not loaded
    table = tmp_path / "t.csv"
    table.write_text("op,variant,n,scale_bias.a,cycles,error\n")
    for args in (["report", run], ["plot", "sweep", table, "--x", "scale_bias.a"]):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and one_line(err) and "--op-file" in err, err


def test_op_file_with_another_op_is_refused_and_with_its_op_loads(tmp_path, capsys):
    """Before: a workload stream giving op_file and op never loaded the file: op = its own op
    was refused as an unknown op, op = "softmax" ran softmax and a missing op_file went
    unnoticed; a measurement with op = "softmax" beside its op_file ran softmax."""
    import shutil

    from dspsim.ops.fileop import unload_op_file

    shutil.copy(SCALE_BIAS, tmp_path / "sb.toml")
    unload_op_file(tmp_path / "sb.toml")
    stream = '[[stream]]\nname = "a"\nn = 4096\nperiod_us = 1000\ncount = 2\n'
    for extra, code_wanted in (('op_file = "sb.toml"\nop = "scale_bias"\n', 0),
                               ('op_file = "sb.toml"\nop = "softmax"\n', 2),
                               ('op_file = "gone.toml"\nop = "softmax"\n', 2)):
        w = tmp_path / "w.toml"
        w.write_text(stream + extra)
        code, _, err = run_cli(capsys, "workload", w)
        assert code == code_wanted and (code == 0 or one_line(err)), err
    m = tmp_path / "m.toml"
    m.write_text('platform = "j6"\nsource = "s"\n[[measurement]]\nname = "a"\n'
                 'op_file = "sb.toml"\nop = "softmax"\nn = 4096\ncycles = 100000\n'
                 'role = "check"\n')
    code, _, err = run_cli(capsys, "validate", "--measurements", m, "--only")
    unload_op_file(tmp_path / "sb.toml")  # the other tests load scale_bias from its own file
    assert code == 2 and one_line(err) and "op_file declares op 'scale_bias'" in err, err


@pytest.mark.parametrize("args", [
    ["run", "--n", "64", "--n", "128"],
    ["run", "--n", "64", "--model", "j6", "--model", "ameba_hifi5"],
    ["sweep", "--n", "64", "--out", "a.csv", "--out", "b.csv"],
    ["plot", "timeline", "r.json", "--out", "a.png", "--out", "b.png"],
])
def test_a_single_valued_option_given_twice_is_refused(tmp_path, monkeypatch, capsys, args):
    """Before: ``--n 64 --n 128`` ran 128 and ``--out a.csv --out b.csv`` wrote b.csv, the
    first value dropped silently (argparse's last-wins), while ``--set`` given twice was
    refused; the same value twice is still taken."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and one_line(err) and "given twice" in err and out == "", err
    assert list(tmp_path.iterdir()) == []
    code, _, err = run_cli(capsys, "run", "--n", "64", "--n", "64", "--no-data")
    assert code == 0, err


def test_a_short_workload_prints_its_bytes_not_zero_megabytes(tmp_path, capsys):
    """Before: two resident softmax tasks of 4,096 float32 printed "DDR port 34.7 % busy
    (data path; 0.0 MB read, 0.0 MB written)": 32,768 bytes each way rounded to nothing."""
    w = tmp_path / "w.toml"
    w.write_text('[[stream]]\nname = "x"\nop = "softmax"\nvariant = "resident"\nn = 4096\n'
                 'period_us = 100\ncount = 2\n')
    code, out, err = run_cli(capsys, "workload", w)
    assert code == 0, err
    assert "(data path; 0.0328 MB read, 0.0328 MB written)" in out, out


def test_a_copy_input_of_another_size_names_the_unit(tmp_path, capsys):
    """Before: ``run --op copy --input x.npy --n 25`` with 25 float32 said "shape (25,) but the
    input array has shape (100,)", a file of 25 elements said to hold 100: copy counts bytes."""
    import numpy as np

    x = tmp_path / "x.npy"
    np.save(x, np.ones(25, np.float32))
    code, _, err = run_cli(capsys, "run", "--op", "copy", "--input", x, "--n", "25")
    assert code == 2 and one_line(err) and "(100,) (in bytes)" in err, err


@pytest.mark.parametrize("body, message", [
    ("raise RuntimeError('boom')", "RuntimeError: boom"),
    ("return x.sum()", "returned shape ()"),
])
def test_a_python_reference_that_fails_is_one_line(tmp_path, monkeypatch, capsys, body,
                                                    message):
    """Before: an op file's ``[reference] python`` function that raised, or returned a value
    of another shape, ended the run in a traceback after the whole simulation."""
    name = "pyref_" + ("raise" if "raise" in body else "shape")
    (tmp_path / f"{name}_mod.py").write_text(f"def ref(x, params):\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    src = SCALE_BIAS.read_text().replace('name = "scale_bias"',
                                                              f'name = "{name}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(src + f'\n[reference]\npython = "{name}_mod:ref"\nallow_python = true\n')
    code, _, err = run_cli(capsys, "run", "--op-file", path, "--allow-python", "--n", "4096")
    from dspsim.ops.fileop import unload_op_file

    unload_op_file(path)
    assert code == 2 and one_line(err) and message in err and "[reference] python" in err, err


def test_optimize_refuses_to_rank_different_kernels(capsys):
    """Before: ``optimize --op kernel`` ranked vecsum, vecmaxf, fc_s8 and memcpy against each
    other and printed "best: vecsum, 107 cycles, speed-up 1.48x over memcpy": a sum is not a
    faster copy. One kernel's search still runs."""
    code, out, err = run_cli(capsys, "optimize", "--op", "kernel", "--no-check")
    assert code == 2 and one_line(err) and "different kernels" in err and out == "", err
    code, _, err = run_cli(capsys, "optimize", "--op", "kernel", "--variants", "vecsum",
                           "--no-check")
    assert code == 0, err


def test_plot_sweep_refuses_a_speedup_of_different_kernels(tmp_path, capsys):
    """Before: ``plot sweep --y speedup`` of a kernel sweep drew memcpy's cycles over vecsum's
    and the others' as speed-ups."""
    table = tmp_path / "k.csv"
    code, _, err = run_cli(capsys, "sweep", "--op", "kernel", "--param",
                           "core.call_overhead_cycles=10,20", "--out", table)
    assert code == 0, err
    code, _, err = run_cli(capsys, "plot", "sweep", table, "--x", "core.call_overhead_cycles",
                           "--y", "speedup", "--out", tmp_path / "k.png")
    assert code == 2 and one_line(err) and "different kernels" in err, err
    assert not (tmp_path / "k.png").exists()


def test_an_unquoted_dotted_range_key_says_to_quote_it(tmp_path, capsys):
    """Before: ``[ranges]`` then ``ddr.latency_cycles = [100.0, 200.0]`` (TOML reads a table
    ``ddr``) was refused as "unknown model key 'ddr'; allowed keys: core.count, ...": the key
    the file meant was right, its quotes missing."""
    path = tmp_path / "m.toml"
    path.write_text('base = "j6"\n[ranges]\nddr.latency_cycles = [100.0, 200.0]\n')
    code, _, err = run_cli(capsys, "run", "--model", path, "--n", "64", "--no-data")
    assert code == 2 and one_line(err) and '"ddr.latency_cycles" = [LOW, HIGH]' in err, err


def test_a_command_without_op_files_does_not_load_one(tmp_path, monkeypatch, capsys):
    """Before: ``reproduce --op-file F --allow-python`` loaded F, importing its Python
    reference (running its code), before refusing --op-file as an unknown argument; a missing
    F was reported as "op file not found" instead."""
    (tmp_path / "marker_mod.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef ref(x, params):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "mk.toml"
    path.write_text(SCALE_BIAS.read_text().replace('name = "scale_bias"', 'name = "mk"')
                    + '\n[reference]\npython = "marker_mod:ref"\nallow_python = true\n')
    for f in (path, tmp_path / "gone.toml"):
        code, _, err = run_cli(capsys, "reproduce", "--op-file", f, "--allow-python")
        assert code == 2 and one_line(err) and "unrecognized arguments" in err, err
    assert not (tmp_path / "imported").exists()


def test_a_measurements_dotted_setting_is_the_key_it_names(tmp_path, capsys):
    """Before: ``settings = { ddr.latency_cycles = 150.0 }`` (TOML's dotted key, a nested
    table) was refused as "unknown model key 'ddr'", while a sweep spec's [set] reads it as
    ``ddr.latency_cycles``; the key given both ways is refused."""
    m = tmp_path / "m.toml"
    head = 'platform = "j6"\nsource = "s"\n[[measurement]]\nname = "a"\nn = 4096\n'
    tail = 'cycles = 100000\nrole = "check"\n'
    m.write_text(head + 'settings = { ddr.latency_cycles = 150.0 }\n' + tail)
    code, out, err = run_cli(capsys, "validate", "--measurements", m, "--only", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["settings"] == {"ddr.latency_cycles": 150.0}
    m.write_text(head + 'settings = { ddr.latency_cycles = 150.0, "ddr.latency_cycles" = 1.0 }\n'
                 + tail)
    code, _, err = run_cli(capsys, "validate", "--measurements", m, "--only")
    assert code == 2 and one_line(err) and "given twice" in err, err


def test_an_inherited_op_file_list_does_not_reach_the_workers(tmp_path, monkeypatch, capsys):
    """Before: a DSPSIM_OP_FILES left in the environment (exported, or inherited from a dspsim
    that started this one) was loaded by every worker of ``sweep --jobs 2``: a stale path ended
    the sweep in an initializer traceback. The command now publishes only what it loads."""
    monkeypatch.setenv("DSPSIM_OP_FILES", str(tmp_path / "gone.toml"))
    out = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", "4096", "--param",
                           "ddr.latency_cycles=1:8:1", "--jobs", "2", "--out", out)
    assert code == 0 and "Traceback" not in err, err
    assert len(out.read_text().splitlines()) == 1 + 16


@pytest.mark.parametrize("args", [["--x", "cycles"], ["--x", "n", "--hue", "cycles"],
                                  ["--heatmap", "ddr.latency_cycles", "wall_s"]])
def test_plot_sweep_draws_over_keys_not_results(tmp_path, capsys, args):
    """Before: ``--hue cycles`` drew one "line" of one point per distinct cycle count, and
    ``--x cycles`` plotted cycles against themselves: a result is no axis of a sweep."""
    table = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", "1024", "--param",
                           "ddr.latency_cycles=100,200", "--out", table)
    assert code == 0, err
    code, _, err = run_cli(capsys, "plot", "sweep", table, *args, "--out", tmp_path / "s.png")
    assert code == 2 and one_line(err) and "not one of its keys" in err, err
    assert not (tmp_path / "s.png").exists()


@pytest.mark.parametrize("flag", ["data", "trace", "port_log", "elide"])
def test_a_simulate_switch_that_is_not_a_bool_is_refused(flag, j6):
    """``data="no"`` used to turn the data path on (any truthy value did): one line instead."""
    import dspsim
    from dspsim.errors import DspsimInputError

    with pytest.raises(DspsimInputError, match=rf"^{flag} = 'no': expected True or False$"):
        dspsim.simulate(j6, n=64, **{flag: "no"})
