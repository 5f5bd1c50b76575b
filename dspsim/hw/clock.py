"""Simulation time, and exact event elision.

**Time is an integer count of ticks**, :data:`~dspsim.ticks.TICKS_PER_CYCLE` to a core cycle.
The platform quantizes every latency, rate and cost of its model once, when it is built; the
engines add and compare integers, so ``t + k * d`` is ``t + d + ... + d`` exactly at any size,
and a run of alike steps may be booked in one step. Results are reported in cycles: a tick
count over a power of two, exact in a float below 2^53 ticks (2^29 cycles).

An access completing before the next event in SimPy's queue needs no event: nothing runs in
between, so a local clock advanced by the same integers gives the same times, bookings and
order. A process yields a real event only when its wait is not strictly before the queue's
next event (at an equal time the queued one runs first), and always yields one, at its local
clock's time, before doing anything another process can see (finish a copy, return).

This module is the only one touching SimPy's internals (queue, event counter, clock, a
process's pending event).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from heapq import heapify
from typing import Any

import simpy
from simpy.events import Event
from simpy.resources.base import Put


def at(env: simpy.Environment, t: int) -> simpy.Timeout:
    """The event processed at the absolute time ``t`` (>= ``env.now``)."""
    return env.timeout(t - env.now)


class WalkState:
    """A walk's local clock and its stalls (``store_stall``: the stores' part)."""

    __slots__ = ("now", "stall", "store_stall")

    def __init__(self, now: int):
        self.now = now
        self.stall = 0
        self.store_stall = 0


Walk = Generator[int, None, None]  # yields the absolute times (ticks) it waits until


def drive(env: simpy.Environment, walk: Walk, state: WalkState, elide: bool,
          before_wait: Callable[[], None] | None = None) -> Generator[Event, None, None]:
    """Run ``walk`` in a SimPy process: pass each wait if nothing else can act before
    (``elide``), else yield a real event (after ``before_wait``, which puts in place what
    others may see); its clock ``state.now`` at the wait's end; end with a real event."""
    target = next(walk, None)
    while target is not None:
        if not (elide and target < env.peek()):
            if before_wait is not None:
                before_wait()
            yield env.timeout(target - env.now)
        state.now = target
        target = next(walk, None)
    if state.now > env.now:
        if before_wait is not None:
            before_wait()
        yield env.timeout(state.now - env.now)


def events_scheduled(env: simpy.Environment) -> int:
    """How many events the environment has scheduled so far."""
    return next(env._eid)


def waits_on(process: simpy.Process | None) -> Event | None:
    """The event ``process`` waits for (``Process.target``; ``None`` for no process)."""
    return None if process is None else process.target


def put_into(event: Event) -> object | None:
    """The store a queued put ``event`` puts into (a FIFO), else ``None``."""
    return event.resource if isinstance(event, Put) else None


def split_queue(env: simpy.Environment, owner: Callable[[Event], Any]
                ) -> tuple[list[tuple[int, int, Any, Event]], tuple[int, int] | None]:
    """SimPy's queue split by ``owner(event)`` (``None``: foreign): the owned as ``(time,
    order, owner, event)`` in processing order, and the first foreign ``(time, order)``."""
    owned, foreign = [], None
    for when, _, eid, event in env._queue:
        who = owner(event)
        if who is not None:
            owned.append((when, eid, who, event))
        elif foreign is None or (when, eid) < foreign:
            foreign = (when, eid)
    owned.sort(key=lambda q: q[:2])
    return owned, foreign


def requeue(env: simpy.Environment, moves: dict[int, int]) -> None:
    """Move the queued events whose ``id`` is in ``moves`` to those times (same-time order kept)."""
    queue = env._queue
    for j, (_, prio, eid, event) in enumerate(queue):
        when = moves.get(id(event))
        if when is not None:
            queue[j] = (when, prio, eid, event)
    heapify(queue)


def set_now(env: simpy.Environment, t: int) -> None:
    """Advance SimPy's clock to ``t`` (the running process woke there, steps skipped)."""
    env._now = t


def event_heap(env: simpy.Environment) -> list:
    """SimPy's event heap (read-only): ``heap[0][0]`` is ``env.peek()`` without a call."""
    return env._queue
