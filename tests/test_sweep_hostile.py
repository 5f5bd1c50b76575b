"""Hostile input to sweeps: damaged sidecars and parquet files, absurd --jobs, sizes that cannot
fit, damaged tables given to ``plot sweep``, rows off the grid, and duplicate spec keys. Each is
one line and exit 2 (or a row computed again), never a traceback, hang or silent merge."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path

import pytest

from dspsim.errors import DspsimInputError
from dspsim.study.sweep import build_sweep, read_sweep, run_sweep
from dspsim.study.sweep import journal as journal_module
from dspsim.study.sweep.table import warning_codes
from dspsim.study.sweep.values import canon_text
from tests.cli_helpers import one_line, run_cli

N = "1000"
GRID = ["--n", N, "--param", "ddr.latency_cycles=100:103:1", "--variant", "pingpong,direct",
        "--fidelity", "tile"]


@pytest.fixture
def made(tmp_path, capsys):
    """A finished 8-point sweep ``r.csv`` (with its sidecar) and the command that made it."""
    out = tmp_path / "r.csv"
    argv = ["sweep", *GRID, "--out", out]
    assert run_cli(capsys, *argv)[0] == 0
    return out, argv


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _write_rows(path: Path, rows: list[list[str]]) -> None:
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


# ------------------------------------------------------------------ 1: the sidecar, strictly
def _fixed(d):
    return d["fixed_model"]


@pytest.mark.parametrize("damage", [
    lambda d: d.update(fixed_model={}),
    lambda d: _fixed(d).pop("ddr.max_outstanding"),
    lambda d: d.update(format=99),
    lambda d: d.pop("format"),
    lambda d: d.update(format_version=2),
    lambda d: d.update(extra=1),
    lambda d: _fixed(d).update({"ddr.nope": 1}),
    lambda d: _fixed(d).update({"ddr.max_outstanding": "64"}),
    lambda d: _fixed(d).update({"ddr.max_outstanding": True}),
    lambda d: _fixed(d).update({"ddr.max_outstanding": -1}),
    lambda d: d.update(grid=[]),
    lambda d: d.update(columns="op"),
    lambda d: d.update(git_sha=5),
    lambda d: d.update(git_sha="x" * 100_000),
    lambda d: d.update(dspsim_version="\n\n\n"),
], ids=["fixed-empty", "fixed-key-missing", "format-99", "no-format", "format-2", "extra-key",
        "fixed-extra-key", "wrong-type", "bool-for-int", "out-of-range", "no-grid",
        "columns-text", "sha-int", "sha-not-hex", "version-newlines"])
def test_a_damaged_sidecar_is_refused(made, capsys, damage):
    """Before: an emptied fixed_model, a missing key, format 99 ... were accepted, and resume
    passed rows of one model off as another's (exit 0)."""
    out, argv = made
    side = out.with_name(out.name + ".sweep.json")
    doc = json.loads(side.read_text())
    damage(doc)
    side.write_text(json.dumps(doc))
    before = out.read_bytes()
    code, _, err = run_cli(capsys, *argv, "--model", "j6_outstanding_bound")
    assert code == 2 and one_line(err) and "damaged" in err and "afresh" in err, err
    assert out.read_bytes() == before


def test_rows_of_another_dspsim_version_are_noted_and_computed_again(made, capsys):
    """dspsim's version is in every point's key: another release's rows are not this one's
    points (they were kept before the sweep became a cache keyed by it)."""
    out, argv = made
    side = out.with_name(out.name + ".sweep.json")
    doc = json.loads(side.read_text())
    doc["dspsim_version"] = "0.0.1"
    side.write_text(json.dumps(doc))
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "(8 computed, 0 already" in stdout
    assert err.count("\n") == 1 and "note:" in err and "0.0.1" in err
    assert json.loads(side.read_text())["dspsim_version"] != "0.0.1"
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "(0 computed, 8 already" in stdout and err == ""


