"""Several runs above each other on one cycle axis (same scale), and where each core's time goes.

Each run's lanes are the timeline's without the TCM buffers, its memories' bandwidth below; a
last panel sums the core's cycles per part (:func:`~dspsim.analysis.stalls.core_breakdown`) as
bars whose lengths are the run times.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspsim.analysis import timeline
from dspsim.analysis.engines import RunEngines, memory_label
from dspsim.analysis.series import logged_memories
from dspsim.analysis.stalls import core_breakdown, require_trace, stalled_memories
from dspsim.analysis.timeline_draw import DPI, SETUP_COLOUR, WAIT_COLOURS, PlainFormatter
from dspsim.analysis.timeline_memories import ddr_stall_handle, draw_ddr
from dspsim.errors import DspsimInputError
from dspsim.paths import plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COMPUTE_SUMMARY_COLOUR = "#f2c14e"


@plain_text
def compare_figure(results: Sequence[Any]) -> Figure:
    """Runs above each other on one cycle axis (same scale), and where each core's time goes."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    longest = float(max(r.cycles for r in results))
    xmax = longest * 1.16  # room after the bars for their totals
    for r in results:
        require_trace(r)
    memories = [logged_memories(r) for r in results]
    heights = [h for m in memories for h in [3.0] + [1.0] * len(m)]
    heights.append(0.25 + 0.55 * len(results))
    extra = sum(len(m) - 1 for m in memories)  # bandwidth panels beyond one per run
    # one legend entry for the core's stalls, naming every memory a run stalled on
    stalled = list(dict.fromkeys(m for r in results for m in stalled_memories(r)))
    stall_handle = ddr_stall_handle(stalled)
    fig = Figure(figsize=(16, 3.4 * len(results) + 2.6 + 0.8 * extra))
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.35,
                          left=0.075, right=timeline.RIGHT, top=0.90, bottom=0.12)
    axes, handles, width_px, notes = _draw_runs(fig, gs, results, memories, xmax, stall_handle)
    ax_sum = fig.add_subplot(gs[-1], sharex=axes[0])
    drawn = _draw_core_summary(ax_sum, results, xmax, width_px)
    if "compute_cycles" in drawn:
        handles.append(Patch(facecolor=COMPUTE_SUMMARY_COLOUR,
                             label="core computing (summary bar)"))
    if "wait_ddr_cycles" in drawn:
        handles.append(stall_handle)
    ax_sum.set_xlim(0, xmax)
    ax_sum.xaxis.set_major_formatter(PlainFormatter())
    ax_sum.set_xlabel("time (cycles from the op's timer start)", fontsize=9)
    timeline.add_us_axis(axes[0], results[0].model.core.clock_mhz)
    fig.suptitle("the same op, its versions on one time scale", fontsize=12, y=0.995)
    timeline.finish_layout(fig, gs, handles, ["red verticals: end of each run", *notes])
    return fig


