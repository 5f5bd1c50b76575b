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

This module is the only one that touches SimPy's internals (its queue, its event counter, its
clock, a process's pending event): the fast-forwards read and move the queue through
:func:`queued`, :func:`requeue`, :func:`set_now`, :func:`waits_on` and :func:`put_into`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from heapq import heapify, heappush

import simpy
from simpy.events import NORMAL, Event
from simpy.resources.base import Put


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
    part of it the stores caused, ``store_stall``: the write buffer full, a store miss's
    line)."""

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
) -> Generator[Event, None, None]:
    """Run ``walk`` as (part of) a SimPy process body: each time it waits until ``target``,
    advance the local clock if nothing else can act before (``elide``), else yield a real event
    at ``target`` (``before_wait`` runs first: what others may look at must be in place). The
    walk ends where everyone can see it: a real event at its local time."""
    target = next(walk, None)
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


def spawn(env: simpy.Environment, generator: Generator) -> simpy.Process:
    """``generator`` started as a process of its own."""
    return env.process(generator)


def waits_on(process: simpy.Process | None) -> Event | None:
    """The event ``process`` waits for (its wake-up; SimPy's ``Process.target``); ``None``
    for no process. The fast-forwards find a walk's pending wake-up in the queue by it."""
    return None if process is None else process.target


def put_into(event: Event) -> object | None:
    """The store or resource a queued put ``event`` puts into (a descriptor just queued on a
    channel's FIFO); ``None`` for any other event."""
    return event.resource if isinstance(event, Put) else None


def queued(env: simpy.Environment) -> list[tuple[float, int, Event]]:
    """The events in SimPy's queue as ``(time, order, event)``, in no particular order (the
    fast-forward of :mod:`dspsim.hw.periodic` reads who waits until when)."""
    return [(when, eid, event) for when, _, eid, event in env._queue]


def requeue(env: simpy.Environment, moves: dict[int, float]) -> None:
    """Move the queued events whose ``id`` is in ``moves`` to the times given, keeping their
    place in the order among events at one time (their ``eid``)."""
    queue = env._queue
    for j, (_, prio, eid, event) in enumerate(queue):
        when = moves.get(id(event))
        if when is not None:
            queue[j] = (when, prio, eid, event)
    heapify(queue)


def set_now(env: simpy.Environment, t: float) -> None:
    """Advance SimPy's clock to ``t`` (the running process woke there, skipped steps later)."""
    env._now = t


def event_heap(env: simpy.Environment) -> list:
    """SimPy's event heap itself (read-only): ``heap[0][0]`` is the next event's time, what
    ``env.peek()`` returns, read without a call in a walk's inner loop."""
    return env._queue
