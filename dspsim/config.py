"""The hardware model: frozen dataclasses loaded from ``models/*.toml``.

A model file holds the hardware tables (``[core]``, ``[ddr]``, ``[idma]``, ``[tcm]``,
``[host]``) and, optionally, one table per operator (``[softmax]``, ``[layernorm]``) whose keys
the operator declares (:mod:`dspsim.schema`); an operator's keys the file does not give take
the operator's defaults. A file may be partial: ``base = "j6"`` (a packaged model name, or a
path relative to the file) inherits every table and key it does not give.

Every key is declared once, with its type, range, unit and meaning; unknown tables and keys,
wrong types and out-of-range values are rejected with a one-line :class:`ConfigError`. Dotted
overrides (``ddr.latency_cycles=300``) go through the same checks.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from dspsim.errors import ConfigError
from dspsim.schema import OP_SCHEMAS, Key, Params

MAX_MODEL_FILE_BYTES = 1 << 20
MAX_BASE_DEPTH = 16


def _key(
    lo: float | None = None,
    hi: float | None = None,
    unit: str = "",
    doc: str = "",
    positive: bool = False,
    default: Any = dataclasses.MISSING,
    choices: tuple = (),
):
    """A hardware key's metadata: allowed range (``positive``: strictly above 0) or choices,
    unit, meaning; ``default``: the value of a model file that does not give the key (else it
    must)."""
    return field(default=default,
                 metadata={"lo": lo, "hi": hi, "unit": unit, "doc": doc, "positive": positive,
                           "choices": choices})


@dataclass(frozen=True)
class Core:
    count: int = _key(1, 4, "cores", "DSP cores, each with its own iDMA channels and DataRAMs")
    clock_mhz: float = _key(1.0, 10_000.0, "MHz", "DSP core clock")
    lanes_f32: int = _key(1, 256, "lanes", "float32 lanes per vector (IVP_N_2)")
    load_store_units: int = _key(1, 8, "ops/cycle", "vector loads/stores issued per cycle")
    vector_alu_slots: int = _key(1, 16, "ops/cycle", "vector ALU/multiply ops issued per cycle")
    alu_latency_cycles: int = _key(1, 64, "cycles", "latency of one dependent vector op")
    call_overhead_cycles: int = _key(0, 100_000, "cycles", "kernel call, prologue, pipeline fill")
    write_buffer_entries: int = _key(1, 1024, "stores", "posted DDR stores before the core stalls")

    @property
    def vector_bytes(self) -> int:
        return self.lanes_f32 * 4


@dataclass(frozen=True)
class MemoryCfg:
    """One external memory behind its own port (J6: ``[ddr]``; a smaller SoC: ``[psram]`` and
    ``[sram]``). Every table of a model file that is not a hardware or op table is one."""

    latency_cycles: float = _key(
        0.0, 1e6, "cycles", "round trip of one request, port to the memory and back",
        positive=True
    )
    bytes_per_cycle: float = _key(1e-6, 1e4, "bytes/cycle", "port bandwidth, shared by all")
    max_outstanding: int = _key(1, 4096, "requests", "requests in flight on the port")
    base_address: int = _key(0, (1 << 32) - 1, "bytes", "first address of the memory in the "
                             "DSP's 32-bit map (0x80000000 in a file that does not give it)",
                             default=0x8000_0000)
    size_bytes: int = _key(4096, 1 << 32, "bytes", "bytes of the memory the DSP can address "
                           "(2 GiB in a file that does not give it)", default=0x8000_0000)
    cached: bool = _key(unit="", doc="the core reaches it through its data cache ([dcache]; "
                        "false in a file that does not give it)", default=False)


Ddr = MemoryCfg  # J6's one memory; the older name


@dataclass(frozen=True)
class Dcache:
    """The core's data cache in front of the memories marked ``cached`` (off: capacity 0)."""

    capacity_bytes: int = _key(0, 1 << 24, "bytes", "data cache capacity; 0: no data cache "
                               "(J6's Vision DSP has none; 0 in a file that does not give it)",
                               default=0)
    line_bytes: int = _key(4, 4096, "bytes", "bytes per cache line (a power of two)",
                           default=128)
    ways: int = _key(1, 64, "ways", "associativity (LRU within a set)", default=4)
    write_policy: str = _key(unit="", doc="write_back (allocate on a store miss, write a dirty "
                             "line back when it is evicted) or write_through (stores go to the "
                             "memory through the write buffer, no allocation)",
                             default="write_back", choices=("write_back", "write_through"))
    prefetch_next_line: bool = _key(unit="", doc="a miss or a first hit on a prefetched line "
                                    "also fetches the next line, without stalling",
                                    default=False)


