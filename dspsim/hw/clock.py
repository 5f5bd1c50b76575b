"""Exact event elision: a process keeps a local clock and yields only when another could act.

A burst or vector access whose completion falls before the next event in SimPy's queue can be
computed without scheduling it: nothing else runs in between, so advancing a local clock with
the same float arithmetic a ``Timeout`` would use (``now + delay``) gives the same times, the
same port bookings and the same order of everything else. A process yields a real event only
when the time it waits for is not strictly before the queue's next event (at an equal time the
event already queued would run first), and it yields one, at the exact absolute time of its
local clock, before it does anything another process can see (finish a copy, return).

``At`` is that absolute-time event: SimPy only schedules relative to ``env.now``, and
``env.now + (t - env.now)`` need not equal ``t`` in floating point. It uses the
environment's queue and event counter directly (SimPy's own ``Environment.schedule`` does the
same ``heappush``).
"""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.events import NORMAL, Event


class At(Event):
    """An event processed at the absolute simulation time ``at`` (>= ``env.now``)."""

    def __init__(self, env: simpy.Environment, at: float):
        # the fields simpy.events.Timeout sets, inlined as SimPy does for speed
        self.env = env
        self.callbacks = []
        self._value = None
        self._ok = True
        heappush(env._queue, (at, NORMAL, next(env._eid), self))
