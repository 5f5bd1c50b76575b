"""A figure written twice is the same file, byte for byte, in every format: no creation time
(matplotlib writes one into SVG and PDF), SVG ids from a fixed salt
(:func:`dspsim.paths.atomic_savefig`, which every figure writer goes through)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

SAVED = Path(__file__).parent / "data" / "run_v1_pingpong_n2000.json.gz"


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_the_same_timeline_twice_is_the_same_file(tmp_path, capsys, monkeypatch, ext):
    files = []
    for i, epoch in enumerate(("1000000000", "1700000000")):  # two different "nows"
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        out = tmp_path / f"t{i}{ext}"
        code, _, err = run_cli(capsys, "plot", "timeline", SAVED, "--out", out)
        assert code == 0, err
        files.append(out.read_bytes())
    assert files[0] == files[1]


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_any_figure_through_the_atomic_writer_is_deterministic(tmp_path, monkeypatch, ext):
    from matplotlib.figure import Figure

    from dspsim.paths import atomic_savefig

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [1, 3, 2], label="a")
    ax.fill_between([0, 1, 2], [0, 1, 0], alpha=0.3)  # clip paths and hatches get ids in SVG
    ax.legend()
    got = []
    for i, epoch in enumerate(("1000000000", "1700000000")):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        got.append(atomic_savefig(fig, tmp_path / f"f{i}{ext}").read_bytes())
    assert got[0] == got[1]
    assert b"1700000000" not in got[1]
