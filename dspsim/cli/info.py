"""``dspsim ops`` and ``dspsim keys``: what can be run and what can be set."""

from __future__ import annotations

import argparse

from dspsim.cli.common import UsageError, add_model_args, emit_json, model_from_args
from dspsim.config import key_sources, model_key, range_sources
from dspsim.ops import get_op, op_names


def add_ops(sub) -> None:
    p = sub.add_parser("ops", help="every op, its variants and its parameters")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def ops_table() -> list[dict]:
    return [{"op": op.name, "doc": op.doc, "command": f"0x{op.cmd:04x}",
             "input": " or ".join("n (1-D)" if d == 1 else "shape ROWS,COLS (2-D)"
                                  for d in op.input_dims),
             "default_shape": list(op.default_shape),
             "variants": [{"variant": v, "doc": d, "needs": op.requirements(v)}
                          for v, d in op.variants.items()],
             "params": [k.describe() for k in op.params.keys]}
            for op in map(get_op, op_names())]


def cmd_ops(args: argparse.Namespace) -> int:
    table = ops_table()
    if args.json:
        emit_json(table)
        return 0
    for op in table:
        print(f"{op['op']} ({op['command']}): {op['doc']}")
        print(f"  input: {op['input']}, default {'x'.join(map(str, op['default_shape']))}")
        for v in op["variants"]:
            need = ", ".join(f"{k} {n}" for k, n in v["needs"].items() if n) or "no TCM"
            print(f"  variant {v['variant']:<10} {v['doc']} (needs {need})")
        for k in op["params"]:
            unit = f" {k['unit']}" if k["unit"] else ""
            print(f"  {k['key']} = {k['default']!r}{unit}: {k['doc']} [{k['allowed']}]")
        print()
    return 0


def add_keys(sub) -> None:
    p = sub.add_parser("keys", help="every model key: value, unit, range, meaning, source")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--markdown", action="store_true",
                   help="print the model-file reference (every table and key) as Markdown")


def cmd_keys(args: argparse.Namespace) -> int:
    if args.markdown:
        from dspsim.reference import model_file_reference

        given = [o for o, v in (("--model", args.model), ("--set", args.overrides),
                                ("--json", args.json)) if v]
        if given:
            raise UsageError(f"keys --markdown prints the model-file reference, one for every "
                             f"model, as Markdown: drop {', '.join(given)}")
        print(model_file_reference(), end="")
        return 0
    model = model_from_args(args)
    sources = key_sources(model.source)
    range_notes = range_sources(model.source) if model.source else {}
    rows = []
    # the model's own hardware tables (its memories, whatever their names), then the ops'
    hardware = {k for k in model.keys() if k.partition(".")[0] in model.hardware_sections()}
    for key in model.keys():
        source = sources.get(key, "" if key in hardware else "op default")
        span = model.ranges.get(key)
        rows.append({**model_key(key).describe(), "value": model.get(key), "source": source,
                     "label": source.split(":")[0].split()[0] if source else "",
                     "range": list(span) if span else None,
                     "range_source": range_notes.get(key, "") if span else ""})
    if args.json:
        emit_json(rows)
        return 0
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        default = "" if r["default"] is None else f"; default {r['default']!r}"
        print(f"{r['key']:<32} {r['value']!r:>12}{unit:<13} [{r['allowed']}{default}] "
              f"{r['doc']}")
        if r["source"]:
            print(f"{'':<34}{r['source']}")
        if r["range"]:
            lo, hi = r["range"]
            note = f": {r['range_source']}" if r["range_source"] else ""
            print(f"{'':<34}range [{lo!r}, {hi!r}]{note}")
    return 0
