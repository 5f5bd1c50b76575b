"""Runs of alike iterations inside one kernel call's walk, booked at once
(:class:`dspsim.hw.repeats.IterationRuns`): the elided engine reports exactly what the
reference engine (``elide=False``, every access an event) does, field for field, on random
and on round (tie-rich) configurations, with the data path and the trace on or off; and the
runs are booked (a spy counts them), so that these comparisons test them."""

import math

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.hw import repeats
from dspsim.hw.dcache import DataCache
from dspsim.ops import get_op, op_names
from tests.op_keys import choice_settings, tile_settings
from tests.test_elision import comparable as elision_fields


def comparable(r) -> dict:
    """What the elided engine must report as the reference does: the elision test's fields,
    the per-engine and per-memory statistics and the data cache's counters."""
    return {**elision_fields(r), "engines": r.engines, "memories": r.memories,
            "dcache": r.dcache}


@pytest.fixture
def booked(monkeypatch):
    """The iterations booked at once, counted."""
    count = [0]
    book = repeats.IterationRuns._book

    def spy(self, periods, *args):
        count[0] += periods * self.gap
        return book(self, periods, *args)

    monkeypatch.setattr(repeats.IterationRuns, "_book", spy)
    return count


def random_config(rng: np.random.Generator, round_values: bool) -> dict:
    if round_values:  # integer latencies, power-of-two bandwidths: times meet at ties
        latency = float(rng.choice([1, 2, 8, 64, 100, 256]))
        bandwidth = float(2.0 ** rng.integers(-3, 6))
    else:
        latency = float(np.exp(rng.uniform(0, math.log(2000))))
        bandwidth = float(np.exp(rng.uniform(math.log(0.05), math.log(64))))
    return {
        "ddr.latency_cycles": latency,
        "ddr.bytes_per_cycle": bandwidth,
        "ddr.max_outstanding": int(rng.integers(1, 65)),
        "core.write_buffer_entries": int(rng.choice([1, 2, 8])),
        "core.call_overhead_cycles": int(rng.choice([0, 30])),
        **tile_settings(4096),
        **choice_settings(rng),
    }


def cases(count: int = 36):
    rng = np.random.default_rng(20261207)
    runs = [(op, v) for op in op_names() for v in get_op(op).variants if "direct" in v]
    for i in range(count):
        op, variant = runs[i % len(runs)]
        config = random_config(rng, round_values=i % 2 == 1)
        if get_op(op).ndim == 1:
            size = {"n": int(rng.integers(2000, 40000))}
        else:
            size = {"shape": (int(rng.integers(1, 5)), int(rng.integers(600, 4000)))}
        yield pytest.param(op, variant, config, size, i % 3 == 0, id=f"{i}-{op}-{variant}")
    # a call whose last booked iteration ends it with nothing owed (the walk's clock must be
    # where the booked run left it)
    yield pytest.param("layernorm", "direct", {"ddr.latency_cycles": 1.2965415919058816,
                                               "ddr.bytes_per_cycle": 5.187035975028539,
                                               "ddr.max_outstanding": 17}, {"shape": (1, 928)},
                       False, id="ends-on-a-booked-run")


@pytest.mark.parametrize("op, variant, config, size, data", list(cases()))
def test_booked_iterations_report_what_the_reference_does(op, variant, config, size, data,
                                                           booked):
    model = load_model().with_overrides(config)
    ref = simulate(model, op, variant, data=data, trace=True, elide=False, **size)
    assert booked[0] == 0  # the reference engine books nothing
    fast = simulate(model, op, variant, data=data, trace=data, elide=True, **size)
    expected, got = comparable(ref), comparable(fast)
    if not data:
        expected["trace"] = got["trace"] = None
    assert got == expected


def test_runs_are_booked_on_most_variants(booked):
    """Every direct variant books most of a long call's iterations (so the comparisons above
    compare booked runs), and its cycles are the reference's."""
    model = load_model()
    for op in op_names():
        for variant in (v for v in get_op(op).variants if "direct" in v):
            size = {"n": 20000} if get_op(op).ndim == 1 else {"shape": (8, 20000)}
            booked[0] = 0
            fast = simulate(model, op, variant, data=False, **size)
            assert booked[0] > 0, (op, variant)
            ref = simulate(model, op, variant, data=False, elide=False, **size)
            assert comparable(fast) == comparable(ref), (op, variant)


