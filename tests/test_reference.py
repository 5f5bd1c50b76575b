"""docs/reference.md, the file-format reference: its model-file section is written from the
schema (``dspsim keys --markdown``), and every other format's examples load with the commands'
own loaders and its field tables are what those loaders accept."""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from dspsim.config import model_key
from dspsim.reference import BEGIN, END, generated_block, model_file_reference
from dspsim.schema import OP_SCHEMAS
from dspsim.tables import HARDWARE, MEMORY_FIELDS
from tests.cli_helpers import run_cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def test_the_docs_page_holds_the_generated_reference():
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    kept = text[text.index(BEGIN):text.index(END) + len(END)]
    assert kept == generated_block(), (
        "docs/reference.md is out of date: paste `dspsim keys --markdown` between its markers")


def test_every_table_and_key_is_in_the_reference():
    ref = model_file_reference()
    for section, cls in HARDWARE.items():
        assert f"#### `[{section}]`" in ref
        for f in cls.__dataclass_fields__:
            assert f"| `{section}.{f}` |" in ref
    for f in MEMORY_FIELDS:
        assert f"| `<memory>.{f}` |" in ref
    for section, schema in OP_SCHEMAS.items():
        assert f"#### `[{section}]`" in ref
        for k in schema.keys:
            assert f"| `{k.name}` |" in ref


def test_a_key_without_a_default_is_marked_required():
    ref = model_file_reference()
    assert model_key("core.count").describe()["default"] is None
    assert "| `core.count` | cores | an integer >= 1, <= 4 | *required* |" in ref
    assert "| `host.memory` | - | a string | `\"ddr\"` |" in ref


def test_ranges_are_written_exactly():
    # an integer key's bound as the integer it is, not rounded to six digits
    assert model_key("tcm.bank_bytes").allowed() == "an integer >= 4, <= 1073741824"
    assert model_key("ddr.bytes_per_cycle").allowed() == "a number >= 1e-06, <= 10000"


def test_the_command_prints_it():
    out = subprocess.run([sys.executable, "-m", "dspsim", "keys", "--markdown"],
                         capture_output=True, text=True, check=True).stdout
    assert out == model_file_reference()


# ------------------------------------------------------------------ every other file format
# The page marks each complete example (`<!-- example: NAME -->` before a fenced block) and each
# field table (`<!-- fields: NAME -->` before a Markdown table). The tests below load every
# example with the loader the command uses and compare every table with what that loader
# accepts, both ways: a field the loader drops or gains, or an example it stops loading, fails.

_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```\w*\n(.*?)\n```", re.S)
_TABLE = re.compile(r"<!-- (?:fields|reads): ([\w-]+) -->\n((?:\|.*\n)+)")
EXAMPLES = {"measurements", "measured", "measured-csv", "sweep-spec", "workload", "input-npy",
            "input-npz", "saved-run", "sweep-command", "sweep-table", "op-file"}
TABLES = {"commands", "measurements-file", "measurements", "measured", "measured-csv",
          "sweep-spec", "workload-file", "workload", "input-npy", "input-npz", "saved-run",
          "saved-run-result", "saved-run-trace", "saved-run-port-log", "sweep-table",
          "sweep-sidecar", "op-file", "op-file-op", "op-file-array", "op-file-pass",
          "op-file-loop", "op-file-schedules", "op-file-reference"}


def _page() -> str:
    return DOC.read_text(encoding="utf-8")


def example(name: str) -> str:
    found = [text for n, text in _EXAMPLE.findall(_page()) if n == name]
    assert len(found) == 1, f"docs/reference.md: example {name!r} appears {len(found)} times"
    return found[0] + "\n"


