"""Canned sweeps: what the scripts in ``experiments/`` share, and the sweep benchmark of
``python -m dspsim.bench``. An experiment's table is written by :func:`run_sweep` (its journal,
then the whole file atomically through :mod:`dspsim.paths`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.platform import FIDELITIES
from dspsim.study.sweep import DEFAULT_N, DEFAULT_OP, build_sweep, read_sweep, run_sweep


def experiment_parser(description: str) -> argparse.ArgumentParser:
    """Options shared by the scripts in ``experiments/``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument(
        "--fidelity", choices=FIDELITIES, default="burst",
        help="default: burst, the reference (an experiment's grid is small); tile is the fast "
        "approximation for large sweeps, exact where the port is not contended",
    )
    p.add_argument("--out-dir", metavar="DIR", help="where to write (default: results/)")
    return p


def run_experiment(
    name: str, args: argparse.Namespace, default_dir: Path, **sweep_args: Any
) -> tuple[pd.DataFrame, Path]:
    """Run an experiment's sweep afresh into ``<dir>/<name>.csv``; return its table and the
    directory. ``sweep_args`` go to :func:`build_sweep`."""
    out_dir = Path(args.out_dir) if args.out_dir else default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    fidelity = args.fidelity
    sweep = build_sweep(fidelity=fidelity, **sweep_args)
    csv_path = out_dir / f"{name}.csv"
    summary = run_sweep(sweep, csv_path, jobs=args.jobs, fresh=True)
    print(f"{summary.line()} [{fidelity} fidelity]", file=sys.stderr)
    df = read_sweep(csv_path)
    if summary.failed:
        print(f"{name}: {summary.failed} points failed; see {csv_path}", file=sys.stderr)
    return df[df["error"] == ""].reset_index(drop=True), out_dir


def script_main(main) -> None:
    """Run an experiment's ``main()``: bad input is one line on stderr and exit 2."""
    try:
        main()
    except DspsimInputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def bench_sweep(
    points: int = 1000, jobs: int = 2, n: int = DEFAULT_N, fidelity: str = "tile"
) -> dict[str, float]:
    """Time a ``points``-point sweep (the variants the default op studies x DDR latencies from
    20 to 2,000 cycles) into a temporary file with ``jobs`` worker processes."""
    op = get_op(DEFAULT_OP)
    variants = len(op.study_variants or op.variants)
    if points < variants:
        raise DspsimInputError(f"points = {points}: at least {variants} (every variant)")
    count = points // variants
    latencies = sorted({float(f"{20 + 1980 * i / max(1, count - 1):.6g}") for i in range(count)})
    sweep = build_sweep({"ddr.latency_cycles": latencies}, n=n, fidelity=fidelity)
    with tempfile.TemporaryDirectory() as d:
        summary = run_sweep(sweep, Path(d) / "bench.csv", jobs=jobs, progress=False)
    return {
        "points": summary.points,
        "wall_s": summary.wall_s,
        "points_per_s": summary.points / summary.wall_s,
    }
