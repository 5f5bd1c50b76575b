"""``dspsim optimize``: the op's search space, screening, the burst re-runs and their ranking,
the worst case over model files, the JSON and CSV contracts, and one-line input errors."""

import csv
import json

import pytest

from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.run import simulate
from dspsim.study.optimize import RERUN_FIDELITY, SCREEN_FIDELITY, optimize
from tests.cli_helpers import run_cli

N = 4096  # small: every candidate runs in milliseconds
SOFTMAX = get_op("softmax")


@pytest.fixture(scope="module")
def result():
    return optimize("softmax", n=N, top=4, progress=False)


def burst_cycles(model, variant, params, n=N):
    m = model.with_overrides(dict(params)) if params else model
    return simulate(m, "softmax", variant, n=n, data=False, fidelity="burst").cycles


# ------------------------------------------------------------------------ the search space
def test_the_op_decides_the_search_space(j6):
    shape = (100_000,)
    free = j6.tcm.bank_bytes - j6.tcm.reserved_bytes
    assert SOFTMAX.search_space(j6, "direct", shape) == {}
    for v in ("pingpong", "online", "resident", "rows", "multibuffer"):
        tiles = SOFTMAX.search_space(j6, v, shape)["softmax.tile_bytes"]
        assert tiles[0] == 1024 and tiles == sorted(tiles) and j6.softmax.tile_bytes in tiles
        assert all(t & (t - 1) == 0 for t in tiles)  # powers of two (the default is one)
        assert tiles[-1] <= free < 2 * tiles[-1]  # up to what fits the free space
    mb = SOFTMAX.search_space(j6, "multibuffer", shape)
    assert mb["softmax.buffers"] == [2, 3, 4]
    # an odd default tile joins the powers of two
    odd = j6.with_overrides({"softmax.tile_bytes": 12288})
    assert 12288 in SOFTMAX.search_space(odd, "online", shape)["softmax.tile_bytes"]
    ln = get_op("layernorm")
    assert ln.search_space(j6, "direct", (64, 768)) == {}
    tiles = ln.search_space(j6, "pingpong", (64, 768))["layernorm.tile_bytes"]
    assert min(tiles) == 4 * 768 and all(4 * 768 <= t <= free for t in tiles)
    assert 1024 not in tiles and 2048 not in tiles  # they hold no row


def test_a_variant_with_an_empty_space_runs_once_at_defaults():
    r = optimize("softmax", n=N, variants=["direct"], check_numerics=False, progress=False)
    assert len(r.screened) == 1 and r.refused == 0
    assert r.best.variant == "direct" and r.best.params == {}
    assert r.best.cycles == burst_cycles(load_model(), "direct", {})


def test_optimize_searches_what_the_op_returns(monkeypatch):
    calls = []

    def space(self, model, variant, shape):
        calls.append(variant)
        return {"softmax.tile_bytes": [4096, 8192]} if variant == "online" else {}

    monkeypatch.setattr(type(SOFTMAX), "search_space", space)
    r = optimize("softmax", n=N, variants="online,direct", top=10, check_numerics=False,
                 progress=False)
    assert calls == ["online", "direct"]
    got = sorted((c.variant, tuple(c.params.items())) for c in r.screened)
    assert got == [("direct", ()), ("online", (("softmax.tile_bytes", 4096),)),
                   ("online", (("softmax.tile_bytes", 8192),))]


def test_param_replaces_an_axis_and_adds_hardware_axes():
    r = optimize("softmax", n=N, variants="online,direct",
                 params=["softmax.tile_bytes=8192", "idma.max_outstanding=8,32"], top=10,
                 check_numerics=False, progress=False)
    got = sorted((c.variant, tuple(sorted(c.params.items()))) for c in r.screened)
    assert got == [  # direct uses no iDMA channel: one run, not two that differ in nothing
        ("direct", ()),
        ("online", (("idma.max_outstanding", 8), ("softmax.tile_bytes", 8192))),
        ("online", (("idma.max_outstanding", 32), ("softmax.tile_bytes", 8192))),
    ]


def test_refused_combinations_are_skipped_and_counted():
    # two tiles of 128 KiB do not fit one DataRAM's free space: 3 and 4 buffers are refused
    r = optimize("softmax", n=N, variants=["multibuffer"],
                 params={"softmax.tile_bytes": [131072]}, check_numerics=False, progress=False)
    assert r.refused == 2 and len(r.screened) == 1
    assert r.best.params == {"softmax.buffers": 2, "softmax.tile_bytes": 131072}
    assert "multibuffer" in r.refusals[0]
    with pytest.raises(DspsimInputError, match="no candidate left"):
        optimize("softmax", n=N, variants=["multibuffer"],
                 params={"softmax.tile_bytes": [131072], "softmax.buffers": [3, 4]},
                 progress=False)


