"""``dspsim sweep``: the command line of ``dspsim.study.sweep``."""

from __future__ import annotations

import argparse
import sys

from dspsim.cli.common import add_model_args, check_outputs_not_inputs
from dspsim.errors import DspsimInputError
from dspsim.platform import FIDELITIES
from dspsim.study.sweep.executors import EXECUTORS  # light: the grid and the table load later


def shape_values(text: str | None) -> str | None:
    """``--shape``: one shape as ``R,C`` (``1024,256``), or a list of ``ROWSxCOLS``
    (``1024x256,512x512``); returned as the sweep's ``ROWSxCOLS,...`` text."""
    if text is None or "x" in text.lower():
        return text
    return "x".join(t.strip() for t in text.split(","))


def add_sweep(sub) -> None:
    from dspsim.ops import default_op, get_op, op_names

    p = sub.add_parser(
        "sweep",
        help="run a grid of model keys, ops, variants and input sizes into a CSV or parquet "
        "table (resumable)",
        description="Each finished point is written at once; rerunning the same command "
        "computes only the missing points. Exit codes: 0 all points succeeded, 1 some failed "
        "(count on stderr), 2 bad input, 130 interrupted (finished points are kept).",
    )
    p.add_argument("--param", metavar="KEY=VALUES", action="append", default=[],
                   help="swept key: KEY=V1,V2,... or KEY=START:STOP:STEP (STOP included when on "
                   "the grid); any model key, op, variant (or mode), n or shape (ROWSxCOLS) "
                   "(repeatable)")
    p.add_argument("--op", metavar="OP", help=f"operator(s), of one input dimension: "
                   f"{', '.join(op_names())} (default {default_op()})")
    studied = "; ".join(f"{o.name}: {','.join(o.study_variants)}" for o in map(get_op, op_names())
                        if o.study_variants)
    p.add_argument("--variant", metavar="V1,V2",
                   help=f"the op's variants (default: those the op's studies compare, {studied}; "
                   "every variant of an op that names none)")
    p.add_argument("--mode", metavar="V1,V2",
                   help="older name of --variant (the table's column is then mode, not variant)")
    p.add_argument("--n", help="a 1-D op's size: float32 elements, bytes for copy (default: the "
                   "op's); a list or range sweeps it")
    p.add_argument("--shape", metavar="R,C",
                   help="a 2-D op's input shape (default: the op's); a list: 1024x256,512x512")
    add_model_args(p, set_help="fix a model key for every point (repeatable)", models=True)
    p.add_argument("--spec", metavar="FILE.toml",
                   help="sweep spec file (see dspsim.study.sweep.spec)")
    p.add_argument("--out", required=True, metavar="FILE", help="output .csv or .parquet")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes, 1 to 256 (default 1; never more than the points to "
                   "compute)")
    p.add_argument("--fidelity", choices=FIDELITIES, help="simulation fidelity (default tile)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local worker processes (default), or dask: a cluster at --scheduler, "
                   "else a local one of --jobs workers (pip install -e '.[dask]')")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--retry-failed", action="store_true",
                   help="compute again the points that failed before")


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run ``dspsim sweep``. Exit 0: every point succeeded; 1: some failed (count on stderr) or
    the sweep was aborted; 2: bad input; 130: interrupted."""
    from dspsim.study.sweep import SweepAbortedError, build_sweep, run_sweep
    from dspsim.study.sweep.files import journal_path, sidecar_path
    from dspsim.study.sweep.journal import check_run
    from dspsim.study.sweep.same import identical_cycles_notes_of
    from dspsim.workers import check_jobs

    check_jobs(args.jobs)
    out = check_run(args.out, args.executor, args.scheduler, args.jobs)
    if args.variant is not None and args.mode is not None:
        raise DspsimInputError("give --variant or --mode (its older name), not both")
    check_outputs_not_inputs(args, [("--out", out), ("--out's journal", journal_path(out)),
                                    ("--out's sidecar", sidecar_path(out))],
                             [("--spec", args.spec)])
    sweep = build_sweep(args.param, op=args.op, variants=args.variant, modes=args.mode, n=args.n,
                        shape=shape_values(args.shape), model=args.model, models=args.models,
                        overrides=args.overrides, fidelity=args.fidelity, spec=args.spec)
    kept = f"finished points are in {journal_path(out)}; rerun the same command to finish"
    try:
        summary = run_sweep(sweep, out, jobs=args.jobs, executor=args.executor,
                            scheduler=args.scheduler, retry_failed=args.retry_failed)
    except KeyboardInterrupt:
        print(f"dspsim: interrupted; {kept}", file=sys.stderr)
        return 130
    except SweepAbortedError as e:
        print(f"dspsim: error: {e}; {kept}", file=sys.stderr)
        return 1
    print(summary.line())
    for line in identical_cycles_notes_of(out):  # values of a key that did not move the answer
        print(line)
    if summary.failed:
        print(f"dspsim: {summary.failed} of {summary.points} points failed; see the error column "
              f"of {out}", file=sys.stderr)
        return 1
    return 0
