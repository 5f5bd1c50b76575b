"""``dspsim plot`` and ``dspsim report``: figures and text from saved results."""

from __future__ import annotations

import argparse
import sys

from dspsim.cli.common import _Parser, add_op_file_args
from dspsim.errors import DspsimInputError


def add_plot(sub) -> None:
    p = sub.add_parser("plot", help="figures from saved results, without simulating again")
    kinds = p.add_subparsers(
        dest="plot_kind", metavar="{timeline,sweep}", required=True, parser_class=_Parser
    )
    t = kinds.add_parser("timeline", help="timeline of a run saved by `dspsim run --save`")
    t.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")
    t.add_argument("--out", metavar="FILE.png|.svg|.pdf", help="default: RESULT_timeline.png")
    t.add_argument("--window", metavar="START:END", help="cycles from the op's timer start")
    s = kinds.add_parser("sweep", help="figure from a table written by `dspsim sweep`")
    s.add_argument("file", metavar="FILE", help="sweep table")
    s.add_argument("--x", metavar="KEY", help="column on the x axis (line plots)")
    s.add_argument("--y", default=None, metavar="KEY",
                   help="column on the y axis (a heatmap's colour), or speedup (the baseline "
                   "variant's cycles / each other variant's: above 1 the variant is faster) or "
                   "cycles_per_element (default: cycles; speedup when --baseline is given)")
    s.add_argument("--baseline", metavar="V",
                   help="the variant speedup divides by (default: the op's default variant; "
                   "implies --y speedup)")
    s.add_argument("--hue", metavar="KEY",
                   help="one line per value of this column (variant and mode are one column)")
    s.add_argument("--heatmap", nargs=2, metavar=("KEY1", "KEY2"), help="y over two keys")
    s.add_argument("--out", metavar="FILE", help="figure file")
    for kind in (t, s):  # a table's columns, a saved run's model
        add_op_file_args(kind)


def cmd_plot(args: argparse.Namespace) -> int:
    """``dspsim plot sweep`` (:mod:`dspsim.study.sweep_plot`), or ``dspsim plot timeline RESULT
    [--out FILE] [--window START:END]``."""
    if args.plot_kind == "sweep":
        from dspsim.study.sweep_plot import plot_sweep_cli

        return plot_sweep_cli(args)
    from dspsim.analysis import timeline
    from dspsim.paths import check_distinct
    from dspsim.results import load_run

    out = timeline.check_figure_path(args.out or timeline.default_timeline_path(args.result))
    check_distinct([("RESULT", args.result), ("--out", out)])
    window = timeline.parse_window(args.window) if args.window is not None else None
    result = load_run(args.result)
    if result.port_log is None:
        raise DspsimInputError(f"{args.result!r} was saved without its port log")
    timeline.plot_timeline(result, out, window)
    note = cut_trace_note(result)
    if note:
        print(note, file=sys.stderr)
    print(f"wrote timeline to {out}")
    return 0


def cut_trace_note(result) -> str | None:
    """One line when ``--trace-limit`` cut the run's trace or a memory's port log (what is
    drawn or summed from it covers only the run's start), else None."""
    from dspsim.analysis.engines import memory_label
    from dspsim.analysis.series import memory_logs, port_log_cut_cycle

    dropped = int(result.trace.attrs.get("rows_dropped", 0)) if result.trace is not None else 0
    cuts = []
    trace_cut = getattr(result, "trace_cut_cycle", None)
    if trace_cut is not None or dropped:
        where = f"cycle {trace_cut:,.0f}" if trace_cut is not None else "the limit"
        cuts.append(f"its trace up to {where} ({len(result.trace):,} rows kept, "
                    f"{dropped:,} not)")
    port_cuts = {m: port_log_cut_cycle(result, m) for m in memory_logs(result)}
    cuts += [f"its {memory_label(m)} port log up to cycle {cut:,.0f}"
             for m, cut in port_cuts.items() if cut is not None]
    if not cuts:
        return None
    return (f"note: --trace-limit kept {' and '.join(cuts)} of its {result.cycles:,} cycles: "
            "what follows from those covers only the run's start")


def add_report(sub) -> None:
    p = sub.add_parser("report", help="where the time goes in a run saved by `dspsim run --save`")
    p.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")


def cmd_report(args: argparse.Namespace) -> int:
    """``dspsim report RESULT``: the note on a cut trace, then the report."""
    from dspsim.analysis.report import report_text
    from dspsim.results import load_run

    result = load_run(args.result)
    note = cut_trace_note(result)
    if note:
        print(note)
    print(report_text(result))
    return 0
