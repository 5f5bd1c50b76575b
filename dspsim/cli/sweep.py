"""``dspsim sweep`` and ``dspsim optimize``: the command lines of ``dspsim.study.sweep`` and
:mod:`dspsim.study.optimize`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dspsim.cli.common import (
    add_model_args,
    check_outputs_not_inputs,
    emit_json,
    int_in,
    positive_int,
    positive_shape,
)
from dspsim.errors import DspsimInputError
from dspsim.ops import default_op, get_op, op_names
from dspsim.paths import atomic_write_text, writable_file
from dspsim.platform import FIDELITIES
from dspsim.study.sweep.executors import EXECUTORS  # light: the grid and the table load later
from dspsim.workers import MAX_JOBS, check_jobs


def shape_values(text: str | None) -> str | None:
    """``--shape``: one shape as ``R,C`` (``1024,256``), or a list of ``ROWSxCOLS``
    (``1024x256,512x512``); returned as the sweep's ``ROWSxCOLS,...`` text."""
    if text is None or "x" in text.lower():
        return text
    return "x".join(t.strip() for t in text.split(","))


def add_sweep(sub) -> None:
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


def add_optimize(sub) -> None:
    p = sub.add_parser(
        "optimize",
        help="find the fastest variant and parameters of an op: screen every candidate at tile "
        "fidelity, re-run the best at burst, rank them against the op's default variant",
        description="The candidates are the op's variants times the parameters the op searches "
        "for each (tile sizes, buffer counts; `--param` adds or replaces axes). Each is screened "
        "at tile fidelity with the data path off, the best --top are re-run at burst fidelity, "
        "and the winner once more with the data path on to check its numerics. Combinations the "
        "op refuses are skipped and counted. A run carrying a result-changing warning or a "
        "hazard ranks after every clean one. With --models, candidates are ranked by their "
        "worst case over the model files. Exit codes: 0 done, 1 some candidates failed (count "
        "on stderr), 2 bad input, 130 interrupted.",
    )
    p.add_argument("--op", default=default_op(), metavar="OP",
                   help=f"operator: {', '.join(op_names())} (default {default_op()})")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--n", type=positive_int,
                      help="a 1-D op's input size in the op's unit (float32 elements; copy: "
                      "bytes)")
    size.add_argument("--shape", type=positive_shape, metavar="R,C",
                      help="input shape, e.g. 8192,1024 (default: the op's default shape)")
    p.add_argument("--variants", metavar="V1,V2",
                   help="the variants to search (default: every variant of the op)")
    p.add_argument(
        "--param", metavar="KEY=VALUES", action="append", default=[],
        help="search a model key over KEY=V1,V2,... or KEY=START:STOP:STEP: a hardware key "
        "(e.g. idma.max_outstanding=8,32) for every variant it acts in; a key of the op's table "
        "replaces the op's own values in the variants that search it; a key that acts in none "
        "is refused (repeatable)",
    )
    p.add_argument("--models", metavar="A.toml,B.toml",
                   help="rank by the worst case over these model files (paths or packaged names)")
    add_model_args(p, set_help="override a model key for every run, e.g. ddr.latency_cycles=300 "
                   "(repeatable; with --models, in every model)")
    p.add_argument("--top", type=positive_int, default=5, metavar="K",
                   help="re-run the best K at burst fidelity (default 5)")
    p.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=1, metavar="N",
                   help=f"worker processes, 1 to {MAX_JOBS} (default 1; never more than the "
                   "runs to screen)")
    p.add_argument("--no-check", action="store_true",
                   help="do not re-run the winner with the data path on (no max_rel_err)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--out", metavar="FILE.csv", help="write the ranked table to a CSV file")


def _fmt(v: Any, spec: str = ",") -> str:
    return "-" if v is None else format(v, spec)


def _print_search(res: Any, op: Any) -> None:
    """What was searched, on which models, and the baseline."""
    from dspsim.study.optimize import RERUN_FIDELITY, SCREEN_FIDELITY

    size = " x ".join(f"{d:,}" for d in res.shape) + f" {op.size_unit}"
    where = ", ".join(k if k == v else f"{k} ({v})" for k, v in res.models.items())
    worst = " (worst case over the models)" if len(res.models) > 1 else ""
    print(f"{res.op} of {size} on {where}")
    refused = f", {res.refused} refused by the op" if res.refused else ""
    failed = f", {res.failed} failed" if res.failed else ""
    print(f"{len(res.screened)} candidates screened at {SCREEN_FIDELITY} fidelity{refused}"
          f"{failed}; the best {len(res.candidates)} re-run at {RERUN_FIDELITY}{worst}")
    base = res.baseline
    if base is None:
        print(f"baseline: {op.default_variant} cannot run here ({res.baseline_refused}); "
              "no speed-ups")
        return
    print(f"baseline: {op.default_variant} (the op's default) at the model's values: "
          f"{base.cycles:,} cycles{worst}")
    if base.flagged:
        print(f"  note: the baseline's run carries {';'.join(base.warnings) or 'hazards'} "
              "(a result-changing warning): its cycles may not be the work it does, and "
              "the speed-ups are relative to them")


