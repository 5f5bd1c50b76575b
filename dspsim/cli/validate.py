"""``dspsim validate``: every shipped measurement beside what the model predicts."""

from __future__ import annotations

import argparse

from dspsim.cli.common import add_model_args, emit_json

DESCRIPTION = """\
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
                       description=DESCRIPTION,
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
    from dspsim.config import load_models, resolve_model_path
    from dspsim.errors import DspsimInputError
    from dspsim.study.validate import calibration_ok, table, validate

    if args.only and not args.measurements:
        raise DspsimInputError("validate --only needs --measurements FILE")
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