# ------------------------------------------------------------------ 2: a damaged parquet file
@pytest.mark.parametrize("damage", [b"garbage", None])
def test_a_damaged_parquet_table_is_one_line(tmp_path, capsys, damage):
    """Before: a pyarrow traceback on resume and in ``plot sweep``."""
    pytest.importorskip("pyarrow")
    out = tmp_path / "pq.parquet"
    argv = ["sweep", "--n", N, "--variant", "pingpong", "--param", "ddr.latency_cycles=1,2",
            "--out", out]
    assert run_cli(capsys, *argv)[0] == 0
    out.write_bytes(damage if damage is not None else out.read_bytes()[:300])
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and one_line(err) and "not a readable parquet" in err, err
    code, _, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "o.png")
    assert code == 2 and one_line(err) and "not a readable parquet" in err, err


# ------------------------------------------------------------------ 7: --jobs
def test_absurd_jobs_are_refused_and_workers_never_outnumber_points(tmp_path, capsys,
                                                                    monkeypatch):
    """Before: ``--jobs 5000`` on a 3-point sweep built a pool of 5,000 and hung."""
    out = tmp_path / "j.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", N, "--variant", "direct", "--param",
                           "ddr.latency_cycles=1:3:1", "--out", out, "--jobs", "5000")
    assert code == 2 and one_line(err) and "1 to 256" in err and not out.exists()
    with pytest.raises(DspsimInputError, match="1 to 256"):
        run_sweep(build_sweep({"ddr.latency_cycles": [1]}, n=1000), out, jobs=10**6)
    seen = []
    real = journal_module.local_results
    monkeypatch.setattr(journal_module, "local_results",
                        lambda sweep, todo, jobs, started: seen.append(jobs)
                        or real(sweep, todo, jobs, started))
    s = build_sweep({"ddr.latency_cycles": [1, 2, 3]}, n=1000, variants=["direct"])
    assert run_sweep(s, out, jobs=200).computed == 3
    assert seen == [3]


# ------------------------------------------------------------------ 8: sizes that cannot fit
@pytest.mark.parametrize("args", [["--n", "99999999999999999999999"],
                                  ["--param", "n=300000000"],
                                  ["--op", "layernorm", "--shape", "100000x100000"]])
def test_a_size_that_cannot_fit_ddr_is_refused_before_running(tmp_path, capsys, args):
    """Before: ``--n 99999999999999999999999`` recorded an AllocationError row yet reported
    "0 failed" and exit 0."""
    out = tmp_path / "hn.csv"
    code, _, err = run_cli(capsys, "sweep", *args, "--variant", "direct", "--out", out)
    assert code == 2 and one_line(err) and "window; allowed" in err, err
    assert not out.exists()


def test_integer_cells_are_read_back_exactly():
    """Before: a 23-digit n was read back through float, so its row matched no point and its
    failure was not counted."""
    assert canon_text("n", "99999999999999999999999") == "99999999999999999999999"
    assert canon_text("n", "1e3") == "1000"
    with pytest.raises(ValueError, match="finite"):
        canon_text("ddr.latency_cycles", "inf")


# ------------------------------------------------------------------ 9: plot sweep, hostile tables
def _cell(column, value):
    def edit(rows):
        rows[1][rows[0].index(column)] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    (_cell("cycles", "inf"), "not a non-negative integer"),
    (_cell("cycles", "1e400"), "not a non-negative integer"),
    (_cell("cycles", "abc"), "not a non-negative integer"),
    (_cell("cycles", "-5"), "not a non-negative integer"),
    (_cell("cycles", "nan"), "not a non-negative integer"),
    (_cell("cycles", "99999999999999999999"), "not a non-negative integer"),
    (_cell("ddr.latency_cycles", "abc"), "not a number"),
    (_cell("ddr.latency_cycles", "inf"), "not a finite number"),
    (_cell("n", "0"), "positive integer"),
    (_cell("n", "9" * 40), "larger than"),
    (_cell("variant", "bogus"), "not a variant"),
    (_cell("warnings", "bogus_code"), "not a warning code"),
    (lambda rows: rows.__setitem__(2, rows[2][:5]), "fields, expected"),
    (lambda rows: rows[0].__setitem__(0, "opp"), "not a sweep key"),
    (lambda rows: [r.append(r[rows[0].index("cycles")]) for r in rows], "appears twice"),
    (lambda rows: rows.append(list(rows[1])), "second row of the point"),
], ids=["inf", "1e400", "abc", "neg", "nan", "19-digits", "x-abc", "x-inf", "n0", "n-40-digits",
        "variant", "warning", "short-row", "renamed-op", "dup-column", "dup-row"])
