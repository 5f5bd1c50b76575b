"""The hardware model: frozen dataclasses loaded from ``models/*.toml``.

A model file holds the hardware tables (:mod:`dspsim.tables`), one table per memory and,
optionally, one per operator (keys the operator declares, :mod:`dspsim.schema`; those not given
take its defaults). ``base = "j6"`` (a packaged name, or a path relative to the file) inherits
every table and key the file does not give. Every key is declared once with its type, range,
unit and meaning; unknown tables and keys, wrong types and values out of range are refused in
one line (:class:`ConfigError`), dotted overrides (``ddr.latency_cycles=300``) alike.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from dspsim import model_rules as _rules
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.paths import path_problem, read_small_text
from dspsim.schema import OP_SCHEMAS, Key, Params
from dspsim.tables import HARDWARE, MEMORY_FIELDS, Core, Dcache, Host, Idma, MemoryCfg, Tcm

MAX_MODEL_FILE_BYTES = 1 << 20
MAX_BASE_DEPTH = 16
_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _hw_key(section: str, f: dataclasses.Field) -> Key:
    kind = f.type if isinstance(f.type, type) else _TYPES[f.type.removesuffix(" | None")]
    # the default: what a file that does not give the key gets (None: it must give it)
    return Key(f"{section}.{f.name}", kind, **f.metadata,
               default=None if f.default is dataclasses.MISSING else f.default)


def memory_keys(name: str) -> dict[str, Key]:
    """The keys of a memory table named ``name`` (``ddr.latency_cycles``, ...)."""
    return {f"{name}.{f.name}": _hw_key(name, f) for f in fields(MemoryCfg)}


# J6's memory (``ddr``) is listed among the keys, after the core's, as it always was
HARDWARE_KEYS = {f"{s}.{f.name}": _hw_key(s, f) for s, cls in
                 [("core", Core), ("ddr", MemoryCfg),
                  *((s, c) for s, c in HARDWARE.items() if s != "core")]
                 for f in fields(cls)}


def all_keys() -> list[str]:
    """Every settable key: hardware, then each operator's."""
    return list(HARDWARE_KEYS) + [k.name for s in OP_SCHEMAS.values() for k in s.keys]


def is_memory_section(section: str) -> bool:
    """Whether a table named ``section`` is a memory's (any name that is not a hardware, op or
    ``[model]`` table)."""
    return section not in HARDWARE and section not in OP_SCHEMAS and section != "model" \
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", section) is not None


def model_key(key: str, model: HardwareModel | None = None) -> Key:
    """The :class:`Key` behind a dotted model key (unknown: one line listing the keys of
    ``model``, else every key). A memory's keys are any memory table's (``sram.latency_cycles``):
    whether the model has that memory is checked when the key is applied to it."""
    if key in HARDWARE_KEYS:
        return HARDWARE_KEYS[key]
    section, _, name = key.partition(".")
    if is_memory_section(section) and name in MEMORY_FIELDS:
        return memory_keys(section)[key]
    schema = OP_SCHEMAS.get(section)
    k = schema.key(name) if schema else None
    if k is None:
        known = model.keys() if model is not None else all_keys()
        raise ConfigError(f"unknown model key {key!r}; allowed keys: {', '.join(known)}")
    return k


def key_type(key: str) -> type:
    """The Python type of a model key's values: int, float, str or bool."""
    return model_key(key).type


def check_value(key: str, value: Any) -> Any:
    """Check one value for one model key on its own (type and range); return it coerced."""
    return model_key(key).coerce(value)


def parse_value(key: str, text: str) -> Any:
    """Parse the value half of ``KEY=VALUE`` by the key's type."""
    return model_key(key).parse(text)


