"""Figures of sweep tables (``dspsim plot sweep``; what it draws: ``docs/sweeps.md``).

:func:`line_plot` draws ``y`` against a swept key, one line per value of ``--hue`` and of any
other varying key, points with warnings ringed. :func:`heatmap` maps ``y`` over two keys, one
panel per value of any other varying key, each with its own colour scale (at least 1 % of its
largest value wide: a tiny spread is not drawn as the map), cells with warnings dotted, the
contour of a level drawn. ``y`` is any numeric column, ``speedup`` (:func:`speedup_table`) or
``cycles_per_element``. ``mode`` and ``variant`` name the same column; failed points are left
out and counted in the title; a table without an ``op`` column is of the default op.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm, Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from dspsim.analysis.timeline import FIGURE_FORMATS, check_figure_path, save_figure
from dspsim.analysis.timeline_draw import figure_name
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.paths import check_not_inputs, plain_text
from dspsim.study.sweep import DEFAULT_OP, key_columns, ok_rows, parse_shape, read_sweep
from dspsim.study.sweep.files import check_extension
from dspsim.study.sweep.same import identical_cycles_notes_of
from dspsim.study.sweep.values import VARIANT_KEYS

if TYPE_CHECKING:
    from argparse import Namespace

DERIVED = ("speedup", "cycles_per_element")
FIGURE_EXTENSIONS = FIGURE_FORMATS  # one list for every figure dspsim writes
MAX_PANELS = 6
MAX_LINES = 24
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<")
LABELS = {"cycles_per_element": "cycles_per_element (cycles / n)"}
# a column's unit by its name's ending (colour bars say it)
UNITS = (("cycles", "core clock cycles"), ("us", "us"), ("bytes", "bytes"), ("s", "s"),
         ("hazards", "count"))
WARNED_MARKER = "o"  # hollow, drawn larger than the line's own markers
WARNED_LABEL = "point with warnings"
WARNED_HATCH = ".."  # heatmap cells of points with warnings
LEGEND_IN_PER_CHAR = 0.065  # width of a legend label's character at "small" (inches)
LABEL_CHARS = 48  # an axis label (a column named after a long memory) shortened past this
NUMBER_PAD_PT = 4.0  # clear margin around a heatmap cell's number (no dots, no contour)
BAR_LABEL_CHARS = 40  # a y-axis or colour bar label wrapped past this (one line overran)
LOG_RANGE = 10.0  # a heatmap panel whose values span more than this factor: log colour scale
# a line plot whose values all lie within this fraction of the largest: its y-axis reaches 0
# (a zoom to the data's range would draw a flat curve as a jump) and the figure says the spread
FLAT_SPREAD = 0.01


def flat_axis(ax: Any, values: np.ndarray) -> None:
    """Within :data:`FLAT_SPREAD` of the largest: the y-axis from 0, the spread written."""
    v = values[np.isfinite(values)]
    top = float(np.max(np.abs(v))) if v.size else 0.0
    spread = float(np.ptp(v)) / top if top > 0 else None
    if spread is None or spread >= FLAT_SPREAD:
        return
    low, high = float(v.min()), float(v.max())
    ax.set_ylim(0.0, high * 1.08) if low > 0 else ax.set_ylim(low * 1.08, 0.0)
    text = (f"all points equal: {_short_number(low)}" if spread == 0 else
            f"all within {100 * spread:.2g} % of each other: {_short_number(low)} to "
            f"{_short_number(high)}")
    ax.text(0.01, 0.02, text, transform=ax.transAxes, ha="left", va="bottom",
            fontsize="small", bbox={"facecolor": "white", "edgecolor": "0.6", "alpha": 0.9})


def _short_number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1e3 and float(v).is_integer() else f"{v:.6g}"


class LogTwoSlopeNorm(Normalize):
    """A diverging scale on a log axis: ``vmin`` -> 0, ``vcenter`` -> 0.5, ``vmax`` -> 1."""

    def __init__(self, vcenter: float, vmin: float, vmax: float):
        super().__init__(vmin, vmax)
        self._knots = np.log([vmin, vcenter, vmax])

    def __call__(self, value, clip=None):
        v = np.ma.masked_invalid(np.ma.asarray(value, float))
        out = np.interp(np.log(np.clip(v.filled(1.0), 1e-300, None)), self._knots,
                        [0.0, 0.5, 1.0])
        return np.ma.array(out, mask=np.ma.getmaskarray(v))

    def inverse(self, value):
        return np.exp(np.interp(value, [0.0, 0.5, 1.0], self._knots))


def panel_norm(values: np.ndarray, level: float | None) -> tuple[Normalize, str]:
    """A panel's (norm, colour map): diverging around ``level`` when the values straddle it,
    logarithmic past :data:`LOG_RANGE`, else linear, at least :data:`FLAT_SPREAD` wide."""
    v = values[np.isfinite(values)]
    if not v.size:
        return Normalize(0.0, 1.0), "viridis"
    vmin, vmax = float(v.min()), float(v.max())
    wide = vmin > 0 and vmax / vmin > LOG_RANGE
    if level is not None and vmin < level < vmax:
        return (LogTwoSlopeNorm(level, vmin, vmax) if wide
                else TwoSlopeNorm(level, vmin, vmax)), "RdBu"
    if wide:
        return LogNorm(vmin, vmax), "viridis"
    top = max(abs(vmin), abs(vmax))
    if vmax - vmin < FLAT_SPREAD * top or vmin == vmax:  # a tiny spread is not the whole map
        pad = (FLAT_SPREAD * top - (vmax - vmin)) / 2 or 0.5
        vmin, vmax = vmin - pad, vmax + pad
    return Normalize(vmin, vmax), "viridis"


def log_ticks(vmin: float, vmax: float, level: float | None = None) -> list[float]:
    """Log colour bar ticks: 1, 2 and 5 times the powers of ten within, both ends, ``level``."""
    ticks = {vmin, vmax} | ({level} if level is not None and vmin < level < vmax else set())
    for e in range(math.floor(math.log10(vmin)), math.ceil(math.log10(vmax)) + 1):
        ticks |= {m * 10.0**e for m in (1, 2, 5) if vmin * 1.5 < m * 10.0**e < vmax / 1.5}
    return sorted(ticks)


def speedup_pair(df: pd.DataFrame, baseline: str | None = None
                 ) -> tuple[str, str, str, list[str]]:
    """(op, variant column, baseline variant, the other variants): two or more variants of one
    op, among them the baseline (default: the op's default variant)."""
    col = next((c for c in VARIANT_KEYS if c in key_columns(df)), None)
    if col is None:
        raise DspsimInputError(
            "speedup needs a variant (or mode) column with two or more variants of one op")
    ops = list(dict.fromkeys(df["op"])) if "op" in df.columns else [DEFAULT_OP]
    if len(ops) != 1:
        raise DspsimInputError(
            f"speedup needs the points of one op; the table has {', '.join(map(str, ops))}")
    op = get_op(ops[0])
    if op.variants_differ:
        raise DspsimInputError(f"speedup of {op.name}: {op.variants_differ}; plot its cycles")
    variants = list(dict.fromkeys(df[col]))
    if baseline is not None and baseline not in op.variants:
        raise DspsimInputError(
            f"--baseline {baseline}: not a variant of {op.name}; allowed: {', '.join(op.variants)}")
    if len(variants) < 2:
        raise DspsimInputError(
            f"speedup needs two or more variants of {op.name} in the {col} column; the table "
            f"has {', '.join(map(str, variants))} (allowed: {', '.join(op.variants)})")
    base = baseline if baseline is not None else op.default_variant
    if base not in variants:
        which = "--baseline" if baseline is not None else f"{op.name}'s default variant"
        raise DspsimInputError(
            f"speedup divides by {which} {base}; the table's {col} column has "
            f"{', '.join(map(str, variants))} (give --baseline one of them)")
    return op.name, col, base, [v for v in variants if v != base]


def join_warnings(values: Sequence[Any]) -> str:
    codes = [c for v in values if isinstance(v, str) for c in v.split(";") if c]
    return ";".join(dict.fromkeys(codes))


def speedup_table(df: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """The baseline variant's cycles / each other's per setting of the other parameter columns
    (successful points; above 1 the variant is faster, as ``dspsim optimize``'s speed-up): those
    keys, the variant column (several other variants), ``speedup`` and either point's warnings."""
    _, col, base, variants = speedup_pair(df, baseline)
    keys = key_columns(df)
    ok = ok_rows(df)
    others = [k for k in keys if k != col]
    wanted = ["cycles", *(["warnings"] if "warnings" in df.columns else [])]

    def points(variant: str) -> pd.DataFrame:
        part = ok[ok[col] == variant]
        part = (part.set_index(others)[wanted] if others
                else part[wanted].iloc[:1].reset_index(drop=True))
        return part.assign(cycles=part["cycles"].astype(float))

    if ok[ok[col] == base].empty:
        raise DspsimInputError(f"speedup needs {base} points; the table has none that succeeded")
    done = [v for v in variants if not ok[ok[col] == v].empty]
    if not done:
        raise DspsimInputError(
            f"speedup needs {' or '.join(variants)} points; the table has none that succeeded")
    denominator = points(base)
    tables = []
    for variant in done:
        joined = pd.concat({variant: points(variant), base: denominator}, axis=1, join="inner")
        table = pd.DataFrame(index=joined.index)
        table["speedup"] = joined[(base, "cycles")] / joined[(variant, "cycles")]
        if "warnings" in wanted:
            table["warnings"] = [join_warnings(pair) for pair in
                                 zip(joined[(variant, "warnings")], joined[(base, "warnings")])]
        table = table.reset_index(drop=not others)
        if len(variants) > 1:  # which variant each row is of, where the table had its column
            table.insert(keys.index(col) if others else 0, col, variant)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def label(column: str, df: pd.DataFrame | None = None, baseline: str | None = None) -> str:
    """An axis label: the column's name, with what a derived figure divides by what."""
    if column == "speedup" and df is not None:
        _, col, base, others = speedup_pair(df, baseline)
        which = others[0] if len(others) == 1 else col
        faster = f"{which} is faster" if len(others) == 1 else f"the {col} is faster"
        return f"speedup ({base} cycles / {which} cycles; above 1 {faster})"
    if column == "cycles_per_element" and df is not None and "n" not in df.columns:
        return "cycles_per_element (cycles / elements)"
    return figure_name(LABELS.get(column, column), LABEL_CHARS)


def resolve(df: pd.DataFrame, column: str) -> str:
    """The table's name of ``column``: ``mode`` and ``variant`` stand for each other."""
    if column not in df.columns and column in VARIANT_KEYS:
        return next((other for other in VARIANT_KEYS if other in df.columns), column)
    return column


def _require(df: pd.DataFrame, column: str, source: str) -> None:
    if column not in df.columns:
        allowed = ", ".join([*map(str, df.columns), *DERIVED])
        raise DspsimInputError(f"column {column!r} is not in {source}; allowed: {allowed}")


def _failed(df: pd.DataFrame) -> int:
    return int((df["error"] != "").sum()) if "error" in df.columns else 0


def _derived(df: pd.DataFrame, named: Sequence[tuple[str, str]], y: str, source: str,
             baseline: str | None) -> tuple[pd.DataFrame, list[str]]:
    """(successful rows with a numeric ``y``, their parameter columns), each (option, column)
    of ``named`` checked to be one of them."""
    keys = key_columns(df)
    if baseline is not None and y != "speedup":
        raise DspsimInputError(f"--baseline {baseline}: only --y speedup divides by a variant")
    if y == "speedup":
        data = speedup_table(df, baseline)
        keys = [k for k in keys if k in data.columns]
    else:
        data = ok_rows(df).copy()
        if y == "cycles_per_element":
            if "n" not in df.columns and "shape" not in df.columns:
                _require(df, "n", source)
            size = (data["n"].astype(float) if "n" in df.columns  # or the shape's product
                    else data["shape"].map(lambda s: float(math.prod(parse_shape(str(s))))))
            data[y] = data["cycles"].astype(float) / size
        else:
            _require(df, y, source)
            values = pd.to_numeric(data[y], errors="coerce")
            if values.isna().all() and len(data):
                raise DspsimInputError(f"column {y!r} of {source} is not numeric")
            data[y] = values.astype(float)
    for option, column in named:
        if column not in data.columns:
            raise DspsimInputError(
                f"{option} {column}: with --y {y} the columns are {', '.join(data.columns)}")
        if column not in keys:  # a result as an axis or a line: a line of one point each
            raise DspsimInputError(f"{option} {column}: a result of the sweep, not one of its "
                                   f"keys; allowed: {', '.join(keys)}")
    if data.empty:
        raise DspsimInputError(f"{source}: no successful points to plot")
    return data, keys


def _order(value: Any) -> Any:
    """Sort key of a parameter value: shapes (``64x256``) by their dimensions."""
    if isinstance(value, str):
        try:
            return (0, parse_shape(value), "")
        except DspsimInputError:
            return (1, (), value)
    return value


def _varying(df: pd.DataFrame, keys: Sequence[str], exclude: Sequence[str]) -> list[str]:
    return [k for k in keys if k not in exclude and df[k].nunique() > 1]


def _wide(values: np.ndarray) -> bool:
    """Spread over enough decades that a log axis reads better."""
    v = values[np.isfinite(values)]
    return v.size > 1 and (v > 0).all() and v.max() / v.min() >= 50


def _fmt(v: Any) -> str:
    """A value as a tick or legend shows it: a number short, a name as figures name it."""
    if isinstance(v, (int, float, np.integer, np.floating)):
        return f"{v:g}"
    return figure_name(str(v))


def _short(v: float) -> str:
    """A cell's value in at most four characters or so: 0.921, 12.3, 57.6k, 1.17M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def plain_log_ticks(axis) -> None:
    """Log axes labelled 1, 10, 100 rather than powers of ten."""
    axis.set_major_formatter(
        FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 and float(v).is_integer() else f"{v:g}")
    )


def _group_label(keys: Sequence[str], values: Any) -> str:
    values = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{k}={_fmt(v)}" for k, v in zip(keys, values))


def warned_mask(df: pd.DataFrame) -> np.ndarray:
    """True for the rows whose ``warnings`` cell names a warning."""
    if "warnings" not in df.columns:
        return np.zeros(len(df), bool)
    return (df["warnings"].fillna("").astype(str) != "").to_numpy()


def ring_warned(ax, xs, ys, warned, color, label: str | None = None) -> bool:
    """Ring the ``warned`` points with a hollow marker (a legend entry with ``label``); any?"""
    warned = np.asarray(warned, bool)
    if label is None and not warned.any():
        return False
    xs, ys = np.asarray(xs), np.asarray(ys)
    ax.plot(xs[warned] if len(xs) else [], ys[warned] if len(ys) else [], linestyle="none",
            marker=WARNED_MARKER, markersize=9, markerfacecolor="none", markeredgecolor=color,
            markeredgewidth=1.2, label=label)
    return bool(warned.any())


@plain_text
def line_plot(df: pd.DataFrame, x: str, y: str = "cycles", hue: str | None = None,
              source: str = "the table", baseline: str | None = None) -> Figure:
    """``y`` against ``x``, one line per value of ``hue`` and of any other varying key."""
    named = [("--x", x)] + ([("--hue", hue)] if hue is not None else [])
    (x, *hues), y, data, keys = _columns(df, named, y, source, baseline,
                                         "--hue {} is the --x column; choose another key")
    hue = hues[0] if hues else None
    groups = ([hue] if hue else []) + _varying(data, keys, [x, hue or ""])
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    numeric_x = pd.api.types.is_numeric_dtype(data[x])
    categories = list(dict.fromkeys(data[x])) if not numeric_x else []
    warned_any = _draw_lines(ax, data, x, y, groups, numeric_x, categories)
    if numeric_x and _wide(data[x].to_numpy(dtype=float)):
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
    if not numeric_x:
        ax.set_xticks(range(len(categories)), [str(c) for c in categories])
    ys = data[y].to_numpy(dtype=float)
    if _wide(ys):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    else:
        flat_axis(ax, ys)  # a small spread on large values: from 0, the spread written
        if np.nanmax(np.abs(ys)) >= 1e5:  # 5,000,000, not 5.0 1e6
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if y == "speedup":
        ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1, label="speedup = 1")
    if warned_any:  # one legend entry for every ring, whatever its colour
        ring_warned(ax, [], [], [], "0.25", label=WARNED_LABEL)
    ylabel = label(y, df, baseline)
    ax.set_xlabel(label(x))
    ax.set_ylabel(textwrap.fill(ylabel, BAR_LABEL_CHARS))
    ax.grid(True, which="both", alpha=0.3)
    if groups or y == "speedup" or warned_any:
        # outside the axes, to the right: a legend inside covers lines wherever it goes
        _, labels = ax.get_legend_handles_labels()
        fig.set_figwidth(fig.get_figwidth() + LEGEND_IN_PER_CHAR * max(map(len, labels)) + 0.7)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0)
    failed = _failed(df)
    ax.set_title(f"{ylabel} vs {x}" + (f" ({failed} failed points not shown)" if failed else ""))
    return fig


def _columns(df: pd.DataFrame, named: list[tuple[str, str]], y: str, source: str,
             baseline: str | None, twice: str) -> tuple[list[str], str, pd.DataFrame, list[str]]:
    """(the (option, column)s of ``named``, resolved and checked; ``y`` resolved; its data; the
    parameter columns); ``twice``: the message when the two named are one column."""
    named = [(option, resolve(df, c)) for option, c in named]
    for _, c in named:
        _require(df, c, source)
    if len(named) == 2 and named[0][1] == named[1][1]:
        raise DspsimInputError(twice.format(named[1][1]))
    y = resolve(df, y)
    return [c for _, c in named], y, *_derived(df, named, y, source, baseline)


def _draw_lines(ax: Any, data: pd.DataFrame, x: str, y: str, groups: list[str],
                numeric_x: bool, categories: list[Any]) -> bool:
    """One line per group (colour: the first group key's value, style: the rest); any ringed?"""
    parts = list(data.groupby(groups, sort=True)) if groups else [((), data)]
    if len(parts) > MAX_LINES:
        raise DspsimInputError(
            f"{len(parts)} lines ({', '.join(groups)} vary); at most {MAX_LINES}: "
            "plot a smaller sweep or use --heatmap")
    names = [name if isinstance(name, tuple) else (name,) for name, _ in parts]
    firsts = list(dict.fromkeys(n[:1] for n in names))
    rests = list(dict.fromkeys(n[1:] for n in names))
    series = []
    # lines with exactly the same points (two variants equally fast) hide one another: the
    # legend says so, and each has its own marker shape
    same: dict[bytes, list[tuple]] = {}
    for name, (_, part) in zip(names, parts):
        part = part.sort_values(x) if numeric_x else part
        xs = part[x].to_numpy() if numeric_x else np.array([categories.index(v) for v in part[x]])
        ys = part[y].to_numpy(dtype=float)
        points = np.asarray(xs, float).tobytes() + ys.tobytes()
        same.setdefault(points, []).append(name)
        series.append((name, part, xs, ys, points))
    warned_any = False
    for name, part, xs, ys, points in series:
        color = f"C{firsts.index(name[:1]) % 10}"
        text = _group_label(groups, name) if groups else None
        twins = [n for n in same[points] if n != name]
        if text and twins:
            text += f" (the same values as {', '.join(_group_label(groups, n) for n in twins)})"
        ax.plot(xs, ys, marker=MARKERS[firsts.index(name[:1]) % len(MARKERS)],  # a shape a colour
                markersize=3.5, color=color, label=text,
                linestyle=LINESTYLES[rests.index(name[1:]) % len(LINESTYLES)])
        if "warnings" in part.columns:
            warned_any |= ring_warned(ax, xs, ys, warned_mask(part), color)
    return warned_any


@plain_text
def heatmap(df: pd.DataFrame, key_x: str, key_y: str, y: str = "cycles",
            contour: float | None = None, source: str = "the table",
            baseline: str | None = None) -> Figure:
    """``y`` over ``key_x`` (across) x ``key_y`` (up), one panel per value of any other varying
    key; ``contour``: a level to outline (default 1 for ``speedup``, none otherwise)."""
    (key_x, key_y), y, data, keys = _columns(
        df, [("--heatmap", key_x), ("--heatmap", key_y)], y, source, baseline,
        "--heatmap needs two different keys, got {} twice")
    level = 1.0 if contour is None and y == "speedup" else contour
    others = _varying(data, keys, [key_x, key_y])
    panels = list(data.groupby(others, sort=True)) if others else [((), data)]
    if len(panels) > MAX_PANELS:
        raise DspsimInputError(
            f"{len(panels)} panels ({', '.join(others)} vary besides {key_x} and {key_y}); at most "
            f"{MAX_PANELS}: plot a smaller sweep")
    xs = sorted(data[key_x].unique(), key=_order)
    ys = sorted(data[key_y].unique(), key=_order)
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(1.6 + 5.8 * cols, 0.9 + 4.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    warned_any = contoured = False
    bar_label = label(y, df, baseline)
    unit = next((u for suffix, u in UNITS if y == suffix or y.endswith("_" + suffix)), None)
    if unit is not None and bar_label == figure_name(y, LABEL_CHARS):  # no text of its own
        bar_label += f" ({unit})"
    for ax, (name, part) in zip(axes, panels):
        grid = part.pivot_table(index=key_y, columns=key_x, values=y, aggfunc="mean")
        z = np.ma.masked_invalid(grid.reindex(index=ys, columns=xs).to_numpy(dtype=float))
        image, norm, lined = _draw_cells(ax, z, level)
        contoured |= lined
        warned_any |= _mark_cells(ax, image, z, _warned_cells(part, key_x, key_y, xs, ys, z))
        _panel_axes(ax, key_x, key_y, xs, ys, _group_label(others, name) if others else None)
        _colour_bar(fig, ax, image, norm, bar_label, level)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    title = "{} over {} x {}".format(*(figure_name(k, LABEL_CHARS) for k in (y, key_x, key_y)))
    failed = _failed(df)
    fig.suptitle(title + (" (each panel its own colour scale)" if len(panels) > 1 else "")
                 + (f" ({failed} failed points not shown)" if failed else ""))
    _heatmap_legend(fig, f"{figure_name(y, LABEL_CHARS)} = {level:g}" if contoured else None,
                    join_warnings(list(data["warnings"])) if warned_any else None)
    return fig


def _heatmap_legend(fig: Figure, contour_label: str | None, codes: str | None) -> None:
    handles: list[Any] = []
    if contour_label is not None:
        handles.append(Line2D([], [], color="k", linewidth=1.6, label=contour_label))
    if codes is not None:
        handles.append(Patch(facecolor="white", edgecolor="0.2", hatch=WARNED_HATCH,
                             label=f"dotted: {WARNED_LABEL} ({codes})"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=len(handles),
                   fontsize="small", frameon=False)


def _panel_axes(ax: Any, key_x: str, key_y: str, xs: list[Any], ys: list[Any],
                title: str | None) -> None:
    _ticks(ax.set_xticks, xs)
    _ticks(ax.set_yticks, ys)
    ax.set_xlabel(label(key_x))
    ax.set_ylabel(label(key_y))
    if title is not None:
        ax.set_title(title, fontsize="medium")


def _draw_cells(ax: Any, z: np.ma.MaskedArray, level: float | None) -> tuple[Any, Any, bool]:
    """A panel's cells in its own colour scale, the contour at ``level`` when it crosses it."""
    values = z.filled(np.nan)
    norm, cmap = panel_norm(values, level)
    image = ax.imshow(z, origin="lower", aspect="auto", cmap=cmap, norm=norm)
    contoured = bool(level is not None and z.shape[0] > 1 and z.shape[1] > 1
                     and np.nanmin(values) < level < np.nanmax(values))
    if contoured:  # named in the legend: a label on the line hides cells
        ax.contour(z, levels=[level], colors="k", linewidths=1.6)
    return image, norm, contoured


def _warned_cells(part: pd.DataFrame, key_x: str, key_y: str, xs: list[Any], ys: list[Any],
                  z: np.ma.MaskedArray) -> np.ndarray:
    """Which cells of a panel hold a point with warnings."""
    if "warnings" not in part.columns:
        return np.zeros(z.shape, bool)
    marks = part.assign(_w=warned_mask(part)).groupby([key_y, key_x])["_w"].any()
    return marks.unstack().reindex(index=ys, columns=xs).fillna(False).to_numpy(bool)


def _mark_cells(ax: Any, image: Any, z: np.ma.MaskedArray, warned: np.ndarray) -> bool:
    """Warned cells dotted, each cell's value written when the panel has few; any dotted?"""
    for (i, j), v in np.ndenumerate(z.filled(np.nan)):
        if not np.isfinite(v):
            continue
        rgba = image.cmap(image.norm(v))
        ink = "white" if 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5 else "black"
        if warned[i, j]:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, linewidth=0,
                                   hatch=WARNED_HATCH, edgecolor=ink))
        if z.size <= 150:
            # on a plain box of the cell's colour with a margin: legible over a contour
            # and over the dots of a warned cell, which show around it
            ax.text(j, i, _short(v), ha="center", va="center", fontsize=7, zorder=3, color=ink,
                    bbox={"facecolor": rgba, "edgecolor": "none", "pad": NUMBER_PAD_PT})
    return bool((warned & np.isfinite(z.filled(np.nan))).any())


def _colour_bar(fig: Figure, ax: Any, image: Any, norm: Any, text: str,
                level: float | None) -> None:
    """A panel's colour bar; on a log scale, ticks at 1, 2 and 5 times the powers of ten."""
    bar = fig.colorbar(image, ax=ax, label=textwrap.fill(text, BAR_LABEL_CHARS))
    if isinstance(norm, (LogNorm, LogTwoSlopeNorm)):
        bar.set_ticks(log_ticks(norm.vmin, norm.vmax, level))
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
        bar.ax.yaxis.set_minor_locator(NullLocator())
    elif max(abs(norm.vmin), abs(norm.vmax)) >= 1e5:  # 5,000,000, not 5.0 under 1e6
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def default_heatmap_y(df: pd.DataFrame, baseline: str | None = None) -> str:
    """``--y``'s default: ``cycles``, or ``speedup`` with a ``baseline``; never the table's."""
    return "speedup" if baseline is not None else "cycles"


def _ticks(setter, values: Sequence[Any], most: int = 12) -> None:
    idx = list(range(0, len(values), max(1, math.ceil(len(values) / most))))
    setter(idx, [_fmt(values[i]) for i in idx])


def plot_sweep(path: str | Path, x: str | None = None, y: str | None = None,
               hue: str | None = None, heatmap_keys: Sequence[str] | None = None,
               out: str | Path | None = None, contour: float | None = None,
               baseline: str | None = None) -> Path:
    """Draw a sweep file (line plot on ``x`` or heatmap on two keys) into ``out`` (default: the
    table's path with ``.png``); returns its path."""
    src = Path(path)
    check_extension(src, "sweep file")  # before naming the figure after it ("/" has no name)
    dest = Path(out) if out is not None else src.with_suffix(".png")
    if heatmap_keys is not None and len(heatmap_keys) != 2:
        raise DspsimInputError("--heatmap needs exactly two keys: KEY1 KEY2")
    if heatmap_keys is None and x is None:
        raise DspsimInputError("give --x KEY for a line plot or --heatmap KEY1 KEY2 for a map")
    if heatmap_keys is not None and hue is not None:
        raise DspsimInputError("--heatmap draws two keys; leave out --hue")
    if heatmap_keys is not None and x is not None and x not in heatmap_keys:
        raise DspsimInputError(f"--x {x} is not one of the --heatmap keys; leave it out")
    dest = check_figure_path(dest, "figure")
    check_not_inputs([("--out", dest)], [("the sweep table", src)])
    df = read_sweep(src)
    if heatmap_keys is not None:
        y = y or default_heatmap_y(df, baseline)
        fig = heatmap(df, heatmap_keys[0], heatmap_keys[1], y, contour=contour, source=str(src),
                      baseline=baseline)
    else:
        fig = line_plot(df, x, y or ("speedup" if baseline else "cycles"), hue,
                        source=str(src), baseline=baseline)
    return save_figure(fig, dest, dpi=130)


def plot_sweep_cli(args: Namespace) -> int:
    """``dspsim plot sweep``: ``args`` has file, x, y, hue, heatmap (two keys or None), out."""
    options = {name: getattr(args, name, None) for name in ("x", "y", "hue", "out", "baseline")}
    dest = plot_sweep(args.file, heatmap_keys=getattr(args, "heatmap", None), **options)
    print(f"wrote {dest}")
    for line in identical_cycles_notes_of(args.file):  # what the figure shows as flat
        print(line)
    return 0