@dataclass(frozen=True)
class Idma:
    channels: int = _key(1, 8, "channels", "iDMA channels (descriptor FIFOs) per core")
    max_outstanding: int = _key(1, 1024, "requests", "bursts in flight per channel (max_pif_req)")
    burst_bytes: int = _key(1, 1 << 20, "bytes", "bytes per DDR request of a channel")
    setup_cycles: float = _key(0.0, 1e6, "cycles", "core cycles to program one descriptor")
    tcm_end_required: bool = _key(unit="", doc="every transfer must have one end in TCM (a "
                                  "copy within one external memory is refused; false in a file "
                                  "that does not give it)", default=False)


@dataclass(frozen=True)
class Tcm:
    banks: int = _key(1, 8, "banks", "DataRAM banks (tile-manager colours) per core")
    bank_bytes: int = _key(4, 1 << 30, "bytes", "capacity of one DataRAM (at least one float32)")
    reserved_bytes: int = _key(0, 1 << 30, "bytes", "TCM per DataRAM the firmware keeps for "
                               "itself: the tile manager never hands it out (less than a "
                               "DataRAM; 0 in a model file that does not give it)", default=0)


@dataclass(frozen=True)
class Host:
    rpc_latency_us: float = _key(0.0, 1e6, "us", "host submit-to-start plus done-to-wake latency")
    memory: str = _key(unit="", doc="the memory the host allocates the op's buffers from (a "
                       "memory table of the model; \"ddr\" in a file that does not give it)",
                       default="ddr")


HARDWARE: dict[str, type] = {"core": Core, "idma": Idma, "tcm": Tcm, "host": Host,
                             "dcache": Dcache}
MEMORY_FIELDS = {f.name for f in fields(MemoryCfg)}


def _hw_key(section: str, f: dataclasses.Field) -> Key:
    names = {"int": int, "float": float, "str": str, "bool": bool}
    m = f.metadata
    return Key(
        f"{section}.{f.name}",
        f.type if isinstance(f.type, type) else names[f.type],
        doc=m["doc"],
        lo=m["lo"],
        hi=m["hi"],
        positive=m["positive"],
        unit=m["unit"],
        choices=m.get("choices", ()),
    )


def memory_keys(name: str) -> dict[str, Key]:
    """The keys of a memory table named ``name`` (``ddr.latency_cycles``, ...)."""
    return {f"{name}.{f.name}": _hw_key(name, f) for f in fields(MemoryCfg)}


# J6's memory (``ddr``) is listed among the keys, after the core's, as it always was
_KEY_ORDER = [("core", Core), ("ddr", MemoryCfg)] + [(s, c) for s, c in HARDWARE.items()
                                                     if s != "core"]
HARDWARE_KEYS: dict[str, Key] = {
    f"{s}.{f.name}": _hw_key(s, f) for s, cls in _KEY_ORDER for f in fields(cls)
}


class _Sections(Mapping[str, Any]):
    """Every table a model file may hold: hardware, then each registered operator's."""

    def _all(self) -> dict[str, Any]:
        return {**HARDWARE, **OP_SCHEMAS}

    def __getitem__(self, name: str) -> Any:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


SECTIONS: Mapping[str, Any] = _Sections()


def all_keys() -> list[str]:
    """Every settable key: hardware, then each operator's."""
    return list(HARDWARE_KEYS) + [k.name for s in OP_SCHEMAS.values() for k in s.keys]


def is_memory_section(section: str) -> bool:
    """Whether a table named ``section`` is a memory's (any name that is not a hardware, op or
    ``[model]`` table)."""
    return section not in HARDWARE and section not in OP_SCHEMAS and section != "model" \
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", section) is not None


def model_key(key: str) -> Key:
    """The :class:`Key` behind a dotted model key (unknown keys: one-line error). A memory's
    keys are those of any memory table (``sram.latency_cycles``); whether the model has that
    memory is checked when the key is applied to it."""
    if key in HARDWARE_KEYS:
        return HARDWARE_KEYS[key]
    section, _, name = key.partition(".")
    if is_memory_section(section) and name in MEMORY_FIELDS:
        return memory_keys(section)[key]
    schema = OP_SCHEMAS.get(section)
    k = schema.key(name) if schema else None
    if k is None:
        raise ConfigError(f"unknown model key {key!r}; allowed keys: {', '.join(all_keys())}")
    return k


