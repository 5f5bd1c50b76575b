"""Exact event elision: the elided engine reports exactly what the reference engine does.

Random configurations (fixed seed) over the ranges a sweep explores, every op and variant: the
cycles, bytes, busy and stall cycles, contention, passes, warnings, hazards, the trace, the DDR
port's request log and the output values are identical with and without elision; only the
event count (and the wall time) may differ, and elision never adds events.
"""

import math

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.ops import get_op, op_names
from tests.op_keys import choice_settings, tile_settings

FIELDS = ("cycles", "bytes", "busy_cycles", "stall_cycles", "ddr_contention_cycles", "passes",
          "warnings", "hazards", "rpc_cycles", "output")


def random_config(rng: np.random.Generator) -> dict:
    latency = float(np.exp(rng.uniform(0, math.log(2000))))
    # up to a DataRAM's free space on J6 (tcm.bank_bytes - tcm.reserved_bytes = 245,760 bytes):
    # a larger tile is refused when the model is built
    tile = 4 * int(np.exp(rng.uniform(math.log(64), math.log(61440))))
    return {
        "ddr.latency_cycles": latency,
        "ddr.bytes_per_cycle": float(np.exp(rng.uniform(math.log(0.05), math.log(64)))),
        "ddr.max_outstanding": int(rng.integers(1, 65)),
        "idma.max_outstanding": int(rng.integers(1, 65)),
        "idma.burst_bytes": int(rng.choice([16, 64, 128, 256])),
        "idma.setup_cycles": float(rng.choice([0.0, 30.0, 500.0])),
        "core.write_buffer_entries": int(rng.choice([1, 2, 8])),
        **tile_settings(tile),  # every op's tile key and choice keys (tests/op_keys.py)
        **choice_settings(rng),
    }


def cases(count: int = 120):
    rng = np.random.default_rng(20261130)
    runs = [(op, v) for op in op_names() for v in get_op(op).variants]
    for i in range(count):
        op, variant = runs[i % len(runs)]
        config = random_config(rng)
        if get_op(op).ndim == 1:
            size = {"n": int(rng.integers(1, 6000))}
        else:
            size = {"shape": (int(rng.integers(1, 12)), int(rng.integers(1, 300)))}
        yield pytest.param(op, variant, config, size, bool(i % 3 == 0), id=f"{i}-{op}-{variant}")


def comparable(r):
    out = {f: getattr(r, f) for f in FIELDS}
    out["trace"] = r.trace.to_dict("list") if r.trace is not None else None
    out["port_log"] = r.port_log
    out["values"] = None if r.output_array is None else r.output_array.tobytes()
    return out


@pytest.mark.parametrize("op, variant, config, size, data", list(cases()))
def test_elided_engine_reports_exactly_what_the_reference_does(op, variant, config, size, data):
    model = load_model().with_overrides(config)
    try:
        ref = simulate(model, op, variant, data=data, trace=True, port_log=True, elide=False,
                       **size)
    except ValueError as e:  # a configuration the op refuses (a row longer than a tile ...)
        with pytest.raises(type(e)):
            simulate(model, op, variant, data=data, elide=True, **size)
        return
    fast = simulate(model, op, variant, data=data, trace=True, port_log=True, elide=True, **size)
    assert comparable(fast) == comparable(ref)
    assert fast.events <= ref.events


def test_elision_removes_most_events_at_the_headline(j6):
    ref = simulate(j6, variant="pingpong", data=False, elide=False)
    fast = simulate(j6, variant="pingpong", data=False)
    assert fast.cycles == ref.cycles and fast.events * 10 < ref.events
