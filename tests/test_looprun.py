"""Alike tiles at the price of a few: the ping-pong frame's runs of middle tiles, booked at once
while the channels stream (:mod:`dspsim.hw.finder`), report exactly what the reference engine
(``elide=False``: every burst an event) does.

Random configurations (fixed seed) and round-valued ones (integer latencies and setups,
power-of-two bandwidths, bursts and windows: requests meet at one instant, a burst's cycles may
lie half-way between two floats) on every op with a ping-pong variant, with streams of many
tiles so that runs are booked and cross binades of the time and the counters: the cycles,
bytes, busy and stall cycles, contention, passes, warnings, hazards, the engines' stats and the
memories' counters are identical, at burst and tile fidelity; and runs are booked.
"""

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.hw import finder
from dspsim.ops import get_op, op_names
from dspsim.study.workload import parse_workload, run_workload, task_table
from tests.test_elision import random_config
from tests.test_fidelity import round_config
from tests.test_rowrun import reported

FRAME_OPS = [op for op in op_names() if "pingpong" in get_op(op).variants]


@pytest.fixture
def booked(monkeypatch):
    """Counts the periods booked at once."""
    count = [0]
    jump = finder.Finder._jump

    def counted(self, notes, periods, *records):
        count[0] += periods
        return jump(self, notes, periods, *records)

    monkeypatch.setattr(finder.Finder, "_jump", counted)
    return count