model_field = model_key  # the name the sweep and the calibration use


def key_type(key: str) -> type:
    """The Python type of a model key's values: int, float, str or bool."""
    return model_key(key).type


def check_value(key: str, value: Any) -> Any:
    """Check one value for one model key on its own (type and range); return it coerced."""
    return model_key(key).coerce(value)


def parse_value(key: str, text: str) -> Any:
    """Parse the value half of ``KEY=VALUE`` by the key's type."""
    return model_key(key).parse(text)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. ddr.latency_cycles=300")
        key = key.strip()
        if key in out:
            raise ConfigError(f"override {key} is given twice; give each key once")
        out[key] = parse_value(key, value)
    return out


@dataclass(frozen=True)
class HardwareModel:
    core: Core
    idma: Idma
    tcm: Tcm
    host: Host
    dcache: Dcache
    # the platform's memories by name, in file order (J6: ddr; a smaller SoC: psram, sram)
    memories: Mapping[str, MemoryCfg] = field(default_factory=dict)
    ops: Mapping[str, Params] = field(default_factory=dict)  # op name -> its parameters
    name: str = "model"
    source: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()

    def __getattr__(self, name: str) -> Any:
        """A memory's table or an operator's parameters as an attribute: ``model.ddr``,
        ``model.softmax.tile_bytes``."""
        for tables in (self.__dict__.get("memories", {}), self.__dict__.get("ops", {})):
            if name in tables:
                return tables[name]
        raise AttributeError(f"model has no table {name!r}")

    @property
    def host_memory(self) -> MemoryCfg:
        """The memory the host allocates from (``host.memory``)."""
        return self.memories[self.host.memory]

    def hardware_sections(self) -> list[str]:
        """The hardware tables in order: core, the memories, idma, tcm, host, dcache."""
        return ["core", *self.memories, "idma", "tcm", "host", "dcache"]

    def get(self, key: str) -> Any:
        k = model_key(key)
        return getattr(getattr(self, k.section), k.short)

    def params(self, op: str) -> Params:
        return self.ops[op]

    def with_overrides(self, overrides: dict[str, Any] | list[str]) -> HardwareModel:
        """Return a copy with dotted-key overrides applied and checked."""
        pairs = parse_overrides(overrides) if isinstance(overrides, list) else dict(overrides)
        # op tables at their defaults stay out, so that only the ops whose parameters are set
        # are checked against the hardware now (each op checks its own when it runs)
        raw = {s: d for s, d in self.as_dict().items()
               if s not in OP_SCHEMAS or d != OP_SCHEMAS[s].defaults()}
        for key, value in pairs.items():
            k = model_key(key)
            if is_memory_section(k.section) and k.section not in self.memories:
                raise ConfigError(
                    f"{key}: the model has no memory {k.section!r}; its memories: "
                    f"{', '.join(self.memories)} (a new memory is a table in a model file)"
                )
            raw.setdefault(k.section, {})[k.short] = value
        model = build_model(raw, self.source)
        return dataclasses.replace(
            model, name=self.name, overrides=self.overrides + tuple(pairs.items())
        )

    def as_dict(self) -> dict[str, dict[str, Any]]:
        hw = {s: dataclasses.asdict(getattr(self, s)) for s in self.hardware_sections()}
        return hw | {s: dict(p) for s, p in self.ops.items()}

    def flat(self) -> dict[str, Any]:
        return {f"{s}.{k}": v for s, d in self.as_dict().items() for k, v in d.items()}


def _table(source: str, raw: Mapping[str, Any], section: str) -> dict[str, Any]:
    table = raw.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {section} must be a table [{section}], got {table!r}")
    return table


def _hw_table(source: str, raw: Mapping[str, Any], section: str, cls: type) -> Any:
    """One hardware table, every key checked; a key the file does not give takes its default
    or, without one, is refused as missing."""
    table = _table(source, raw, section)
    for k in table:
        model_key(f"{section}.{k}")  # raises with the list of allowed keys
    values = {}
    for f in fields(cls):
        key = model_key(f"{section}.{f.name}")
        if f.name not in table:
            if f.default is not dataclasses.MISSING:  # a key newer than the file
                values[f.name] = f.default
                continue
            raise ConfigError(f"{source}: missing key {key.name} ({key.doc})")
        values[f.name] = key.coerce(table[f.name])
    return cls(**values)


