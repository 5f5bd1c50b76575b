"""The command line: ``dspsim run | reproduce | ...``.

Every user error becomes one line on stderr and exit code 2, never a traceback.
Each subcommand lives in a function pair: ``add_<name>(subparsers)`` declares it and
``cmd_<name>(args)`` runs it and returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dspsim.cli.calibrate import add_calibrate, cmd_calibrate
from dspsim.cli.common import _Parser
from dspsim.cli.info import add_keys, add_ops, cmd_keys, cmd_ops
from dspsim.cli.plot import add_plot, add_report, cmd_plot, cmd_report
from dspsim.cli.run import add_reproduce, add_run, cmd_reproduce, cmd_run
from dspsim.cli.sweep import add_sweep, cmd_sweep
from dspsim.errors import DeadlockError, DspsimInputError
from dspsim.version import __version__

COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "run": (add_run, cmd_run),
    "reproduce": (add_reproduce, cmd_reproduce),
    "plot": (add_plot, cmd_plot),
    "report": (add_report, cmd_report),
    "sweep": (add_sweep, cmd_sweep),
    "calibrate": (add_calibrate, cmd_calibrate),
    "ops": (add_ops, cmd_ops),
    "keys": (add_keys, cmd_keys),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dspsim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dspsim {__version__}")
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