def parse_overrides(items: list[str], model: HardwareModel | None = None) -> dict[str, Any]:
    """``KEY=VALUE`` items by key, each value parsed by its key's type (an unknown key: one
    line listing the keys of ``model``, else every key)."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. ddr.latency_cycles=300")
        key = key.strip()
        if key in out:
            raise ConfigError(f"override {key} is given twice; give each key once")
        out[key] = model_key(key, model).parse(value)
    return out


@dataclass(frozen=True)
class HardwareModel:
    """A checked model: its hardware tables, memories, operators' parameters and ranges."""

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
    # plausible (low, high) of each guessed or fitted key (the file's [ranges]; a fact has none)
    ranges: Mapping[str, _rules.Range] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A memory's table or an operator's parameters as an attribute: ``model.ddr``,
        ``model.softmax.tile_bytes``."""
        for tables in (self.__dict__.get("memories", {}), self.__dict__.get("ops", {})):
            if name in tables:
                return tables[name]
        if name in OP_SCHEMAS and "ops" in self.__dict__:  # an op registered since
            return self.params(name)
        raise AttributeError(f"model has no table {name!r}")

    @property
    def host_memory(self) -> MemoryCfg:
        """The memory the host allocates from (``host.memory``)."""
        return self.memories[self.host.memory]

    def hardware_sections(self) -> list[str]:
        """The hardware tables in order: core, the memories, idma, tcm, host, dcache."""
        return ["core", *self.memories, "idma", "tcm", "host", "dcache"]

    def keys(self) -> list[str]:
        """This model's keys: its hardware tables' (its own memories, whatever their names),
        then each operator's."""
        hardware = [key for s in self.hardware_sections()
                    for key in (memory_keys(s) if s in self.memories else
                                [k for k in HARDWARE_KEYS if k.partition(".")[0] == s])]
        return hardware + [k.name for s in OP_SCHEMAS.values() for k in s.keys]

    def get(self, key: str) -> Any:
        k = model_key(key, self)
        return getattr(getattr(self, k.section), k.short)

    def params(self, op: str) -> Params:
        """An op's parameters; an op registered after the model was built (an op file) has
        its table's defaults."""
        if op not in self.ops and op in OP_SCHEMAS:
            return Params(op, OP_SCHEMAS[op].defaults())
        return self.ops[op]

    def with_overrides(self, overrides: dict[str, Any] | list[str]) -> HardwareModel:
        """Return a copy with dotted-key overrides applied and checked."""
        if not isinstance(overrides, list | Mapping) or not all(isinstance(k, str)
                                                                 for k in overrides):
            raise ConfigError(f"overrides {overrides!r:.80}: expected a dict of model keys and "
                              "values, e.g. {\"ddr.latency_cycles\": 300}, or KEY=VALUE texts")
        pairs = (parse_overrides(overrides, self) if isinstance(overrides, list)
                 else dict(overrides))
        # op tables at their defaults stay out, so that only the ops whose parameters are set
        # are checked against the hardware now (each op checks its own when it runs)
        raw = {s: d for s, d in self.as_dict().items()
               if s not in OP_SCHEMAS or d != OP_SCHEMAS[s].defaults()}
        given: dict[str, dict[str, Any]] = {}
        for key, value in pairs.items():
            k = model_key(key, self)
            if is_memory_section(k.section) and k.section not in self.memories:
                raise ConfigError(
                    f"{key}: the model has no memory {k.section!r}; its memories: "
                    f"{', '.join(self.memories)} (a new memory is a table in a model file)")
            given.setdefault(k.section, {})[k.short] = value
        for section, table in given.items():  # over the model's tables as a file's over its base
            raw[section] = _rules.merged_table(raw.get(section, {}), table)
        model = build_model(raw, self.source)
        _rules.refuse_idle(model, list(pairs))
        # a value set here is given, not guessed: its range goes
        ranges = {k: r for k, r in self.ranges.items() if k not in pairs}
        return dataclasses.replace(model, name=self.name, ranges=ranges,
                                   overrides=self.overrides + tuple(pairs.items()))

    def as_dict(self) -> dict[str, dict[str, Any]]:
        # left out: an optional key a table does not give (None), as the file left it out, and
        # what a memory's protocol does not take (model_rules.silent_memory_key)
        hw = {s: {k: v for k, v in dataclasses.asdict(getattr(self, s)).items()
                  if v is not None and not (s in self.memories and _rules.silent_memory_key(
                      s, getattr(self, s).protocol, k))}
              for s in self.hardware_sections()}
        return hw | {s: dict(p) for s, p in self.ops.items()}

    def flat(self) -> dict[str, Any]:
        return {f"{s}.{k}": v for s, d in self.as_dict().items() for k, v in d.items()}


