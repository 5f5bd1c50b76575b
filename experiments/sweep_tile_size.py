"""Which tile size? Ping-pong cycles across softmax.tile_bytes (direct as the baseline).

Writes results/sweep_tile_size.csv and .png and prints its conclusion in one sentence.
Run: ``python experiments/sweep_tile_size.py [--jobs 2] [--fidelity tile|burst]``.
"""

from __future__ import annotations

from pathlib import Path

from dspsim.config import load_model
from dspsim.run import simulate
from dspsim.study.experiments import experiment_parser, run_experiment, script_main
from dspsim.study.sweep_plot import line_plot

NAME = "sweep_tile_size"
RESULTS = Path(__file__).resolve().parents[1] / "results"
N = 100_000  # the seed's array
TILES_BYTES = [256 << k for k in range(11)]  # 256 B .. 256 KiB, one DataRAM
NEAR_BEST = 0.01  # "as good as the best": within 1 %
# The other reading of the seed's two figures that fits them as well (docs/validation.md):
# one outstanding iDMA request per channel, a slower DRAM and a slightly wider port.
LATENCY_BOUND = {"idma.max_outstanding": 1, "ddr.latency_cycles": 180.21,
                 "ddr.bytes_per_cycle": 0.44812}


def main() -> None:
    args = experiment_parser(__doc__.splitlines()[0]).parse_args()
    df, out_dir = run_experiment(
        NAME, args, RESULTS, params={"softmax.tile_bytes": TILES_BYTES}, n=N
    )
    pp = df[df["variant"] == "pingpong"].set_index("softmax.tile_bytes")["cycles"].sort_index()
    direct = df[df["variant"] == "direct"]["cycles"].median()
    best_tile = int(pp.idxmin())
    best = int(pp.min())
    near = pp[pp <= best * (1 + NEAR_BEST)]
    default_tile = load_model().softmax.tile_bytes
    default_pct = 100.0 * (pp.get(default_tile, float("nan")) / best - 1.0)

    alt_df, _ = run_experiment(f"{NAME}_latency_bound", args, RESULTS,
                               params={"softmax.tile_bytes": TILES_BYTES}, n=N,
                               overrides=LATENCY_BOUND)
    alt = alt_df[alt_df["variant"] == "pingpong"].set_index("softmax.tile_bytes")["cycles"]
    alt = alt.sort_index()

    fig = line_plot(df, "softmax.tile_bytes", "cycles", hue="variant", source=NAME)
    ax = fig.axes[0]
    ax.plot(alt.index, alt.values, "o--", color="tab:orange", alpha=0.6,
            label="pingpong, latency-bound reading (1 outstanding, 180 cycles)")
    ax.axvline(default_tile, color="0.5", linestyle=":", label="model's tile_bytes")
    ax.set_ylabel("cycles")
    ax.legend(fontsize="small")
    fig.savefig(out_dir / f"{NAME}.png", dpi=130)
    alt_note = (
        f" Under the other reading that fits the document as well (one outstanding iDMA "
        f"request, 180-cycle DRAM) tile size still hardly matters: ping-pong spans "
        f"{int(alt.min()):,} to {int(alt.max()):,} cycles."
        if alt.max() < alt.min() * (1 + NEAR_BEST) else
        f" Under the other reading that fits the document as well (one outstanding iDMA "
        f"request, 180-cycle DRAM) it does: ping-pong spans {int(alt.min()):,} cycles at "
        f"{int(alt.idxmin()):,}-byte tiles to {int(alt.max()):,} at "
        f"{int(alt.idxmax()):,}, so a board run at another tile size tells the readings apart."
    )

    # The seed's frame waits only for the last output copy: with few, large tiles the other
    # channel's last write-back can still be running when the timer stops, so those runs
    # report fewer cycles than the work takes. Say so rather than recommend such a tile.
    early = [t for t in pp.index
             if any(w["code"] == "unwaited_copy" for w in simulate(
                 load_model().with_overrides({"softmax.tile_bytes": int(t)}), "softmax", "pingpong",
                 N, data=False, fidelity=args.fidelity).warnings)]
    if best_tile in early:
        honest = pp.drop(early)
        print(
            f"The smallest ping-pong count is at {best_tile:,}-byte tiles ({best:,} cycles), but "
            f"only because the seed's timer stops before the other channel's last write-back "
            f"ends (tiles of {', '.join(f'{int(t):,}' for t in early)} bytes); among complete "
            f"runs {int(honest.idxmin()):,}-byte tiles are fastest ({int(honest.min()):,} "
            f"cycles, {direct / honest.min():.2f}x faster than direct) and the model's "
            f"{default_tile:,}-byte tile is "
            f"{100.0 * (pp.get(default_tile) / honest.min() - 1.0):.1f} % slower than that."
            + alt_note
        )
        return
    print(
        f"Ping-pong is fastest with {best_tile:,}-byte tiles ({best:,} cycles, "
        f"{direct / best:.2f}x faster than direct); the smallest tile within "
        f"{100 * NEAR_BEST:.0f} % of it is {int(near.index.min()):,} bytes, and the model's "
        f"{default_tile:,}-byte tile is {default_pct:.1f} % slower than the best." + alt_note
    )


if __name__ == "__main__":
    script_main(main)