# ---------------------------------------------------------------------------- the ranking
def test_ranked_by_cycles_against_the_default_variant(result, j6):
    cands = result.candidates
    assert [c.rank for c in cands] == [1, 2, 3, 4]
    assert all(c.fidelity == RERUN_FIDELITY for c in cands)
    assert all(c.fidelity == SCREEN_FIDELITY for c in result.screened)
    assert [c.sort_key() for c in cands] == sorted(c.sort_key() for c in cands)
    assert not any(c.flagged for c in cands)
    cycles = [c.cycles for c in cands]
    assert cycles == sorted(cycles) and result.best.cycles == min(cycles)
    # the re-runs are burst runs: the same as simulating each candidate directly
    for c in cands:
        assert c.cycles == burst_cycles(j6, c.variant, c.params)
    # the screening kept the best: no clean candidate screened faster than the winner
    assert result.best.cycles <= min(c.cycles for c in result.screened if not c.flagged)
    # the baseline is the op's default variant at the model's values
    assert SOFTMAX.default_variant == "pingpong"
    assert result.baseline.variant == SOFTMAX.default_variant and result.baseline.params == {}
    assert result.baseline.cycles == burst_cycles(j6, "pingpong", {})
    for c in cands:
        assert c.speedup == result.baseline.cycles / c.cycles
    assert result.best.speedup > 1.0  # the seed's ping-pong is beaten at this size


def test_the_best_never_beats_its_lower_bound(result, j6):
    for c in result.candidates:
        m = j6.with_overrides(dict(c.params)) if c.params else j6
        bound = SOFTMAX.bounds(m, c.variant, (N,))["lower_bound_cycles"]
        assert c.lower_bound_cycles == pytest.approx(bound)
        assert c.cycles >= c.lower_bound_cycles and c.gap_pct >= 0.0


def test_the_winner_is_checked_with_the_data_path_on(result):
    assert result.numerics is not None and result.numerics["cycles_match"]
    assert result.numerics["max_rel_err"] < 1e-5


def test_a_run_whose_warnings_change_its_result_ranks_last():
    # at 128 KiB tiles the seed's timer stops before the last write-back ends: fewer cycles
    # than the work takes (unwaited_copy); it must not win
    r = optimize("softmax", n=100_000, variants=["pingpong"],
                 params={"softmax.tile_bytes": [32768, 131072]}, check_numerics=False,
                 progress=False)
    fast, honest = r.candidates[1], r.candidates[0]
    assert fast.params["softmax.tile_bytes"] == 131072 and "unwaited_copy" in fast.warnings
    assert fast.cycles < honest.cycles and not honest.flagged
    assert r.best is honest


def test_models_rank_by_the_worst_case(tmp_path):
    slow, fast = tmp_path / "slow.toml", tmp_path / "fast.toml"
    slow.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 0.2\n')
    fast.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 4.0\n')
    labels = [str(slow), str(fast)]
    r = optimize("softmax", n=N, variants="pingpong,online,resident", models=labels, top=6,
                 check_numerics=False, progress=False)
    assert list(r.models) == labels
    models = {p: load_model(p) for p in labels}
    for c in r.candidates:
        assert set(c.cycles_by_model) == set(labels)
        for p in labels:  # each model's cycles are that model's burst run
            assert c.cycles_by_model[p] == burst_cycles(models[p], c.variant, c.params)
        assert c.cycles == max(c.cycles_by_model.values())
        assert c.cycles_by_model[str(slow)] > c.cycles_by_model[str(fast)]
        assert c.worst_model == str(slow)
    worst = [c.cycles for c in r.candidates]
    assert worst == sorted(worst)
    assert r.baseline.cycles == max(burst_cycles(m, "pingpong", {}) for m in models.values())
    assert r.best.speedup == r.baseline.cycles / r.best.cycles
    # the same ranking as the slower model's alone: it is every candidate's worst case
    alone = optimize("softmax", n=N, variants="pingpong,online,resident", models=[str(slow)],
                     top=6, check_numerics=False, progress=False)
    assert [(c.variant, c.params) for c in alone.candidates] == [
        (c.variant, c.params) for c in r.candidates]