def checked_model(model: Any) -> HardwareModel:
    """``model`` checked as its file is (one built or replaced in Python was not)."""
    if not isinstance(model, HardwareModel):
        raise ConfigError(f"model {model!r:.60}: expected a HardwareModel (dspsim.load_model)")
    try:
        return model.with_overrides({})
    except ConfigError as e:
        raise ConfigError(f"model {model.name!r}: {e}") from None


def _table(source: str, raw: Mapping[str, Any], section: str, keyed: bool = True
           ) -> dict[str, Any]:
    """A table of ``raw`` (absent: empty); ``keyed``: each of its keys a model key."""
    table = raw.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {section} must be a table [{section}], got {table!r}")
    for k in table if keyed else ():
        model_key(f"{section}.{k}")  # raises with the list of allowed keys
    return table


def _hw_table(source: str, raw: Mapping[str, Any], section: str, cls: type,
              missing: list[Key]) -> Any:
    """One hardware table, every key checked; a key the file does not give takes its default
    or, without one, is added to ``missing`` (the table is then None)."""
    table = _table(source, raw, section)
    required = _rules.switched_keys(section, table, [f.name for f in fields(cls)]) | (
        _rules.protocol_checked(source, section, table, {f.name: f.default for f in fields(cls)})
        if cls is MemoryCfg else set())  # a memory's protocol: the keys it must give, refuses
    values = {}
    for f in fields(cls):
        key = model_key(f"{section}.{f.name}")
        if f.name in table:
            values[f.name] = key.coerce(table[f.name])
        elif f.default is dataclasses.MISSING or f.name in required:
            missing.append(key)
        else:
            values[f.name] = f.default
    return cls(**values) if len(values) == len(fields(cls)) else None


def build_model(raw: Mapping[str, Any], source: str = "model") -> HardwareModel:
    """A checked model from parsed tables (a model file's, after ``base`` is resolved)."""
    sections = {**HARDWARE, **OP_SCHEMAS}  # every table a model file may hold, and memories
    memories = [s for s in raw if is_memory_section(s) and isinstance(raw[s], dict)
                and set(raw[s]) & MEMORY_FIELDS]
    unknown = set(raw) - set(sections) - {"model"} - set(memories)
    if unknown:
        raise ConfigError(
            f"{source}: unknown table [{sorted(unknown)[0]}]; allowed: {', '.join(sections)}, "
            f"or a memory table (keys {', '.join(sorted(MEMORY_FIELDS))})")
    meta = _table(source, raw, "model", keyed=False)
    if set(meta) - {"name"}:
        raise ConfigError(f"{source}: unknown key model.{sorted(set(meta) - {'name'})[0]}; "
                          "allowed: model.name")
    if not memories:
        raise ConfigError(f"{source}: missing key ddr.latency_cycles (the model declares no "
                          "memory: J6's is the table [ddr])")
    _rules.refuse_reserved(source, memories)
    missing: list[Key] = []
    built: dict[str, Any] = {section: _hw_table(source, raw, section, cls, missing)
                             for section, cls in HARDWARE.items()}
    built["memories"] = {m: _hw_table(source, raw, m, MemoryCfg, missing) for m in memories}
    _rules.refuse_missing(source, missing)
    _rules.refuse_two_ways(source, built["memories"])
    ops = {}
    for section, schema in OP_SCHEMAS.items():
        table = _table(source, raw, section)
        ops[section] = Params(section, {k.short: k.coerce(table.get(k.short, k.default))
                                        for k in schema.keys})
    name = meta.get("name", "model")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: model.name = {name!r}: expected a non-empty string")
    model = HardwareModel(**built, ops=ops, name=name, source=source)
    _check_cross(model, [s for s in OP_SCHEMAS if raw.get(s)])
    return model


