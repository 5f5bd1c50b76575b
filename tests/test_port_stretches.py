"""A port keeps its data path's future as busy stretches: spans queued back to back merge into
one. What it reports from them (``busy_until``) is what the requests' own spans give, exactly
on round values and to a float's rounding on random ones, whether the bursts came one
``request`` at a time or a walk's run of them through ``stream``."""

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.ticks import ticks
from tests.test_port_stream import _port as _plain_port
from tests.test_port_stream import _walk_by_request


def _port(config: dict):
    return _plain_port(config, port_log=True)


def _log_ticks(port) -> list[tuple]:
    """The port log's entries as the port appended them (times in ticks)."""
    return port.log.ticks(0, len(port.log))


def _from_spans(port, t: int) -> int:
    """``busy_until(t)`` (ticks) from every request's own data-path span (the port log)."""
    spans = [(e[1], e[2]) for e in _log_ticks(port)]
    return port.busy_ticks - sum(end - max(start, t) for start, end in spans if end > t)


def _check_stretches(port) -> None:
    """Stretches are in order, apart (never touching: touching ones merge) and cover exactly
    the logged spans that end after the first stretch starts."""
    recent = list(port._recent)
    for (a, b), (c, d) in zip(recent, recent[1:]):
        assert a < b < c < d
    if recent:
        spans = [(e[1], e[2]) for e in _log_ticks(port) if e[2] > recent[0][0]]
        merged: list[list[int]] = []
        for s, e in spans:
            if merged and merged[-1][1] == s:
                merged[-1][1] = e
            else:
                merged.append([s, e])
        assert [tuple(x) for x in merged][-len(recent):] == recent


def _requests(port, rng, round_values: bool, n: int) -> int:
    """``n`` requests at random issue times; the last issue time, in ticks."""
    t = 0.0
    for _ in range(n):
        gap = float(rng.integers(0, 400)) if round_values else float(rng.uniform(0, 400))
        t += float(rng.choice([0.0, gap]))
        size = int(rng.choice([64, 32, 128]))
        port.request(ticks(t), size, bool(rng.integers(2)), str(rng.choice(["a", "b"])))
    return ticks(t)


ROUND = {"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 0.5, "ddr.max_outstanding": 8}
RANDOM = {"ddr.latency_cycles": 114.006, "ddr.bytes_per_cycle": 0.38814}


@pytest.mark.parametrize("seed", range(8))
def test_busy_until_is_the_spans_sum_exactly_on_round_values(seed):
    rng = np.random.default_rng(seed)
    port = _port(ROUND)
    t = _requests(port, rng, True, int(rng.integers(1, 120)))
    _check_stretches(port)
    for u in (t, t + ticks(1.0), t + ticks(64.0), t + ticks(1000.0), port._path_free,
              port._path_free + ticks(1.0)):
        assert port.busy_until(u) == _from_spans(port, u)


@pytest.mark.parametrize("seed", range(8))
def test_busy_until_is_the_spans_sum_on_random_values(seed):
    rng = np.random.default_rng(100 + seed)
    port = _port(RANDOM)
    t = _requests(port, rng, False, int(rng.integers(1, 120)))
    _check_stretches(port)
    for u in (t, t + ticks(float(rng.uniform(0, 2000))), port._path_free):
        assert port.busy_until(u) == pytest.approx(_from_spans(port, u), rel=1e-12, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(window=st.integers(1, 40), bursts=st.integers(1, 200), round_values=st.booleans(),
       start=st.integers(0, 3000), others=st.integers(0, 30))
def test_a_walks_stream_keeps_the_stretches_requests_keep(window, bursts, round_values, start,
                                                         others):
    """``stream`` extends the open stretch in its loop; ``request`` a burst at a time merges
    into the last one: the stretches, and so ``busy_until``, are the same."""
    config = ROUND if round_values else RANDOM
    ports = [_port(config), _port(config)]
    rng = np.random.default_rng(start * 7 + others)
    t = 0.0
    for _ in range(others):
        t += float(rng.integers(0, 300))
        for p in ports:
            p.request(ticks(t), 64, False, "other")
    start_at = ticks(t + float(start))
    flights: list[deque] = [deque(), deque()]
    ports[0].stream(start_at, flights[0], 0, bursts, bursts, 64, 0, window, False, "ch", np.inf)
    _, now = _walk_by_request(ports[1], start_at, flights[1], 0, bursts, bursts, 64, 0, window,
                              False, "ch", np.inf)
    assert list(ports[0]._recent) == list(ports[1]._recent)
    for p in ports:
        _check_stretches(p)
        assert p.busy_until(now) == pytest.approx(_from_spans(p, now), rel=1e-12, abs=1e-9)
    if round_values:
        assert ports[0].busy_until(now) == _from_spans(ports[0], now)
