"""The hardware model: frozen dataclasses loaded from ``models/*.toml``.

Every key a model file may hold is declared once, in the dataclasses below, with its type and
allowed range in the field metadata. Unknown keys, wrong types and out-of-range values are
rejected with a one-line :class:`ConfigError` naming the key, the value and what is allowed.
Dotted overrides (``ddr.latency_cycles=300``) go through the same checks.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from dspsim.errors import ConfigError


def _key(
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple = (),
    doc: str = "",
    positive: bool = False,
):
    """A model key: its allowed range (``positive``: strictly above ``lo`` = 0) and meaning."""
    return field(
        metadata={"lo": lo, "hi": hi, "choices": choices, "doc": doc, "positive": positive}
    )


@dataclass(frozen=True)
class Core:
    clock_mhz: float = _key(1.0, 10_000.0, doc="DSP core clock")
    lanes_f32: int = _key(1, 256, doc="float32 lanes per vector (IVP_N_2)")
    load_store_units: int = _key(1, 8, doc="vector loads/stores issued per cycle")
    vector_alu_slots: int = _key(1, 16, doc="vector ALU/multiply operations issued per cycle")
    alu_latency_cycles: int = _key(1, 64, doc="latency of one dependent vector op (reductions)")
    call_overhead_cycles: int = _key(0, 100_000, doc="kernel call, prologue, pipeline fill")
    write_buffer_entries: int = _key(
        1, 1024, doc="posted vector stores to DDR before the core stalls"
    )

    @property
    def vector_bytes(self) -> int:
        return self.lanes_f32 * 4


@dataclass(frozen=True)
class Ddr:
    latency_cycles: float = _key(
        0.0, 1e6, positive=True, doc="round trip of one request, port to DDR and back"
    )
    bytes_per_cycle: float = _key(1e-6, 1e4, doc="port bandwidth shared by core and iDMA")
    max_outstanding: int = _key(1, 4096, doc="requests in flight on the port")


@dataclass(frozen=True)
class Idma:
    channels: int = _key(1, 8, doc="iDMA channels (descriptor FIFOs)")
    max_outstanding: int = _key(1, 1024, doc="bursts in flight per channel (max_pif_req)")
    burst_bytes: int = _key(1, 1 << 20, doc="bytes per DDR request of a channel")
    setup_cycles: float = _key(0.0, 1e6, doc="core cycles to program one descriptor")


@dataclass(frozen=True)
class Tcm:
    banks: int = _key(1, 8, doc="DataRAM banks (tile-manager colours)")
    bank_bytes: int = _key(1, 1 << 30, doc="capacity of one DataRAM")


@dataclass(frozen=True)
class Softmax:
    tile_bytes: int = _key(4, 1 << 30, doc="TILE_SIZE: bytes per ping-pong tile (multiple of 4)")
    max_init: str = _key(
        choices=("zero", "-inf"),
        doc="running max start in the ping-pong path: 'zero' as the seed's C, '-inf' corrected",
    )
    schedule: str = _key(
        choices=("seed", "split"),
        doc="'seed': buffer b uses channel b for in and out; 'split': inputs ch0, outputs ch1",
    )
    guard_shifted_input: bool = _key(
        doc="vecexpf_max's overflow guard tests x - max (true, corrected) or raw x (false, seed)"
    )


@dataclass(frozen=True)
class Host:
    rpc_latency_us: float = _key(0.0, 1e6, doc="host submit-to-start and done-to-wake latency")


SECTIONS: dict[str, type] = {
    "core": Core,
    "ddr": Ddr,
    "idma": Idma,
    "tcm": Tcm,
    "softmax": Softmax,
    "host": Host,
}


@dataclass(frozen=True)
class HardwareModel:
    core: Core
    ddr: Ddr
    idma: Idma
    tcm: Tcm
    softmax: Softmax
    host: Host
    name: str = "model"
    source: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str) -> Any:
        section, name = _split_key(key)
        return getattr(getattr(self, section), name)

    def with_overrides(self, overrides: dict[str, Any] | list[str]) -> HardwareModel:
        """Return a copy with dotted-key overrides applied and checked."""
        pairs = parse_overrides(overrides) if isinstance(overrides, list) else dict(overrides)
        raw = self.as_dict()
        for key, value in pairs.items():
            section, name = _split_key(key)
            raw[section][name] = value
        model = _build(raw, self.source)
        return dataclasses.replace(
            model, name=self.name, overrides=self.overrides + tuple(pairs.items())
        )

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dataclasses.asdict(getattr(self, s)) for s in SECTIONS}

    def flat(self) -> dict[str, Any]:
        return {f"{s}.{k}": v for s, d in self.as_dict().items() for k, v in d.items()}


def all_keys() -> list[str]:
    return [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)]


def model_field(key: str) -> dataclasses.Field:
    """The dataclass field behind a dotted model key (unknown keys: one-line error)."""
    section, name = _split_key(key)
    return {f.name: f for f in fields(SECTIONS[section])}[name]


def key_type(key: str) -> type:
    """The Python type of a model key's values: int, float, str or bool."""
    return _field_type(model_field(key))


