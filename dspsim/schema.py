"""The one validator: typed keys with a range or choices, a unit and a meaning.

Every key a user can set, hardware (``ddr.latency_cycles``) or operator's
(``softmax.tile_bytes``), is a :class:`Key`: it coerces a value (TOML or ``--set`` text) to its
type and checks its range, or raises a one-line :class:`ConfigError`. Operators declare their
keys here (:func:`register_op_params`), so the loader knows no operator.
"""

from __future__ import annotations

import math
import numbers
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.errors import ConfigError

_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_DIGITS = r"[0-9](?:_?[0-9])*"
_NUMBER = re.compile(  # a TOML integer or float, written alone
    rf"[+-]?(?:(?:0|[1-9](?:_?[0-9])*)(?:\.{_DIGITS})?(?:[eE][+-]?{_DIGITS})?|inf|nan)"
    r"|0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|0o[0-7](?:_?[0-7])*|0b[01](?:_?[01])*"
)


def parse_number(text: str) -> int | float | None:
    """A number as TOML writes one (``300``, ``-1.5``, ``1e6``, ``1_000``, ``0x40``), the whole
    text but surrounding blanks; None for anything else: ``300#5``, ``300 400``, ``1,5``,
    ``true`` (a comment or a second value is never silently dropped)."""
    t = text.strip()
    if not _NUMBER.fullmatch(t):
        return None
    try:
        return tomllib.loads(f"v = {t}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):  # ValueError: an integer of 4,300+ digits
        return None


@dataclass(frozen=True)
class Key:
    """One settable key: ``section.name``, its type, default, range, unit and meaning."""

    name: str  # dotted
    type: type
    doc: str = ""
    default: Any = None  # None: no default (hardware keys come from the model file)
    lo: float | None = None
    hi: float | None = None
    positive: bool = False  # strictly above 0 (``lo`` is then 0)
    choices: tuple = ()
    unit: str = ""
    multiple: int = 0  # an int key's value must be a multiple of this (0: any)
    # how a run's cycles move as the key rises: +1 never fall, -1 never rise, 0 not at all,
    # None unknown (dspsim.study.interval searches the ranges by it; a test holds each claim)
    trend: int | None = None

    @property
    def section(self) -> str:
        return self.name.partition(".")[0]

    @property
    def short(self) -> str:
        return self.name.partition(".")[2]

    def _bound(self, v: float) -> str:
        """A range end as written: an integer key's exactly, a number's shortest exact form."""
        if self.type is int or float(v).is_integer():
            return str(int(v))
        return repr(float(v))

    def allowed(self) -> str:
        """What the key accepts, in words."""
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.type is bool:
            return "true or false"
        if self.type is str:
            return "a string"
        lo = "> 0" if self.positive else (f">= {self._bound(self.lo)}" if self.lo is not None
                                          else "")
        hi = f"<= {self._bound(self.hi)}" if self.hi is not None else ""
        step = f", a multiple of {self.multiple}" if self.multiple else ""
        return f"{_TYPE_WORDS[self.type]} {lo}{', ' if lo and hi else ''}{hi}{step}".strip()

    def coerce(self, value: Any) -> Any:
        """``value`` as this key's type, checked; a one-line ConfigError otherwise."""
        key, want = self.name, self.type
        if want in (str, bool):
            if not isinstance(value, want):
                raise ConfigError(f"{key} = {value!r}: expected {_TYPE_WORDS[want]}")
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
            raise ConfigError(f"{key} = {value!r}: expected {_TYPE_WORDS[want]}")
        elif want is int:
            if not isinstance(value, numbers.Integral) and not float(value).is_integer():
                raise ConfigError(f"{key} = {value!r}: expected an integer")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"{key} = {value!r}: expected a finite number")
        if want in (int, float) and self.positive and value <= 0:
            raise ConfigError(
                f"{key} = {value!r}: must be greater than 0 (up to {self._bound(self.hi)})")
        if want in (int, float) and ((self.lo is not None and value < self.lo)
                                     or (self.hi is not None and value > self.hi)):
            raise ConfigError(f"{key} = {value!r}: allowed range is {self._bound(self.lo)} to "
                              f"{self._bound(self.hi)}")
        if self.choices and value not in self.choices:
            raise ConfigError(
                f"{key} = {value!r}: allowed values are {', '.join(map(str, self.choices))}"
            )
        if self.multiple and value % self.multiple:
            raise ConfigError(f"{key} = {value!r}: must be a multiple of {self.multiple}")
        return value

    def parse(self, text: str) -> Any:
        """The value half of ``KEY=VALUE``, by this key's type, strictly: exactly one value and
        nothing after it (``300#5`` is refused, not read as 300); strings stay text (one pair
        of enclosing quotes dropped)."""
        if "\n" in text or "\r" in text:
            raise ConfigError(f"{self.name} = {text!r}: a value must be on one line")
        t = text.strip()
        if self.type is str:
            return t[1:-1] if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"" else t
        if self.type is bool:
            if t not in ("true", "false"):
                raise ConfigError(f"{self.name} = {text!r}: expected true or false")
            return t == "true"
        value = parse_number(t)
        if value is None:
            e_g = "64, 1_024, 0x40" if self.type is int else "300, 1.5, 1e6"
            raise ConfigError(f"{self.name} = {text!r}: expected {_TYPE_WORDS[self.type]} "
                              f"(e.g. {e_g}) and nothing else")
        return value

    def describe(self) -> dict[str, Any]:
        """For ``dspsim keys`` / ``dspsim ops``: name, type, default, unit, range, doc."""
        return {"key": self.name, "type": self.type.__name__, "default": self.default,
                "unit": self.unit, "allowed": self.allowed(), "doc": self.doc}


