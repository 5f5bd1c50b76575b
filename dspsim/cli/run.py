"""``dspsim run`` and ``dspsim reproduce``, and what reads a run saved by ``run --save``:
``dspsim plot`` (its timeline, or a sweep table's figure) and ``dspsim report``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dspsim.arrays import host_check, save_output
from dspsim.cli.common import (
    UsageError,
    _Parser,
    add_data_args,
    add_model_args,
    add_op_args,
    add_op_file_args,
    check_outputs_not_inputs,
    elapsed,
    emit_json,
    model_from_args,
    models_from_args,
    op_variant,
    positive_int,
)
from dspsim.ops import get_op, op_names
from dspsim.ops.base import errors_text, refuse_idle_keys
from dspsim.paths import check_distinct
from dspsim.platform import FIDELITIES
from dspsim.probes import pass_totals
from dspsim.results import check_save_path, load_run, save_run
from dspsim.run import Request, Result, simulate
from dspsim.text import cell

PASS_LINES = 16  # more passes than this (many rows) print one line per pass name
RUN_FILES = ("--timeline", "--trace", "--tiles", "--save", "--output")  # each a file path


def add_run(sub) -> None:
    p = sub.add_parser("run", help="simulate one variant of one op")
    add_model_args(p, models=True)
    add_op_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--interval", action="store_true",
                   help="also the smallest and largest cycles over the model's ranges of its "
                   "guessed and fitted keys, and the key that moves them most")
    add_data_args(p, arrays=True)
    out = p.add_argument_group("outputs")
    out.add_argument("--timeline", metavar="FILE.png|.svg|.pdf",
                     help="draw the run's timeline")
    out.add_argument("--window", metavar="START:END", help="timeline window, cycles from the "
                     "op's timer start (default: the whole run)")
    out.add_argument("--trace", metavar="FILE.json[.gz]",
                     help="Chrome Trace Event file for ui.perfetto.dev / chrome://tracing")
    out.add_argument("--trace-limit", metavar="N", type=positive_int,
                     help="keep at most N trace events in --trace, metadata included (default "
                     "200,000): counters are resampled first, then slices are cut at a point in "
                     "time; the file says what was done. Given, the run itself keeps only its "
                     "first N trace rows (bounded memory; --save saves those)")
    out.add_argument("--tiles", metavar="FILE.csv",
                     help="one row per tile per pass: copies, compute, hidden/exposed DMA cycles")
    out.add_argument("--save", metavar="FILE.json[.gz]",
                     help="save the run for `dspsim plot timeline` and `dspsim report`")


def run_object(r: Result) -> dict[str, Any]:
    obj = r.to_json()
    op = get_op(r.op)
    obj.update(op.run_report(r))  # what an op reports besides its cycles
    bounds = op.bounds(r.model, r.variant, r.shape)
    obj["bounds"] = {} if bounds is None else dict(bounds)
    if r.trace_table is not None:
        dropped = r.trace_table.rows_dropped
        if dropped:  # a cut trace would give a wrong breakdown: say so instead
            obj["stalls"] = None
            obj["trace_rows_dropped"] = dropped
        else:
            from dspsim.analysis.stalls import stall_summary

            obj["stalls"] = stall_summary(r)
        for k in ("trace_cut_cycle", "port_log_cut_cycle"):
            if getattr(r, k) is not None:
                obj[k] = getattr(r, k)
    return obj


def _simulate(args: argparse.Namespace, model: Any, op: Any, x: Any, **kw: Any) -> Result:
    """The run the command line asks for, on ``model`` (``kw``: the outputs' options)."""
    return simulate(model, op.name, op_variant(args), args.n, shape=args.shape, x=x,
                    data=not args.no_data, fidelity=args.fidelity, core=args.core, **kw)


def check_sets_act(args: argparse.Namespace, model: Any, x: Any) -> None:
    """Refuse a ``--set`` of a key that cannot act in this run (``Op.key_variants``: another
    op's key, a key the variant does not use); after the run's own checks (``Request.check``:
    the op's refusals say more where it has its own)."""
    Request.check(model, args.op, op_variant(args), None, args.n, args.shape, x,
                  not args.no_data, args.fidelity, None, args.core, None)
    op = get_op(args.op)
    refuse_idle_keys([item.partition("=")[0].strip() for item in args.overrides],
                     [(op, op_variant(args) or op.default_variant)], "run: --set")


def _check_outputs(args: argparse.Namespace) -> dict[str, Any]:
    """The files ``run`` writes besides its summary, checked before simulating (paths,
    extensions, the window's syntax, no two outputs one file)."""
    limit = args.trace_limit
    if args.window is not None and args.timeline is None:
        raise UsageError("--window zooms the timeline: give --timeline FILE.png|.svg|.pdf too")
    if limit is not None and args.trace is None and args.save is None:
        raise UsageError(
            "--trace-limit limits the trace: give --trace FILE.json or --save FILE.json too")
    if limit is not None and (args.tiles or args.timeline):
        given = "--tiles" if args.tiles else "--timeline"
        raise UsageError(
            f"--trace-limit keeps only the run's first trace rows; {given} needs all of them: "
            f"drop --trace-limit or write {given} in another run")
    check_distinct([(opt, getattr(args, opt[2:])) for opt in RUN_FILES])
    files: dict[str, Any] = {}
    if args.timeline:
        from dspsim.analysis.timeline import check_figure_path, parse_window

        files["timeline"] = check_figure_path(args.timeline)
        files["window"] = None if args.window is None else parse_window(args.window)
    if args.trace:
        from dspsim.analysis.perfetto import DEFAULT_EVENT_LIMIT, check_limit, check_trace_path

        files["trace"] = check_trace_path(args.trace)
        files["limit"] = check_limit(DEFAULT_EVENT_LIMIT if limit is None else limit)
    if args.tiles:
        from dspsim.analysis.tiles import check_tiles_path

        files["tiles"] = check_tiles_path(args.tiles)
    if args.save:
        files["save"] = check_save_path(args.save)
    return files


def _write_outputs(files: dict[str, Any], r: Result) -> list[str]:
    """Write the files :func:`_check_outputs` checked (the analyses behind one are imported
    only when it is asked for); one line per file written."""
    if "timeline" in files:
        from dspsim.analysis.timeline import check_window

        check_window(files["window"], r.cycles)  # before writing anything
    done = []
    if "save" in files:
        save_run(r, files["save"])
        done.append(f"saved run to {files['save']}")
    if "tiles" in files:
        from dspsim.analysis.tiles import write_tiles_csv

        write_tiles_csv(r, files["tiles"])
        done.append(f"wrote tile table to {files['tiles']}")
    if "trace" in files:
        from dspsim.analysis.perfetto import write_trace

        write_trace(r, files["trace"], files["limit"])
        done.append(f"wrote Perfetto trace to {files['trace']} (open in ui.perfetto.dev)")
    if "timeline" in files:
        from dspsim.analysis.timeline import plot_timeline

        plot_timeline(r, files["timeline"], files["window"])
        done.append(f"wrote timeline to {files['timeline']}")
    return done


def cmd_run(args: argparse.Namespace) -> int:
    if args.no_data and (args.input or args.output):
        raise UsageError("run: --input and --output need the data path; drop --no-data")
    if args.models:
        return _run_models(args)
    model = model_from_args(args)
    files = _check_outputs(args)
    check_outputs_not_inputs(args, [(opt, getattr(args, opt[2:])) for opt in RUN_FILES],
                             [("--input", args.input)])
    op = get_op(args.op)
    if args.output:
        op.check_output_file(args.output)
    x = op.read_input_file(args.input) if args.input else None
    check_sets_act(args, model, x)
    # the run is traced (and its ports logged) only when an output asks for it
    traced = args.json or files.keys() & {"timeline", "trace", "tiles", "save"}
    # one simulation has no unit of progress to count: on a terminal, how long it has run
    with elapsed(f"run: {op.name} {op_variant(args) or op.default_variant}"):
        r = _simulate(args, model, op, x, trace=bool(traced),
                      port_log=bool(files.keys() & {"timeline", "trace", "save"}),
                      trace_limit=args.trace_limit)
    written = _write_outputs(files, r)
    if args.output:
        save_output(args.output, r.output_array)
        written.append(f"output written to {args.output}")
    iv = None
    if args.interval:
        from dspsim.study.interval import op_interval

        with elapsed(f"run: the interval of {r.op} {r.variant}"):
            iv = op_interval(model, r.op, r.variant, r.shape, fidelity=args.fidelity)
    if args.json:
        emit_json(run_object(r) | ({"interval": iv.to_json()} if iv else {}))
        return 0
    _print_cycles(r, op, model.core.clock_mhz, args.fidelity)
    _print_checks(r)
    if iv is not None:
        print("  " + interval_line(iv))
    print(f"  {r.events:,} events in {r.wall_s:.3f} s")
    for line in written:
        print(f"  {line}")
    return 0


def _print_cycles(r: Result, op: Any, clock_mhz: float, fidelity: str) -> None:
    """A run's cycles, bytes, busy and stall cycles and passes, for a terminal."""
    shape = "x".join(f"{d:,}" for d in r.shape)
    print(f"{r.op} {r.variant} on {r.core}: shape {shape} ({r.n:,} {op.size_unit}), "
          f"{r.cycles:,} cycles = {r.time_us:,.1f} us at {clock_mhz:g} MHz ({fidelity} fidelity)")
    report = op.run_report(r)
    if report:
        print("  " + ", ".join(f"{k} {v:,.4g}" for k, v in report.items()))
    memories = r.engines_of("ddr")  # every memory's port, named as its memory
    for m in memories:
        print(f"  {m.upper()} bytes read {r.bytes[f'{m}_read']:,}, written "
              f"{r.bytes[f'{m}_write']:,}")
    print("  busy cycles: " + ", ".join(f"{k} {v:,}" for k, v in r.busy_cycles.items()))
    stalls = [f"on {k} {v:,}" for k, v in r.stall_cycles.items() if k in memories]
    waits = [f"{k} {v:,}" for k, v in r.stall_cycles.items() if k not in memories]
    print("  core stall cycles: " + "; ".join(", ".join(p) for p in (stalls, waits) if p))
    if len(r.passes) <= PASS_LINES:
        for p in r.passes:
            print(f"  pass {p['name']:<8} {p['start_cycle']:>12,} .. {p['end_cycle']:>12,} cycles")
    else:  # many rows: one line per pass name (every span is in --json and --save)
        for name, (count, cycles) in pass_totals(r.passes).items():
            print(f"  pass {name:<8} {count:>12,} spans, {cycles:,.0f} cycles in all")


def _print_checks(r: Result) -> None:
    """A run's output against the reference, its warnings and hazards."""
    o = r.output
    if o is not None and "exact" in o:  # an integer or byte output
        print(f"  output: {'equals' if o['exact'] else 'DIFFERS FROM'} the reference bit for "
              f"bit ({o['mismatch_count']:,} of {o.get('bytes', o.get('elements', 0)):,} "
              "differ)")
    elif o is not None and "sum" in o:
        print(f"  output: sum {o['sum']:.9g}, {o['nan_count']} NaN, {o['inf_count']} inf, "
              f"{errors_text(o)}")
    for w in r.warnings:
        print(f"  warning [{w['code']}] x{w['count']}: {w['message']}")
    for h in r.hazards:
        print(f"  hazard: {h['message']}")


def interval_line(iv: Any) -> str:
    """An interval in one line: cycles [low, high], the dominant key, the runs it took."""
    if iv.dominant_key is None:
        return (f"cycles [{iv.low_cycles:,}, {iv.high_cycles:,}]: no range of the model moves "
                f"them ({iv.runs} runs)")
    lo, hi = iv.alone[iv.dominant_key]
    return (f"cycles [{iv.low_cycles:,}, {iv.high_cycles:,}] over the model's ranges; the key "
            f"that moves them most: {iv.dominant_key} (alone {lo:,} to {hi:,}); {iv.runs} runs")


def _run_models(args: argparse.Namespace) -> int:
    """``run --models``: the same run under each model, one line (or object) per model."""
    if args.interval:
        raise UsageError("run --models prints a table: --interval is for one --model at a time")
    if any(getattr(args, opt[2:]) for opt in RUN_FILES) or args.window or args.trace_limit:
        raise UsageError("run --models prints a table (or --json): drop the output files (and "
                         "--window, --trace-limit), or run one --model at a time")
    op = get_op(args.op)
    x = op.read_input_file(args.input) if args.input else None
    models = models_from_args(args)
    for model in models.values():
        check_sets_act(args, model, x)
    runs = {label: _simulate(args, model, op, x) for label, model in models.items()}
    if args.json:
        emit_json({"models": {label: run_object(r) for label, r in runs.items()}})
        return 0
    first = next(iter(runs.values()))
    print(f"{first.op} {first.variant}, shape {'x'.join(map(str, first.shape))}, "
          f"{args.fidelity} fidelity, under {len(runs)} models")
    # a pair of byte columns per memory of any model (J6: ddr); "-" where a model has none
    memories = list(dict.fromkeys(m for r in runs.values() for m in r.engines_of("ddr")))
    columns = [(f"{m}_{way}", f"{m}_{way}_bytes") for m in memories for way in ("read", "write")]
    widths = [len(title) + 1 for _, title in columns]
    print(f"{'model':<28} {'cycles':>14} {'time_us':>12} "
          + " ".join(f"{title:>{w}}" for (_, title), w in zip(columns, widths)) + "  warnings")
    for label, r in runs.items():
        codes = ",".join(w["code"] for w in r.warnings if w.get("severity") != "info") or "-"
        cells = [f"{r.bytes[k]:>{w},}" if k in r.bytes else f"{'-':>{w}}"
                 for (k, _), w in zip(columns, widths)]
        print(f"{cell(label, 60):<28} {r.cycles:>14,} {r.time_us:>12,.1f} " + " ".join(cells)
              + f"  {codes}")
    return 0


def add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="every op's documented figures, simulated")
    add_model_args(p, models=True)
    p.add_argument("--op", metavar="OP", help="only this op (default: every op with figures)")
    p.add_argument("--fidelity", choices=FIDELITIES, default="burst",
                   help="simulation fidelity (default burst, the reference)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_data_args(p, arrays=False)


def cmd_reproduce(args: argparse.Namespace) -> int:
    models = models_from_args(args)
    ops = [get_op(args.op)] if args.op else [get_op(name) for name in op_names()]
    ops = [op for op in ops if op.document]
    if not ops:
        raise UsageError(f"reproduce: op {args.op!r} has no documented figures")
    for label, model in models.items():
        _check_document_platform(ops, label, model)
    by_model = {}
    for label, model in models.items():
        out = {op.name: _reproduce_op(op, model, args) for op in ops}
        by_model[label] = out[ops[0].name] if len(ops) == 1 else out
        if not args.json and len(models) > 1:
            print()
    if args.json:
        emit_json(next(iter(by_model.values())) if not args.models else {"models": by_model})
    return 0


def _check_document_platform(ops: list[Any], label: str, model: Any) -> None:
    """Refuse a model not of the platform an op's document figures were measured on (its
    ``[model] name``, file stem or ``base`` chain names it): they compare with nothing else."""
    from dspsim.study.validate import model_platforms

    names = model_platforms(model)
    for op in ops:
        platform = op.document.get("platform")
        if platform is not None and platform not in names:
            raise UsageError(
                f"reproduce: the document's {op.name} figures were measured on {platform}; "
                f"model {label!r} is not a model of {platform}: no document figures for this "
                f"platform (allowed: --model {platform}, or a model file with base = "
                f"\"{platform}\")")


def _reproduce_op(op: Any, model: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run each documented variant at the documented shape; compare with the figures."""
    doc = op.document
    runs = {v: simulate(model, op.name, v, shape=doc["shape"], data=not args.no_data,
                        fidelity=args.fidelity) for v in doc["cycles"]}
    variants = list(doc["cycles"])
    slow, fast = variants[-1], variants[0]
    ratio = runs[slow].cycles / runs[fast].cycles
    doc_ratio = doc["cycles"][slow] / doc["cycles"][fast]
    check = None
    if not args.no_data and doc.get("check"):
        a, b, tolerance = doc["check"]
        check = host_check(runs[a].output_array, runs[b].output_array, tolerance)
    if args.json:
        obj = {**{v: run_object(r) for v, r in runs.items()}, "ratio": ratio}
        return obj | ({"check": check} if check is not None else {})
    print(f"{doc['title']} on {cell(model.name)} ({cell(model.source, 200)})")
    print(f"{'version':<10} {'simulated_cycles':>17} {'document_cycles':>16} {'error_pct':>10}")
    for v, r in runs.items():
        err = 100.0 * (r.cycles / doc["cycles"][v] - 1.0)
        print(f"{v:<10} {r.cycles:>17,} {doc['cycles'][v]:>16,} {err:>+10.2f}")
    err = 100.0 * (ratio / doc_ratio - 1.0)
    print(f"{'ratio':<10} {ratio:>17.3f} {doc_ratio:>16.3f} {err:>+10.2f}   ({slow} / {fast})")
    if check is not None:  # a, b and tolerance as unpacked above
        diff = "n/a" if check["max_rel_diff"] is None else f"{check['max_rel_diff']:.3g}"
        print(f"host check (|{a} - {b}| / |{a}| <= {tolerance:g} per element): "
              f"{'passed' if check['passed'] else 'FAILED'}, max relative difference {diff}")
    for v, r in runs.items():
        for w in r.warnings:
            print(f"warning ({v}) [{w['code']}] x{w['count']}: {w['message']}")
        for h in r.hazards:
            print(f"hazard ({v}): {h['message']}")
    return {}


def add_plot(sub) -> None:
    p = sub.add_parser("plot", help="figures from saved results, without simulating again")
    kinds = p.add_subparsers(
        dest="plot_kind", metavar="{timeline,sweep}", required=True, parser_class=_Parser
    )
    t = kinds.add_parser("timeline", help="timeline of a run saved by `dspsim run --save`")
    t.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")
    t.add_argument("--out", metavar="FILE.png|.svg|.pdf", help="default: RESULT_timeline.png")
    t.add_argument("--window", metavar="START:END", help="cycles from the op's timer start")
    s = kinds.add_parser("sweep", help="figure from a table written by `dspsim sweep`")
    s.add_argument("file", metavar="FILE", help="sweep table")
    s.add_argument("--x", metavar="KEY", help="column on the x axis (line plots)")
    s.add_argument("--y", default=None, metavar="KEY",
                   help="column on the y axis (a heatmap's colour), or speedup (the baseline "
                   "variant's cycles / each other variant's: above 1 the variant is faster) or "
                   "cycles_per_element (default: cycles; speedup when --baseline is given)")
    s.add_argument("--baseline", metavar="V",
                   help="the variant speedup divides by (default: the op's default variant; "
                   "implies --y speedup)")
    s.add_argument("--hue", metavar="KEY",
                   help="one line per value of this column (variant and mode are one column)")
    s.add_argument("--heatmap", nargs=2, metavar=("KEY1", "KEY2"), help="y over two keys")
    s.add_argument("--out", metavar="FILE", help="figure file")
    for kind in (t, s):  # a table's columns, a saved run's model
        add_op_file_args(kind)


def cmd_plot(args: argparse.Namespace) -> int:
    """``dspsim plot sweep`` (:mod:`dspsim.study.sweep_plot`) or ``dspsim plot timeline``."""
    if args.plot_kind == "sweep":
        from dspsim.study.sweep_plot import plot_sweep_cli

        return plot_sweep_cli(args)
    from dspsim.analysis import timeline

    out = timeline.check_figure_path(args.out or timeline.default_timeline_path(args.result))
    check_distinct([("RESULT", args.result), ("--out", out)])
    window = timeline.parse_window(args.window) if args.window is not None else None
    result = load_run(args.result)
    if result.port_log is None:
        raise UsageError(f"{args.result!r} was saved without its port log")
    timeline.plot_timeline(result, out, window)
    note = cut_trace_note(result)
    if note:
        print(note, file=sys.stderr)
    print(f"wrote timeline to {out}")
    return 0


def cut_trace_note(result) -> str | None:
    """One line when ``--trace-limit`` cut the run's trace or a memory's port log (what is
    drawn or summed from it covers only the run's start), else None."""
    from dspsim.analysis.engines import memory_label
    from dspsim.analysis.series import memory_logs, port_log_cut_cycle

    dropped = int(result.trace.attrs.get("rows_dropped", 0)) if result.trace is not None else 0
    cuts = []
    trace_cut = getattr(result, "trace_cut_cycle", None)
    if trace_cut is not None or dropped:
        where = f"cycle {trace_cut:,.0f}" if trace_cut is not None else "the limit"
        cuts.append(f"its trace up to {where} ({len(result.trace):,} rows kept, "
                    f"{dropped:,} not)")
    port_cuts = {m: port_log_cut_cycle(result, m) for m in memory_logs(result)}
    cuts += [f"its {memory_label(m)} port log up to cycle {cut:,.0f}"
             for m, cut in port_cuts.items() if cut is not None]
    if not cuts:
        return None
    return (f"note: --trace-limit kept {' and '.join(cuts)} of its {result.cycles:,} cycles: "
            "what follows from those covers only the run's start")


def add_report(sub) -> None:
    p = sub.add_parser("report", help="where the time goes in a run saved by `dspsim run --save`")
    p.add_argument("result", metavar="RESULT", help="file written by `dspsim run --save`")


def cmd_report(args: argparse.Namespace) -> int:
    """``dspsim report RESULT``: the note on a cut trace, then the report."""
    from dspsim.analysis.tiles import report_text

    result = load_run(args.result)
    note = cut_trace_note(result)
    if note:
        print(note)
    print(report_text(result))
    return 0