def test_softmax_direct_books_nearly_every_iteration(booked):
    """At 10^6 elements the direct variant's three passes walk 31,250 vector iterations each
    (32 lanes): nearly all of them are booked, not stepped (a run stops at each binade)."""
    simulate(load_model(), "softmax", "direct", n=1_000_000, data=False)
    assert booked[0] > 0.95 * 3 * 1_000_000 / 32


@pytest.mark.parametrize("limit", [None, 3000, 150])
@pytest.mark.parametrize("seed", range(6))
def test_booked_iterations_log_every_request_and_keep_a_limit(seed, limit, booked):
    """With the port log (and the trace) asked for, the booked iterations' requests are
    logged in order, a row limit cutting and counting where the reference's does."""
    rng = np.random.default_rng(seed)
    config = random_config(rng, round_values=seed % 2 == 1)
    op, size = [("softmax", {"n": int(rng.integers(20000, 60000))}),
                ("layernorm", {"shape": (2, int(rng.integers(4000, 9000)))})][seed % 2]
    model = load_model().with_overrides(config)
    kwargs = {"data": False, "trace": True, "port_log": True, "trace_limit": limit, **size}
    ref = simulate(model, op, "direct", elide=False, **kwargs)
    fast = simulate(model, op, "direct", **kwargs)
    assert comparable(fast) == comparable(ref)
    assert fast.port_log.dropped == ref.port_log.dropped
    assert (fast.trace_cut_cycle, fast.port_log_cut_cycle) == \
        (ref.trace_cut_cycle, ref.port_log_cut_cycle)
    assert booked[0] > 0


def cached_config(rng: np.random.Generator) -> dict:
    """The HiFi5's PSRAM behind its cache, its sizes and policies drawn at random."""
    ways = int(rng.choice([1, 2, 3, 4]))
    line = int(rng.choice([32, 64, 128]))
    policy = str(rng.choice(["write_back", "write_through"]))
    return {
        "dcache.line_bytes": line,
        "dcache.ways": ways,
        "dcache.capacity_bytes": ways * line * int(rng.choice([8, 32, 128])),
        "dcache.prefetch_next_line": bool(rng.integers(2)),
        "dcache.prefetch_streams": int(rng.choice([0, 1, 2])),
        "dcache.write_policy": policy,
        "dcache.miss_cycles": float(rng.choice([0.0, 7.0, 90.04])),
        # (a write buffer acts only where stores are posted: write-through)
        **({"core.write_buffer_entries": int(rng.choice([1, 2, 8]))}
           if policy == "write_through" else {}),
    }


@pytest.mark.parametrize("seed", range(24))
def test_booked_iterations_through_a_cache_report_what_the_reference_does(seed, booked):
    """A call streaming through the data cache (the HiFi5's memcpy, softmax and copy loop on
    PSRAM: transactions, no ring), on random cache geometries and policies, values and the
    port logs on in a quarter: field for field the reference."""
    rng = np.random.default_rng(seed)
    config = cached_config(rng)
    op, variant, size = [("copy", "memcpy", {"n": int(rng.integers(2000, 60000))}),
                         ("softmax", "direct", {"n": int(rng.integers(2000, 20000))}),
                         ("copy", "loop", {"n": int(rng.integers(2000, 20000))})][seed % 3]
    kwargs = {"data": seed % 4 == 0, "port_log": seed % 4 == 1, "trace": seed % 4 == 1, **size}
    try:
        model = load_model("ameba_hifi5").with_overrides(config)
        ref = simulate(model, op, variant, elide=False, **kwargs)
    except ValueError:
        pytest.skip("a configuration the op refuses")
    fast = simulate(model, op, variant, **kwargs)
    assert comparable(fast) == comparable(ref)
    if kwargs["port_log"]:
        assert fast.port_logs == ref.port_logs


