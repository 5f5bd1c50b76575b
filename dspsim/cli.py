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

from dspsim.config import HardwareModel, load_model
from dspsim.errors import DeadlockError, DspsimInputError
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


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="PATH", help="model file (default: the packaged J6 model)")
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="overrides",
        help="override a model key, e.g. ddr.latency_cycles=300 (repeatable)",
    )


def model_from_args(args: argparse.Namespace) -> HardwareModel:
    return load_model(args.model, args.overrides)


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ------------------------------------------------------------------------------------ run
def add_run(sub) -> None:
    p = sub.add_parser("run", help="simulate one version of the softmax op")
    add_model_args(p)
    p.add_argument("--mode", choices=MODES, default="pingpong")
    p.add_argument("--n", type=positive_int, default=100_000, help="float32 elements")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_object(r: Result) -> dict[str, Any]:
    return r.to_json()


def cmd_run(args: argparse.Namespace) -> int:
    model = model_from_args(args)
    r = simulate(model, args.mode, args.n)
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
    for w in r.warnings:
        print(f"  warning [{w['code']}] x{w['count']}: {w['message']}")
    print(f"  {r.events:,} events in {r.wall_s:.3f} s")
    return 0


# ------------------------------------------------------------------------------ reproduce
def add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="both versions of the seed's softmax vs the document")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dspsim.calibrate import SEED_MEASUREMENTS_CYCLES as doc

    model = model_from_args(args)
    runs = {mode: simulate(model, mode, 100_000) for mode in ("pingpong", "direct")}
    ratio = runs["direct"].cycles / runs["pingpong"].cycles
    doc_ratio = doc["direct"] / doc["pingpong"]
    if args.json:
        emit_json({**{m: run_object(r) for m, r in runs.items()}, "ratio": ratio})
        return 0
    print(f"softmax of 100,000 float32 on {model.name} ({model.source})")
    print(f"{'version':<10} {'simulated_cycles':>17} {'document_cycles':>16} {'error_pct':>10}")
    for mode, r in runs.items():
        err = 100.0 * (r.cycles / doc[mode] - 1.0)
        print(f"{mode:<10} {r.cycles:>17,} {doc[mode]:>16,} {err:>+10.2f}")
    err = 100.0 * (ratio / doc_ratio - 1.0)
    print(f"{'ratio':<10} {ratio:>17.3f} {doc_ratio:>16.3f} {err:>+10.2f}   (direct / ping-pong)")
    for mode, r in runs.items():
        for w in r.warnings:
            print(f"warning ({mode}) [{w['code']}] x{w['count']}: {w['message']}")
    return 0


COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "run": (add_run, cmd_run),
    "reproduce": (add_reproduce, cmd_reproduce),
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
