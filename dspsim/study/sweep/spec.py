"""Sweep spec files: ``dspsim sweep --spec FILE.toml`` holds a sweep in TOML::

    model = "my_model.toml"           # optional: a packaged model name (j6) as --model takes,
                                      # else a path relative to this file; default the J6 model
    fidelity = "tile"                 # optional
    op = "softmax"                    # or a list of ops of one input dimension; optional
    variant = ["pingpong", "direct"]  # or "pingpong,direct"; optional (``mode``: older name)
    n = 100000                        # a 1-D op's length: or a list, or "1024:8192:1024"
    # shape = ["1024x256", "512x512"] # a 2-D op's shapes instead of n (or [1024, 256]: one)

    [set]                             # fixed overrides, optional
    "idma.burst_bytes" = 128

    [params]                          # swept keys, in this order
    "ddr.latency_cycles" = [50, 100, 200]     # a list ...
    "idma.max_outstanding" = "1:32:1"         # ... or the command line's text
    softmax = { tile_bytes = "4096,16384" }   # nested tables name dotted keys too

Command-line options override the file's scalars (model, fidelity, op, variant or mode, n or
shape); ``--param`` keys are added after the file's, and a key given twice is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dspsim.config import parse_toml, resolve_model_path
from dspsim.errors import DspsimInputError
from dspsim.paths import read_small_text
from dspsim.study.sweep.values import SPECIAL_KEYS, spec_values

MAX_SPEC_FILE_BYTES = 1 << 20  # as a model file (dspsim.config.MAX_MODEL_FILE_BYTES)


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read a sweep spec file (format in the module docstring) into ``build_sweep`` arguments."""
    p = Path(path)
    what = f"spec file {str(p)!r}"
    try:
        return _load_spec(p, what)
    except RecursionError:
        raise DspsimInputError(f"{what} is nested too deeply") from None


def _load_spec(p: Path, what: str) -> dict[str, Any]:
    raw = parse_toml(read_small_text(p, what, MAX_SPEC_FILE_BYTES), what)
    allowed = ("model", "fidelity", *SPECIAL_KEYS, "set", "params")
    for k in raw:
        if k not in allowed:
            raise DspsimInputError(f"{what}: unknown entry {k!r}; allowed: {', '.join(allowed)}")
    out: dict[str, Any] = {}
    if "model" in raw:
        model = raw["model"]
        if not isinstance(model, str) or not model.strip():
            raise DspsimInputError(f"{what}: model must be a packaged model name "
                                   "(e.g. j6) or a path string")
        # as --model: a packaged name (j6) first, else a path (relative to this file)
        out["model"] = str(resolve_model_path(model, p))
    if "fidelity" in raw:
        out["fidelity"] = raw["fidelity"]
    for k in SPECIAL_KEYS:
        if k in raw:
            out[k] = spec_values(k, raw[k])
    for k in ("set", "params"):
        if k in raw and not isinstance(raw[k], dict):
            raise DspsimInputError(f"{what}: [{k}] must be a table")
    out["overrides"] = _flat(what, "set", raw.get("set", {}))
    params = _flat(what, "params", raw.get("params", {}))
    for k in SPECIAL_KEYS:
        if k in raw and k in params:
            raise DspsimInputError(f"{what}: {k} is given twice (at the top and "
                                   "in [params]); give it once")
    out["params"] = {k: spec_values(k, v) for k, v in params.items()}
    return out


def _flat(what: str, table: str, values: Mapping[str, Any], prefix: str = "",
          out: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``[table]`` ``values`` with nested tables' keys dotted; a key given twice (dotted and
    as a nested table) is an error."""
    out = {} if out is None else out
    for k, v in values.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            _flat(what, table, v, f"{key}.", out)
        elif key in out:
            raise DspsimInputError(f"{what}: [{table}] key {key!r} is given twice "
                                   "(dotted and as a nested table); give it once")
        else:
            out[key] = v
    return out
