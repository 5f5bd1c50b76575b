"""``dspsim workload FILE.toml``: streams of DSP tasks on one or more cores."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from dspsim.cli.common import (
    UsageError,
    add_model_args,
    check_outputs_not_inputs,
    counter,
    emit_json,
    int_in,
    model_from_args,
)
from dspsim.ops import get_op
from dspsim.ops.base import refuse_idle_keys
from dspsim.platform import FIDELITIES
from dspsim.text import cell, column_width  # a name as the file gives it: escaped, cut
from dspsim.workers import MAX_JOBS


def add_workload(sub) -> None:
    p = sub.add_parser(
        "workload", help="run streams of tasks (periods, priorities, backends) on the cores",
        description="Run a workload file: streams of RPC tasks released periodically, "
        "scheduled by the UCP (priority 0-255, higher first, FIFO within a priority, no "
        "preemption) on core<K> or any core; report latency percentiles, deadline misses, "
        "core and DDR utilisation and the queue's backlog.",
    )
    p.add_argument("file", metavar="FILE.toml", help="the workload (see docs/workloads.md)")
    add_model_args(p, set_help="override a model key, e.g. core.count=2 (repeatable)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--out", metavar="TASKS.csv", help="one row per task (written atomically)")
    p.add_argument("--timeline", metavar="FILE.png|.svg",
                   help="tasks per core coloured by stream, queue length, DDR utilisation")
    p.add_argument("--trace", metavar="FILE.json",
                   help="Chrome Trace Event file: a thread per core, the queue as a counter")
    p.add_argument("--fidelity", choices=FIDELITIES, default="tile",
                   help="tile (default: the fast engine) or burst (every DDR access an event)")
    p.add_argument("--data", action="store_true",
                   help="move values too (each stream's default input; slower)")
    p.add_argument("--no-reuse", dest="reuse", action="store_false",
                   help="simulate every task (by default a task whose op runs alone on an "
                   "idle platform is booked from an earlier one of its stream on its core: "
                   "the same result)")
    p.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=1, metavar="N",
                   help=f"run in N parts at once, in worker processes, 1 to {MAX_JOBS} "
                   "(default 1): the same tasks, joined where the platform is idle; the "
                   "progress count moves as parts are joined; a platform with a data cache "
                   "is never idle between tasks and runs in one part, as a short run does "
                   "(a line on stderr says so)")


def _check_outputs(args: argparse.Namespace) -> dict[str, Path]:
    from dspsim.analysis.workload_plots import check_figure_path, check_trace_path
    from dspsim.study.workload import check_csv_path

    named = {}
    for opt, value, check in (("--out", args.out, check_csv_path),
                              ("--timeline", args.timeline, check_figure_path),
                              ("--trace", args.trace, check_trace_path)):
        if value:
            path = check(value)
            for other, other_path in named.items():
                if other_path.resolve() == path.resolve():
                    raise UsageError(f"workload: {other} and {opt} name the same file {value!r}")
            named[opt] = path
    check_outputs_not_inputs(args, list(named.items()), [("FILE", args.file)])
    return named


def cmd_workload(args: argparse.Namespace) -> int:
    try:
        return _workload(args)
    except MemoryError:  # anywhere: reading, simulating, the tables, the figures
        raise UsageError(
            f"workload {args.file!r}: out of memory; run fewer tasks (each takes a few KB, "
            "more with --out, --timeline and --trace) or give the process more memory"
        ) from None


def _workload(args: argparse.Namespace) -> int:
    from dspsim.analysis.workload_plots import plot_workload, write_workload_trace
    from dspsim.study import workload as wl

    model = model_from_args(args)
    workload = wl.load_workload(args.file)
    refuse_idle_keys([o.partition("=")[0].strip() for o in args.overrides],
                     [(get_op(s.op), s.variant) for s in workload.streams], "--set",
                     "a stream of op ")
    outputs = _check_outputs(args)
    with counter("workload", total=workload.tasks, unit="task") as bar:  # on a terminal
        run = wl.run_workload(workload, model, fidelity=args.fidelity, data=args.data,
                              ddr_profile=bool(args.timeline or args.trace),
                              on_task_done=bar.update, reuse=args.reuse, jobs=args.jobs)
    if run.parts_note:  # fewer parts than --jobs asked for: say why, whatever the output
        print(f"dspsim: warning: --jobs {args.jobs}: {run.parts_note}", file=sys.stderr)
    df = wl.task_table(run)
    summary = wl.summarise(run, df)
    written = []
    if "--out" in outputs:
        wl.write_tasks_csv(df, outputs["--out"])
        written.append(f"wrote {len(df):,} task rows to {outputs['--out']}")
    if "--timeline" in outputs:
        plot_workload(run, df, outputs["--timeline"])
        written.append(f"wrote timeline to {outputs['--timeline']}")
    if "--trace" in outputs:
        write_workload_trace(run, df, outputs["--trace"])
        written.append(f"wrote Perfetto trace to {outputs['--trace']} (open in "
                       "ui.perfetto.dev)")
    if args.json:
        emit_json(summary | {"files": written})
        return 0
    print_summary(summary, model)
    for line in written:
        print(f"  {line}")
    return 0


def _ms(us: float) -> str:
    return f"{us / 1000:,.2f} ms"


def print_summary(s: dict[str, Any], model: Any) -> None:
    """The summary of a workload run, for a terminal."""
    _print_run(s, model)
    _print_streams(s, model.core.clock_mhz)
    _print_shared(s)


def _print_run(s: dict[str, Any], model: Any) -> None:
    """What ran, how long it took, what was reused, what the latency means."""
    print(f"workload {s['workload']} on {cell(model.name)}: {s['cores']} core(s), "
          f"{len(s['streams'])} stream(s), {s['tasks']:,} tasks, {s['fidelity']} fidelity, "
          f"seed {s['seed']}")
    print(f"  simulated {_ms(s['end_us'])} ({s['end_cycle']:,} cycles at "
          f"{model.core.clock_mhz:g} MHz) in {s['wall_s']:.2f} s wall, {s['events']:,} events")
    r = s["reuse"]
    if not r["enabled"]:
        print(f"  reuse off (--no-reuse): all {s['tasks']:,} tasks simulated, in "
              f"{r['episodes']:,} episode(s)")
    else:
        print(f"  reused {r['reused_tasks']:,} of {s['tasks']:,} tasks (each booked from an "
              "earlier task of its stream on its core, its op alone on an idle platform); "
              f"simulated {r['simulated_tasks']:,} in {r['episodes']:,} episode(s)")
    if r["note"]:
        print(f"  note: {r['note']}")
    print(f"  latency = submit to done, including the host RPC round trip of "
          f"{s['rpc_latency_us']:g} us per task (half on submit, half on completion); op_us = "
          "mean of the ops' own time (their TIME_STAMP span, as `dspsim run` reports it)")


def _print_streams(s: dict[str, Any], clock: float) -> None:
    """One row per stream: latency percentiles, deadline misses, throughput."""
    ops = [st["op"] + "/" + st["variant"] for st in s["streams"]]
    nw = max(14, column_width([st["name"] for st in s["streams"]], "stream"))
    ow = max(19, column_width(ops, "op/variant"))  # as wide as their cells: rows stay aligned
    print(f"  {'stream':<{nw}} {'op/variant':<{ow}} {'prio':>4} {'backend':>7} {'tasks':>6} "
          f"{'op_us':>9} {'p50_us':>9} {'p95_us':>9} {'p99_us':>9} {'max_us':>9} "
          f"{'deadline_us':>11} {'missed':>6} {'tasks/s':>8}")
    for st, op in zip(s["streams"], ops):
        lat = st["latency_us"]
        dl = "-" if st["deadline_us"] is None else f"{st['deadline_us']:,.0f}"
        tput = "-" if st["throughput_per_s"] is None else f"{st['throughput_per_s']:.2f}"
        print(f"  {cell(st['name']):<{nw}} {cell(op):<{ow}} "
              f"{st['priority']:>4} {st['backend']:>7} {st['tasks']:>6,} "
              f"{st['op_cycles']['mean'] / clock:>9,.0f} {lat['p50']:>9,.0f} "
              f"{lat['p95']:>9,.0f} {lat['p99']:>9,.0f} {lat['max']:>9,.0f} {dl:>11} "
              f"{st['deadline_misses']:>6,} {tput:>8}")


def _mb(nbytes: int) -> str:
    """Megabytes to at least 3 significant digits (a short run's 32,768 bytes are 0.0328 MB,
    not 0.0 MB), to 0.1 MB from 10 MB."""
    mb = nbytes / 1e6
    return f"{mb:,.{max(1, 2 - math.floor(math.log10(mb)))}f} MB" if mb > 0 else "0 MB"


def _print_shared(s: dict[str, Any]) -> None:
    """The cores, the host memory's port, the queue, deadline misses and notes."""
    print("  " + ", ".join(
        f"{c['core']} {100 * c['utilisation']:.1f} % busy ({c['tasks']:,} tasks)"
        for c in s["core_utilisation"]))
    d = s["ddr"]
    m = d["memory"]  # the host memory's port (J6: ddr), its bytes keyed by its name
    print(f"  {m.upper()} port {100 * d['utilisation']:.1f} % busy (data path; "
          f"{_mb(d['bytes'][f'{m}_read'])} read, {_mb(d['bytes'][f'{m}_write'])} written)")
    q = s["queue"]
    verdict = "OVERLOADED: the backlog grows" if q["overloaded"] else "the backlog does not grow"
    longest = (f"longest backlog {q['longest_backlog']:,} task(s) waiting (at "
               f"{_ms(q['longest_backlog_at_us'])})" if q["longest_backlog"] else
               "no task ever waited for a core")
    print(f"  queue: {longest}; outstanding tasks rise by {q['backlog_growth']:+.1f} over the "
          f"releases: {verdict}")
    if s["deadline_misses"]:
        print(f"  {s['deadline_misses']:,} deadline miss(es)")
    for w in s["warnings"]:
        print(f"  note [{w['code']}] x{w['count']:,}: {w['message']}")
