"""Exceptions raised by dspsim. Everything a user can get wrong (a model key, a value, a size,
a file) raises a ``DspsimInputError`` (a ``ValueError``) whose one-line message names what was
wrong and what is allowed; the CLI prints it and exits 2."""

from __future__ import annotations


class DspsimInputError(ValueError):
    """Bad input: the message names the offending item and what is allowed."""


class ConfigError(DspsimInputError):
    """A model file or override is missing, malformed, unknown or out of range."""


class AllocationError(DspsimInputError):
    """A buffer does not fit the memory it was asked of (TCM bank pool or DDR)."""


def check_flags(**flags: object) -> None:
    """Refuse a switch that is not a bool (``reuse="no"`` would turn reuse on)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise DspsimInputError(f"{name} = {value!r:.40}: expected True or False")


class DeadlockError(RuntimeError):
    """The simulation ran out of events while processes were still waiting."""

    def __init__(self, waiting: list[str]):
        self.waiting = waiting
        super().__init__("simulation deadlocked: processes still waiting: " + ", ".join(waiting))

    def __reduce__(self) -> tuple:  # raised in a worker process, re-raised in its parent
        return type(self), (self.waiting,)


class WorkerError(RuntimeError):
    """A worker process died (killed, out of memory) or its result could not be sent back:
    the run it was part of is not complete."""
