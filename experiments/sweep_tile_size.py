"""Which tile size? Ping-pong cycles across softmax.tile_bytes (direct as the baseline).

Writes results/sweep_tile_size.csv and .png and prints its conclusion in one sentence.
Run: ``python experiments/sweep_tile_size.py [--jobs 2] [--fidelity tile|burst]``.
"""

from __future__ import annotations

from pathlib import Path

from dspsim.config import load_model
from dspsim.sweep import experiment_parser, run_experiment, script_main
from dspsim.sweep_plot import line_plot

NAME = "sweep_tile_size"
RESULTS = Path(__file__).resolve().parents[1] / "results"
N = 100_000  # the seed's array
TILES_BYTES = [256 << k for k in range(11)]  # 256 B .. 256 KiB, one DataRAM
NEAR_BEST = 0.01  # "as good as the best": within 1 %


def main() -> None:
    args = experiment_parser(__doc__.splitlines()[0]).parse_args()
    df, out_dir = run_experiment(
        NAME, args, RESULTS, params={"softmax.tile_bytes": TILES_BYTES}, n=N
    )
    pp = df[df["mode"] == "pingpong"].set_index("softmax.tile_bytes")["cycles"].sort_index()
    direct = df[df["mode"] == "direct"]["cycles"].median()
    best_tile = int(pp.idxmin())
    best = int(pp.min())
    near = pp[pp <= best * (1 + NEAR_BEST)]
    default_tile = load_model().softmax.tile_bytes
    default_pct = 100.0 * (pp.get(default_tile, float("nan")) / best - 1.0)

    fig = line_plot(df, "softmax.tile_bytes", "cycles", hue="mode", source=NAME)
    fig.axes[0].axvline(default_tile, color="0.5", linestyle=":", label="model's tile_bytes")
    fig.axes[0].legend(fontsize="small")
    fig.savefig(out_dir / f"{NAME}.png", dpi=130)

    print(
        f"Ping-pong is fastest with {best_tile:,}-byte tiles ({best:,} cycles, "
        f"{direct / best:.2f}x faster than direct); the smallest tile within "
        f"{100 * NEAR_BEST:.0f} % of it is {int(near.index.min()):,} bytes, and the model's "
        f"{default_tile:,}-byte tile is {default_pct:.1f} % slower than the best."
    )


if __name__ == "__main__":
    script_main(main)