def _table(res: Any) -> tuple[list[str], list[list[str]]]:
    """The ranked re-runs: the header and a row of cells each."""
    from dspsim.study.optimize import params_text

    many = len(res.models) > 1
    header = ["rank", "variant", "parameters", "cycles"]
    if many:  # a column per model, named by its file's name when those differ
        names = [Path(m).name for m in res.models]
        header += names if len(set(names)) == len(names) else list(res.models)
    memories = list(dict.fromkeys(m for c in res.candidates for m in c.read_bytes))
    header += ["speedup", *(f"{m}_bytes" for m in memories), "lower_bound_cycles", "gap_%",
               "core_busy_%", "warnings", "hazards"]
    rows = []
    for c in res.candidates:
        row = [str(c.rank), c.variant, params_text(c.params, f"{res.op}.") or "(defaults)",
               _fmt(c.cycles)]
        if many:
            row += [_fmt(c.cycles_by_model.get(m)) for m in res.models]
        row += [
            "-" if c.speedup is None else f"{c.speedup:.2f}x",
            *(_fmt(c.read_bytes[m] + c.write_bytes[m]) if m in c.read_bytes else "-"
              for m in memories),
            _fmt(c.lower_bound_cycles, ",.0f"), _fmt(c.gap_pct, "+.1f"),
            _fmt(c.core_busy_pct, ".1f"), ";".join(c.warnings) or "-", str(c.hazards),
        ]
        rows.append(row)
    return header, rows


def _print_best(res: Any, op: Any) -> None:
    """The winner, its numerics, and a warning when every candidate is flagged."""
    from dspsim.study.optimize import params_text

    best = res.best
    line = f"best: {best.variant} {params_text(best.params, f'{res.op}.')}".rstrip()
    line += f", {best.cycles:,} cycles"
    if best.speedup is not None:
        line += f", speed-up {best.speedup:.2f}x over {op.default_variant}"
    if best.gap_pct is not None:
        line += f", {best.gap_pct:.1f} % above its lower bound"
    print(line)
    num = res.numerics
    if num is not None and num.get("error"):
        print(f"numerics: the run with the data path on failed: {num['error']}")
    elif num is not None:
        err = num.get("max_rel_err")
        shown = "n/a" if err is None else f"{err:.3g}"
        note = "" if num.get("cycles_match", True) else (
            " (NOTE: its cycles with the data path on differ from the timing-only run)")
        what = f"max relative error {shown} against the float64 reference"
        if "exact" in num:  # an integer or byte output (copy, fc), against its exact reference
            what = (f"the output {'equals' if num['exact'] else 'DIFFERS FROM'} the reference "
                    f"bit for bit ({num.get('mismatch_count', 0):,} elements differ)")
        elif "values" in num:  # nothing compared (a kernel microbenchmark's zeros)
            what = f"no output checked ({num['values']})"
        print(f"numerics (data path on, model {num['model']}): {what}{note}")
    if best.flagged:
        print("warning: every candidate carries a result-changing warning or a hazard; the "
              "ranking is by cycles that may not be the work done")


def cmd_optimize(args: argparse.Namespace) -> int:
    """Run ``dspsim optimize``. Exit 0: done; 1: some candidates failed; 2: bad input; 130:
    interrupted."""
    from dspsim.analysis.tiles import table_text
    from dspsim.study.optimize import optimize

    out = writable_file(args.out, "--out", (".csv",)) if args.out else None
    check_outputs_not_inputs(args, [("--out", out)])
    res = optimize(args.op, n=args.n, shape=args.shape, variants=args.variants,
                   params=args.param, model=args.model, models=args.models,
                   overrides=args.overrides, top=args.top, jobs=args.jobs,
                   check_numerics=not args.no_check)
    if out is not None:
        atomic_write_text(out, res.csv_text(), "--out")
    if args.json:
        emit_json(res.to_json())
    else:  # what was searched, the ranked table, the winner
        _print_search(res, get_op(res.op))
        print(table_text(*_table(res), left={1, 2}, rule=False))  # variant, parameters: text
        _print_best(res, get_op(res.op))
        if out is not None:
            print(f"wrote the ranked table to {out}")
    if res.failed:
        print(f"dspsim: {res.failed} candidates failed (e.g. {res.failures[0]})",
              file=sys.stderr)
        return 1
    return 0
