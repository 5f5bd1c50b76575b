"""The key a sweep point's result is stored under: a SHA-256 of the canonical JSON of everything
the result depends on: ``model`` (every hardware key and the point's op's own keys, the swept
values in place of the fixed ones, each as its canonical text: ``100`` of a float key is
``100.0``), ``op``, ``variant``, ``shape`` (a 1-D op's ``n`` is ``[n]``), ``fidelity`` and
dspsim's ``version`` (with a digest of the op files of the sweep's ops). Nothing else (the
keys' order, the commit, another op's keys, the model file's name) is in it. A file's rows are
keyed by its sidecar's values and their parameter cells, the grid's points by the sweep's
model: a point is done when a row has its key.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from dspsim.config import HARDWARE, is_memory_section, key_type, model_key
from dspsim.schema import OP_SCHEMAS
from dspsim.study.sweep.values import (
    MODEL_KEY,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    format_value,
    parse_shape,
)
from dspsim.tables import MemoryCfg
from dspsim.version import __version__

__all__ = ["applies", "canon", "key_default", "key_optional", "point_key", "sweep_values",
           "sweep_version"]


def applies(key: str, ops: Iterable[str]) -> bool:
    """Whether model key ``key`` can act on a point of one of ``ops``: a hardware key, or a key
    of one of the ops."""
    section = key.partition(".")[0]
    return section not in OP_SCHEMAS or section in set(ops)


@functools.lru_cache(maxsize=1 << 16, typed=True)  # typed: True is not 1
def canon(key: str, value: Any) -> str:
    """A model key's value as its canonical text (a float key's ``100`` is ``100.0``)."""
    return format_value(float(value) if key_type(key) is float else value)


def key_default(key: str) -> Any:
    """The value a model key takes when a model file does not give it (None: it must)."""
    return model_key(key).default


def key_optional(key: str) -> bool:
    """Whether a model file (and so a sidecar's ``fixed_model``) may leave ``key`` out: a
    hardware key whose default is None, such as a memory's ``write_latency_cycles``."""
    k = model_key(key)
    table = MemoryCfg if is_memory_section(k.section) else HARDWARE.get(k.section)
    return table is not None and any(f.name == k.short and f.default is None
                                     for f in dataclasses.fields(table))


def sweep_values(flat: Mapping[str, Any], swept: Iterable[str], ops: Iterable[str]
                 ) -> dict[str, Any]:
    """The values a sweep records of one model (``flat``: ``HardwareModel.flat()``): the keys
    that apply to its ops and that it does not sweep."""
    swept, ops = set(swept), tuple(ops)
    return {k: v for k, v in flat.items() if k not in swept and applies(k, ops)}


def sweep_version(ops: Iterable[str]) -> str:
    """The version a sweep of ``ops`` records and keys its rows by: dspsim's, and after a ``+``
    a digest of the op files declaring any of ``ops`` (a file is an op's code: a changed file
    computes its rows again, as another dspsim version does)."""
    from dspsim.ops.fileop import op_file_digest

    digest = op_file_digest(ops)
    return __version__ if digest is None else f"{__version__}+opfile.{digest}"


def point_key(fixed: Mapping[str, Any], point: Mapping[str, Any], fidelity: str,
              version: str = __version__) -> str:
    """The key of ``point`` (its swept keys' values, ``op``, the variant, ``n`` or ``shape``) on
    a model whose other values are ``fixed`` (canonical text or values), at ``fidelity``."""
    op = str(point["op"])
    values = {**fixed, **{k: v for k, v in point.items()
                          if k not in SPECIAL_KEYS and k != MODEL_KEY}}
    variant = next((point[k] for k in VARIANT_KEYS if k in point), None)
    shape = list(parse_shape(point["shape"])) if "shape" in point else [int(point["n"])]
    doc = {"model": {k: canon(k, v) for k, v in values.items() if applies(k, (op,))},
           "op": op, "variant": variant, "shape": shape, "fidelity": fidelity,
           "version": version}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()
