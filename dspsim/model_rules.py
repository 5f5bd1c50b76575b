"""The rules a model must keep beyond each key's own range: which keys can act on it, which
names a memory cannot take, which keys a file must give, and its ``[ranges]`` table (each guessed
or fitted value's plausible ``[LOW, HIGH]``, or ``{ span_of = [...] }`` the values other model
files give it; ``docs/reference.md``). :mod:`dspsim.config` applies them when a model is built
or overridden; they read a model by duck typing and import no model class.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dspsim.errors import ConfigError
from dspsim.schema import OP_KEY_IDLE, Key

# a table whose first key switches a part on: while it is on (not at its default), the
# table's other keys have no default and the file gives them (a data cache's shape)
SWITCHED_TABLES = {"dcache": "capacity_bytes"}
# keys of a switched table that keep their default while it is on (added later, they default
# to what the part did before them)
SWITCHED_OPTIONAL = frozenset({"dcache.write_allocate", "dcache.miss_cycles",
                               "dcache.prefetch_streams"})


def switched_keys(section: str, table: dict[str, Any], names: list[str]) -> set[str]:
    """The keys of ``section`` (``names``) its ``table`` must give because it switches its
    part on (:data:`SWITCHED_TABLES`): all but the switch and the optional ones."""
    switch = SWITCHED_TABLES.get(section)
    if switch is None or table.get(switch, 0) == 0:
        return set()
    return {k for k in names if k != switch and f"{section}.{k}" not in SWITCHED_OPTIONAL}


# names a memory's table cannot take: those of the engines (core0; a channel's lane idma1) and
# of the core's waits on copies (idma_in, idma_out), which share a run's busy_cycles,
# stall_cycles and engines, and a sweep's columns (<memory>_busy_cycles, idma1_busy_cycles,
# idma_in_stall_cycles), with the memories' names
RESERVED_MEMORY_NAMES = re.compile(r"(core|idma)[0-9]*|idma_in|idma_out")
RESERVED_MEMORY_WORDS = "core<N>, idma<N>, idma_in, idma_out"


def _posted_stores(m: Any) -> str | None:
    """Why no store is ever posted to the core's write buffer, None when some can be: stores
    to a memory reached through a write-back data cache go into the cache, not the buffer."""
    if m.dcache.write_policy == "write_through" or not m.dcache.write_allocate or any(
            not c.cached for c in m.memories.values()):
        return None
    return (f"every memory of the model ({', '.join(m.memories)}) is reached through the "
            "write-back data cache, so no store is posted to the write buffer; it acts with a "
            "memory that is not cached or dcache.write_policy = \"write_through\"")


def _no_allocation(m: Any) -> str | None:
    """Why a store miss never allocates whatever ``dcache.write_allocate`` says."""
    if m.dcache.write_policy == "write_back":
        return None
    return ("a write_through data cache never allocates on a store; it acts with "
            "dcache.write_policy = \"write_back\"")


# a hardware key that some platforms give nothing to act on: why not, on a model (None: it acts)
IDLE_HARDWARE_KEYS = {"core.write_buffer_entries": _posted_stores,
                      "dcache.write_allocate": _no_allocation}
# a memory's keys by its protocol: those it must give, and those only that protocol takes
PROTOCOL_REQUIRED = {"pipelined": ("latency_cycles", "bytes_per_cycle"),
                     "transactions": ("clock_cycles", "command_clocks", "bytes_per_clock")}
PROTOCOL_ONLY = {"pipelined": ("latency_cycles", "bytes_per_cycle", "write_latency_cycles"),
                 "transactions": ("clock_cycles", "command_clocks", "bytes_per_clock",
                                  "read_hold_clocks", "write_hold_clocks", "page_bytes",
                                  "refresh_clocks")}


def other_protocol(protocol: Any) -> str:
    """The protocol a memory's keys are refused for when it has ``protocol``."""
    return "transactions" if protocol == "pipelined" else "pipelined"


