"""The command line: ``dspsim run | reproduce | ...``.

Every user error becomes one line on stderr and exit code 2, never a traceback; Ctrl-C stops
any command with one line and exit code 130 (:func:`dspsim.cli.common.interrupts_handled`).
Each subcommand lives in a function pair: ``add_<name>(subparsers)`` declares it and
``cmd_<name>(args)`` runs it and returns the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from dspsim.cli import calibrate, info, run, sweep, workload
from dspsim.cli.common import (
    INTERRUPTED_EXIT,
    _Parser,
    add_op_file_args,
    guarded_stdout,
    ignore_file_size_signal,
    interrupted_message,
    interrupts_handled,
    silence_stdout,
)
from dspsim.errors import DeadlockError, DspsimInputError, WorkerError
from dspsim.ops.fileop import load_op_file
from dspsim.version import __version__

# each command's (add_<name>, cmd_<name>), in the order --help lists them
COMMANDS: dict[str, tuple[Callable, Callable]] = {
    name: (getattr(module, f"add_{name}"), getattr(module, f"cmd_{name}"))
    for module, names in ((run, ("run", "reproduce", "plot", "report")),
                          (sweep, ("sweep", "optimize")), (calibrate, ("calibrate", "validate")),
                          (info, ("ops", "keys")), (workload, ("workload",)))
    for name in names
}


# the commands whose --op an op file's op becomes when no --op is given (a list for sweep)
OP_FILE_DEFAULTS = {"run": False, "optimize": False, "sweep": True}
# the commands that take --op-file: those that run or list ops, and those that read a sweep
# table (its columns are model keys) or a saved run (its model has the op's table)
OP_FILE_COMMANDS = ("run", "sweep", "optimize", "calibrate", "validate", "ops", "keys",
                    "workload", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dspsim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dspsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, _) in COMMANDS.items():
        add(sub)
        if name in OP_FILE_COMMANDS:
            add_op_file_args(sub.choices[name])
    return parser


def load_op_files_of(argv: list[str]) -> list[str]:
    """Load the ``--op-file`` files of ``argv``; return their ops' names."""
    files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--op-file"]
    files += [a.partition("=")[2] for a in argv if a.startswith("--op-file=")]
    command = next((a for a in argv if not a.startswith("-")), None)  # the first word
    if not files or command not in (*OP_FILE_COMMANDS, "plot"):
        return []  # a command without --op-file refuses it unread (nor imports its python)

    allow = "--allow-python" in argv
    return [load_op_file(f, allow) for f in files]


def _default_op_of_files(args: argparse.Namespace, argv: list[str], names: list[str]) -> None:
    """With op files and no ``--op``, the command runs the files' op(s)."""
    if not names or args.command not in OP_FILE_DEFAULTS:
        return
    if any(a == "--op" or a.startswith("--op=") for a in argv):
        return
    if OP_FILE_DEFAULTS[args.command]:
        args.op = ",".join(names)
    elif len(set(names)) > 1:
        raise DspsimInputError(f"--op-file: {len(set(names))} ops loaded ({', '.join(names)}); "
                               "allowed: name the one to run with --op")
    else:
        args.op = names[0]


def _window_joined(words: list[str]) -> list[str]:
    """``--window -100:500`` as ``--window=-100:500`` (argparse takes a value starting with "-"
    for an option); joined, the window's own check says what is allowed."""
    out: list[str] = []
    for w in words:
        if out and out[-1] == "--window" and w.startswith("-"):
            out[-1] = f"--window={w}"
        else:
            out.append(w)
    return out


def main(argv: list[str] | None = None) -> int:
    # a file-size limit (ulimit -f) must not kill us mid-write: the write fails with EFBIG,
    # the atomic writer removes its temporary file and the error is one line (exit 2)
    ignore_file_size_signal()
    # Ctrl-C anywhere in a command: its clean-up runs, then one line and exit 130
    with interrupts_handled() as sigint, guarded_stdout():
        try:
            try:
                words = _window_joined(list(sys.argv[1:] if argv is None else argv))
                # workers load the op files this command loads, not a list it inherited
                os.environ.pop("DSPSIM_OP_FILES", None)
                names = load_op_files_of(words)
                args = build_parser().parse_args(words)
                _default_op_of_files(args, words, names)
                code = COMMANDS[args.command][1](args)
                sigint.check()  # an interrupt swallowed on the way still stops the command
            finally:
                sys.stdout.flush()  # a full or closed stdout fails here, not at exit
        except DspsimInputError as e:
            return _error(e, 2)
        except (DeadlockError, WorkerError) as e:
            return _error(e, 1)
        except KeyboardInterrupt:
            interrupted_message()
            return INTERRUPTED_EXIT
        except BrokenPipeError:  # `dspsim ... | head`: quietly done
            silence_stdout()
            return 0
        except OSError as e:  # reading or writing a file failed below the checks
            where = f" ({e.filename})" if e.filename else ""
            return _error(f"{e.strerror or e}{where}", 2)
        except MemoryError:
            return _error("out of memory: the input or the run is too large for this machine "
                          "(try a smaller size, --trace-limit, or .csv sweep tables)", 2)
    return code


def _error(message: object, code: int) -> int:
    """The one line a failed command prints (stderr); returns its exit code."""
    print(f"dspsim: error: {message}", file=sys.stderr)
    return code

