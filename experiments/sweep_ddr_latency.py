"""At which DDR latency does ping-pong stop paying? Both versions across ddr.latency_cycles.

Writes results/sweep_ddr_latency.csv and .png (speed-up of ping-pong over direct against the
latency) and prints its conclusion in one sentence.
Run: ``python experiments/sweep_ddr_latency.py [--jobs 2] [--fidelity tile|burst] [--out-dir DIR]``.
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
from dspsim.config import load_model
from dspsim.study.experiments import run_experiment
from dspsim.study.sweep_plot import line_plot, speedup_table

NAME = "sweep_ddr_latency"
VARIANTS = ["pingpong", "direct"]  # the seed's two versions
BASELINE = "direct"  # speed-ups divide direct's cycles by ping-pong's
N = 100_000
# 1 to 10,000 cycles, three points a decade: from SRAM-like to a congested far memory
LATENCIES_CYCLES = [float(f"{v:.3g}") for v in np.logspace(0, 4, 13)]


def crossovers(lat: np.ndarray, speedup: np.ndarray) -> list[float]:
    """Latencies where the speed-up crosses 1, interpolated in log(latency)."""
    out = []
    for i in range(len(lat) - 1):
        a, b = speedup[i] - 1.0, speedup[i + 1] - 1.0
        if a == 0.0:
            out.append(float(lat[i]))
        elif a * b < 0:
            t = a / (a - b)
            out.append(float(np.exp(np.log(lat[i]) + t * (np.log(lat[i + 1]) - np.log(lat[i])))))
    return out


def main() -> None:
    staged_main(__doc__.splitlines()[0], run)  # the tables and the figure replace the old ones


def run(args, final) -> None:
    df, out_dir = run_experiment(
        NAME, args, RESULTS, final, params={"ddr.latency_cycles": LATENCIES_CYCLES}, n=N,
        variants=VARIANTS,
    )
    finish_table(out_dir / f"{NAME}.csv", final)
    # ping-pong's speed-up over direct: direct's cycles / ping-pong's (above 1 ping-pong pays)
    fig = line_plot(df, "ddr.latency_cycles", "speedup", source=NAME, baseline=BASELINE)
    fitted = load_model().ddr.latency_cycles
    fig.axes[0].axvline(fitted, color="0.5", linestyle=":", label="model's latency_cycles")
    fig.axes[0].legend(fontsize="small")
    save_figure(fig, out_dir / f"{NAME}.png", dpi=130)
    print(conclusion(df))


def conclusion(df) -> str:
    """The run's answer in one sentence, from ping-pong's speed-up over direct per latency."""
    table = speedup_table(df, baseline=BASELINE).sort_values("ddr.latency_cycles")
    lat = table["ddr.latency_cycles"].to_numpy(dtype=float)
    s = table["speedup"].to_numpy(dtype=float)
    cross = crossovers(lat, s)
    lo, hi = lat.min(), lat.max()
    if cross:
        side = "below" if s[0] < 1 else "above"
        return (
            f"Ping-pong stops paying {side} a DDR latency of about {cross[0]:,.0f} cycles "
            f"(speed-up over direct {s.min():.2f}x to {s.max():.2f}x across {lo:g} to {hi:g} "
            "cycles)."
        )
    winner = "Ping-pong pays" if s.min() > 1 else "Ping-pong never pays"
    low = s.argmin()
    lowest = f" (lowest {s[low]:.2f}x at {lat[low]:g})" if 0 < low < len(s) - 1 else ""
    return (
        f"{winner} at every DDR latency from {lo:g} to {hi:g} cycles (no crossover in range): "
        f"the speed-up over direct runs from {s[0]:.2f}x at {lat[0]:g} to {s[-1]:.2f}x at "
        f"{lat[-1]:g} cycles{lowest}."
    )


if __name__ == "__main__":
    script_main(main)
