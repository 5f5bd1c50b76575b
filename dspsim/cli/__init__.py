"""The command line: ``dspsim run | reproduce | ...``.

Every user error becomes one line on stderr and exit code 2, never a traceback; Ctrl-C stops
any command with one line and exit code 130 (:func:`dspsim.cli.common.interrupts_handled`).
Each subcommand lives in a function pair: ``add_<name>(subparsers)`` declares it and
``cmd_<name>(args)`` runs it and returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dspsim.cli.calibrate import add_calibrate, cmd_calibrate
from dspsim.cli.common import (
    INTERRUPTED_EXIT,
    _Parser,
    guarded_stdout,
    ignore_file_size_signal,
    interrupted_message,
    interrupts_handled,
    silence_stdout,
)
from dspsim.cli.info import add_keys, add_ops, cmd_keys, cmd_ops
from dspsim.cli.optimize import add_optimize, cmd_optimize
from dspsim.cli.plot import add_plot, add_report, cmd_plot, cmd_report
from dspsim.cli.run import add_reproduce, add_run, cmd_reproduce, cmd_run
from dspsim.cli.sweep import add_sweep, cmd_sweep
from dspsim.cli.validate import add_validate, cmd_validate
from dspsim.cli.workload import add_workload, cmd_workload
from dspsim.errors import DeadlockError, DspsimInputError, WorkerError
from dspsim.version import __version__

COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "run": (add_run, cmd_run),
    "reproduce": (add_reproduce, cmd_reproduce),
    "plot": (add_plot, cmd_plot),
    "report": (add_report, cmd_report),
    "sweep": (add_sweep, cmd_sweep),
    "optimize": (add_optimize, cmd_optimize),
    "calibrate": (add_calibrate, cmd_calibrate),
    "validate": (add_validate, cmd_validate),
    "ops": (add_ops, cmd_ops),
    "keys": (add_keys, cmd_keys),
    "workload": (add_workload, cmd_workload),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dspsim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dspsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add, _ in COMMANDS.values():
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # a file-size limit (ulimit -f) must not kill us mid-write: the write fails with EFBIG,
    # the atomic writer removes its temporary file and the error is one line (exit 2)
    ignore_file_size_signal()
    # Ctrl-C anywhere in a command: its clean-up runs, then one line and exit 130
    with interrupts_handled(), guarded_stdout():
        try:
            try:
                args = build_parser().parse_args(argv)
                code = COMMANDS[args.command][1](args)
            finally:
                sys.stdout.flush()  # a full or closed stdout fails here, not at exit
        except DspsimInputError as e:
            print(f"dspsim: error: {e}", file=sys.stderr)
            return 2
        except (DeadlockError, WorkerError) as e:
            print(f"dspsim: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            interrupted_message()
            return INTERRUPTED_EXIT
        except BrokenPipeError:  # `dspsim ... | head`: quietly done
            silence_stdout()
            return 0
        except OSError as e:  # reading or writing a file failed below the checks
            where = f" ({e.filename})" if e.filename else ""
            print(f"dspsim: error: {e.strerror or e}{where}", file=sys.stderr)
            return 2
        except MemoryError:
            print("dspsim: error: out of memory: the input or the run is too large for this "
                  "machine (try a smaller size, --trace-limit, or .csv sweep tables)",
                  file=sys.stderr)
            return 2
    return code

