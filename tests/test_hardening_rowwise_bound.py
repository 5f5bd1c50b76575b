"""No row-wise run beats its own lower bound on a cached platform.

With ``write_through`` every store of a direct variant is posted through the write buffer;
when the last kernel returns (the timer stops) up to ``core.write_buffer_entries`` of them may
not have crossed the port yet, so the DMA bound counts all but those.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import DspsimInputError, load_model, simulate
from dspsim.ops.registry import get_op


def _check(op: str, variant: str, shape: tuple[int, int], over: dict) -> None:
    model = load_model("ameba_hifi5").with_overrides(over)
    try:  # the model's keys are right: only the run's shape may be refused
        r = simulate(model, op, variant, shape=shape, data=False)
    except DspsimInputError:  # a tile the platform refuses
        return
    b = get_op(op).bounds(model, variant, shape)
    # r.cycles is the span rounded to a whole cycle
    assert r.cycles >= b["lower_bound_cycles"] - 0.5, (r.cycles, dict(b))


@settings(max_examples=120, deadline=None)
@given(op=st.sampled_from(["rmsnorm", "layernorm"]),
       variant=st.sampled_from(["direct", "pingpong"]),
       rows=st.integers(1, 6), cols=st.integers(1, 200), tile_rows=st.integers(1, 4),
       policy=st.sampled_from(["write_back", "write_through", "write_through"]),
       entries=st.sampled_from([1, 2, 4, 8, 16, 32, 64, 256]),
       prefetch=st.booleans(), capacity=st.sampled_from([1152, 36864]))
def test_no_rowwise_run_beats_its_lower_bound(op, variant, rows, cols, tile_rows, policy,
                                              entries, prefetch, capacity):
    over = {"dcache.write_policy": policy, "dcache.prefetch_next_line": prefetch,
            "dcache.capacity_bytes": capacity, "idma.channels": 2,
            f"{op}.tile_bytes": 4 * cols * tile_rows}
    if policy == "write_through":  # the write buffer holds no store of a write-back cache
        over["core.write_buffer_entries"] = entries
    _check(op, variant, (rows, cols), over)


@pytest.mark.parametrize("op, shape, entries", [("layernorm", (1, 72), 32),
                                                ("rmsnorm", (3, 29), 64),
                                                ("rmsnorm", (1, 49), 16),
                                                ("rmsnorm", (64, 256), 32)])
def test_posted_stores_are_not_in_the_dma_bound(op, shape, entries):
    """Found below their bounds before (the DMA bound counted every posted store)."""
    _check(op, "direct", shape, {"dcache.write_policy": "write_through",
                                 "core.write_buffer_entries": entries})
