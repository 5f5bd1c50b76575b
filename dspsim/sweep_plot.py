"""Figures of sweep tables: line plots and two-parameter heatmaps.

``dspsim plot sweep FILE --x KEY [--y cycles] [--hue KEY]`` draws ``y`` against a swept key, one
line per value of ``--hue`` (and per value of any other key that varies); ``--heatmap KEY1 KEY2``
maps ``y`` over two keys (KEY1 across, KEY2 up), one panel per value of any other varying key.

``y`` is any numeric column of the table, or a derived figure:

- ``speedup``: direct cycles / ping-pong cycles for each combination of the other keys (the table
  needs a ``mode`` column with both versions); heatmaps draw the crossover contour where it is 1.
- ``cycles_per_element``: cycles / n.

Parameter columns are those before ``cycles`` (see ``dspsim.sweep``). Failed points (a non-empty
``error``) are left out and counted in the title. Axes are labelled with the column names, which
carry their units.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from dspsim.errors import DspsimInputError
from dspsim.sweep import key_columns, read_sweep

DERIVED = ("speedup", "cycles_per_element")
FIGURE_EXTENSIONS = (".png", ".svg", ".pdf")
MAX_PANELS = 6
MAX_LINES = 24
LINESTYLES = ("-", "--", ":", "-.")
LABELS = {
    "speedup": "speedup (direct cycles / pingpong cycles)",
    "cycles_per_element": "cycles_per_element (cycles / n)",
}


def label(column: str) -> str:
    return LABELS.get(column, column)


def _require(df: pd.DataFrame, column: str, source: str) -> None:
    if column not in df.columns:
        allowed = ", ".join([*map(str, df.columns), *DERIVED])
        raise DspsimInputError(f"column {column!r} is not in {source}; allowed: {allowed}")


def speedup_table(df: pd.DataFrame) -> pd.DataFrame:
    """Direct cycles / ping-pong cycles for each combination of the other parameter columns
    (successful points only); the keys without ``mode``, then ``speedup``."""
    keys = key_columns(df)
    if "mode" not in keys:
        raise DspsimInputError("speedup needs a mode column with both pingpong and direct")
    ok = df[df["error"] == ""] if "error" in df.columns else df
    others = [k for k in keys if k != "mode"]
    cols = {}
    for mode in ("pingpong", "direct"):
        part = ok[ok["mode"] == mode]
        if part.empty:
            raise DspsimInputError(
                f"speedup needs {mode} points; the table has none that succeeded"
            )
        cols[mode] = part.set_index(others)["cycles"].astype(float) if others else part["cycles"]
    if not others:
        value = float(cols["direct"].iloc[0]) / float(cols["pingpong"].iloc[0])
        return pd.DataFrame({"speedup": [value]})
    joined = pd.concat(cols, axis=1, join="inner")
    joined["speedup"] = joined["direct"] / joined["pingpong"]
    return joined[["speedup"]].reset_index()


def derive(df: pd.DataFrame, y: str, source: str = "the table") -> tuple[pd.DataFrame, list[str]]:
    """(rows with a numeric ``y`` column, their parameter columns), failed points left out."""
    keys = key_columns(df)
    if y == "speedup":
        table = speedup_table(df)
        return table, [k for k in keys if k != "mode"]
    ok = df[df["error"] == ""].copy() if "error" in df.columns else df.copy()
    if y == "cycles_per_element":
        _require(df, "n", source)
        ok[y] = ok["cycles"].astype(float) / ok["n"].astype(float)
        return ok, keys
    _require(df, y, source)
    values = pd.to_numeric(ok[y], errors="coerce")
    if values.isna().all() and len(ok):
        raise DspsimInputError(f"column {y!r} of {source} is not numeric")
    ok[y] = values.astype(float)
    return ok, keys


def _varying(df: pd.DataFrame, keys: Sequence[str], exclude: Sequence[str]) -> list[str]:
    return [k for k in keys if k not in exclude and df[k].nunique() > 1]


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s)


def _wide(values: np.ndarray) -> bool:
    """Spread over enough decades that a log axis reads better."""
    v = values[np.isfinite(values)]
    return v.size > 1 and (v > 0).all() and v.max() / v.min() >= 50


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float, np.integer, np.floating)) else str(v)


def _short(v: float) -> str:
    """A cell's value in at most four characters or so: 0.921, 12.3, 57.6k, 1.17M."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def _plain_ticks(axis) -> None:
    """Log axes labelled 1, 10, 100 rather than powers of ten."""
    axis.set_major_formatter(
        FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 and float(v).is_integer() else f"{v:g}")
    )


