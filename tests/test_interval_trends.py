"""Every trend the interval search relies on (dspsim.study.interval.trend), held over random
small configurations: cycles never fall as a +1 key rises, never rise as a -1 key rises, and do
not move with a 0 key."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.config import load_model
from dspsim.run import simulate
from dspsim.study.interval import trend

# (model, op, variant, shape strategy, settings): small runs of each platform's ops
_RUNS = [
    ("j6", "softmax", "pingpong", st.integers(16, 3000).map(lambda n: (n,)), {}),
    ("j6", "softmax", "direct", st.integers(16, 3000).map(lambda n: (n,)), {}),
    ("ameba_hifi5", "copy", "memcpy", st.integers(1, 24).map(lambda k: (512 * k,)), {}),
    ("ameba_hifi5", "copy", "idma", st.integers(1, 24).map(lambda k: (512 * k,)), {}),
    ("ameba_hifi5", "copy", "idma", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.completion_interrupt": True}),
    ("ameba_hifi5", "copy", "memcpy", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.src": "sram"}),
    ("ameba_hifi5", "kernel", "fc_s8", st.sampled_from([(8, 64), (16, 128), (4, 256)]), {}),
    ("ameba_hifi5", "fc", "direct", st.sampled_from([(8, 256), (16, 768), (12, 384)]), {}),
    ("esp32s3", "copy", "memcpy", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.src": "psram"}),
    ("esp32s3", "copy", "memcpy", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.dst": "psram", "copy.flush_destination": True}),
    ("esp32s3", "copy", "dma", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.src": "psram", "copy.dst": "psram", "copy.completion_interrupt": True}),
    ("esp32s3", "copy", "loop", st.integers(1, 24).map(lambda k: (512 * k,)),
     {"copy.src": "psram", "copy.dst": "psram", "copy.access_bytes": 4,
      "copy.loop_cycles_per_iteration": 4.0, "copy.flush_destination": True}),
]

# each trended key's values to draw from (wide enough to cross the regimes)
_VALUES = {
    "latency_cycles": st.floats(1.0, 600.0),
    "write_latency_cycles": st.floats(1.0, 600.0),
    "bytes_per_cycle": st.floats(0.05, 16.0),
    "max_outstanding": st.integers(1, 128),
    "core.clock_mhz": st.floats(100.0, 3000.0),
    "host.rpc_latency_us": st.floats(0.0, 2000.0),
    "tcm.reserved_bytes": st.sampled_from([0, 1024, 16384, 65536]),
    "core.alu_latency_cycles": st.integers(1, 8),
    "core.call_overhead_cycles": st.integers(0, 500),
    "idma.setup_cycles": st.floats(0.0, 3000.0),
    "core.vector_alu_slots": st.integers(1, 6),
    "core.load_store_units": st.integers(1, 4),
    "core.write_buffer_entries": st.integers(1, 32),
    "idma.max_outstanding": st.integers(1, 64),
    "copy.prologue_cycles": st.floats(0.0, 20000.0),
    "copy.interrupt_handler_cycles": st.floats(0.0, 20000.0),
    "refresh_clocks": st.floats(0.0, 14.0),
    "dcache.miss_cycles": st.floats(0.0, 400.0),
    "idma.descriptor_cycles": st.floats(0.0, 2000.0),
    "idma.engine_bytes_per_cycle": st.floats(0.01, 16.0),
    "command_clocks": st.integers(0, 40),
    "read_hold_clocks": st.integers(0, 8),
    "write_hold_clocks": st.integers(0, 8),
    "copy.dma_cache_sync_cycles_per_line": st.floats(0.0, 100.0),
    "copy.memcpy_cycles_per_iteration": st.floats(0.5, 20.0),
}


def _keys(model) -> list[str]:
    return [k for k in model.keys() if trend(k) is not None
            and (k in _VALUES or k.partition(".")[2] in _VALUES)]


def _strategy(key: str):
    return _VALUES[key] if key in _VALUES else _VALUES[key.partition(".")[2]]


def _moved(model, key, value):
    try:
        return model.with_overrides({key: value})
    except ValueError:  # a value this model cannot take with the others
        return None


def _cycles(model, op, variant, shape, key, value) -> int | None:
    try:
        m = model.with_overrides({key: value})
        return simulate(m, op, variant, shape=shape, data=False).cycles
    except ValueError:  # a value this run cannot take (a tile that no longer fits): no claim
        return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_trend_holds(data):
    name, op, variant, shape_st, setting = data.draw(st.sampled_from(_RUNS))
    model = load_model(name, setting or None)
    shape = data.draw(shape_st)
    key = data.draw(st.sampled_from(_keys(model)))
    # a random configuration around it: up to two other keys moved
    for other in data.draw(st.lists(st.sampled_from(_keys(model)), max_size=2, unique=True)):
        if other != key:
            moved = _moved(model, other, data.draw(_strategy(other)))
            model = moved if moved is not None else model
    values = _strategy(key)
    a, b = sorted((data.draw(values), data.draw(values)))
    lo = _cycles(model, op, variant, shape, key, a)
    hi = _cycles(model, op, variant, shape, key, b)
    if lo is None or hi is None:
        return
    t = trend(key)
    assert (hi >= lo if t > 0 else hi <= lo if t < 0 else hi == lo), (key, a, b, lo, hi)


def test_the_trend_table_covers_the_ranged_keys_of_the_shipped_models():
    """Every ranged key of the shipped models is trended and drawn above, or searched at its
    ends and value (no trend: the tile sizes)."""
    for name in ("j6", "ameba_hifi5", "esp32s3"):
        model = load_model(name)
        for key in model.ranges:
            assert trend(key) is None or key in _keys(model), key
