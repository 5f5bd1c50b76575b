"""``speedup`` of a sweep table: for each combination of the other parameter columns, the cycles
of a baseline variant (the op's default or one given) over those of each other variant; above 1
the variant is the faster, as ``dspsim optimize``'s speed-up (baseline / candidate cycles)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.study.sweep import DEFAULT_OP, key_columns, ok_rows
from dspsim.study.sweep.values import VARIANT_KEYS  # one column, under its name or its older one


def speedup_pair(df: pd.DataFrame, baseline: str | None = None
                 ) -> tuple[str, str, str, list[str]]:
    """(op, variant column, the baseline variant, the other variants) of a table whose speed-up
    is asked for: it needs a variant column with two or more variants of one op, among them the
    baseline (default: the op's default variant)."""
    col = next((c for c in VARIANT_KEYS if c in key_columns(df)), None)
    if col is None:
        raise DspsimInputError(
            "speedup needs a variant (or mode) column with two or more variants of one op")
    ops = list(dict.fromkeys(df["op"])) if "op" in df.columns else [DEFAULT_OP]
    if len(ops) != 1:
        raise DspsimInputError(
            f"speedup needs the points of one op; the table has {', '.join(map(str, ops))}")
    op = get_op(ops[0])
    if op.variants_differ:
        raise DspsimInputError(f"speedup of {op.name}: {op.variants_differ}; plot its cycles")
    variants = list(dict.fromkeys(df[col]))
    if baseline is not None and baseline not in op.variants:
        raise DspsimInputError(
            f"--baseline {baseline}: not a variant of {op.name}; allowed: {', '.join(op.variants)}")
    if len(variants) < 2:
        raise DspsimInputError(
            f"speedup needs two or more variants of {op.name} in the {col} column; the table "
            f"has {', '.join(map(str, variants))} (allowed: {', '.join(op.variants)})")
    base = baseline if baseline is not None else op.default_variant
    if base not in variants:
        which = "--baseline" if baseline is not None else f"{op.name}'s default variant"
        raise DspsimInputError(
            f"speedup divides by {which} {base}; the table's {col} column has "
            f"{', '.join(map(str, variants))} (give --baseline one of them)")
    return op.name, col, base, [v for v in variants if v != base]


def join_warnings(values: Sequence[Any]) -> str:
    codes = [c for v in values if isinstance(v, str) for c in v.split(";") if c]
    return ";".join(dict.fromkeys(codes))


def speedup_table(df: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """The baseline's cycles / each other variant's (:func:`speedup_pair`) per combination of the
    other parameter columns, successful points only: those keys, the variant column (several
    other variants), ``speedup`` and ``warnings`` (either point's codes, when the table has any)."""
    _, col, base, variants = speedup_pair(df, baseline)
    keys = key_columns(df)
    ok = ok_rows(df)
    others = [k for k in keys if k != col]
    wanted = ["cycles", *(["warnings"] if "warnings" in df.columns else [])]

    def points(variant: str) -> pd.DataFrame:
        part = ok[ok[col] == variant]
        part = (part.set_index(others)[wanted] if others
                else part[wanted].iloc[:1].reset_index(drop=True))
        return part.assign(cycles=part["cycles"].astype(float))

    if ok[ok[col] == base].empty:
        raise DspsimInputError(f"speedup needs {base} points; the table has none that succeeded")
    done = [v for v in variants if not ok[ok[col] == v].empty]
    if not done:
        raise DspsimInputError(
            f"speedup needs {' or '.join(variants)} points; the table has none that succeeded")
    denominator = points(base)
    tables = []
    for variant in done:
        joined = pd.concat({variant: points(variant), base: denominator}, axis=1, join="inner")
        table = pd.DataFrame(index=joined.index)
        table["speedup"] = joined[(base, "cycles")] / joined[(variant, "cycles")]
        if "warnings" in wanted:
            table["warnings"] = [join_warnings(pair) for pair in
                                 zip(joined[(variant, "warnings")], joined[(base, "warnings")])]
        table = table.reset_index(drop=not others)
        if len(variants) > 1:  # which variant each row is of, where the table had its column
            table.insert(keys.index(col) if others else 0, col, variant)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)