def switched_out(table: dict[str, Any]) -> tuple[str, ...]:
    """The keys a memory's ``table`` drops from what it inherits by giving its protocol."""
    return PROTOCOL_ONLY.get(other_protocol(table["protocol"]), ()) if "protocol" in table else ()


def merged_table(base: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """A file's table over the one it inherits (``base``): a memory's that gives its protocol
    drops the other protocol's keys it inherits."""
    gone = switched_out(table)
    return {**{k: v for k, v in base.items() if k not in gone}, **table}


def protocol_checked(source: str, memory: str, table: dict[str, Any],
                     defaults: dict[str, Any]) -> set[str]:
    """The keys a memory's ``table`` must give for its protocol, once a key of the other
    protocol's given at a value other than its default is refused (at its default:
    :func:`refuse_idle`)."""
    protocol = table.get("protocol", "pipelined")
    for name, value in table.items():
        why = protocol_misfit(memory, protocol, name)
        if why and value != defaults.get(name):
            raise ConfigError(f"{source}: {why}")
    return set(PROTOCOL_REQUIRED.get(protocol, ()))


def protocol_misfit(memory: str, protocol: str, name: str) -> str | None:
    """Why ``memory``'s key ``name`` cannot act under ``protocol`` (None: it can)."""
    other = other_protocol(protocol)
    if name in PROTOCOL_ONLY[other]:
        return (f"{memory}.{name} cannot act on a {protocol} memory: it acts with "
                f"{memory}.protocol = \"{other}\", or leave {memory}.{name} unset")
    return None


def silent_memory_key(memory: str, protocol: str, name: str) -> bool:
    """Whether a memory's key ``name`` says nothing under ``protocol`` (the other protocol's
    keys, ``protocol`` itself at its default): a model's tables leave these out, so a pipelined
    memory's table reads as before memories had protocols."""
    if name == "protocol":
        return protocol == "pipelined"
    return protocol_misfit(memory, protocol, name) is not None


def refuse_two_ways(source: str, memories: dict[str, Any]) -> None:
    """Refuse a memory the core reaches both through its data cache and on its own bus."""
    for m, cfg in memories.items():
        if cfg.cached and cfg.core_local:
            raise ConfigError(f"{source}: {m}.cached and {m}.core_local both true: the core "
                              "reaches a memory through its data cache or on its own bus; "
                              "allowed: one of them, or neither")


def check_dcache(m: Any) -> None:
    """The data cache is there for the memories that use it, and every one of its keys does
    something."""
    d = m.dcache
    cached = [name for name, c in m.memories.items() if c.cached]
    if d.capacity_bytes == 0:
        if cached:
            raise ConfigError(f"{cached[0]}.cached = true but the model has no data cache "
                              "(dcache.capacity_bytes = 0)")
        given = {f.name for f in dataclasses.fields(d) if getattr(d, f.name) != f.default}
        if given:
            raise ConfigError(f"dcache.{sorted(given)[0]} does nothing: the model has no data "
                              "cache (dcache.capacity_bytes = 0)")
        return
    line = d.line_bytes
    if line & (line - 1):
        raise ConfigError(f"dcache.line_bytes = {line}: must be a power of two")
    if d.capacity_bytes % (line * d.ways):
        raise ConfigError(f"dcache.capacity_bytes = {d.capacity_bytes}: must be a multiple of "
                          f"line_bytes x ways = {line * d.ways}")
    if not cached:
        raise ConfigError("the data cache serves no memory: set cached = true on a memory, or "
                          "dcache.capacity_bytes = 0")


def refuse_idle(m: Any, keys: list[str]) -> None:
    """Refuse a key set on ``m`` that cannot act on it: a memory's by its protocol, a hardware
    key by :data:`IDLE_HARDWARE_KEYS`, an operator's key by the operator (``Op.idle_key``)."""
    for key in keys:
        section, _, name = key.partition(".")
        memory = getattr(m, "memories", {}).get(section)
        if memory is not None:
            why = protocol_misfit(section, memory.protocol, name)
            if why:
                raise ConfigError(why)
            if (name == "max_outstanding" and memory.protocol == "transactions"
                    and memory.max_outstanding != 1):
                raise ConfigError(
                    f"{key} = {memory.max_outstanding} cannot act on a transactions memory: it "
                    f"serves one transaction at a time; allowed: 1, or {section}.protocol = "
                    "\"pipelined\"")
            continue
        if section in OP_KEY_IDLE:
            why = OP_KEY_IDLE[section](m, key)
        else:
            why = IDLE_HARDWARE_KEYS.get(key, lambda _: None)(m)
        if why:
            raise ConfigError(f"{key} cannot act on this model: {why}, or leave {key} unset")


def refuse_missing(source: str, missing: list[Key]) -> None:
    """One line naming every key a model omits that has no default."""
    if missing:
        rest = f"; every missing key: {', '.join(k.name for k in missing)}" if missing[1:] else ""
        raise ConfigError(f"{source}: missing key {missing[0].name} ({missing[0].doc}){rest}")


def refuse_reserved(source: str, memories: list[str]) -> None:
    """Refuse a memory named as an engine or a core's wait, or differing from another only in
    case."""
    for name in memories:
        if RESERVED_MEMORY_NAMES.fullmatch(name):
            raise ConfigError(
                f"{source}: memory table [{name}]: the name is reserved ({RESERVED_MEMORY_WORDS} "
                "name the engines and the core's waits in a run's report and a sweep's columns); "
                "allowed: a letter, then letters, digits or _ (e.g. ddr, psram, sram), other than "
                f"{RESERVED_MEMORY_WORDS}"
            )
    seen: dict[str, str] = {}
    for name in memories:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise ConfigError(
                f"{source}: memory tables [{other}] and [{name}]: their names differ only in "
                "case, and a report and a figure name a memory in capitals (both print as "
                f"{name.upper()}); allowed: names that differ in more than case")


# ---------------------------------------------------------------------- the [ranges] table
RANGES_TABLE = "ranges"
Range = tuple[float, float]
# a model file's merged tables by a name or path relative to a file (the loader's, passed in)
TablesOf = Callable[[str, Path], dict[str, Any]]
_EXPECTED = "expected [LOW, HIGH] or { span_of = [\"model\", ...] }"


def _ends(source: str, key: str, spec: Any, own: Any, here: Path,
          tables_of: TablesOf) -> list[Any]:
    """A range's two ends as written (``[LOW, HIGH]``) or spanned (``{ span_of = [...] }``:
    this file's value and each named file's)."""
    if not isinstance(spec, dict):
        if not isinstance(spec, list) or len(spec) != 2:
            raise ConfigError(f"{source}: ranges: {key} = {spec!r}: {_EXPECTED}")
        return spec
    names = spec.get("span_of")
    if set(spec) != {"span_of"} or not isinstance(names, list) or not names \
            or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{source}: ranges: {key} = {spec!r}: {_EXPECTED}")
    section, _, short = key.partition(".")
    values = [own]
    for name in names:
        try:
            table = tables_of(name, here).get(section)
        except ConfigError as e:
            raise ConfigError(f"{source}: ranges: {key}: span_of {name!r}: {e}") from None
        value = table.get(short) if isinstance(table, dict) else None
        if value is None:
            raise ConfigError(f"{source}: ranges: {key}: span_of {name!r}: that model gives "
                              f"no {key}")
        values.append(value)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ConfigError(f"{source}: ranges: {key} spans {values!r}: not numbers; a range "
                          "is for a number")
    return [min(values), max(values)]


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
        out.update((key, (spec, str(p))) for key, spec in given.items())
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
