"""``python -m dspsim.study.calibrate``: refit the J6 model's two DDR values to the documents'
figures (every op's ``document``) and print them with the residuals. It takes no options
(``--help`` says so; anything else is refused in one line, exit 2); ``dspsim calibrate`` is the
full command."""

from __future__ import annotations

import sys

PROG = "python -m dspsim.study.calibrate"


def main(argv: list[str] | None = None) -> int:
    from dspsim.cli.common import INTERRUPTED_EXIT, _Parser, interrupted_message, interrupts_handled
    from dspsim.errors import DspsimInputError

    parser = _Parser(prog=PROG, description="Refit the J6 model's two DDR values "
                     "(ddr.latency_cycles, ddr.bytes_per_cycle) to the documents' figures and "
                     "print them with the residuals. No options; `dspsim calibrate` is the full "
                     "command.")
    try:
        with interrupts_handled():
            parser.parse_args(argv)
            from dspsim.study.calibrate import fit_seed, seed_measurements

            result = fit_seed()
            for k, v in result.values.items():
                print(f"{k} = {v:.6g}")
            for m, r in zip(seed_measurements(), result.residuals_pct):
                print(f"{m.label(with_op=True)}: target {m.cycles:.0f} cycles, residual "
                      f"{r:+.4f} %")
    except DspsimInputError as e:
        print(f"{PROG}: error: {str(e).removeprefix(PROG + ': ')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        interrupted_message(PROG)
        return INTERRUPTED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
