"""Each registered op's keys, derived from the op (never listed by hand): the random-
configuration tests set every op's tile key and randomise its choice keys, so a new op is
covered without editing them."""

from __future__ import annotations

import numpy as np

from dspsim.ops import get_op, op_names


def tile_keys() -> list[str]:
    """Every op's TCM tile key (``Op.tile_key``), in registration order."""
    return [k for k in (get_op(name).tile_key for name in op_names()) if k]


def tile_settings(tile_bytes: int) -> dict[str, int]:
    """``tile_bytes`` for every op's tile key."""
    return {key: tile_bytes for key in tile_keys()}


def choice_settings(rng: np.random.Generator) -> dict[str, str]:
    """A random choice for every op key that takes one of a few strings (``softmax.schedule``,
    ``softmax.max_init``, ...), in registration order."""
    out = {}
    for name in op_names():
        for key in get_op(name).params.keys:
            if key.type is str and key.choices:
                out[key.name] = str(rng.choice(list(key.choices)))
    return out


def searched_keys(model, name: str, variant: str, shape: tuple[int, ...]) -> set[str]:
    """The keys ``Op.search_space`` names for a run (what ``optimize`` varies)."""
    return set(get_op(name).search_space(model, variant, shape))