def many_tiles(rng: np.random.Generator, op: str, tile_bytes: int) -> dict:
    """A stream of 24 - 200 tiles."""
    elements = tile_bytes // 4 * int(rng.integers(24, 200)) + int(rng.integers(0, 3)) * 7
    if get_op(op).ndim == 1:
        return {"n": elements}
    cols = int(rng.choice([1, 4, 16]))
    return {"shape": (max(1, elements // cols), cols)}


def cases(count: int, seed: int, round_values: bool):
    rng = np.random.default_rng(seed)
    for i in range(count):
        op = FRAME_OPS[i % len(FRAME_OPS)]
        config = round_config(rng, op) if round_values else random_config(rng)
        tile_bytes = int(2 ** int(rng.integers(10, 14)))
        config.update({k: tile_bytes for k in config if k.endswith(".tile_bytes")})
        if round_values:
            config["core.write_buffer_entries"] = int(rng.choice([1, 2, 8]))
        fidelity = "tile" if i % 3 == 2 else "burst"
        yield op, config, many_tiles(rng, op, tile_bytes), fidelity


def compare(cases_, trace: bool = False, data: bool = False, **records) -> int:
    """Booked and reference runs of each case, compared (with ``records``: ``port_log``,
    ``trace_limit``, the records and where each was cut too; with ``data``, the values)."""
    compared = 0
    for op, config, size, fidelity in cases_:
        model = load_model().with_overrides(config)
        try:
            ref = simulate(model, op, "pingpong", data=data, fidelity="burst", elide=False,
                           trace=trace, **records, **size)
        except ValueError:  # a configuration the op refuses
            continue
        fast = simulate(model, op, "pingpong", data=data, fidelity=fidelity, trace=trace,
                        **records, **size)
        assert reported(fast) == reported(ref), (op, config, size, fidelity)
        assert fast.engines == ref.engines and fast.core == ref.core
        if trace:  # the booked periods' rows, row for row
            assert fast.trace.to_dict("list") == ref.trace.to_dict("list"), (op, config, size)
        if records:
            assert fast.port_log == ref.port_log and fast.port_logs == ref.port_logs
            assert fast.port_log.dropped == ref.port_log.dropped
            assert fast.trace.attrs == ref.trace.attrs  # the trace's rows dropped
            assert (fast.trace_cut_cycle, fast.port_log_cut_cycle) == \
                (ref.trace_cut_cycle, ref.port_log_cut_cycle)
        compared += 1
    return compared


def test_booked_tiles_report_what_the_reference_does(booked):
    assert compare(cases(24, 20261202, False)) >= 18
    assert booked[0] > 50


def test_booked_tiles_are_exact_where_requests_meet_at_one_instant(booked):
    assert compare(cases(24, 2026, True)) >= 18
    assert booked[0] > 50


def test_the_headline_stream_books_most_of_its_tiles(j6, booked):
    """10^7 elements: most tiles booked, far fewer events than tile by tile."""
    ref = simulate(j6, "softmax", "pingpong", n=2_000_000, data=False, elide=False)
    fast = simulate(j6, "softmax", "pingpong", n=2_000_000, data=False)
    assert reported(fast) == reported(ref)
    tiles = 3 * 2_000_000 * 4 // j6.get("softmax.tile_bytes")
    assert 2 * booked[0] > tiles / 2
    assert fast.events * 20 < ref.events


def test_booked_tiles_with_the_trace_on_record_its_rows(booked):
    """The trace of booked periods: their rows as one block, tiles and descriptor numbers
    moving on, equal row for row to the reference's, on random and round configurations."""
    assert compare(cases(12, 20261207, False), trace=True) >= 8
    assert compare(cases(12, 7, True), trace=True) >= 8
    assert booked[0] > 20


@pytest.mark.parametrize("limit", [None, 3000, 60])
def test_booked_tiles_log_every_request_and_keep_a_limit(booked, limit):
    """A port log (every request of the booked periods, in order) and a trace kept to a row
    limit (rows and requests past it counted, the cut where the reference cuts)."""
    assert compare(cases(8, 11, False), trace=True, port_log=True, trace_limit=limit) >= 5
    assert compare(cases(8, 12, True), trace=True, port_log=True, trace_limit=limit) >= 5
    assert booked[0] > 10


def test_booked_tiles_with_the_data_path_on_compute_their_values(booked):
    """With the data path on, the booked tiles' values are computed untimed, tile by tile,
    between the channels landing what they had left and the moved-on descriptors landing
    again what they had landed: outputs (bit for bit), warnings and every figure equal the
    reference's, on random and round configurations, with a trace and port logs too."""
    assert compare(cases(12, 20261208, False), data=True) >= 8
    assert compare(cases(12, 8, True), data=True) >= 8
    assert compare(cases(6, 9, False), trace=True, data=True, port_log=True,
                   trace_limit=3000) >= 4
    assert booked[0] > 20


def test_the_headline_stream_with_values_books_its_tiles(j6, booked):
    ref = simulate(j6, "softmax", "pingpong", n=400_000, data=True, elide=False)
    fast = simulate(j6, "softmax", "pingpong", n=400_000, data=True)
    assert reported(fast) == reported(ref)
    assert fast.output_array.tobytes() == ref.output_array.tobytes()
    assert fast.events * 20 < ref.events and booked[0] > 0


def test_tasks_arriving_and_another_core_acting_meanwhile(j6, booked, monkeypatch):
    """A workload simulated task by task (no reuse): ping-pong softmax tasks arriving while
    one runs (the host's next arrival is an event ahead of the booked tiles) on core0, short
    direct ones on core1 now and then sharing the DDR port; the task table with runs booked
    equals the one with none."""
    model = j6.with_overrides({"core.count": 2})
    streams = [{"name": "long", "op": "softmax", "variant": "pingpong", "n": 400_000,
                "count": 3, "period_us": 5000.0, "backend": "core0"},
               {"name": "short", "op": "softmax", "variant": "direct", "n": 2_000,
                "count": 6, "period_us": 7000.0, "backend": "core1"}]
    wl = parse_workload({"seed": 1, "stream": streams})
    fast = task_table(run_workload(wl, model, fidelity="burst", reuse=False))
    assert booked[0] > 0
    monkeypatch.setattr(finder.Finder, "skip", lambda self, alike, carried=None, values=None: 0)
    assert fast.equals(task_table(run_workload(wl, model, fidelity="burst", reuse=False)))


@pytest.mark.parametrize("schedule", ["split", "seed"])
def test_booked_tiles_with_values_where_two_channels_share_a_buffer(schedule, monkeypatch):
    """A workload (no hazard log to keep racing copies from repeating) with the data path on:
    under ``split`` a buffer's copy in and copy out take two channels, so their order is the
    engines' timing's and the tiles are walked; under ``seed`` they are booked. The outputs
    equal the reference's bit for bit either way."""
    import functools

    import dspsim.study.workload.engine as engine

    model = load_model().with_overrides({"softmax.schedule": schedule,
                                         "softmax.tile_bytes": 4096})
    wl = parse_workload({"stream": [{"name": "s", "op": "softmax", "variant": "pingpong",
                                     "n": 40960, "count": 1, "period_us": 50.0}]})
    fast = run_workload(wl, model, fidelity="burst", data=True, reuse=False)
    monkeypatch.setattr(engine, "Platform", functools.partial(engine.Platform, elide=False))
    ref = run_workload(wl, model, fidelity="burst", data=True, reuse=False)
    assert fast.outputs["s"].tobytes() == ref.outputs["s"].tobytes()
    assert task_table(fast).equals(task_table(ref))
    assert fast.events * 5 < ref.events