def rows(name: str) -> list[list[str]]:
    """The cells of the table marked ``name``, its header and separator left out."""
    found = [t for n, t in _TABLE.findall(_page()) if n == name]
    assert len(found) == 1, f"docs/reference.md: table {name!r} appears {len(found)} times"
    lines = found[0].strip().splitlines()[2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def names(name: str) -> list[str]:
    """The first column of the table marked ``name``, without its backticks."""
    return [r[0].strip("`") for r in rows(name)]


def test_every_example_and_table_is_on_the_page_once():
    page = _page()
    assert {n for n, _ in _EXAMPLE.findall(page)} == EXAMPLES
    assert page.count("<!-- example: ") == len(EXAMPLES)  # none without its fenced block
    assert {n for n, _ in _TABLE.findall(page)} == TABLES
    for name in EXAMPLES:
        example(name)
    for name in TABLES:
        assert rows(name), name


def test_the_contents_link_every_section():
    page = _page()
    sections = re.findall(r"^## (.+)$", page, re.M)
    contents = page[:page.index("\n## ")]
    for title in sections:
        anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        assert f"(#{anchor})" in contents, f"the contents do not link {title!r}"


@contextlib.contextmanager
def op_file_example(where: Path):
    """The page's op file example as ``relu_norm.toml`` in ``where``, its op loaded while
    the block runs (what the measurements and workload examples name)."""
    from dspsim.ops.fileop import unload_op_file

    path = where / "relu_norm.toml"
    path.write_text(example("op-file"), encoding="utf-8")
    try:
        yield path
    finally:
        unload_op_file(path)


def _required(name: str, column: int) -> set[str]:
    return {r[0].strip("`") for r in rows(name) if "*required*" in r[column]}


# ------------------------------------------------------------------ measurements files
def test_the_measurements_example_loads_and_uses_every_field(tmp_path):
    from dspsim.config import load_model
    from dspsim.study import validate

    f = tmp_path / "mine.toml"
    f.write_text(example("measurements"), encoding="utf-8")
    with op_file_example(tmp_path):
        got = validate.read_measurements(f)
    assert [(m.op, m.variant, m.shape, m.cycles) for m in got] == [
        ("softmax", "pingpong", (50000,), 2600000), ("layernorm", "direct", (1024, 256), 1234567),
        ("relu_norm", "pingpong", (65536,), 1400000)]
    assert got[0].settings == {"softmax.tile_bytes": 8192} and got[1].platform == "j6"
    for m in got:
        load_model(m.platform)  # a platform the page's example names exists
    raw = tomllib.loads(example("measurements"))
    used = {k for entry in raw["measurement"] for k in entry}
    assert set(raw) <= set(names("measurements-file"))
    assert used == set(names("measurements")), "the example leaves a field out"


def test_the_measurements_tables_are_the_loaders_fields():
    from dspsim.ops import default_op
    from dspsim.study import validate

    assert names("measurements") == list(validate._FIELDS)
    assert set(names("measurements-file")) == set(validate._FILE_FIELDS)
    role = next(r for r in rows("measurements") if r[0] == "`role`")
    assert role[3] == " or ".join(f'`"{r}"`' for r in validate.ROLES)
    assert f"within {validate.CALIBRATION_TOLERANCE_PCT:g} %" in role[5]
    op = next(r for r in rows("measurements") if r[0] == "`op`")
    assert op[4] == f'`"{default_op()}"`'


def test_a_field_the_page_does_not_list_is_refused(tmp_path):
    from dspsim.errors import DspsimInputError
    from dspsim.study import validate

    f = tmp_path / "extra.toml"
    f.write_text(example("measurements").replace('role = "check"\n', 'role = "check"\nboard = 3\n',
                                                 1), encoding="utf-8")
    with pytest.raises(DspsimInputError, match="unknown field 'board'"):
        validate.read_measurements(f)


# ------------------------------------------------------------------ calibrate's measurements
SYNTAX = "[OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE ...]=CYCLES"


def test_every_measured_example_parses():
    from dspsim.study.calibrate import measure

    lines = example("measured").split()
    got = [measure.parse_measurement(line) for line in lines]
    assert [(m.op, m.variant, m.shape, m.cycles) for m in got] == [
        ("softmax", "pingpong", (100000,), 5154293), ("softmax", "direct", (100000,), 7648254),
        ("softmax", "direct", (50000,), 3900000), ("softmax", "pingpong", (50000,), 2600000),
        ("layernorm", "pingpong", (1024, 256), 1234567), ("copy", "idma", (65536,), 170000)]
    assert got[3].settings == {"softmax.tile_bytes": 8192}
    assert got[5].settings == {"copy.src": "ddr", "copy.dst": "tcm"}


def test_the_measured_syntax_is_the_commands():
    from dspsim.cli.calibrate import CLI_DESCRIPTION
    from dspsim.study.calibrate import measure

    assert f"    {SYNTAX}\n" in _page()
    assert SYNTAX in measure.__doc__ and SYNTAX in CLI_DESCRIPTION
    for field in names("measured"):  # each field the table explains is in the syntax
        assert field in SYNTAX
    assert {"VARIANT", "CYCLES"} == _required("measured", 4)
    assert rows("measured")[0][4] == f"`{measure.DEFAULT_OP}`"


def test_a_validate_measurement_is_a_calibrate_measurement(tmp_path):
    """``validate --json`` gives each measurement's ``spec`` in the --measured syntax."""
    from dspsim.study import validate
    from dspsim.study.calibrate import measure

    f = tmp_path / "mine.toml"
    f.write_text(example("measurements"), encoding="utf-8")
    with op_file_example(tmp_path):
        for m in validate.read_measurements(f):
            back = measure.parse_measurement(m.spec())
            assert (back.op, back.variant, back.shape, back.cycles, back.settings) == (
                m.op, m.variant, m.shape, m.cycles, m.settings)


def test_the_measured_csv_example_loads_and_its_columns_are_the_loaders(tmp_path):
    from dspsim.study.calibrate import measure

    f = tmp_path / "m.csv"
    f.write_text(example("measured-csv"), encoding="utf-8")
    got = measure.read_measurements_csv(f)
    assert [(m.op, m.variant, m.shape, m.cycles, m.settings) for m in got] == [
        ("softmax", "pingpong", (100000,), 5154293, {}),
        ("softmax", "direct", (100000,), 7648254, {}),
        ("softmax", "pingpong", (50000,), 2600000, {"softmax.tile_bytes": 8192}),
        ("layernorm", "pingpong", (1024, 256), 1234567, {})]
    documented = names("measured-csv")
    assert documented[-1] == "<model key>"
    assert set(documented[:-1]) == set(measure._CSV_FIELDS)


# ------------------------------------------------------------------ sweep spec files
def test_the_sweep_spec_example_loads_into_the_grid_the_page_counts(tmp_path):
    from dspsim.study.sweep import build_sweep
    from dspsim.study.sweep.spec import load_spec

    f = tmp_path / "sweep.toml"
    f.write_text(example("sweep-spec"), encoding="utf-8")
    spec = load_spec(f)
    assert spec["overrides"] == {"idma.burst_bytes": 128}
    assert list(spec["params"]) == ["ddr.latency_cycles", "idma.max_outstanding",
                                    "softmax.tile_bytes"]
    sweep = build_sweep([], spec=f)
    points = math.prod(len(values) for _, values in sweep.axes)
    assert points == 144 and "runs its 2 x 4 x 3 x 3 x 2 = 144 points" in _page()
    assert set(tomllib.loads(example("sweep-spec"))) <= set(names("sweep-spec"))


def test_the_sweep_spec_table_is_what_the_loader_allows(tmp_path):
    from dspsim.errors import DspsimInputError
    from dspsim.study.sweep.spec import load_spec

    f = tmp_path / "bad.toml"
    f.write_text("unheard_of = 1\n", encoding="utf-8")
    with pytest.raises(DspsimInputError) as e:
        load_spec(f)
    allowed = str(e.value).rpartition("allowed: ")[2].split(", ")
    assert sorted(allowed) == sorted(names("sweep-spec"))


# ------------------------------------------------------------------ workload files
def test_the_workload_example_loads_and_runs_on_j6(tmp_path):
    from dspsim.config import load_model
    from dspsim.study.workload.spec import check_workload, load_workload

    f = tmp_path / "w.toml"
    f.write_text(example("workload"), encoding="utf-8")
    with op_file_example(tmp_path):
        w = load_workload(f)
        check_workload(w, load_model("j6"))
    assert w.seed == 1 and [s.name for s in w.streams] == ["cam_softmax", "hp_layernorm",
                                                           "my_kernel"]
    assert w.streams[1].shape == (1024, 256) and w.streams[1].core == 0
    raw = tomllib.loads(example("workload"))
    assert set(raw) == set(names("workload-file"))
    used = {k for s in raw["stream"] for k in s}
    assert used == set(names("workload")), "the example leaves a key out"


def test_the_workload_tables_are_the_loaders_keys():
    from dspsim.study.workload import spec

    assert set(names("workload-file")) == set(spec.TOP_KEYS)
    assert set(names("workload")) == set(spec.REQUIRED + spec.OPTIONAL)
    assert _required("workload", 4) == set(spec.REQUIRED)


# ------------------------------------------------------------------ input arrays
def _run_example(name: str, tmp_path, monkeypatch) -> None:
    """The page's Python example, run in ``tmp_path`` (it writes its files there)."""
    monkeypatch.chdir(tmp_path)
    exec(compile(example(name), f"docs/reference.md example {name}", "exec"), {})


def _dims(cell: str) -> set[int]:
    return {s.count(",") + 1 for s in re.findall(r"`\[[^\]]*\]`", cell)}


def test_the_npy_example_loads_for_the_ops_the_page_names(tmp_path, monkeypatch):
    from dspsim.ops import get_op, op_names

    _run_example("input-npy", tmp_path, monkeypatch)
    table = {r[0].strip("`"): r for r in rows("input-npy")}
    assert set(table) == set(op_names())
    for op, row in table.items():
        if ".npy" not in row[1]:
            continue
        assert _dims(row[2]) == set(get_op(op).input_dims), op
        for f in ("x.npy", "rows.npy"):
            if np.load(f).ndim in _dims(row[2]):
                x, _ = get_op(op).check_input(get_op(op).read_input_file(f))
                assert x.size > 0
    x = get_op("copy").check_input(get_op("copy").read_input_file("x.npy"))
    assert x[1] == (400_000,)  # the page: n = 4 k bytes


def test_the_npz_example_loads_and_its_arrays_are_the_ops(tmp_path, monkeypatch):
    from dspsim.ops import get_op
    from dspsim.ops.fc.reference import ARRAYS

    _run_example("input-npz", tmp_path, monkeypatch)
    values = get_op("fc").read_input_file("fc.npz")
    _, shape = get_op("fc").check_input(values)
    assert shape == (512, 768)
    documented = {r[0].strip("`"): (r[1], r[2].count(",") + 1) for r in rows("input-npz")}
    assert documented == {k: (np.dtype(t).name, nd) for k, (t, nd) in ARRAYS.items()}
    assert {k: v.dtype.name for k, v in values.items()} == {k: v[0] for k, v in
                                                           documented.items()}


# ------------------------------------------------------------------ saved runs
def _commands(name: str) -> list[list[str]]:
    return [line.split()[1:] for line in example(name).splitlines() if line.startswith("dspsim ")]


def test_the_saved_run_example_runs_and_its_fields_are_the_files(tmp_path, monkeypatch, capsys):
    import gzip
    import json

    from dspsim import results
    from dspsim.probes import COLUMNS, PORT_LOG_FIELDS
    from dspsim.results_check import DOCUMENT_KEYS
    from dspsim.run import JSON_FIELDS

    monkeypatch.chdir(tmp_path)
    run, report = _commands("saved-run")
    saved = run[run.index("--save") + 1]
    assert run[0] == "run" and report == ["report", saved]
    assert run_cli(capsys, *run)[0] == 0
    code, out, _ = run_cli(capsys, *report)
    assert code == 0 and "softmax pingpong on core0" in out
    r = results.load_run(saved)
    assert r.op == "softmax" and r.shape == (4096,)
    doc = json.loads(gzip.open(saved).read())
    assert set(names("saved-run")) == DOCUMENT_KEYS and set(doc) <= DOCUMENT_KEYS
    assert names("saved-run-result") == list(JSON_FIELDS) == list(doc["result"])
    assert names("saved-run-trace") == list(COLUMNS) == list(doc["trace"])
    assert names("saved-run-port-log") == list(PORT_LOG_FIELDS) == list(doc["port_log"])
    version = next(row for row in rows("saved-run") if row[0] == "`format_version`")[2]
    readable = " and ".join(map(str, results.READABLE_VERSIONS))
    assert version == f"`{results.FORMAT_VERSION}` (this dspsim reads {readable})"
    assert doc["format_version"] == results.FORMAT_VERSION
    code, out, _ = run_cli(capsys, "run", "--n", "256", "--json")  # the same fields and two
    assert code == 0 and set(json.loads(out)) - set(doc["result"]) == {"bounds", "stalls"}
    assert "but its `bounds` and `stalls`" in _page()


# ------------------------------------------------------------------ sweep tables and sidecars
def _column_kind(column: str, memories: list[str]) -> str:
    """A result column as the page names its family: ``ddr_read_bytes`` is
    ``<memory>_read_bytes``, ``idma1_busy_cycles`` is ``idma<k>_busy_cycles``."""
    from dspsim.study.sweep.grid import MEMORY_COLUMNS

    if re.fullmatch(r"idma[0-9]+_busy_cycles", column):
        return "idma<k>_busy_cycles"
    for m in memories:
        if column.startswith(m + "_") and column[len(m) + 1:] in MEMORY_COLUMNS:
            return "<memory>_" + column[len(m) + 1:]
    return column


def _check_columns(header: list[str], memories: list[str]) -> None:
    from dspsim.config import all_keys

    documented = names("sweep-table")
    cut = documented.index("cycles")
    params, results = header[:header.index("cycles")], header[header.index("cycles"):]
    for c in params:
        assert c in documented[:cut] or (c in all_keys() and "<key>" in documented[:cut]), c
    kinds = list(dict.fromkeys(_column_kind(c, memories) for c in results))
    assert kinds == documented[cut:]


def test_the_sweep_example_is_what_the_command_writes(tmp_path, monkeypatch, capsys):
    import json

    from dspsim.study.sweep.sidecar import SIDECAR_KEYS
    from dspsim.study.sweep.table import read_sweep

    monkeypatch.chdir(tmp_path)
    (argv,) = _commands("sweep-command")
    out = argv[argv.index("--out") + 1]
    assert run_cli(capsys, *argv)[0] == 0
    written = [line.split(",") for line in open(out, encoding="utf-8").read().splitlines()]
    page = [line.split(",") for line in example("sweep-table").splitlines()]
    wall = written[0].index("wall_s")
    assert [r[:wall] + r[wall + 1:] for r in written] == [r[:wall] + r[wall + 1:] for r in page]
    _check_columns(written[0], ["ddr"])
    side = json.loads(open(out + ".sweep.json", encoding="utf-8").read())
    assert names("sweep-sidecar") == list(SIDECAR_KEYS) and set(side) == set(SIDECAR_KEYS)
    (tmp_path / "page.csv").write_text(example("sweep-table"), encoding="utf-8")
    df = read_sweep(tmp_path / "page.csv")  # the page's table reads back as dspsim's own
    assert list(df.columns) == page[0] and len(df) == len(page) - 1


def test_the_table_columns_on_a_platform_of_two_memories(tmp_path, capsys):
    from dspsim.study.sweep.grid import MODEL_KEY
    from dspsim.study.sweep.values import SPECIAL_KEYS

    out = tmp_path / "h.csv"
    code, _, err = run_cli(capsys, "sweep", "--model", "ameba_hifi5", "--op", "softmax",
                           "--variant", "direct", "--n", "1024", "--out", out)
    assert code == 0, err
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert "psram_read_bytes" in header and "sram_stall_cycles" in header
    _check_columns(header, ["psram", "sram"])
    documented = names("sweep-table")
    assert set(documented[:documented.index("cycles")]) == {MODEL_KEY, *SPECIAL_KEYS, "<key>"}


# ------------------------------------------------------------------ which command reads what
# options that name a file the command writes; every other file-like option is read
_WRITTEN = {"out", "output", "save", "timeline", "trace", "tiles"}
_FILE_LIKE = re.compile(r"FILE|PATH|RESULT|\.(toml|npy|npz|csv|json|parquet)|A,B")


def _options(parser: argparse.ArgumentParser, command: str = ""):
    """(command, option or metavar, metavar, dest) of every argument of every subcommand."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _options(sub, f"{command} {name}".strip())
        elif a.option_strings:
            yield command, a.option_strings[0], str(a.metavar or ""), a.dest
        elif a.dest != "help":
            yield command, str(a.metavar or a.dest), str(a.metavar or ""), a.dest


def _reads_on_page() -> set[tuple[str, str]]:
    out = set()
    for cells in rows("commands"):
        for command in re.findall(r"`([^`]+)`", cells[0]):
            out.add((command, cells[1].strip("`")))
    return out


def test_every_file_a_command_reads_is_listed():
    from dspsim.cli import build_parser

    options = list(_options(build_parser()))
    reads = {(c, o) for c, o, metavar, dest in options
             if (_FILE_LIKE.search(metavar) and dest not in _WRITTEN) or o == "--measured"}
    reads.add(("sweep", "--out"))  # the table a rerun resumes
    listed = _reads_on_page()
    assert reads - listed == set(), "a command reads a file the page does not list"
    assert listed - {(c, o) for c, o, _, _ in options} == set(), "the page lists no such option"


def test_an_op_the_page_gives_no_input_file_refuses_one(tmp_path, monkeypatch, capsys):
    from dspsim.config import load_model
    from dspsim.errors import DspsimInputError
    from dspsim.ops import get_op
    from dspsim.run import simulate

    _run_example("input-npy", tmp_path, monkeypatch)
    none = [r[0].strip("`") for r in rows("input-npy") if r[1] == "none"]
    assert none == ["kernel"]
    for op in none:
        code, _, err = run_cli(capsys, "run", "--op", op, "--input", "x.npy")
        assert code == 2 and err.count("\n") == 1 and "takes no input" in err, err
        with pytest.raises(DspsimInputError, match="takes no input"):
            get_op(op).read_input_file("x.npy")
        with pytest.raises(DspsimInputError, match="takes no input"):
            simulate(load_model("j6"), op, x=np.load("x.npy"))


def test_the_reference_names_the_memory_names_a_model_may_not_take():
    from dspsim.model_rules import RESERVED_MEMORY_WORDS

    ref = " ".join(model_file_reference().split())
    assert f"not one of the names the engines and a run's report use ({RESERVED_MEMORY_WORDS})" \
        in ref
