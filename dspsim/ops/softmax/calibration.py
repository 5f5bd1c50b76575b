"""The runs of softmax a board can make to separate calibrations (``dspsim calibrate``'s
proposal): version, n, TILE_SIZE, schedule, and the channels' outstanding-request limit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# TILE_SIZE values tried (those that fit a DataRAM), besides the model's own
CANDIDATE_TILE_BYTES = (1024, 4096, 16384, 65536)
DIRECT_SHORT_N = 1024


def calibration_candidates(
    model: Any, free_keys: Iterable[str], longest_shape: tuple[int, ...]
) -> list[tuple[str, tuple[int, ...], dict[str, Any]]]:
    """``(variant, shape, settings)`` of every candidate run: ping-pong at every TILE_SIZE
    (the model's own when ``softmax.tile_bytes`` is free), both schedules, with and without one
    request in flight per channel (unless a limit is free), at one tile, four tiles and one
    element, and the longest length; direct at 1024 elements and the longest length."""
    free_keys = set(free_keys)
    p = model.softmax
    tiles = [p.tile_bytes]
    if "softmax.tile_bytes" not in free_keys:
        tiles = sorted(
            {t for t in (*CANDIDATE_TILE_BYTES, p.tile_bytes) if t <= model.tcm.bank_bytes}
        )
    windows: list[int | None] = [None]
    if "idma.max_outstanding" not in free_keys and "ddr.max_outstanding" not in free_keys:
        windows.append(1)  # max_pif_req is an idma_init() argument: firmware can lower it
    longest = longest_shape[0]
    out: list[tuple[str, tuple[int, ...], dict[str, Any]]] = []
    for tile in tiles:
        for n in sorted({tile // 4, 4 * (tile // 4) + 1, longest}):
            for schedule in ("seed", "split"):
                for window in windows:
                    settings: dict[str, Any] = {}
                    if tile != p.tile_bytes:
                        settings["softmax.tile_bytes"] = tile
                    if schedule != p.schedule:
                        settings["softmax.schedule"] = schedule
                    if window is not None:
                        settings["idma.max_outstanding"] = window
                    out.append(("pingpong", (n,), settings))
    for n in sorted({DIRECT_SHORT_N, longest}):
        out.append(("direct", (n,), {}))
    return out