def test_the_worst_case_model_can_differ_between_candidates(tmp_path):
    # a narrow port, and a wide one with a long round trip: the direct version (a round trip
    # per vector load) is worst on the second, the TCM schedules on the first
    narrow, far = tmp_path / "narrow.toml", tmp_path / "far.toml"
    narrow.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 0.25\n')
    far.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 4.0\nlatency_cycles = 3000\n')
    r = optimize("softmax", n=N, variants="pingpong,direct,resident",
                 params={"softmax.tile_bytes": [1024, 16384]}, models=[narrow, far], top=10,
                 check_numerics=False, progress=False)
    assert len(r.candidates) == 5
    worst = {c.variant: c.worst_model for c in r.candidates}
    assert worst == {"pingpong": str(narrow), "resident": str(narrow), "direct": str(far)}
    for c in r.candidates:
        assert c.cycles == c.cycles_by_model[c.worst_model] == max(c.cycles_by_model.values())
    assert [c.cycles for c in r.candidates] == sorted(c.cycles for c in r.candidates)
    # ranked by the far model alone, the order would differ (larger tiles first)
    alone = sorted(r.candidates, key=lambda c: c.cycles_by_model[str(far)])
    assert alone != r.candidates


# ------------------------------------------------------------------------ the command line
def test_json_has_the_contracted_fields(capsys, tmp_path):
    out_csv = tmp_path / "ranked.csv"
    code, out, err = run_cli(capsys, "optimize", "--n", str(N), "--variants", "online,direct",
                             "--top", "3", "--json", "--out", str(out_csv))
    assert code == 0, err
    obj = json.loads(out)
    assert {"variant", "cycles"} <= set(obj["baseline"])
    assert obj["baseline"]["variant"] == "pingpong"
    assert {"variant", "params", "cycles", "lower_bound_cycles", "speedup"} <= set(obj["best"])
    assert obj["best"]["speedup"] == pytest.approx(
        obj["baseline"]["cycles"] / obj["best"]["cycles"])
    assert obj["best"]["max_rel_err"] is not None
    cands = obj["candidates"]
    assert len(cands) == 3 and cands[0]["variant"] == obj["best"]["variant"]
    assert [c["cycles"] for c in cands] == sorted(c["cycles"] for c in cands)
    for c in cands:
        assert {"variant", "params", "cycles", "cycles_by_model", "speedup", "ddr_read_bytes",
                "ddr_write_bytes", "lower_bound_cycles", "gap_pct", "core_busy_pct",
                "warnings", "hazards"} <= set(c)
    rows = list(csv.DictReader(out_csv.open()))
    # every screened candidate, ranked: the three re-runs first
    assert len(rows) == obj["screened"] == len(obj["ranking"]) > 3
    assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
    assert [int(r["cycles"]) for r in rows[:3]] == [c["cycles"] for c in cands]
    assert "softmax.tile_bytes" in rows[0] and "wall_s" not in rows[0]
    assert not list(tmp_path.glob("*.tmp"))  # written atomically: no temporary file left


