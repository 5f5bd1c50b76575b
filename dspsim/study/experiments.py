"""Canned sweeps: the sweep the scripts in ``experiments/`` run (their arguments and entry
point are ``experiments/_results.py``'s), and the sweep benchmark of ``python -m dspsim.bench``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.study.sweep import DEFAULT_N, DEFAULT_OP, build_sweep, ok_rows, read_sweep, run_sweep


def run_experiment(name: str, args: argparse.Namespace, default_dir: Path,
                   shown_dir: Path | None = None, **sweep_args: Any) -> tuple[pd.DataFrame, Path]:
    """Run an experiment's sweep afresh into ``<dir>/<name>.csv``; return its table and the
    directory. ``sweep_args`` go to :func:`build_sweep`; ``shown_dir``: the folder the messages
    name (where the file ends up, when it is written in a staging folder first)."""
    out_dir = Path(args.out_dir) if args.out_dir else default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / f"{name}.csv"
    summary = run_sweep(build_sweep(fidelity=args.fidelity, **sweep_args), csv_path,
                        jobs=args.jobs, fresh=True)
    shown = (shown_dir / csv_path.name) if shown_dir is not None else csv_path
    print(f"{summary.line().replace(str(csv_path), str(shown))} [{args.fidelity} fidelity]",
          file=sys.stderr)
    df = read_sweep(csv_path)
    if summary.failed:
        print(f"{name}: {summary.failed} points failed; see {shown}", file=sys.stderr)
    return ok_rows(df).reset_index(drop=True), out_dir


def bench_sweep(points: int = 1000, jobs: int = 2, n: int = DEFAULT_N, fidelity: str = "tile",
                executor: str = "local") -> dict[str, float]:
    """Time a ``points``-point sweep (the variants the default op studies x DDR latencies from
    20 to 2,000 cycles) into a temporary file with ``jobs`` worker processes (``executor``
    ``dask``: a local dask cluster of ``jobs`` worker processes, its start-up included)."""
    op = get_op(DEFAULT_OP)
    variants = len(op.study_variants or op.variants)
    if points < variants:
        raise DspsimInputError(f"points = {points}: at least {variants} (every variant)")
    count = points // variants
    latencies = sorted({float(f"{20 + 1980 * i / max(1, count - 1):.6g}") for i in range(count)})
    sweep = build_sweep({"ddr.latency_cycles": latencies}, n=n, fidelity=fidelity)
    with tempfile.TemporaryDirectory() as d:
        summary = run_sweep(sweep, Path(d) / "bench.csv", jobs=jobs, progress=False,
                            executor=executor)
    return {"points": summary.points, "wall_s": summary.wall_s,
            "points_per_s": summary.points / summary.wall_s}