def _check_cross(m: HardwareModel, given: list[str]) -> None:
    """Constraints between keys: the hardware's, then those of the operators whose tables the
    file (or an override) gives; an op checks its defaults against the hardware when it runs."""
    lanes = m.core.lanes_f32
    if lanes & (lanes - 1):
        raise ConfigError(f"core.lanes_f32 = {lanes}: must be a power of two (the kernels' lane "
                          "reductions halve the vector each step)")
    _check_memories(m)
    if m.tcm.reserved_bytes >= m.tcm.bank_bytes:
        raise ConfigError(
            f"tcm.reserved_bytes = {m.tcm.reserved_bytes}: the firmware cannot keep a whole "
            f"DataRAM of tcm.bank_bytes = {m.tcm.bank_bytes}; allowed: tcm.reserved_bytes < "
            "tcm.bank_bytes")
    for section in given:
        if OP_SCHEMAS[section].check is not None:
            OP_SCHEMAS[section].check(m.ops[section], m)


# the DataRAMs' part of the DSP's map (dspsim.hw.tcm: 0x08000000 up, one stride a bank)
TCM_MAP_BASE, TCM_MAP_END = 0x0800_0000, 0x1000_0000


def _check_memories(m: HardwareModel) -> None:
    """The memories fit the 32-bit map without overlapping each other or the DataRAMs; the
    host allocates from one of them; the data cache fits them (model_rules.check_dcache)."""
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
    _rules.check_dcache(m)


def models_dir() -> Path:
    """The packaged models (wheel) or the repository's ``models/`` (editable install)."""
    packaged = resources.files("dspsim") / "models"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[1] / "models"


def default_model_path() -> Path:
    """The packaged J6 model, the default of every command."""
    return models_dir() / "j6.toml"


_MODEL_NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")  # a packaged model's name (j6)


def packaged_models() -> list[str]:
    """The names of the packaged models (``j6``, ...)."""
    return sorted(q.stem for q in models_dir().glob("*.toml") if _MODEL_NAME.fullmatch(q.stem))


def _packaged() -> str:
    return f"packaged models: {', '.join(packaged_models())}"


def _clip(value: Any) -> str:
    """``repr(value)`` for a one-line message, shortened past 200 characters."""
    text = repr(str(value)) if isinstance(value, Path) else repr(value)
    return text if len(text) <= 200 else f"{text[:150]}...{text[-40:]} ({len(text)} characters)"


def resolve_model_path(name_or_path: str | Path | None, relative_to: Path | None = None) -> Path:
    """A packaged model name (``j6``) or a path (relative to ``relative_to``'s folder); None:
    the default model. A path that cannot name a file (a NUL byte) is one line."""
    if name_or_path is None:
        return default_model_path()
    text = str(name_or_path)
    if "\0" in text:
        raise ConfigError(f"model {_clip(text)}: a path cannot hold a NUL byte")
    if _MODEL_NAME.fullmatch(text) and (models_dir() / f"{text}.toml").is_file():
        return models_dir() / f"{text}.toml"
    p = Path(text)
    if relative_to is not None and not p.is_absolute():
        p = relative_to.parent / p
    return p


