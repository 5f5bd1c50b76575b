"""Where does the time go in the seed's two softmax versions?

Simulates both versions at the headline size (100,000 float32, the packaged J6 model) and writes,
under ``results/``:

- ``timeline_pingpong.png``, ``timeline_direct.png``: the timelines of the two runs;
- ``timeline_pingpong_zoom.png``: one tile of the exp_sum pass, at true widths;
- ``timeline_compare.png``: both runs on one cycle axis, with where each core's time goes;
- ``timelines_stalls.csv``: the core's cycles per pass (computing, waiting, stalled) for both.

Then prints a one-sentence conclusion computed from the runs.

Usage: ``python experiments/timelines.py [--out-dir DIR] [--model PATH] [--set KEY=VALUE ...]``
"""

from __future__ import annotations

import pandas as pd
from _results import out_dir_of, parser, script_main, staged

from dspsim.analysis.stalls import core_breakdown, engine_utilisation
from dspsim.analysis.tiles import tile_table
from dspsim.analysis.timeline import plot_compare, plot_timeline
from dspsim.config import load_model
from dspsim.paths import atomic_write_text
from dspsim.run import simulate

N = 100_000


def main(argv: list[str] | None = None) -> str:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--out-dir", metavar="DIR", help="where to write (default: results/)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    args = ap.parse_args(argv)
    model = load_model(args.model, args.overrides)
    final = out_dir_of(args.out_dir)
    with staged(final) as out:
        sentence = _write(model, out)
    for name in ("timeline_pingpong.png", "timeline_direct.png", "timeline_pingpong_zoom.png",
                 "timeline_compare.png", "timelines_stalls.csv"):
        print(f"  wrote {final / name}")
    return sentence


def _write(model, out) -> str:
    """Simulate both versions, write every output into ``out`` and print the conclusion."""
    runs = {
        mode: simulate(model, variant=mode, n=N, data=False, trace=True, port_log=True)
        for mode in ("pingpong", "direct")
    }
    pp, direct = runs["pingpong"], runs["direct"]
    plot_timeline(pp, out / "timeline_pingpong.png")
    plot_timeline(direct, out / "timeline_direct.png")
    plot_compare([pp, direct], out / "timeline_compare.png")

    tiles = tile_table(pp.trace, pp.passes)
    # one full tile of the second pass: its input copy through its output copy
    t = tiles[(tiles["pass"] == "exp_sum") & (tiles["tile"] == 2)].iloc[0]
    margin = 0.03 * (t["copy_out_end_cycle"] - t["copy_in_start_cycle"])
    window = (t["copy_in_start_cycle"] - margin, t["copy_out_end_cycle"] + margin)
    plot_timeline(pp, out / "timeline_pingpong_zoom.png", window)

    rows = [{"mode": m} | row for m, r in runs.items() for row in core_breakdown(r.trace, r.passes)]
    atomic_write_text(out / "timelines_stalls.csv",
                      pd.DataFrame(rows).to_csv(index=False, float_format="%.1f"), "table")

    total = {m: pd.DataFrame(core_breakdown(r.trace, r.passes)).sum(numeric_only=True)
             for m, r in runs.items()}
    hidden_pct = 100.0 * tiles["hidden_dma_cycles"].sum() / tiles["dma_cycles"].sum()
    ddr_pct = {m: engine_utilisation(r)[r.engines_of("ddr")[0]]["utilisation_pct"]
               for m, r in runs.items()}
    moved = {m: sum(r.bytes.values()) for m, r in runs.items()}
    sentence = conclusion(
        {m: r.cycles for m, r in runs.items()},
        100 * total["pingpong"]["compute_cycles"] / pp.cycles,
        100 * total["pingpong"]["wait_in_cycles"] / pp.cycles,
        100 * total["direct"]["wait_ddr_cycles"] / direct.cycles,
        hidden_pct, moved, ddr_pct,
    )
    print(sentence)
    return sentence


HIDDEN_MOST = 50.0  # % of the DMA time hidden behind compute from which hiding is the gain


def conclusion(cycles: dict[str, int], compute_pct: float, wait_in_pct: float,
               direct_stall_pct: float, hidden_pct: float, moved: dict[str, int],
               ddr_pct: dict[str, float]) -> str:
    """The sentence, each claim tested on the runs' numbers: which version is faster, whether
    double buffering hides most of the DMA time, whether ping-pong moves fewer bytes."""
    pp, direct = cycles["pingpong"], cycles["direct"]
    faster = pp < direct
    ratio = f"{direct / pp:.2f}x faster" if faster else f"{pp / direct:.2f}x slower"
    hides = hidden_pct >= HIDDEN_MOST
    fewer = moved["pingpong"] < moved["direct"]
    how = (f"{'and largely' if hides else 'but not'} by hiding DMA behind compute"
           if faster else "although it hides DMA behind compute" if hides else
           "and hides little DMA behind compute")
    gain = ("the gain comes from moving fewer bytes" if faster and fewer and not hides else
            "it moves fewer bytes" if fewer else "it moves no fewer bytes")
    return (
        f"Ping-pong takes {pp:,} cycles against {direct:,} for direct DDR ({ratio}), {how}: "
        f"its core computes {compute_pct:.1f}% of the time and waits on iDMA input copies "
        f"{wait_in_pct:.1f}% (direct: {direct_stall_pct:.1f}% stalled on DDR), double "
        f"buffering hides {hidden_pct:.1f}% of the DMA time, and {gain} "
        f"({moved['pingpong']:,} against {moved['direct']:,}) over a DDR port that the iDMA's "
        f"requests in flight keep busy {ddr_pct['pingpong']:.0f}% of the run (direct: "
        f"{ddr_pct['direct']:.0f}%)."
    )


if __name__ == "__main__":
    script_main(main)
