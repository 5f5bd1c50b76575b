"""``MemoryPort.stream`` books a walk's bursts exactly as one ``request`` a burst would, the
window wait and all, and stops at the first wait that does not end before the horizon."""

from collections import deque

import numpy as np
import pytest
import simpy

from dspsim import load_model
from dspsim.platform import Platform


def _port(config: dict, port_log: bool = False):
    return Platform(simpy.Environment(), load_model().with_overrides(config), data=False,
                    trace=False, port_log=port_log).port


def _walk_by_request(port, now, inflight, i, count, full, burst, rest, window, write, who,
                     horizon):
    """The walk's inner loop as it was before ``stream``: a request a burst."""
    while i < count:
        if len(inflight) == window:
            oldest = inflight[0]
            if oldest > now:
                later = now + (oldest - now)
                if not later < horizon:
                    break
                now = later
            inflight.popleft()
        inflight.append(port.request(now, burst if i < full else rest, write, who))
        i += 1
    return i, now


def _state(port, inflight, out):
    return (out, list(inflight), list(port._slot_free), list(port._slot_holder),
            port._next_slot, port._path_free, port._path_owner, list(port._recent),
            port.contention_cycles, port.bytes_read, port.bytes_written)


CONFIGS = [
    {"ddr.latency_cycles": 114.006, "ddr.bytes_per_cycle": 0.38814},
    {"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 0.5, "ddr.max_outstanding": 8},
    {"ddr.latency_cycles": 37.3, "ddr.bytes_per_cycle": 4.0, "ddr.max_outstanding": 3},
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seed", range(6))
def test_stream_books_as_requests_do(config, seed):
    rng = np.random.default_rng(seed)
    ports = [_port(config), _port(config)]
    # another requester's bursts already in flight, the same on both ports
    t = 0.0
    for _ in range(int(rng.integers(0, 40))):
        t += float(rng.choice([0.0, 1.0, float(rng.uniform(0, 300))]))
        size, written = int(rng.choice([64, 32, 100])), bool(rng.integers(2))
        for p in ports:
            p.request(t, size, written, "other")
    burst, window = int(rng.choice([16, 64, 128])), int(rng.integers(1, 40))
    nbytes = int(rng.integers(1, 200)) * burst + int(rng.choice([0, 0, 7]))
    full, count = nbytes // burst, -(-nbytes // burst)
    write = bool(rng.integers(2))
    now = t + float(rng.choice([0.0, float(rng.uniform(0, 500))]))
    horizon = float(rng.choice([np.inf, now + float(rng.uniform(0, 20_000))]))
    flights = [deque(), deque()]
    out_a = ports[0].stream(now, flights[0], 0, count, full, burst, nbytes - full * burst,
                            window, write, "ch", horizon)
    out_b = _walk_by_request(ports[1], now, flights[1], 0, count, full, burst,
                             nbytes - full * burst, window, write, "ch", horizon)
    assert _state(ports[0], flights[0], out_a) == _state(ports[1], flights[1], out_b)
    if horizon == np.inf:
        assert out_a[0] == count