def build_model(raw: Mapping[str, Any], source: str = "model") -> HardwareModel:
    """A checked model from parsed tables (a model file's, after ``base`` is resolved)."""
    memories = [s for s in raw if is_memory_section(s) and isinstance(raw[s], dict)
                and set(raw[s]) & MEMORY_FIELDS]
    unknown = set(raw) - set(SECTIONS) - {"model"} - set(memories)
    if unknown:
        raise ConfigError(
            f"{source}: unknown table [{sorted(unknown)[0]}]; allowed: {', '.join(SECTIONS)}, "
            f"or a memory table (keys {', '.join(sorted(MEMORY_FIELDS))})"
        )
    meta = _table(source, raw, "model")
    if set(meta) - {"name"}:
        raise ConfigError(f"{source}: unknown key model.{sorted(set(meta) - {'name'})[0]}; "
                          "allowed: model.name")
    if not memories:
        raise ConfigError(f"{source}: missing key ddr.latency_cycles (the model declares no "
                          "memory: J6's is the table [ddr])")
    built: dict[str, Any] = {
        section: _hw_table(source, raw, section, cls) for section, cls in HARDWARE.items()
    }
    built["memories"] = {m: _hw_table(source, raw, m, MemoryCfg) for m in memories}
    ops = {}
    for section, schema in OP_SCHEMAS.items():
        table = _table(source, raw, section)
        for k in table:
            model_key(f"{section}.{k}")
        ops[section] = Params(
            section, {k.short: k.coerce(table.get(k.short, k.default)) for k in schema.keys}
        )
    name = meta.get("name", "model")
    if not isinstance(name, str):
        raise ConfigError(f"{source}: model.name = {name!r}: expected a string")
    model = HardwareModel(**built, ops=ops, name=name, source=source)
    _check_cross(model, [s for s in OP_SCHEMAS if raw.get(s)])
    return model


def _check_cross(m: HardwareModel, given: list[str]) -> None:
    """Constraints between keys: the hardware's, then those of the operators whose tables the
    file (or an override) gives; an op checks its defaults against the hardware when it runs."""
    lanes = m.core.lanes_f32
    if lanes & (lanes - 1):
        raise ConfigError(
            f"core.lanes_f32 = {lanes}: must be a power of two (the kernels' lane reductions "
            "halve the vector each step)"
        )
    _check_memories(m)
    if m.tcm.reserved_bytes >= m.tcm.bank_bytes:
        raise ConfigError(
            f"tcm.reserved_bytes = {m.tcm.reserved_bytes}: the firmware cannot keep a whole "
            f"DataRAM of tcm.bank_bytes = {m.tcm.bank_bytes}; allowed: tcm.reserved_bytes < "
            "tcm.bank_bytes"
        )
    for section in given:
        if OP_SCHEMAS[section].check is not None:
            OP_SCHEMAS[section].check(m.ops[section], m)


# the DataRAMs' part of the DSP's map (dspsim.hw.tcm: 0x08000000 up, one stride a bank)
TCM_MAP_BASE, TCM_MAP_END = 0x0800_0000, 0x1000_0000


def _check_memories(m: HardwareModel) -> None:
    """The memories fit the 32-bit map without overlapping each other or the DataRAMs; the
    host allocates from one of them; the data cache is there for the memories that use it and
    every one of its keys does something."""
    if m.host.memory not in m.memories:
        raise ConfigError(f"host.memory = {m.host.memory!r}: the model's memories are "
                          f"{', '.join(m.memories)}")
    ranges = sorted((c.base_address, c.base_address + c.size_bytes, name)
                    for name, c in m.memories.items())
    for lo, hi, name in ranges:
        if hi > 1 << 32:
            raise ConfigError(f"{name}: base_address + size_bytes = {hi:#x} is beyond the DSP's "
                              "32-bit map (at most 0x100000000)")
        if lo < TCM_MAP_END and hi > TCM_MAP_BASE:
            raise ConfigError(f"{name}: {lo:#x}-{hi:#x} overlaps the DataRAMs at "
                              f"{TCM_MAP_BASE:#x}-{TCM_MAP_END:#x}; give {name}.base_address")
    for (_, hi, a), (lo, _, b) in zip(ranges, ranges[1:]):
        if lo < hi:
            raise ConfigError(f"memories {a} and {b} overlap in the DSP's map ({b} starts at "
                              f"{lo:#x}, before {a} ends at {hi:#x}); give distinct "
                              "base_address / size_bytes")
    d = m.dcache
    cached = [name for name, c in m.memories.items() if c.cached]
    if d.capacity_bytes == 0:
        if cached:
            raise ConfigError(f"{cached[0]}.cached = true but the model has no data cache "
                              "(dcache.capacity_bytes = 0)")
        given = {f.name for f in fields(Dcache) if getattr(d, f.name) != f.default}
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


