"""``dspsim run`` and ``dspsim reproduce``."""

from __future__ import annotations

import argparse
from typing import Any

from dspsim.arrays import check_output_path, host_check, load_input, save_output
from dspsim.cli.common import (
    UsageError,
    add_data_args,
    add_model_args,
    emit_json,
    model_from_args,
    positive_int,
)
from dspsim.sim import MODES, Result, simulate


def add_run(sub) -> None:
    p = sub.add_parser("run", help="simulate one version of the softmax op")
    add_model_args(p)
    p.add_argument("--mode", choices=MODES, default="pingpong")
    p.add_argument("--n", type=positive_int,
                   help="float32 elements (default 100000, or the --input array's length)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_args(p, arrays=True)
    # outputs: the run is traced (and its DDR port logged) only when one of these asks for it
    out = p.add_argument_group("outputs")
    out.add_argument("--timeline", metavar="FILE.png|.svg", help="draw the run's timeline")
    out.add_argument("--window", metavar="START:END", help="timeline window, cycles from the "
                     "op's timer start (default: the whole run)")
    out.add_argument("--trace", metavar="FILE.json",
                     help="Chrome Trace Event file for ui.perfetto.dev / chrome://tracing")
    out.add_argument("--trace-limit", metavar="N", type=positive_int,
                     help="keep at most N trace events (default 200,000): slices are cut at a "
                     "point in time, the DDR counter is resampled; the file says what was done")
    out.add_argument("--tiles", metavar="FILE.csv",
                     help="one row per tile per pass: copies, compute, hidden/exposed DMA cycles")
    out.add_argument("--save", metavar="FILE.json[.gz]",
                     help="save the run for `dspsim plot timeline` and `dspsim report`")


def run_object(r: Result) -> dict[str, Any]:
    from dspsim.analytic import bounds

    obj = r.to_json()
    obj["bounds"] = bounds(r.model, r.mode, r.n)
    if r.trace is not None:
        from dspsim.stalls import stall_summary

        obj["stalls"] = stall_summary(r)
    return obj


def cmd_run(args: argparse.Namespace) -> int:
    from dspsim.results_io import run_outputs

    model = model_from_args(args)
    outputs = run_outputs(args)  # checks paths and extensions before simulating
    if args.no_data and (args.input or args.output):
        raise UsageError("run: --input and --output need the data path; drop --no-data")
    if args.output:
        check_output_path(args.output)
    x = load_input(args.input) if args.input else None
    r = simulate(
        model, args.mode, args.n, x=x, data=not args.no_data, trace=outputs.needs_trace,
        port_log=outputs.needs_port_log,
    )
    written = outputs.write(r)
    if args.output:
        save_output(args.output, r.output_array)
        written.append(f"output written to {args.output}")
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
    if r.output is not None:
        o = r.output
        err = "n/a" if o["max_rel_err"] is None else f"{o['max_rel_err']:.3g}"
        print(f"  output: sum {o['sum']:.9g}, {o['nan_count']} NaN, {o['inf_count']} inf, "
              f"max relative error vs float64 {err}")
    for w in r.warnings:
        print(f"  warning [{w['code']}] x{w['count']}: {w['message']}")
    for h in r.hazards:
        print(f"  hazard: {h['message']}")
    print(f"  {r.events:,} events in {r.wall_s:.3f} s")
    for line in written:
        print(f"  {line}")
    return 0


def add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="both versions of the seed's softmax vs the document")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_args(p, arrays=False)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dspsim.calibrate import SEED_MEASUREMENTS_CYCLES as doc

    model = model_from_args(args)
    runs = {m: simulate(model, m, 100_000, data=not args.no_data) for m in ("pingpong", "direct")}
    ratio = runs["direct"].cycles / runs["pingpong"].cycles
    doc_ratio = doc["direct"] / doc["pingpong"]
    check = None
    if not args.no_data:
        check = host_check(runs["direct"].output_array, runs["pingpong"].output_array)
    if args.json:
        obj = {**{m: run_object(r) for m, r in runs.items()}, "ratio": ratio}
        if check is not None:
            obj["check"] = check
        emit_json(obj)
        return 0
    print(f"softmax of 100,000 float32 on {model.name} ({model.source})")
    print(f"{'version':<10} {'simulated_cycles':>17} {'document_cycles':>16} {'error_pct':>10}")
    for mode, r in runs.items():
        err = 100.0 * (r.cycles / doc[mode] - 1.0)
        print(f"{mode:<10} {r.cycles:>17,} {doc[mode]:>16,} {err:>+10.2f}")
    err = 100.0 * (ratio / doc_ratio - 1.0)
    print(f"{'ratio':<10} {ratio:>17.3f} {doc_ratio:>16.3f} {err:>+10.2f}   (direct / ping-pong)")
    if check is not None:
        diff = "n/a" if check["max_rel_diff"] is None else f"{check['max_rel_diff']:.3g}"
        print(f"host check (|direct - pingpong| / |direct| <= 1e-6 per element): "
              f"{'passed' if check['passed'] else 'FAILED'}, max relative difference {diff}")
    for mode, r in runs.items():
        for w in r.warnings:
            print(f"warning ({mode}) [{w['code']}] x{w['count']}: {w['message']}")
        for h in r.hazards:
            print(f"hazard ({mode}): {h['message']}")
    return 0
