"""``dspsim sweep``."""

from __future__ import annotations

import argparse


def add_sweep(sub) -> None:
    from dspsim.sweep import add_arguments

    add_arguments(sub)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Exit 0: every point succeeded; 1: some failed (count on stderr); 2: bad input."""
    from dspsim.sweep import cli_main

    return cli_main(args)
