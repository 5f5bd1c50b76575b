"""``sweep --models A,B``: one table with a ``model`` column, entries checked as ``run --models``
checks them, resumable like any sweep."""

import csv
import json

import pytest

from dspsim.study.sweep import build_sweep, read_sweep, run_sweep
from tests.cli_helpers import one_line, run_cli

GRID = ["--n", "2048", "--variant", "pingpong,direct", "--param", "ddr.latency_cycles=100,200"]


def rows(path):
    return list(csv.DictReader(path.open()))


def sweep(capsys, out, models, *extra):
    return run_cli(capsys, "sweep", *GRID, "--models", models, "--out", out, *extra)


@pytest.fixture
def boards(tmp_path):
    """Two model files of one name in different folders, and one without a .toml suffix."""
    for folder, bw in (("a", 2.0), ("b", 3.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "fast.toml").write_text(
            f'base = "j6"\n[ddr]\nbytes_per_cycle = {bw}\n')
    (tmp_path / "a" / "board").write_text('base = "j6"\n[idma]\nchannels = 3\n')
    return tmp_path


def test_one_table_with_a_model_column_holding_each_models_own_rows(boards, capsys):
    """Before: one table per model named from the entry's text (a/fast.toml and b/fast.toml
    shared s.fast.csv)."""
    out = boards / "s.csv"
    a, b = boards / "a" / "fast.toml", boards / "b" / "fast.toml"
    code, stdout, err = sweep(capsys, out, f"j6,{a},{b}")
    assert code == 0, err
    table = rows(out)
    assert [r["model"] for r in table] == ["j6"] * 4 + [str(a)] * 4 + [str(b)] * 4
    assert sorted(p.name for p in boards.iterdir()) == ["a", "b", "s.csv", "s.csv.sweep.json"]
    for i, (label, model) in enumerate((("j6", "j6"), (str(a), a), (str(b), b))):
        alone = boards / f"alone_{i}.csv"  # as each model's own sweep
        assert run_cli(capsys, "sweep", *GRID, "--model", model, "--out", alone)[0] == 0
        mine = [{k: v for k, v in r.items() if k not in ("model", "wall_s")}
                for r in table if r["model"] == label]
        assert mine == [{k: v for k, v in r.items() if k != "wall_s"} for r in rows(alone)]
    df = read_sweep(out)
    assert list(df.columns[:3]) == ["model", "op", "variant"]


def test_entries_are_checked_as_run_checks_them(boards, capsys):
    """Before: a/board (no .toml suffix) and /dev/zero were tracebacks, j6,j6 was accepted."""
    out = boards / "s.csv"
    code, _, err = sweep(capsys, out, f"j6,{boards / 'a' / 'board'}")
    assert code == 0, err
    assert {r["model"] for r in rows(out)} == {"j6", "board"}
    for models, message in (("j6,j6", "given twice"),
                            (f"{boards}/a/fast.toml,{boards}/a/../a/fast.toml", "name one file"),
                            ("j6,/dev/zero", "not a regular file"),
                            ("j6,nosuch", "j6_outstanding_bound"),
                            (f"j6,{boards}/a/missing", "not found")):
        code, _, err = sweep(capsys, boards / "t.csv", models)
        assert code == 2 and one_line(err) and message in err, (models, err)
        assert not (boards / "t.csv").exists()
        code, _, run_err = run_cli(capsys, "run", "--no-data", "--n", "2048", "--models", models)
        assert code == 2 and run_err == err  # the same check, the same line


def test_a_resume_computes_only_what_is_missing_and_another_model_set_is_refused(boards,
                                                                                  capsys):
    out = boards / "s.csv"
    a, b = boards / "a" / "fast.toml", boards / "b" / "fast.toml"
    assert sweep(capsys, out, f"j6,{a},{b}")[0] == 0
    full = out.read_text()
    lines = full.splitlines(keepends=True)
    out.write_text("".join(lines[:-3]))  # as a kill left it
    code, stdout, err = sweep(capsys, out, f"j6,{a},{b}")
    assert code == 0 and "(3 computed, 9 already" in stdout, (stdout, err)
    assert [r["cycles"] for r in rows(out)] == [r["cycles"] for r in csv.DictReader(
        full.splitlines())]
    # b alone is another set of models: its label is no longer its path, but "fast"
    code, _, err = sweep(capsys, out, str(b))
    assert code == 2 and one_line(err) and "different sweep" in err, err


def test_adding_a_model_extends_the_table(boards, capsys):
    out = boards / "s.csv"
    a = boards / "a" / "fast.toml"
    assert sweep(capsys, out, "j6")[0] == 0
    code, stdout, err = sweep(capsys, out, f"j6,{a}")
    assert code == 0 and "(4 computed, 4 already" in stdout and "gains fast" in err, err
    assert [r["model"] for r in rows(out)] == ["j6"] * 4 + ["fast"] * 4


def test_models_of_different_channel_counts_resume_whole(boards, capsys):
    out = boards / "s.csv"
    board = boards / "a" / "board"
    assert sweep(capsys, out, f"j6,{board}")[0] == 0
    table = rows(out)
    assert all(r["idma2_busy_cycles"] != "" for r in table if r["model"] == "board")
    assert all(r["idma2_busy_cycles"] == "" for r in table if r["model"] == "j6")
    code, stdout, err = sweep(capsys, out, f"j6,{board}")
    assert code == 0 and "(0 computed, 8 already" in stdout and err == "", err


def test_a_sidecar_whose_models_do_not_match_is_damaged(boards, capsys):
    out = boards / "s.csv"
    a = boards / "a" / "fast.toml"
    assert sweep(capsys, out, f"j6,{a}")[0] == 0
    side = out.with_name(out.name + ".sweep.json")
    doc = json.loads(side.read_text())
    for damage in (lambda d: d["fixed_model"].pop("fast"),
                   lambda d: d.update(fixed_model=d["fixed_model"]["j6"]),
                   lambda d: d.update(model_source="j6"),
                   lambda d: d["fixed_model"]["fast"].pop("core.count")):
        broken = json.loads(json.dumps(doc))
        damage(broken)
        side.write_text(json.dumps(broken))
        code, _, err = sweep(capsys, out, f"j6,{a}")
        assert code == 2 and one_line(err) and "damaged" in err, err


def test_the_api_and_parquet(boards):
    pytest.importorskip("pyarrow")
    s = build_sweep({"ddr.latency_cycles": [100, 200]}, n=2048, variants=["pingpong"],
                    models=["j6", boards / "a" / "fast.toml"])
    assert s.keys[0] == "model" and s.size == 4
    out = boards / "s.parquet"
    assert run_sweep(s, out).computed == 4
    df = read_sweep(out)
    assert list(df["model"]) == ["j6", "j6", "fast", "fast"]
    assert run_sweep(s, out).computed == 0
    with pytest.raises(ValueError, match="--models"):
        build_sweep(["model=j6,x"], n=2048)
