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

from collections.abc import Callable, Generator
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


class WalkState:
    """Where a walk is: its local clock, and what it reports when it ends (``stall``; the
    part of it spent waiting for the write buffer, ``store_stall``)."""

    __slots__ = ("now", "stall", "store_stall")

    def __init__(self, now: float):
        self.now = now
        self.stall = 0.0
        self.store_stall = 0.0


Walk = Generator[float, None, None]  # yields the absolute times it waits until


def drive(
    env: simpy.Environment,
    walk: Walk,
    state: WalkState,
    elide: bool,
    before_wait: Callable[[], None] | None = None,
    pending: float | None = None,
) -> Generator[Event, None, None]:
    """Run ``walk`` as (part of) a SimPy process body: each time it waits until ``target``,
    advance the local clock if nothing else can act before (``elide``), else yield a real event
    at ``target`` (``before_wait`` runs first: what others may look at must be in place). The
    walk ends where everyone can see it: a real event at its local time. ``pending``: a target
    the walk already yielded (it resumes a walk that ran elsewhere, see :func:`replay`)."""
    target = next(walk, None) if pending is None else pending
    while target is not None:
        if not (elide and target < env.peek()):
            if before_wait is not None:
                before_wait()
            yield At(env, target)
        target = next(walk, None)
    if state.now > env.now:
        if before_wait is not None:
            before_wait()
        yield At(env, state.now)


def events_scheduled(env: simpy.Environment) -> int:
    """How many events the environment has scheduled so far (SimPy's own event counter:
    every event scheduled is processed by the end of a run)."""
    return next(env._eid)


def replay(walk: Walk, horizon: float) -> float | None:
    """Run ``walk`` with no events up to ``horizon``: every wait ending before it passes at
    once; return the first wait target at or after ``horizon`` (the walk is paused there), or
    ``None`` when the walk ended first."""
    for target in walk:
        if target >= horizon:
            return target
    return None
