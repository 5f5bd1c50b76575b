"""Sweep keys and their values: types, checks, ``V1,V2,...`` lists and ``START:STOP:STEP``
ranges (numeric keys; STOP included when it lands on the grid: ``1:10:4`` is 1, 5, 9), and the
canonical text of a value in a table. A sweep key is a model key or ``op``, ``variant``
(``mode``: its older name; a table keeps the name used), ``n`` (a 1-D op's float32 elements),
``shape`` (a 2-D op's ``ROWSxCOLS``) or, in a sweep of several models, ``model`` (a model's
name, or its path when two share a name). Values are checked before anything runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dspsim.config import all_keys, is_memory_section, model_key, parse_value
from dspsim.config import check_value as check_model_value
from dspsim.config import key_type as model_key_type
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.schema import parse_number

if TYPE_CHECKING:
    from dspsim.config import HardwareModel

VARIANT_KEYS = ("variant", "mode")  # ``mode`` is the older name of ``variant``
SIZE_KEYS = ("n", "shape")  # a 1-D op's length, a 2-D op's ROWSxCOLS
SPECIAL_KEYS = ("op", *VARIANT_KEYS, *SIZE_KEYS)
MODEL_KEY = "model"  # the model of a point, in a sweep of several (``--models A,B``)
MAX_VALUES_PER_KEY = 1_000_000


def key_type(key: str) -> type:
    """The Python type of a sweep key's values (``int``, ``float``, ``str`` or ``bool``)."""
    if key == "n":
        return int
    if key in SPECIAL_KEYS or key == MODEL_KEY:
        return str
    try:
        return model_key_type(key)
    except DspsimInputError:
        raise DspsimInputError(
            f"unknown sweep key {key!r}; allowed: {', '.join(SPECIAL_KEYS)} or a model key "
            f"({', '.join(all_keys())})") from None


def check_on_model(model: HardwareModel, key: str, what: str) -> None:
    """Refuse, in one line, a memory's key on a model without that memory (``what``: where
    the key was given, e.g. ``--param ddr.latency_cycles``)."""
    section = model_key(key).section
    if is_memory_section(section) and section not in model.memories:
        raise DspsimInputError(f"{what}: model {model.name} has no memory {section!r}; its "
                               f"memories: {', '.join(model.memories)}")


def shape_text(shape: Iterable[int]) -> str:
    """A shape as a table cell: ``1024x256``."""
    return "x".join(str(int(d)) for d in shape)


def parse_shape(value: Any) -> tuple[int, ...]:
    """``ROWSxCOLS`` text (or a sequence of ints) -> a tuple of positive ints."""
    if isinstance(value, str):
        parts = value.strip().lower().split("x")
        try:
            dims = tuple(int(p.strip().replace("_", "")) for p in parts)
        except ValueError:
            dims = ()
    elif isinstance(value, list | tuple):
        dims = tuple(value)
    else:
        dims = ()
    if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in dims):
        raise DspsimInputError(
            f"shape {value!r}: expected positive integers written ROWSxCOLS, e.g. 1024x256")
    return tuple(int(d) for d in dims)


def check_value(key: str, value: Any) -> Any:
    """Check one value of a sweep key on its own (type, range, choices); return it coerced. A
    variant is only checked to be text: which are allowed depends on the sweep's ops."""
    if key == "op":
        return get_op(value).name  # unknown op -> one-line error naming the registered ones
    if key == MODEL_KEY:  # a model's label: its name, or its path when names collide
        if not isinstance(value, str) or not value or re.search(r"[\x00-\x1f\x7f]", value):
            raise DspsimInputError(f"model {value!r}: a model's label (its name or path) must be "
                                   "non-empty text without control characters")
        return value
    if key in VARIANT_KEYS:
        if not isinstance(value, str) or not value:
            raise DspsimInputError(f"{key} {value!r}: expected a variant name")
        return value
    if key == "shape":
        return shape_text(parse_shape(value))
    if key == "n":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise DspsimInputError(
                f"n = {value!r}: must be a positive integer (number of float32 elements)")
        return value
    return check_model_value(key, value)  # unknown key, wrong type or range -> one-line error