def parse_toml(text: str, what: str, error: type[DspsimInputError] = DspsimInputError
               ) -> dict[str, Any]:
    """The tables of an input file's ``text`` (a model, workload, sweep spec or measurements
    file); not TOML, or nested deeper than the parser recurses, is one line ``error`` naming
    ``what``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{what} is not valid TOML: {e}") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply") from None


def _read_toml(p: Path) -> tuple[dict[str, Any], str]:
    """A model file's tables and text; every way of failing (absent, a device, a loop of
    symbolic links, a name too long, too large, not UTF-8 or not TOML) is one line."""
    what = f"model file {_clip(p)}"
    hint = f"; pass an existing .toml file or a packaged model name ({_packaged()})"
    text = read_small_text(p, what, MAX_MODEL_FILE_BYTES, hint, ConfigError)
    return parse_toml(text, what, ConfigError), text


def _file_id(p: Path) -> tuple[int, int]:
    try:
        st = os.stat(p)
    except (OSError, ValueError) as e:  # it was just read: only a race gets here
        raise ConfigError(f"model file {_clip(p)} unreadable: {path_problem(e)}") from None
    return st.st_dev, st.st_ino


def model_chain(p: Path) -> list[tuple[Path, dict[str, Any], str]]:
    """(path, tables, text) of a model file and of each ``base`` it inherits from, the file
    first; at most :data:`MAX_BASE_DEPTH` files, none twice (a loop, through any links)."""
    chain: list[tuple[Path, dict[str, Any], str]] = []
    seen: list[tuple[int, int]] = []
    where = ""  # the base being read, which its errors name
    while True:
        try:
            raw, text = _read_toml(p)
        except ConfigError as e:
            if not where:
                raise
            raise ConfigError(f"{where}: {e}") from None
        seen.append(_file_id(p))
        chain.append((p, raw, text))
        base = raw.pop("base", None)
        if base is None:
            return chain
        where = f"{_clip(p)}: base = {_clip(base)}"
        if not isinstance(base, str) or not base.strip():
            raise ConfigError(f"{where}: expected a model name (e.g. \"j6\") or a path")
        if len(chain) >= MAX_BASE_DEPTH:
            raise ConfigError(f"{where}: too deep: more than {MAX_BASE_DEPTH} files in the chain "
                              "of bases")
        try:
            q = resolve_model_path(base, p)
            os.stat(q)
        except FileNotFoundError:
            raise ConfigError(f"{where}: no packaged model or file of that name; "
                              f"{_packaged()}") from None
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
        except (OSError, ValueError) as e:
            raise ConfigError(f"{where}: {path_problem(e)}") from None
        if _file_id(q) in seen:
            raise ConfigError(f"{where} makes a loop of model files (it is a file of the "
                              "chain already)")
        p = q


def read_model_tables(p: Path) -> dict[str, Any]:
    """A model file's tables with its ``base`` chain merged in (the file's own keys win; the
    ``[model]`` table is the file's own: a base's name is not inherited)."""
    return _merged(model_chain(Path(p)))


def _merged(chain: list[tuple[Path, dict[str, Any], str]]) -> dict[str, Any]:
    """The tables of a chain of model files, the first file's keys winning."""
    merged: dict[str, Any] = {}
    for _, raw, _ in reversed(chain):
        merged.pop("model", None)
        for section, table in raw.items():
            if section == _rules.RANGES_TABLE:  # read by file_ranges, not values
                continue
            if isinstance(table, dict) and isinstance(merged.get(section), dict):
                merged[section] = _rules.merged_table(merged[section], table)
            else:
                merged[section] = table
    return merged


def _span_tables(name: str, here: Path) -> dict[str, Any]:
    """The merged tables of the model a range's ``span_of`` names: a packaged name, a path
    relative to the file, or a model file beside it by its name without ``.toml``."""
    p = resolve_model_path(name, here)
    if not p.exists() and not p.suffix:
        p = p.with_name(f"{p.name}.toml")
    return read_model_tables(p)