def test_plot_sweep_refuses_a_damaged_table(made, tmp_path, capsys, edit, message):
    """Before: inf/1e400 cycles (and a 40-digit n) gave an OverflowError traceback; the others
    were plotted."""
    out, _ = made
    rows = copy.deepcopy(_rows(out))
    edit(rows)
    bad = tmp_path / "bad.csv"
    _write_rows(bad, rows)
    for y in ([], ["--y", "cycles_per_element"]):
        code, _, err = run_cli(capsys, "plot", "sweep", bad, "--x", "ddr.latency_cycles", *y,
                               "--out", tmp_path / "o.png")
        assert code == 2 and one_line(err) and message in err, err
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("data", [bytes(range(256)) * 40, None], ids=["binary", "non-utf8"])
def test_plot_sweep_refuses_binary_and_non_utf8_tables_in_one_line(made, tmp_path, capsys,
                                                                     data):
    out, _ = made
    bad = tmp_path / "bad.csv"
    damaged = out.read_bytes().replace(b"direct", b"di\xffr", 1)
    bad.write_bytes(data if data is not None else damaged)
    code, _, err = run_cli(capsys, "plot", "sweep", bad, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "o.png")
    assert code == 2 and one_line(err) and "UTF-8" in err, err


def test_plot_sweep_caps_the_table_size(made, tmp_path, capsys, monkeypatch):
    from dspsim.study.sweep import table

    out, _ = made
    monkeypatch.setattr(table, "MAX_TABLE_BYTES", 200)
    code, _, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "o.png")
    assert code == 2 and one_line(err) and "at most 200" in err, err


def test_a_good_table_still_plots_and_reads(made, tmp_path, capsys):
    out, _ = made
    df = read_sweep(out)
    assert len(df) == 8 and df["cycles"].dtype.name == "Int64"
    code, _, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "o.png")
    assert code == 0, err


# ------------------------------------------------------------------ 11: rows off the grid
@pytest.mark.parametrize("column, value", [("variant", "bogus"), ("variant", "online"),
                                           ("op", "layernorm"), ("n", "2000"),
                                           ("ddr.latency_cycles", "100.5"),
                                           ("warnings", "bogus_code")])
def test_rows_off_the_grid_are_recomputed(made, capsys, column, value):
    """Before: an edited row (variant bogus, op layernorm, n 2000, a value off the grid, an
    unknown warning code) was kept, and the file held more rows than the grid."""
    out, argv = made
    rows = _rows(out)
    rows[1][rows[0].index(column)] = value
    _write_rows(out, rows)
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "1 computed, 7 already" in stdout and "1 invalid rows" in stdout
    assert err.count("\n") == 1 and "invalid rows" in err
    assert len(read_sweep(out)) == 8 and len(_rows(out)) == 9


@pytest.mark.parametrize("change", [["--n", "2000"], ["--variant", "pingpong"],
                                    ["--param", "ddr.latency_cycles=100:101:1"],
                                    ["--param", "ddr.latency_cycles=200:203:1"]])
def test_a_different_grid_on_the_same_out_is_refused(made, capsys, change):
    """Before: another grid on the same --out silently merged into the file."""
    out, argv = made
    argv = list(argv)
    flag = change[0]
    i = argv.index(flag)
    argv[i + 1] = change[1]
    before = out.read_bytes()
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and one_line(err) and "different sweep" in err and "afresh" in err, err
    assert out.read_bytes() == before


