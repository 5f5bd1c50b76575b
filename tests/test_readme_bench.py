"""The README's speed figures are quoted from the benchmark's kept report (docs/bench.txt,
written by ``python -m dspsim.bench --out``), so the two cannot drift apart. Speed itself is
never asserted: only that a figure the README quotes is one the kept report printed."""

import re
import sys
from pathlib import Path

import pytest

import dspsim.bench as bench

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# a speed-up ("23.4x") or a count with its unit ("515 events", "0.035 s", "208 MiB")
RATIO = re.compile(rf"(?<![\w.^-])({NUMBER})x\b")
QUANTITY = re.compile(rf"(?<![\w.^-])({NUMBER}) (events|s|MiB|tasks|points)\b")


def speed_section(readme: str) -> str:
    start = readme.index("\n## Speed\n")
    end = readme.index("\n## ", start + 1)
    return readme[start:end]


def figures(text: str) -> tuple[list[str], list[str]]:
    """The speed-ups and the counts with units a text quotes."""
    return RATIO.findall(text), [m.group(1) for m in QUANTITY.finditer(text)]


def printed(number: str, report: str) -> bool:
    """``number`` appears in ``report`` as a whole number (not inside a longer one)."""
    return re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d,]|\.\d)", report) is not None


def test_every_speed_figure_the_readme_quotes_is_in_the_kept_bench_report():
    report = (ROOT / "docs" / "bench.txt").read_text()
    assert report.startswith("# python -m dspsim.bench"), "the report names its command"
    ratios, quantities = figures(speed_section((ROOT / "README.md").read_text()))
    assert len(ratios) >= 5 and len(quantities) >= 5, "the Speed section quotes the bench"
    missing = [f"{r}x" for r in ratios if f"{r}x" not in report]
    missing += [q for q in quantities if not printed(q, report)]
    assert not missing, f"README Speed figures not in docs/bench.txt: {missing}"


def test_the_figure_patterns_read_what_they_should():
    ratios, quantities = figures("tile 23.4x faster; 515 events -> 1,668 events in 0.035 s, "
                                 "10^6 elements, 2-core, 208 MiB")
    assert ratios == ["23.4"]
    assert quantities == ["515", "1,668", "0.035", "208"]
    assert printed("515", "   515 ") and not printed("515", "1,515") \
        and not printed("51", "515") and not printed("0.03", "0.035")


WORKLOAD = {"cameras": 6, "cores": 1, "seconds": 3600.0, "tasks": 684_000, "wall_s": 5.0,
            "reused_tasks": 683_993, "episodes": 7, "reference_seconds": 2.0,
            "reference_tasks": 380, "reference_wall_s": 10.0,
            "reference_extrapolated_wall_s": 18_000.0, "speedup": 3600.0,
            "identical_over_reference": True}


def test_the_bench_keeps_its_report_in_a_file(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "workload_wall", lambda *a, **k: dict(WORKLOAD))
    out = tmp_path / "bench.txt"
    monkeypatch.setattr(sys, "argv", ["bench", "--workload-only", "--out", str(out)])
    bench.main()
    printed_text = capsys.readouterr().out
    kept = out.read_text()
    assert kept == f"# python -m dspsim.bench --workload-only --out {out}\n" + printed_text
    assert "684,000 tasks" in kept and "3,600x" in kept
    assert [p.name for p in tmp_path.iterdir()] == ["bench.txt"]  # no temporary left


def test_the_bench_refuses_an_unwritable_out_before_running(monkeypatch, tmp_path, capsys):
    def must_not_run(*a, **k):
        raise AssertionError("the benchmark ran before --out was checked")

    monkeypatch.setattr(bench, "workload_wall", must_not_run)
    for bad in (tmp_path / "no" / "such" / "bench.txt", tmp_path):
        monkeypatch.setattr(sys, "argv", ["bench", "--workload-only", "--out", str(bad)])
        with pytest.raises(SystemExit) as e:
            bench.main()
        assert e.value.code == 2
        assert "argument --out" in (err := capsys.readouterr().err.splitlines()[-1]) \
            and "not a file in an existing folder" in err


# Tile fidelity equals burst to the cycle on every configuration the tests run, but not at
# every size: at 10^8 elements (direct softmax, J6) burst gives 7,645,913,253 cycles and tile
# 7,645,913,258 (float time, rounded once by a closed form and at each step by the bursts)
UNQUALIFIED = ("tile fidelity is exact", "exact: it equals burst to the cycle",
               "which is exact (it equals burst", "therefore equals `burst` to the cycle")


def test_no_text_claims_tile_equals_burst_at_every_size():
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "dspsim").rglob("*.py")), ROOT / "experiments" / "validation.py"]
    claims = [f"{p.relative_to(ROOT)}: {c!r}" for p in texts
              for c in UNQUALIFIED if c in " ".join(p.read_text().lower().split())]
    assert not claims, f"unqualified claims that tile equals burst: {claims}"
    # tile is a name for the one engine now: the README says so, and why
    fidelity = " ".join((ROOT / "README.md").read_text().split())
    assert "`tile` is a name for the one engine (`burst`)" in fidelity
