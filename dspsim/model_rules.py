"""The rules a model must keep beyond each key's own range: which keys can act on it, which
names a memory cannot take, which keys a file must give. :mod:`dspsim.config` applies them when
a model is built or overridden; they read a model by duck typing and import no model class.
"""

from __future__ import annotations

import dataclasses
import re
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


# a hardware key that some platforms give nothing to act on: why not, on a model (None: it acts)
IDLE_HARDWARE_KEYS = {"core.write_buffer_entries": _posted_stores,
                      "dcache.write_allocate": _no_allocation}


def refuse_idle(m: Any, keys: list[str]) -> None:
    """Refuse a key set on ``m`` that cannot act on it: a hardware key by
    :data:`IDLE_HARDWARE_KEYS`, an operator's key by the operator (``Op.idle_key``)."""
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
            rule = IDLE_HARDWARE_KEYS.get(key)
            why = rule(m) if rule is not None else None
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