def models_dir() -> Path:
    """The packaged models (wheel) or the repository's ``models/`` (editable install)."""
    packaged = resources.files("dspsim") / "models"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[1] / "models"


def default_model_path() -> Path:
    return models_dir() / "j6.toml"


def resolve_model_path(name_or_path: str | Path, relative_to: Path | None = None) -> Path:
    """A packaged model name (``j6``) or a path (relative to ``relative_to``'s folder)."""
    text = str(name_or_path)
    if re.fullmatch(r"[A-Za-z0-9_-]+", text) and (models_dir() / f"{text}.toml").is_file():
        return models_dir() / f"{text}.toml"
    p = Path(text)
    if relative_to is not None and not p.is_absolute():
        p = relative_to.parent / p
    return p


def _read_toml(p: Path) -> dict[str, Any]:
    shown = str(p)
    try:
        if not p.is_file():
            if p.exists():
                raise ConfigError(f"model file {shown!r} is not a regular file")
            raise ConfigError(f"model file {shown!r} not found; pass an existing .toml file")
        if p.stat().st_size > MAX_MODEL_FILE_BYTES:
            raise ConfigError(f"model file {shown!r} is larger than {MAX_MODEL_FILE_BYTES} bytes")
        with open(p, "rb") as f:
            text = f.read(MAX_MODEL_FILE_BYTES + 1).decode("utf-8")
    except ConfigError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"model file {shown!r} unreadable: {e.__class__.__name__}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"model file {shown!r} is not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"model file {shown!r} is nested too deeply") from None


def read_model_tables(p: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A model file's tables with its ``base`` chain merged in (the file's own keys win)."""
    raw = _read_toml(p)
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{p}: base = {base!r}: expected a model name (e.g. \"j6\") or a path")
    base_path = resolve_model_path(base, p)
    if base_path.resolve() in _seen or len(_seen) >= MAX_BASE_DEPTH:
        raise ConfigError(f"{p}: base = {base!r} makes a loop of model files")
    if not base_path.is_file():
        raise ConfigError(f"{p}: base = {base!r}: no packaged model or file of that name")
    merged = read_model_tables(base_path, _seen + (p.resolve(),))
    for section, table in raw.items():
        if isinstance(table, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **table}
        else:
            merged[section] = table
    return merged


def load_model(
    path: str | Path | None = None, overrides: list[str] | dict | None = None
) -> HardwareModel:
    """Load a model file (default: the packaged J6 model; a name such as ``j6`` also works)
    and apply overrides."""
    p = default_model_path() if path is None else resolve_model_path(path)
    model = build_model(read_model_tables(p), str(p))
    if overrides:
        model = model.with_overrides(overrides)
    return model


def key_sources(path: str | Path | None = None) -> dict[str, str]:
    """Each key's comment in the model file (or the base it inherits it from): its label
    (fact, derived, inferred, guess, fitted) and source."""
    p = default_model_path() if path is None else resolve_model_path(path)
    out: dict[str, str] = {}
    chain = []
    while True:
        chain.append(p)
        raw = _read_toml(p)
        base = raw.get("base")
        if not isinstance(base, str) or len(chain) > MAX_BASE_DEPTH:
            break
        p = resolve_model_path(base, p)
    for q in reversed(chain):  # the base first, then what overrides it
        section = ""
        for line in q.read_text(encoding="utf-8").splitlines():
            head = re.match(r"^\s*\[([A-Za-z0-9_]+)\]", line)
            if head:
                section = head.group(1)
                continue
            m = re.match(r"^\s*([A-Za-z0-9_]+)\s*=[^#]*#\s*(.*)$", line)
            if m and section:
                out[f"{section}.{m.group(1)}"] = m.group(2).strip()
    return out