def _group_label(keys: Sequence[str], values: Any) -> str:
    values = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{k}={_fmt(v)}" for k, v in zip(keys, values))


def line_plot(
    df: pd.DataFrame,
    x: str,
    y: str = "cycles",
    hue: str | None = None,
    source: str = "the table",
) -> Figure:
    """``y`` against ``x``, one line per value of ``hue`` and of any other varying key."""
    _require(df, x, source)
    if hue is not None:
        _require(df, hue, source)
        if hue == x:
            raise DspsimInputError(f"--hue {hue} is the --x column; choose another key")
    data, keys = derive(df, y, source)
    failed = int((df["error"] != "").sum()) if "error" in df.columns else 0
    if x not in data.columns:
        raise DspsimInputError(f"--x {x}: with --y {y} the columns are {', '.join(data.columns)}")
    if hue is not None and hue not in data.columns:
        raise DspsimInputError(
            f"--hue {hue}: with --y {y} the columns are {', '.join(data.columns)}"
        )
    if data.empty:
        raise DspsimInputError(f"{source}: no successful points to plot")
    groups = ([hue] if hue else []) + _varying(data, keys, [x, hue or ""])
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    numeric_x = _is_numeric(data[x])
    categories = list(dict.fromkeys(data[x])) if not numeric_x else []
    parts = list(data.groupby(groups, sort=True)) if groups else [((), data)]
    if len(parts) > MAX_LINES:
        raise DspsimInputError(
            f"{len(parts)} lines ({', '.join(groups)} vary); at most {MAX_LINES}: "
            "plot a smaller sweep or use --heatmap"
        )
    # colour tells the first group key's values apart, line style the rest
    names = [name if isinstance(name, tuple) else (name,) for name, _ in parts]
    firsts = list(dict.fromkeys(n[:1] for n in names))
    rests = list(dict.fromkeys(n[1:] for n in names))
    for name, (_, part) in zip(names, parts):
        part = part.sort_values(x) if numeric_x else part
        xs = part[x].to_numpy() if numeric_x else [categories.index(v) for v in part[x]]
        ax.plot(
            xs,
            part[y].to_numpy(),
            marker="o",
            markersize=3.5,
            color=f"C{firsts.index(name[:1]) % 10}",
            linestyle=LINESTYLES[rests.index(name[1:]) % len(LINESTYLES)],
            label=_group_label(groups, name) if groups else None,
        )
    if numeric_x and _wide(data[x].to_numpy(dtype=float)):
        ax.set_xscale("log")
        _plain_ticks(ax.xaxis)
    if not numeric_x:
        ax.set_xticks(range(len(categories)), [str(c) for c in categories])
    if _wide(data[y].to_numpy(dtype=float)):
        ax.set_yscale("log")
        _plain_ticks(ax.yaxis)
    if y == "speedup":
        ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1, label="speedup = 1")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.grid(True, which="both", alpha=0.3)
    if groups or y == "speedup":
        ax.legend(fontsize="small")
    ax.set_title(f"{label(y)} vs {x}" + (f" ({failed} failed points not shown)" if failed else ""))
    return fig


