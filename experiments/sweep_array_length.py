"""Cycles against array length for both versions: the per-element cost and the fixed cost.

Writes results/sweep_array_length.csv and .png (cycles per element against n) and prints its
conclusion in one sentence: a straight-line fit cycles = fixed + per_element * n for each version
over the larger arrays, and from which n on ping-pong is the faster.
Run: ``python experiments/sweep_array_length.py [--jobs 2] [--fidelity tile|burst]
[--out-dir DIR]``.
"""

from __future__ import annotations

import numpy as np
from _results import (
    RESULTS,
    finish_table,
    script_main,
    staged_main,
)

from dspsim.analysis.timeline import save_figure
from dspsim.study.experiments import run_experiment
from dspsim.study.sweep_plot import line_plot

NAME = "sweep_array_length"
VARIANTS = ["pingpong", "direct"]  # the seed's two versions
LENGTHS = [1 << k for k in range(6, 23)]  # 64 .. 4,194,304 float32
FIT_FROM = 1 << 16  # fit the straight line where fixed costs no longer dominate


def main() -> None:
    staged_main(__doc__.splitlines()[0], run)  # the tables and the figure replace the old ones


def run(args, final) -> None:
    df, out_dir = run_experiment(NAME, args, RESULTS, final, params={"n": LENGTHS},
                                 variants=VARIANTS)
    finish_table(out_dir / f"{NAME}.csv", final)

    fig = line_plot(df, "n", "cycles_per_element", hue="variant", source=NAME)
    save_figure(fig, out_dir / f"{NAME}.png", dpi=130)

    fits = {}
    for mode in ("pingpong", "direct"):
        part = df[(df["variant"] == mode) & (df["n"] >= FIT_FROM)]
        per_element, fixed = np.polyfit(part["n"].astype(float), part["cycles"].astype(float), 1)
        fits[mode] = (per_element, fixed)
    cyc = df.pivot_table(index="n", columns="variant", values="cycles").sort_index()
    faster = cyc["pingpong"] < cyc["direct"]
    # the smallest n from which ping-pong wins at every larger n of the sweep
    wins_from = None
    for n in reversed(cyc.index):
        if not faster[n]:
            break
        wins_from = n
    if wins_from is None:
        tail = "direct is faster at the largest n of the sweep"
    elif wins_from == cyc.index.min():
        tail = f"ping-pong is faster at every n of the sweep ({cyc.index.min():,} and up)"
    else:
        tail = f"ping-pong is faster from n = {wins_from:,} on"
    (pp_b, pp_a), (d_b, d_a) = fits["pingpong"], fits["direct"]
    print(
        f"Per element ping-pong costs {pp_b:.2f} cycles and direct {d_b:.2f} "
        f"({d_b / pp_b:.2f}x; fixed costs {pp_a:,.0f} and {d_a:,.0f} cycles, fitted for "
        f"n >= {FIT_FROM:,}), and {tail}."
    )


if __name__ == "__main__":
    script_main(main)