def load_model(path: str | Path | None = None,
               overrides: list[str] | dict | None = None) -> HardwareModel:
    """Load a model file (default: the packaged J6 model; a name such as ``j6`` also works)
    and apply overrides. The model is named by its ``[model] name``, else by its file's name
    (``my_board.toml``: ``my_board``)."""
    p = resolve_model_path(path)
    chain = model_chain(Path(p))
    tables = _merged(chain)
    try:
        model = build_model(tables, str(p))
    except ConfigError as e:
        if ": missing key " not in str(e) or len(chain) > 1:  # a file with a base: its own
            raise
        raise ConfigError(f"{e}; a partial model file needs base = \"j6\" (or another model) "
                          "to inherit the keys it does not give") from None
    # a key the file itself gives (an operator's or a hardware key) must be able to act on the
    # file's platform; what it inherits from its base was checked on the base's
    own = chain[0][1]
    try:
        _rules.refuse_idle(model, [f"{s}.{k}" for s in (*OP_SCHEMAS, *HARDWARE, *model.memories)
                             if isinstance(own.get(s), dict) for k in own[s]])
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None
    if "name" not in tables.get("model", {}):  # (a [model] that is not a table was refused)
        model = dataclasses.replace(model, name=p.stem or "model")
    ranges = _rules.checked_ranges(model, _rules.file_ranges(chain), model_key, _span_tables)
    model = dataclasses.replace(model, ranges=ranges)
    return model.with_overrides(overrides) if overrides else model


def check_model_entries(items: Sequence[str | Path], what: str = "--models") -> None:
    """Refuse two entries of a list of models that name one model file (``j6,j6``,
    ``a.toml,./a.toml``, a link to it); each entry must load (one line saying why not)."""
    seen: dict[tuple[int, int], str] = {}
    for item in items:
        p = resolve_model_path(item)
        read_model_tables(p)  # any reason it does not load, first
        ident = _file_id(p)
        if ident in seen:
            first = seen[ident]
            same = "is given twice" if first == str(item) else f"and {_clip(first)} name one file"
            raise ConfigError(f"{what}: {_clip(str(item))} {same}; give each model once")
        seen[ident] = str(item)


def load_models(items: Sequence[str | Path], overrides: list[str] | dict | None = None,
                what: str = "--models") -> dict[str, HardwareModel]:
    """Several models (``--models A,B``) by a label each: the model's name, or for models of
    one name their entry's text (its path as given). Two entries naming one file are refused."""
    check_model_entries(items, what)
    loaded = [(str(item), load_model(item, overrides)) for item in items]
    names = [m.name for _, m in loaded]
    labels = [m.name if names.count(m.name) == 1 else item for item, m in loaded]
    if len(set(labels)) != len(labels):  # a name that is another entry's path: the full path
        labels = [str(Path(os.path.realpath(resolve_model_path(item)))) for item, _ in loaded]
    return dict(zip(labels, (m for _, m in loaded)))


def key_sources(path: str | Path | None = None) -> dict[str, str]:
    """Each key's comment in the model file (or the base it inherits it from): its label
    (fact, derived, inferred, guess, fitted) and source. A key a file gives without a comment
    has none (the base's comment was about the base's value)."""
    out: dict[str, str] = {}
    for _, raw, text in reversed(model_chain(resolve_model_path(path))):  # the base first
        comments = {f"{s}.{k}": c for s, k, c in _rules.line_comments(text)}
        for section, table in raw.items():
            if section not in ("model", _rules.RANGES_TABLE) and isinstance(table, dict):
                for k in table:
                    out[f"{section}.{k}"] = comments.get(f"{section}.{k}", "")
    return out


def range_sources(path: str | Path | None = None) -> dict[str, str]:
    """Each ranged key's comment in the ``[ranges]`` table that gives its range."""
    return {key: comment for _, _, text in reversed(model_chain(resolve_model_path(path)))
            for section, key, comment in _rules.line_comments(text)
            if section == _rules.RANGES_TABLE}
