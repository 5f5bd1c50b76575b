"""``plot sweep --y speedup`` over any number of variants: a baseline variant's cycles (the op's
default, or ``--baseline V``) over each other variant's, one line or heatmap panel per
variant; above 1 the variant is the faster, as ``optimize``'s speed-up."""

import pandas as pd
import pytest

from dspsim.errors import DspsimInputError
from dspsim.study.sweep_plot import default_heatmap_y, heatmap, line_plot, speedup_table
from tests.cli_helpers import one_line, run_cli

# cycles per variant (round: every ratio exact in binary) at tile 1024; tile 4096 doubles all
CYCLES = {"pingpong": 1000, "direct": 1500, "online": 500, "resident": 250}


def table(cycles=CYCLES, warn=None) -> pd.DataFrame:
    rows = []
    for tile, scale in ((1024, 1), (4096, 2)):
        for v, c in cycles.items():
            rows.append({"op": "softmax", "variant": v, "n": 4096, "softmax.tile_bytes": tile,
                         "cycles": c * scale, "warnings": (warn or {}).get(v, ""),
                         "hazards": 0, "wall_s": 0.0, "error": ""})
    return pd.DataFrame(rows)


def test_each_variant_over_the_default_one():
    """Before: "speedup needs exactly two variants" for any table of three or more."""
    t = speedup_table(table())
    assert list(t.columns) == ["op", "variant", "n", "softmax.tile_bytes", "speedup",
                               "warnings"]
    got = {(v, tile): s for _, v, _, tile, s, _ in t.itertuples(index=False)}
    assert got == {(v, tile): 1000 / CYCLES[v] for v in ("direct", "online", "resident")
                   for tile in (1024, 4096)}  # 1000 / 1500, 2, 4


def test_another_baseline():
    t = speedup_table(table(), baseline="online")
    assert set(t["variant"]) == {"pingpong", "direct", "resident"}
    assert {v: s for v, s in zip(t["variant"], t["speedup"])} == {
        "pingpong": 0.5, "direct": 500 / 1500, "resident": 2.0}


def test_a_line_per_variant_with_an_axis_that_says_what_divides_what():
    fig = line_plot(table(), "softmax.tile_bytes", "speedup")
    ax = fig.axes[0]
    assert ax.get_ylabel().replace("\n", " ") == (  # wrapped to the axes' height
        "speedup (pingpong cycles / variant cycles; above 1 the variant is faster)")
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()
             if ln.get_label().startswith("variant=")}
    assert lines == {f"variant={v}": [1000 / CYCLES[v]] * 2
                     for v in ("direct", "online", "resident")}
    fig = line_plot(table(), "softmax.tile_bytes", "speedup", baseline="direct")
    assert fig.axes[0].get_ylabel().replace("\n", " ") == (
        "speedup (direct cycles / variant cycles; above 1 the variant is faster)")
    two = table({"pingpong": 1000, "direct": 1500})
    assert line_plot(two, "softmax.tile_bytes", "speedup").axes[0].get_ylabel().replace(
            "\n", " ") == (
        "speedup (pingpong cycles / direct cycles; above 1 direct is faster)")


def test_variants_with_the_same_values_say_so():
    t = table({"pingpong": 1000, "online": 500, "multibuffer": 500, "direct": 1500})
    labels = [ln.get_label() for ln in line_plot(t, "softmax.tile_bytes", "speedup")
              .axes[0].get_lines() if ln.get_label().startswith("variant=")]
    assert labels == ["variant=direct",
                      "variant=multibuffer (the same values as variant=online)",
                      "variant=online (the same values as variant=multibuffer)"]


def test_a_heatmap_panel_per_variant():
    rows = []
    for lat in (100, 200):
        part = table()
        rows.append(part.assign(**{"ddr.latency_cycles": float(lat),
                                   "cycles": part["cycles"] * (lat // 100)}))
    df = pd.concat(rows, ignore_index=True)
    df = df[["op", "variant", "n", "softmax.tile_bytes", "ddr.latency_cycles", "cycles",
             "warnings", "hazards", "wall_s", "error"]]
    fig = heatmap(df, "softmax.tile_bytes", "ddr.latency_cycles", "speedup")
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title())
    assert titles == ["variant=direct", "variant=online", "variant=resident"]
    assert default_heatmap_y(df) == "cycles"  # what was asked for: cycles unless a baseline
    assert default_heatmap_y(df, "online") == "speedup"


@pytest.mark.parametrize("df, baseline, message", [
    (table({"pingpong": 1000}), None, "two or more variants"),
    (table(), "nosuch", "not a variant of softmax"),
    (table(), "rows", "give --baseline one of them"),
    (table({"direct": 1, "online": 2}), None, "default variant pingpong"),
])
def test_what_speedup_cannot_divide_is_one_line(df, baseline, message):
    with pytest.raises(DspsimInputError, match=message) as e:
        speedup_table(df, baseline)
    assert "\n" not in str(e.value)


def test_the_command_line(tmp_path, capsys):
    out = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "--n", "4096", "--variant",
                           "pingpong,direct,online", "--param", "ddr.latency_cycles=100,200",
                           "--out", out)
    assert code == 0, err
    for extra in (["--y", "speedup"], ["--baseline", "direct"],
                  ["--y", "speedup", "--baseline", "online"]):
        code, stdout, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles",
                                    *extra, "--out", tmp_path / "f.png")
        assert code == 0 and "wrote" in stdout, err
    code, _, err = run_cli(capsys, "plot", "sweep", out, "--x", "ddr.latency_cycles", "--y",
                           "cycles", "--baseline", "direct", "--out", tmp_path / "f.png")
    assert code == 2 and one_line(err) and "--baseline" in err, err