def _split_key(key: str) -> tuple[str, str]:
    section, _, name = key.partition(".")
    cls = SECTIONS.get(section)
    if cls is None or name not in {f.name for f in fields(cls)}:
        raise ConfigError(f"unknown model key {key!r}; allowed keys: {', '.join(all_keys())}")
    return section, name


_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false"}


def _field_type(f: dataclasses.Field) -> type:
    # annotations are strings under `from __future__ import annotations`
    names = {"int": int, "float": float, "str": str, "bool": bool}
    return f.type if isinstance(f.type, type) else names[f.type]


def _coerce(key: str, f: dataclasses.Field, value: Any) -> Any:
    want = _field_type(f)
    if want is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: expected a string")
        choices = f.metadata["choices"]
        if choices and value not in choices:
            raise ConfigError(f"{key} = {value!r}: allowed values are {', '.join(choices)}")
        return value
    if want is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: expected true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key} = {value!r}: expected {_TYPE_WORDS[want]}")
    if want is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{key} = {value!r}: expected an integer")
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{key} = {value!r}: expected a finite number")
    lo, hi = f.metadata["lo"], f.metadata["hi"]
    if f.metadata["positive"] and value <= 0:
        raise ConfigError(f"{key} = {value!r}: must be greater than 0 (up to {hi:g})")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(f"{key} = {value!r}: allowed range is {lo:g} to {hi:g}")
    return value


def _build(raw: dict[str, Any], source: str) -> HardwareModel:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected tables [core], [ddr], ...")
    unknown = set(raw) - set(SECTIONS) - {"model"}
    if unknown:
        raise ConfigError(
            f"{source}: unknown section [{sorted(unknown)[0]}]; allowed: {', '.join(SECTIONS)}"
        )
    built = {}
    for section, cls in SECTIONS.items():
        table = raw.get(section)
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: missing table [{section}]")
        names = {f.name for f in fields(cls)}
        for k in table:
            if k not in names:
                _split_key(f"{section}.{k}")  # raises with the list of allowed keys
        values = {}
        for f in fields(cls):
            key = f"{section}.{f.name}"
            if f.name not in table:
                raise ConfigError(f"{source}: missing key {key} ({f.metadata['doc']})")
            values[f.name] = _coerce(key, f, table[f.name])
        built[section] = cls(**values)
    model = HardwareModel(
        **built, name=str(raw.get("model", {}).get("name", "model")), source=source
    )
    _check_cross(model)
    return model


def _check_cross(m: HardwareModel) -> None:
    """Constraints between keys."""
    if m.softmax.tile_bytes % 4:
        raise ConfigError(
            f"softmax.tile_bytes = {m.softmax.tile_bytes}: must be a multiple of 4 (float32)"
        )
    if m.softmax.tile_bytes > m.tcm.bank_bytes:
        raise ConfigError(
            f"softmax.tile_bytes = {m.softmax.tile_bytes}: larger than a DataRAM "
            f"(tcm.bank_bytes = {m.tcm.bank_bytes}); allowed 4 to {m.tcm.bank_bytes}"
        )
    lanes = m.core.lanes_f32
    if lanes & (lanes - 1):
        raise ConfigError(
            f"core.lanes_f32 = {lanes}: must be a power of two (the kernels' lane reductions "
            "halve the vector each step)"
        )
    if m.idma.channels < 2:
        raise ConfigError(
            f"idma.channels = {m.idma.channels}: the ping-pong schedule needs 2 or more"
        )
    if m.tcm.banks < 2:
        raise ConfigError(f"tcm.banks = {m.tcm.banks}: the ping-pong schedule needs 2 or more")


def default_model_path() -> Path:
    """The packaged J6 model (wheel) or the repository's ``models/j6.toml`` (editable)."""
    packaged = resources.files("dspsim") / "models" / "j6.toml"
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[1] / "models" / "j6.toml"


def load_model(
    path: str | Path | None = None, overrides: list[str] | dict | None = None
) -> HardwareModel:
    """Load a model file (default: the packaged J6 model) and apply overrides."""
    p = Path(path) if path is not None else default_model_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"model file {str(p)!r} not found; pass an existing .toml file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"model file {str(p)!r} unreadable: {e.__class__.__name__}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"model file {str(p)!r} is not valid TOML: {e}") from None
    model = _build(raw, str(p))
    if overrides:
        model = model.with_overrides(overrides)
    return model


def check_value(key: str, value: Any) -> Any:
    """Check one value for one model key on its own (type and range); return it coerced."""
    return _coerce(key, model_field(key), value)


def parse_value(key: str, text: str) -> Any:
    """Parse the value half of ``KEY=VALUE`` by the key's type: strings stay text, numbers parse."""
    f = model_field(key)
    if _field_type(f) is str:
        return text.strip().strip("'\"")
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError(f"{key} = {text!r}: expected {_TYPE_WORDS[_field_type(f)]}") from None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. ddr.latency_cycles=300")
        key = key.strip()
        out[key] = parse_value(key, value)
    return out
