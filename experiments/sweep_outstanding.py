"""How many outstanding requests would make it compute-bound? Ping-pong across
idma.max_outstanding x ddr.bytes_per_cycle.

"Compute-bound" here: the core computes (kernels and descriptor programming,
``core_busy_cycles``) for at least half of the op's cycles, so the iDMA no longer dominates.
Writes results/sweep_outstanding.csv and .png (heatmap of the core's busy fraction, with the
contour where it is one half) and prints its conclusion in one sentence.
Run: ``python experiments/sweep_outstanding.py [--jobs 2] [--fidelity tile|burst] [--out-dir DIR]``.
"""

from __future__ import annotations

from _results import (
    RESULTS,
    finish_table,
    script_main,
    staged_main,
)

from dspsim.analysis.timeline import save_figure
from dspsim.config import load_model
from dspsim.study.experiments import run_experiment
from dspsim.study.sweep_plot import heatmap

NAME = "sweep_outstanding"
N = 100_000
OUTSTANDING = [1 << k for k in range(9)]  # 1 .. 256 bursts in flight per channel
COMPUTE_BOUND = 0.5  # core busy fraction


def main() -> None:
    staged_main(__doc__.splitlines()[0], run)  # the tables and the figure replace the old ones


def run(args, final) -> None:
    fitted_bw = load_model().ddr.bytes_per_cycle
    bandwidths = sorted({fitted_bw, *(float(1 << k) for k in range(8))})  # fitted, 1 .. 128
    df, out_dir = run_experiment(
        NAME,
        args,
        RESULTS,
        final,
        params={"idma.max_outstanding": OUTSTANDING, "ddr.bytes_per_cycle": bandwidths},
        variants="pingpong",
        n=N,
    )
    finish_table(out_dir / f"{NAME}.csv", final)
    df["core_busy_fraction"] = df["core_busy_cycles"] / df["cycles"]

    fig = heatmap(
        df,
        "idma.max_outstanding",
        "ddr.bytes_per_cycle",
        "core_busy_fraction",
        contour=COMPUTE_BOUND,
        source=NAME,
    )
    save_figure(fig, out_dir / f"{NAME}.png", dpi=130)

    at_fit = df[df["ddr.bytes_per_cycle"] == fitted_bw]["core_busy_fraction"].max()
    bound = df[df["core_busy_fraction"] >= COMPUTE_BOUND]
    best = df.loc[df["core_busy_fraction"].idxmax()]
    fit_text = (
        f"at the model's {fitted_bw:g} bytes/cycle no number of outstanding requests makes "
        f"ping-pong compute-bound (the core is busy {100 * at_fit:.1f} % of the cycles at best)"
        if at_fit < COMPUTE_BOUND
        else f"at the model's {fitted_bw:g} bytes/cycle ping-pong is already compute-bound"
    )
    if bound.empty:
        print(
            f"No point of the sweep is compute-bound: {fit_text}, and even at "
            f"{best['ddr.bytes_per_cycle']:g} bytes/cycle with {best['idma.max_outstanding']} "
            f"outstanding requests the core is busy only {100 * best['core_busy_fraction']:.0f} "
            "% of the cycles."
        )
    else:
        bw = bound["ddr.bytes_per_cycle"].min()
        need = int(bound[bound["ddr.bytes_per_cycle"] == bw]["idma.max_outstanding"].min())
        fewest = bound.loc[bound["idma.max_outstanding"].idxmin()]
        print(
            f"{fit_text[0].upper()}{fit_text[1:]}; the core first computes half the time at "
            f"{bw:g} bytes/cycle with {need} outstanding requests per channel, and never with "
            f"fewer than {int(fewest['idma.max_outstanding'])} whatever the bandwidth "
            f"(best {100 * best['core_busy_fraction']:.0f} % busy)."
        )


if __name__ == "__main__":
    script_main(main)
