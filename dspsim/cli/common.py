"""What every subcommand shares: the one-line-error parser, model options, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dspsim.config import HardwareModel, load_model
from dspsim.errors import DspsimInputError
from dspsim.results_io import json_default


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


def add_data_args(p: argparse.ArgumentParser, arrays: bool) -> None:
    data = p.add_argument_group("data path")
    data.add_argument("--no-data", action="store_true",
                      help="timing only: move no values (faster; no output or host check)")
    if arrays:
        data.add_argument("--input", metavar="X.npy",
                          help="1-D float32 input (default: the seed's x[i] = 1 + i/n)")
        data.add_argument("--output", metavar="Y.npy", help="write the softmax output here")
