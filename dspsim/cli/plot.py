"""``dspsim plot`` and ``dspsim report``: figures and text from saved results."""

from __future__ import annotations

import argparse

from dspsim.cli.common import _Parser
from dspsim.errors import DspsimInputError


def add_plot(sub) -> None:
    p = sub.add_parser("plot", help="figures from saved results, without simulating again")
    kinds = p.add_subparsers(
        dest="plot_kind", metavar="{timeline,sweep}", required=True, parser_class=_Parser
    )
    t = kinds.add_parser("timeline", help="timeline of a run saved by `dspsim run --save`")
    t.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")
    t.add_argument("--out", metavar="FILE.png|.svg", help="default: RESULT_timeline.png")
    t.add_argument("--window", metavar="START:END", help="cycles from the op's timer start")
    s = kinds.add_parser("sweep", help="figure from a table written by `dspsim sweep`")
    s.add_argument("file", metavar="FILE", help="sweep table")
    s.add_argument("--x", metavar="KEY", help="column on the x axis (line plots)")
    s.add_argument("--y", default="cycles", metavar="KEY", help="column on the y axis")
    s.add_argument("--hue", metavar="KEY", help="one line per value of this column")
    s.add_argument("--heatmap", nargs=2, metavar=("KEY1", "KEY2"), help="y over two keys")
    s.add_argument("--out", metavar="FILE", help="figure file")


def cmd_plot(args: argparse.Namespace) -> int:
    if args.plot_kind == "sweep":
        try:
            from dspsim.sweep_plot import plot_sweep_cli
        except ModuleNotFoundError as e:
            if e.name != "dspsim.sweep_plot":
                raise
            raise DspsimInputError("plot sweep: dspsim.sweep_plot is not installed") from None
        return plot_sweep_cli(args)
    from dspsim.timeline import plot_timeline_cli

    return plot_timeline_cli(args)


def add_report(sub) -> None:
    p = sub.add_parser("report", help="where the time goes in a run saved by `dspsim run --save`")
    p.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")


def cmd_report(args: argparse.Namespace) -> int:
    from dspsim.results_io import load_run
    from dspsim.stalls import report_text

    print(report_text(load_run(args.result)))
    return 0
