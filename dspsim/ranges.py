"""Plausible ranges of a model file's guessed and fitted values: its ``[ranges]`` table.

A model file gives each value it does not know for a fact a range beside it::

    [ranges]
    "idma.setup_cycles" = [20.0, 50.0]                     # guess: 20-50 cycles
    "ddr.latency_cycles" = { span_of = ["j6_outstanding_bound"] }  # the readings' values

``span_of``: the smallest and largest of the key's value in this file and in each model file
named (a packaged name, or a path relative to this file), read from their files, never typed
again. A fact has no range. ``base`` inherits ranges, but a file that gives a key's value drops
the range it inherits for that key, as ``--set`` does. A range on an unknown key or a key that
is not a number, that does not hold its value or is inverted is refused in one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dspsim.errors import ConfigError
from dspsim.model_rules import switched_out

RANGES_TABLE = "ranges"
Range = tuple[float, float]
# a model file's merged tables by a name or path relative to a file (the loader's, passed in)
TablesOf = Callable[[str, Path], dict[str, Any]]
_EXPECTED = "expected [LOW, HIGH] or { span_of = [\"model\", ...] }"


def _span(source: str, key: str, spec: dict[str, Any], own: Any, here: Path,
          tables_of: TablesOf) -> list[Any]:
    """The values ``{ span_of = [...] }`` spans: this file's value and each named file's."""
    names = spec.get("span_of")
    if set(spec) != {"span_of"} or not isinstance(names, list) or not names \
            or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{source}: ranges: {key} = {spec!r}: {_EXPECTED}")
    section, _, short = key.partition(".")
    values = [own]
    for name in names:
        try:
            tables = tables_of(name, here)
        except ConfigError as e:
            raise ConfigError(f"{source}: ranges: {key}: span_of {name!r}: {e}") from None
        table = tables.get(section)
        value = table.get(short) if isinstance(table, dict) else None
        if value is None:
            raise ConfigError(f"{source}: ranges: {key}: span_of {name!r}: that model gives "
                              f"no {key}")
        values.append(value)
    return values


def _ends(source: str, key: str, spec: Any, own: Any, here: Path,
          tables_of: TablesOf) -> list[Any]:
    """A range's two ends as written (``[LOW, HIGH]``) or spanned (``span_of``)."""
    if isinstance(spec, dict):
        values = _span(source, key, spec, own, here, tables_of)
        numeric = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numeric) != len(values):
            raise ConfigError(f"{source}: ranges: {key} spans {values!r}: not numbers; a range "
                              "is for a number")
        return [min(values), max(values)]
    if not isinstance(spec, list) or len(spec) != 2:
        raise ConfigError(f"{source}: ranges: {key} = {spec!r}: {_EXPECTED}")
    return spec


def file_ranges(chain: list[tuple[Path, dict[str, Any], str]]) -> dict[str, tuple[Any, str]]:
    """The ranges of a chain of model files (the file first), as written: key -> (spec, the file
    giving it). A file giving a key's value (or a memory's protocol, the other protocol's keys)
    drops the range it inherits for it."""
    out: dict[str, tuple[Any, str]] = {}
    for p, raw, _ in reversed(chain):
        for section, table in raw.items():
            if section != RANGES_TABLE and isinstance(table, dict):
                for k in (*table, *switched_out(table)):
                    out.pop(f"{section}.{k}", None)
        given = raw.get(RANGES_TABLE, {})
        if not isinstance(given, dict):
            raise ConfigError(f"{p}: ranges must be a table [ranges] of \"table.key\" = "
                              "[LOW, HIGH]")
        for key, spec in given.items():
            out[key] = (spec, str(p))
    return out


def checked_ranges(model: Any, written: Mapping[str, tuple[Any, str]],
                   key_of: Callable[[str, Any], Any], tables_of: TablesOf) -> dict[str, Range]:
    """Each written range checked against ``model``: a key it has, a number, ends the key
    accepts, low <= high, the value inside; key -> (low, high)."""
    out: dict[str, Range] = {}
    known = model.keys()
    for key, (spec, where) in written.items():
        if key not in known and isinstance(spec, dict) and "span_of" not in spec:
            raise ConfigError(f"{where}: ranges: {key!r} is a table (a dotted key without "
                              f"quotes): write \"{key}.{next(iter(spec), 'KEY')}\" = [LOW, HIGH]")
        if key not in known:
            raise ConfigError(f"{where}: ranges: unknown model key {key!r}; allowed keys: "
                              f"{', '.join(known)}")
        k = key_of(key, model)
        if k.type not in (int, float):
            raise ConfigError(f"{where}: ranges: {key} is {k.allowed()}, not a number: only a "
                              "number has a range")
        value = model.get(key)
        if value is None:  # an optional key left unset (a transactions memory's latency)
            raise ConfigError(f"{where}: ranges: {key} has no value in this model (unset); a "
                              f"range holds the key's value: give {key} one or drop its range")
        try:
            lo, hi = (k.coerce(v) for v in _ends(where, key, spec, value, Path(where),
                                                    tables_of))
        except ConfigError as e:
            text = str(e)
            raise ConfigError(text if text.startswith(where) else
                              f"{where}: ranges: an end of {text}") from None
        if lo > hi:
            raise ConfigError(f"{where}: ranges: {key} = [{lo!r}, {hi!r}] is inverted; "
                              "write [LOW, HIGH] with LOW <= HIGH")
        if not lo <= value <= hi:
            raise ConfigError(f"{where}: ranges: {key} = [{lo!r}, {hi!r}] does not hold its "
                              f"value {value!r}; a range holds the key's value")
        out[key] = (lo, hi)
    return out


def line_comments(text: str) -> Iterator[tuple[str, str, str]]:
    """(table, key, comment) of each ``key = value  # comment`` line of a model file's text,
    bare keys and quoted ones (``"ddr.latency_cycles" = ...`` in ``[ranges]``)."""
    section = ""
    for line in text.splitlines():
        head = re.match(r"^\s*\[([A-Za-z0-9_]+)\]", line)
        if head:
            section = head.group(1)
            continue
        m = (re.match(r"^\s*([A-Za-z0-9_]+)\s*=[^#]*#\s*(.*)$", line)
             or re.match(r'^\s*"([A-Za-z0-9_.]+)"\s*=.*?#\s*([^"\]]*)$', line))
        if m and section:
            yield section, m.group(1), m.group(2).strip()


def range_comments(chain: list[tuple[Path, dict[str, Any], str]]) -> dict[str, str]:
    """Each range's comment in the file that gives it (its label and source), the file's own
    winning over its bases'."""
    return {key: comment for _, _, text in reversed(chain)
            for section, key, comment in line_comments(text) if section == RANGES_TABLE}
