"""The command line: ``dspsim run | reproduce | ...``.

Every user error becomes one line on stderr and exit code 2, never a traceback.
Each subcommand lives in a function pair: ``add_<name>(subparsers)`` declares it and
``cmd_<name>(args)`` runs it and returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from dspsim.arrays import check_output_path, host_check, load_input, save_output
from dspsim.config import HardwareModel, load_model
from dspsim.errors import DeadlockError, DspsimInputError
from dspsim.results_io import json_default
from dspsim.sim import MODES, Result, simulate


class UsageError(DspsimInputError):
    """A command-line argument is wrong."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        where = self.prog.removeprefix("dspsim").strip()
        raise UsageError(f"{where}: {message}" if where else message)


def positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_model_args(
    p: argparse.ArgumentParser,
    set_help: str = "override a model key, e.g. ddr.latency_cycles=300 (repeatable)",
) -> None:
    p.add_argument("--model", metavar="PATH", help="model file (default: the packaged J6 model)")
    p.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides", help=set_help
    )


def model_from_args(args: argparse.Namespace) -> HardwareModel:
    return load_model(args.model, args.overrides)


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=json_default)
    sys.stdout.write("\n")


# ------------------------------------------------------------------------------------ run
def add_run(sub) -> None:
    p = sub.add_parser("run", help="simulate one version of the softmax op")
    add_model_args(p)
    p.add_argument("--mode", choices=MODES, default="pingpong")
    p.add_argument("--n", type=positive_int,
                   help="float32 elements (default 100000, or the --input array's length)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_args(p, arrays=True)
    # outputs: the run is traced (and its DDR port logged) only when one of these asks for it
    out = p.add_argument_group("outputs")
    out.add_argument("--timeline", metavar="FILE.png|.svg", help="draw the run's timeline")
    out.add_argument("--window", metavar="START:END", help="timeline window, cycles from the "
                     "op's timer start (default: the whole run)")
    out.add_argument("--trace", metavar="FILE.json",
                     help="Chrome Trace Event file for ui.perfetto.dev / chrome://tracing")
    out.add_argument("--trace-limit", metavar="N", type=positive_int,
                     help="keep at most N trace events (default 200,000): slices are cut at a "
                     "point in time, the DDR counter is resampled; the file says what was done")
    out.add_argument("--tiles", metavar="FILE.csv",
                     help="one row per tile per pass: copies, compute, hidden/exposed DMA cycles")
    out.add_argument("--save", metavar="FILE.json[.gz]",
                     help="save the run for `dspsim plot timeline` and `dspsim report`")


def add_data_args(p: argparse.ArgumentParser, arrays: bool) -> None:
    data = p.add_argument_group("data path")
    data.add_argument("--no-data", action="store_true",
                      help="timing only: move no values (faster; no output or host check)")
    if arrays:
        data.add_argument("--input", metavar="X.npy",
                          help="1-D float32 input (default: the seed's x[i] = 1 + i/n)")
        data.add_argument("--output", metavar="Y.npy", help="write the softmax output here")


def run_object(r: Result) -> dict[str, Any]:
    from dspsim.analytic import bounds

    obj = r.to_json()
    obj["bounds"] = bounds(r.model, r.mode, r.n)
    if r.trace is not None:
        from dspsim.stalls import stall_summary

        obj["stalls"] = stall_summary(r)
    return obj


def cmd_run(args: argparse.Namespace) -> int:
    from dspsim.results_io import run_outputs

    model = model_from_args(args)
    outputs = run_outputs(args)  # checks paths and extensions before simulating
    if args.no_data and (args.input or args.output):
        raise UsageError("run: --input and --output need the data path; drop --no-data")
    if args.output:
        check_output_path(args.output)
    x = load_input(args.input) if args.input else None
    r = simulate(
        model, args.mode, args.n, x=x, data=not args.no_data, trace=outputs.needs_trace,
        port_log=outputs.needs_port_log,
    )
    written = outputs.write(r)
    if args.output:
        save_output(args.output, r.output_array)
        written.append(f"output written to {args.output}")
    if args.json:
        emit_json(run_object(r))
        return 0
    print(
        f"{r.mode}: n = {r.n}, {r.cycles:,} cycles = {r.time_us:,.1f} us at "
        f"{model.core.clock_mhz:g} MHz"
    )
    print(f"  DDR bytes read {r.bytes['ddr_read']:,}, written {r.bytes['ddr_write']:,}")
    print("  busy cycles: " + ", ".join(f"{k} {v:,}" for k, v in r.busy_cycles.items()))
    print("  core stall cycles: " + ", ".join(f"{k} {v:,}" for k, v in r.stall_cycles.items()))
    for p in r.passes:
        print(f"  pass {p['name']:<8} {p['start_cycle']:>12,} .. {p['end_cycle']:>12,} cycles")
    if r.output is not None:
        o = r.output
        err = "n/a" if o["max_rel_err"] is None else f"{o['max_rel_err']:.3g}"
        print(f"  output: sum {o['sum']:.9g}, {o['nan_count']} NaN, {o['inf_count']} inf, "
              f"max relative error vs float64 {err}")
    for w in r.warnings:
        print(f"  warning [{w['code']}] x{w['count']}: {w['message']}")
    for h in r.hazards:
        print(f"  hazard: {h['message']}")
    print(f"  {r.events:,} events in {r.wall_s:.3f} s")
    for line in written:
        print(f"  {line}")
    return 0


# ------------------------------------------------------------------------------ reproduce
def add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="both versions of the seed's softmax vs the document")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_args(p, arrays=False)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dspsim.calibrate import SEED_MEASUREMENTS_CYCLES as doc

    model = model_from_args(args)
    runs = {m: simulate(model, m, 100_000, data=not args.no_data) for m in ("pingpong", "direct")}
    ratio = runs["direct"].cycles / runs["pingpong"].cycles
    doc_ratio = doc["direct"] / doc["pingpong"]
    check = None
    if not args.no_data:
        check = host_check(runs["direct"].output_array, runs["pingpong"].output_array)
    if args.json:
        obj = {**{m: run_object(r) for m, r in runs.items()}, "ratio": ratio}
        if check is not None:
            obj["check"] = check
        emit_json(obj)
        return 0
    print(f"softmax of 100,000 float32 on {model.name} ({model.source})")
    print(f"{'version':<10} {'simulated_cycles':>17} {'document_cycles':>16} {'error_pct':>10}")
    for mode, r in runs.items():
        err = 100.0 * (r.cycles / doc[mode] - 1.0)
        print(f"{mode:<10} {r.cycles:>17,} {doc[mode]:>16,} {err:>+10.2f}")
    err = 100.0 * (ratio / doc_ratio - 1.0)
    print(f"{'ratio':<10} {ratio:>17.3f} {doc_ratio:>16.3f} {err:>+10.2f}   (direct / ping-pong)")
    if check is not None:
        diff = "n/a" if check["max_rel_diff"] is None else f"{check['max_rel_diff']:.3g}"
        print(f"host check (|direct - pingpong| / |direct| <= 1e-6 per element): "
              f"{'passed' if check['passed'] else 'FAILED'}, max relative difference {diff}")
    for mode, r in runs.items():
        for w in r.warnings:
            print(f"warning ({mode}) [{w['code']}] x{w['count']}: {w['message']}")
        for h in r.hazards:
            print(f"hazard ({mode}): {h['message']}")
    return 0


