"""``dspsim calibrate``."""

from __future__ import annotations

import argparse
import sys

from dspsim.cli.common import add_model_args, emit_json, model_from_args


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
