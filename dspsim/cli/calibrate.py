"""``dspsim calibrate`` and ``dspsim validate``: model keys fitted to measurements, and every
shipped measurement beside what the model predicts."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dspsim.cli.common import (
    UsageError,
    add_model_args,
    check_outputs_not_inputs,
    counter,
    emit_json,
    int_in,
    model_from_args,
    on_terminal,
    status_line,
)
from dspsim.config import load_models, resolve_model_path
from dspsim.platform import FIDELITIES
from dspsim.workers import MAX_JOBS

if TYPE_CHECKING:
    from dspsim.study.calibrate import Calibration

CLI_DESCRIPTION = """\
Fit free model keys to measured cycle counts, report the residuals, how well the measurements
determine each key, and (when they do not) the measurement that would separate the fits.

measurement syntax (--measured, repeatable):
  [OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE ...]=CYCLES
  OP is a registered op (default softmax; `dspsim ops` lists them), VARIANT one of its variants
  (softmax: pingpong or direct); n is a 1-D op's length, shape=RxC a 2-D op's rows x columns
  (default: the op's default shape, e.g. softmax n=100000); KEY=VALUE sets a model key for that
  measurement only; everything after the LAST '=' is the cycle count ('_' allowed).
  e.g. --measured pingpong=5154293 --measured direct=7648254
       --measured softmax:direct,n=50000=3900000
       --measured "pingpong,n=50000,softmax.tile_bytes=8192=2600000"
       --measured layernorm:pingpong,shape=1024x256=1234567
--measured-csv FILE: columns cycles and variant (or mode), optional op, n, shape (RxC), and
  model keys as further columns.
--free KEY[=LO:HI]: default range a factor of 100 either side of the model's value.

--explore: every reading of the measurements (default: the documents' figures), not only the fit
  nearest the model. Frees the structural keys as well (idma.max_outstanding, the host memory's
  max_outstanding (host.memory: J6's ddr, ameba_hifi5's psram) and the measured op's integer
  keys its search space marks, e.g. softmax.tile_bytes, on a coarse log grid; the host memory's
  latency_cycles, its bytes_per_cycle over 0.05-64 and idma.setup_cycles fitted at every grid
  point; --free adds keys or changes a range), keeps every fit within the tolerance, groups them
  by what binds each measurement (port bandwidth, outstanding requests, descriptor overhead,
  compute) and proposes the measurement that tells the readings apart. Tile fidelity for the
  screen, --fidelity (burst) for the finalists; --jobs N worker processes (default: every CPU).
  Takes minutes.
"""


def add_calibrate(sub) -> None:
    p = sub.add_parser("calibrate", help="fit free model keys to measured cycle counts",
                       description=CLI_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    # declaring the options imports nothing of the calibration (scipy): --tolerance-pct None
    # means dspsim.study.calibrate.DEFAULT_TOLERANCE_PCT
    p.add_argument("--measured", metavar="SPEC=CYCLES", action="append", default=[],
                   help="a measurement, [OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE...]=CYCLES "
                   "(repeatable)")
    p.add_argument("--measured-csv", metavar="FILE", action="append", default=[],
                   help="CSV of measurements: columns variant,cycles[,op][,n][,shape][,model "
                   "keys...] (repeatable)")
    p.add_argument("--free", metavar="KEY[=LO:HI]", action="append", default=[],
                   help="a model key to fit, optionally its range (repeatable)")
    p.add_argument("--tolerance-pct", type=float, default=None, metavar="PCT",
                   help="identifiability: every measurement within this %% (default 1)")
    p.add_argument("--fidelity", choices=FIDELITIES, default="burst", help="simulation fidelity")
    p.add_argument("--out", metavar="FILE.toml",
                   help="write the fitted model file, its verdict in its first comments: it is "
                   "written also when the fit misses the tolerance (the verdict and the "
                   "output's 'wrote' line say so; exit 1)")
    p.add_argument("--explore", action="store_true",
                   help="free the structural keys too and report every reading of the "
                   "measurements")
    p.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=None, metavar="N",
                   help=f"--explore: worker processes, 1 to {MAX_JOBS} (default: every CPU; "
                   "never more than grid points)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _tolerance(args: argparse.Namespace) -> float:
    from dspsim.study.calibrate import DEFAULT_TOLERANCE_PCT

    return DEFAULT_TOLERANCE_PCT if args.tolerance_pct is None else args.tolerance_pct


LOG_EVERY_S = 30.0  # off a terminal, --explore writes a progress line at most this often


class LogLines:
    """Off a terminal: the exploration's first message, then its progress a line at a time, at
    most one every :data:`LOG_EVERY_S` seconds of ``clock``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last: float | None = None

    def __call__(self, msg: str) -> None:
        now = self.clock()
        if self.last is None or now - self.last >= LOG_EVERY_S:
            self.last = now
            print(msg, file=sys.stderr, flush=True)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from dspsim.study.calibrate import run_calibration

    check_outputs_not_inputs(args, [("--out", args.out)],
                             [("--measured-csv", f) for f in args.measured_csv])
    if args.explore:
        return _explore(args, on_terminal())
    if args.jobs is not None:  # the fit runs its simulations one after another
        raise UsageError("--jobs sets --explore's worker processes; add --explore or drop "
                         "--jobs")
    model = model_from_args(args)
    with counter("calibrate", unit="sim") as bar:  # the fit's simulations
        cal = run_calibration(model, args.measured, args.measured_csv, args.free,
                              fidelity=args.fidelity, tolerance_pct=_tolerance(args),
                              out=args.out, progress=bar.set_description_str,
                              on_simulation=bar.update)
        bar.set_description_str("calibrate: tolerance ranges")
        spans = tolerance_spans(cal)
    if args.json:
        emit_json(cal.to_json() | {"tolerance_ranges": {k: list(v) for k, v in spans.items()}})
    else:  # the ranges before the line that says where --out wrote the file, which ends it
        head, wrote, tail = cal.text().rpartition("\nwrote ")
        print(f"{head}{tolerance_text(cal, spans)}{wrote}{tail}" if wrote else
              cal.text() + tolerance_text(cal, spans))
    return 0 if cal.fitted_within_tolerance else 1


def _explore(args: argparse.Namespace, tty: bool) -> int:
    """``--explore`` (minutes): a status line on a terminal, else a progress line now and then."""
    from dspsim.study.calibrate import run_exploration

    model = model_from_args(args)
    if args.out:
        raise UsageError(
            "--out writes one fit; --explore finds several readings: write a reading's model "
            "file from its values (see --json), or calibrate without --explore")
    try:
        ex = run_exploration(model, args.measured, args.measured_csv, args.free,
                             tolerance_pct=_tolerance(args), final_fidelity=args.fidelity,
                             jobs=args.jobs, progress=status_line if tty else LogLines())
    finally:
        if tty:
            status_line("")
    if args.json:
        emit_json(ex.to_json())
    else:
        print(ex.text())
    return 0 if ex.families else 1


def tolerance_spans(cal: Calibration) -> dict[str, tuple]:
    """Each fitted key's range that keeps every measurement within the tolerance, the other
    keys at their fitted values (none when the fit missed)."""
    from dspsim.study.interval import tolerance_ranges

    if not cal.fitted_within_tolerance:
        return {}
    return tolerance_ranges(cal.fitted, [p.key for p in cal.free], cal.measurements,
                            cal.tolerance_pct)


def tolerance_text(cal: Calibration, spans: dict[str, tuple]) -> str:
    """The tolerance ranges as a model file's [ranges] lines."""
    if not spans:
        return "\ntolerance ranges: none (the fit did not reproduce every measurement)"
    lines = [f"\ntolerance ranges (each fitted key alone, the others at their fitted values; "
             f"every measurement within {cal.tolerance_pct:g} %), as a model file's [ranges]:"]
    lines += [f'  "{k}" = [{_inward(lo, True)}, {_inward(hi, False)}]'
              for k, (lo, hi) in spans.items()]
    return "\n".join(lines)


def _inward(x: float, up: bool) -> str:
    """A range end at 6 significant digits, rounded into the range (a low end up, a high end
    down), so the printed range holds only values that fit."""
    if isinstance(x, int) or x == 0:
        return repr(x)
    scale = 10.0 ** (math.floor(math.log10(abs(x))) - 5)
    if scale == 0.0:  # x near the smallest float (a range down to 0): its digits as they are
        return repr(x)
    text = f"{(math.ceil if up else math.floor)(x / scale) * scale:.6g}"
    return text if "." in text or "e" in text else f"{text}.0"


VALIDATE_DESCRIPTION = """\
Run every measurement the project ships (validation/*.toml: J6's two softmax figures, the
AmebaLite HiFi5's microbenchmarks) on its platform's model and print measured, predicted,
error and role: "calibration" (a value of the model was fitted to it; it must be reproduced
within 1 %) or "check" (nothing was fitted to it). Exit 0 when every calibration measurement
is within 1 %, 1 otherwise; checks never change the exit code.
--models A,B runs each measurement under every model given that is of its platform (the file,
one inheriting from it, or one with its [model] name): e.g. every reading of J6.
--measurements FILE adds a file of your own (the same format; see dspsim.study.validate).
Every prediction comes with its interval: the smallest and largest cycles over the model's
ranges of its guessed and fitted keys (docs/validation.md, "Intervals"); --suggest names, for
the widest interval, the measurement that would narrow it most.
"""


def add_validate(sub) -> None:
    p = sub.add_parser("validate", help="every shipped measurement: measured, predicted, error",
                       description=VALIDATE_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, models=True, set_help="override a model key in every model (repeatable)")
    p.add_argument("--measurements", metavar="FILE.toml", action="append", default=[],
                   help="a measurements file of your own (repeatable)")
    p.add_argument("--only", action="store_true",
                   help="only the --measurements files, not the shipped ones")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--suggest", action="store_true",
                   help="name, for the widest interval, the measurement that would narrow it "
                   "most, and by how much")


def cmd_validate(args: argparse.Namespace) -> int:
    from dspsim.study.validate import calibration_ok, table, validate

    if args.only and not args.measurements:
        raise UsageError("validate --only needs --measurements FILE")
    models = None
    names = args.models or ([args.model] if args.model else None)
    if names:  # labelled as run's --models: two files of one name are two models
        loaded = load_models(names, args.overrides)
        models = {label: (model, resolve_model_path(item))
                  for (label, model), item in zip(loaded.items(), names)}
    rows = validate(models, args.measurements, shipped=not args.only,
                    overrides=args.overrides)
    ok = calibration_ok(rows)
    if args.suggest:
        from dspsim.study.validate import suggest

        hint = suggest(rows)
    if args.json:
        extra = {"suggest": hint.to_json() if hint else None} if args.suggest else {}
        emit_json({"rows": [r.to_json() for r in rows], "calibration_within_1_pct": ok,
                   "checks_inside_interval": sum(bool(r.inside) for r in rows
                                                 if r.measurement.role == "check")} | extra)
    else:
        print(table(rows))
        if args.suggest:
            print("\n" + (hint.text() if hint else "suggest: no interval has a width (no "
                           "model of these measurements gives a range that moves them)"))
    return 0 if ok else 1