class Params(Mapping[str, Any]):
    """An operator's parameter values, read as attributes (``params.tile_bytes``); frozen."""

    __slots__ = ("_section", "_values")

    def __init__(self, section: str, values: Mapping[str, Any]):
        object.__setattr__(self, "_section", section)
        object.__setattr__(self, "_values", dict(values))

    def __reduce__(self) -> tuple:
        return (Params, (self._section, self._values))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{self._section} has no parameter {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Params are read-only")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Params) and self._values == other._values

    def __hash__(self) -> int:
        return hash((self._section, tuple(sorted(self._values.items()))))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{self._section}({inner})"


@dataclass(frozen=True)
class OpSchema:
    """An operator's parameter table: its keys and a check across keys and hardware."""

    section: str
    keys: tuple[Key, ...]
    # check(params, hardware_model) -> None, raising ConfigError; run at model load
    check: Callable[[Params, Any], None] | None = None

    def key(self, short: str) -> Key | None:
        """The key named ``section.short``, None if there is none."""
        return next((k for k in self.keys if k.short == short), None)

    def defaults(self) -> dict[str, Any]:
        return {k.short: k.default for k in self.keys}


OP_SCHEMAS: dict[str, OpSchema] = {}


def check_n(n: Any) -> int:
    """``n`` if it is a positive integer (a number of float32 elements), else a one-line error."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n <= 0:
        raise ConfigError(f"n = {n!r}: must be a positive integer (number of float32 elements)")
    return int(n)


# section -> why a key of that operator's table can act on no run on a model (None: it can):
# the operator's ``idle_key``, given at registration, read by the model's rules
OP_KEY_IDLE: dict[str, Callable[[Any, str], str | None]] = {}


def register_op_params(schema: OpSchema,
                       idle: Callable[[Any, str], str | None] | None = None) -> OpSchema:
    """Declare an operator's table (``[softmax]``) so model files and overrides check it;
    ``idle(model, key)`` says why a key of it cannot act on a model."""
    for k in schema.keys:
        if k.section != schema.section or k.default is None:
            raise ValueError(f"{k.name}: an op key needs its op's section and a default")
        k.coerce(k.default)
    OP_SCHEMAS[schema.section] = schema
    if idle is not None:
        OP_KEY_IDLE[schema.section] = idle
    return schema
