"""Free keys: the model keys a calibration fits (``--free KEY[=LO:HI]``), and the range each
is searched in (default: a factor of 100 either side of its value, within its allowed range)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dspsim.config import HardwareModel, key_type, model_key
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.study.calibrate.measure import is_int_key
from dspsim.study.sweep.values import check_on_model

RANGE_FACTOR = 100.0  # default search range: current value / 100 .. x 100

# The J6 fit's free keys: the two DDR values the seed's two figures are fitted with.
SEED_FREE = MappingProxyType(
    {"ddr.latency_cycles": (1.0, 5000.0), "ddr.bytes_per_cycle": (0.01, 64.0)})


@dataclass(frozen=True)
class FreeParam:
    """A model key to fit, its search range and whether it takes integer values."""

    key: str
    lo: float
    hi: float
    integer: bool

    @property
    def log(self) -> bool:
        return self.lo > 0


def default_range(model: HardwareModel, key: str) -> tuple[float, float]:
    """A factor of 100 either side of the current value, clipped to the key's allowed range."""
    v = float(model.get(key))
    lo_allowed, hi_allowed = allowed_range(key)
    if v > 0:
        lo, hi = v / RANGE_FACTOR, v * RANGE_FACTOR
    else:
        lo, hi = lo_allowed, max(hi_allowed, 1.0)
    lo, hi = max(lo, lo_allowed), min(hi, hi_allowed)
    if model_key(key).positive and lo <= 0:
        lo = min(v, hi) / RANGE_FACTOR if v > 0 else 1e-6
    if is_int_key(key):
        lo, hi = math.ceil(lo), math.floor(hi)
    return lo, hi


def allowed_range(key: str) -> tuple[float, float]:
    """The range a model key allows (infinite where it sets no bound)."""
    k = model_key(key)
    return (-math.inf if k.lo is None else k.lo), (math.inf if k.hi is None else k.hi)


def parse_free(text: str, model: HardwareModel) -> FreeParam:
    """Parse ``KEY`` or ``KEY=LO:HI`` into a :class:`FreeParam` checked against the key."""
    key, eq, rng = text.partition("=")
    key = key.strip()
    try:
        f = model_key(key)
    except ConfigError as e:
        raise DspsimInputError(f"--free {text!r}: {e}") from None
    check_on_model(model, key, f"--free {text!r}")
    if model.get(key) is None:  # an optional key left unset: no value to start the fit from
        try:
            model.with_overrides({key: 1})  # one that cannot act here says why
        except ConfigError as e:
            raise DspsimInputError(f"--free {text!r}: {e}") from None
        raise DspsimInputError(f"--free {text!r}: model {model.name} leaves {key} unset; give "
                               f"the fit a value to start from: --set {key}=VALUE")
    if key_type(key) in (str, bool):
        kind = "text" if key_type(key) is str else "true/false"
        raise DspsimInputError(
            f"--free {text!r}: {key} takes {kind} values; only numeric keys can be fitted")
    integer = is_int_key(key)
    if not eq:
        lo, hi = default_range(model, key)
    else:
        a, colon, b = rng.partition(":")
        try:
            lo, hi = float(a.replace("_", "")), float(b.replace("_", ""))
        except ValueError:
            lo = hi = math.nan
        if not colon or not (math.isfinite(lo) and math.isfinite(hi)):
            raise DspsimInputError(f"--free {text!r}: expected KEY=LO:HI with two numbers, e.g. "
                                   "ddr.latency_cycles=50:400")
        lo_allowed, hi_allowed = allowed_range(key)  # (infinite where the key sets no bound)
        if lo < lo_allowed or hi > hi_allowed:
            raise DspsimInputError(
                f"--free {text!r}: {key} allows {lo_allowed:g} to {hi_allowed:g}")
        if f.positive and lo <= 0:
            raise DspsimInputError(f"--free {text!r}: {key} must stay greater than 0")
        if integer:
            step = f.multiple or 1  # the values the key takes
            lo, hi = math.ceil(lo / step) * step, math.floor(hi / step) * step
            if lo > hi:
                raise DspsimInputError(
                    f"--free {text!r}: {key} takes multiples of {step}; the range holds none")
    if not lo < hi:
        if integer and eq and lo == hi:
            raise DspsimInputError(f"--free {text!r}: the range holds one value {key} takes "
                                   f"({lo:g}); give a range with two or more")
        raise DspsimInputError(f"--free {text!r}: the range must have LO < HI (got {lo:g}:{hi:g})")
    return FreeParam(key, float(lo), float(hi), integer)


def as_free(model: HardwareModel, free: Any) -> list[FreeParam]:
    """Free keys given as :class:`FreeParam`, ``KEY[=LO:HI]`` texts or a key -> (lo, hi) map."""
    if isinstance(free, Mapping):
        return [parse_free(f"{k}={lo}:{hi}", model) for k, (lo, hi) in free.items()]
    return [parse_free(f, model) if isinstance(f, str) else f for f in free]