def format_value(value: Any) -> str:
    """Canonical text of a value in the table: ints plain, floats round-trip exact."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def canon_text(key: str, text: str) -> str:
    """Canonical text of a parameter cell read back from a file (``100`` of a float key is
    ``100.0``)."""
    return format_value(cell_value(key, text))


def cell_value(key: str, text: str) -> Any:
    """A parameter cell read back from a file as its key's value; ``ValueError`` otherwise."""
    t = key_type(key)
    if key == "shape":
        try:
            return shape_text(parse_shape(text))
        except DspsimInputError as e:
            raise ValueError(str(e)) from None
    if t is str:
        return text
    if t is bool:
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} value {text!r} is not true or false")
        return text.strip().lower() == "true"
    if t is int and re.fullmatch(r"\s*[+-]?[0-9]{1,30}\s*", text):
        return int(text)  # exactly: float() would round 99999999999999999999999
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{key} value {text!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{key} value {text!r} is not a finite number")
    if t is int:
        if not number.is_integer():
            raise ValueError(f"{key} value {text!r} is not an integer")
        return int(number)
    return number


def _parse_number(key: str, text: str, what: str = "value") -> int | float:
    v = parse_number(text)  # strictly: 300#5 is not 300
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DspsimInputError(f"{key}: {what} {text.strip()!r} is not a number")
    if not math.isfinite(v):
        raise DspsimInputError(f"{key}: {what} {text.strip()!r} is not a finite number")
    return v


def value_count(key: str, text: str) -> int:
    """How many values ``KEY=TEXT`` gives, without building or checking them (a malformed text
    counts as its items: parsing it says what is wrong)."""
    text = text.strip()
    if ":" not in text:
        return len(text.split(","))
    try:
        return _range_count(key, text)[3]
    except DspsimInputError:
        return 1


def _range_count(key: str, text: str) -> tuple[Any, Any, Any, int]:
    t = key_type(key)
    parts = text.split(":")
    if t in (str, bool):
        raise DspsimInputError(
            f"{key}={text}: START:STOP:STEP ranges need a numeric key; list values as V1,V2,...")
    if len(parts) != 3:
        raise DspsimInputError(f"{key}={text}: malformed range; expected START:STOP:STEP")
    start, stop, step = (_parse_number(key, p, w) for p, w in zip(parts, ("START", "STOP", "STEP")))
    if step <= 0:
        raise DspsimInputError(f"{key}={text}: STEP must be greater than 0")
    if start > stop:
        raise DspsimInputError(f"{key}={text}: START is greater than STOP (ranges go upwards)")
    if t is int:
        if not all(float(v).is_integer() for v in (start, stop, step)):
            raise DspsimInputError(f"{key}={text}: {key} takes integers")
        start, stop, step = int(start), int(stop), int(step)
        count = (stop - start) // step + 1
    else:
        # STOP is included when it lands on the grid up to rounding (0.1:0.3:0.1 gives 3 values)
        count = math.floor((stop - start) / step * (1 + 1e-12) + 1e-9) + 1
    return start, stop, step, count


def parse_values(key: str, text: str) -> list[Any]:
    """Values of ``KEY=TEXT``: ``V1,V2,...`` or ``START:STOP:STEP``, checked and coerced."""
    t = key_type(key)
    text = text.strip()
    if not text:
        raise DspsimInputError(f"{key}: no values; give V1,V2,... or START:STOP:STEP")
    if ":" in text:
        start, stop, step, count = _range_count(key, text)
        if count > MAX_VALUES_PER_KEY:
            raise DspsimInputError(
                f"{key}={text}: {count:,} values; at most {MAX_VALUES_PER_KEY:,} per key")
        # 12 significant digits: 0.1 + 2 * 0.1 is 0.3, not 0.30000000000000004
        raw: list[Any] = (list(range(start, start + count * step, step)) if t is int
                          else [float(f"{start + i * step:.12g}") for i in range(count)])
    else:
        items = [s.strip() for s in text.split(",")]
        if any(not s for s in items):
            raise DspsimInputError(f"{key}={text}: empty value in the list")
        if t is str:
            raw = [s.strip("'\"") for s in items]
        elif t is bool:
            raw = [parse_value(key, s) for s in items]  # TOML true/false
        else:
            raw = [_parse_number(key, s) for s in items]
    return _checked(key, raw)


def _checked(key: str, raw: Iterable[Any]) -> list[Any]:
    values = [check_value(key, v) for v in raw]
    if not values:
        raise DspsimInputError(f"{key}: no values; give V1,V2,... or START:STOP:STEP")
    seen: set[str] = set()
    for v in values:
        if format_value(v) in seen:
            raise DspsimInputError(f"{key}: value {format_value(v)} is given twice")
        seen.add(format_value(v))
    return values


def parse_param(item: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` or ``KEY=START:STOP:STEP`` -> (key, values)."""
    key, eq, text = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise DspsimInputError(f"--param {item!r}: expected KEY=V1,V2,... or "
                               "KEY=START:STOP:STEP, e.g. ddr.latency_cycles=50:400:50")
    return key, parse_values(key, text)


def spec_values(key: str, value: Any) -> list[Any]:
    """Values of a key given as data: a list, the command line's text, or one scalar."""
    if isinstance(value, str):
        return parse_values(key, value)
    if key == "shape" and isinstance(value, list | tuple) and value and all(
        isinstance(d, int) and not isinstance(d, bool) for d in value
    ):
        return _checked(key, [value])  # one shape as a list of ints: [1024, 256]
    if isinstance(value, list):
        return _checked(key, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _checked(key, [value])
    raise DspsimInputError(f"{key} = {value!r}: expected a list, a string or a number")