# ---------------------------------------------------------------------------------- sweep
def add_sweep(sub) -> None:
    from dspsim.sweep import add_arguments

    add_arguments(sub)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Exit 0: every point succeeded; 1: some failed (count on stderr); 2: bad input."""
    from dspsim.sweep import cli_main

    return cli_main(args)


# ----------------------------------------------------------------------------------- plot
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


# --------------------------------------------------------------------------------- report
def add_report(sub) -> None:
    p = sub.add_parser("report", help="where the time goes in a run saved by `dspsim run --save`")
    p.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")


def cmd_report(args: argparse.Namespace) -> int:
    from dspsim.results_io import load_run
    from dspsim.stalls import report_text

    print(report_text(load_run(args.result)))
    return 0


# ------------------------------------------------------------------------------ calibrate
def add_calibrate(sub) -> None:
    from dspsim.calibrate import CLI_DESCRIPTION, add_arguments

    p = sub.add_parser(
        "calibrate",
        help="fit free model keys to measured cycle counts",
        description=CLI_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_args(p)
    add_arguments(p)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from dspsim.calibrate import run_from_args

    progress = (lambda msg: print(msg, file=sys.stderr)) if sys.stderr.isatty() else None
    cal = run_from_args(model_from_args(args), args, progress=progress)
    if args.json:
        emit_json(cal.to_json())
    else:
        print(cal.text())
    return 0 if cal.fitted_within_tolerance else 1


COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "run": (add_run, cmd_run),
    "reproduce": (add_reproduce, cmd_reproduce),
    "plot": (add_plot, cmd_plot),
    "report": (add_report, cmd_report),
    "sweep": (add_sweep, cmd_sweep),
    "calibrate": (add_calibrate, cmd_calibrate),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dspsim", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add, _ in COMMANDS.values():
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = COMMANDS[args.command][1](args)
    except DspsimInputError as e:
        print(f"dspsim: error: {e}", file=sys.stderr)
        return 2
    except DeadlockError as e:
        print(f"dspsim: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
