"""Drawing primitives of the timeline figures: colours, labels that fit their bars, plain tick
formatters, and lanes drawn as per-pixel occupancy: each pixel column shows the share of its
time in each state, stacked from the lane's bottom (white: idle; a kernel stalled for ``f`` of a
row counts ``1 - f`` computing), painted as cumulative towers so that states meet without seams.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from matplotlib.font_manager import FontProperties, findfont, get_font
from matplotlib.patches import StepPatch
from matplotlib.textpath import TextToPath
from matplotlib.ticker import Formatter

from dspsim.analysis.engines import memory_label as engine_memory_label
from dspsim.analysis.series import binned_mean

DPI = 120
MIN_BAR_PX = 2.0  # bars narrower than this: the figure says its columns are occupancy
EDGE_MIN_PX = 20.0  # outlines (white between copies, grey around a held tile) from this wide
LABEL_PAD_PX = 3.0  # room left at each end of a label inside its bar
LANE_H = 0.72  # bar height, in lanes

KERNEL_COLOURS = ("#8172b3", "#c44e52", "#dd8452", "#937860",  # in the order first called
                  "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
COPY_COLOURS = {"copy_in": "#4c72b0", "copy_out": "#55a868"}
WAIT_COLOURS = {"wait_in": "#c6d4ec", "wait_out": "#cce6c8"}
SETUP_COLOUR = "#222222"
STALL_COLOUR = "#bbbbbb"  # a kernel's share stalled on DDR (hatched)
STALL_HATCH = "xx"
STALL_HATCH_COLOUR = "#666666"
TCM_COLOURS = {"filling": "#a6c3e6", "ready": "#e4e4e4", "computing": "#f2c14e",
               "computed": "#f3e4b3", "draining": "#a8d5a2"}
PASS_COLOURS = ("#ececec", "#dadada")
# DDR requesters: the core, then its channels by number, then anything else; dark or saturated
# colours that no state of the lanes or the DDR data path uses
CORE_REQUEST_COLOUR = "#5a5a5a"
CHANNEL_REQUEST_COLOURS = ("#0b2e59", "#00a89d", "#8e0152", "#6a00d8",
                           "#9acd32", "#00e5ff", "#4d3300", "#ff00aa")
OTHER_REQUEST_COLOUR = "#a07000"


FIGURE_NAME_CHARS = 32  # a name longer than this is shortened in a figure (middle ellipsis)
MEMORY_LABEL_CHARS = 12  # a memory's label: its panels' rotated y labels fit their height


@lru_cache(maxsize=1)
def _figure_font():
    """The font figures set their text in (the default family's first face)."""
    return get_font(findfont(FontProperties()))


def figure_name(name: str, limit: int = FIGURE_NAME_CHARS) -> str:
    """A name as a figure shows it: a character the font lacks (or cannot print) as an ASCII
    escape (``\\u6a21``); past ``limit`` characters, its start and end around an ellipsis."""
    font = _figure_font()
    text = "".join(c if c.isprintable() and font.get_char_index(ord(c)) != 0
                   else ascii(c)[1:-1] for c in str(name))
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 3
    return f"{text[:limit - 1 - tail]}…{text[len(text) - tail:]}"


def memory_label(name: str) -> str:
    """A memory as a figure names it: in capitals (``DDR``), by :func:`figure_name`."""
    return figure_name(engine_memory_label(name), MEMORY_LABEL_CHARS)


def memories_text(names: Sequence[str], joiner: str = ", ") -> str:
    """Several memories as a figure names them (``DDR, SRAM``)."""
    return joiner.join(memory_label(n) for n in names)


@lru_cache(maxsize=4096)
def text_width_px(text: str, fontsize: float, dpi: float = DPI) -> float:
    """The width of ``text`` set in the default font at ``fontsize`` points, in pixels."""
    width, _, _ = TextToPath().get_text_width_height_descent(text, FontProperties(size=fontsize),
                                                             ismath=False)
    return float(width) * dpi / 72.0


def bin_text(cycles: float) -> str:
    """A bin width in cycles, to three significant digits below 100 (never "0")."""
    return f"{cycles:,.0f}" if cycles >= 100 else f"{cycles:.3g}"


class PlainFormatter(Formatter):
    """Tick labels in plain notation with thousands separators and as many decimals as the tick
    spacing needs: never an offset ("+2.57e5") or a scientific multiplier."""

    decimals = 0  # until set_locs sees the ticks

    def set_locs(self, locs) -> None:
        super().set_locs(locs)
        step = np.diff(np.sort(np.asarray(locs, float)))
        step = step[step > 0]
        self.decimals = (int(min(max(0, -np.floor(np.log10(step.min()) + 1e-9)), 9)) if len(step)
                         else 0)

    def __call__(self, x, pos=None) -> str:
        text = f"{x:,.{self.decimals}f}"
        return "0" if text.lstrip("-").strip("0.,") == "" else text


class Lanes:
    """Draws one axes' lanes as per-pixel occupancy (:meth:`finish`), outlines of wide bars and
    labels that fit inside their bars."""

    def __init__(self, ax, lo: float, hi: float, width_px: float):
        self.ax = ax
        self.lo, self.hi = lo, hi
        # one occupancy column per pixel, edges on pixel boundaries (the axes start on one)
        self.cycles_per_px = (hi - lo) / max(width_px, 1.0)
        self.edges = np.minimum(lo + np.arange(int(np.ceil(width_px - 1e-6)) + 1)
                                * self.cycles_per_px, hi)
        self.min_w = MIN_BAR_PX * self.cycles_per_px
        # lane y -> [(starts, ends, weights, style)], in the order stacked (bottom-up)
        self.groups: dict[float, list[tuple[np.ndarray, np.ndarray, np.ndarray, dict]]] = {}
        self.placed: dict[float, list[tuple[float, float]]] = {}  # label extents (px) per lane
        self.used_occupancy = False

    def visible(self, start, end) -> np.ndarray:
        """Which intervals show in the window."""
        start, end = np.asarray(start, float), np.asarray(end, float)
        return (end > self.lo) & (start < self.hi) & (end > start)

    def clip(self, start, end) -> tuple[np.ndarray, np.ndarray]:
        """The visible parts of the intervals that have any."""
        sel = self.visible(start, end)
        return (np.maximum(np.asarray(start, float)[sel], self.lo),
                np.minimum(np.asarray(end, float)[sel], self.hi))

    def bars(self, start, end, y: float, colour: str, weight=None, hatch: str | None = None,
             edge: str | None = None) -> bool:
        """Intervals of one state in the lane at ``y``; True when any of them is in the window.
        ``weight``: the share of each interval's time spent in this state (default 1);
        ``edge``: outline colour for bars at least :data:`EDGE_MIN_PX` wide."""
        sel = self.visible(start, end)
        s, e = self.clip(start, end)
        w = (np.ones(len(s)) if weight is None
             else np.clip(np.asarray(weight, float)[sel], 0.0, 1.0))
        if not len(s):
            return False
        if ((e - s) < self.min_w).any():
            self.used_occupancy = True
        style = {"facecolor": colour, "hatch": hatch,
                 "edgecolor": STALL_HATCH_COLOUR if hatch else colour}
        self.groups.setdefault(y, []).append((s, e, w, style))
        if edge is not None:
            self.outline(start, end, y, edge, 0.6)
        return True

    def outline(self, start, end, y: float, colour: str, linewidth: float) -> None:
        """Outline the intervals at least :data:`EDGE_MIN_PX` wide in the window."""
        s, e = self.clip(start, end)
        framed = (e - s) >= EDGE_MIN_PX * self.cycles_per_px
        if framed.any():
            self.ax.broken_barh(np.column_stack([s[framed], (e - s)[framed]]),
                                (y - LANE_H / 2, LANE_H), facecolors="none", edgecolor=colour,
                                linewidth=linewidth, zorder=1.6)

    def finish(self) -> None:
        """Draw every lane: per pixel column, each state's share of the column's time stacked
        from the lane's bottom, painted as cumulative towers (tallest first)."""
        edges = self.edges
        for y, groups in self.groups.items():
            shares = np.array([binned_mean(s, e, w, edges) for s, e, w, _ in groups])
            total = shares.sum(axis=0)
            over = total > 1.0
            shares[:, over] /= total[over]
            tops = np.cumsum(np.clip(shares, 0.0, 1.0), axis=0)
            bottom = y - LANE_H / 2
            for k in range(len(groups) - 1, -1, -1):
                if not shares[k].any():
                    continue
                # add_artist: Axes.stairs would walk every vertex to update the data limits
                self.ax.add_artist(StepPatch(bottom + tops[k] * LANE_H, edges, baseline=bottom,
                                             fill=True, linewidth=0, zorder=1.5, snap=False,
                                             **groups[k][3]))

    def labels(self, start, end, texts: Sequence[str | Sequence[str]], y: float,
               fontsize: float = 7, pad_px: float = 0.0, **style) -> None:
        """A label centred in each bar, the first of its candidate texts that fits inside the
        bar's visible part and overlaps no label already in the lane."""
        a = np.maximum(np.asarray(start, float), self.lo)
        b = np.minimum(np.asarray(end, float), self.hi)
        px = (b - a) / self.cycles_per_px
        style = {"ha": "center", "va": "center", "fontsize": fontsize, "clip_on": True,
                 "zorder": 3} | style
        placed = self.placed.setdefault(y, [])
        shortest = 2 * LABEL_PAD_PX + 2 * pad_px + 0.4 * fontsize * DPI / 72.0
        for x0, x1, p, text in zip(a, b, px, texts):
            if p < shortest:
                continue
            for candidate in ([text] if isinstance(text, str) else text):
                w = text_width_px(candidate, fontsize) + 2 * pad_px
                if w + 2 * LABEL_PAD_PX > p:
                    continue
                mid = ((x0 + x1) / 2 - self.lo) / self.cycles_per_px
                ext = (mid - w / 2 - LABEL_PAD_PX, mid + w / 2 + LABEL_PAD_PX)
                if not any(ext[0] < q1 and q0 < ext[1] for q0, q1 in placed):
                    placed.append(ext)
                    self.ax.text((x0 + x1) / 2, y, candidate, **style)
                break


def fit_left(ax, labels: Sequence[str], fontsize: float = 10.0, margin_px: float = 8.0) -> bool:
    """Move the left edge of ``ax``'s grid (all its axes) right, to a whole pixel, far enough
    that the y tick labels ``labels`` lie inside the figure; True when it moved."""
    fig = ax.figure
    width = fig.get_figwidth() * DPI
    need = max((text_width_px(t, fontsize) for t in labels), default=0.0)
    need += ax.yaxis.get_major_ticks()[0].get_pad() * DPI / 72.0 + margin_px if need else 0.0
    left_px = ax.get_position().x0 * width
    if need <= left_px:
        return False
    update_grid(fig, ax.get_subplotspec().get_topmost_subplotspec().get_gridspec(),
                left=np.ceil(need) / width)
    return True


def update_grid(fig, gs, **margins: float) -> None:
    """Move the grid ``gs``'s margins and its axes with it (``GridSpec.update`` moves only
    pyplot's figures' axes)."""
    gs.update(**margins)
    for a in fig.axes:
        spec = a.get_subplotspec()
        if spec is not None and spec.get_topmost_subplotspec().get_gridspec() is gs:
            a.set_position(spec.get_position(fig))
