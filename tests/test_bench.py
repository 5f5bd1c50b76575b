"""``python -m dspsim.bench`` pieces run (their figures are not checked: speed is not a test)."""

from pathlib import Path

from dspsim.bench import streaming

ROOT = str(Path(__file__).resolve().parent.parent)


def test_streaming_rows_against_a_baseline_checkout():
    # this checkout as its own baseline: the same cycles, a speed-up of some positive size
    rows = streaming((4096,), 1, baseline=ROOT)
    assert [(r["n"], r["fidelity"]) for r in rows] == [(4096, "burst"), (4096, "tile")]
    for r in rows:
        assert r["same_cycles"] and r["this_cycles"] > 0
        assert r["this_wall_s"] > 0 and r["baseline_wall_s"] > 0 and r["speedup"] > 0


def test_every_bench_option_says_what_it_does():
    """The README sends a reader to `python -m dspsim.bench --help` for what it runs: --n and
    --repeat were listed without a word."""
    from dspsim.bench import _parser
    for action in _parser()._actions:
        assert action.help, f"{action.option_strings} has no help"