@pytest.mark.parametrize("seed", range(12))
def test_booked_rows_of_interleaved_streams_through_a_cache_report_what_the_reference_does(
        seed, booked):
    """The HiFi5's fc ``direct``: one call whose rows each read four weight rows side by side
    through the cache (interleaved streams); alike rows are booked at once, on random cache
    geometries and policies, random and round shapes, values and the port logs on in some:
    field for field the reference."""
    rng = np.random.default_rng(300 + seed)
    config = cached_config(rng)
    out_rows = int(rng.choice([4, 64, 256, 1024])) if seed % 2 else int(rng.integers(9, 700))
    in_bytes = int(rng.choice([64, 768, 1024])) if seed % 2 else int(rng.integers(17, 3000))
    kwargs = {"data": seed % 3 == 0, "port_log": seed % 3 == 1, "trace": seed % 3 == 1,
              "shape": (out_rows, in_bytes)}
    try:
        model = load_model("ameba_hifi5").with_overrides(config)
        ref = simulate(model, "fc", "direct", elide=False, **kwargs)
    except ValueError:
        pytest.skip("a configuration the op refuses")
    fast = simulate(model, "fc", "direct", **kwargs)
    assert comparable(fast) == comparable(ref)
    if kwargs["port_log"]:
        assert fast.port_logs == ref.port_logs


def test_fc_rows_through_the_cache_are_booked(booked):
    """The HiFi5's fc ``direct`` at its default shape: most of its 128 rows booked at once."""
    model = load_model("ameba_hifi5")
    r = simulate(model, "fc", "direct", data=False)
    ref = simulate(model, "fc", "direct", data=False, elide=False)
    assert booked[0] > 64 and comparable(r) == comparable(ref)


def test_the_cache_knows_its_top_lines_after_a_shift_past_them():
    """A cache moved on by a booked run keeps its lines less an offset: a line held below that
    offset (a second pass over a memory at address 0) is still its memory's top line, which
    the runs' end-of-memory bound reads."""
    model = load_model("ameba_hifi5")
    cache = DataCache(model.dcache)
    port = type("Port", (), {"request": staticmethod(lambda now, nbytes, write, who: now + 10)})
    mem = type("Mem", (), {"base": 0, "size_bytes": 1 << 16, "name": "m", "port": port()})()
    cache.shift(100, 0, 0)
    cache.access(0, mem, 5 * model.dcache.line_bytes, 16, False, "core0")
    assert cache.top_lines() == {mem: 5}


def test_a_stream_through_the_cache_is_booked(booked):
    """A 512 KiB memcpy on the HiFi5: most of its iterations booked, the reference's figures."""
    model = load_model("ameba_hifi5")
    r = simulate(model, "copy", "memcpy", n=524288, data=False)
    ref = simulate(model, "copy", "memcpy", n=524288, data=False, elide=False)
    assert booked[0] > 0.8 * 524288 / 16 and comparable(r) == comparable(ref)


@pytest.mark.parametrize("seed", range(8))
def test_booked_iterations_on_a_port_with_its_own_write_latency(seed, booked):
    """Writes slower (or faster) than reads: requests complete out of issue order, the port
    is no ring and picks the slot that frees first; booked runs keep that order."""
    rng = np.random.default_rng(100 + seed)
    config = random_config(rng, round_values=seed % 2 == 1)
    config["ddr.write_latency_cycles"] = config["ddr.latency_cycles"] * float(
        rng.choice([0.25, 2.0, 5.0]))
    model = load_model().with_overrides(config)
    size = {"n": int(rng.integers(5000, 40000))}
    ref = simulate(model, "softmax", "direct", data=False, elide=False, **size)
    fast = simulate(model, "softmax", "direct", data=False, **size)
    assert comparable(fast) == comparable(ref) and booked[0] > 0


def test_a_later_call_books_from_its_first_note(monkeypatch):
    """The HiFi5's memcpy copies in calls of 64 KiB: the period the first call found is kept,
    and every later call that meets its state books from one note, with the reference's
    figures (a period kept for another loop, or other ports, would not be used)."""
    used = [0]
    known = repeats.IterationRuns._known_period

    def spy(self, snap):
        before = len(self.notes)
        known(self, snap)
        used[0] += len(self.notes) > before

    monkeypatch.setattr(repeats.IterationRuns, "_known_period", spy)
    model = load_model("ameba_hifi5")
    r = simulate(model, "copy", "memcpy", n=524288, data=False)
    ref = simulate(model, "copy", "memcpy", n=524288, data=False, elide=False)
    assert used[0] >= 5 and comparable(r) == comparable(ref)