def test_a_grid_that_adds_values_extends_the_file_with_a_note(made, capsys):
    out, argv = made
    argv = [a if a != "ddr.latency_cycles=100:103:1" else "ddr.latency_cycles=100:104:1"
            for a in argv]
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0 and "2 computed, 8 already" in stdout
    assert err.count("\n") == 1 and "extending" in err and "104.0" in err
    grid = dict(json.loads(out.with_name(out.name + ".sweep.json").read_text())["grid"])
    assert grid["ddr.latency_cycles"][-1] == "104.0"
    assert run_cli(capsys, *argv)[0] == 0  # the same command again: nothing to do


def test_every_warning_code_in_the_source_is_known():
    """Resume refuses unknown warning codes: every code the simulator raises must be listed,
    an op's by the op itself (Op.warning_codes), the rest by the platform."""
    from dspsim.ops import get_op, op_names
    from dspsim.platform import WARNING_CODES as PLATFORM_WARNINGS

    root = Path(__file__).resolve().parents[1] / "dspsim"

    def raised(paths):
        return {code for path in paths for code in
                re.findall(r"\bwarn\(\s*\"([a-z_]+)\"", path.read_text())}

    found = raised(root.rglob("*.py"))
    assert found and found <= warning_codes(), found - warning_codes()
    for name in op_names():
        own = raised((root / "ops" / name).rglob("*.py"))
        assert own <= set(get_op(name).warning_codes), (name, own)
    elsewhere = raised(p for p in root.rglob("*.py") if (root / "ops") not in p.parents)
    assert elsewhere <= set(PLATFORM_WARNINGS), elsewhere


# ------------------------------------------------------------------ 12: spec files
def test_a_spec_key_given_twice_is_refused(tmp_path, capsys):
    """Before: ``"ddr.latency_cycles" = [1]`` and ``ddr = {latency_cycles = [2]}`` swept 2."""
    spec = tmp_path / "dup.toml"
    spec.write_text('n = 1000\nvariant = "pingpong"\n[params]\n"ddr.latency_cycles" = [1]\n'
                    'ddr = {latency_cycles = [2]}\n')
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--out", tmp_path / "x.csv")
    assert code == 2 and one_line(err) and "given twice" in err, err
    spec.write_text('n = 1000\nvariant = "pingpong"\n[set]\n"ddr.latency_cycles" = 1\n'
                    'ddr = {latency_cycles = 2}\n')
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--out", tmp_path / "x.csv")
    assert code == 2 and one_line(err) and "given twice" in err, err
    spec.write_text('n = 1000\nvariant = "pingpong"\n[params]\nn = [1000, 2000]\n')
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--out", tmp_path / "x.csv")
    assert code == 2 and one_line(err) and "given twice" in err, err
    assert not (tmp_path / "x.csv").exists()


def test_a_spec_model_resolves_packaged_names(tmp_path):
    """Before: ``model = "j6"`` looked for a file ``<specdir>/j6``."""
    spec = tmp_path / "s.toml"
    spec.write_text('model = "j6_outstanding_bound"\nn = 1000\nvariant = "direct"\n'
                    '[params]\n"ddr.latency_cycles" = [1]\n')
    s = build_sweep(spec=spec)
    assert Path(s.model.source).name == "j6_outstanding_bound.toml"
    (tmp_path / "mine.toml").write_text('base = "j6"\n')
    spec.write_text('model = "mine.toml"\nn = 1000\n[params]\n"ddr.latency_cycles" = [1]\n')
    assert Path(build_sweep(spec=spec).model.source) == tmp_path / "mine.toml"


