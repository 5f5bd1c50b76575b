"""The fast-forward of periodic streaming (dspsim.hw.repeats.StreamRuns) reports exactly what
the reference engine does: on random configurations with streams long enough to repeat (every op and
variant), and on round-valued ones where requests meet at the same instant and half-way
roundings occur, the cycles, counters, warnings, hazards, trace, port log and output values are
identical with the fast-forward and without elision; and it does advance by periods there."""

import math

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.hw import repeats
from dspsim.ops import get_op, op_names
from dspsim.study.workload import parse_workload, run_workload, task_table
from tests.op_keys import choice_settings, tile_settings
from tests.test_elision import comparable
from tests.test_elision import random_config as elision_config


@pytest.fixture
def skips(monkeypatch):
    """Counts the fast-forwards that advanced the clock."""
    count = [0]
    woke = repeats.StreamRuns.woke

    def counted(self, stream):
        advanced = woke(self, stream)
        count[0] += advanced
        return advanced

    monkeypatch.setattr(repeats.StreamRuns, "woke", counted)
    return count


def long_size(rng: np.random.Generator, op: str) -> dict:
    """Streams of many tiles: 1-D ops 20,000 - 120,000 elements, 2-D ops ~ as many."""
    if get_op(op).ndim == 1:
        return {"n": int(rng.integers(20_000, 120_000))}
    cols = int(rng.choice([64, 256, 1024]))
    return {"shape": (int(rng.integers(20_000, 120_000)) // cols, cols)}


def round_config(rng: np.random.Generator) -> dict:
    """Integer latencies and setups, power-of-two bandwidths, bursts and windows: times meet,
    and a burst's cycles can lie half-way between two floats of the binade."""
    return {
        "ddr.latency_cycles": int(rng.integers(1, 9)) * int(rng.choice([1, 8, 64])),
        "ddr.bytes_per_cycle": float(2.0 ** int(rng.integers(-3, 4))),
        "ddr.max_outstanding": int(2 ** int(rng.integers(0, 7))),
        "idma.max_outstanding": int(2 ** int(rng.integers(0, 6))),
        "idma.burst_bytes": int(2 ** int(rng.integers(4, 9))),
        "idma.setup_cycles": int(rng.integers(0, 5)) * int(rng.choice([1, 8])),
        "core.write_buffer_entries": int(rng.choice([1, 2, 8])),
        **tile_settings(int(2 ** int(rng.integers(10, 16)))),
        **choice_settings(rng),
    }


def random_long_config(rng: np.random.Generator) -> dict:
    config = elision_config(rng)
    config.update(tile_settings(4 * int(np.exp(rng.uniform(math.log(1024), math.log(16384))))))
    return config


def cases(make, count: int, seed: int):
    rng = np.random.default_rng(seed)
    runs = [(op, v) for op in op_names() for v in get_op(op).variants]
    for i in range(count):
        op, variant = runs[i % len(runs)]
        yield op, variant, make(rng), long_size(rng, op), i % 4 == 0


def compare(cases_) -> tuple[int, int]:
    compared = 0
    for op, variant, config, size, data in cases_:
        model = load_model().with_overrides(config)
        try:
            ref = simulate(model, op, variant, data=data, trace=True, port_log=True,
                           elide=False, **size)
        except ValueError:  # a configuration the op refuses
            continue
        fast = simulate(model, op, variant, data=data, trace=True, port_log=True, **size)
        assert comparable(fast) == comparable(ref), (op, variant, config, size, data)
        compared += 1
    return compared


def test_fast_forward_equals_the_reference_on_random_long_streams(skips):
    assert compare(cases(random_long_config, 40, 20261202)) >= 30
    assert skips[0] > 100


def test_fast_forward_equals_the_reference_on_round_values(skips):
    assert compare(cases(round_config, 40, 21)) >= 30
    assert skips[0] > 100


def test_tile_fidelity_fast_forwards_two_channels_sharing_the_port(j6, skips):
    """Tile fidelity falls back to bursts where two channels share the port (every TCM
    schedule): the fast-forward makes those stretches cheap, with burst fidelity's figures."""
    burst = simulate(j6, "softmax", "pingpong", n=300_000, data=False, elide=False)
    tile = simulate(j6, "softmax", "pingpong", n=300_000, data=False, fidelity="tile")
    assert (tile.cycles, tile.bytes, tile.busy_cycles, tile.stall_cycles,
            tile.ddr_contention_cycles) == (burst.cycles, burst.bytes, burst.busy_cycles,
                                            burst.stall_cycles, burst.ddr_contention_cycles)
    assert skips[0] > 10 and tile.events * 5 < burst.events


def test_four_channels_of_two_cores_fast_forward_as_they_step(j6, skips, monkeypatch):
    """Two cores streaming ping-pong softmax at once: four channels share the DDR port (roles
    pass round among more than two streams). The workload's task table with the fast-forward
    equals the one without it (the elided engine, itself equal to the reference)."""
    model = j6.with_overrides({"core.count": 2})
    streams = [{"name": f"s{k}", "op": "softmax", "variant": "pingpong", "n": 150_000,
                "count": 2, "period_us": 1.0, "backend": f"core{k}"} for k in range(2)]
    wl = parse_workload({"seed": 1, "stream": streams})
    fast = task_table(run_workload(wl, model, fidelity="burst"))
    assert skips[0] > 10
    monkeypatch.setattr(repeats.StreamRuns, "woke", lambda self, stream: False)
    assert fast.equals(task_table(run_workload(wl, model, fidelity="burst")))


