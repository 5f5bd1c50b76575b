"""A line plot of values that barely move tells the truth at any scale: when they lie within
1 % of the largest, the y-axis starts at 0 and the figure writes the relative spread (a zoom to
the data's range drew a 71-cycle spread on 5.4 M cycles as a jump)."""

from __future__ import annotations

import pandas as pd
import pytest

from dspsim.study.sweep_plot import line_plot


def _table(cycles: list[float]) -> pd.DataFrame:
    return pd.DataFrame([{"op": "softmax", "variant": "pingpong", "n": 100_000,
                          "core.call_overhead_cycles": 10 * (k + 1), "cycles": c,
                          "warnings": "", "hazards": 0, "wall_s": 0.0, "error": ""}
                         for k, c in enumerate(cycles)])


def _notes(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


@pytest.mark.parametrize("scale", [1, 10])
def test_a_small_spread_on_large_cycles_starts_the_axis_at_0_and_says_the_spread(scale):
    low = 5_400_000 * scale
    cycles = [low, low + 20, low + 40, low + 71, low + 55]
    fig = line_plot(_table(cycles), "core.call_overhead_cycles")
    bottom, top = fig.axes[0].get_ylim()
    assert bottom == 0.0 and top >= low + 71
    pct = f"{100 * 71 / (low + 71):.2g}"  # 0.0013 at 5.4 M, 0.00013 at 54 M
    assert _notes(fig) == [f"all within {pct} % of each other: {low:,} to {low + 71:,}"]
    assert pct == ("0.0013" if scale == 1 else "0.00013")


def test_equal_points_say_so():
    fig = line_plot(_table([5_154_294.0] * 3), "core.call_overhead_cycles")
    assert fig.axes[0].get_ylim()[0] == 0.0
    assert _notes(fig) == ["all points equal: 5,154,294"]


def test_a_spread_above_1_percent_keeps_the_datas_range_and_writes_nothing():
    cycles = [1_000_000, 1_020_000, 1_050_000]
    fig = line_plot(_table(cycles), "core.call_overhead_cycles")
    bottom, top = fig.axes[0].get_ylim()
    assert 900_000 < bottom < 1_000_000 < 1_050_000 < top
    assert _notes(fig) == []