def _draw_runs(fig: Figure, gs: Any, results: Sequence[Any], memories: list[list[str]],
               xmax: float, stall_handle: Any) -> tuple[list[Any], list[Any], float, list[str]]:
    """Each run's lanes and its memories' bandwidth panels, one run below the other: their
    axes, legend handles, the lanes' width (px) and the footnotes they need."""
    # the legend names the memory when every run shows the same one memory (J6's DDR)
    named = len({tuple(m) for m in memories}) == 1 and len(memories[0]) == 1
    axes: list[Any] = []
    handles: list[Any] = []
    width_px = None
    any_occupancy = False
    pass_notes: dict[str, None] = {}
    row = 0
    for i, r in enumerate(results):
        ax = fig.add_subplot(gs[row], sharex=axes[0] if axes else None)
        bws = [fig.add_subplot(gs[row + 1 + k], sharex=ax) for k in range(len(memories[i]))]
        row += 1 + len(bws)
        width_px = width_px or fig.get_figwidth() * DPI * ax.get_position().width
        lane_handles, used = timeline.draw_engine_lanes(ax, r, 0.0, xmax, width_px, tcm=False)
        handles += [stall_handle if h.get_label().startswith("core stalled on") else h
                    for h in lane_handles]
        any_occupancy |= used
        for ax_bw, memory in zip(bws, memories[i]):
            twin = ax_bw.twinx()  # requests are drawn but hidden: only bandwidth here
            bw_handles = draw_ddr(ax_bw, twin, r, 0.0, float(r.cycles),
                                  bins=int(width_px // 2), memory=memory, named=named)
            handles += [h for h in bw_handles if "requests in flight" not in h.get_label()
                        and "port slots" not in h.get_label()]
            twin.set_visible(False)
            ax_bw.tick_params(axis="x", labelbottom=False)
            ax_bw.tick_params(axis="y", labelsize=8)
        ax.set_title(timeline.run_title(r, 0.0, float(r.cycles)), fontsize=10, loc="left",
                     pad=34 if i == 0 else 6)
        ax.tick_params(axis="x", labelbottom=False)
        pass_note = timeline.draw_pass_lines([ax, *bws], r, 0.0, float(r.cycles))
        if pass_note:
            pass_notes[pass_note] = None
        for a in (ax, *bws):
            a.axvline(r.cycles, color="#c44e52", linewidth=1.2)
        axes += [ax, *bws]
    notes = [*pass_notes, timeline.OCCUPANCY_NOTE] if any_occupancy else [*pass_notes]
    return axes, handles, width_px, notes


# the core-time summary's parts: the breakdown's key, its label, colour and hatch
_SUMMARY_PARTS = (("compute_cycles", "computing", COMPUTE_SUMMARY_COLOUR, None),
                  ("idma_setup_cycles", "programming iDMA", SETUP_COLOUR, None),
                  ("wait_in_cycles", "waiting on iDMA input", WAIT_COLOURS["wait_in"], None),
                  ("wait_out_cycles", "waiting on iDMA output", WAIT_COLOURS["wait_out"], None),
                  ("wait_ddr_cycles", "stalled on", "#bbbbbb", "xx"),  # + the run's memories
                  ("other_cycles", "other", "#ffffff", None))


def _draw_core_summary(ax_sum: Any, results: Sequence[Any], xmax: float,
                       width_px: float) -> set[str]:
    """Where each core's time goes, each part at its true length on the same cycle axis (parts
    too short to label named after the bar); the parts drawn."""
    longest = float(max(r.cycles for r in results))
    drawn: set[str] = set()
    for i, r in enumerate(results):
        rows = core_breakdown(r.trace, r.passes, RunEngines.of(r))
        left, y, small = 0.0, -i, []
        for key, label, colour, hatch in _SUMMARY_PARTS:
            v = sum(p[key] for p in rows)
            if v <= 0:
                continue
            if key == "wait_ddr_cycles":
                on = ", ".join(map(memory_label, stalled_memories(r)))
                label = f"{label} {on or 'memory'}"
            ax_sum.barh(y, v, left=left, height=0.6, color=colour, hatch=hatch,
                        edgecolor="#333333" if hatch else colour, linewidth=0)
            drawn.add(key)
            pct = 100.0 * v / r.cycles
            if v / xmax * width_px > 90:
                ax_sum.text(left + v / 2, y, f"{label} {pct:.1f}%", ha="center", va="center",
                            fontsize=8, bbox={"facecolor": "white", "alpha": 0.85, "pad": 1,
                                              "linewidth": 0})
            else:
                small.append(f"{label} {pct:.2g}%")
            left += v
        text = f"{r.cycles:,} cycles" + (f"\n{', '.join(small)}" if small else "")
        ax_sum.text(left + longest * 0.005, y, text, va="center", fontsize=7.5)
    ax_sum.set_yticks([-i for i in range(len(results))],
                      [f"core time,\n{r.variant}" for r in results])
    ax_sum.set_ylim(-len(results) + 0.4, 0.6)
    ax_sum.tick_params(axis="y", length=0, labelsize=8)
    return drawn


def plot_compare(results: Sequence[Any], path: str | Path) -> Path:
    """Several runs on one cycle axis (a .png, .svg or .pdf file)."""
    if not results:
        raise DspsimInputError("compare: give at least one run")
    p = timeline.check_figure_path(path)
    return timeline.save_figure(compare_figure(results), p)
