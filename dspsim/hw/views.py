"""The platform as the repeat finder (:mod:`dspsim.hw.finder`) sees it: what it reads and
moves of a core and its platform (:class:`dspsim.platform.Dsp`,
:class:`~dspsim.platform.Platform`). Declared below the platform, so that the platform imports
the finder and never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dspsim.hw.context import RunContext
    from dspsim.hw.core import Core
    from dspsim.hw.idma import IdmaChannel
    from dspsim.hw.memory import Memory
    from dspsim.probes import Labels, PassLog


class PlatformView(Protocol):
    """The run's context, its memories (each behind its port), its cores, its warnings."""

    ctx: RunContext
    warnings: dict[str, dict[str, Any]]

    @property
    def memories(self) -> Mapping[str, Memory]: ...

    @property
    def dsps(self) -> Sequence[DspView]: ...


class DspView(Protocol):
    """One core as a loop on it is fast-forwarded: the core, its iDMA channels, the trace
    labels and passes of the op it runs, the tiles each pass has numbered so far."""

    platform: PlatformView
    core: Core
    labels: Labels
    passes: PassLog
    tiles_seen: dict[str, int]

    @property
    def idma(self) -> Sequence[IdmaChannel]: ...

    @property
    def move_data(self) -> bool: ...

    def untimed(self) -> AbstractContextManager[None]: ...
