"""Which tile size? Ping-pong cycles across softmax.tile_bytes (direct as the baseline).

Writes results/sweep_tile_size.csv (and ..._latency_bound.csv) and .png and prints its conclusion
in one sentence. Points whose run raised a warning are ringed in the figure: at 128 KiB and up
the seed's timer stops before the other channel's last write-back ends (``unwaited_copy``), so
those runs *look* faster than the work they do.
Run: ``python experiments/sweep_tile_size.py [--jobs 2] [--fidelity tile|burst] [--out-dir DIR]``.
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
from dspsim.study.sweep_plot import WARNED_LABEL, line_plot, ring_warned, warned_mask

NAME = "sweep_tile_size"
EARLY_TIMER = "unwaited_copy"  # the timer stopped before the last copy ended
VARIANTS = ["pingpong", "direct"]  # the seed's two versions
N = 100_000  # the seed's array
TILE_STEPS = [256 << k for k in range(11)]  # 256 B .. 256 KiB, one DataRAM


def tiles_that_fit(model) -> list[int]:
    """The tile sizes that fit the free space of one DataRAM (what the firmware does not
    reserve), so that no point of the sweep fails."""
    free = model.tcm.bank_bytes - getattr(model.tcm, "reserved_bytes", 0)
    return [t for t in TILE_STEPS if t <= free]


NEAR_BEST = 0.01  # "as good as the best": within 1 %
# The other reading of the seed's two figures that fits them as well (docs/validation.md):
# one outstanding iDMA request per channel, a slower DRAM and a slightly wider port.
LATENCY_BOUND = {"idma.max_outstanding": 1, "ddr.latency_cycles": 180.21,
                 "ddr.bytes_per_cycle": 0.44812}


def main() -> None:
    staged_main(__doc__.splitlines()[0], run)  # the tables and the figure replace the old ones


def run(args, final) -> None:
    tiles = tiles_that_fit(load_model())
    df, out_dir = run_experiment(
        NAME, args, RESULTS, final, params={"softmax.tile_bytes": tiles}, n=N, variants=VARIANTS
    )
    finish_table(out_dir / f"{NAME}.csv", final)
    pp = df[df["variant"] == "pingpong"].set_index("softmax.tile_bytes")["cycles"].sort_index()
    direct = df[df["variant"] == "direct"]["cycles"].median()
    best_tile = int(pp.idxmin())
    best = int(pp.min())
    near = pp[pp <= best * (1 + NEAR_BEST)]
    default_tile = load_model().softmax.tile_bytes
    default_pct = 100.0 * (pp.get(default_tile, float("nan")) / best - 1.0)

    alt_df, _ = run_experiment(f"{NAME}_latency_bound", args, RESULTS, final,
                               params={"softmax.tile_bytes": tiles}, n=N,
                               variants=VARIANTS, overrides=LATENCY_BOUND)
    finish_table(out_dir / f"{NAME}_latency_bound.csv", final)
    alt_pp = alt_df[alt_df["variant"] == "pingpong"].sort_values("softmax.tile_bytes")
    alt = alt_pp.set_index("softmax.tile_bytes")["cycles"]

    fig = line_plot(df, "softmax.tile_bytes", "cycles", hue="variant", source=NAME)
    ax = fig.axes[0]
    ax.plot(alt.index, alt.values, "o--", color="tab:orange", alpha=0.6,
            label="pingpong, latency-bound reading (1 outstanding, 180 cycles)")
    ring_warned(ax, alt.index, alt.values, warned_mask(alt_pp), "tab:orange")
    ax.axvline(default_tile, color="0.5", linestyle=":", label="model's tile_bytes")
    early_pp = df[(df["variant"] == "pingpong")
                  & df["warnings"].str.contains(EARLY_TIMER, regex=False)]
    ax.set_ylabel("cycles")
    handles, labels = ax.get_legend_handles_labels()
    if WARNED_LABEL in labels:  # say what the rings mean here, last in the legend
        k = labels.index(WARNED_LABEL)
        handles.append(handles.pop(k))
        labels.pop(k)
        labels.append(f"ringed: {EARLY_TIMER}, the timer stops before the last\n"
                      "write-back ends: such a run looks faster than its work")
    ax.legend(handles, labels, fontsize="small")
    save_figure(fig, out_dir / f"{NAME}.png", dpi=130)
    # the other reading, among its complete runs (its ringed points stop their timer early too)
    alt_early = [int(t) for t in alt_pp.loc[warned_mask(alt_pp), "softmax.tile_bytes"]]
    alt_ok = alt.drop(alt_early)
    early_note = (f" (leaving out tiles of {', '.join(f'{t:,}' for t in alt_early)} bytes, "
                  "whose timer stops early there too)" if alt_early else "")
    alt_note = (
        f" Under the other reading that fits the document as well (one outstanding iDMA "
        f"request, 180-cycle DRAM) tile size still hardly matters: ping-pong spans "
        f"{int(alt_ok.min()):,} to {int(alt_ok.max()):,} cycles{early_note}."
        if alt_ok.max() < alt_ok.min() * (1 + NEAR_BEST) else
        f" Under the other reading that fits the document as well (one outstanding iDMA "
        f"request, 180-cycle DRAM) it does: ping-pong spans {int(alt_ok.min()):,} cycles at "
        f"{int(alt_ok.idxmin()):,}-byte tiles to {int(alt_ok.max()):,} at "
        f"{int(alt_ok.idxmax()):,}{early_note}, so a board run at another tile size tells "
        "the readings apart."
    )

    # The seed's frame waits only for the last output copy: with few, large tiles the other
    # channel's last write-back can still be running when the timer stops, so those runs
    # report fewer cycles than the work takes (their warnings say unwaited_copy). Say so
    # rather than recommend such a tile.
    early = sorted(int(t) for t in early_pp["softmax.tile_bytes"])
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