def heatmap(
    df: pd.DataFrame,
    key_x: str,
    key_y: str,
    y: str = "cycles",
    contour: float | None = None,
    source: str = "the table",
) -> Figure:
    """``y`` over ``key_x`` (across) x ``key_y`` (up); one panel per value of any other varying
    key. ``contour``: a level to outline (default 1 for ``speedup``, none otherwise)."""
    for k in (key_x, key_y):
        _require(df, k, source)
    if key_x == key_y:
        raise DspsimInputError(f"--heatmap needs two different keys, got {key_x} twice")
    data, keys = derive(df, y, source)
    for k in (key_x, key_y):
        if k not in data.columns:
            raise DspsimInputError(
                f"--heatmap {k}: with --y {y} the columns are {', '.join(data.columns)}"
            )
    if data.empty:
        raise DspsimInputError(f"{source}: no successful points to plot")
    failed = int((df["error"] != "").sum()) if "error" in df.columns else 0
    level = 1.0 if contour is None and y == "speedup" else contour
    others = _varying(data, keys, [key_x, key_y])
    panels = list(data.groupby(others, sort=True)) if others else [((), data)]
    if len(panels) > MAX_PANELS:
        raise DspsimInputError(
            f"{len(panels)} panels ({', '.join(others)} vary besides {key_x} and {key_y}); at most "
            f"{MAX_PANELS}: plot a smaller sweep"
        )
    xs = sorted(data[key_x].unique())
    ys = sorted(data[key_y].unique())
    zall = data[y].to_numpy(dtype=float)
    vmin, vmax = np.nanmin(zall), np.nanmax(zall)
    if level is not None and vmin < level < vmax:
        norm = TwoSlopeNorm(level, vmin, vmax)
        cmap = "RdBu"
    else:
        norm, cmap = None, "viridis"
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(1.0 + 5.2 * cols, 0.6 + 4.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    image = None
    for ax, (name, part) in zip(axes, panels):
        grid = part.pivot_table(index=key_y, columns=key_x, values=y, aggfunc="mean")
        grid = grid.reindex(index=ys, columns=xs)
        z = np.ma.masked_invalid(grid.to_numpy(dtype=float))
        image = ax.imshow(
            z,
            origin="lower",
            aspect="auto",
            cmap=cmap,
            norm=norm,
            vmin=None if norm else vmin,
            vmax=None if norm else vmax,
        )
        if level is not None and z.shape[0] > 1 and z.shape[1] > 1:
            if np.nanmin(z.filled(np.nan)) < level < np.nanmax(z.filled(np.nan)):
                cs = ax.contour(z, levels=[level], colors="k", linewidths=1.6)
                ax.clabel(cs, fmt=lambda v: f"{y} = {v:g}", fontsize="small")
        if z.size <= 150:
            for (i, j), v in np.ndenumerate(z.filled(np.nan)):
                if np.isfinite(v):
                    r, g, b, _ = image.cmap(image.norm(v))
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                    ax.text(
                        j,
                        i,
                        _short(v),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if dark else "black",
                    )
        _ticks(ax.set_xticks, xs)
        _ticks(ax.set_yticks, ys)
        ax.set_xlabel(label(key_x))
        ax.set_ylabel(label(key_y))
        if others:
            ax.set_title(_group_label(others, name), fontsize="medium")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.colorbar(image, ax=axes[: len(panels)].tolist(), label=label(y))
    fig.suptitle(
        f"{y} over {key_x} x {key_y}" + (f" ({failed} failed points not shown)" if failed else "")
    )
    return fig


def _ticks(setter, values: Sequence[Any], most: int = 12) -> None:
    step = max(1, math.ceil(len(values) / most))
    idx = list(range(0, len(values), step))
    setter(idx, [_fmt(values[i]) for i in idx])


def plot_sweep(
    path: str | Path,
    x: str | None = None,
    y: str | None = "cycles",
    hue: str | None = None,
    heatmap_keys: Sequence[str] | None = None,
    out: str | Path | None = None,
    contour: float | None = None,
) -> Path:
    """Draw a sweep file (line plot on ``x`` or heatmap on two keys) and save it; returns the
    figure's path (default: the table's path with ``.png``)."""
    src = Path(path)
    y = y or "cycles"
    dest = Path(out) if out is not None else src.with_suffix(".png")
    if dest.suffix not in FIGURE_EXTENSIONS:
        raise DspsimInputError(
            f"figure {str(dest)!r}: unknown extension {dest.suffix or '(none)'!r}; "
            f"allowed {', '.join(FIGURE_EXTENSIONS)}"
        )
    if heatmap_keys is not None and len(heatmap_keys) != 2:
        raise DspsimInputError("--heatmap needs exactly two keys: KEY1 KEY2")
    if heatmap_keys is None and x is None:
        raise DspsimInputError("give --x KEY for a line plot or --heatmap KEY1 KEY2 for a map")
    if heatmap_keys is not None and hue is not None:
        raise DspsimInputError("--heatmap draws two keys; leave out --hue")
    if heatmap_keys is not None and x is not None and x not in heatmap_keys:
        raise DspsimInputError(f"--x {x} is not one of the --heatmap keys; leave it out")
    df = read_sweep(src)
    if heatmap_keys is not None:
        fig = heatmap(df, heatmap_keys[0], heatmap_keys[1], y, contour=contour, source=str(src))
    else:
        fig = line_plot(df, x, y, hue, source=str(src))
    if not dest.parent.is_dir():
        raise DspsimInputError(f"figure directory {str(dest.parent)!r} does not exist")
    fig.savefig(dest, dpi=130)
    return dest


def plot_sweep_cli(args: argparse.Namespace) -> int:
    """``dspsim plot sweep``: ``args`` has file, x, y, hue, heatmap (two keys or None), out."""
    dest = plot_sweep(
        args.file,
        x=getattr(args, "x", None),
        y=getattr(args, "y", None),
        hue=getattr(args, "hue", None),
        heatmap_keys=getattr(args, "heatmap", None),
        out=getattr(args, "out", None),
    )
    print(f"wrote {dest}")
    return 0