def test_models_in_json(capsys, tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 0.3\n')
    b.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 0.5\n')
    code, out, err = run_cli(capsys, "optimize", "--n", "2048", "--variants", "online",
                             "--models", f"{a},{b}", "--top", "2", "--json", "--no-check")
    assert code == 0, err
    obj = json.loads(out)
    for c in obj["candidates"]:
        assert set(c["cycles_by_model"]) == {str(a), str(b)}
        assert c["cycles"] == max(c["cycles_by_model"].values())
    code, out, _ = run_cli(capsys, "optimize", "--n", "2048", "--variants", "online",
                           "--models", f"{a},{b}", "--top", "2", "--no-check")
    assert code == 0 and "a.toml" in out and "b.toml" in out and "worst case" in out


def test_table_output(capsys):
    code, out, _ = run_cli(capsys, "optimize", "--n", str(N), "--top", "2")
    assert code == 0
    assert "baseline: pingpong" in out and "best:" in out and "speedup" in out
    assert "max relative error" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--op", "nosuchop"], "unknown op"),
        (["--variants", "nosuch"], "no variant"),
        (["--param", "nosuch.key=1"], "nosuch.key"),
        (["--param", "softmax.buffers=9"], "softmax.buffers"),
        (["--param", "layernorm.tile_bytes=4096"], "layernorm"),
        # a key that acts in none of the variants searched (it multiplied identical runs)
        (["--variants", "online", "--param", "softmax.max_init=zero,-inf"],
         "softmax.max_init does nothing in softmax online: it acts in softmax pingpong"),
        (["--variants", "direct", "--set", "idma.max_outstanding=8"],
         "idma.max_outstanding does nothing in softmax direct"),
        (["--set", "layernorm.eps=0.5"], "it is a key of layernorm"),
        (["--param", "variant=online"], "--variants"),
        (["--variants", "multibuffer", "--param", "softmax.tile_bytes=131072",
          "--param", "softmax.buffers=3,4"], "no candidate left"),
        (["--models", "nosuch_model.toml"], "nosuch_model.toml"),
        (["--models", "j6", "--model", "j6"], "--models"),
        (["--top", "0"], "--top"),
        (["--shape", "2,3,4"], "shape"),
        (["--out", "ranked.txt"], "extension"),
        (["--param", "softmax.tile_bytes=4096,7"], "multiple of 4"),  # the key's own rule
        (["--jobs", "100000"], "1 to 256"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, "optimize", "--n", "1024", "--no-check", *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err


# ------------------------------------------------------------------ the whole ranking kept
def test_out_and_json_keep_every_screened_candidate_ranked(capsys, tmp_path):
    """Before: --out and --json kept only the --top re-runs (5) of the screened candidates."""
    out_csv = tmp_path / "all.csv"
    code, out, err = run_cli(capsys, "optimize", "--n", str(N), "--top", "2", "--json",
                             "--no-check", "--out", out_csv)
    assert code == 0, err
    obj = json.loads(out)
    ranking = obj["ranking"]
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == len(ranking) == obj["screened"] > 2
    assert [r["rank"] for r in ranking] == list(range(1, len(ranking) + 1))
    assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
    # the re-runs at burst fidelity first, as "candidates" has them ...
    assert [r["fidelity"] for r in rows[:2]] == [RERUN_FIDELITY] * 2
    assert [(r["variant"], r["cycles"]) for r in ranking[:2]] == [
        (c["variant"], c["cycles"]) for c in obj["candidates"]]
    # ... then the others at the screen's fidelity, in the screen's order
    rest = ranking[2:]
    assert all(r["fidelity"] == SCREEN_FIDELITY for r in rest)
    assert [r["screen_rank"] for r in rest] == sorted(r["screen_rank"] for r in rest)
    assert all(r["cycles"] == r["screen_cycles"] for r in rest)
    # every screened candidate once
    assert sorted(r["screen_rank"] for r in ranking) == list(range(1, len(ranking) + 1))
    assert [int(r["screen_cycles"]) for r in rows] == [r["screen_cycles"] for r in ranking]


def test_the_result_ranks_every_screened_candidate(result):
    ranked = result.ranking()
    assert len(ranked) == len(result.screened)
    assert [c for c, _ in ranked[:len(result.candidates)]] == result.candidates
    assert {c.identity() for c, _ in ranked} == {c.identity() for c in result.screened}


# ------------------------------------------------------------------ counted before built
def test_a_huge_search_is_refused_before_its_values_are_built(capsys, monkeypatch):
    """Before: two --param axes of 10^6 values ran 125 s and reached 4 GB before "out of
    memory"; the search is counted from the texts and refused before a value is built."""
    import dspsim.study.optimize as opt

    def refuse(*a, **k):
        raise AssertionError("values built before the search was counted")

    monkeypatch.setattr(opt, "parse_values", refuse)
    code, out, err = run_cli(capsys, "optimize", "--n", "1024", "--param",
                             "ddr.latency_cycles=1:1000000:1", "--param",
                             "idma.setup_cycles=1:1000000:1")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "6,000,000,000,000" in err and "at most 100,000" in err  # six variants


def test_the_op_search_times_the_axes_is_counted_before_it_is_built(monkeypatch):
    """The op's own axes (tile sizes, buffer counts) multiply the --param axes: counted
    exactly, before any candidate is made."""
    import dspsim.study.optimize as opt

    made = []
    real = opt.Candidate

    def spy(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(opt, "Candidate", spy)
    with pytest.raises(DspsimInputError, match="at most 100,000"):
        optimize("softmax", n=N, variants="online",
                 params=["ddr.latency_cycles=1:60000:1"], progress=False)
    assert made == []


@pytest.mark.parametrize("op, said", [("copy", "the output equals the reference bit for bit (0 "),
                                      ("kernel", "no output checked (zeros: a timing")])
def test_the_winners_check_says_what_was_compared(capsys, op, said):
    """Before: copy's and fc's winners, checked bit for bit, and a kernel's, checked not at all,
    all printed "max relative error n/a against the float64 reference"."""
    # (a kernel's variants are different kernels: one at a time)
    one = ["--variants", "memcpy"] if op == "kernel" else []
    code, out, err = run_cli(capsys, "optimize", "--op", op, "--top", "1", *one)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("numerics"))
    assert said in line and "n/a" not in line


def test_the_tables_columns_name_their_units_as_the_docs_show_them(capsys):
    """Before: a column "lower_bound" of cycles beside ddr_bytes and core_busy_%."""
    from pathlib import Path

    code, out, err = run_cli(capsys, "optimize", "--n", "1000", "--top", "1", "--no-check")
    assert code == 0, err
    header = next(ln for ln in out.splitlines() if ln.startswith("rank"))
    assert "lower_bound_cycles" in header.split()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "schedules.md").read_text()
    shown = next(ln for ln in doc.splitlines() if ln.strip().startswith("rank  variant"))
    assert shown.split() == header.split()  # the widths follow the numbers