def test_a_key_set_by_the_spec_and_by_set_is_refused(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('n = 1000\nvariant = "pingpong"\n[set]\n"ddr.latency_cycles" = 100\n'
                    '[params]\n"idma.setup_cycles" = [1, 2]\n')
    code, _, err = run_cli(capsys, "sweep", "--spec", spec, "--set", "ddr.latency_cycles=200",
                           "--out", tmp_path / "s.csv")
    assert code == 2 and one_line(err) and "in one place" in err, err


def test_a_parquet_table_too_long_to_read_whole_is_refused_from_its_metadata(tmp_path, capsys,
                                                                             monkeypatch):
    """A few hundred KB of parquet can decode to millions of rows: the row count in its
    metadata is checked before anything is decoded."""
    pytest.importorskip("pyarrow")
    from dspsim.study.sweep import table

    out = tmp_path / "p.parquet"
    argv = ["sweep", "--n", N, "--variant", "pingpong", "--param", "ddr.latency_cycles=1:5:1",
            "--out", out]
    assert run_cli(capsys, *argv)[0] == 0
    monkeypatch.setattr(table, "MAX_PARQUET_ROWS", 3)
    code, _, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles",
                           "--out", tmp_path / "o.png")
    assert code == 2 and one_line(err) and "5 rows" in err, err
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and one_line(err) and "5 rows" in err, err


def _grid_with(**change):
    """The axes of a 2-point sweep with ``change`` (key: values, None drops the key) applied."""
    axes = {"idma.channels": (1, 2), "op": ("softmax",), "variant": ("pingpong",), "n": (4096,)}
    return tuple((k, v) for k, v in (axes | change).items() if v is not None)


@pytest.mark.parametrize(("fields", "message"), [
    ({"fidelity": "nope"}, "fidelity 'nope': allowed "),
    ({"axes": _grid_with(**{"dma.x": (1, 2)})}, "unknown model key 'dma.x'"),
    ({"axes": _grid_with(**{"idma.channels": (0, -1)})}, "idma.channels = 0: allowed range is"),
    ({"axes": _grid_with(**{"idma.channels": ()})}, "idma.channels: no values"),
    ({"axes": _grid_with(**{"idma.channels": (1, 1)})}, "idma.channels: value 1 is given twice"),
    ({"axes": _grid_with(variant=("nope",))}, "variant 'nope' is not a variant of softmax"),
    ({"axes": _grid_with(n=(0,))}, "n = 0: must be a positive integer"),
    ({"axes": _grid_with(op=None)}, "sweep axes idma.channels, variant, n: build_sweep gives "
                                    "idma.channels, variant, n, op ("),
    ({"axes": ()}, "sweep axes none: build_sweep gives op, variant, n ("),
    ({"axes": _grid_with() + (("n", (8,)),)}, "sweep axes idma.channels, op, variant, n, n: "),
    ({"axes": list(_grid_with())}, "sweep axes [('idma.channels', (1, 2)), "),
    ({"axes": ((3, (1,)),)}, "sweep axes ((3, (1,)),): expected a tuple of (key, tuple of "),
    ({"model": None}, "model None: expected a HardwareModel"),
    ({"models": ("j6",)}, "sweep axes (('idma.channels', (1, 2)), "),
])
def test_a_sweep_built_in_python_is_refused_as_build_sweep_refuses_it(tmp_path, fields,
                                                                      message):
    """run_sweep ran a Sweep built in Python unchecked: an unknown key or a value out of range
    gave "0 failed" and a table without rows (the rows did not read back), a bad fidelity one
    error a point, an empty axis or no model a traceback, a grid without op ran one unnamed
    point. Each is build_sweep's own one line now, before anything is written."""
    from dspsim import load_model
    from dspsim.study.sweep import Sweep

    sweep = Sweep(**({"axes": _grid_with(), "model": load_model(), "fidelity": "tile"} | fields))
    with pytest.raises(DspsimInputError) as e:
        run_sweep(sweep, tmp_path / "t.csv")
    assert str(e.value).startswith(message) and "\n" not in str(e.value), e.value
    assert not list(tmp_path.iterdir())
