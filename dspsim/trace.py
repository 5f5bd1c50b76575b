"""The trace recorder: one row per thing an engine did, turned into a DataFrame at the end.

Rows are plain tuples appended to a list while the simulation runs (nothing when tracing is
off); :meth:`Recorder.frame` builds one pandas DataFrame. Plots and exports read that frame,
never the simulator's internals.
"""

from __future__ import annotations

import pandas as pd

COLUMNS = [
    "engine",  # core, idma0, idma1, ...
    "kind",  # compute, setup, wait_in, wait_out, copy_in, copy_out
    "what",  # kernel name or transfer description
    "start_cycle",
    "end_cycle",
    "bytes",
    "tile",  # tile index within the pass, -1 when not a tile
    "pass",  # pass name (max, exp_sum, mul / max, exp, sum, mul)
    "buffer",  # TCM buffer (ping-pong index), -1 when none
    "ddr_stall_cycles",  # part of the row spent stalled on DDR (direct-mode kernels)
]


class Recorder:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.rows: list[tuple] = []

    def record(
        self,
        engine: str,
        kind: str,
        what: str,
        start: float,
        end: float,
        nbytes: int = 0,
        tile: int = -1,
        pass_name: str = "",
        buffer: int = -1,
        ddr_stall: float = 0.0,
    ) -> None:
        if self.enabled:
            self.rows.append(
                (engine, kind, what, start, end, nbytes, tile, pass_name, buffer, ddr_stall)
            )

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows, columns=COLUMNS)
        return df.astype({"bytes": "int64", "tile": "int64", "buffer": "int64"})
